"""Learning curves of several training runs side by side: return and tracking errors against samples and against
wall-clock time, read from each run's TensorBoard events (the rsl_rl tags both of our learners write).

    .venv/bin/python scripts/compare_learners.py --runs logs/shac/anymal_d_flat/<run> logs/ppo/anymal_d_flat/<run> \
        --labels SHAC PPO --out docs/figures/shac_vs_ppo.png

Samples are environment transitions summed over the data-parallel ranks (``Perf/total_fps`` x the iteration's
collection + learning time, as the loggers compute the rate); wall-clock is the time since the first logged
iteration (the events' wall time, so compilation before the first iteration is not counted). Prints, per run,
the final values and, for each pair, the samples and seconds each needs to reach the worse run's final tracking
error (smoothed over ``--smooth`` iterations).
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

CURVES = (("Train/mean_reward", "mean episode return"), ("Metrics/lin_vel_xy_error", "|v_xy* - v_xy| (m/s)"),
          ("Metrics/ang_vel_z_error", "|w_z* - w_z| (rad/s)"))


def read_run(run_dir: str) -> dict[str, np.ndarray]:
    """``{tag: [K, 3] (iteration, value, wall seconds)}`` plus ``"samples"`` [K, 2] (iteration, cumulative)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"no run directory {run_dir}")
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    needed = {"Perf/total_fps", "Perf/collection_time", "Perf/learning_time"}
    if not needed <= set(tags):
        raise ValueError(f"{run_dir}: no rsl_rl performance tags ({sorted(needed - set(tags))} missing)")
    out = {t: np.array([(e.step, e.value, e.wall_time) for e in acc.Scalars(t)]) for t in tags}
    fps, col, learn = (out[t] for t in ("Perf/total_fps", "Perf/collection_time", "Perf/learning_time"))
    n = min(len(fps), len(col), len(learn))
    per_iteration = fps[:n, 1] * (col[:n, 1] + learn[:n, 1])
    out["samples"] = np.stack([fps[:n, 0], np.cumsum(per_iteration)], axis=1)
    t0 = fps[0, 2] - (col[0, 1] + learn[0, 1])
    for t in tags:
        out[t][:, 2] -= t0
    return out


def smooth(x: np.ndarray, k: int) -> np.ndarray:
    if k <= 1 or len(x) < k:
        return x
    return np.convolve(x, np.ones(k) / k, mode="valid")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run directories (with TensorBoard events)")
    parser.add_argument("--labels", nargs="+", default=None)
    parser.add_argument("--out", default="learning_comparison.png")
    parser.add_argument("--smooth", type=int, default=10, help="moving-average window (iterations)")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    labels = args.labels or [os.path.basename(os.path.normpath(r)) for r in args.runs]
    if len(labels) != len(args.runs):
        parser.error("give one label per run")
    runs = {label: read_run(r) for label, r in zip(labels, args.runs)}
    fig, axes = plt.subplots(2, len(CURVES), figsize=(5 * len(CURVES), 8))
    summary = {}
    for label, data in runs.items():
        it_to_samples = dict(zip(data["samples"][:, 0], data["samples"][:, 1]))
        summary[label] = {}
        for col, (tag, name) in enumerate(CURVES):
            if tag not in data:
                continue
            series = data[tag]
            keep = np.isfinite(series[:, 1]) & np.isin(series[:, 0], list(it_to_samples))
            series = series[keep]
            y = smooth(series[:, 1], args.smooth)
            off = len(series) - len(y)
            samples = np.array([it_to_samples[i] for i in series[off:, 0]])
            axes[0, col].plot(samples, y, label=label)
            axes[1, col].plot(series[off:, 2] / 60.0, y, label=label)
            summary[label][tag] = {"final": float(y[-1]), "samples": samples.tolist(), "minutes": (series[off:, 2] / 60).tolist(),
                                   "values": y.tolist()}
    for col, (_, name) in enumerate(CURVES):
        axes[0, col].set_xlabel("samples (env transitions)")
        axes[1, col].set_xlabel("wall-clock (min)")
        for row in range(2):
            axes[row, col].set_ylabel(name)
            axes[row, col].grid(alpha=0.3)
            axes[row, col].legend()
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    print(f"[compare] wrote {args.out}")
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
