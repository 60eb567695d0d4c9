"""Env-steps/s of the velocity task: Isaac Lab (PhysX or Newton) vs the project's differentiable simulator, same
task, same env count, the same random actions (uniform in [-1, 1]); one env-step = one policy step (0.02 s, 4
physics steps), with observations, rewards and resets. Warm-up steps (kernel compiles, first contacts) are not
timed. One engine per process (Isaac Lab keeps one simulation per process)::

    python -m diffloco_ext.isaaclab.benchmark --engine physx --num_envs 16 --steps 100
    python -m diffloco_ext.isaaclab.benchmark --engine newton --num_envs 16 --steps 100
    python -m diffloco_ext.isaaclab.benchmark --engine diffloco --num_envs 16 --steps 100   # no gradients
"""

from __future__ import annotations

import argparse
import json
import time

import torch

ENGINES = ("physx", "newton", "diffloco")


def _isaaclab_env(engine: str, num_envs: int):
    import gymnasium as gym

    from . import tasks  # noqa: F401
    from .env_cfg import AnymalDFlatIsaacEnvCfg

    cfg = AnymalDFlatIsaacEnvCfg()
    cfg.scene.num_envs = num_envs
    cfg.sim.device = "cpu"
    cfg.sim.physics = cfg.sim.physics.physx if engine == "physx" else cfg.sim.physics.newton_mjwarp
    env = gym.make("DiffLoco-Velocity-Flat-AnymalD-Isaac", cfg=cfg).unwrapped
    env.reset()
    return env, lambda a: env.step(a)


def _diffloco_env(num_envs: int):
    from diffloco_ext.tasks.registry import load_cfg, make_env

    cfg = load_cfg("DiffLoco-Velocity-Flat-AnymalD")
    cfg.num_envs = num_envs
    env = make_env("DiffLoco-Velocity-Flat-AnymalD", cfg)
    return env, lambda a: env.step(a)


def measure(engine: str, num_envs: int, steps: int, warmup: int = 10) -> dict:
    """``{"engine", "num_envs", "steps", "env_steps_per_s"}``."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got '{engine}'")
    env, step = _diffloco_env(num_envs) if engine == "diffloco" else _isaaclab_env(engine, num_envs)
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for _ in range(warmup):
            step(2 * torch.rand(num_envs, 12, generator=generator) - 1)
        start = time.perf_counter()
        for _ in range(steps):
            step(2 * torch.rand(num_envs, 12, generator=generator) - 1)
        elapsed = time.perf_counter() - start
    return {"engine": engine, "num_envs": num_envs, "steps": steps, "env_steps_per_s": num_envs * steps / elapsed}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.engine, args.num_envs, args.steps)))


if __name__ == "__main__":
    main()
