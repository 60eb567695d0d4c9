"""Collision primitives (sphere, capsule, cylinder, box) as capsules that lie inside them.

The simulator's body-terrain gaps (:mod:`diffloco_ext.sim.body_contacts`) know capsules only (a sphere is a
capsule of zero length). Sources describe bodies with boxes and cylinders; this module replaces each primitive by
a few capsules *inside* it, so a capsule touching the ground means the source primitive touches it too (never a
false contact), and the capsules reach the primitive's faces at their centres (no contact missed by more than
the rounding stated below). Frames: a primitive is placed in its body frame by a rotation ``rot`` (3x3, its
local axes as columns) and a position ``pos`` (m); cylinders and capsules have their axis along local ``z``.
All lengths in m.

* sphere (radius r): itself.
* capsule (radius r, half-length h of the segment): itself.
* cylinder (radius r, half-length h of the cylinder):

  - ``h >= r`` (long): one capsule of radius ``r`` along the axis, segment half-length ``h - r``. Exact on the
    side and at the centres of the end faces; the rims are rounded (a rim point lies ``r (sqrt 2 - 1)`` from
    the capsule).
  - ``h < r`` (a disc): three capsules of radius ``h`` along diameters at 0°, 60° and 120°, segment half-length
    ``r - h``. Exact at both faces' centres and at six rim points; half-way between those the rim lies
    ``|(r cos 30°, r sin 30°) - (r - h, 0)| - h`` from the capsules (1.2 cm for ANYmal D's knee drives,
    r = 7.1 cm, h = 2.9 cm).

* box (half extents ``l >= m >= s`` after sorting its axes): ``n = min(1 + 2 ceil((m - s) / s), 5)`` capsules
  (an odd number) of radius ``s`` along the longest axis (segment half-length ``l - s``), their axes spread
  evenly over ``[-(m - s), m - s]`` along the middle axis. Exact at all six face centres; the box's edges and
  corners are rounded (by up to ``s (sqrt 3 - 1)`` at corners), and between neighbouring capsules the two
  largest faces dip by ``s - sqrt(s^2 - d^2/4)`` (d the spacing: at most 0.13 s when ``n`` is not capped; thin
  plates, where the cap applies, are covered by strips).
"""

from __future__ import annotations

import math

import numpy as np

MAX_BOX_CAPSULES = 5

Capsule = tuple[np.ndarray, np.ndarray, float]  # start, end (body frame, m), radius (m)


def _placed(rot: np.ndarray, pos: np.ndarray, a: np.ndarray, b: np.ndarray, radius: float) -> Capsule:
    return rot @ a + pos, rot @ b + pos, float(radius)


def sphere_capsules(radius: float, rot: np.ndarray, pos: np.ndarray) -> list[Capsule]:
    return [(np.asarray(pos, dtype=np.float64).copy(), np.asarray(pos, dtype=np.float64).copy(), float(radius))]


def capsule_capsules(radius: float, half_length: float, rot: np.ndarray, pos: np.ndarray) -> list[Capsule]:
    axis = np.array([0.0, 0.0, half_length])
    return [_placed(rot, pos, -axis, axis, radius)]


def cylinder_capsules(radius: float, half_length: float, rot: np.ndarray, pos: np.ndarray) -> list[Capsule]:
    r, h = float(radius), float(half_length)
    if h >= r:
        return capsule_capsules(r, h - r, rot, pos)
    out = []
    for k in range(3):
        angle = k * math.pi / 3.0
        d = (r - h) * np.array([math.cos(angle), math.sin(angle), 0.0])
        out.append(_placed(rot, pos, -d, d, h))
    return out


def box_capsules(half_extents, rot: np.ndarray, pos: np.ndarray) -> list[Capsule]:
    half = np.asarray(half_extents, dtype=np.float64)
    order = np.argsort(-half, kind="stable")  # longest, middle, smallest
    long_axis, mid_axis = order[0], order[1]
    l, m, s = half[order]
    count = min(1 + 2 * math.ceil((m - s) / s - 1e-12), MAX_BOX_CAPSULES)  # odd: one capsule on the centre line
    offsets = [0.0] if count == 1 else np.linspace(-(m - s), m - s, count)
    out = []
    for offset in offsets:
        centre = np.zeros(3)
        centre[mid_axis] = offset
        along = np.zeros(3)
        along[long_axis] = l - s
        out.append(_placed(rot, pos, centre - along, centre + along, s))
    return out


def primitive_capsules(kind: str, size, rot=None, pos=None) -> list[Capsule]:
    """Capsules inside one primitive. ``size``: sphere ``(r,)``, capsule and cylinder ``(r, half_length)``, box
    ``(hx, hy, hz)`` half extents (MuJoCo's ``geom_size`` convention); ``rot``/``pos`` place it in the body."""
    rot = np.eye(3) if rot is None else np.asarray(rot, dtype=np.float64)
    pos = np.zeros(3) if pos is None else np.asarray(pos, dtype=np.float64)
    size = [float(v) for v in np.atleast_1d(size)]
    if kind == "sphere":
        return sphere_capsules(size[0], rot, pos)
    if kind == "capsule":
        return capsule_capsules(size[0], size[1], rot, pos)
    if kind == "cylinder":
        return cylinder_capsules(size[0], size[1], rot, pos)
    if kind == "box":
        return box_capsules(size[:3], rot, pos)
    raise ValueError(f"no capsule approximation for primitive '{kind}' (sphere, capsule, cylinder, box)")
