"""SHAC against rsl_rl's PPO per iteration and per sample, in one process on one core: what a wall-clock comparison
of the two learners is made of on this machine.

Both learners train ``DiffLoco-Velocity-Flat-AnymalD``'s recipe (its registered configs; PPO without the gradient
adversary, which needs the simulator's gradient, as ``--algo ppo`` trains it) and the env counts of one rank of the
comparison runs (SHAC 128 envs x 32 steps, PPO 512 x 24: two such ranks make the project's 2 x 128 and 2 x 512).
Interleaved rounds, each ``--iterations`` iterations of SHAC then of PPO (after ``--warmup`` iterations of each,
which compile and record the simulator's graphs), timed on the wall clock; between the learners' rounds,
``--iterations`` untaped rollouts of SHAC's envs x steps time the simulator and the task alone (random actions, no
gradient: the floor any learner pays per sample). Prints per round and, from the best round of each, the ratios::

    .venv/bin/python scripts/benchmark_learners.py --rounds 3 --iterations 5

The figure a sample-count comparison turns on: ``ppo samples/s / shac samples/s``. A SHAC run needs that many
times fewer samples than PPO to match it on the wall clock, and ten times that for the task issue's 10x less
wall-clock. Both learners run in the curriculum's first iterations here (the iterations after the curriculum cost
~15 % more for SHAC), with the torch threads set to 1 (Warp's CPU kernels run on one core). Counts below 1 are
one-line errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from diffloco_ext.learning.cli import add_common_args, load_configs, positive_int
from diffloco_ext.learning.runner import make_runner
from diffloco_ext.tasks import registry

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def build(algo: str, num_envs: int, seed: int, extra: list[str]):
    """A runner without logging (``log_dir`` None) for ``algo`` on the task's recipe, as ``scripts/train.py`` builds
    it."""
    parser = argparse.ArgumentParser()
    add_common_args(parser)
    args = parser.parse_args(["--task", TASK, "--algo", algo, "--num_envs", str(num_envs), "--seed", str(seed),
                              *extra])
    env_cfg, agent_cfg = load_configs(args)
    env = registry.make_env(TASK, env_cfg)
    return make_runner(env, agent_cfg, log_dir=None, device="cpu"), env_cfg


def time_learner(runner, iterations: int, first: bool) -> float:
    """Wall-clock seconds per iteration of ``iterations`` learning iterations."""
    start = time.perf_counter()
    runner.learn(num_learning_iterations=iterations, init_at_random_ep_len=first)
    return (time.perf_counter() - start) / iterations


def time_rollout(env, steps: int, iterations: int) -> float:
    """Wall-clock seconds per ``steps``-step untaped rollout (random actions in [-1, 1]) of ``env``."""
    generator = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(iterations):
            for _ in range(steps):
                env.step(2 * torch.rand(env.num_envs, env.num_actions, generator=generator) - 1)
    return (time.perf_counter() - start) / iterations


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--iterations", type=positive_int, default=5, help="timed iterations per learner and round")
    parser.add_argument("--warmup", type=positive_int, default=2, help="untimed iterations of each learner first")
    parser.add_argument("--shac_envs", type=positive_int, default=128)
    parser.add_argument("--ppo_envs", type=positive_int, default=512)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    shac, shac_env_cfg = build("shac", args.shac_envs, args.seed, [])
    shac_env = registry.make_env(TASK, shac_env_cfg)  # the rollouts' own envs: the learner's keep their schedule
    ppo, _ = build("ppo", args.ppo_envs, args.seed, [])
    shac_steps = int(shac.cfg["num_steps_per_env"])
    ppo_steps = int(ppo.cfg["num_steps_per_env"])
    shac_samples, ppo_samples = args.shac_envs * shac_steps, args.ppo_envs * ppo_steps
    print(f"[benchmark] SHAC {args.shac_envs} envs x {shac_steps} steps = {shac_samples} samples per iteration; "
          f"PPO {args.ppo_envs} x {ppo_steps} = {ppo_samples}; {args.rounds} rounds of {args.iterations} "
          f"iterations after {args.warmup} of warm-up", flush=True)
    time_learner(shac, args.warmup, True)
    time_learner(ppo, args.warmup, True)
    time_rollout(shac_env, shac_steps, 1)

    rows = []
    for r in range(args.rounds):
        t_shac = time_learner(shac, args.iterations, False)
        t_sim = time_rollout(shac_env, shac_steps, args.iterations)
        t_ppo = time_learner(ppo, args.iterations, False)
        row = {"round": r, "shac_s_per_it": t_shac, "ppo_s_per_it": t_ppo, "rollout_s": t_sim,
               "shac_samples_per_s": shac_samples / t_shac, "ppo_samples_per_s": ppo_samples / t_ppo,
               "rollout_samples_per_s": shac_samples / t_sim}
        rows.append(row)
        print(f"round {r}: SHAC {t_shac:.3f} s/it ({row['shac_samples_per_s']:,.0f} samples/s), PPO {t_ppo:.3f} s/it "
              f"({row['ppo_samples_per_s']:,.0f} samples/s), untaped rollout of SHAC's batch {t_sim:.3f} s "
              f"({row['rollout_samples_per_s']:,.0f} samples/s); PPO / SHAC samples/s "
              f"{row['ppo_samples_per_s'] / row['shac_samples_per_s']:.2f}", flush=True)

    best = {"shac_s_per_it": min(r["shac_s_per_it"] for r in rows),
            "ppo_s_per_it": min(r["ppo_s_per_it"] for r in rows), "rollout_s": min(r["rollout_s"] for r in rows)}
    best["shac_samples_per_s"] = shac_samples / best["shac_s_per_it"]
    best["ppo_samples_per_s"] = ppo_samples / best["ppo_s_per_it"]
    best["rollout_samples_per_s"] = shac_samples / best["rollout_s"]
    ratio = best["ppo_samples_per_s"] / best["shac_samples_per_s"]
    summary = {"shac_envs": args.shac_envs, "shac_steps": shac_steps, "ppo_envs": args.ppo_envs,
               "ppo_steps": ppo_steps, "rounds": rows, "best": best, "ppo_over_shac_samples_per_s": ratio,
               "shac_over_rollout_time_per_sample": best["rollout_samples_per_s"] / best["shac_samples_per_s"],
               "ppo_over_rollout_time_per_sample": best["rollout_samples_per_s"] / best["ppo_samples_per_s"]}
    print(f"[benchmark] best rounds: SHAC {best['shac_s_per_it']:.3f} s/it, PPO {best['ppo_s_per_it']:.3f} s/it "
          f"(Schwarke et al. on a GPU: 0.33 / 0.18 s); per sample SHAC costs {ratio:.2f}x PPO, "
          f"{summary['shac_over_rollout_time_per_sample']:.2f}x an untaped rollout (PPO "
          f"{summary['ppo_over_rollout_time_per_sample']:.2f}x). SHAC matches PPO's wall-clock with {ratio:.1f}x "
          f"fewer samples, and needs {10 * ratio:.0f}x fewer for 10x less wall-clock.", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
