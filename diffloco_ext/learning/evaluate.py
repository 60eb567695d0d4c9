"""Deterministic evaluation of a policy on a vectorised env (used by the comparison script and the tests)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict


@torch.no_grad()
def evaluate_return(make_env: Callable[[], VecEnv], policy: Callable[[TensorDict], torch.Tensor]) -> float:
    """Mean undiscounted return of the first episode of every env of a freshly built env.

    ``make_env`` should build the env with a fixed seed so that all policies are evaluated from the same initial
    states. Runs ``max_episode_length`` steps; rewards after an env's first done are ignored.
    """
    env = make_env()
    obs = env.get_observations()
    total = torch.zeros(env.num_envs, device=env.device)
    alive = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    for _ in range(int(env.max_episode_length)):
        obs, rewards, dones, _ = env.step(policy(obs))
        total += torch.where(alive, rewards, torch.zeros_like(rewards))
        alive &= ~dones.to(torch.bool)
        if not bool(alive.any()):
            break
    return float(total.mean())
