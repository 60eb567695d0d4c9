"""The Moreau time step as a pipeline of stages, and the ``Simulator`` that runs it.

One step of length ``dt`` (paper A, see ``shared/notes/paper.md``)::

    q_M = q_A + dt/2 u_A                                   half step to the midpoint      (integrator)
    kinematics, H(q_M), bias(q_M, u_A)                     forward kinematics, CRBA, RNEA (kinematics, mass_matrix, bias_forces)
    tau = PD/DC-motor(q_M, u_A, control)                   actuation                      (actuators)
    u_E = u_A + H^-1 dt (tau - bias)                       Cholesky solve                 (cholesky)
    q_E = q_A + dt/2 (u_A + u_E)                           trapezoidal position update    (integrator)

``step(state_in, control, state_out)`` never mutates ``state_in``. With a ``wp.Tape`` every intermediate is a
fresh array (kept for the backward pass); without one, buffers are reused.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import warp as wp

from .actuators import actuator_kernels
from .bias_forces import bias_force_kernels
from .cholesky import cholesky_factor, solve_with_factor
from .integrator import integrator_kernels
from .kinematics import kinematics_kernels
from .mass_matrix import mass_matrix_kernels
from .model import Model
from .state import Control, State
from .warp_setup import warp_types


@dataclass
class StepData:
    """Intermediate results of one step (shapes in the stage modules). Kept per step for backward passes."""

    q_mid: wp.array
    body_rot: wp.array
    body_pos: wp.array
    dof_ang: wp.array
    dof_lin: wp.array
    body_vel_ang: wp.array
    body_vel_lin: wp.array
    inertia_m: wp.array
    inertia_h: wp.array
    inertia_J: wp.array
    composite_m: wp.array
    composite_h: wp.array
    composite_J: wp.array
    H: wp.array
    L: wp.array
    body_acc_ang: wp.array
    body_acc_lin: wp.array
    body_force_ang: wp.array
    body_force_lin: wp.array
    subtree_force_ang: wp.array
    subtree_force_lin: wp.array
    bias: wp.array
    tau: wp.array
    rhs: wp.array
    du: wp.array

    @staticmethod
    def allocate(model: Model, requires_grad: bool) -> "StepData":
        t = warp_types(model.dtype)
        N, B, n, nv = model.num_envs, model.num_bodies, model.num_joints, model.nv
        shapes = {
            "q_mid": ((N, model.nq), model.dtype),
            "body_rot": ((N, B), t.mat33), "body_pos": ((N, B), t.vec3),
            "dof_ang": ((N, nv), t.vec3), "dof_lin": ((N, nv), t.vec3),
            "body_vel_ang": ((N, B), t.vec3), "body_vel_lin": ((N, B), t.vec3),
            "inertia_m": ((N, B), model.dtype), "inertia_h": ((N, B), t.vec3), "inertia_J": ((N, B), t.mat33),
            "composite_m": ((N, B), model.dtype), "composite_h": ((N, B), t.vec3),
            "composite_J": ((N, B), t.mat33),
            "H": ((N, nv, nv), model.dtype), "L": ((N, nv, nv), model.dtype),
            "body_acc_ang": ((N, B), t.vec3), "body_acc_lin": ((N, B), t.vec3),
            "body_force_ang": ((N, B), t.vec3), "body_force_lin": ((N, B), t.vec3),
            "subtree_force_ang": ((N, B), t.vec3), "subtree_force_lin": ((N, B), t.vec3),
            "bias": ((N, nv), model.dtype), "tau": ((N, n), model.dtype),
            "rhs": ((N, nv, 1), model.dtype), "du": ((N, nv, 1), model.dtype),
        }
        return StepData(**{
            name: wp.zeros(shape, dtype=dtype, device=model.device, requires_grad=requires_grad)
            for name, (shape, dtype) in shapes.items()
        })

    def zero_accumulators(self) -> None:
        for name in ("composite_m", "composite_h", "composite_J", "H", "subtree_force_ang", "subtree_force_lin"):
            getattr(self, name).zero_()

    def nbytes(self) -> int:
        return sum(getattr(self, f.name).capacity for f in fields(self))


class Simulator:
    """Runs Moreau steps of ``model`` with time step ``dt`` (s)."""

    def __init__(self, model: Model, dt: float = 0.005):
        if not dt > 0:
            raise ValueError(f"dt must be positive, got {dt}")
        self.model = model
        self.dt = float(dt)
        d = model.dtype
        self._fk, self._vel, self._feet = kinematics_kernels(d)
        self._inertia, self._composite, self._crba = mass_matrix_kernels(d)
        self._rnea, self._subtree_force, self._project = bias_force_kernels(d)
        self._actuator, self._rhs = actuator_kernels(d)
        self._integrate, self._add_velocity = integrator_kernels(d)
        self._buffers: StepData | None = None
        self._scalar = d
        self._gravity = warp_types(d).vec3(*model.gravity)

    # -- construction helpers --------------------------------------------------------------------------
    def state(self, q: np.ndarray | None = None, u: np.ndarray | None = None, requires_grad: bool = False) -> State:
        """A state from numpy arrays (defaults: the model's default pose at rest)."""
        m = self.model
        q = m.default_q() if q is None else np.asarray(q, dtype=m.np_dtype).reshape(m.num_envs, m.nq)
        u = np.zeros((m.num_envs, m.nv), dtype=m.np_dtype) if u is None else np.asarray(u, dtype=m.np_dtype)
        kw = dict(dtype=m.dtype, device=m.device, requires_grad=requires_grad)
        return State(q=wp.array(q, **kw), u=wp.array(u.reshape(m.num_envs, m.nv), **kw))

    def empty_state(self, requires_grad: bool = False) -> State:
        m = self.model
        kw = dict(dtype=m.dtype, device=m.device, requires_grad=requires_grad)
        return State(q=wp.zeros((m.num_envs, m.nq), **kw), u=wp.zeros((m.num_envs, m.nv), **kw))

    def control(self, joint_target: np.ndarray | None = None, joint_torque: np.ndarray | None = None,
                requires_grad: bool = False) -> Control:
        """A control from numpy arrays (defaults: hold the default pose, no feed-forward torque)."""
        m = self.model
        shape = (m.num_envs, m.num_joints)
        target = np.broadcast_to(m.default_joint_pos, shape) if joint_target is None else joint_target
        torque = np.zeros(shape) if joint_torque is None else joint_torque
        kw = dict(dtype=m.dtype, device=m.device, requires_grad=requires_grad)
        return Control(joint_target=wp.array(np.asarray(target, dtype=m.np_dtype).reshape(shape), **kw),
                       joint_torque=wp.array(np.asarray(torque, dtype=m.np_dtype).reshape(shape), **kw))

    # -- the step --------------------------------------------------------------------------------------
    def step(self, state_in: State, control: Control, state_out: State, tape: wp.Tape | None = None) -> StepData:
        """Advance ``state_in`` by one step into ``state_out``; record on ``tape`` when given."""
        if tape is not None:
            data = StepData.allocate(self.model, requires_grad=True)
            with tape:
                self._run(state_in, control, state_out, data, tape)
        else:
            if self._buffers is None:
                self._buffers = StepData.allocate(self.model, requires_grad=False)
            data = self._buffers
            data.zero_accumulators()
            self._run(state_in, control, state_out, data, None)
        return data

    def _run(self, s: State, c: Control, out: State, d: StepData, tape: wp.Tape | None) -> None:
        m = self.model
        N, B, n, nv = m.num_envs, m.num_bodies, m.num_joints, m.nv
        dt = self._scalar(self.dt)
        dev = m.device

        def launch(kernel, dim, inputs):
            wp.launch(kernel, dim=dim, inputs=inputs, device=dev)

        launch(self._integrate, (N, m.nq), [s.q, s.u, s.u, self._scalar(0.5 * self.dt), d.q_mid])
        self._dynamics(d.q_mid, s.u, d)
        launch(self._actuator, (N, n), [d.q_mid, s.u, c.joint_target, c.joint_torque, m.joint_stiffness,
                                        m.joint_damping, self._scalar(m.effort_limit),
                                        self._scalar(m.saturation_effort), self._scalar(m.velocity_limit), d.tau])
        launch(self._rhs, (N, nv), [s.u, d.tau, d.bias, m.joint_friction_damping, dt, int(m.fixed_base), d.rhs])
        cholesky_factor(d.H, m.dof_parent, d.L)
        solve_with_factor(d.H, m.dof_parent, d.L, d.rhs, d.du, tape)
        launch(self._add_velocity, (N, nv), [s.u, d.du, out.u])
        launch(self._integrate, (N, m.nq), [s.q, s.u, out.u, dt, out.q])

    def kinematics(self, q: wp.array, u: wp.array, d: StepData) -> None:
        """Forward kinematics, motion subspace and body velocities of ``(q, u)`` into ``d``."""
        m = self.model
        wp.launch(self._fk, dim=m.num_envs, device=m.device,
                  inputs=[q, m.body_parent, m.body_pos0, m.body_quat0, m.joint_axis, d.body_rot, d.body_pos,
                          d.dof_ang, d.dof_lin])
        wp.launch(self._vel, dim=m.num_envs, device=m.device,
                  inputs=[q, u, m.body_parent, d.body_rot, d.dof_ang, d.dof_lin, d.body_vel_ang, d.body_vel_lin])

    # -- dynamics terms, for tests and tools -------------------------------------------------------------
    def _dynamics(self, q: wp.array, u: wp.array, d: StepData) -> None:
        """Kinematics, H (CRBA) and bias forces (RNEA) at ``(q, u)`` into ``d`` (accumulators zeroed)."""
        m = self.model
        N, B, nv = m.num_envs, m.num_bodies, m.nv

        def launch(kernel, dim, inputs):
            wp.launch(kernel, dim=dim, inputs=inputs, device=m.device)

        self.kinematics(q, u, d)
        launch(self._inertia, (N, B), [d.body_rot, d.body_pos, m.body_mass, m.body_com, m.body_inertia,
                                       d.inertia_m, d.inertia_h, d.inertia_J])
        launch(self._composite, (N, B), [m.subtree_start, m.subtree_index, d.inertia_m, d.inertia_h, d.inertia_J,
                                         d.composite_m, d.composite_h, d.composite_J])
        launch(self._crba, (N, B), [m.ancestor_start, m.ancestor_index, m.joint_armature, d.dof_ang, d.dof_lin,
                                    d.composite_m, d.composite_h, d.composite_J, int(m.fixed_base), d.H])
        launch(self._rnea, N, [u, self._gravity, m.body_parent, d.dof_ang, d.dof_lin, d.body_vel_ang,
                               d.body_vel_lin, d.inertia_m, d.inertia_h, d.inertia_J, d.body_acc_ang,
                               d.body_acc_lin, d.body_force_ang, d.body_force_lin])
        launch(self._subtree_force, (N, B), [m.subtree_start, m.subtree_index, d.body_force_ang, d.body_force_lin,
                                             d.subtree_force_ang, d.subtree_force_lin])
        launch(self._project, (N, nv), [d.dof_ang, d.dof_lin, d.subtree_force_ang, d.subtree_force_lin, d.bias])

    def dynamics_terms(self, q: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``H(q)`` [N, nv, nv] and ``bias(q, u)`` [N, nv] at the given state (no time stepping)."""
        state = self.state(q, u)
        d = StepData.allocate(self.model, requires_grad=False)
        self._dynamics(state.q, state.u, d)
        return d.H.numpy(), d.bias.numpy()

    def foot_kinematics(self, q: wp.array, u: wp.array, tape: wp.Tape | None = None) -> tuple[wp.array, wp.array]:
        """Foot sphere centres (world, m) and velocities (world, m/s), each [N, F] vec3, at ``(q, u)``.

        Recorded on ``tape`` when given (the outputs then carry gradients back to ``q``, ``u``, the model).
        """
        m = self.model
        t = warp_types(m.dtype)
        grad = tape is not None
        d = StepData.allocate(m, requires_grad=grad)
        kw = dict(dtype=t.vec3, device=m.device, requires_grad=grad)
        pos, vel, rel = (wp.zeros((m.num_envs, m.num_feet), **kw) for _ in range(3))

        def run():
            self.kinematics(q, u, d)
            wp.launch(self._feet, dim=(m.num_envs, m.num_feet), device=m.device,
                      inputs=[q, d.body_rot, d.body_pos, d.body_vel_ang, d.body_vel_lin, m.foot_body,
                              m.foot_offset, pos, vel, rel])

        if tape is None:
            run()
        else:
            with tape:
                run()
        return pos, vel
