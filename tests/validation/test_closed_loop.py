"""The closed-loop runner: random commands over the full ranges whatever curriculum the training config carries,
and the gate sums of a standing robot."""

from __future__ import annotations

import dataclasses

import torch

from diffloco_ext.validation.closed_loop import TaskInterface, _Group

from .scenario_files import make_config


def test_a_training_curriculum_does_not_narrow_the_validation_commands(tmp_path):
    task = TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD")
    task.env_cfg.commands = dataclasses.replace(task.env_cfg.commands, curriculum_initial_scale=0.1,
                                                curriculum_steps=10_000, rel_standing_envs=0.0)
    config = make_config(tmp_path, scenarios=[{"name": "random", "episodes": 16, "seeds": [0]}])
    group = _Group(config.scenario("random"), 0, list(range(16)), task.env_cfg.commands)
    group.command(0.0, torch.zeros(16, dtype=torch.float64), task.policy_dt)
    drawn = group.commands.command.abs()
    assert drawn[:, 0].max() > 0.5 and drawn[:, 1].max() > 0.5  # 16 draws in [-1, 1]: all below 0.1 if narrowed
    assert group.commands.cfg.heading_command  # the task's own generator settings otherwise
    assert task.env_cfg.commands.curriculum_initial_scale == 0.1  # the task's config is left as it was
