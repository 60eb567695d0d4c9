"""Benchmark: env-steps/s of the velocity task on the aligned step (MuJoCo forward, a surrogate backward) against the
smoothed Warp simulator (the main job's physics) and plain MuJoCo, in one process.

For each env count: rollouts of ``--steps`` policy steps of ``DiffLoco-Velocity-Flat-AnymalD``'s interface (the
play config: no randomisation) under random actions, forward only (``no_grad``: PPO's collection) and forward +
backward (the rollout taped, then the backward pass of its summed rewards: SHAC's actor update), for
* ``warp smoothed``: the differentiable simulator, float32 (the reference the ratios are against),
* ``aligned simplified`` and ``aligned smoothed``: the aligned step with each surrogate (float64 states),
* ``mujoco``: the MuJoCo engine's step alone (forward only; no task around it).
MuJoCo uses ``--threads`` rollout threads; torch and Warp one thread. Prints env-steps/s and the ratio to the
reference per env count.

    .venv/bin/python scripts/benchmark_aligned_step.py [--num_envs 1 64 256] [--steps 16] [--threads 2]

Counts below 1 are one-line errors.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from diffloco_ext.sim.mujoco_engine import MujocoEngine
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.step_rate import env_step_rate

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def env_rate(num_envs: int, steps: int, backward: bool, engine: str, surrogate: str, threads: int) -> float:
    """Env-steps/s of a rollout of the task (and its backward pass with ``backward``) on ``engine``."""

    def edit(cfg):
        cfg.sim.engine, cfg.sim.surrogate, cfg.sim.engine_threads = engine, surrogate, threads

    return env_step_rate(TASK, num_envs, steps, backward, edit)


def mujoco_rate(num_envs: int, steps: int, threads: int) -> float:
    """Env-steps/s of the MuJoCo engine alone (8 MuJoCo steps a policy step, the drive model in the loop)."""
    cfg = registry.load_play_cfg(TASK)
    cfg.num_envs = num_envs
    env = registry.make_env(TASK, cfg)
    engine = MujocoEngine(env.robot, num_envs, threads=threads)
    q, u = env.q.double().numpy(), env.u.double().numpy()
    target = env.joint_targets(torch.zeros(num_envs, env.num_actions, dtype=env.dtype)).double().numpy()
    engine.step(q, u, target)
    start = time.perf_counter()
    for _ in range(steps):
        out = engine.step(q, u, target)
        q, u = out.q, out.u
    return num_envs * steps / (time.perf_counter() - start)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_envs", type=_positive, nargs="+", default=[1, 64, 256])
    parser.add_argument("--steps", type=_positive, default=16, help="policy steps per rollout")
    parser.add_argument("--threads", type=_positive, default=2, help="MuJoCo's rollout threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = {}
    print(f"{'envs':>5s} {'physics':20s} {'forward':>18s} {'forward+backward':>22s}")
    for n in args.num_envs:
        rows = {}
        for label, engine, surrogate in (("warp smoothed", "warp", "simplified"),
                                         ("aligned simplified", "mujoco", "simplified"),
                                         ("aligned smoothed", "mujoco", "smoothed")):
            rows[label] = (env_rate(n, args.steps, False, engine, surrogate, args.threads),
                           env_rate(n, args.steps, True, engine, surrogate, args.threads))
        rows["mujoco"] = (mujoco_rate(n, args.steps, args.threads), None)
        ref = rows["warp smoothed"]
        for label, (fwd, both) in rows.items():
            both_text = "-" if both is None else f"{both:9.0f} ({both / ref[1]:4.2f}x)"
            print(f"{n:5d} {label:20s} {fwd:9.0f} ({fwd / ref[0]:4.2f}x) {both_text:>22s}")
        results[n] = rows
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
