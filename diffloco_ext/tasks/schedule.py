"""Linear ramps of a training setting: ``(start, end)`` counted from an origin (SHAC's iterations from the run's start
or the command curriculum's end; a task's policy steps after the curriculum's end).

Used by the task's reward weights and randomisation ranges (``RewardsCfg.weights_ramp`` and
``weights_curriculum_ramp``, the latter in fractions of the curriculum's progress; ``RandomizationCfg.ranges_ramp``),
its Isaac Lab curriculum term and SHAC's value-gradient and Lipschitz ramps, so that all of them mean the same by a
ramp. Pure Python: importable from the light modules Isaac Lab loads.
"""

from __future__ import annotations


def checked_ramp(name: str, ramp, unit: str = "iterations") -> tuple[int, int]:
    """``ramp`` as ``(start, end)`` integers; a ValueError naming ``name`` unless ``0 <= start <= end``."""
    try:
        out = tuple(int(i) for i in ramp)
    except (TypeError, ValueError):
        out = ()
    if len(out) != 2 or out[0] < 0 or out[1] < out[0]:
        raise ValueError(f"{name} must be (start, end) {unit} with 0 <= start <= end, got {ramp!r}.")
    return out


def checked_fraction_ramp(name: str, ramp) -> tuple[float, float]:
    """``ramp`` as ``(start, end)`` fractions (e.g. of the command curriculum's progress); a ValueError naming
    ``name`` unless ``0 <= start <= end <= 1``."""
    try:
        out = tuple(float(i) for i in ramp)
    except (TypeError, ValueError):
        out = ()
    if len(out) != 2 or not 0.0 <= out[0] <= out[1] <= 1.0:
        raise ValueError(f"{name} must be (start, end) fractions with 0 <= start <= end <= 1, got {ramp!r}.")
    return out


def ramp_fraction(since: float | None, ramp: tuple[float, float]) -> float:
    """How far along ``ramp`` (0 to 1) a count ``since`` the origin is: 0 up to ``start``, 1 from ``end`` on, linear
    between (a step at ``start`` when ``start == end``); 0 before the origin is reached (``since`` None)."""
    if since is None:
        return 0.0
    start, end = ramp
    return 1.0 if since >= end else (0.0 if since <= start else (since - start) / (end - start))


def interpolated_range(initial, full, progress: float) -> tuple[float, ...]:
    """``initial + (full - initial) * progress`` per bound; ``full`` itself (as a tuple) from progress 1 on."""
    if progress >= 1.0:
        return tuple(full)
    return tuple(float(i) + (float(f) - float(i)) * progress for i, f in zip(initial, full))
