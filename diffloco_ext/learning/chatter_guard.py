"""Chatter guard: watch the actions' rate of change during SHAC training and roll the learner back when it chatters.

A SHAC run can tip into *chatter*: actions that alternate from one policy step to the next (e.g. seed 1 of the
ANYmal D main job after its command curriculum, docs/tasks.md sessions 27-28). The smoothed contact of the training
simulator tolerates it; hard contact and MuJoCo do not, and once the late action-rate penalties ramp in, a
chattering policy settles into standing rather than walking smoothly. Such a run is path-dependent: resumed from
a checkpoint before the onset with other random numbers it walked on without chattering.

The guard measures, per iteration, the **action rate**: the RMS over joints of ``a_t - a_(t-1)`` (raw action
units, the actions the env applied), averaged over the horizon's steps and all envs of all ranks, skipping the
step pairs across a reset. This is the validation's ``action_rate`` (:mod:`diffloco_ext.validation.gates`), here on
the training rollouts (their exploration noise included). Its level depends on the task and the stage of training
(the ANYmal D main job: 0.8-1.2 early in its curriculum on seed 42, 0.15-0.3 at its end), so the guard watches its
*rise*: from the curriculum's end on, it keeps as the baseline the lowest mean rate over ``snapshot_interval``
iterations, and takes an in-memory snapshot of the learner (actor, critic, target critic, their normalisers, both
optimisers) every ``snapshot_interval`` iterations, labelled with the mean rate of the 5 iterations after it (the
rollouts of that learner, near enough). When the rate of every one of the last ``patience`` iterations exceeds both
``max_rise`` x the baseline and ``min_action_rate`` (a rise that lasts: some 20 iterations after the curriculum's
end, as the critic's gradient has ramped in, the rate of a run that goes on to walk smoothly can triple for about
20 iterations; a run that chatters stays up for hundreds), it

1. restores the newest snapshot whose label is at most halfway from the baseline to that level (the learner before
   the rise), else the one with the lowest label,
2. multiplies the actor's learning rate by ``learning_rate_factor`` and the weight of the critic's gradient in the
   actor's objective (SHAC's ``value_gradient_scale``) by ``value_gradient_factor`` for the rest of the run; the
   env, its curriculum, the random streams and the iteration count go on, so the restored learner meets new
   rollouts and the schedules keep their clock,

at most ``max_rollbacks`` times (then it only logs). Off (``max_rise=None``), the rate is still measured and
logged (``Policy/action_rate``) and the run is the same to the bit as without the guard.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass

import torch


@dataclass
class RollbackEvent:
    """What a rollback did: the iteration it fired at (0-based, the iteration just completed), the mean action rate
    over the window that fired it, the snapshot's iteration (the learner's state after that many iterations), the
    actor learning-rate scale from now on and the run's rollback count."""

    iteration: int
    action_rate: float
    restored_iteration: int
    learning_rate_scale: float
    rollbacks: int


class ChatterGuard:
    """Measures the action rate of each iteration and rolls the learner back when it chatters (module docstring).

    Args:
        max_rise: the guard fires when the action rate of each of the last ``patience`` iterations exceeds this
            factor times the baseline (the lowest mean over ``snapshot_interval`` iterations since watching began)
            and ``min_action_rate``; None: measure and log only.
        min_action_rate: rate (RMS action change per policy step, raw action units) at or below which the guard
            never fires, whatever the rise.
        patience: iterations in the moving window of the rate (the rise must last this long).
        snapshot_interval: iterations between snapshots of the learner while watching (and of the baseline's means).
        learning_rate_factor: the actor's learning rate is multiplied by this at every rollback.
        value_gradient_factor: the weight of the bootstrap values' gradient in the actor's objective is multiplied by
            this at every rollback.
        max_rollbacks: rollbacks allowed in a run; after them the guard only logs.
        max_snapshots: snapshots kept (the newest).
        after_curriculum: watch only once the env's curriculum is complete (before it the actions change fast while
            the policy learns to walk, and the rate falls as it learns).
        is_distributed: sum the rate over the data-parallel ranks (every rank then decides the same).
    """

    def __init__(self, max_rise: float | None = None, min_action_rate: float = 0.0, patience: int = 30,
                 snapshot_interval: int = 10, learning_rate_factor: float = 0.5, value_gradient_factor: float = 1.0,
                 max_rollbacks: int = 3,
                 max_snapshots: int = 10, after_curriculum: bool = True, is_distributed: bool = False) -> None:
        if max_rise is not None and not max_rise > 1.0:
            raise ValueError(f"chatter_guard.max_rise must be > 1 or None, got {max_rise}.")
        if not min_action_rate >= 0.0:
            raise ValueError(f"chatter_guard.min_action_rate must be >= 0, got {min_action_rate}.")
        for name, value in (("patience", patience), ("snapshot_interval", snapshot_interval),
                            ("max_snapshots", max_snapshots)):
            if int(value) < 1:
                raise ValueError(f"chatter_guard.{name} must be >= 1, got {value}.")
        if int(max_rollbacks) < 0:
            raise ValueError(f"chatter_guard.max_rollbacks must be >= 0, got {max_rollbacks}.")
        for name, value in (("learning_rate_factor", learning_rate_factor),
                            ("value_gradient_factor", value_gradient_factor)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"chatter_guard.{name} must be in (0, 1], got {value}.")
        self.max_rise = None if max_rise is None else float(max_rise)
        self.min_action_rate = float(min_action_rate)
        self.patience = int(patience)
        self.snapshot_interval = int(snapshot_interval)
        self.learning_rate_factor = float(learning_rate_factor)
        self.value_gradient_factor = float(value_gradient_factor)
        self.max_rollbacks = int(max_rollbacks)
        self.after_curriculum = bool(after_curriculum)
        self.is_distributed = bool(is_distributed)
        #: Rollbacks so far in this run (kept in checkpoints).
        self.rollbacks = 0
        #: Lowest mean rate over ``snapshot_interval`` iterations since watching began (None: not yet measured).
        self.baseline: float | None = None
        #: Iterations after a snapshot whose mean rate is its learner's rate.
        self.label_iterations = min(5, self.snapshot_interval)
        self._window: deque[float] = deque(maxlen=self.patience)  # the firing test
        self._recent: deque[float] = deque(maxlen=self.snapshot_interval)  # the baseline's means
        self._snapshots: deque[dict] = deque(maxlen=int(max_snapshots))  # {"iteration", "after": rates, "state"}
        self._begin()

    @property
    def enabled(self) -> bool:
        return self.max_rise is not None

    @property
    def learning_rate_scale(self) -> float:
        """The actor learning rate's factor after this run's rollbacks: ``learning_rate_factor ** rollbacks``."""
        return self.learning_rate_factor ** self.rollbacks

    def firing_level(self) -> float:
        """The rate above which the guard fires now (inf before the baseline is measured)."""
        if self.baseline is None:
            return float("inf")
        return max(self.max_rise * self.baseline, self.min_action_rate)

    # ---- per step ----------------------------------------------------------------------------------------------
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

    # ---- per iteration -----------------------------------------------------------------------------------------
    def end_iteration(self, alg, iteration: int,
                      curriculum_complete: bool = True) -> tuple[float, RollbackEvent | None]:
        """Close iteration ``iteration`` (0-based, its update done): the iteration's action rate (NaN if it had no
        step pair) and the rollback it fired, if any. ``alg`` is the SHAC learner (``save``/``load``)."""
        totals = torch.tensor([float(self._sum), float(self._count)], dtype=torch.float64)
        if self.is_distributed:
            torch.distributed.all_reduce(totals)
        self._begin()
        rate = float(totals[0] / totals[1]) if totals[1] > 0 else float("nan")
        if not self.enabled or not (curriculum_complete or not self.after_curriculum) or rate != rate:
            return rate, None
        done = iteration + 1  # the learner's state is now that after ``done`` iterations
        self._window.append(rate)
        self._recent.append(rate)
        for snapshot in self._snapshots:  # the rates of the iterations after a snapshot are its learner's
            if len(snapshot["after"]) < self.label_iterations:
                snapshot["after"].append(rate)
        if len(self._recent) == self._recent.maxlen:
            recent = sum(self._recent) / len(self._recent)
            self.baseline = recent if self.baseline is None else min(self.baseline, recent)
        if len(self._window) == self.patience and min(self._window) > self.firing_level():
            # every iteration of the window above the level: a rise that lasts (a transient passes)
            if self.rollbacks < self.max_rollbacks and self._labelled():
                windowed = sum(self._window) / len(self._window)
                restored = self._restore(alg)
                self.rollbacks += 1
                self._apply(alg)
                self._window.clear()
                self._recent.clear()
                return rate, RollbackEvent(iteration, windowed, restored, self.learning_rate_scale, self.rollbacks)
        if done % self.snapshot_interval == 0:
            self._snapshots.append({"iteration": done, "after": [], "state": copy.deepcopy(alg.save())})
        return rate, None

    def _labelled(self) -> list[dict]:
        """Snapshots whose learner's rate is known (``label_iterations`` iterations after them), oldest first."""
        return [s for s in self._snapshots if len(s["after"]) == self.label_iterations]

    @staticmethod
    def _rate_of(snapshot: dict) -> float:
        return sum(snapshot["after"]) / len(snapshot["after"])

    def _restore(self, alg) -> int:
        """Load the newest labelled snapshot whose learner's rate was at most halfway from the baseline to the
        firing level (else the one with the lowest rate); drop the newer ones. Returns its iteration."""
        healthy = 0.5 * (self.baseline + self.firing_level())
        labelled = self._labelled()
        candidates = [s for s in labelled if self._rate_of(s) <= healthy]
        snapshot = candidates[-1] if candidates else min(labelled, key=self._rate_of)
        skipped = (alg.skipped_actor_updates, alg.skipped_critic_updates)
        alg.load(copy.deepcopy(snapshot["state"]), {"actor": True, "critic": True, "optimizer": True}, strict=True)
        alg.skipped_actor_updates, alg.skipped_critic_updates = skipped  # counters of the whole run
        while self._snapshots and self._snapshots[-1]["iteration"] > snapshot["iteration"]:
            self._snapshots.pop()
        snapshot["after"] = []  # relabelled by the restored learner's new rollouts
        return snapshot["iteration"]

    # ---- checkpoints -------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The run's rollback count (the snapshots stay in memory: a resumed run takes new ones)."""
        return {"rollbacks": self.rollbacks}

    def load_state_dict(self, state: dict, alg=None) -> None:
        """Take a checkpoint's rollback count (and, with ``alg``, set its actor learning-rate scale from it)."""
        self.rollbacks = int(state.get("rollbacks", 0))
        if alg is not None:
            self._apply(alg)

    def _apply(self, alg) -> None:
        """Set the learner's factors after ``rollbacks`` rollbacks."""
        alg.actor_learning_rate_scale = self.learning_rate_scale
        alg.value_gradient_scale_factor = self.value_gradient_factor ** self.rollbacks
