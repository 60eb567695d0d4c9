"""The validation's contact-point velocity: the velocity of the foot sphere's lowest material point, checked against a
central finite difference of that point's position along the state's velocity, and zero for a foot that rolls."""

from __future__ import annotations

import numpy as np
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim.kinematics import KinematicsData, kinematics
from diffloco_ext.sim.stage_data import Sizes
from diffloco_ext.tasks.robot_state import quat_multiply
from diffloco_ext.validation.robot_kinematics import RobotKinematics


def _advance(q: torch.Tensor, u: torch.Tensor, eps: float) -> torch.Tensor:
    """``q`` moved for ``eps`` seconds at constant ``u`` (world linear velocity, base-frame angular velocity,
    joint velocities; MuJoCo's free-joint convention)."""
    q = q.clone()
    q[:, :3] += eps * u[:, :3]
    w = u[:, 3:6] * eps
    angle = torch.linalg.norm(w, dim=1, keepdim=True)
    axis = w / angle.clamp(min=1e-300)
    turn = torch.cat((torch.cos(angle / 2), axis * torch.sin(angle / 2)), dim=1)
    q[:, 3:7] = quat_multiply(q[:, 3:7], turn)
    q[:, 7:] += eps * u[:, 6:]
    return q


def _body_rotations(kin: RobotKinematics, q: torch.Tensor) -> np.ndarray:
    data = KinematicsData.allocate(kin.model, Sizes.of(kin.model))
    kinematics(kin.model, kin._wp(q), kin._wp(torch.zeros(q.shape[0], kin.model.nv, dtype=torch.float64)), data)
    return data.body_rot.numpy()[:, kin.foot_body]  # [N, F, 3, 3] body -> world


def _random_state(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    robot = get_robot("anymal_d")
    q = torch.zeros(n, 7 + robot.num_joints, dtype=torch.float64)
    q[:, :3] = torch.rand(n, 3, generator=gen, dtype=torch.float64)
    quat = torch.randn(n, 4, generator=gen, dtype=torch.float64)
    q[:, 3:7] = quat / torch.linalg.norm(quat, dim=1, keepdim=True)
    q[:, 7:] = torch.as_tensor(robot.default_joint_positions()) + 0.4 * torch.randn(n, robot.num_joints, generator=gen,
                                                                                    dtype=torch.float64)
    u = torch.randn(n, 6 + robot.num_joints, generator=gen, dtype=torch.float64)
    return q, u


def test_contact_point_velocity_is_the_lowest_material_points_velocity():
    robot = get_robot("anymal_d")
    kin = RobotKinematics(robot, 4)
    q, u = _random_state(4)
    pos, centre_vel, contact_vel = kin.feet_and_contact_velocity(q, u)
    # the lowest point now, fixed in each foot's body frame
    rot = _body_rotations(kin, q)
    down = np.zeros(pos.shape)
    down[..., 2] = -kin.foot_radius
    in_body = np.einsum("nfji,nfj->nfi", rot, down)

    def point(qq: torch.Tensor) -> np.ndarray:
        return kin.feet(qq, u)[0] + np.einsum("nfij,nfj->nfi", _body_rotations(kin, qq), in_body)

    eps = 1e-6
    fd = (point(_advance(q, u, eps)) - point(_advance(q, u, -eps))) / (2 * eps)
    np.testing.assert_allclose(contact_vel, fd, atol=1e-7)
    # the centre's velocity differs from it by w x (-r z): ~r |w| here, far above the tolerance
    assert np.abs(centre_vel - contact_vel).max() > 1e-3


def test_a_rolling_foot_does_not_slip_but_its_centre_moves():
    """A foot whose body turns about the contact point (the leg pivoting over a planted foot): the whole robot
    rotated about the foot's contact point on the ground. Its centre moves at r times the rate; its contact
    point stands still."""
    robot = get_robot("anymal_d")
    kin = RobotKinematics(robot, 1)
    q = torch.as_tensor(kin.model.default_q(), dtype=torch.float64)[:1].clone()
    pos, _ = kin.feet(q, torch.zeros(1, kin.model.nv, dtype=torch.float64))
    contact = pos[0, 0] - np.array([0.0, 0.0, kin.foot_radius[0]])  # LF foot's lowest point
    omega = np.array([0.0, 2.0, 0.0])  # rad/s about world y, through the contact point
    u = torch.zeros(1, kin.model.nv, dtype=torch.float64)
    base = q[0, :3].numpy()
    u[0, :3] = torch.as_tensor(np.cross(omega, base - contact))  # the base origin's velocity of that rigid rotation
    u[0, 3:6] = torch.as_tensor(omega)  # the default pose has an identity base orientation: world = base frame
    _, centre_vel, contact_vel = kin.feet_and_contact_velocity(q, u)
    np.testing.assert_allclose(contact_vel[0, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(centre_vel[0, 0, :2]), 2.0 * kin.foot_radius[0], rtol=1e-9)
