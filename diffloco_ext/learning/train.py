"""Train a registered task with SHAC (default) or rsl_rl's PPO, rsl_rl-style: ``scripts/train.py``, also run
as ``torchrun ... -m diffloco_ext.learning.train`` by the main job.

    # the velocity task's training recipe (its registered configs), one process of 128 envs
    .venv/bin/python scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD --algo shac
    # exactly what `make train` trains: two data-parallel ranks of 128 envs, one per core
    .venv/bin/torchrun --nproc_per_node=2 scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD --algo shac
    # rsl_rl's PPO with Isaac Lab's ANYmal-D settings on the same env
    .venv/bin/python scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD --algo ppo --num_envs 512
    # overrides of any config field, and resuming
    .venv/bin/python scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD env.sim.contact.kappa=300
    .venv/bin/python scripts/train.py --task ... --resume --load_run 2026-12-01_10-00-00 --checkpoint model_100.pt

Logs go to ``logs/<algo>/<experiment>/<timestamp>[_<run>]/`` (``params/env.yaml``, ``params/agent.yaml``,
``model_<it>.pt`` every 50 iterations, TensorBoard); one progress line per iteration (reward, tracking errors,
episode length, env-steps/s, time left). Unknown task ids, unknown override keys and values of the wrong type are
one-line errors.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from ..tasks import registry
from ..tasks.cfg_override import ConfigOverrideError
from .cli import (
    add_common_args,
    learn_within_budget,
    load_configs,
    new_run_dir,
    positive_int,
    resolve_checkpoint,
    seed_everything,
)
from .runner import make_runner


def main(argv: list[str] | None = None) -> str:
    """Parse ``argv`` (the command line's arguments) and train; returns the run folder (rank 0; None on others)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--max_iterations", type=positive_int, default=None,
                        help="learning iterations (with --resume: this many more, as rsl_rl's and Isaac Lab's "
                             "learn(); SHAC's learning-rate schedule spans the run's iterations, those before the "
                             "resume included, so to finish an interrupted schedule pass the iterations it had left)")
    parser.add_argument("--resume", action="store_true", help="continue from a checkpoint (--load_run/--checkpoint)")
    parser.add_argument("--logger", default=None, choices=["tensorboard", "wandb", "neptune"])
    parser.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (Warp runs on one core)")
    parser.add_argument("--max_minutes", type=float, default=None,
                        help="wall-clock budget: with --max_iterations, the learning-rate schedule spans those and "
                             "training stops early if the budget runs out (at a checkpoint); without, the count is "
                             "fitted to the budget after 5 iterations")
    args = parser.parse_intermixed_args(argv)  # overrides before, between or after the flags
    torch.set_num_threads(args.threads)
    try:
        env_cfg, agent_cfg = load_configs(args)
    except (KeyError, ConfigOverrideError) as err:
        parser.error(str(err.args[0] if isinstance(err, KeyError) else err))
    try:
        resume_path = resolve_checkpoint(args, agent_cfg) if args.resume else None
    except FileNotFoundError as err:
        parser.error(f"--resume: {err}")
    if resume_path is not None:  # before a run folder is made: a file that is no checkpoint is a one-line error
        try:
            saved = torch.load(resume_path, weights_only=False, map_location="cpu")
        except Exception as err:  # noqa: BLE001 - a corrupt or truncated file, or not a torch file at all
            raise SystemExit(f"error: '{resume_path}' is not a readable checkpoint ({type(err).__name__})") from None
        if not isinstance(saved, dict) or "actor_state_dict" not in saved or "iter" not in saved:
            raise SystemExit(f"error: '{resume_path}' is not an rsl_rl-style checkpoint of this project (no "
                             f"actor_state_dict and iter): an exported policy or another program's file?")
        del saved
    if resume_path is not None:  # params/agent.yaml says where the run came from (compare_learners joins the two)
        agent_cfg.resume, agent_cfg.load_checkpoint = True, resume_path
    rank = int(os.environ.get("RANK", "0"))  # data-parallel ranks (torchrun): own envs and seed, rank 0 logs
    env_cfg.seed += rank
    seed_everything(agent_cfg.seed + rank)  # the network is broadcast from rank 0; the exploration noise differs
    log_dir = new_run_dir(args, agent_cfg, env_cfg) if rank == 0 else None
    where = f"logs in {log_dir}" if rank == 0 else f"rank {rank} (rank 0 logs)"
    print(f"[diffloco] task {args.task}, {args.algo}, {env_cfg.num_envs} envs, {where}", flush=True)
    env = registry.make_env(args.task, env_cfg)
    runner = make_runner(env, agent_cfg, log_dir=log_dir, device=agent_cfg.device)
    if resume_path is not None:
        print(f"[diffloco] resuming from {resume_path}", flush=True)
        try:
            runner.load(resume_path)
        except Exception as err:  # noqa: BLE001 - a corrupt file, or a checkpoint of another task or learner
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise SystemExit(f"error: checkpoint '{resume_path}' does not load into the {args.algo} runner of "
                             f"'{args.task}': {first}") from None
    start = time.time()
    # episodes start at random lengths (Isaac Lab's and rsl_rl's train scripts), unless a resume restored the envs
    # mid-episode (SHAC's checkpoints hold every rank's env state): then the run continues as the interrupted one
    random_start = not getattr(runner, "env_state_restored", False)
    if args.max_minutes is not None:
        iterations = learn_within_budget(runner, args.max_minutes, schedule_iterations=args.max_iterations,
                                         init_at_random_ep_len=random_start)
    else:
        iterations = agent_cfg.max_iterations
        if hasattr(runner.alg, "max_iterations"):  # SHAC's schedule: the iterations before a resume count too
            runner.alg.max_iterations = runner.current_learning_iteration + iterations
        runner.learn(num_learning_iterations=iterations, init_at_random_ep_len=random_start)
    where = f"checkpoints in {log_dir}" if rank == 0 else f"rank {rank}"
    print(f"[diffloco] trained {iterations} iterations in {time.time() - start:.0f} s; {where}", flush=True)
    return log_dir


if __name__ == "__main__":
    main(sys.argv[1:])
