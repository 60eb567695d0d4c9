"""Spatial (6-D) algebra on pairs of 3-vectors, generic over float32/float64 (Warp functions).

All spatial quantities of the simulator are expressed in one frame per environment and time step: world
orientation, origin at the current base position ``O`` (so the robot's distance from the world origin never
costs float32 precision). Conventions (Featherstone's, split in two 3-vectors):

* motion vector ``(w, v)``: angular velocity ``w`` and the velocity ``v`` of the body point passing through ``O``;
* force vector ``(n, f)``: moment ``n`` about ``O`` and force ``f``;
* rigid-body inertia about ``O`` as ``(m, h, J)``: mass, first moment ``h = m c`` (``c`` the centre of mass
  relative to ``O``) and rotational inertia about ``O``, ``J = I_c + m (|c|^2 E - c c^T)``. Composite inertias
  (sums over bodies) have the same form.
"""

from __future__ import annotations

from typing import Any

import warp as wp


@wp.func
def inertia_times_motion(m: Any, h: Any, J: Any, w: Any, v: Any):
    """Momentum ``(n, f)`` of inertia ``(m, h, J)`` moving with ``(w, v)``: ``n = J w + h x v``, ``f = m v + w x h``."""
    return J * w + wp.cross(h, v), v * m + wp.cross(w, h)


@wp.func
def motion_cross_motion(w1: Any, v1: Any, w2: Any, v2: Any):
    """``(w1, v1) x (w2, v2)`` for motion vectors."""
    return wp.cross(w1, w2), wp.cross(w1, v2) + wp.cross(v1, w2)


@wp.func
def motion_cross_force(w: Any, v: Any, n: Any, f: Any):
    """``(w, v) x* (n, f)``: the rate of change of a force vector carried by motion ``(w, v)``."""
    return wp.cross(w, n) + wp.cross(v, f), wp.cross(w, f)


@wp.func
def motion_dot_force(w: Any, v: Any, n: Any, f: Any):
    """Power of force ``(n, f)`` on motion ``(w, v)``."""
    return wp.dot(w, n) + wp.dot(v, f)


@wp.func
def inertia_times_motion_adjoint(m: Any, h: Any, J: Any, w: Any, v: Any, adj_n: Any, adj_f: Any):
    """Adjoint of :func:`inertia_times_motion`: (m_bar, h_bar, J_bar, w_bar, v_bar) for output adjoints
    ``(adj_n, adj_f)``."""
    return (wp.dot(adj_f, v), wp.cross(v, adj_n) + wp.cross(adj_f, w), wp.outer(adj_n, w),
            wp.transpose(J) * adj_n + wp.cross(h, adj_f), wp.cross(adj_n, h) + adj_f * m)
