"""Which gait a policy walks, from its feet's contact states: stride frequency, duty factors, phase offsets, a class.

The measures are Hildebrand's ("Analysis of asymmetrical gaits", J. Mammalogy 1977; "Symmetrical gaits of horses",
Science 1965), computed from a boolean stance sequence per foot (the validation's: the foot's bottom within
``settings.stance_height`` of the ground) over the steps of a **window** (a mask: the steps that count, e.g. those
commanded to move; the events of separate stretches of the window are never paired):

* **footfalls** (touchdowns): a foot in stance at a step and in swing at the step before, both in the window;
* **stride frequency** (Hz): one over the median time between successive footfalls of the same foot;
* **duty factor** per foot: the fraction of the window's steps it is in stance;
* **phase offset** per foot relative to LF (cycle fraction in [0, 1)): each footfall of the foot at ``t`` lies
  between two successive LF footfalls ``t0 <= t < t1``; its phase is ``(t - t0) / (t1 - t0)``; the offset is the
  circular mean of these phases and the **consistency** their mean resultant length (1: always the same phase,
  ~0: no fixed relation).

A window is classified (:func:`classify_offsets`) as the gait whose phase offsets (:data:`TEMPLATES`, offsets of
RF, LH and RH after LF) are nearest in RMS circular distance, if that distance is at most
:data:`MAX_DISTANCE` cycles and every foot's consistency is at least :data:`MIN_CONSISTENCY`; else ``irregular``.
A window in which no foot makes two footfalls is ``stand``; one where some feet step and others do not is
``irregular``. The classes:

| class | offsets RF, LH, RH | |
|---|---|---|
| ``trot`` | 0.5, 0.5, 0 | diagonal pairs |
| ``pace`` | 0.5, 0, 0.5 | lateral pairs |
| ``bound`` | 0, 0.5, 0.5 | front pair, hind pair |
| ``pronk`` | 0, 0, 0 | all four |
| ``gallop`` | d, 0.5, 0.5 + d (transverse); d, 0.5 + d, 0.5 (rotary); 0.08 <= abs(d) <= 0.3 | pairs split |
| ``walk`` | 0.5, 0.75, 0.25 (lateral sequence) or 0.5, 0.25, 0.75 (diagonal sequence) | four beats |
| ``stand`` | | no foot steps |
| ``irregular`` | | none of the above, or no fixed phase relation |

The duty factor does not enter the class (a trot with duty 0.6 is a trot); it is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The feet the offsets refer to, in the order of the measures' arrays (by the first two letters of the names).
LEGS = ("LF", "RF", "LH", "RH")
#: Offsets of RF, LH, RH after LF (cycle fractions) of each class with fixed offsets.
TEMPLATES: dict[str, list[tuple[float, float, float]]] = {
    "trot": [(0.5, 0.5, 0.0)],
    "pace": [(0.5, 0.0, 0.5)],
    "bound": [(0.0, 0.5, 0.5)],
    "pronk": [(0.0, 0.0, 0.0)],
    "walk": [(0.5, 0.75, 0.25), (0.5, 0.25, 0.75)],
    "gallop": [t for d in np.round(np.concatenate([np.arange(-0.30, -0.075, 0.01), np.arange(0.08, 0.305, 0.01)]), 2)
               for t in ((float(d) % 1.0, 0.5, (0.5 + float(d)) % 1.0), (float(d) % 1.0, (0.5 + float(d)) % 1.0, 0.5))],
}
#: Every class a window can get.
CLASSES = ("trot", "pace", "bound", "pronk", "gallop", "walk", "stand", "irregular")
MAX_DISTANCE = 0.1  # cycles: the RMS circular distance to the nearest template up to which a window is that gait
MIN_CONSISTENCY = 0.6  # mean resultant length of a foot's phases below which the pattern has no fixed relation
MIN_FOOTFALLS = 2  # per foot in the window: fewer and the foot does not step


def circular_distance(a, b) -> np.ndarray:
    """The distance of cycle fractions ``a`` and ``b`` on the circle (0 to 0.5)."""
    d = np.mod(np.asarray(a, dtype=float) - np.asarray(b, dtype=float), 1.0)
    return np.minimum(d, 1.0 - d)


def classify_offsets(offsets) -> tuple[str, float]:
    """``(class, distance)``: the template class nearest to the phase offsets of RF, LH, RH after LF (cycle
    fractions; a mapping by leg or a sequence of the three) and its RMS circular distance (cycles); ``irregular``
    beyond :data:`MAX_DISTANCE`."""
    if isinstance(offsets, dict):
        offsets = [offsets[leg] - offsets["LF"] for leg in LEGS[1:]]
    x = np.asarray(offsets, dtype=float)
    best, distance = "irregular", np.inf
    for name, templates in TEMPLATES.items():
        d = np.sqrt(np.mean(circular_distance(x[None, :], np.asarray(templates)) ** 2, axis=1)).min()
        if d < distance:
            best, distance = name, float(d)
    return (best if distance <= MAX_DISTANCE else "irregular"), distance


@dataclass
class GaitMeasure:
    """The gait of one window (see the module docstring); arrays per foot in :data:`LEGS` order."""

    gait: str
    seconds: float  # the window's length (s)
    stride_frequency: float  # Hz (NaN if no foot steps twice)
    duty: np.ndarray  # [4] stance fraction
    phase_offsets: np.ndarray  # [4] cycle fractions after LF (LF: 0; NaN for a foot without footfalls)
    consistency: np.ndarray  # [4] mean resultant length of the phases (LF: 1)
    distance: float  # RMS circular distance to the class's template (cycles; NaN for stand)

    def to_dict(self) -> dict:
        def clean(x):
            return None if not np.isfinite(x) else round(float(x), 4)

        return {"gait": self.gait, "seconds": round(self.seconds, 3), "stride_frequency": clean(self.stride_frequency),
                "duty": [clean(v) for v in self.duty], "phase_offsets": [clean(v) for v in self.phase_offsets],
                "consistency": [clean(v) for v in self.consistency], "distance": clean(self.distance)}


def measure_gait(stance: np.ndarray, dt: float, window: np.ndarray | None = None) -> GaitMeasure:
    """The gait of stance sequences ``stance`` [T, 4] bool (feet in :data:`LEGS` order, one row per step of ``dt``
    s) over the steps of ``window`` [T] bool (all if None)."""
    stance = np.asarray(stance, dtype=bool)
    T, F = stance.shape
    if F != len(LEGS):
        raise ValueError(f"stance must have one column per foot of {LEGS}, got {F}")
    window = np.ones(T, dtype=bool) if window is None else np.asarray(window, dtype=bool)
    stretch = np.cumsum(window & ~np.concatenate([[False], window[:-1]]))  # stretch id of each window step
    nan4 = np.full(F, np.nan)
    seconds = float(window.sum() * dt)
    duty = stance[window].mean(axis=0) if window.any() else nan4.copy()
    # footfalls: swing -> stance between two window steps of the same stretch
    fall = np.zeros_like(stance)
    fall[1:] = stance[1:] & ~stance[:-1] & (window[1:] & window[:-1])[:, None]
    steps = [np.flatnonzero(fall[:, f]) for f in range(F)]
    stepping = [len(s) >= MIN_FOOTFALLS for s in steps]
    intervals = np.concatenate([np.diff(s)[stretch[s[1:]] == stretch[s[:-1]]] for s in steps if len(s) > 1]
                               + [np.zeros(0)])
    frequency = 1.0 / (np.median(intervals) * dt) if len(intervals) else np.nan
    if not any(stepping):
        return GaitMeasure("stand", seconds, frequency, duty, nan4.copy(), nan4.copy(), np.nan)
    offsets, consistency = nan4.copy(), nan4.copy()
    offsets[0], consistency[0] = 0.0, 1.0
    lf = steps[0]
    for f in range(1, F):
        phases = []
        for t in steps[f]:
            k = np.searchsorted(lf, t, side="right")  # lf[k - 1] <= t < lf[k]
            if 0 < k < len(lf) and stretch[lf[k - 1]] == stretch[t] == stretch[lf[k]]:
                phases.append((t - lf[k - 1]) / (lf[k] - lf[k - 1]))
        if phases:
            z = np.mean(np.exp(2j * np.pi * np.asarray(phases)))
            offsets[f], consistency[f] = np.mod(np.angle(z) / (2 * np.pi), 1.0), abs(z)
    if not all(stepping) or not np.all(np.isfinite(offsets)):
        return GaitMeasure("irregular", seconds, frequency, duty, offsets, consistency, np.nan)
    gait, distance = classify_offsets(offsets[1:])
    if consistency.min() < MIN_CONSISTENCY:
        gait = "irregular"
    return GaitMeasure(gait, seconds, frequency, duty, offsets, consistency, distance)


def gait_summary(measures: list[GaitMeasure], expected: str | None = None) -> dict:
    """A scenario's gait over its measured windows: the share of each class, the median stride frequency, the mean
    duty per foot, the circular mean phase offsets per foot and, with ``expected``, ``mismatch``: the share of
    windows not classified as ``expected`` (NaN without windows)."""
    n = len(measures)
    share = {c: (sum(m.gait == c for m in measures) / n if n else float("nan")) for c in CLASSES}
    freq = [m.stride_frequency for m in measures if np.isfinite(m.stride_frequency)]
    duty = np.array([m.duty for m in measures]) if n else np.full((1, len(LEGS)), np.nan)
    offsets = np.array([m.phase_offsets for m in measures]) if n else np.full((1, len(LEGS)), np.nan)
    with np.errstate(invalid="ignore"):
        mean_offsets = [float(np.mod(np.angle(np.nanmean(np.exp(2j * np.pi * offsets[:, f]))) / (2 * np.pi), 1.0))
                        if np.isfinite(offsets[:, f]).any() else float("nan") for f in range(len(LEGS))]
        mean_duty = [float(np.nanmean(duty[:, f])) if np.isfinite(duty[:, f]).any() else float("nan")
                     for f in range(len(LEGS))]
    out = {"windows": n, "share": share, "stride_frequency": float(np.median(freq)) if freq else float("nan"),
           "duty": mean_duty, "phase_offsets": mean_offsets}
    if expected is not None:
        out["expected"] = expected
        out["mismatch"] = 1.0 - share[expected] if n else float("nan")
    return out
