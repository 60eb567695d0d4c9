"""Validation backends: a batch of robots that can be reset to given states, driven by joint targets for one
policy step, and read back, in the simulator's conventions (see :mod:`diffloco_ext.sim.model`: ``q`` = base
position (world, m), quaternion (w, x, y, z), joints; ``u`` = base linear velocity (world), angular velocity
(base frame), joint velocities; joints in the description's order). Every backend runs the project's drive model
(PD inside the DC-motor envelope) on the same robot description.

* :class:`SimBackend`: the project's differentiable simulator, here without gradients, in any contact mode
  (``"hard"`` for validation).
* :class:`MujocoBackend`: MuJoCo C on the MJCF exported from the same description, one ``MjData`` per robot,
  the drive torque computed every MuJoCo step (explicit, at MuJoCo's finer step).

The Isaac Lab backend arrives with the Isaac Lab layer, with the same three methods.
"""

from __future__ import annotations

from typing import Protocol

import mujoco
import numpy as np
import torch

from ..assets.mjcf_exporter import to_mjmodel
from ..assets.robot_description import RobotDescription
from ..sim import Simulator
from ..sim.config import SimCfg
from ..sim.torch_bridge import TorchSimulator
from .mujoco_replay import dc_motor_pd_torque


class Backend(Protocol):
    """What a validation backend provides (torch float64 tensors on the CPU)."""

    name: str
    num_envs: int
    policy_dt: float

    def reset(self, q: torch.Tensor, u: torch.Tensor, env_mask: torch.Tensor | None = None) -> None:
        """Put the robots of ``env_mask`` (default: all) into states ``q`` [N, nq], ``u`` [N, nv]."""

    def step(self, joint_target: torch.Tensor) -> None:
        """One policy step holding joint targets [N, n] (rad, description order)."""

    def state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q, u)`` now."""


class SimBackend:
    """The project's simulator (no gradients) as a validation backend."""

    def __init__(self, robot: RobotDescription, num_envs: int, sim_cfg: SimCfg, friction: float = 1.0):
        self.name = f"diffloco-{sim_cfg.contact.mode}"
        self.num_envs = num_envs
        model = sim_cfg.build_model(robot, num_envs, friction=friction)
        self.bridge = TorchSimulator(Simulator.from_cfg(model, sim_cfg))
        self.policy_dt = sim_cfg.policy_dt
        dtype = self.bridge.dtype
        self.q = torch.tensor(model.default_q(), dtype=dtype)
        self.u = torch.zeros(num_envs, model.nv, dtype=dtype)

    def reset(self, q, u, env_mask=None) -> None:
        mask = torch.ones(self.num_envs, dtype=torch.bool) if env_mask is None else env_mask
        self.q = torch.where(mask[:, None], q.to(self.q.dtype), self.q)
        self.u = torch.where(mask[:, None], u.to(self.u.dtype), self.u)

    @torch.no_grad()
    def step(self, joint_target) -> None:
        out = self.bridge.step(self.q, self.u, joint_target.to(self.q.dtype))
        self.q, self.u = out.q.clone(), out.u.clone()

    def state(self):
        return self.q.double(), self.u.double()


class MujocoBackend:
    """MuJoCo C, one ``MjData`` per robot, ``steps_per_policy_step`` MuJoCo steps of ``policy_dt /
    steps_per_policy_step`` each, the drive torque of the project's DC-motor model set every MuJoCo step."""

    def __init__(self, robot: RobotDescription, num_envs: int, policy_dt: float = 0.02,
                 steps_per_policy_step: int = 8, friction: float = 1.0):
        if robot.actuator is None:
            raise ValueError(f"robot '{robot.name}' has no drive model")
        self.name = "mujoco"
        self.robot = robot
        self.num_envs = num_envs
        self.policy_dt = policy_dt
        self.substeps = int(steps_per_policy_step)
        self.model = to_mjmodel(robot, actuators="motor", timestep=policy_dt / self.substeps, friction=friction)
        self.data = [mujoco.MjData(self.model) for _ in range(num_envs)]

    def reset(self, q, u, env_mask=None) -> None:
        q, u = q.detach().double().numpy(), u.detach().double().numpy()
        for e, d in enumerate(self.data):
            if env_mask is None or bool(env_mask[e]):
                mujoco.mj_resetData(self.model, d)
                d.qpos[:] = q[e]
                d.qvel[:] = u[e]
                mujoco.mj_forward(self.model, d)

    def step(self, joint_target) -> None:
        target = joint_target.detach().double().numpy()
        act = self.robot.actuator
        for e, d in enumerate(self.data):
            for _ in range(self.substeps):
                d.ctrl[:] = dc_motor_pd_torque(act, target[e], d.qpos[7:], d.qvel[6:])
                mujoco.mj_step(self.model, d)

    def state(self):
        q = torch.tensor(np.stack([d.qpos for d in self.data]))
        u = torch.tensor(np.stack([d.qvel for d in self.data]))
        return q, u
