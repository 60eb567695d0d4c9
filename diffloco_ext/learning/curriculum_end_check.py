"""Curriculum-end check: the action rate of a SHAC run's rollouts as its command curriculum ends, with a warning.

A SHAC run on the ANYmal D velocity task can end standing still: once the command curriculum is done, the late
penalties (action rate, joint speed, foot slip, torque saturation) and the validation's wide randomisation come in,
and a policy whose gait chatters then settles into standing rather than into a smooth walk (docs/design.md:
curriculum-end check). The training rollouts' action rate (the RMS action change per policy step, raw action units;
:class:`ActionRate` measures it) over the curriculum's last 50 iterations, read in ten runs (2 x 32 to 2 x 128 envs,
two actor sizes, five seeds): the five at 0.20-0.25 walked; of the five above 0.35, three ended standing (0.39, 0.49,
1.56), one walked roughly (0.47) and one (the main job's seed 1, 0.36) walks since the randomisation is ramped in
(docs/design.md: randomisation after the curriculum) and stood before it. The standing shows in the tracking error
100-200 iterations later; this check reports the rate when the curriculum completes and warns above
``warn_action_rate``, so that a user can stop the run and try another seed. It changes nothing in the run.

The curriculum completes at the first iteration the env's ``curriculum_progress`` is 1 after one where it was below
(a run resumed after the curriculum's end, or an env without a curriculum, never reports).
"""

from __future__ import annotations

import math
from collections import deque

import torch


class ActionRate:
    """The training rollouts' action rate of each iteration: the RMS over joints of ``a_t - a_(t-1)`` (raw action
    units, the actions the env applied), averaged over the iteration's steps and all envs of all ranks, skipping the
    step pairs across a reset. The validation's ``action_rate`` (:mod:`diffloco_ext.validation.gates`), here on the
    training rollouts (their exploration noise included).

    Args:
        is_distributed: sum the rate over the data-parallel ranks (every rank then has the same value).
    """

    def __init__(self, is_distributed: bool = False) -> None:
        self.is_distributed = bool(is_distributed)
        self._begin()

    def _begin(self) -> None:
        self._previous: torch.Tensor | None = None
        self._previous_done: torch.Tensor | None = None
        self._sum: torch.Tensor | float = 0.0  # tensors on the actions' device: no host sync per step
        self._count: torch.Tensor | float = 0.0

    def observe(self, actions: torch.Tensor, dones: torch.Tensor) -> None:
        """One policy step: ``actions`` ``(N, A)`` as applied, ``dones`` ``(N,)`` of the step they led to."""
        actions = actions.detach()
        if self._previous is not None:
            keep = ~self._previous_done  # an env reset after the previous step starts over: no pair across it
            rms = torch.sqrt(torch.mean((actions - self._previous) ** 2, dim=1))
            self._sum = self._sum + torch.where(keep, rms, torch.zeros_like(rms)).sum(dtype=torch.float64)
            self._count = self._count + keep.sum(dtype=torch.float64)
        self._previous = actions
        self._previous_done = dones.to(torch.bool).detach().clone()

    def end_iteration(self) -> float:
        """Close the iteration: its action rate (NaN if it had no step pair). A collective with ``is_distributed``:
        every rank calls it at the same iterations."""
        totals = torch.tensor([float(self._sum), float(self._count)], dtype=torch.float64)
        if self.is_distributed:
            torch.distributed.all_reduce(totals)
        self._begin()
        return float(totals[0] / totals[1]) if totals[1] > 0 else float("nan")


class CurriculumEndCheck:
    """Keeps the action rates of the iterations before the curriculum completes; reports their mean at its end.

    Args:
        window: iterations whose mean rate is reported (the last ``window`` before the curriculum completes, or as
            many as the run saw).
        warn_action_rate: :meth:`warns` when the reported mean exceeds this (raw action units per policy step);
            None: report only.
    """

    def __init__(self, window: int = 50, warn_action_rate: float | None = None) -> None:
        if int(window) < 1:
            raise ValueError(f"curriculum_end_check.window must be >= 1, got {window}.")
        if warn_action_rate is not None and not (math.isfinite(warn_action_rate) and warn_action_rate > 0.0):
            raise ValueError(f"curriculum_end_check.warn_action_rate must be a number > 0 or None, got "
                             f"{warn_action_rate}.")
        self.window = int(window)
        self.warn_action_rate = None if warn_action_rate is None else float(warn_action_rate)
        #: The mean action rate over the curriculum's last ``window`` iterations, once it has completed (None before).
        self.rate_at_end: float | None = None
        #: Iterations the mean is over.
        self.iterations = 0
        self._rates: deque[float] = deque(maxlen=self.window)
        self._seen_incomplete = False

    def observe(self, action_rate: float, curriculum_complete: bool) -> float | None:
        """One iteration's action rate (NaN: no step pair, skipped) and whether the curriculum was complete for it.
        Returns the mean over the window at the iteration the curriculum completes, else None."""
        if self.rate_at_end is not None:
            return None
        if not curriculum_complete:
            self._seen_incomplete = True
            if action_rate == action_rate:
                self._rates.append(float(action_rate))
            return None
        if not self._seen_incomplete or not self._rates:
            return None
        self.iterations = len(self._rates)
        self.rate_at_end = sum(self._rates) / self.iterations
        return self.rate_at_end

    def warns(self) -> bool:
        """Whether the rate at the curriculum's end exceeds ``warn_action_rate``."""
        return (self.warn_action_rate is not None and self.rate_at_end is not None
                and self.rate_at_end > self.warn_action_rate)

    def message(self, iteration: int) -> str:
        """The runner's line for the iteration (0-based) at which the curriculum completed."""
        line = (f"[diffloco] curriculum complete at iteration {iteration + 1}: action rate {self.rate_at_end:.3f} "
                f"over its last {self.iterations} iterations")
        if self.warns():
            line += (f"\n[diffloco] WARNING: above {self.warn_action_rate:g}: the gait chatters; three of five such "
                     f"runs ended standing still once the late penalties came in (docs/design.md: curriculum-end "
                     f"check): watch the tracking error over the next 200 iterations, or train another seed")
        return line
