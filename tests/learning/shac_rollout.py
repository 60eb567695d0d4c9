"""A SHAC horizon driven by hand (the runner's loop without the update), for tests that look inside an iteration."""

from __future__ import annotations


def run_horizon(env, alg, steps: int = 8) -> None:
    """Detach the env, act ``steps`` times through ``alg`` and compute its returns (ready for ``alg.update()``)."""
    env.detach_state()
    obs = env.get_observations()
    for _ in range(steps):
        obs, r, d, extras = env.step(alg.act(obs))
        alg.process_env_step(obs, r, d, extras)
    alg.compute_returns(obs)
