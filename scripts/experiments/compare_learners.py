"""Learning curves of several training runs side by side: return and tracking errors against samples and against
wall-clock time, read from each run's TensorBoard events (the rsl_rl tags both of our learners write).

    .venv/bin/python scripts/experiments/compare_learners.py --runs logs/shac/anymal_d_flat/<run> \\
        logs/ppo/anymal_d_flat/<run> --labels SHAC PPO --out docs/figures/shac_vs_ppo.png

Samples are environment transitions summed over the data-parallel ranks (``Perf/total_fps`` x the iteration's
collection + learning time, as the loggers compute the rate); wall-clock is the time since the first logged
iteration (the events' wall time, so compilation before the first iteration is not counted); a resumed run counts
on from the run it resumed (its params record the checkpoint), e.g. one that learnt the curriculum with few envs and
went on with more (``--resume --num_envs``). Prints, per run,
the final values and, for each pair, the samples and seconds each needs to reach the worse run's final tracking
error (smoothed over ``--smooth`` iterations).

The training curves measure each learner on its own training distribution (a command curriculum narrows it early,
exploration noise differs). ``--closed_loop`` measures every saved checkpoint the same way instead: the deployed
(TorchScript) policy, deterministic, in the training simulator's hard contact, on the random commands of
``--closed_loop_config`` (default: ``config/validation/anymal_d_random100.yaml``, 100 episodes of 20 s over the full
command ranges), and plots its tracking errors and fall rate against the samples and wall-clock at which the
checkpoint was saved (``<out>`` with ``_closed_loop`` before the extension)::

    .venv/bin/python scripts/experiments/compare_learners.py --runs <SHAC run> <PPO run> --labels SHAC PPO \\
        --out docs/figures/shac_vs_ppo.png --closed_loop --jobs 2

(``--jobs 2``: the checkpoints measured in two processes, Warp's CPU kernels running on one core each.) A small
closed-loop scenario file (``--closed_loop_config``, e.g. 2 episodes of 1 s) makes it a run of seconds.
``--closed_loop_backend mujoco`` measures in MuJoCo instead of hard contact. ``--reach 0.3 0.2 0.15`` also prints,
per run, the samples and minutes at which a checkpoint first has a planar error at or below each value with a fall
rate at or below ``--reach_falls`` (and a yaw-rate error at or below ``--reach_yaw``, when given): e.g. "walks"
(Song et al.'s comparison, ``docs/learning.md``)::

    .venv/bin/python scripts/experiments/compare_learners.py --runs <run 1 env> <run 8 envs> --labels 1 8 \
        --task DiffLoco-Velocity-Flat-AnymalD-Aligned --closed_loop --closed_loop_backend mujoco \
        --reach 0.25 --reach_yaw 0.3 --reach_falls 0 --out docs/figures/aligned_walking.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from diffloco_ext.learning.run_history import chain_checkpoints, progress_at, read_run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
CURVES = (("Train/mean_reward", "mean episode return"), ("Metrics/lin_vel_xy_error", "|v_xy* - v_xy| (m/s)"),
          ("Metrics/ang_vel_z_error", "|w_z* - w_z| (rad/s)"), ("Metrics/forward_speed", "forward speed (m/s)"))
"""The curves plotted, those that at least one run logs (the quadruped's forward task logs a forward speed)."""


def smooth(x: np.ndarray, k: int) -> np.ndarray:
    if k <= 1 or len(x) < k:
        return x
    return np.convolve(x, np.ones(k) / k, mode="valid")


def closed_loop(run_dirs: list[str], task: str, config_path: str, backend: str = "hard",
                jobs: int = 1, every: int = 1) -> list[list[dict]]:
    """Each checkpoint of each run in ``run_dirs`` (and of the run it resumed, up to the resumed one) whose iteration
    is a multiple of ``every`` measured on the random-command scenario of ``config_path`` in ``backend``, per run
    ``[{"iteration", "lin_vel_error" (m/s), "ang_vel_error" (rad/s), "fall_rate", ...}]`` by iteration, in ``jobs``
    processes."""
    from diffloco_ext.validation.checkpoint_selection import measure_checkpoint_groups

    groups = [[c for c in chain_checkpoints(run_dir) if c[0] % every == 0] for run_dir in run_dirs]
    for run_dir, group in zip(run_dirs, groups):
        if not group:
            raise FileNotFoundError(f"{run_dir}: no model_<iteration>.pt checkpoints")
    return measure_checkpoint_groups(groups, task, config_path, backend, jobs=jobs,
                                     names=[os.path.basename(r) for r in run_dirs])


def report_reach(curves: dict[str, dict], thresholds: list[float], yaw: float | None, falls: float) -> dict:
    """Per run and planar-error threshold: the first checkpoint with ``lin_vel_error <= threshold``, ``fall_rate <=
    falls`` (and ``ang_vel_error <= yaw`` when given), its iteration, samples and minutes (None: not reached)."""
    reached = {}
    for label, c in curves.items():
        reached[label] = {}
        for threshold in thresholds:
            hit = [i for i, r in enumerate(c["rows"]) if r["lin_vel_error"] <= threshold and r["fall_rate"] <= falls
                   and (yaw is None or r["ang_vel_error"] <= yaw)]
            what = f"planar <= {threshold} m/s" + (f", yaw <= {yaw} rad/s" if yaw is not None else "") + \
                f", falls <= {falls:.0%}"
            if hit:
                i = hit[0]
                reached[label][str(threshold)] = {"iteration": c["rows"][i]["iteration"],
                                                  "samples": float(c["samples"][i]), "minutes": float(c["minutes"][i])}
                print(f"  {label:12s} {what}: it {c['rows'][i]['iteration']}, {c['samples'][i]:.3g} samples, "
                      f"{c['minutes'][i]:.1f} min")
            else:
                reached[label][str(threshold)] = None
                print(f"  {label:12s} {what}: not reached")
    return reached


def plot_closed_loop(curves: dict[str, dict], out: str, backend: str = "hard") -> None:
    names = (("lin_vel_error", "closed loop |v_xy* - v_xy| (m/s)"),
             ("ang_vel_error", "closed loop |w_z* - w_z| (rad/s)"), ("fall_rate", "closed loop fall rate"))
    fig, axes = plt.subplots(2, len(names), figsize=(5 * len(names), 8))
    for label, c in curves.items():
        for col, (key, name) in enumerate(names):
            y = [r[key] for r in c["rows"]]
            axes[0, col].plot(c["samples"], y, "o-", label=label)
            axes[1, col].plot(c["minutes"], y, "o-", label=label)
            for row in range(2):
                axes[row, col].set_ylabel(name)
                axes[row, col].grid(alpha=0.3)
                axes[row, col].legend()
            axes[0, col].set_xlabel("samples (env transitions)")
            axes[1, col].set_xlabel("wall-clock (min)")
    where = "hard contact" if backend == "hard" else backend
    fig.suptitle(f"checkpoints in {where}, random commands (full ranges)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"[compare] wrote {out}")


def report_closed_loop(curves: dict[str, dict]) -> dict:
    """For each run: the samples and minutes at which its checkpoints first reach another run's final closed-loop
    tracking, i.e. its planar error *and* its fall rate or fewer falls (the error is measured on the steps before a
    fall, so a checkpoint that tracks while it stands but falls in most episodes has not reached it), and the final
    values."""
    summary = {}
    for label, c in curves.items():
        final = c["rows"][-1]
        summary[label] = {"final": final, "samples": float(c["samples"][-1]), "minutes": float(c["minutes"][-1])}
        print(f"  {label:12s} final checkpoint (it {final['iteration']}): v_xy err {final['lin_vel_error']:.3f} m/s, "
              f"w_z err {final['ang_vel_error']:.3f} rad/s, falls {final['fall_rate']:.0%}; "
              f"{c['samples'][-1]:.3g} samples, {c['minutes'][-1]:.1f} min")
    for label, c in curves.items():
        for other, o in curves.items():
            if other == label:
                continue
            target, falls = o["rows"][-1]["lin_vel_error"], o["rows"][-1]["fall_rate"]
            hit = [i for i, r in enumerate(c["rows"]) if r["lin_vel_error"] <= target and r["fall_rate"] <= falls]
            what = f"{other}'s final planar error {target:.3f} m/s with at most its falls ({falls:.0%})"
            if hit:
                i = hit[0]
                print(f"  {label} reaches {what} at it {c['rows'][i]['iteration']}, {c['samples'][i]:.3g} samples, "
                      f"{c['minutes'][i]:.1f} min (the other: {o['samples'][-1]:.3g} samples, "
                      f"{o['minutes'][-1]:.1f} min)")
                summary[label][f"reaches_{other}"] = {"iteration": c["rows"][i]["iteration"],
                                                      "samples": float(c["samples"][i]),
                                                      "minutes": float(c["minutes"][i])}
            else:
                print(f"  {label} does not reach {what}")
    return summary


def plot_training_curves(runs: dict[str, dict], columns, out: str, smooth_k: int, title: str = "") -> dict:
    """Each of ``columns`` (tag, axis name) against samples (top row) and wall-clock (bottom row); returns
    ``{label: {tag: {"final", "samples", "minutes", "values"}}}`` of the smoothed curves."""
    summary = {}
    fig, axes = plt.subplots(2, len(columns), figsize=(5 * len(columns), 8), squeeze=False)
    for label, data in runs.items():
        it_to_samples = dict(zip(data["samples"][:, 0], data["samples"][:, 1]))
        summary[label] = {}
        for col, (tag, name) in enumerate(columns):
            if tag not in data:
                continue
            series = data[tag]
            keep = np.isfinite(series[:, 1]) & np.isin(series[:, 0], list(it_to_samples))
            series = series[keep]
            y = smooth(series[:, 1], smooth_k)
            off = len(series) - len(y)
            samples = np.array([it_to_samples[i] for i in series[off:, 0]])
            axes[0, col].plot(samples, y, label=label)
            axes[1, col].plot(series[off:, 2] / 60.0, y, label=label)
            summary[label][tag] = {"final": float(y[-1]), "samples": samples.tolist(),
                                   "minutes": (series[off:, 2] / 60).tolist(), "values": y.tolist()}
    for col, (_, name) in enumerate(columns):
        axes[0, col].set_xlabel("samples (env transitions)")
        axes[1, col].set_xlabel("wall-clock (min)")
        for row in range(2):
            axes[row, col].set_ylabel(name)
            axes[row, col].grid(alpha=0.3)
            axes[row, col].legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"[compare] wrote {out}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="run directories (with TensorBoard events)")
    parser.add_argument("--labels", nargs="+", default=None)
    parser.add_argument("--out", default="learning_comparison.png")
    parser.add_argument("--smooth", type=int, default=10, help="moving-average window (iterations)")
    parser.add_argument("--title", default="")
    parser.add_argument("--closed_loop", action="store_true",
                        help="also measure every checkpoint in hard contact on random commands (see above)")
    parser.add_argument("--closed_loop_config", default=os.path.join(ROOT, "config", "validation",
                                                                      "anymal_d_random100.yaml"),
                        help="the closed loop's scenario file (default: config/validation/anymal_d_random100.yaml)")
    parser.add_argument("--closed_loop_backend", default="hard", help="closed loop: the validation backend (hard, "
                        "mujoco, ...)")
    parser.add_argument("--closed_loop_every", type=int, default=1, help="closed loop: only the checkpoints whose "
                        "iteration is a multiple of this")
    parser.add_argument("--reach", type=float, nargs="*", default=[], help="closed loop: planar-error thresholds "
                        "(m/s) to report the first checkpoint at or below")
    parser.add_argument("--reach_yaw", type=float, default=None, help="with --reach: also a yaw-rate error at or below "
                        "this (rad/s)")
    parser.add_argument("--reach_falls", type=float, default=0.01, help="with --reach: a fall rate at or below this")
    parser.add_argument("--task", default="DiffLoco-Velocity-Flat-AnymalD", help="the runs' task (closed loop)")
    parser.add_argument("--jobs", type=int, default=1, help="closed loop: processes measuring the checkpoints "
                        "(Warp runs on one core: 2 on a 2-core machine)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.closed_loop_every < 1:
        parser.error("--jobs and --closed_loop_every must be at least 1")
    labels = args.labels or [os.path.basename(os.path.normpath(r)) for r in args.runs]
    if len(labels) != len(args.runs):
        parser.error("give one label per run")
    runs = {label: read_run(r) for label, r in zip(labels, args.runs)}
    columns = [c for c in CURVES if any(c[0] in data for data in runs.values())]
    if columns:
        summary = plot_training_curves(runs, columns, args.out, args.smooth, args.title)
    else:  # e.g. runs too short to finish an episode
        summary = {}
        print(f"[compare] the runs log none of {[c[0] for c in CURVES]}: no training curves")
    tag = "Metrics/lin_vel_xy_error"
    for label, s in summary.items():
        finals = {t.split("/")[-1]: round(v["final"], 3) for t, v in s.items()}
        print(f"  {label:12s} final (smoothed) {json.dumps(finals)}")
    if all(tag in s for s in summary.values()) and len(summary) > 1:
        threshold = max(s[tag]["final"] for s in summary.values())
        print(f"  to reach {tag} <= {threshold:.3f} (the worse final value):")
        for label, s in summary.items():
            hit = [i for i, v in enumerate(s[tag]["values"]) if v <= threshold]
            if hit:
                i = hit[0]
                print(f"    {label:12s} {s[tag]['samples'][i]:.3g} samples, {s[tag]['minutes'][i]:.1f} min")
            else:
                print(f"    {label:12s} not reached")
    if args.closed_loop:
        import torch

        torch.set_num_threads(1)
        curves = {}
        measured = closed_loop(args.runs, args.task, args.closed_loop_config, backend=args.closed_loop_backend,
                               jobs=args.jobs, every=args.closed_loop_every)
        for (label, data), run_dir, rows in zip(runs.items(), args.runs, measured):
            at = progress_at(run_dir, data, [r["iteration"] for r in rows])
            curves[label] = {"rows": rows, "samples": at["samples"], "minutes": at["wall_minutes"]}
        stem, ext = os.path.splitext(args.out)
        plot_closed_loop(curves, f"{stem}_closed_loop{ext}", args.closed_loop_backend)
        summary = report_closed_loop(curves)
        if args.reach:
            for label, hits in report_reach(curves, args.reach, args.reach_yaw, args.reach_falls).items():
                summary[label]["reach"] = hits
        with open(f"{stem}_closed_loop.json", "w") as f:
            json.dump({k: {**v, "curve": [dict(r, samples=float(n), minutes=float(t)) for r, n, t in
                                          zip(curves[k]["rows"], curves[k]["samples"], curves[k]["minutes"])]}
                       for k, v in summary.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
