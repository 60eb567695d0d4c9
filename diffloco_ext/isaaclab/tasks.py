"""Registration of the Isaac Lab versions of the project's tasks (``DiffLoco-*-Isaac``), with gymnasium.

Imported by every ``isaaclab`` command (``list_envs``, ``train``, ``play``, ...) through the ``isaaclab.tasks``
entry-point group (``setup.py``): it imports nothing but gymnasium (string entry points), so that it cannot break
those commands, and it imports no Isaac Lab module itself.

| id | project task | env config |
| --- | --- | --- |
| ``DiffLoco-Velocity-Flat-AnymalD-Isaac`` | ``DiffLoco-Velocity-Flat-AnymalD`` | ``env_cfg.AnymalDFlatIsaacEnvCfg`` |
| ``DiffLoco-Velocity-Flat-AnymalC-Isaac`` | ``DiffLoco-Velocity-Flat-AnymalC`` | ``env_cfg.AnymalCFlatIsaacEnvCfg`` |

Each carries ``env_cfg_entry_point``, ``rsl_rl_cfg_entry_point`` (PPO, Isaac Lab's default agent) and
``rsl_rl_shac_cfg_entry_point`` (playing a checkpoint of the project's SHAC, see :mod:`.agents`).
"""

import gymnasium as gym

_PKG = "diffloco_ext.isaaclab"

ISAAC_TASKS = {
    "DiffLoco-Velocity-Flat-AnymalD-Isaac": dict(
        env_cfg_entry_point=f"{_PKG}.env_cfg:AnymalDFlatIsaacEnvCfg",
        rsl_rl_cfg_entry_point=f"{_PKG}.agents:AnymalDFlatPPORunnerCfg",
        rsl_rl_shac_cfg_entry_point=f"{_PKG}.agents:AnymalDFlatSHACPlayRunnerCfg",
        default_agent="rsl_rl",
    ),
    "DiffLoco-Velocity-Flat-AnymalC-Isaac": dict(
        env_cfg_entry_point=f"{_PKG}.env_cfg:AnymalCFlatIsaacEnvCfg",
        rsl_rl_cfg_entry_point=f"{_PKG}.agents:AnymalCFlatPPORunnerCfg",
        rsl_rl_shac_cfg_entry_point=f"{_PKG}.agents:AnymalCFlatSHACPlayRunnerCfg",
        default_agent="rsl_rl",
    ),
}

#: The differentiable task each Isaac Lab task mirrors.
PROJECT_TASK = {task_id: task_id.removesuffix("-Isaac") for task_id in ISAAC_TASKS}

for _task_id, _kwargs in ISAAC_TASKS.items():
    if _task_id not in gym.registry:
        gym.register(id=_task_id, entry_point="isaaclab.envs:ManagerBasedRLEnv", disable_env_checker=True,
                     kwargs=dict(_kwargs))
