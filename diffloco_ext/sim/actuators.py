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

import warp as wp

from .adjoint import input_grad, output_grad

#: ``drive_branch`` codes: which piece of the envelope a joint is on over the step.
TRACKING = 0  # tau = raw (inside the envelope)
EFFORT = 1  # tau = +-E
ZERO = 2  # tau = 0 (past the no-load speed)
SPEED_FROM_RAW = 3  # speed line, implicit; tau_A = raw (the joint starts inside the envelope)
SPEED_FROM_LINE = 4  # speed line, implicit; tau_A = S (+-1 - qd_A / v) (the joint starts on the line)
SPEED_FROM_LIMIT = 5  # speed line, implicit; tau_A = +-E or 0 (the joint starts on a flat piece)
INVALID = 7  # non-finite control input: tau = 0, the env is flagged


@functools.cache
def actuator_kernels(dtype):
    zero = dtype(0.0)
    one = dtype(1.0)

    @wp.func
    def _envelope(vel: dtype, effort_limit: dtype, saturation_effort: dtype, velocity_limit: dtype):
        """(lower, upper) torque bounds of the DC motor at joint speed ``vel``."""
        upper = wp.clamp(saturation_effort * (one - vel / velocity_limit), zero, effort_limit)
        lower = wp.clamp(saturation_effort * (-one - vel / velocity_limit), -effort_limit, zero)
        return lower, upper

    @wp.kernel(enable_backward=False)
    def actuation(
        # Model:
        stiffness: wp.array2d(dtype=dtype),
        damping: wp.array2d(dtype=dtype),
        effort_limit: wp.array2d(dtype=dtype),
        saturation_effort: wp.array2d(dtype=dtype),
        velocity_limit: wp.array2d(dtype=dtype),
        joint_friction_damping: wp.array2d(dtype=dtype),
        fixed_base: int,
        # In:
        q_in: wp.array2d(dtype=dtype),
        u_in: wp.array2d(dtype=dtype),
        joint_target_in: wp.array2d(dtype=dtype),
        joint_torque_ff_in: wp.array2d(dtype=dtype),
        bias_in: wp.array2d(dtype=dtype),
        H_in: wp.array3d(dtype=dtype),
        dt: dtype,
        # Out:
        branch_out: wp.array2d(dtype=wp.int32),
        tau_start_out: wp.array2d(dtype=dtype),
        implicit_damping_out: wp.array2d(dtype=dtype),
        rhs_out: wp.array3d(dtype=dtype),
        invalid_out: wp.array(dtype=wp.int32),
    ):
        """Branches, ``tau_A``, ``b`` [N, n], the impulse ``rhs`` [N, nv, 1] and the invalid-control flag [N]."""
        e = wp.tid()
        for k in range(6):
            value = -dt * bias_in[e, k]
            if fixed_base != 0:
                value = zero
            rhs_out[e, k, 0] = value
        invalid = int(0)
        for j in range(stiffness.shape[1]):
            vel = u_in[e, 6 + j]
            target = joint_target_in[e, j]
            ff = joint_torque_ff_in[e, j]
            E = effort_limit[e, j]
            S = saturation_effort[e, j]
            v = velocity_limit[e, j]
            d = joint_friction_damping[e, j]
            raw = stiffness[e, j] * (target - q_in[e, 7 + j]) - damping[e, j] * vel + ff
            # predictor: the joint alone ends at w(tau) = w0 + c tau
            c = dt / H_in[e, 6 + j, 6 + j]
            w0 = vel + c * (-bias_in[e, 6 + j] - d * vel)
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
            branch_out[e, j] = branch
            tau_start_out[e, j] = torque
            implicit_damping_out[e, j] = slope
            rhs_out[e, 6 + j, 0] = dt * (torque - d * vel - bias_in[e, 6 + j])
        invalid_out[e] = invalid

    @wp.kernel(enable_backward=False)
    def actuation_adjoint(
        # Model:
        stiffness: wp.array2d(dtype=dtype),
        damping: wp.array2d(dtype=dtype),
        joint_friction_damping: wp.array2d(dtype=dtype),
        fixed_base: int,
        # In:
        q_in: wp.array2d(dtype=dtype),
        u_in: wp.array2d(dtype=dtype),
        joint_target_in: wp.array2d(dtype=dtype),
        joint_torque_ff_in: wp.array2d(dtype=dtype),
        dt: dtype,
        branch_in: wp.array2d(dtype=wp.int32),
        implicit_damping_in: wp.array2d(dtype=dtype),
        rhs_grad_in: wp.array3d(dtype=dtype),
        tau_start_grad_in: wp.array2d(dtype=dtype),
        # Out (accumulated into where the flag is set):
        q_grad_out: wp.array2d(dtype=dtype),
        u_grad_out: wp.array2d(dtype=dtype),
        target_grad_out: wp.array2d(dtype=dtype),
        torque_ff_grad_out: wp.array2d(dtype=dtype),
        stiffness_grad_out: wp.array2d(dtype=dtype),
        damping_grad_out: wp.array2d(dtype=dtype),
        bias_grad_out: wp.array2d(dtype=dtype),
        has_q: int,
        has_u: int,
        has_target: int,
        has_ff: int,
        has_stiffness: int,
        has_damping: int,
        has_bias: int,
    ):
        """Reverse of :func:`actuation` for the chosen branches (held fixed)."""
        e = wp.tid()
        if fixed_base == 0 and has_bias != 0:
            for k in range(6):
                bias_grad_out[e, k] = bias_grad_out[e, k] - dt * rhs_grad_in[e, k, 0]
        for j in range(stiffness.shape[1]):
            g_rhs = dt * rhs_grad_in[e, 6 + j, 0]
            if has_bias != 0:
                bias_grad_out[e, 6 + j] = bias_grad_out[e, 6 + j] - g_rhs
            g = g_rhs + tau_start_grad_in[e, j]  # adjoint of tau_A
            vel = u_in[e, 6 + j]
            adj_vel = -joint_friction_damping[e, j] * g_rhs
            branch = branch_in[e, j]
            if branch == TRACKING or branch == SPEED_FROM_RAW:
                kp = stiffness[e, j]
                adj_vel = adj_vel - damping[e, j] * g
                if has_q != 0:
                    q_grad_out[e, 7 + j] = q_grad_out[e, 7 + j] - kp * g
                if has_target != 0:
                    target_grad_out[e, j] = target_grad_out[e, j] + kp * g
                if has_ff != 0:
                    torque_ff_grad_out[e, j] = torque_ff_grad_out[e, j] + g
                if has_stiffness != 0:
                    stiffness_grad_out[e, j] = stiffness_grad_out[e, j] + (joint_target_in[e, j] - q_in[e, 7 + j]) * g
                if has_damping != 0:
                    damping_grad_out[e, j] = damping_grad_out[e, j] - vel * g
            elif branch == SPEED_FROM_LINE:
                adj_vel = adj_vel - implicit_damping_in[e, j] * g  # tau_A = S (+-1 - qd_A / v)
            if has_u != 0:
                u_grad_out[e, 6 + j] = u_grad_out[e, 6 + j] + adj_vel

    @wp.kernel(enable_backward=False)
    def applied_torque(
        # In:
        tau_start_in: wp.array2d(dtype=dtype),
        implicit_damping_in: wp.array2d(dtype=dtype),
        u_start_in: wp.array2d(dtype=dtype),
        u_end_in: wp.array2d(dtype=dtype),
        # Out:
        tau_out: wp.array2d(dtype=dtype),
    ):
        """``tau = tau_A - b (qd_E - qd_A)`` [N, n]."""
        e = wp.tid()
        for j in range(tau_out.shape[1]):
            tau_out[e, j] = tau_start_in[e, j] - implicit_damping_in[e, j] * (u_end_in[e, 6 + j] - u_start_in[e, 6 + j])

    @wp.kernel(enable_backward=False)
    def applied_torque_adjoint(
        # In:
        implicit_damping_in: wp.array2d(dtype=dtype),
        tau_grad_in: wp.array2d(dtype=dtype),
        # Out (accumulated into where the flag is set):
        tau_start_grad_out: wp.array2d(dtype=dtype),
        u_start_grad_out: wp.array2d(dtype=dtype),
        u_end_grad_out: wp.array2d(dtype=dtype),
        has_u_start: int,
    ):
        e = wp.tid()
        for j in range(tau_grad_in.shape[1]):
            g = tau_grad_in[e, j]
            bg = implicit_damping_in[e, j] * g
            tau_start_grad_out[e, j] = tau_start_grad_out[e, j] + g
            u_end_grad_out[e, 6 + j] = u_end_grad_out[e, 6 + j] - bg
            if has_u_start != 0:
                u_start_grad_out[e, 6 + j] = u_start_grad_out[e, 6 + j] + bg

    return actuation, actuation_adjoint, applied_torque, applied_torque_adjoint


def actuation(model, q: wp.array, u: wp.array, control, bias: wp.array, H: wp.array, dt: float, branch: wp.array,
              tau_start: wp.array, implicit_damping: wp.array, rhs: wp.array, invalid: wp.array,
              tape: wp.Tape | None = None) -> None:
    """Drive branches ``branch`` [N, n] int32, torques at the start velocity ``tau_start`` [N, n] (N·m), implicit
    damping ``implicit_damping`` [N, n] (N·m·s/rad), the step's impulse ``rhs`` [N, nv, 1] (N·m·s) and the
    invalid-control flags ``invalid`` [N] int32 at the midpoint ``q`` [N, nq], start velocity ``u`` [N, nv],
    bias forces ``bias`` [N, nv] and mass matrix ``H`` [N, nv, nv] (see the module docstring). The solve must
    use ``H + dt diag(0, implicit_damping)``. The hand-written reverse is recorded on ``tape`` when given."""
    forward, adjoint = actuator_kernels(model.dtype)[:2]
    m, s = model, model.dtype
    wp.launch(forward, dim=m.num_envs, device=m.device, record_tape=False, inputs=[
        m.joint_stiffness, m.joint_damping, m.effort_limit, m.saturation_effort, m.velocity_limit,
        m.joint_friction_damping, int(m.fixed_base), q, u, control.joint_target, control.joint_torque, bias, H, s(dt),
        branch, tau_start, implicit_damping, rhs, invalid])
    if tape is None:
        return
    inputs = (q, u, control.joint_target, control.joint_torque, m.joint_stiffness, m.joint_damping, bias)

    def backward() -> None:
        rhs_grad = output_grad("actuation", "rhs", rhs)
        tau_start_grad = output_grad("actuation", "tau_start", tau_start)
        grads, flags = zip(*(input_grad("actuation", a) for a in inputs))
        wp.launch(adjoint, dim=m.num_envs, device=m.device, record_tape=False, inputs=[
            m.joint_stiffness, m.joint_damping, m.joint_friction_damping, int(m.fixed_base), q, u,
            control.joint_target, control.joint_torque, s(dt), branch, implicit_damping, rhs_grad, tau_start_grad,
            *grads, *flags])

    tape.record_func(backward=backward, arrays=[])


def applied_torque(tau_start: wp.array, implicit_damping: wp.array, u_start: wp.array, u_end: wp.array,
                   tau: wp.array, tape: wp.Tape | None = None) -> None:
    """The drive torque applied over the step, ``tau = tau_A - b (qd_E - qd_A)`` [N, n] (N·m), from the
    :func:`actuation` outputs and the step's start and end velocities [N, nv]; reverse recorded on ``tape``."""
    forward, adjoint = actuator_kernels(tau.dtype)[2:]
    N = tau.shape[0]
    wp.launch(forward, dim=N, device=tau.device, record_tape=False,
              inputs=[tau_start, implicit_damping, u_start, u_end, tau])
    if tape is None:
        return

    def backward() -> None:
        tau_grad = output_grad("applied torque", "tau", tau)
        tau_start_grad = output_grad("applied torque", "tau_start (its input, an intermediate)", tau_start)
        u_end_grad = output_grad("applied torque", "u_new (its input, an intermediate)", u_end)
        u_start_grad, has_u_start = input_grad("applied torque", u_start)
        wp.launch(adjoint, dim=N, device=tau.device, record_tape=False, inputs=[
            implicit_damping, tau_grad, tau_start_grad, u_start_grad, u_end_grad, has_u_start])

    tape.record_func(backward=backward, arrays=[])
