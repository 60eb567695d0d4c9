"""What the validation runner reads of a robot state besides the base: foot positions and velocities and the
collision bodies' gaps to the ground, computed with the project's kinematics (float64) from ``(q, u)``, the same
way for every backend (contacts and falls are not taken from the engines, so they mean the same everywhere).

* the ground: the plane z = 0, or a generated terrain (heights bilinear between its nodes, as the simulator's
  height field; its collision gaps on the same height field);
* stance: a foot sphere's bottom within ``stance_height`` (m) of the ground below it (the slip gate counts a foot
  that is there at both ends of a policy step);
* foot slip: the horizontal speed (m/s) of a stance foot's contact point, the material point of the foot sphere
  at its bottom (``centre - r z``), ``v_centre + w_foot x (-r z)``: zero for a foot that rolls on the ground
  without sliding, as a stance foot does while the leg swings over it (its centre then moves at ``r`` times the
  shank's angular velocity: 0.06 m/s at 2 rad/s for ANYmal's 3-cm feet);
* fall: a base collision capsule at or below the ground, or the base origin below ``fall_height`` (m) above the
  ground below it, as the task's termination (base contact);
* body contact: a thigh or shank collision capsule at or below the ground.
"""

from __future__ import annotations

import numpy as np
import torch
import warp as wp

from ..assets.robot_description import RobotDescription
from ..sim import Simulator, build_model
from ..sim.kinematics import KinematicsData, kinematics
from ..sim.stage_data import Sizes


class RobotKinematics:
    """Kinematics of ``num_envs`` copies of ``robot`` (nominal masses: the kinematics do not depend on them) over
    flat ground or ``terrain`` (a :class:`~diffloco_ext.sim.terrain_generator.GeneratedTerrain`)."""

    def __init__(self, robot: RobotDescription, num_envs: int, terrain=None):
        self.robot = robot
        self.terrain = terrain
        self.model = build_model(robot, num_envs, dtype="float64",
                                 terrain=None if terrain is None else terrain.height_field())
        self.sim = Simulator(self.model)
        self.foot_radius = np.array([f.radius for f in robot.feet])
        self.foot_body = np.array([robot.body_index(f.body) for f in robot.feet])
        names = self.model.collision.body_names if self.model.collision is not None else ()
        self.base_bodies = [i for i, n in enumerate(names) if n == robot.bodies[0].name]
        self.limb_bodies = [i for i, n in enumerate(names) if n.endswith(("THIGH", "SHANK"))]

    def _wp(self, x: torch.Tensor) -> wp.array:
        return wp.array(np.ascontiguousarray(x.detach().double().numpy()), dtype=wp.float64, device=self.model.device)

    def feet(self, q: torch.Tensor, u: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Foot sphere centres and velocities (world, m and m/s), each [N, F, 3]."""
        pos, vel = self.sim.foot_kinematics(self._wp(q), self._wp(u))
        return pos.numpy().reshape(q.shape[0], -1, 3), vel.numpy().reshape(q.shape[0], -1, 3)

    def feet_and_contact_velocity(self, q: torch.Tensor, u: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Foot sphere centres, their velocities and the velocities of their lowest material points (the contact
        point on flat ground, ``centre - r z``), world frame (m, m/s, m/s), each [N, F, 3]."""
        pos, vel = self.feet(q, u)
        kin = KinematicsData.scratch(self.model, Sizes.of(self.model), "validation_contact_points")
        kinematics(self.model, self._wp(q), self._wp(u), kin)
        omega = kin.body_vel_ang.numpy()[:, self.foot_body]  # [N, F, 3] world frame (rad/s)
        down = np.zeros_like(omega)
        down[..., 2] = -self.foot_radius
        return pos, vel, vel + np.cross(omega, down)

    def ground_below(self, xy: np.ndarray) -> np.ndarray:
        """The ground's height (m) below world points ``xy`` [..., 2] (m)."""
        if self.terrain is None:
            return np.zeros(xy.shape[:-1])
        return self.terrain.height_at(xy[..., 0], xy[..., 1])

    def foot_heights(self, foot_pos: np.ndarray) -> np.ndarray:
        """Height of each foot sphere's bottom above the ground below it [N, F] (m)."""
        return foot_pos[..., 2] - self.foot_radius - self.ground_below(foot_pos[..., :2])

    def body_gaps(self, q: torch.Tensor) -> np.ndarray:
        """[N, K] signed gaps (m) of the collision bodies to the ground (a non-finite state: the default pose's)."""
        qn = q.detach().double().numpy()
        finite = np.isfinite(qn).all(axis=1)
        safe = torch.as_tensor(np.where(finite[:, None], qn, self.model.default_q()))
        return self.sim.body_gaps(self._wp(safe)).numpy()

    def limb_contact(self, q: torch.Tensor) -> np.ndarray:
        """[N] bool: a thigh or shank collision capsule at or below the ground."""
        if not self.limb_bodies:
            return np.zeros(q.shape[0], dtype=bool)
        return self.body_gaps(q)[:, self.limb_bodies].min(axis=1) <= 0.0

    def fallen(self, q: torch.Tensor, fall_height: float) -> np.ndarray:
        """[N] bool: base collision shape at or below the ground, base below ``fall_height``, or a non-finite
        state (a diverged engine)."""
        qn = q.detach().double().numpy()
        finite = np.isfinite(qn).all(axis=1)
        safe = np.where(finite[:, None], qn, 0.0)
        down = ~finite | (safe[:, 2] - self.ground_below(safe[:, :2]) < fall_height)
        if self.base_bodies:
            down |= self.body_gaps(q)[:, self.base_bodies].min(axis=1) <= 0.0
        return down
