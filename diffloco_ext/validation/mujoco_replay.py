"""MuJoCo replay of a robot under the project's drive model (PD inside the DC-motor envelope).

MJCF cannot express the DC-motor torque-speed line, so the robot is exported with torque motors and the torque
is computed here every MuJoCo step from the same formula as :mod:`diffloco_ext.sim.actuators`.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..assets.mjcf_exporter import to_mjmodel
from ..assets.robot_description import ActuatorParams, RobotDescription


def dc_motor_pd_torque(actuator: ActuatorParams, target: np.ndarray, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """``clip(k_p (q* - q) - k_d qd, tau_min(qd), tau_max(qd))`` with Isaac Lab's DC-motor envelope (N·m)."""
    tau = actuator.stiffness * (target - q) - actuator.damping * qd
    hi = np.clip(actuator.saturation_effort * (1.0 - qd / actuator.velocity_limit), 0.0, actuator.effort_limit)
    lo = np.clip(actuator.saturation_effort * (-1.0 - qd / actuator.velocity_limit), -actuator.effort_limit, 0.0)
    return np.clip(tau, lo, hi)


class MujocoReplay:
    """One robot on MuJoCo's floor, stepped at ``dt`` (s) with ``substeps`` MuJoCo steps per control step.

    ``state`` follows the simulator's conventions (``q`` = base position, quaternion (w, x, y, z), joints in the
    description's order; ``u`` = world linear velocity, base-frame angular velocity, joint velocities), which are
    MuJoCo's free-joint conventions too.
    """

    def __init__(self, robot: RobotDescription, dt: float = 0.005, substeps: int = 1, friction: float = 1.0):
        self.robot = robot
        self.substeps = int(substeps)
        self.model = to_mjmodel(robot, actuators="motor", timestep=dt / self.substeps, friction=friction)
        self.data = mujoco.MjData(self.model)
        self._feet = [self.model.geom(f.name).id for f in robot.feet]

    def reset(self, q: np.ndarray, u: np.ndarray | None = None) -> None:
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = q
        self.data.qvel[:] = 0.0 if u is None else u
        mujoco.mj_forward(self.model, self.data)

    def step(self, joint_target: np.ndarray) -> None:
        """One control step holding ``joint_target`` (rad, description order)."""
        for _ in range(self.substeps):
            self.data.ctrl[:] = dc_motor_pd_torque(self.robot.actuator, joint_target, self.data.qpos[7:],
                                                   self.data.qvel[6:])
            mujoco.mj_step(self.model, self.data)

    @property
    def q(self) -> np.ndarray:
        return self.data.qpos.copy()

    @property
    def u(self) -> np.ndarray:
        return self.data.qvel.copy()

    def foot_positions(self) -> np.ndarray:
        """Foot sphere centres in the world [F, 3] (m)."""
        return self.data.geom_xpos[self._feet].copy()
