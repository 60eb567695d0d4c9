"""The Moreau time step as a pipeline of stages, and the ``Simulator`` that runs it.

One step of length ``dt`` (paper A, see ``shared/notes/paper.md``)::

    q_M = q_A + dt/2 u_A                              half step to the midpoint        (integrator)
    kinematics, H(q_M), bias(q_M, u_A)                kinematics, CRBA, RNEA           (kinematics, mass_matrix, bias_forces)
    tau = PD/DC-motor(q_M, u_A, control)              actuation, step impulse          (actuators)
    L = chol(H); du = H^-1 dt (tau - bias)            factor and solve                 (cholesky)
    gap, J(q_M); u_free = u_A + du; c = J u_free      contact candidates, velocities   (contact, contact_velocity)
    G = J H^-1 J^T                                    Delassus matrix                  (delassus)
    P = PGS(G, c) (soft: with compliance)             impulses (smoothed/hard/soft)    (gauss_seidel)
    u_E = u_free + H^-1 J^T P   (no contact: u_A + du) velocity update                 (delassus; integrator)
    q_E = q_A + dt/2 (u_A + u_E)                      trapezoidal position update      (integrator)
    flag and hold diverged environments               divergence guard                 (divergence)

Every stage has a hand-written reverse pass recorded with ``Tape.record_func``, except a few small kernels left
to Warp's automatic adjoint (base orientation, contact geometry, position update); temporaries of
the reverse passes come from :mod:`.scratch`.

``step(state_in, control, state_out)`` never mutates ``state_in``. With a ``wp.Tape`` every intermediate is a
fresh array kept for the backward pass (values only: gradient arrays are attached, from memory shared by all
steps, when the tape reverses the step); without one, buffers are reused.
"""

from dataclasses import dataclass, fields

import numpy as np
import warp as wp

from .actuators import actuation
from .bias_forces import bias_forces
from .body_contacts import body_gaps
from .cholesky import factor_and_solve
from .delassus import delassus, impulse_response
from .gauss_seidel import projected_gauss_seidel
from .contact import ContactParams, contact_force, contact_kernels
from .contact_velocity import contact_velocity
from .divergence import divergence_guard
from .integrator import add_velocity, integrator_kernels
from .foot_kinematics import foot_kinematics
from .kinematics import body_velocities, forward_kinematics
from .mass_matrix import mass_matrix
from .model import Model
from .scratch import scratch_array
from .state import Control, State
from .terrain import terrain_inputs
from .warp_setup import warp_types


#: Intermediates that kernels only add into or write in part: they must start at zero (see ``zero_accumulators``).
#: Every other intermediate is written in full by its stage, so it is allocated without clearing.
ACCUMULATORS = ("H", "J", "W")


#: Intermediates that only hand-written adjoints read, as values: they need no gradient array (nothing is
#: zeroed or kept for them on a tape).
VALUES_ONLY = ("L", "body_acc_ang", "body_acc_lin", "body_force_ang", "body_force_lin", "subtree_force_ang",
               "subtree_force_lin", "composite_m", "composite_h", "composite_J", "tau", "W", "history", "residual", "target", "weight", "du_contact")


def _alloc(model: Model, shapes: dict, requires_grad: bool) -> dict:
    def make(name, shape, dtype):
        factory = wp.zeros if name in ACCUMULATORS else wp.empty
        return factory(shape, dtype=dtype, device=model.device,
                       requires_grad=requires_grad and name not in VALUES_ONLY)

    return {name: make(name, shape, dtype) for name, (shape, dtype) in shapes.items()}


@dataclass
class KinematicsData:
    """Forward kinematics and body velocities of one state (see :mod:`.kinematics`)."""

    body_rot: wp.array
    body_pos: wp.array
    dof_ang: wp.array
    dof_lin: wp.array
    body_vel_ang: wp.array
    body_vel_lin: wp.array

    @staticmethod
    def shapes(model: Model) -> dict:
        t = warp_types(model.dtype)
        N, B, nv = model.num_envs, model.num_bodies, model.nv
        return {"body_rot": ((N, B), t.mat33), "body_pos": ((N, B), t.vec3), "dof_ang": ((N, nv), t.vec3),
                "dof_lin": ((N, nv), t.vec3), "body_vel_ang": ((N, B), t.vec3), "body_vel_lin": ((N, B), t.vec3)}

    @classmethod
    def allocate(cls, model: Model, requires_grad: bool):
        return cls(**_alloc(model, cls.shapes(model), requires_grad))


@dataclass
class ContactData:
    """Contact intermediates of one step (shapes: F feet, C = 3F contact rows)."""

    gap: wp.array  # [N, F] signed gap (m)
    frame: wp.array  # [N, F, 3] vec3: normal, tangent 1, tangent 2
    J: wp.array  # [N, C, nv]
    u_free: wp.array  # [N, nv] velocity after the step without contact impulses
    c: wp.array  # [N, C, 1] contact-point velocity without impulses (m/s)
    W: wp.array  # [N, nv, F] vec3 = L^-T J^T (path-sparse, a foot's three rows in one vec3)
    G: wp.array  # [N, C, C] Delassus matrix
    weight: wp.array  # [N, F] smoothing weight / contact state
    target: wp.array  # [N, F] vec3 free contact velocity with penetration stabilisation (m/s)
    history: wp.array  # [N, iterations + 1, F] vec3 PGS iterates
    residual: wp.array  # [N, iterations, F] vec3 PGS residuals (written when taped)
    impulse: wp.array  # [N, C, 1] applied impulses in the contact frames (N s)
    du_contact: wp.array  # [N, nv, 1]
    force: wp.array  # [N, F] vec3 mean contact force over the step, world frame (N)

    @classmethod
    def allocate(cls, model: Model, params: ContactParams, requires_grad: bool):
        t = warp_types(model.dtype)
        N, F, nv, s = model.num_envs, model.num_feet, model.nv, model.dtype
        C = 3 * F
        shapes = {
            "gap": ((N, F), s), "frame": ((N, F, 3), t.vec3), "J": ((N, C, nv), s),
            "u_free": ((N, nv), s), "c": ((N, C, 1), s), "W": ((N, nv, F), t.vec3), "G": ((N, C, C), s),
            "weight": ((N, F), s), "target": ((N, F), t.vec3), "history": ((N, params.iterations + 1, F), t.vec3),
            "residual": ((N, params.iterations, F), t.vec3),
            "impulse": ((N, C, 1), s), "du_contact": ((N, nv, 1), s), "force": ((N, F), t.vec3),
        }
        return cls(**_alloc(model, shapes, requires_grad))


@dataclass
class StepData:
    """Intermediate results of one step (shapes in the stage modules). Kept per step for backward passes."""

    q_mid: wp.array
    kin: KinematicsData
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
    u_new: wp.array
    q_new: wp.array
    diverged: wp.array
    contact: ContactData | None = None
    body_gap: wp.array | None = None  # [N, K] collision-body gaps at the end-of-step state (m), values only

    @staticmethod
    def allocate(model: Model, requires_grad: bool, contact: ContactParams | None = None) -> "StepData":
        t = warp_types(model.dtype)
        N, B, n, nv, s = model.num_envs, model.num_bodies, model.num_joints, model.nv, model.dtype
        shapes = {
            "q_mid": ((N, model.nq), s),
            "inertia_m": ((N, B), s), "inertia_h": ((N, B), t.vec3), "inertia_J": ((N, B), t.mat33),
            "composite_m": ((N, B), s), "composite_h": ((N, B), t.vec3), "composite_J": ((N, B), t.mat33),
            "H": ((N, nv, nv), s), "L": ((N, nv, nv), s),
            "body_acc_ang": ((N, B), t.vec3), "body_acc_lin": ((N, B), t.vec3),
            "body_force_ang": ((N, B), t.vec3), "body_force_lin": ((N, B), t.vec3),
            "subtree_force_ang": ((N, B), t.vec3), "subtree_force_lin": ((N, B), t.vec3),
            "bias": ((N, nv), s), "tau": ((N, n), s), "rhs": ((N, nv, 1), s), "du": ((N, nv, 1), s),
            "u_new": ((N, nv), s), "q_new": ((N, model.nq), s),
        }
        arrays = _alloc(model, shapes, requires_grad)
        arrays["diverged"] = wp.zeros(N, dtype=wp.int32, device=model.device)
        with_contact = contact is not None and contact.mode != "none" and model.num_feet > 0
        return StepData(kin=KinematicsData.allocate(model, requires_grad),
                        contact=ContactData.allocate(model, contact, requires_grad) if with_contact else None,
                        **arrays)

    def zero_accumulators(self) -> None:
        for group in (self, self.contact):
            if group is None:
                continue
            for name in ACCUMULATORS:
                if hasattr(group, name):
                    getattr(group, name).zero_()

    def attach_gradients(self) -> None:
        """Give every intermediate that a gradient flows through, and that has none yet, a zeroed gradient array
        (``VALUES_ONLY`` ones excepted; an output whose gradient the caller seeds gets its own beforehand). The arrays are shared by all steps (:mod:`.scratch`): a taped step keeps only its values, and
        the reverse pass of each step, which calls this first, reuses the same gradient memory."""
        for group in (self, self.kin, self.contact):
            if group is None:
                continue
            for f in fields(group):
                value = getattr(group, f.name)
                if (isinstance(value, wp.array) and value.grad is None and f.name not in VALUES_ONLY
                        and f.name != "diverged"):
                    value.grad = scratch_array(f"step_gradient.{f.name}", value.shape, value.dtype, value.device)

    def nbytes(self) -> int:
        """Bytes held by the step's arrays and their gradient arrays."""
        total = 0
        for group in (self, self.kin, self.contact):
            if group is None:
                continue
            for f in fields(group):
                value = getattr(group, f.name)
                if isinstance(value, wp.array):
                    total += value.capacity + (value.grad.capacity if value.grad is not None else 0)
        return total


class Simulator:
    """Runs Moreau steps of ``model`` with time step ``dt`` (s) and contact model ``contact``.

    ``max_speed`` (m/s or rad/s) and ``max_distance`` (m) bound a sane state; an environment leaving them, or
    turning non-finite, is flagged in ``StepData.diverged`` and keeps its previous state.

    ``report_body_gaps``: every step also writes ``StepData.body_gap`` [N, K], the signed gap (m) of every
    collision body to the terrain at the end-of-step state (:mod:`.body_contacts`; values only, not taped: for
    gradients call :meth:`body_gaps` with a tape). Off by default: it costs a kinematics pass per step.
    """

    def __init__(self, model: Model, dt: float = 0.005, contact: ContactParams | str | None = None,
                 max_speed: float = 1.0e3, max_distance: float = 1.0e4, report_body_gaps: bool = False):
        if not dt > 0:
            raise ValueError(f"dt must be positive, got {dt}")
        if isinstance(contact, str):
            contact = ContactParams(mode=contact)
        self.model = model
        self.dt = float(dt)
        self.contact = contact if contact is not None else ContactParams(mode="none")
        if self.contact.mode != "none" and model.num_feet == 0:
            raise ValueError(f"contact mode '{self.contact.mode}' needs foot spheres; robot "
                             f"'{model.robot.name}' has none")
        self.max_speed = float(max_speed)
        self.max_distance = float(max_distance)
        if report_body_gaps and model.collision is None:
            raise ValueError(f"report_body_gaps needs collision shapes; robot '{model.robot.name}' has none")
        self.report_body_gaps = bool(report_body_gaps)
        d = model.dtype
        self._integrate = integrator_kernels(d)[0]
        if model.num_feet > 0:
            self._contact_geometry = contact_kernels(d)[0]
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
            data = StepData.allocate(self.model, requires_grad=False, contact=self.contact)
            with tape:
                self._run(state_in, control, state_out, data, tape)
            # runs first in the backward pass: the step's gradient arrays exist only while it is reversed
            tape.record_func(backward=data.attach_gradients, arrays=[])
        else:
            if self._buffers is None or (self._buffers.contact is not None
                                         and self._buffers.contact.history.shape[1] != self.contact.iterations + 1):
                self._buffers = StepData.allocate(self.model, requires_grad=False, contact=self.contact)
            data = self._buffers
            data.zero_accumulators()
            self._run(state_in, control, state_out, data, None)
        return data

    def _launch(self, kernel, dim, inputs) -> None:
        wp.launch(kernel, dim=dim, inputs=inputs, device=self.model.device)

    def _run(self, s: State, c: Control, out: State, d: StepData, tape: wp.Tape | None) -> None:
        m = self.model
        N = m.num_envs
        dt = self._scalar(self.dt)
        launch = self._launch
        launch(self._integrate, N, [s.q, s.u, s.u, self._scalar(0.5 * self.dt), d.q_mid])
        self._dynamics(d.q_mid, s.u, d, tape)
        actuation(m, d.q_mid, s.u, c, d.bias, self.dt, d.tau, d.rhs, tape)
        factor_and_solve(d.H, m.dof_parent, d.L, d.rhs, d.du, tape)
        if d.contact is None:
            add_velocity(s.u, d.du, d.u_new, tape)
        else:
            self._contact_impulses(s, d, tape)
        launch(self._integrate, N, [s.q, s.u, d.u_new, dt, d.q_new])
        divergence_guard(d.q_new, d.u_new, s.q, s.u, self.max_speed, self.max_distance, d.diverged, out.q, out.u,
                         tape)
        if self.report_body_gaps:
            d.body_gap = body_gaps(m, out.q, out=d.body_gap if tape is None else None)

    def _contact_impulses(self, s: State, d: StepData, tape: wp.Tape | None) -> None:
        """Contact geometry at the midpoint, Delassus matrix, impulses and the velocity after them (``d.u_new``)."""
        m, p, cd = self.model, self.contact, d.contact
        N, F = m.num_envs, m.num_feet
        self._launch(self._contact_geometry, (N, F), [
            d.q_mid, d.kin.body_rot, d.kin.body_pos, d.kin.dof_ang, d.kin.dof_lin, m.foot_body, m.foot_offset,
            m.foot_radius, m.ancestor_start, m.ancestor_index, m.ground_height, *terrain_inputs(m), cd.gap, cd.frame,
            cd.J])
        contact_velocity(s.u, d.du, cd.J, m.foot_path_start, m.foot_path, cd.u_free, cd.c, tape)
        delassus(d.H, d.L, m.dof_parent, m.foot_path_start, m.foot_path, cd.J, cd.W, cd.G, tape)
        projected_gauss_seidel(m, p, self.dt, cd.G, cd.c, cd.gap, cd.weight, cd.target, cd.history, cd.residual,
                               cd.impulse, tape)
        impulse_response(d.H, d.L, m.dof_parent, m.foot_path_start, m.foot_path, cd.J, cd.W, cd.impulse,
                         cd.u_free, cd.du_contact, d.u_new, tape)
        contact_force(cd.impulse, cd.frame, self.dt, cd.force, tape)

    def kinematics(self, q: wp.array, u: wp.array, k: KinematicsData, tape: wp.Tape | None = None) -> None:
        """Forward kinematics, motion subspace and body velocities of ``(q, u)`` into ``k``."""
        m = self.model
        forward_kinematics(m, q, k, tape)
        body_velocities(m, u, k, tape)

    def _dynamics(self, q: wp.array, u: wp.array, d: StepData, tape: wp.Tape | None = None) -> None:
        """Kinematics, H (CRBA) and bias forces (RNEA) at ``(q, u)`` into ``d`` (accumulators zeroed)."""
        m, k = self.model, d.kin
        self.kinematics(q, u, k, tape)
        mass_matrix(m, k, d, tape)
        bias_forces(m, u, k, d, self._gravity, tape)

    # -- queries, for tasks, tests and tools ---------------------------------------------------------------
    def dynamics_terms(self, q: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``H(q)`` [N, nv, nv] and ``bias(q, u)`` [N, nv] at the given state (no time stepping)."""
        state = self.state(q, u)
        d = StepData.allocate(self.model, requires_grad=False)
        self._dynamics(state.q, state.u, d)
        return d.H.numpy(), d.bias.numpy()

    def foot_kinematics(self, q: wp.array, u: wp.array, tape: wp.Tape | None = None) -> tuple[wp.array, wp.array]:
        """Foot sphere centres (world, m) and velocities (world, m/s), each [N, F] vec3, at ``(q, u)``
        (:mod:`.foot_kinematics`). Recorded on ``tape`` when given (the outputs then carry gradients back to ``q``
        and ``u``)."""
        return foot_kinematics(self.model, q, u, tape)

    def body_gaps(self, q: wp.array, tape: wp.Tape | None = None) -> wp.array:
        """Signed gap (m) of every collision body to the terrain at ``q``, [N, K] in the order
        ``model.collision.body_names`` (:mod:`.body_contacts`). Recorded on ``tape`` when given (the output then
        carries gradients back to ``q``)."""
        return body_gaps(self.model, q, tape)
