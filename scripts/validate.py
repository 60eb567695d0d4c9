"""Validate a velocity-tracking policy before hardware: replay it under hard contact in other simulators with
scenarios and gates, print PASS or FAIL with every failing gate, write a report (exit status 1 on FAIL).

    .venv/bin/python scripts/validate.py --task DiffLoco-Velocity-Flat-AnymalD \\
        --policy logs/shac/anymal_d_flat/<run>/exported/policy.pt --backend all
    .venv/bin/python scripts/validate.py --task DiffLoco-Velocity-Flat-AnymalD \\
        --checkpoint logs/shac/anymal_d_flat/<run>/model_496.pt --backend mujoco --video --out report/

``--policy``: an exported TorchScript (``.pt``) or ONNX (``.onnx``) file, run as deployed. ``--checkpoint``: an
rsl_rl checkpoint (``model_*.pt``, or a run folder: its latest), loaded through the task's runner and exported
to ``<out>/exported/`` first (the export gate then compares TorchScript and ONNX with the torch policy).
``--scenarios``: a scenario/gate file (default ``config/validation/<robot>.yaml``). Backends: ``hard`` (the
project's simulator, hard contact), ``mujoco``, ``isaaclab`` (PhysX and Newton; needs Isaac Lab), ``all``
(every backend that can run here). Exit status: 0 PASS, 1 FAIL, 2 bad input (a missing, corrupt or foreign policy
or checkpoint, a bad scenario file, an unknown or unavailable backend: one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from diffloco_ext.validation import backend_registry
from diffloco_ext.validation.closed_loop import TaskInterface
from diffloco_ext.validation.policy_io import PolicyLoadError, load_checkpoint, load_policy_file
from diffloco_ext.validation.scenarios import ScenarioConfigError, default_config_path, load_config
from diffloco_ext.validation.validation_run import run_validation

MAX_LISTED = 30  # failing gates printed (the report lists all)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True, help="registered velocity task id")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="rsl_rl checkpoint model_*.pt (or its run folder)")
    source.add_argument("--policy", help="exported policy: TorchScript .pt or ONNX .onnx")
    parser.add_argument("--algo", default=None, choices=("shac", "ppo"),
                        help="learner of a checkpoint without params/agent.yaml (default shac)")
    parser.add_argument("--backend", nargs="+", default=["hard", "mujoco"],
                        help=f"one or more of {list(backend_registry.CHOICES)} or package.module:factory")
    parser.add_argument("--scenarios", default=None,
                        help="scenario and gate file (default config/validation/<robot>.yaml)")
    parser.add_argument("--only", nargs="+", default=None, help="run only these scenarios of the file")
    parser.add_argument("--out", default=None, help="report folder (default validation/<timestamp> next to the policy)")
    parser.add_argument("--video", action="store_true", help="render MP4s of the figure scenario (headless)")
    parser.add_argument("--no_reference", action="store_true", help="skip the training-simulator reference run")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    try:
        task = TaskInterface.from_task(args.task)
        config = load_config(args.scenarios or default_config_path(task.robot.name))
        if config.robot != task.robot.name:
            raise ScenarioConfigError(f"the validation config {config.source} is for robot '{config.robot}', the "
                                      f"task '{args.task}' drives '{task.robot.name}'")
        if args.only:
            unknown = [n for n in args.only if n not in [s.name for s in config.scenarios]]
            if unknown:
                raise ScenarioConfigError(f"--only: no scenario {unknown} in {config.source}")
            config.scenarios = [s for s in config.scenarios if s.name in args.only]
            if config.settings.figure_scenario not in args.only:
                config.settings.figure_scenario = config.scenarios[0].name
        source = args.checkpoint or args.policy
        out = args.out or os.path.join(os.path.dirname(os.path.abspath(source)), "validation",
                                       time.strftime("%Y-%m-%d_%H-%M-%S"))
        if args.checkpoint:
            policy = load_checkpoint(args.checkpoint, args.task, os.path.join(out, "exported"), task.num_obs,
                                     task.num_actions, algo=args.algo)
        else:
            policy = load_policy_file(args.policy, task.num_obs, task.num_actions)
        backend_registry.resolve(args.backend)
    except (KeyError, ValueError, PolicyLoadError, ScenarioConfigError, FileNotFoundError) as err:
        print(f"[validate] error: {err.args[0] if isinstance(err, KeyError) else err}", file=sys.stderr)
        return 2
    try:
        result = run_validation(task, policy, args.backend, config, out, video=args.video,
                                reference=not args.no_reference)
    except backend_registry.BackendUnavailable as err:
        print(f"[validate] error: {err}", file=sys.stderr)
        return 2
    print(f"\n[validate] {result.verdict} ({result.seconds:.0f} s): {len(result.failing)} failing gate(s)")
    for gate in result.failing[:MAX_LISTED]:
        print(f"  FAIL {gate.describe()}")
    if len(result.failing) > MAX_LISTED:
        print(f"  ... and {len(result.failing) - MAX_LISTED} more (all in the report)")
    print(f"[validate] report: {os.path.join(result.report_dir, 'summary.md')}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
