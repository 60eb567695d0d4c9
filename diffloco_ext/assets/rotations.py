"""Small rotation helpers on numpy arrays (asset layer only; the simulator has its own Warp versions).

Conventions: quaternions are ``(w, x, y, z)`` (MuJoCo's order, and this project's everywhere: descriptions,
simulator state, exported MJCF), unit length. Isaac Lab 3.0 orders them ``(x, y, z, w)``
(``isaaclab/utils/math.py``; Isaac Lab 2.x used ``(w, x, y, z)``): convert at that boundary with
:func:`wxyz_to_xyzw` / :func:`xyzw_to_wxyz`, never by hand. Rotation matrices
map vectors from the rotated (child) frame into the reference (parent) frame; URDF ``rpy`` is the fixed-axis
roll-pitch-yaw ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``.
"""

from __future__ import annotations

import numpy as np


def wxyz_to_xyzw(quat):
    """Quaternion(s) ``(..., 4)`` from this project's ``(w, x, y, z)`` to Isaac Lab 3.0's ``(x, y, z, w)``
    (numpy arrays or torch tensors; a new array)."""
    return quat[..., [1, 2, 3, 0]]


def xyzw_to_wxyz(quat):
    """Quaternion(s) ``(..., 4)`` from Isaac Lab 3.0's ``(x, y, z, w)`` to this project's ``(w, x, y, z)``."""
    return quat[..., [3, 0, 1, 2]]


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF roll-pitch-yaw (rad) to a 3x3 rotation matrix ``Rz(y) Ry(p) Rx(r)``."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    return rz @ ry @ rx


def quat_to_matrix(quat) -> np.ndarray:
    """Unit quaternion ``(w, x, y, z)`` to a 3x3 rotation matrix (the quaternion is normalised first)."""
    q = np.asarray(quat, dtype=np.float64)
    norm = np.linalg.norm(q)
    if not np.isfinite(norm) or norm < 1e-12:
        raise ValueError(f"quaternion {tuple(q)} has zero or non-finite norm")
    w, x, y, z = q / norm
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat(rot) -> np.ndarray:
    """3x3 rotation matrix to a unit quaternion ``(w, x, y, z)`` with ``w >= 0``."""
    m = np.asarray(rot, dtype=np.float64)
    trace = np.trace(m)
    if trace > 0.0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = np.array([0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = np.array([(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s])
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = np.array([(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s])
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = np.array([(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s])
    q /= np.linalg.norm(q)
    return -q if q[0] < 0 else q


def principal_inertia_to_matrix(diag_inertia, quat) -> np.ndarray:
    """MuJoCo ``diaginertia`` + ``quat`` of the principal axes to a full 3x3 inertia in the body frame."""
    r = quat_to_matrix(quat)
    return r @ np.diag(np.asarray(diag_inertia, dtype=np.float64)) @ r.T
