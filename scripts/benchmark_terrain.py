"""Benchmark: env-steps/s of the velocity task on generated rough terrain against flat ground, in one process.

For each env count: rollouts of ``--steps`` policy steps of the play configs of ``DiffLoco-Velocity-Flat-AnymalD``
(the reference) and ``DiffLoco-Velocity-Rough-AnymalD`` (Isaac Lab's play terrain, 5 x 5 tiles: the height field in
the contact and collision-body queries, the 187-point height scan, foot heights above the local ground) under random
actions, forward only (PPO's collection) and forward + backward (SHAC's actor update), the simulator in float32 on
one core. Prints env-steps/s and the rough task's ratio to flat ground per env count.

    .venv/bin/python scripts/benchmark_terrain.py [--num_envs 64 256] [--steps 16]

Counts below 1 are one-line errors.
"""

from __future__ import annotations

import argparse
import sys

import torch

from diffloco_ext.tasks.step_rate import env_step_rate

TASKS = (("flat", "DiffLoco-Velocity-Flat-AnymalD"), ("rough", "DiffLoco-Velocity-Rough-AnymalD"))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_envs", type=_positive, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=_positive, default=16, help="policy steps per rollout")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = {}
    print(f"{'envs':>5s} {'ground':8s} {'forward':>18s} {'forward+backward':>22s}")
    for n in args.num_envs:
        rows = {label: (env_step_rate(task, n, args.steps, False), env_step_rate(task, n, args.steps, True))
                for label, task in TASKS}
        ref = rows["flat"]
        for label, (fwd, both) in rows.items():
            print(f"{n:5d} {label:8s} {fwd:9.0f} ({fwd / ref[0]:4.2f}x) {both:12.0f} ({both / ref[1]:4.2f}x)")
        results[n] = rows
    return results


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
