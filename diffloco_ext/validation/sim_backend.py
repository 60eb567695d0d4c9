"""The project's own simulator as a validation backend (no gradients), in any contact mode (``"hard"`` for
validation, the task's ``"smoothed"`` as the training-simulator reference of the joint-trajectory figure).

Per-env parameters (:class:`~.backends.EnvParameters`) are written into the model's per-env arrays through the
torch bridge's zero-copy views: ``friction``; ``body_mass[:, 0]`` = nominal + payload (centre of mass and
inertia untouched); ``joint_stiffness``/``joint_damping`` = nominal x scale.
"""

from __future__ import annotations

import torch

from ..assets.robot_description import RobotDescription
from ..sim import Simulator
from ..sim.config import SimCfg
from ..sim.contact import ContactParams
from ..sim.torch_bridge import TorchSimulator
from .backends import EnvParameters


class SimBackend:
    """``num_envs`` robots in the project's simulator with the settings of ``sim_cfg`` (its ``substeps``
    physics steps of ``dt`` per policy step), on flat ground or ``terrain`` (a generated terrain: its height
    field)."""

    def __init__(self, robot: RobotDescription, num_envs: int, sim_cfg: SimCfg, friction: float = 1.0,
                 name: str | None = None, terrain=None):
        self.name = name or f"diffloco-{sim_cfg.contact.mode}"
        self.robot = robot
        self.num_envs = num_envs
        model = sim_cfg.build_model(robot, num_envs, friction=friction,
                                    terrain=None if terrain is None else terrain.height_field())
        self.bridge = TorchSimulator(Simulator.from_cfg(model, sim_cfg))
        self.policy_dt = sim_cfg.policy_dt
        dtype = self.bridge.dtype
        self.q = torch.tensor(model.default_q(), dtype=dtype)
        self.u = torch.zeros(num_envs, model.nv, dtype=dtype)
        self._torque = torch.zeros(num_envs, robot.num_joints, dtype=torch.float64)
        views = self.bridge.parameters()
        self._nominal = {k: views[k].clone() for k in ("body_mass", "joint_stiffness", "joint_damping")}

    def set_parameters(self, params: EnvParameters) -> None:
        params.check(self.num_envs, self.robot)
        views = self.bridge.parameters()

        def put(name, value):
            views[name].copy_(torch.as_tensor(value).to(views[name].dtype).reshape(views[name].shape))

        put("friction", params.friction)
        mass = self._nominal["body_mass"].clone()
        mass[:, 0] += torch.as_tensor(params.payload_kg, dtype=mass.dtype)
        put("body_mass", mass)
        put("joint_stiffness", self._nominal["joint_stiffness"] * torch.as_tensor(params.stiffness_scale)[:, None])
        put("joint_damping", self._nominal["joint_damping"] * torch.as_tensor(params.damping_scale)[:, None])

    def reset(self, q, u, env_mask=None) -> None:
        mask = torch.ones(self.num_envs, dtype=torch.bool) if env_mask is None else env_mask
        self.q = torch.where(mask[:, None], q.to(self.q.dtype), self.q)
        self.u = torch.where(mask[:, None], u.to(self.u.dtype), self.u)

    @torch.no_grad()
    def step(self, joint_target) -> None:
        out = self.bridge.step(self.q, self.u, joint_target.to(self.q.dtype))
        self.q, self.u = out.q.clone(), out.u.clone()
        self._torque = out.joint_torque.double().clone()

    def state(self):
        return self.q.double().clone(), self.u.double().clone()

    def joint_torque(self) -> torch.Tensor:
        return self._torque.clone()

    def close(self) -> None:
        pass


def make_backend(robot: RobotDescription, num_envs: int, *, policy_dt: float, sim_dt: float, friction: float = 1.0,
                 contact: str = "hard", dtype: str = "float64", name: str | None = None, terrain=None) -> SimBackend:
    """The registry's factory: ``policy_dt / sim_dt`` physics steps of ``sim_dt`` per policy step (must divide)."""
    substeps = round(policy_dt / sim_dt)
    if substeps < 1 or abs(substeps * sim_dt - policy_dt) > 1e-9:
        raise ValueError(f"policy_dt {policy_dt} s is not a multiple of sim_dt {sim_dt} s")
    cfg = SimCfg(dt=sim_dt, substeps=substeps, contact=ContactParams(contact), dtype=dtype)
    return SimBackend(robot, num_envs, cfg, friction=friction, name=name or contact, terrain=terrain)
