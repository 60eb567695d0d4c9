"""The closed-loop evaluation samples the full command ranges, whatever curriculum the training config carries."""

from __future__ import annotations

import numpy as np
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim.config import SimCfg
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg
from diffloco_ext.validation.backends import SimBackend
from diffloco_ext.validation.closed_loop import evaluate_velocity_tracking


def test_a_training_curriculum_does_not_narrow_the_validation_commands():
    robot = get_robot("anymal_d")
    n = 16
    cfg = SimCfg(dt=0.005, substeps=4, contact=ContactParams("hard"))
    model = cfg.build_model(robot, n)
    commands = CommandsCfg(curriculum_initial_scale=0.1, curriculum_steps=10_000, heading_command=False,
                           rel_standing_envs=0.0)

    def zero_policy(obs):
        return torch.zeros(obs.shape[0], 12)

    stats = evaluate_velocity_tracking(SimBackend(robot, n, cfg), zero_policy, robot, model, episodes=n,
                                       episode_length_s=0.1, commands=commands, record=True)
    cmd = np.abs(stats.traces["command"][0])  # [N, 3] at the first step
    assert cmd[:, 0].max() > 0.5 and cmd[:, 2].max() > 0.5  # 16 uniform draws in [-1, 1]: all below 0.1 if narrowed
    assert commands.curriculum_initial_scale == 0.1  # the caller's config is left as it was
