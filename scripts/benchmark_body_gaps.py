"""Benchmark: the collision-body gaps inside the bridge's (replayed) step against the same gaps computed after it.

A locomotion task reads every collision body's gap at the end of each policy step (terminations on base contact,
the undesired-contact penalty). Computed after the step (``body_gaps_torch(bridge, out.q)``, the reference) they
are ordinary Warp launches with their Python each step, forward and backward; computed inside the step
(``StepOutput.body_gap``) they are part of the taped step's recorded graphs and replay with it. Both on the same
rollouts in one process, interleaved rounds: a taped rollout of ``--steps`` policy steps (``--substeps`` physics
steps each, smoothed contact) and its backward pass, the loss reading the gaps as the task does, and the untaped
rollout (PPO's collection, evaluation). Prints seconds per policy step of each and the ratio reference / inside.

    .venv/bin/python scripts/benchmark_body_gaps.py [--num-envs 128] [--steps 32] [--rounds 3] [--threads 1]

Counts below 1 are one-line errors.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.body_contacts import body_gaps_torch
from diffloco_ext.sim.torch_bridge import TorchSimulator


def rollout_seconds(bridge: TorchSimulator, steps: int, inside: bool, backward: bool) -> float:
    """Seconds per policy step of a rollout reading the body gaps inside the step or after it."""
    m = bridge.sim.model
    q0 = torch.tensor(m.default_q(), dtype=bridge.dtype)
    u0 = torch.zeros(m.num_envs, m.nv, dtype=bridge.dtype)
    gen = torch.Generator().manual_seed(0)
    actions = 0.3 * torch.randn(steps, m.num_envs, m.num_joints, generator=gen, dtype=bridge.dtype)
    start = time.perf_counter()
    with torch.set_grad_enabled(backward):
        actions.requires_grad_(backward)
        q, u, loss = q0, u0, 0.0
        for t in range(steps):
            out = bridge.step(q, u, q0[:, 7:] + actions[t])
            gaps = out.body_gap if inside else body_gaps_torch(bridge, out.q)
            q, u = out.q, out.u
            loss = loss + torch.relu(0.05 - gaps).square().sum() + 1e-3 * q.square().sum()
        if backward:
            loss.backward()
    return (time.perf_counter() - start) / steps


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns ``{backward: {inside: seconds per policy step}}`` (best of the rounds)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, default=128)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--substeps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the main job's ranks use one)")
    args = parser.parse_args(argv)
    small = [f"--{name.replace('_', '-')} {value}" for name, value in vars(args).items() if value < 1]
    if small:
        parser.error(f"{', '.join(small)}: every count must be at least 1")
    torch.set_num_threads(args.threads)
    model = build_model(get_robot("anymal_d"), args.num_envs, dtype="float32")
    sim = Simulator(model, dt=0.005, contact="smoothed", substeps=args.substeps)
    # inside: a bridge that computes them in its step; after: one that does not (StepOutput.body_gap is None)
    bridges = {True: TorchSimulator(sim, body_gaps=True), False: TorchSimulator(sim)}
    results = {}
    for backward in (True, False):
        for inside in (True, False):  # warm-up: records, graphs, kernels
            rollout_seconds(bridges[inside], args.steps, inside, backward)
        best = {True: float("inf"), False: float("inf")}
        for _ in range(args.rounds):
            for inside in (True, False):
                best[inside] = min(best[inside], rollout_seconds(bridges[inside], args.steps, inside, backward))
        results[backward] = best
    print(f"anymal_d, {args.num_envs} envs, {args.substeps} substeps per policy step, smoothed contact, float32, "
          f"best of {args.rounds} rounds (ms per policy step)")
    print(f"{'rollout':<22} {'gaps after the step':>20} {'gaps inside':>12} {'ratio':>7}")
    for backward, name in ((True, "taped, fwd + bwd"), (False, "untaped")):
        after, inside = results[backward][False], results[backward][True]
        print(f"{name:<22} {1e3 * after:>20.2f} {1e3 * inside:>12.2f} {after / inside:>7.2f}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
