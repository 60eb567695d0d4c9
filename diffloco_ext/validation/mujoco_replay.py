"""MuJoCo replay of a robot under the project's drive model (PD inside the DC-motor envelope).

MJCF cannot express the DC-motor torque-speed line, so the robot is exported with torque motors and the torque
is computed here every MuJoCo step from the DC-motor formula at the step's start velocity
(:func:`dc_motor_pd_torque`, explicit). The simulator takes the envelope at the end-of-step velocity
(:mod:`diffloco_ext.sim.actuators`); :func:`dc_motor_implicit` is the numpy twin of that stage, checked against it
in ``tests/validation``. The replay stays explicit because the drop-and-stand comparison is within its tolerances
with it (measured with the implicit simulator: base 7.1 mm max / 0.6 mm at rest, feet 7.9 / 0.5 mm), while
applying the implicit semantics in MuJoCo (``ctrl = tau_A + b qd``, ``dof_damping += b``, mass-matrix diagonal
from ``mj_fullM``) settled on a stance 1.6 mm off ours (sticking feet keep the touchdown transient's history).
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..assets.mjcf_exporter import to_mjmodel
from ..assets.robot_description import ActuatorParams, RobotDescription


def dc_motor_pd_torque(actuator: ActuatorParams, target: np.ndarray, q: np.ndarray, qd: np.ndarray,
                       stiffness: np.ndarray | float | None = None,
                       damping: np.ndarray | float | None = None) -> np.ndarray:
    """``clip(k_p (q* - q) - k_d qd, tau_min(qd), tau_max(qd))`` with Isaac Lab's DC-motor envelope (N·m).

    ``stiffness``/``damping``: gains broadcastable to ``q`` (e.g. [N, 1] per env) in place of the actuator's."""
    return actuator.pd_torque(target, q, qd, stiffness=stiffness, damping=damping)


def dc_motor_implicit(actuator: ActuatorParams, target: np.ndarray, q: np.ndarray, qd: np.ndarray, dt: float,
                      mass_diag: np.ndarray, other_force: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(tau_A, b)`` of the drives (N·m, N·m·s/rad; numpy twin of :mod:`diffloco_ext.sim.actuators`): the torque
    applied over a step of ``dt`` is ``tau_A - b (qd_E - qd)``. ``mass_diag`` is the joints' diagonal of the mass
    matrix (kg m^2) and ``other_force`` the other smooth generalised forces on the joints (``-bias - d qd``, N·m),
    used by the predictor that picks the envelope's piece at the end-of-step velocity."""
    S, E, v = actuator.saturation_effort, actuator.effort_limit, actuator.velocity_limit
    raw = actuator.stiffness * (target - q) - actuator.damping * qd
    c = dt / mass_diag
    w0 = qd + c * other_force
    w_raw = w0 + c * raw
    upper = np.clip(S * (1.0 - w_raw / v), 0.0, E)
    lower = np.clip(S * (-1.0 - w_raw / v), -E, 0.0)
    tau = raw.copy()
    slope = np.zeros_like(raw)
    start = dc_motor_pd_torque(actuator, target, q, qd)
    for side, bound in ((1.0, upper), (-1.0, lower)):
        active = raw * side > bound * side
        effort = active & (side * S * (side - (w0 + side * c * E) / v) >= E)
        zero = active & ~effort & (side * S * (side - w0 / v) <= 0.0)
        line = active & ~effort & ~zero
        tau = np.where(effort, side * E, np.where(zero, 0.0, np.where(line, start, tau)))
        slope = np.where(line, S / v, slope)
    return tau, slope


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
