"""List the registered diffloco tasks with their learners and env configs.

    .venv/bin/python scripts/list_envs.py

One line per task id (what ``--task`` of train.py, play.py and validate.py takes): the learners it has a config
for (``shac``: the differentiable simulator's SHAC; ``ppo``: rsl_rl's PPO) and its env config's entry point.
"""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym

from diffloco_ext.tasks import TASKS


def main(argv: list[str] | None = None) -> list[str]:
    """Print the table; returns the task ids."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    print(f"{'task':34s} {'learners':10s} env config")
    for task_id in TASKS:
        kwargs = gym.spec(task_id).kwargs
        learners = ",".join(name for name, key in (("shac", "shac_cfg_entry_point"), ("ppo", "rsl_rl_cfg_entry_point"))
                            if key in kwargs)
        print(f"{task_id:34s} {learners:10s} {kwargs['env_cfg_entry_point']}")
    return list(TASKS)


if __name__ == "__main__":
    main(sys.argv[1:])
