"""The Moreau time step as a pipeline of stages, and the ``Simulator`` that runs it.

One step of length ``dt`` (Schwarke et al., arXiv 2404.02887), each line one stage (module) writing its
own group of :class:`~.step_data.StepData`::

    q_M = q_A + dt/2 u_A                              half step to the midpoint        (integrator)
    poses, motion subspace, body velocities at q_M    kinematics                       (kinematics)
    H(q_M), bias(q_M, u_A)                            CRBA, RNEA                       (mass_matrix, bias_forces)
    tau_A, b = PD/DC-motor(q_M, u_A, control, H_jj)   actuation: branch, step impulse  (actuators)
    L = chol(H + dt diag(0, b)); du = H'^-1 rhs       factor and solve (implicit speed line of the drives)  (cholesky)
    gap, frame, J at q_M                              contact candidates               (contact)
    u_free = u_A + du; c = J u_free                   contact-point velocities         (contact_velocity)
    G = J H'^-1 J^T                                   Delassus matrix                  (delassus)
    P = PGS(G, c) (soft: with compliance); force      impulses (smoothed/hard/soft)    (gauss_seidel)
    u_E = u_free + H'^-1 J^T P  (no contact: u_A + du) velocity update                 (impulse_response; integrator)
    tau = tau_A - b (u_E - u_A)                       torque applied over the step     (actuators)
    q_E = q_A + dt/2 (u_A + u_E)                      trapezoidal position update      (integrator)
    flag and hold diverged environments               divergence guard                 (divergence)
                                                      (also those with non-finite control inputs)

Every stage has the signature ``stage(model, inputs..., outputs, tape)`` and, except a few small kernels left to
Warp's automatic adjoint (base orientation, contact geometry, position update), a hand-written reverse pass
recorded with ``Tape.record_func`` (:func:`~.adjoint.launch_stage`); temporaries of the reverse passes come from
:mod:`.scratch`.

``step(state_in, control, state_out)`` never mutates ``state_in``. With a ``wp.Tape`` every intermediate is a
fresh array kept for the backward pass (values only: gradient arrays are attached, from memory shared by all
steps, when the tape reverses the step); without one, buffers are reused, and a step on arrays it has seen
before is replayed from a recorded graph (:mod:`.replay`; CPU only).
"""

from dataclasses import dataclass, field

import numpy as np
import warp as wp

from .actuators import actuation, applied_torque
from .bias_forces import bias_forces
from .body_contacts import body_gaps
from .cholesky import factor_and_solve
from .contact import ContactParams, contact_geometry
from .contact_velocity import contact_velocity
from .delassus import delassus
from .divergence import accumulate_any, divergence_guard
from .foot_kinematics import foot_kinematics
from .gauss_seidel import projected_gauss_seidel
from .impulse_response import impulse_response
from .integrator import accumulate_mean, add_velocity, integrate_positions
from .kinematics import kinematics
from .mass_matrix import mass_matrix
from .model import Model
from .replay import StepReplays
from .scratch import GENERATION
from .state import Control, State
from .step_data import StepData
from .warp_setup import warp_types


@dataclass
class PolicyStepData:
    """What :meth:`Simulator.advance` reports of one policy step of ``k`` physics steps.

    ``last``: the intermediates of the last physics step (its ``contact.gap`` and ``contact.weight`` are the
    contact gaps and states at that step's midpoint, where its contact solve acts); ``steps``: every physics
    step's intermediates on a taped advance (the last one only otherwise); ``contact_force`` [N, F] vec3: the mean
    contact force on each foot over the policy step, world frame (N) (``None`` without contact); ``joint_torque``
    [N, n]: the mean drive torque applied over the policy step (N m); ``diverged``
    [N] int32: 1 where any physics step of the policy step diverged. ``states``: on a taped advance, the
    ``k - 1`` states between the physics steps (with their gradient arrays), else empty.
    """

    last: "StepData"
    steps: list
    contact_force: wp.array | None
    joint_torque: wp.array
    diverged: wp.array
    states: list = field(default_factory=list)


def _positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return float(value)


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


class Simulator:
    """Runs Moreau steps of ``model`` with time step ``dt`` (s) and contact model ``contact``.

    ``max_speed`` (m/s or rad/s) and ``max_distance`` (m) bound a sane state; an environment leaving them, or
    turning non-finite (or given a non-finite control or a zero quaternion), is flagged in ``StepData.diverged``
    and keeps its previous state. ``substeps`` is the default number of physics steps of one :meth:`advance`
    (a policy step: decimation, the joint targets held). Every setting is validated when set, and read at every
    step: ``sim.contact = "hard"``, ``sim.contact.kappa = 100.0`` or ``sim.dt = 0.002`` take effect at the next step.
    :meth:`from_cfg` builds one from a :class:`~.config.SimCfg`.

    ``report_body_gaps``: every step also writes ``StepData.body_gap`` [N, K], the signed gap (m) of every
    collision body to the terrain at the end-of-step state (:mod:`.body_contacts`; values only, not taped: for
    gradients call :meth:`body_gaps` with a tape). Off by default: it costs a kinematics pass per step.
    """

    def __init__(self, model: Model, dt: float = 0.005, contact: ContactParams | str | None = None,
                 max_speed: float = 1.0e3, max_distance: float = 1.0e4, substeps: int = 1,
                 report_body_gaps: bool = False):
        self.model = model
        self.dt = dt
        self.contact = contact if contact is not None else ContactParams(mode="none")
        self.max_speed = max_speed
        self.max_distance = max_distance
        self.substeps = substeps
        if report_body_gaps and model.collision is None:
            raise ValueError(f"report_body_gaps needs collision shapes; robot '{model.robot.name}' has none")
        self.report_body_gaps = bool(report_body_gaps)
        self._buffers: StepData | None = None
        self._buffer_key = None
        self._substates: tuple[State, State] | None = None
        self._replays = StepReplays()

    @classmethod
    def from_cfg(cls, model: Model, cfg) -> "Simulator":
        """A simulator with the settings of ``cfg`` (:class:`~.config.SimCfg`) for ``model`` (built with the
        config's precision and device: :meth:`~.config.SimCfg.build_model`)."""
        return cls(model, dt=cfg.dt, contact=cfg.contact, max_speed=cfg.max_speed, max_distance=cfg.max_distance,
                   substeps=cfg.substeps)

    # -- settings, validated when set ----------------------------------------------------------------------
    @property
    def dt(self) -> float:
        """Physics time step (s), finite and > 0."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._dt = _positive("dt", value)

    @property
    def max_speed(self) -> float:
        """Speed (m/s, rad/s) beyond which an environment counts as diverged."""
        return self._max_speed

    @max_speed.setter
    def max_speed(self, value: float) -> None:
        self._max_speed = _positive("max_speed", value)

    @property
    def max_distance(self) -> float:
        """Distance from the origin (m) and joint angle (rad) beyond which an environment counts as diverged."""
        return self._max_distance

    @max_distance.setter
    def max_distance(self, value: float) -> None:
        self._max_distance = _positive("max_distance", value)

    @property
    def substeps(self) -> int:
        """Physics steps of one :meth:`advance` (decimation), >= 1."""
        return self._substeps

    @substeps.setter
    def substeps(self, value: int) -> None:
        self._substeps = _count("substeps", value)

    @property
    def contact(self) -> ContactParams:
        """The contact settings (validated on every assignment of a field, see :class:`ContactParams`)."""
        return self._contact

    @contact.setter
    def contact(self, value: ContactParams | str) -> None:
        if isinstance(value, str):
            value = ContactParams(mode=value)
        if not isinstance(value, ContactParams):
            raise TypeError(f"contact must be a ContactParams or a mode name, got {type(value).__name__}")
        if value.mode != "none" and self.model.num_feet == 0:
            raise ValueError(f"contact mode '{value.mode}' needs foot spheres; robot "
                             f"'{self.model.robot.name}' has none")
        self._contact = value

    @property
    def policy_dt(self) -> float:
        """Duration of one :meth:`advance` (s): ``substeps * dt``."""
        return self.substeps * self.dt

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
    def step(self, state_in: State, control: Control, state_out: State, tape: wp.Tape | None = None,
             model: Model | None = None) -> StepData:
        """Advance ``state_in`` by one step into ``state_out``; record on ``tape`` when given.

        ``model``: the simulator's model with some per-env parameters replaced (:meth:`Model.with_parameters`),
        for a step under parameters that are not the model's own; default ``self.model``. On a taped step,
        ``state_out`` must carry gradient arrays (``empty_state(requires_grad=True)``).
        """
        m = self.model if model is None else model
        if tape is not None:
            for name, array in (("q", state_out.q), ("u", state_out.u)):
                if array.grad is None:
                    raise ValueError(f"a taped step needs gradient arrays on state_out.{name} (make it with "
                                     f"empty_state(requires_grad=True)): without them no gradient flows back")
            data = self._allocate(m)
            self._run(m, state_in, control, state_out, data, tape)
            # runs first in the backward pass: the step's gradient arrays exist only while it is reversed
            tape.record_func(backward=data.attach_gradients, arrays=[])
        else:
            key = (self.contact.mode != "none", self.contact.iterations, self.report_body_gaps)
            if self._buffers is None or self._buffer_key != key:
                self._buffers = self._allocate(m)
                self._buffer_key = key
            data = self._buffers

            def run() -> None:
                data.zero_accumulators()
                self._run(m, state_in, control, state_out, data, None)

            arrays = (m.arrays, state_in.q, state_in.u, control.joint_target, control.joint_torque, state_out.q,
                      state_out.u, data)
            self._replays.run((*map(id, arrays), *self.replay_settings()), arrays, m.device, run)
        return data

    def replay_settings(self) -> tuple:
        """Every setting a recorded step bakes in (time step, guards, body-gap reporting, the scratch pool's
        generation, the contact settings): part of the key of every recorded replay (:mod:`.replay`,
        :mod:`.taped_replay`)."""
        return (self.dt, self.max_speed, self.max_distance, self.report_body_gaps, GENERATION[0],
                *vars(self.contact).values())

    def _allocate(self, m: Model) -> StepData:
        return StepData.allocate(m, requires_grad=False, contact=self.contact, body_gaps=self.report_body_gaps)

    def advance(self, state_in: State, control: Control, state_out: State, substeps: int | None = None,
                tape: wp.Tape | None = None, model: Model | None = None) -> PolicyStepData:
        """One policy step: ``substeps`` (default :attr:`substeps`) physics steps from ``state_in`` into
        ``state_out`` under the same ``control`` (zero-order hold), recorded on ``tape`` when given.

        Returns a :class:`PolicyStepData`: the last physics step's intermediates, the mean contact force over
        the policy step and which environments diverged in any of its physics steps (a diverged environment is
        held at its last sane state and stays held for the remaining substeps if it diverges again).
        """
        k = self.substeps if substeps is None else _count("substeps", substeps)
        m = self.model if model is None else model
        N, F = m.num_envs, m.num_feet
        with_contact = self.contact.mode != "none" and F > 0
        vec3 = warp_types(m.dtype).vec3
        taped = tape is not None
        kw = dict(device=m.device, requires_grad=taped)
        force_mean = wp.zeros((N, max(F, 1)), dtype=vec3, **kw) if with_contact else None
        torque_mean = wp.zeros((N, m.num_joints), dtype=m.dtype, **kw)
        diverged = wp.zeros(N, dtype=wp.int32, device=m.device)
        steps, states = [], []
        previous = state_in
        for i in range(k):
            if i == k - 1:
                nxt = state_out
            elif taped:
                nxt = self.empty_state(requires_grad=True)
                states.append(nxt)
            else:
                if self._substates is None:
                    self._substates = (self.empty_state(), self.empty_state())
                nxt = self._substates[i % 2]
            data = self.step(previous, control, nxt, tape=tape, model=m)
            if with_contact:
                force = data.contact.force
                if taped and force.grad is None:
                    force.grad = wp.zeros_like(force)  # the mean's reverse writes it before the step is reversed
                accumulate_mean(force, 1.0 / k, force_mean, tape)
            if taped and data.tau.grad is None:
                data.tau.grad = wp.zeros_like(data.tau)
            accumulate_mean(data.tau, 1.0 / k, torque_mean, tape)
            accumulate_any(data.diverged, diverged)
            steps.append(data)
            previous = nxt
        return PolicyStepData(last=steps[-1], steps=steps if taped else [steps[-1]], contact_force=force_mean,
                              joint_torque=torque_mean, diverged=diverged, states=states)

    def _run(self, m: Model, s: State, c: Control, out: State, d: StepData, tape: wp.Tape | None) -> None:
        """The Moreau step (module docstring) from ``s`` under ``c`` into ``out``, intermediates in ``d``."""
        dt = self.dt
        integrate_positions(m, s.q, s.u, s.u, 0.5 * dt, d.q_mid, tape)
        self._dynamics(m, d.q_mid, s.u, d, tape)
        actuation(m, d.q_mid, s.u, c, d.bias_forces, d.mass, dt, d.actuation, tape)
        factor_and_solve(m, d.mass, d.actuation, dt, d.solve, tape)
        if d.contact is None:
            add_velocity(m, s.u, d.solve, d.integration, tape)
        else:
            self._contact_impulses(m, s, d, tape)
        applied_torque(m, s.u, d.u_new, d.actuation, tape)
        integrate_positions(m, s.q, s.u, d.u_new, dt, d.q_new, tape)
        divergence_guard(m, s.q, s.u, d.integration, d.actuation, self.max_speed, self.max_distance, d.guard, out.q,
                         out.u, tape)
        if self.report_body_gaps:
            body_gaps(m, out.q, out=d.body_gap)

    def _contact_impulses(self, m: Model, s: State, d: StepData, tape: wp.Tape | None) -> None:
        """Contact geometry at the midpoint, Delassus matrix, impulses and the velocity after them (``d.u_new``)."""
        c = d.contact
        contact_geometry(m, d.q_mid, d.kin, c.geometry, tape)
        contact_velocity(m, s.u, d.solve, c.geometry, c.velocity, tape)
        delassus(m, d.mass, d.solve, c.geometry, c.delassus, tape)
        projected_gauss_seidel(m, self.contact, self.dt, c.geometry, c.velocity, c.delassus, c.solution, tape)
        impulse_response(m, d.mass, d.solve, c.geometry, c.velocity, c.delassus, c.solution, c.response,
                         d.integration, tape)

    def _dynamics(self, m: Model, q: wp.array, u: wp.array, d: StepData, tape: wp.Tape | None = None) -> None:
        """Kinematics, H (CRBA) and bias forces (RNEA) at ``(q, u)`` into ``d`` (accumulators zeroed)."""
        kinematics(m, q, u, d.kin, tape)
        mass_matrix(m, d.kin, d.mass, tape)
        bias_forces(m, u, d.kin, d.mass, d.bias_forces, tape)

    # -- queries, for tasks, tests and tools ---------------------------------------------------------------
    def dynamics_terms(self, q: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``H(q)`` [N, nv, nv] and ``bias(q, u)`` [N, nv] at the given state (no time stepping)."""
        state = self.state(q, u)
        d = StepData.allocate(self.model, requires_grad=False)
        self._dynamics(self.model, state.q, state.u, d)
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
