"""Play a trained policy: roll it out, print tracking statistics per command (or, for a task without commands,
its metrics: the quadruped's forward speed), export it, optionally film it.

    .venv/bin/python scripts/play.py --task DiffLoco-Velocity-Flat-AnymalD --checkpoint latest
    .venv/bin/python scripts/play.py --task DiffLoco-Velocity-Flat-AnymalD --checkpoint logs/shac/.../model_300.pt \\
        --video --video_length 500 env.sim.contact=hard

Writes ``<run>/exported/policy.pt`` (TorchScript) and ``<run>/exported/policy.onnx`` (observation normaliser inside,
input ``[B, 48]`` float32 in Isaac Lab's observation order, ``[B, 50]`` with the gait clock after them; output
``[B, 12]`` actions, deterministic), checks both against the torch policy, and with ``--video``
``<run>/videos/play.mp4`` (MuJoCo's renderer, headless). Evaluation settings: no observation noise, no pushes,
nominal parameters (as Isaac Lab's play configs); the commands are the task's. A checkpoint that is missing, corrupt
or of another task or learner is a one-line error.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np
import torch

from diffloco_ext.learning.cli import add_common_args, load_configs, positive_int, resolve_checkpoint
from diffloco_ext.learning.export import check_exported_policy, export_policy_as_jit, export_policy_as_onnx
from diffloco_ext.learning.runner import make_runner
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.cfg_override import ConfigOverrideError
from diffloco_ext.tasks.vec_env import TIME_OUTS_KEY
from diffloco_ext.validation.policy_io import describe, is_torchscript_archive


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--steps", type=positive_int, default=500, help="policy steps to roll out")
    parser.add_argument("--video", action="store_true", help="render an MP4 of env 0 (headless)")
    parser.add_argument("--video_length", type=positive_int, default=300, help="policy steps in the video")
    parser.add_argument("--no_export", action="store_true", help="skip the TorchScript/ONNX export")
    args = parser.parse_intermixed_args(argv)  # overrides before, between or after the flags
    torch.set_num_threads(1)
    if args.num_envs is None:
        args.num_envs = 16
    try:
        env_cfg, agent_cfg = load_configs(args, play=True)
    except (KeyError, ConfigOverrideError) as err:
        parser.error(str(err.args[0] if isinstance(err, KeyError) else err))
    for name, value in (("observation_noise", False), ("randomization", False)):
        section = getattr(env_cfg, name, None)
        if section is not None and hasattr(section, "enable"):
            section.enable = value
    try:
        path = resolve_checkpoint(args, agent_cfg, args.checkpoint or "latest")
    except (FileNotFoundError, re.error) as err:
        parser.error(f"--checkpoint: {err}")
    if is_torchscript_archive(path):
        parser.error(f"--checkpoint: '{path}' is an exported TorchScript policy, not an rsl_rl checkpoint "
                     "(scripts/validate.py --policy runs exported policies)")
    print(f"[diffloco] playing {path}", flush=True)
    env = registry.make_env(args.task, env_cfg)
    runner = make_runner(env, agent_cfg, log_dir=None, device=agent_cfg.device)
    try:
        runner.load(path, load_cfg={"actor": True, "critic": False, "optimizer": False, "iteration": True})
    except Exception as err:  # noqa: BLE001 - a corrupt file, or a checkpoint of another task or learner
        raise SystemExit(f"error: checkpoint '{path}' does not load into the {args.algo} runner of '{args.task}' "
                         f"({describe(err)})") from None
    policy = runner.get_inference_policy()
    result = {"checkpoint": path}

    obs = env.get_observations()
    qs, records, metrics, ends = [], [], {}, np.zeros(2, dtype=np.int64)
    with torch.inference_mode():
        for t in range(args.steps):
            actions = policy(obs)
            obs, _, dones, extras = env.step(actions)
            if t < args.video_length:
                qs.append(env.q[0].double().numpy().copy())
            for key, value in getattr(env, "step_metrics", {}).items():
                metrics.setdefault(key, []).append(value.double().numpy().copy())
            done, time_outs = dones.bool().numpy(), extras[TIME_OUTS_KEY].bool().numpy()
            ends += [int((done & ~time_outs).sum()), int((done & time_outs).sum())]
            cmd = getattr(env, "commands", None)
            if cmd is not None:
                base = env.base_state()
                records.append(np.concatenate([cmd.command.numpy(), base.lin_vel_b[:, :2].numpy(),
                                               base.ang_vel_b[:, 2:3].numpy(), dones[:, None].numpy()], axis=1))
    if records:
        result["tracking"] = print_tracking(np.stack(records))
    elif metrics:  # a task without velocity commands (DiffLoco-Quadruped-Forward): its own metrics
        result["metrics"] = print_metrics(metrics, ends, args.steps * env.num_envs)
    run_dir = os.path.dirname(path)
    if not args.no_export:
        export_dir = os.path.join(run_dir, "exported")
        export_policy_as_jit(policy, export_dir, "policy.pt")  # both learners' MLPModel: batch axis dynamic
        export_policy_as_onnx(policy, export_dir, "policy.onnx")
        sample = env.get_observations()["policy"][:64].float()
        errors = check_exported_policy(policy, os.path.join(export_dir, "policy.pt"),
                                       os.path.join(export_dir, "policy.onnx"), sample)
        print(f"[diffloco] exported {export_dir}/policy.pt and policy.onnx (input [B, {sample.shape[1]}], output "
              f"[B, {env.num_actions}]); max |exported - torch|: TorchScript {errors['jit']:.1e}, ONNX "
              f"{errors['onnx']:.1e}", flush=True)
        result.update(export_dir=export_dir, export_errors=errors)
    if args.video:
        from diffloco_ext.validation.render import render_states, write_mp4

        video = write_mp4(render_states(env.robot, np.stack(qs), terrain=getattr(env.unwrapped, "terrain", None)),
                          os.path.join(run_dir, "videos", "play.mp4"),
                          fps=1.0 / env.step_dt)
        print(f"[diffloco] video: {video}", flush=True)
        result["video"] = video
    return result


def print_metrics(metrics: dict[str, list[np.ndarray]], ends: np.ndarray, samples: int) -> dict:
    """Means over all env steps of the task's per-step metrics (e.g. ``forward_speed`` in m/s), and how many
    episodes ended by termination (a fall) and by time-out."""
    summary = {key: float(np.mean(np.stack(values))) for key, values in metrics.items()}
    for key, value in summary.items():
        print(f"{key:>16}: {value:.3f} (mean over {samples} env steps)")
    summary.update(terminations=int(ends[0]), time_outs=int(ends[1]))
    print(f"{'episodes ended':>16}: {ends[0]} by termination, {ends[1]} by time-out")
    return summary


def print_tracking(records: np.ndarray) -> dict:
    """Tracking errors by commanded speed bin. ``records`` [T, N, 7]: command (3), v_xy (2), w_z (1), done."""
    cmd, v, w = records[..., :3], records[..., 3:5], records[..., 5]
    lin = np.linalg.norm(cmd[..., :2] - v, axis=-1)
    ang = np.abs(cmd[..., 2] - w)
    speed = np.linalg.norm(cmd[..., :2], axis=-1)
    print(f"{'|v_xy*| (m/s)':>14} {'samples':>8} {'v_xy err (m/s)':>15} {'w_z err (rad/s)':>16}")
    bins = [(0.0, 0.1), (0.1, 0.5), (0.5, 1.0), (1.0, 1.5)]
    for lo, hi in bins:
        m = (speed >= lo) & (speed < hi)
        if m.any():
            print(f"{f'{lo:.1f}-{hi:.1f}':>14} {int(m.sum()):>8} {lin[m].mean():>15.3f} {ang[m].mean():>16.3f}")
    summary = {"lin_vel_xy_error": float(lin.mean()), "ang_vel_z_error": float(ang.mean())}
    print(f"{'all':>14} {lin.size:>8} {summary['lin_vel_xy_error']:>15.3f} {summary['ang_vel_z_error']:>16.3f}")
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
