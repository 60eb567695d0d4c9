"""List the registered diffloco tasks with their configs and learners.

    .venv/bin/python scripts/list_envs.py
"""

from __future__ import annotations

import gymnasium as gym

from diffloco_ext.tasks import TASKS


def main() -> None:
    print(f"{'task':34s} {'learners':10s} env config")
    for task_id in TASKS:
        kwargs = gym.spec(task_id).kwargs
        learners = ",".join(name for name, key in (("shac", "shac_cfg_entry_point"), ("ppo", "rsl_rl_cfg_entry_point"))
                            if key in kwargs)
        print(f"{task_id:34s} {learners:10s} {kwargs['env_cfg_entry_point']}")


if __name__ == "__main__":
    main()
