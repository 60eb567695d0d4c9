"""The differentiable vectorised-environment protocol SHAC trains on: defined with the tasks
(:mod:`diffloco_ext.tasks.vec_env`), which implement it; re-exported here for the learners."""

from diffloco_ext.tasks.vec_env import FINAL_OBS_KEY, TIME_OUTS_KEY, DiffVecEnv, is_differentiable_env, split_dones

__all__ = ["FINAL_OBS_KEY", "TIME_OUTS_KEY", "DiffVecEnv", "is_differentiable_env", "split_dones"]
