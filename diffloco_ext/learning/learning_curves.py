"""Learning curves of a training run, read from its TensorBoard events (the rsl_rl tags both learners write)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

#: (tag, y-axis label) of the three panels: return, planar and yaw tracking errors in the training simulator
PANELS = (("Train/mean_reward", "mean episode return"),
          ("Metrics/lin_vel_xy_error", "|v_xy* - v_xy| (m/s)"),
          ("Metrics/ang_vel_z_error", "|w_z* - w_z| (rad/s)"))


def read_scalars(log_dir: str) -> dict[str, np.ndarray]:
    """Every scalar series of the run's TensorBoard events, every sample kept: tag -> array [n, 3] of (iteration,
    value, wall-clock time in s since the epoch)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0})
    acc.Reload()
    return {t: np.array([(e.step, e.value, e.wall_time) for e in acc.Scalars(t)]) for t in acc.Tags()["scalars"]}


def plot_learning_curves(log_dir: str, out: str, title: str) -> dict[str, float]:
    """Write the run's return and tracking errors against the iteration as a PNG at ``out``; returns the last value of
    each tracking error (tag -> value) that the run logged."""
    series = read_scalars(log_dir)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 4))
    for ax, (tag, label) in zip(axes, PANELS):
        if tag in series:
            ax.plot(series[tag][:, 0], series[tag][:, 1])
        ax.set_xlabel("iteration")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return {t: float(series[t][-1, 1]) for t, _ in PANELS[1:] if t in series}
