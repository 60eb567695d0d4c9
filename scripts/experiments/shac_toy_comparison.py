"""SHAC vs PPO (rsl_rl) on a differentiable toy task: samples and wall-clock to a "solved" return.

Both learners train on the same torch env (SHAC differentiates through it; PPO uses it as an ordinary rsl_rl env).
Every ``--eval-every`` iterations the deterministic policy is evaluated on a separate env with fixed initial states
(64 envs, one full episode each); the first evaluation with mean return >= the threshold stops the run. Counted:
environment steps used for training and training wall-clock (evaluation excluded from both).

Tasks (``--task``):

- ``pointmass`` (default): :class:`~diffloco_ext.learning.toy_envs.PointMassEnv` in ``--dim`` = 8 dimensions
  (8 actions, the size class of a legged robot's 12), 100-step episodes, termination outside the arena.
  Solved: return >= 90 (a trained policy reaches about 94, the untrained one about 30-77).
- ``pendulum``: :class:`~diffloco_ext.learning.toy_envs.PendulumSwingUpEnv`, 200-step episodes. Solved: >= -150
  (trained about -115, untrained about -800).

Configurations: SHAC with the DiffRL defaults except 16 envs (h = 32); PPO with rsl_rl/Isaac Lab locomotion
defaults and 16 envs x 32 steps, its most sample-efficient batch among those tried (16, 32, 64, 256 envs; see
docs/learning.md).

Usage::

    .venv/bin/python scripts/experiments/shac_toy_comparison.py                    # 8-D point mass, 3 seeds
    .venv/bin/python scripts/experiments/shac_toy_comparison.py --task pendulum --seeds 0 1
    # a smoke run of seconds: one seed, small sample budgets (the threshold is then rarely reached)
    .venv/bin/python scripts/experiments/shac_toy_comparison.py --seeds 0 --shac-max-samples 2560 \\
        --ppo-max-samples 2560
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from dataclasses import dataclass

import torch

from diffloco_ext.learning.config import PPORunnerCfg, SHACRunnerCfg
from diffloco_ext.learning.evaluate import evaluate_return
from diffloco_ext.learning.runner import make_runner
from diffloco_ext.learning.toy_envs import PendulumSwingUpCfg, PendulumSwingUpEnv, PointMassCfg, PointMassEnv

#: Mean evaluation return counted as "solved", per task.
SOLVED_RETURN = {"pointmass": 90.0, "pendulum": -150.0}
EVAL_SEED = 12345


@dataclass
class Result:
    algorithm: str
    seed: int
    solved: bool
    samples: int
    seconds: float
    iterations: int
    final_return: float


@dataclass
class Setup:
    task: str = "pointmass"
    dim: int = 8
    shac_envs: int = 16
    ppo_envs: int = 16
    horizon: int = 32

    def make_env(self, num_envs: int, seed: int):
        if self.task == "pendulum":
            return PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=num_envs, seed=seed))
        return PointMassEnv(PointMassCfg(num_envs=num_envs, seed=seed, dim=self.dim))

    def eval_env(self):
        return self.make_env(64, EVAL_SEED)

    def learner(self, name: str, seed: int):
        if name == "SHAC":
            return SHACRunnerCfg(seed=seed, max_iterations=200, num_steps_per_env=self.horizon), self.make_env(
                self.shac_envs, seed)
        return PPORunnerCfg(seed=seed, num_steps_per_env=self.horizon), self.make_env(self.ppo_envs, seed)


def train_to_threshold(setup: Setup, name: str, seed: int, threshold: float, max_samples: int, eval_every: int,
                       quiet: bool = True) -> Result:
    """Train one learner until the evaluation return reaches ``threshold`` or ``max_samples`` are used."""
    torch.manual_seed(seed)
    cfg, env = setup.learner(name, seed)
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        runner = make_runner(env, cfg, log_dir=None, device="cpu")
    samples_per_it = cfg.num_steps_per_env * env.num_envs
    samples, seconds, iterations, ret = 0, 0.0, 0, float("-inf")
    while samples < max_samples:
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
            runner.learn(eval_every, init_at_random_ep_len=iterations == 0)
        seconds += time.perf_counter() - start
        iterations += eval_every
        samples += eval_every * samples_per_it
        ret = evaluate_return(setup.eval_env, runner.get_inference_policy())
        print(f"  {name} seed {seed}: it {iterations:4d}  samples {samples:9d}  train {seconds:7.1f} s  "
              f"eval return {ret:8.1f}", flush=True)
        if ret >= threshold:
            return Result(name, seed, True, samples, seconds, iterations, ret)
    return Result(name, seed, False, samples, seconds, iterations, ret)


def summarise(results: list[Result], threshold: float, setup: Setup) -> dict[str, float]:
    """Print the table; return the median samples/seconds per algorithm and the ratios (PPO / SHAC)."""
    task = f"{setup.dim}-D point mass" if setup.task == "pointmass" else "pendulum swing-up"
    print(f"\nTask: {task}; threshold: mean evaluation return >= {threshold}; "
          f"SHAC {setup.shac_envs} envs x h={setup.horizon}, PPO {setup.ppo_envs} envs x {setup.horizon} steps\n")
    print(f"{'algorithm':>9} {'seed':>4} {'solved':>6} {'samples':>10} {'wall-clock [s]':>15} {'iterations':>10} "
          f"{'return':>8}")
    for r in results:
        print(f"{r.algorithm:>9} {r.seed:>4} {str(r.solved):>6} {r.samples:>10d} {r.seconds:>15.1f} "
              f"{r.iterations:>10d} {r.final_return:>8.1f}")
    out = {}
    for name in ("SHAC", "PPO"):
        rs = [r for r in results if r.algorithm == name]
        out[f"{name}_samples"] = statistics.median(r.samples for r in rs)
        out[f"{name}_seconds"] = statistics.median(r.seconds for r in rs)
        out[f"{name}_solved"] = all(r.solved for r in rs)
    out["sample_ratio"] = out["PPO_samples"] / out["SHAC_samples"]
    out["time_ratio"] = out["PPO_seconds"] / out["SHAC_seconds"]
    print(f"\nmedian samples to threshold:    SHAC {out['SHAC_samples']:.0f}   PPO {out['PPO_samples']:.0f}   "
          f"PPO/SHAC = {out['sample_ratio']:.1f}x")
    print(f"median wall-clock to threshold: SHAC {out['SHAC_seconds']:.1f} s   PPO {out['PPO_seconds']:.1f} s   "
          f"PPO/SHAC = {out['time_ratio']:.2f}x")
    if not (out["SHAC_solved"] and out["PPO_solved"]):
        print("note: some runs did not reach the threshold within the sample budget (counted at the budget)")
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(SOLVED_RETURN), default="pointmass")
    parser.add_argument("--dim", type=int, default=8, help="point-mass dimensions (= actions)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threshold", type=float, default=None, help="default: per task (90 / -150)")
    parser.add_argument("--shac-envs", type=int, default=16)
    parser.add_argument("--ppo-envs", type=int, default=16)
    parser.add_argument("--shac-max-samples", type=int, default=500_000)
    parser.add_argument("--ppo-max-samples", type=int, default=3_000_000)
    parser.add_argument("--eval-every", type=int, default=5, help="iterations between evaluations")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    setup = Setup(task=args.task, dim=args.dim, shac_envs=args.shac_envs, ppo_envs=args.ppo_envs)
    threshold = SOLVED_RETURN[args.task] if args.threshold is None else args.threshold
    results = []
    for seed in args.seeds:
        results.append(train_to_threshold(setup, "SHAC", seed, threshold, args.shac_max_samples, args.eval_every))
        results.append(train_to_threshold(setup, "PPO", seed, threshold, args.ppo_max_samples, args.eval_every))
    return summarise(results, threshold, setup)


if __name__ == "__main__":
    main(sys.argv[1:])
