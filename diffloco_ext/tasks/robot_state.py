"""Base-frame quantities of a floating-base robot from the simulator's generalised coordinates, in torch
(differentiable), with the conventions of Isaac Lab's articulation data.

``q`` [N, 7 + n]: base position (world, m), base quaternion (w, x, y, z) (base -> world), joint angles (rad),
simulator joint order. ``u`` [N, 6 + n]: base linear velocity of the base frame's origin (world frame, m/s), base
angular velocity (base frame, rad/s), joint velocities (rad/s).

Isaac Lab's ``root_lin_vel_b`` is the velocity of the base's centre of mass in the base frame
(``root_com_lin_vel_b``): ``R^T v_origin + w_b x com_b``. Its ``projected_gravity_b`` is the unit gravity
direction ``(0, 0, -1)`` in the base frame.
"""

from __future__ import annotations

import torch


def quat_rotate_inverse(quat: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``R(quat)^T v`` for unit quaternions ``(w, x, y, z)`` [N, 4] and vectors [N, 3]."""
    w, xyz = quat[:, :1], quat[:, 1:]
    t = 2.0 * torch.linalg.cross(xyz, v, dim=-1)
    return v - w * t + torch.linalg.cross(xyz, t, dim=-1)


def quat_rotate(quat: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``R(quat) v`` for unit quaternions ``(w, x, y, z)`` [N, 4] and vectors [N, 3]."""
    w, xyz = quat[:, :1], quat[:, 1:]
    t = 2.0 * torch.linalg.cross(xyz, v, dim=-1)
    return v + w * t + torch.linalg.cross(xyz, t, dim=-1)


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions ``(w, x, y, z)`` [N, 4] of rotations by ``yaw`` (rad) about the world z axis."""
    zero = torch.zeros_like(yaw)
    return torch.stack((torch.cos(0.5 * yaw), zero, zero, torch.sin(0.5 * yaw)), dim=-1)


def quat_multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a b`` of quaternions ``(w, x, y, z)`` [N, 4]."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack((aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw), dim=-1)


def wrap_to_pi(angle: torch.Tensor) -> torch.Tensor:
    """Angles wrapped to [-pi, pi)."""
    return torch.remainder(angle + torch.pi, 2.0 * torch.pi) - torch.pi


class BaseState:
    """What tasks read of the base at one state ``(q, u)``, all [N, 3] unless said (lazily computed, cached).

    ``base_com`` [N, 3]: the base's centre of mass in the base frame (m; per env, randomised).
    """

    def __init__(self, q: torch.Tensor, u: torch.Tensor, base_com: torch.Tensor):
        self.q, self.u, self.base_com = q, u, base_com
        self.quat = q[:, 3:7]
        self.ang_vel_b = u[:, 3:6]

    @property
    def lin_vel_b(self) -> torch.Tensor:
        """Velocity of the base's centre of mass in the base frame (m/s): Isaac Lab's ``root_lin_vel_b``."""
        return quat_rotate_inverse(self.quat, self.u[:, 0:3]) + torch.linalg.cross(self.ang_vel_b, self.base_com,
                                                                                   dim=-1)

    @property
    def projected_gravity_b(self) -> torch.Tensor:
        """The unit gravity direction ``(0, 0, -1)`` in the base frame."""
        down = torch.zeros_like(self.u[:, 0:3])
        down[:, 2] = -1.0
        return quat_rotate_inverse(self.quat, down)

    @property
    def heading(self) -> torch.Tensor:
        """Yaw of the base's x axis in the world frame (rad) [N]."""
        x_axis = torch.zeros_like(self.u[:, 0:3])
        x_axis[:, 0] = 1.0
        forward = quat_rotate(self.quat, x_axis)
        return torch.atan2(forward[:, 1], forward[:, 0])
