"""Velocity-task envs for the ``test_velocity_*`` files: small float64 (or float32) envs of the task's interface
(:class:`VelocityEnvCfg`, ANYmal D; not the training recipe of ``AnymalDFlatEnvCfg``), and the adversary's."""

from __future__ import annotations

import torch

from diffloco_ext.tasks.velocity.env import VelocityEnv
from diffloco_ext.tasks.velocity.env_cfg import VelocityEnvCfg

ISAACLAB_ORDER = [f"{leg}_{kind}" for kind in ("HAA", "HFE", "KFE") for leg in ("LF", "LH", "RF", "RH")]


def task_cfg(num_envs: int, seed: int = 3) -> VelocityEnvCfg:
    """The task's interface and defaults, ANYmal D, ``num_envs`` envs."""
    return VelocityEnvCfg(robot="anymal_d", num_envs=num_envs, seed=seed)


def make_env(num_envs=4, dtype="float64", noise=False, randomize=True, heading=True, **sim) -> VelocityEnv:
    cfg = task_cfg(num_envs)
    cfg.commands.heading_command = heading
    cfg.sim.dtype = dtype
    cfg.observation_noise.enable = noise
    cfg.randomization.enable = randomize
    for k, v in sim.items():
        setattr(cfg.sim, k, v)
    return VelocityEnv(cfg)


def exact_env(num_envs: int, **randomization) -> VelocityEnv:
    """Float64, no noise, no heading control, no gradient clip (the exact gradient), the given ``randomization``
    fields set."""
    cfg = task_cfg(num_envs)
    cfg.sim.dtype = "float64"
    cfg.observation_noise.enable = False
    cfg.commands.heading_command = False
    for key, value in randomization.items():
        setattr(cfg.randomization, key, value)
    env = VelocityEnv(cfg)
    env.cfg.grad_clip_relative = None
    return env


def adversarial_env(num_envs: int, fraction: float = 1.0) -> VelocityEnv:
    """:func:`exact_env` with the adversary on ``fraction`` of the envs, settled on the ground."""
    env = exact_env(num_envs, adversarial_fraction=fraction)
    with torch.no_grad():
        for _ in range(30):  # dropped from 0.65 m: on its feet after ~0.5 s
            env.step(torch.zeros(num_envs, 12, dtype=torch.float64))
    return env


def return_through(env: VelocityEnv, actions) -> torch.Tensor:
    """The summed rewards of ``env`` stepped with each of ``actions``."""
    total = 0.0
    for a in actions:
        total = total + env.step(a)[1].sum()
    return total
