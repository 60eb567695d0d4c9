"""The aligned step (Song, Kim, Scaramuzza, arXiv 2403.14864): an accurate, non-differentiable simulator forward,
a differentiable surrogate backward, the surrogate's state aligned with the accurate one at every step.

For each env, from the state ``s_t = (q, u)`` and the joint targets ``a_t``:

* the accurate engine gives ``s_acc = F(s_t, a_t)`` (values only): MuJoCo (:mod:`.mujoco_engine`, ``engine
  "mujoco"``) or the project's own hard contact without a tape (``engine "hard"``);
* the surrogate gives ``s_sur = f(s_t, a_t)``, differentiable, evaluated at the accurate ``s_t``:
  ``"simplified"`` (:mod:`.fixed_contact_surrogate`: frozen inertia and contact mode, the feet in contact taken
  from ``s_acc``) or ``"smoothed"`` (the project's simulator with its smoothed contact, one policy step);
* the step returns ``s_{t+1} = s_sur + stop_grad(s_acc - s_sur)``: its value is exactly the accurate engine's (to
  the bit: a custom autograd op returns ``s_acc`` and passes the gradient to ``s_sur``), its Jacobian the
  surrogate's. The drive torque is aligned the same way.

The foot positions and velocities and the collision bodies' gaps are computed from ``s_{t+1}`` with the
simulator's kinematics (differentiable: their values are the accurate state's, their gradients chain into the
surrogate's). Contact states are the accurate state's: a foot sphere's bottom within ``contact_height`` (m) of the
ground. :class:`AlignedSimulator` has :class:`~.torch_bridge.TorchSimulator`'s ``step`` and returns its
:class:`~.torch_bridge.StepOutput`, so a task runs on it unchanged; it works in float64 (the accurate engines'
precision: a step's value is the engine's to the bit).

Divergence: an env the engine flags (non-finite, beyond the speed or distance guard, MuJoCo's bad-acceleration
reset) is held at its input state and reported in ``StepOutput.diverged``; the task resets and counts it.
"""

from __future__ import annotations

import numpy as np
import torch
import warp as wp

from .body_contacts import body_gaps_torch
from .config import ENGINES as CONFIG_ENGINES, SURROGATES
from .contact import ContactParams
from .fixed_contact_surrogate import FixedContactSurrogate
from .foot_kinematics import foot_kinematics_torch
from .mujoco_engine import EngineStep, MujocoEngine
from .simulator import Simulator
from .torch_bridge import StepOutput, TorchSimulator

ENGINES = tuple(e for e in CONFIG_ENGINES if e != "warp")  # the accurate engines


class _Aligned(torch.autograd.Function):
    """``s_sur + stop_grad(s_acc - s_sur)`` with the value exactly ``s_acc`` (the sum rounds in floating point)."""

    @staticmethod
    def forward(ctx, surrogate: torch.Tensor, accurate: torch.Tensor) -> torch.Tensor:
        return accurate.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


class SimulatorEngine:
    """The project's simulator as an accurate engine: hard contact (or another mode), float64, no tape."""

    def __init__(self, model, dt: float, substeps: int, contact: ContactParams | str = "hard"):
        self.bridge = TorchSimulator(Simulator(model, dt=dt, contact=contact, substeps=substeps))

    def step(self, q, u, joint_target, params) -> EngineStep:
        with torch.no_grad():
            out = self.bridge.step(q, u, joint_target, params=params)
        return EngineStep(out.q.numpy(), out.u.numpy(), out.joint_torque.numpy().copy(), out.diverged.numpy().copy())


class AlignedSimulator:
    """One aligned policy step per :meth:`step` (see the module docstring).

    ``sim``: a float64 :class:`~.simulator.Simulator` of the task's model (its kinematics, parameters and, for
    ``"smoothed"``, its contact settings and time step); ``engine``: ``"mujoco"`` or ``"hard"``; ``engine_dt``
    (s): MuJoCo's time step (a divisor of the policy step); ``threads``: MuJoCo's rollout threads."""

    def __init__(self, sim: Simulator, engine: str = "mujoco", surrogate: str = "smoothed",
                 engine_dt: float = 0.0025, threads: int | None = None, contact_height: float = 0.01,
                 max_speed: float = 1.0e3, max_distance: float = 1.0e4):
        model = sim.model
        if engine not in ENGINES:
            raise ValueError(f"unknown accurate engine {engine!r}: use one of {ENGINES}")
        if surrogate not in SURROGATES:
            raise ValueError(f"unknown surrogate {surrogate!r}: use one of {SURROGATES}")
        if model.dtype != wp.float64:
            raise ValueError("the aligned step runs in float64 (the accurate engine's values to the bit): build "
                             "its simulator with dtype='float64'")
        if surrogate == "smoothed" and sim.contact.mode != "smoothed":
            raise ValueError(f"surrogate 'smoothed' differentiates the simulator's smoothed contact; its contact "
                             f"mode is {sim.contact.mode!r}")
        field = model.terrain.field if model.terrain is not None and model.terrain.kind != "flat" else None
        if engine == "mujoco" and field is not None and abs(field.step[0] - field.step[1]) > 1e-12:
            raise ValueError(f"MuJoCo's height field has one grid spacing; this terrain's is {field.step} m")
        if engine == "mujoco" and np.any(model.ground_height.numpy() != 0.0):
            raise ValueError("the MuJoCo engine's ground is at z = 0 (or the terrain's heights); this model's "
                             "ground_height is not 0")
        self._field = field
        self.sim = sim
        self.engine_name, self.surrogate_name = engine, surrogate
        self.contact_height = float(contact_height)
        self.bridge = TorchSimulator(sim)  # parameters, and the smoothed surrogate's step
        self.dtype, self.device = self.bridge.dtype, self.bridge.device
        self._nominal = {k: v.clone() for k, v in self.bridge.parameters().items()}
        self._robot = model.robot
        self._foot_radius = torch.tensor([f.radius for f in model.robot.feet], dtype=self.dtype)
        self._ground = torch.as_tensor(model.ground_height.numpy(), dtype=self.dtype)
        if engine == "mujoco":
            steps = round(sim.policy_dt / engine_dt)
            if steps < 1 or abs(steps * engine_dt - sim.policy_dt) > 1e-9:
                raise ValueError(f"engine_dt {engine_dt} s does not divide the policy step {sim.policy_dt} s")
            terrain = None if field is None else (field.node_heights(), tuple(field.origin[:2]), field.step[0])
            self.engine = MujocoEngine(model.robot, model.num_envs, policy_dt=sim.policy_dt,
                                       steps_per_policy_step=steps, threads=threads, max_speed=max_speed,
                                       max_distance=max_distance, terrain=terrain)
            self._engine_params: dict[str, np.ndarray] | None = None
        else:
            self.engine = SimulatorEngine(model, sim.dt, sim.substeps, "hard")
        self.surrogate = FixedContactSurrogate(sim, sim.substeps, sim.dt) if surrogate == "simplified" else None

    def parameters(self) -> dict[str, torch.Tensor]:
        """The model's per-env parameter tensors (as :meth:`TorchSimulator.parameters`)."""
        return self.bridge.parameters()

    def _all_params(self, params: dict[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
        own = self.bridge.parameters()
        return {k: (params[k] if params is not None and k in params else v) for k, v in own.items()}

    def _sync_engine(self, params: dict[str, torch.Tensor]) -> None:
        """MuJoCo's per-env parameters from the task's (only the envs whose values changed): friction, the base's
        mass, centre of mass and inertia relative to the simulator's nominal ones, the drive gains."""
        nom, eng = self._nominal, self.engine
        mass = params["body_mass"][:, 0].detach().numpy()
        values = {
            "friction": params["friction"].detach().numpy().reshape(-1),
            "base_mass": eng.base_mass * mass / nom["body_mass"][:, 0].numpy(),
            "base_com": eng.base_com + (params["body_com"][:, 0] - nom["body_com"][:, 0]).detach().numpy(),
            "base_inertia_scale": (torch.diagonal(params["body_inertia"][:, 0], dim1=-2, dim2=-1).sum(-1)
                                   / torch.diagonal(nom["body_inertia"][:, 0], dim1=-2, dim2=-1).sum(-1))
            .detach().numpy(),
            "stiffness": params["joint_stiffness"].detach().numpy(),
            "damping": params["joint_damping"].detach().numpy()}
        last = self._engine_params
        if last is None:
            changed = np.ones(eng.num_envs, dtype=bool)
        else:
            changed = np.zeros(eng.num_envs, dtype=bool)
            for k, v in values.items():
                changed |= (v != last[k]).reshape(eng.num_envs, -1).any(axis=1)
        if changed.any():
            eng.set_parameters(changed, **values)
            self._engine_params = {k: v.copy() for k, v in values.items()}

    def contact_of(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Foot gaps [N, F] (m: sphere bottom above the ground) at ``q`` and the feet within ``contact_height``."""
        pos, _ = foot_kinematics_torch(self.sim, q.detach(), torch.zeros(q.shape[0], self.sim.model.nv,
                                                                          dtype=q.dtype))
        ground = self._ground[:, None]
        if self._field is not None:  # the terrain's height below each foot (its bilinear surface)
            xy = pos[..., :2].numpy()
            ground = ground + torch.as_tensor(self._field.height_at(xy[..., 0], xy[..., 1]), dtype=pos.dtype)
        gap = pos[..., 2] - self._foot_radius - ground
        return gap, gap <= self.contact_height

    def step(self, q: torch.Tensor, u: torch.Tensor, joint_target: torch.Tensor,
             joint_torque: torch.Tensor | None = None, params: dict[str, torch.Tensor] | None = None) -> StepOutput:
        """One aligned policy step (``joint_torque``, a feed-forward torque, is not supported: must be None)."""
        if joint_torque is not None:
            raise ValueError("the aligned step takes joint targets only (no feed-forward joint torque)")
        N, dt = self.sim.model.num_envs, self.dtype
        for name, t in (("q", q), ("u", u), ("joint_target", joint_target)):
            if t.dtype != dt:
                raise TypeError(f"{name}: expected dtype {dt} (the aligned step's precision), got {t.dtype}")
        p = self._all_params(params)
        if self.engine_name == "mujoco":
            self._sync_engine(p)
            acc = self.engine.step(q.detach().numpy(), u.detach().numpy(), joint_target.detach().numpy())
        else:
            acc = self.engine.step(q.detach(), u.detach(), joint_target.detach(), p)
        q_acc, u_acc = torch.from_numpy(acc.q), torch.from_numpy(acc.u)
        tau_acc = torch.from_numpy(acc.joint_torque)
        diverged = torch.from_numpy(acc.diverged)
        gap, contact = self.contact_of(q_acc)
        differentiable = torch.is_grad_enabled() and any(
            t.requires_grad for t in (q, u, joint_target, *p.values()))
        if not differentiable:
            q_next, u_next, tau = q_acc, u_acc, tau_acc
        else:
            if self.surrogate is not None:
                consts = self.surrogate.constants(q, u, p, contact)
                q_sur, u_sur, tau_sur = self.surrogate.step(q, u, joint_target, p["joint_stiffness"],
                                                            p["joint_damping"], consts)
            else:
                out = self.bridge.step(q, u, joint_target, params=params)
                q_sur, u_sur, tau_sur = out.q, out.u, out.joint_torque
            q_next, u_next, tau = (_Aligned.apply(sur, acc) for sur, acc in ((q_sur, q_acc), (u_sur, u_acc),
                                                                                 (tau_sur, tau_acc)))
        foot_pos, foot_vel = foot_kinematics_torch(self.sim, q_next, u_next)
        gaps = (body_gaps_torch(self.sim, q_next) if self.sim.model.collision is not None
                else torch.zeros(N, 0, dtype=dt))
        force = torch.zeros(N, self.sim.model.num_feet, 3, dtype=dt)
        return StepOutput(q_next, u_next, foot_pos, foot_vel, force, diverged, contact.to(dt), gap, tau, gaps)
