"""Env-steps/s of a registered task's play config under random actions: what the benchmarks time.

:func:`env_step_rate` runs a warm-up rollout (kernels compiled, every taped record made), then a timed rollout of
``steps`` policy steps of ``num_envs`` envs, forward only (``no_grad``: PPO's collection) or forward + backward (the
rollout taped, then the backward pass of its summed rewards: SHAC's actor update). Actions are ``tanh`` of
``0.3 N(0, 1)`` draws (seeded), as a squashed policy's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from . import registry


def env_step_rate(task: str, num_envs: int, steps: int, backward: bool,
                  edit: Callable[[object], None] | None = None) -> float:
    """Env-steps/s of ``task`` (its play config, ``num_envs`` envs, ``edit`` applied to the config first)."""
    cfg = registry.load_play_cfg(task)
    cfg.num_envs = num_envs
    if edit is not None:
        edit(cfg)
    env = registry.make_env(task, cfg)
    gen = torch.Generator().manual_seed(0)
    actions = 0.3 * torch.randn(2 * steps, num_envs, env.num_actions, generator=gen)
    with torch.set_grad_enabled(backward):
        warm = actions[:steps].clone().requires_grad_(backward)
        total = sum(env.step(torch.tanh(a))[1].sum() for a in warm)
        if backward:
            total.backward()
    env.detach_state()
    start = time.perf_counter()
    with torch.set_grad_enabled(backward):
        params = actions[steps:].clone().requires_grad_(backward)
        total = 0.0
        for a in params:
            _, reward, _, _ = env.step(torch.tanh(a))
            total = total + reward.sum()
        if backward:
            total.backward()
    return num_envs * steps / (time.perf_counter() - start)
