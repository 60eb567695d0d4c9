"""Stage: drive torques (PD position tracking inside a DC-motor envelope, its speed line taken implicitly),
passive joint damping, the step's generalised impulse, and the torque applied over the step; hand-written
reverse passes.

The drive of joint ``j`` (Isaac Lab's ``DCMotorCfg``; N·m, rad/s)::

    tau = clip(raw, tau_min(w), tau_max(w))        raw = k_p (q* - q_M) - k_d qd_A + tau_ff
    tau_max(w) = clip(S (1 - w / v), 0, E)          tau_min(w) = clip(S (-1 - w / v), -E, 0)

(``S`` saturation torque, ``E`` effort limit, ``v`` no-load speed, per env and joint in the model). The PD
term is explicit (start velocity ``qd_A``, midpoint position ``q_M``), but the envelope is evaluated at the
step's END velocity ``w = qd_E``: with the bound at the start velocity a saturated knee of ANYmal (S = 120,
v = 7.5) went from rest to 17 rad/s in one 5 ms step, and the speed line's slope ``-S/v`` acted as an explicit
damping far beyond the step's stability limit (gradients grew by ~2x per step).

Branches (``drive_branch`` codes below): tracking (``tau = raw``), effort limit (``+-E``), zero (the motor past
its no-load speed), speed line, or invalid control. On the speed line (slope ``-b``, ``b = S / v``) the torque
is linear in the end velocity and is taken implicitly, like MuJoCo's implicit damping::

    tau(qd_E) = tau_A - b (qd_E - qd_A),    tau_A = clip(raw, tau_min(qd_A), tau_max(qd_A))

``tau_A`` is the explicit DC-motor torque at the start velocity: the line itself when the joint starts on it,
else the effort limit or the PD command it starts at. The envelope is concave in the speed with slopes 0 and
``-b``, so this chord of slope ``-b`` stays under it while the joint speeds up: the drive never exceeds ``E`` nor
its PD command then (it lags the line by at most ``S - E`` on the step that crosses the kink); a joint pushed
backward (e.g. by contact) meets a damper of slope ``b`` about ``tau_A``. ``b`` (``implicit_damping`` [N, n],
N·m·s/rad; 0 off the speed line) enters the step's solve as ``dt b`` on H's joint diagonal (:mod:`.cholesky`,
before the factor, so contacts see the same effective inertia) and ``tau_A`` (``tau_start`` [N, n]) enters the
right-hand side. On the other branches ``tau_start`` is the torque and ``b = 0``.

The branch is chosen consistently with the end velocity by a per-joint predictor: the joint alone, with inertia
``D = H_jj`` (joint diagonal of H at the midpoint, armature included) and the other smooth forces of its row
(``-bias_j - d_j qd_A``), ends the step at ``w(tau) = qd_A + dt (tau - bias_j - d_j qd_A) / D``. The scalar
fixed point ``tau = clip(raw, tau_min(w(tau)), tau_max(w(tau)))`` is unique (``w`` increases with ``tau``, the
bounds decrease with ``w``); it is ``clip(raw, tau_L, tau_U)`` with ``tau_U`` (``tau_L``) the fixed point of the
upper (lower) bound alone, each found in closed form on its effort / zero / speed-line piece. The predictor
ignores the coupling through H's off-diagonal terms and contacts, so the coupled solve's end velocity can sit
on a neighbouring piece (e.g. a hip whose effective inertia ``1/(H^-1)_jj`` is half its ``H_jj``); the torque
is then the chosen piece's value. The branch is piecewise constant: no gradient flows through the choice (nor
through ``H_jj``), and none to ``S``, ``E``, ``v`` (domain-randomisation arrays).

The impulse of the smooth forces over the step, ``rhs = dt (tau_A - d_j qd_A - bias)`` [N, nv, 1] on the joints
(``d_j`` viscous joint damping, explicit), ``-dt bias`` on the base (zero for a fixed-base model).

The torque applied over the step, ``tau = tau_A - b (qd_E - qd_A)`` [N, n] (:func:`applied_torque`, after the
velocity update), is the drive torque (viscous damping excluded) held constant during the step.

Non-finite joint targets or feed-forward torques flag the environment (``invalid`` [N] int32, held by the
divergence guard); such a joint gets zero torque and no gradient.
"""


import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch_stage
from .bias_forces import BiasForceData
from .coordinates import dof_of_joint, q_of_joint
from .mass_matrix import MassMatrixData
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input

#: ``drive_branch`` codes: which piece of the envelope a joint is on over the step.
TRACKING = 0  # tau = raw (inside the envelope)
EFFORT = 1  # tau = +-E
ZERO = 2  # tau = 0 (past the no-load speed)
SPEED_FROM_RAW = 3  # speed line, implicit; tau_A = raw (the joint starts inside the envelope)
SPEED_FROM_LINE = 4  # speed line, implicit; tau_A = S (+-1 - qd_A / v) (the joint starts on the line)
SPEED_FROM_LIMIT = 5  # speed line, implicit; tau_A = +-E or 0 (the joint starts on a flat piece)
INVALID = 7  # non-finite control input: tau = 0, the env is flagged


@dataclass
class ActuationData(StageData):
    """The drives over one step (see the module docstring)."""

    drive_branch: wp.array = intermediate(lambda s: (s.N, s.n), "int32", zero=True,
                                          doc="envelope piece of each drive over the step (codes above)")
    tau_start: wp.array = intermediate(lambda s: (s.N, s.n), doc="drive torque of the piece at the start velocity")
    implicit_damping: wp.array = intermediate(lambda s: (s.N, s.n), values_only=True,
                                              doc="slope b of the speed line taken implicitly (N m s/rad)")
    invalid_control: wp.array = intermediate(lambda s: (s.N,), "int32", zero=True,
                                             doc="non-finite joint target or feed-forward torque")
    rhs: wp.array = intermediate(lambda s: (s.N, s.nv, 1), doc="impulse of the smooth forces over the step")
    tau: wp.array = intermediate(lambda s: (s.N, s.n), doc="drive torque applied during the step (N m)")


@dataclass
class ActuationInputs(StageInputs):
    """What the drives read."""

    q: wp.array = stage_input("scalar", 2, doc="midpoint coordinates [N, nq]")
    u: wp.array = stage_input("scalar", 2, doc="start velocities [N, nv]")
    joint_target: wp.array = stage_input("scalar", 2, doc="PD position targets [N, n] (rad)")
    joint_torque: wp.array = stage_input("scalar", 2, doc="feed-forward torques [N, n] (N m)")
    bias: BiasForceData = stage_input(group=BiasForceData)
    mass: MassMatrixData = stage_input(group=MassMatrixData)
    dt: float = stage_input("scalar", doc="time step (s)")


@dataclass
class AppliedTorqueInputs(StageInputs):
    """What the applied torque reads besides the actuation's own data: the step's start and end velocities."""

    u_start: wp.array = stage_input("scalar", 2, doc="[N, nv]")
    u_end: wp.array = stage_input("scalar", 2, doc="[N, nv]")


@functools.cache
def actuator_kernels(dtype):
    zero = dtype(0.0)
    one = dtype(1.0)
    T = kernel_types(dtype)
    In = ActuationInputs.struct_type(dtype)
    TorqueIn = AppliedTorqueInputs.struct_type(dtype)

    @wp.func
    def _envelope(vel: dtype, effort_limit: dtype, saturation_effort: dtype, velocity_limit: dtype):
        """(lower, upper) torque bounds of the DC motor at joint speed ``vel``."""
        upper = wp.clamp(saturation_effort * (one - vel / velocity_limit), zero, effort_limit)
        lower = wp.clamp(saturation_effort * (-one - vel / velocity_limit), -effort_limit, zero)
        return lower, upper

    @wp.kernel(enable_backward=False)
    def actuation(model: T.Model, inputs: In, outputs: T.Act):
        """Branches, ``tau_A``, ``b`` [N, n], the impulse ``rhs`` [N, nv, 1] and the invalid-control flag [N]."""
        e = wp.tid()
        bias = inputs.bias.bias
        dt = inputs.dt
        for k in range(6):
            value = -dt * bias[e, k]
            if model.fixed_base != 0:
                value = zero
            outputs.rhs[e, k, 0] = value
        invalid = int(0)
        for j in range(model.joint_stiffness.shape[1]):
            dof = dof_of_joint(j)
            vel = inputs.u[e, dof]
            target = inputs.joint_target[e, j]
            ff = inputs.joint_torque[e, j]
            E = model.effort_limit[e, j]
            S = model.saturation_effort[e, j]
            v = model.velocity_limit[e, j]
            d = model.joint_friction_damping[e, j]
            raw = model.joint_stiffness[e, j] * (target - inputs.q[e, q_of_joint(j)]) - model.joint_damping[e, j] * vel
            raw = raw + ff
            # predictor: the joint alone ends at w(tau) = w0 + c tau
            c = dt / inputs.mass.H[e, dof, dof]
            w0 = vel + c * (-bias[e, dof] - d * vel)
            branch = int(TRACKING)
            torque = raw
            slope = zero
            if not (wp.isfinite(target) and wp.isfinite(ff)):
                branch = int(INVALID)
                torque = zero
                invalid = 1
            else:
                lower, upper = _envelope(w0 + c * raw, E, S, v)
                speed_line = int(0)
                if raw > upper:  # the upper bound's fixed point tau_U < raw
                    if S * (one - (w0 + c * E) / v) >= E:
                        branch = int(EFFORT)
                        torque = E
                    elif S * (one - w0 / v) <= zero:
                        branch = int(ZERO)
                        torque = zero
                    else:
                        speed_line = 1
                elif raw < lower:  # the lower bound's fixed point tau_L > raw
                    if S * (-one - (w0 - c * E) / v) <= -E:
                        branch = int(EFFORT)
                        torque = -E
                    elif S * (-one - w0 / v) >= zero:
                        branch = int(ZERO)
                        torque = zero
                    else:
                        speed_line = 1
                if speed_line != 0:
                    slope = S / v
                    line_up = S * (one - vel / v)
                    line_lo = S * (-one - vel / v)
                    start_lo, start_up = _envelope(vel, E, S, v)
                    torque = wp.clamp(raw, start_lo, start_up)
                    branch = int(SPEED_FROM_LIMIT)
                    if raw >= start_lo and raw <= start_up:
                        branch = int(SPEED_FROM_RAW)
                    elif raw > start_up and line_up >= zero and line_up <= E:
                        branch = int(SPEED_FROM_LINE)
                    elif raw < start_lo and line_lo >= -E and line_lo <= zero:
                        branch = int(SPEED_FROM_LINE)
            outputs.drive_branch[e, j] = branch
            outputs.tau_start[e, j] = torque
            outputs.implicit_damping[e, j] = slope
            outputs.rhs[e, dof, 0] = dt * (torque - d * vel - bias[e, dof])
        outputs.invalid_control[e] = invalid

    @wp.kernel(enable_backward=False)
    def actuation_adjoint(model: T.Model, inputs: In, outputs: T.Act, inputs_grad: In, outputs_grad: T.Act,
                          params_grad: T.Params):
        """Reverse of :func:`actuation` for the chosen branches (held fixed): from the adjoints of ``rhs`` and
        ``tau_start`` into ``inputs_grad`` and ``params_grad`` (accumulated)."""
        e = wp.tid()
        dt = inputs.dt
        bias_grad = inputs_grad.bias.bias
        if model.fixed_base == 0:
            for k in range(6):
                bias_grad[e, k] = bias_grad[e, k] - dt * outputs_grad.rhs[e, k, 0]
        for j in range(model.joint_stiffness.shape[1]):
            dof = dof_of_joint(j)
            qj = q_of_joint(j)
            g_rhs = dt * outputs_grad.rhs[e, dof, 0]
            bias_grad[e, dof] = bias_grad[e, dof] - g_rhs
            g = g_rhs + outputs_grad.tau_start[e, j]  # adjoint of tau_A
            vel = inputs.u[e, dof]
            adj_vel = -model.joint_friction_damping[e, j] * g_rhs
            branch = outputs.drive_branch[e, j]
            if branch == TRACKING or branch == SPEED_FROM_RAW:
                kp = model.joint_stiffness[e, j]
                adj_vel = adj_vel - model.joint_damping[e, j] * g
                inputs_grad.q[e, qj] = inputs_grad.q[e, qj] - kp * g
                inputs_grad.joint_target[e, j] = inputs_grad.joint_target[e, j] + kp * g
                inputs_grad.joint_torque[e, j] = inputs_grad.joint_torque[e, j] + g
                params_grad.joint_stiffness[e, j] = params_grad.joint_stiffness[e, j] + (
                    inputs.joint_target[e, j] - inputs.q[e, qj]) * g
                params_grad.joint_damping[e, j] = params_grad.joint_damping[e, j] - vel * g
            elif branch == SPEED_FROM_LINE:
                adj_vel = adj_vel - outputs.implicit_damping[e, j] * g  # tau_A = S (+-1 - qd_A / v)
            inputs_grad.u[e, dof] = inputs_grad.u[e, dof] + adj_vel

    @wp.kernel(enable_backward=False)
    def applied_torque(model: T.Model, inputs: TorqueIn, outputs: T.Act):
        """``tau = tau_A - b (qd_E - qd_A)`` [N, n] (``tau_A``, ``b`` and ``tau`` are the actuation's data)."""
        e = wp.tid()
        for j in range(outputs.tau.shape[1]):
            dof = dof_of_joint(j)
            outputs.tau[e, j] = outputs.tau_start[e, j] - outputs.implicit_damping[e, j] * (
                inputs.u_end[e, dof] - inputs.u_start[e, dof])

    @wp.kernel(enable_backward=False)
    def applied_torque_adjoint(model: T.Model, inputs: TorqueIn, outputs: T.Act, inputs_grad: TorqueIn,
                               outputs_grad: T.Act):
        """From the adjoint of ``tau`` into those of ``tau_start`` and the velocities (accumulated)."""
        e = wp.tid()
        for j in range(outputs.tau.shape[1]):
            dof = dof_of_joint(j)
            g = outputs_grad.tau[e, j]
            bg = outputs.implicit_damping[e, j] * g
            outputs_grad.tau_start[e, j] = outputs_grad.tau_start[e, j] + g
            inputs_grad.u_end[e, dof] = inputs_grad.u_end[e, dof] - bg
            inputs_grad.u_start[e, dof] = inputs_grad.u_start[e, dof] + bg

    return actuation, actuation_adjoint, applied_torque, applied_torque_adjoint


def actuation(model, q: wp.array, u: wp.array, control, bias, mass, dt: float, act: ActuationData,
              tape: wp.Tape | None = None) -> None:
    """Drive branches, torques at the start velocity (N·m), implicit damping (N·m·s/rad), the step's impulse
    ``rhs`` [N, nv, 1] (N·m·s) and the invalid-control flags into ``act``, at the midpoint ``q`` [N, nq], start
    velocity ``u`` [N, nv], ``control`` (:class:`~.state.Control`), the bias forces of ``bias``
    (:class:`~.bias_forces.BiasForceData`) and the mass matrix of ``mass`` (see the module docstring). The solve
    must use ``H + dt diag(0, implicit_damping)``. The hand-written reverse is recorded on ``tape`` when given."""
    forward, adjoint = actuator_kernels(model.dtype)[:2]
    inputs = ActuationInputs(q=q, u=u, joint_target=control.joint_target, joint_torque=control.joint_torque,
                             bias=bias, mass=mass, dt=dt)
    launch_stage("actuation", model, [forward], adjoint, inputs, act, tape,
                 extra_grads=lambda: [model.parameter_grads("actuation")])


def applied_torque(model, u_start: wp.array, u_end: wp.array, act: ActuationData,
                   tape: wp.Tape | None = None) -> None:
    """The drive torque applied over the step, ``act.tau = tau_A - b (qd_E - qd_A)`` [N, n] (N·m), from the
    :func:`actuation` outputs in ``act`` and the step's start and end velocities [N, nv]; reverse recorded on
    ``tape``."""
    forward, adjoint = actuator_kernels(model.dtype)[2:]
    launch_stage("applied_torque", model, [forward], adjoint, AppliedTorqueInputs(u_start=u_start, u_end=u_end),
                 act, tape)
