"""rsl_rl's :class:`~rsl_rl.utils.logger.Logger`, extended with scalars of our own and a one-line progress print.

rsl_rl's logger writes TensorBoard/W&B/Neptune scalars and prints the per-iteration block (steps, FPS, losses,
mean reward and episode length, ETA). SHAC adds scalars that rsl_rl has no argument for (actor gradient norm
before clipping, value estimates, critic learning rate, skipped updates); they are passed as namespaced extras
(``"Group/name"``), which rsl_rl logs under that tag and prints as ``Group/name: value``.

With the runner config's ``progress = "line"`` (the default of this project's runner configs) the block is
replaced by one line per iteration::

    it   12/400 | reward   3.21 | v_xy err 0.41 m/s | w_z err 0.30 rad/s | ep len  512 | 6,912 steps/s | ETA 0:07:12

(the tracking errors are the env's ``Metrics/lin_vel_xy_error`` and ``Metrics/ang_vel_z_error`` when it logs
them; ``v_x`` in m/s, its ``Metrics/forward_speed``, for the quadruped's forward task). TensorBoard receives the
same scalars either way.

A run trained in chunks (several ``learn()`` calls: the CLI's wall-clock budget) keeps its one TensorBoard writer,
events file and stored code state; each call flushes it at its end.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import statistics

import torch
from rsl_rl.utils.logger import Logger, LogWriter


def _mean_extra(ep_extras: list[dict], key: str) -> float | None:
    values = [float(torch.as_tensor(e[key]).float().mean()) for e in ep_extras if key in e]
    return sum(values) / len(values) if values else None


class TrainingLogger(Logger):
    """rsl_rl ``Logger`` with ``log(..., extra_scalars={"Group/name": value})`` and the one-line progress."""

    def init_logging_writer(self) -> None:
        """rsl_rl's, once per run: a later ``learn()`` of the same run writes on into the open TensorBoard writer."""
        if self.writer is not None and not isinstance(self.writer, LogWriter):
            return
        super().init_logging_writer()

    def stop_logging_writer(self) -> None:
        super().stop_logging_writer()
        if self.writer is not None and hasattr(self.writer, "flush"):
            self.writer.flush()

    def log(self, *args, extra_scalars: dict[str, float] | None = None, **kwargs) -> None:
        """As rsl_rl's ``Logger.log``; ``extra_scalars`` keys must contain a ``/``."""
        if extra_scalars and self.writer is not None:
            for key in extra_scalars:
                if "/" not in key:
                    raise ValueError(f"extra scalar '{key}' needs a 'Group/' prefix")
            self.ep_extras.append({k: float(v) for k, v in extra_scalars.items()})
        if self.writer is None or self.cfg.get("progress", "block") != "line":
            super().log(*args, **kwargs)
            return
        names = ("it", "start_it", "total_it", "collect_time", "learn_time")
        values = dict(zip(names, args), **{k: v for k, v in kwargs.items() if k in names})
        lin = _mean_extra(self.ep_extras, "Metrics/lin_vel_xy_error")
        ang = _mean_extra(self.ep_extras, "Metrics/ang_vel_z_error")
        speed = _mean_extra(self.ep_extras, "Metrics/forward_speed")  # DiffLoco-Quadruped-Forward
        with contextlib.redirect_stdout(io.StringIO()):
            super().log(*args, **kwargs)
        it, total_it = values["it"], values["total_it"]
        # a run trained in chunks (learn_within_budget) announces its whole length in cfg["budget_iterations"]
        total_it = max(total_it, int(self.cfg.get("budget_iterations") or 0))
        iteration_time = values["collect_time"] + values["learn_time"]
        fps = self.cfg["num_steps_per_env"] * self.num_envs * self.gpu_world_size / max(iteration_time, 1e-9)
        recent = getattr(self, "_recent_iteration_times", [])[-9:] + [iteration_time]
        self._recent_iteration_times = recent  # ETA from the last ten iterations (a resumed or chunked run too)
        eta = datetime.timedelta(seconds=int(sum(recent) / len(recent) * (total_it - it - 1)))
        reward = f"{statistics.mean(self.rewbuffer):7.2f}" if self.rewbuffer else "      -"
        length = f"{statistics.mean(self.lenbuffer):5.0f}" if self.lenbuffer else "    -"
        parts = [f"it {it + 1:4d}/{total_it}", f"reward {reward}"]
        if lin is not None:
            parts.append(f"v_xy err {lin:.2f} m/s")
        if ang is not None:
            parts.append(f"w_z err {ang:.2f} rad/s")
        if speed is not None:
            parts.append(f"v_x {speed:.2f} m/s")
        parts += [f"ep len {length}", f"{fps:,.0f} steps/s", f"ETA {eta}"]
        print(" | ".join(parts), flush=True)
