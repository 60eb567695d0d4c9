"""The main job (`make train`): train ANYmal D velocity tracking with SHAC on the CPU, ship, export, validate, plot.

Trains DiffLoco-Velocity-Flat-AnymalD's recipe (its registered configs) with SHAC on two data-parallel ranks, ships
the actor averaged over the late checkpoints, exports it (TorchScript and ONNX), validates it in our hard contact
and in MuJoCo, measures 100 uniform-command episodes against the tracking targets, and plots it; about 17.5 min on
a 2-core CPU. Everything goes to logs/shac/anymal_d_flat/<timestamp>_main_job/.

    .venv/bin/python scripts/main_job.py                      # what `make train` runs
    .venv/bin/python scripts/main_job.py --seed 7 env.rewards.foot_slip=-2.0
    .venv/bin/python scripts/main_job.py --from_run logs/shac/anymal_d_flat/<run>   # redo the steps after training
    .venv/bin/python scripts/main_job.py --task DiffLoco-Velocity-Flat-AnymalD-Pace  # a gait (docs/tasks.md, "Gaits")
"""

from __future__ import annotations

import argparse
import re
import sys

from diffloco_ext.learning.cli import check_gait, positive_int
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.cfg_override import ConfigOverrideError, apply_overrides, parse_overrides
from diffloco_ext.validation.main_job import MainJobCfg, run

_OVERRIDE = re.compile(r"(env|agent)\.[A-Za-z_][\w.]*=")


def parse(argv: list[str] | None) -> MainJobCfg:
    """The job's options from the command line (one-line errors for bad values)."""
    d = MainJobCfg()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    velocity = [t for t in registry.task_ids() if t.startswith("DiffLoco-Velocity-")]
    parser.add_argument("--task", default=d.task, choices=velocity,
                        help="the velocity task whose recipe is trained (default: %(default)s; e.g. a gait's variant, "
                             "DiffLoco-Velocity-Flat-AnymalD-Pace)")
    parser.add_argument("--train_minutes", type=float, default=d.train_minutes,
                        help="wall-clock budget of the training (the whole job, set-up included, fits 20 min)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="SHAC iterations of the learning-rate schedule (default: the recipe's, 1000; fixed, so a "
                             "seed's run does not depend on the machine's speed); training stops earlier at a "
                             "checkpoint if --train_minutes runs out. 0: no fixed schedule, the count fitted to the "
                             "budget")
    parser.add_argument("--num_envs", type=positive_int, default=None,
                        help="envs per rank (default: the recipe's, 128)")
    parser.add_argument("--runs", type=positive_int, default=d.runs,
                        help="independent training runs side by side, of seeds --seed, --seed + 1, ...; of several, "
                             "the one whose policy falls least in the selection ships (--runs x --ranks processes: "
                             "one per core, e.g. --runs 2 on 4 cores)")
    parser.add_argument("--ranks", type=positive_int, default=d.ranks,
                        help="data-parallel training processes per run (2 x 128 envs: the batch the recipe needs)")
    parser.add_argument("--episodes", type=positive_int, default=None,
                        help="random-command validation episodes per seed (default: the scenario file's)")
    parser.add_argument("--target_episodes", type=int, default=None,
                        help="episodes of the tracking measurement (default: its file's, 100; 0 skips it)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--select_from", type=float, default=d.select_from,
                        help="the checkpoints averaged (or, --ship best, ranked) are those saved after this fraction "
                             "of the schedule (of the iterations run if none is that late; 1: the last checkpoint)")
    parser.add_argument("--ship", choices=("average", "best"), default=d.ship,
                        help="average: the actor averaged over the checkpoints from --select_from on (unless it "
                             "chatters or does not track); best: the checkpoint with the fewest falls")
    parser.add_argument("--select_episodes", type=positive_int, default=d.select_episodes,
                        help="episodes per policy in the selection")
    parser.add_argument("--select_soft_episodes", type=positive_int, default=d.select_soft_episodes,
                        help="of several runs, the softer-ground episodes each run's policy is measured on")
    parser.add_argument("--log_root", default=d.log_root)
    parser.add_argument("--no_video", action="store_true")
    parser.add_argument("--from_run", nargs="+", default=None,
                        help="the run folder(s) this job trained: skip the training and do the rest on their "
                             "checkpoints (selection, export, validation, plots; e.g. after an interruption)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the validation FAILs or the tracking measurement misses a target")
    parser.add_argument("overrides", nargs="*", help="env.<field>=<value> agent.<field>=<value>")
    args = parser.parse_args(argv)
    if args.from_run:  # overrides written after --from_run's folders are overrides, not folders
        args.overrides = [o for o in args.from_run if _OVERRIDE.match(o)] + args.overrides
        args.from_run = [o for o in args.from_run if not _OVERRIDE.match(o)]
    if args.iterations is not None and args.iterations < 0:
        parser.error(f"--iterations must be 0 or more, got {args.iterations}")
    try:
        overrides = parse_overrides(args.overrides)  # checked now, not after the training
        check_gait(apply_overrides(registry.load_cfg(args.task), overrides["env"], "env"))
        apply_overrides(registry.load_agent_cfg(args.task, "shac"), overrides["agent"], "agent")
        return MainJobCfg(**vars(args))
    except (ValueError, ConfigOverrideError) as err:
        parser.error(str(err))


def main(argv: list[str] | None = None) -> int:
    cfg = parse(argv)
    try:
        return run(cfg)
    except FileNotFoundError as err:  # e.g. --from_run on a folder without checkpoints: one line, no traceback
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
