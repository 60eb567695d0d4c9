"""rsl_rl's :class:`~rsl_rl.utils.logger.Logger`, extended with scalars of our own.

rsl_rl's logger writes TensorBoard/W&B/Neptune scalars and prints the per-iteration block (steps, FPS, losses,
mean reward and episode length, ETA). SHAC adds scalars that rsl_rl has no argument for (actor gradient norm
before clipping, value estimates, critic learning rate, skipped updates); they are passed as namespaced extras
(``"Group/name"``), which rsl_rl logs under that tag and prints as ``Group/name: value``.
"""

from __future__ import annotations

from rsl_rl.utils.logger import Logger


class TrainingLogger(Logger):
    """rsl_rl ``Logger`` with ``log(..., extra_scalars={"Group/name": value})``."""

    def log(self, *args, extra_scalars: dict[str, float] | None = None, **kwargs) -> None:
        """As rsl_rl's ``Logger.log``; ``extra_scalars`` keys must contain a ``/``."""
        if extra_scalars and self.writer is not None:
            for key in extra_scalars:
                if "/" not in key:
                    raise ValueError(f"extra scalar '{key}' needs a 'Group/' prefix")
            self.ep_extras.append({k: float(v) for k, v in extra_scalars.items()})
        super().log(*args, **kwargs)
