"""The ``simplified`` surrogate of the aligned step (:mod:`.aligned_step`): rigid-body dynamics with the contact
mode and the inertia frozen over a policy step, differentiable and free of contact switches.

Song et al. (arXiv 2403.14864) backpropagate through "a simplified model" that has no contact discontinuities and
take the contact states from the accurate simulator. This model keeps the whole robot (floating base and legs)
and simplifies the contact and the configuration dependence instead:

* at the accurate state ``(q_t, u_t)`` of the step's start, and held constant over the step: the joint-space inertia
  ``H`` and bias forces ``h`` (gravity, Coriolis; the simulator's CRBA and RNEA with the env's parameters), and the
  foot-centre Jacobians ``J_f`` (world frame, [3, nv] each);
* the feet the accurate simulator has in contact at the step's end (``contact`` [N, F]: the foot sphere's bottom
  within ``contact_height`` of the ground) are held in place: bilateral velocity constraints ``J_c u = 0``, no
  friction cone, no unilateral switch, no impact; the other feet are free;
* the drives are the project's PD inside the DC-motor envelope (:meth:`~..assets.robot_description.ActuatorParams.
  pd_torque`), evaluated at every substep (differentiable: the envelope's clip passes no gradient where it binds).

Each of ``substeps`` steps of ``dt`` (s) is then linear in ``u`` and the drive torque ``tau``::

    u+ = P (u + dt H^-1 (S tau - h)),   P = I - H^-1 J_c^T (J_c H^-1 J_c^T)^-1 J_c

(``S`` puts the joint torques on the joint coordinates; ``P`` the projection onto the constraint-consistent
velocities: the velocity after the constraint impulse), followed by a semi-implicit position update (base position
``+= dt v`` in the world, quaternion ``q (x) exp(w dt / 2)`` with ``w`` in the base frame, first order and
renormalised; joints ``+= dt qd``). Its Jacobian w.r.t. the state and the targets is what the learner sees; its
values are replaced by the accurate simulator's. How close that Jacobian is to finite differences of MuJoCo and of
the smoothed simulator, in stance and in swing: ``docs/learning.md`` (``scripts/experiments/surrogate_jacobians.py``).
"""

from __future__ import annotations

import torch
import warp as wp

from .foot_kinematics import foot_kinematics
from .model import RANDOMIZABLE
from .step_data import StepData


class FixedContactSurrogate:
    """The surrogate of a float64 :class:`~.simulator.Simulator` ``sim`` (its model: the robot, its per-env
    parameters and kinematics), ``substeps`` steps of ``dt`` (s) per policy step."""

    def __init__(self, sim, substeps: int, dt: float):
        model = sim.model
        if model.dtype != wp.float64:
            raise ValueError("the simplified surrogate runs in float64: build its simulator with dtype='float64'")
        self.sim, self.model = sim, model
        self.substeps, self.dt = int(substeps), float(dt)
        self.actuator = model.robot.actuator
        self._data = StepData.allocate(model, requires_grad=False)
        self._groups = self._column_groups()

    def _column_groups(self) -> list[list[tuple[int, list[int]]]]:
        """Velocity coordinates in groups whose foot velocities do not overlap (a leg's joints move its own foot
        only): one kinematics pass per group gives all its Jacobian columns. Each entry ``(coordinate, feet it
        moves)``, found at a random configuration (structural zeros only)."""
        m = self.model
        gen = torch.Generator().manual_seed(0)
        q = torch.as_tensor(m.default_q(), dtype=torch.float64)
        q[:, 7:] += 0.3 * torch.rand(q[:, 7:].shape, generator=gen, dtype=torch.float64)
        J = self._columns(q, [[k] for k in range(m.nv)])[0]
        groups: list[list[tuple[int, list[int]]]] = []
        for k in range(m.nv):
            feet = [f for f in range(m.num_feet) if bool(J[f, :, k].abs().max() > 0)]
            for group in groups:
                if not set(feet) & {f for _, fs in group for f in fs}:
                    group.append((k, feet))
                    break
            else:
                groups.append([(k, feet)])
        return groups

    def _columns(self, q: torch.Tensor, groups) -> torch.Tensor:
        """``J`` [N, F, 3, nv] from one foot-kinematics pass per group of coordinates (unit velocities summed)."""
        m = self.model
        N, nv, F = q.shape[0], m.nv, m.num_feet
        q_wp = wp.from_torch(q.detach().contiguous(), dtype=m.dtype)
        J = torch.zeros(N, F, 3, nv, dtype=q.dtype)
        for group in groups:
            e = torch.zeros(N, nv, dtype=q.dtype)
            coordinates = [k if isinstance(k, int) else k[0] for k in group]
            e[:, coordinates] = 1.0
            _, vel = foot_kinematics(m, q_wp, wp.from_torch(e, dtype=m.dtype))
            vel = wp.to_torch(vel).reshape(N, F, 3)
            for entry in group:
                if isinstance(entry, int):
                    J[:, :, :, entry] = vel
                else:
                    k, feet = entry
                    J[:, feet, :, k] = vel[:, feet]
        return J

    def constants(self, q: torch.Tensor, u: torch.Tensor, params: dict[str, torch.Tensor],
                  contact: torch.Tensor) -> dict[str, torch.Tensor]:
        """The step's constants at the state ``(q, u)`` (values only) with the per-env ``params`` (tensors by
        :data:`~.model.RANDOMIZABLE` name) and the feet held in place ``contact`` [N, F] (bool): ``P`` [N, nv, nv],
        ``B = dt P H^-1 S`` [N, nv, n] and ``c = -dt P H^-1 h`` [N, nv]."""
        m = self.model
        N, nv, F = m.num_envs, m.nv, m.num_feet
        with torch.no_grad():
            arrays = {k: wp.from_torch(v.detach().contiguous(), dtype=getattr(m, k).dtype)
                      for k, v in params.items() if k in RANDOMIZABLE}
            model = m.with_parameters(arrays)
            q_wp = wp.from_torch(q.detach().contiguous(), dtype=m.dtype)
            u_wp = wp.from_torch(u.detach().contiguous(), dtype=m.dtype)
            self.sim._dynamics(model, q_wp, u_wp, self._data)
            H = wp.to_torch(self._data.H).clone().reshape(N, nv, nv)
            h = wp.to_torch(self._data.bias).clone().reshape(N, nv)
            J = self.foot_jacobians(q)  # [N, F, 3, nv]
            Hinv = torch.cholesky_inverse(torch.linalg.cholesky(H))
            held = contact.to(q.dtype).repeat_interleave(3, dim=1)  # [N, 3F]
            Jc = J.reshape(N, 3 * F, nv) * held[:, :, None]
            W = Jc @ Hinv @ Jc.transpose(1, 2) + torch.diag_embed(1.0 - held + 1e-9)
            P = torch.eye(nv, dtype=q.dtype) - Hinv @ Jc.transpose(1, 2) @ torch.linalg.solve(W, Jc)
            PHinv = P @ Hinv
            return {"P": P, "B": self.dt * PHinv[:, :, 6:], "c": -self.dt * (PHinv @ h[:, :, None])[:, :, 0]}

    def foot_jacobians(self, q: torch.Tensor) -> torch.Tensor:
        """``J`` [N, F, 3, nv] with ``foot_vel = J u`` (world frame, foot sphere centres) at ``q`` (values)."""
        return self._columns(q, self._groups)

    def step(self, q: torch.Tensor, u: torch.Tensor, joint_target: torch.Tensor, stiffness: torch.Tensor,
             damping: torch.Tensor, constants: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor,
                                                                               torch.Tensor]:
        """``(q, u, tau)`` after one policy step from ``(q, u)`` holding ``joint_target`` [N, n] (rad) with drive
        gains ``stiffness``, ``damping`` ([N, n]), differentiable w.r.t. all of them; ``tau`` [N, n] is the drive
        torque averaged over the substeps (N m)."""
        P, B, c = constants["P"], constants["B"], constants["c"]
        total = torch.zeros_like(joint_target)
        for _ in range(self.substeps):
            tau = self.actuator.pd_torque(joint_target, q[:, 7:], u[:, 6:], stiffness=stiffness, damping=damping)
            total = total + tau
            u = (P @ u[:, :, None] + B @ tau[:, :, None])[:, :, 0] + c
            q = integrate(q, u, self.dt)
        return q, u, total / self.substeps


def integrate(q: torch.Tensor, u: torch.Tensor, dt: float) -> torch.Tensor:
    """Semi-implicit position update by ``dt`` (s) with the velocities ``u`` (conventions of :mod:`.model`): base
    position ``+= dt v`` (world), quaternion (w, x, y, z) ``q + dt/2 q (x) (0, w_b)`` renormalised, joints
    ``+= dt qd``."""
    quat, w = q[:, 3:7], u[:, 3:6]
    qw, qv = quat[:, :1], quat[:, 1:]
    dw = -(qv * w).sum(dim=1, keepdim=True)
    dv = qw * w + torch.cross(qv, w, dim=1)
    quat = quat + 0.5 * dt * torch.cat((dw, dv), dim=1)
    quat = quat / torch.linalg.norm(quat, dim=1, keepdim=True)
    return torch.cat((q[:, :3] + dt * u[:, :3], quat, q[:, 7:] + dt * u[:, 6:]), dim=1)
