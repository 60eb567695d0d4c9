"""Stage: actuator torques (PD position tracking inside a DC-motor envelope), passive joint damping, and the
step's generalised impulse, with a hand-written adjoint.

``tau = clip(k_p (q* - q) - k_d qdot + tau_ff, tau_min(qdot), tau_max(qdot))`` with the DC-motor torque-speed
line of Isaac Lab's ``DCMotorCfg``::

    tau_max = clip(S (1 - qdot / v_max), 0, E)        tau_min = clip(S (-1 - qdot / v_max), -E, 0)

(``S`` saturation torque, ``E`` effort limit, ``v_max`` the motor's no-load speed; N·m, rad/s). The clip is
piecewise linear: its gradient is zero where a torque saturates, as the physics says (at a kink the reverse
pass takes the branch the forward pass took: below the lower bound, above the upper bound, else inside).

The impulse of the smooth forces over the step, ``rhs = dt (applied - bias)`` [N, nv, 1], with
``applied = tau - d_j qdot`` on the joints (``d_j`` viscous joint damping) and zero on the base (and ``rhs = 0``
on the base of a fixed-base model).
"""


import functools

import warp as wp

from .adjoint import input_grad


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
        q: wp.array2d(dtype=dtype),
        u: wp.array2d(dtype=dtype),
        joint_target: wp.array2d(dtype=dtype),
        joint_torque_ff: wp.array2d(dtype=dtype),
        stiffness: wp.array2d(dtype=dtype),
        damping: wp.array2d(dtype=dtype),
        effort_limit: dtype,
        saturation_effort: dtype,
        velocity_limit: dtype,
        bias: wp.array2d(dtype=dtype),
        joint_friction_damping: wp.array(dtype=dtype),
        dt: dtype,
        fixed_base: int,
        tau: wp.array2d(dtype=dtype),
        rhs: wp.array3d(dtype=dtype),
    ):
        """Drive torques ``tau`` [N, n] at ``(q, u)`` and the impulse ``rhs`` [N, nv, 1]."""
        e = wp.tid()
        for k in range(6):
            value = -dt * bias[e, k]
            if fixed_base != 0:
                value = zero
            rhs[e, k, 0] = value
        for j in range(tau.shape[1]):
            vel = u[e, 6 + j]
            raw = stiffness[e, j] * (joint_target[e, j] - q[e, 7 + j]) - damping[e, j] * vel + joint_torque_ff[e, j]
            lower, upper = _envelope(vel, effort_limit, saturation_effort, velocity_limit)
            torque = wp.clamp(raw, lower, upper)
            tau[e, j] = torque
            rhs[e, 6 + j, 0] = dt * (torque - joint_friction_damping[j] * vel - bias[e, 6 + j])

    @wp.kernel(enable_backward=False)
    def actuation_adjoint(
        q: wp.array2d(dtype=dtype),
        u: wp.array2d(dtype=dtype),
        joint_target: wp.array2d(dtype=dtype),
        joint_torque_ff: wp.array2d(dtype=dtype),
        stiffness: wp.array2d(dtype=dtype),
        damping: wp.array2d(dtype=dtype),
        effort_limit: dtype,
        saturation_effort: dtype,
        velocity_limit: dtype,
        joint_friction_damping: wp.array(dtype=dtype),
        dt: dtype,
        fixed_base: int,
        rhs_grad: wp.array3d(dtype=dtype),
        q_grad: wp.array2d(dtype=dtype),
        u_grad: wp.array2d(dtype=dtype),
        target_grad: wp.array2d(dtype=dtype),
        torque_ff_grad: wp.array2d(dtype=dtype),
        stiffness_grad: wp.array2d(dtype=dtype),
        damping_grad: wp.array2d(dtype=dtype),
        bias_grad: wp.array2d(dtype=dtype),
        has_q: int,
        has_u: int,
        has_target: int,
        has_ff: int,
        has_gains: int,
    ):
        """Reverse of :func:`actuation` (the ``*_grad`` arrays are accumulated into)."""
        e = wp.tid()
        if fixed_base == 0:
            for k in range(6):
                bias_grad[e, k] = bias_grad[e, k] - dt * rhs_grad[e, k, 0]
        for j in range(joint_friction_damping.shape[0]):
            g = dt * rhs_grad[e, 6 + j, 0]
            bias_grad[e, 6 + j] = bias_grad[e, 6 + j] - g
            vel = u[e, 6 + j]
            err = joint_target[e, j] - q[e, 7 + j]
            kp = stiffness[e, j]
            kd = damping[e, j]
            raw = kp * err - kd * vel + joint_torque_ff[e, j]
            lower, upper = _envelope(vel, effort_limit, saturation_effort, velocity_limit)
            adj_vel = -joint_friction_damping[j] * g
            adj_raw = zero
            adj_bound = zero  # adjoint of the active bound (lower or upper)
            d_bound = zero  # its derivative w.r.t. vel where the bound's own clip is inactive
            if raw < lower:
                adj_bound = g
                inner = saturation_effort * (-one - vel / velocity_limit)
                if inner >= -effort_limit and inner <= zero:
                    d_bound = -saturation_effort / velocity_limit
            elif raw > upper:
                adj_bound = g
                inner = saturation_effort * (one - vel / velocity_limit)
                if inner >= zero and inner <= effort_limit:
                    d_bound = -saturation_effort / velocity_limit
            else:
                adj_raw = g
            adj_vel += adj_bound * d_bound - kd * adj_raw
            if has_u != 0:
                u_grad[e, 6 + j] = u_grad[e, 6 + j] + adj_vel
            if has_q != 0:
                q_grad[e, 7 + j] = q_grad[e, 7 + j] - kp * adj_raw
            if has_target != 0:
                target_grad[e, j] = target_grad[e, j] + kp * adj_raw
            if has_ff != 0:
                torque_ff_grad[e, j] = torque_ff_grad[e, j] + adj_raw
            if has_gains != 0:
                stiffness_grad[e, j] = stiffness_grad[e, j] + err * adj_raw
                damping_grad[e, j] = damping_grad[e, j] - vel * adj_raw

    return actuation, actuation_adjoint


def actuation(model, q: wp.array, u: wp.array, control, bias: wp.array, dt: float, tau: wp.array, rhs: wp.array,
              tape: wp.Tape | None = None) -> None:
    """Drive torques ``tau`` [N, n] at ``(q, u)`` under ``control`` and the step's impulse ``rhs`` [N, nv, 1]
    (see the module docstring); the hand-written reverse is recorded on ``tape`` when given."""
    forward, adjoint = actuator_kernels(model.dtype)
    m, s = model, model.dtype
    limits = [s(m.effort_limit), s(m.saturation_effort), s(m.velocity_limit)]
    wp.launch(forward, dim=m.num_envs, device=m.device, record_tape=False, inputs=[
        q, u, control.joint_target, control.joint_torque, m.joint_stiffness, m.joint_damping, *limits, bias,
        m.joint_friction_damping, s(dt), int(m.fixed_base), tau, rhs])
    if tape is None:
        return
    gains = (m.joint_stiffness, m.joint_damping)
    inputs = (q, u, control.joint_target, control.joint_torque)

    def backward() -> None:
        if rhs.grad is None:
            return
        has = [a.requires_grad and a.grad is not None for a in inputs]
        has_gains = any(a.requires_grad and a.grad is not None for a in gains)  # stand-in for the other one
        has_bias = bias.requires_grad and bias.grad is not None
        if not has_bias:
            raise RuntimeError("actuation: the bias forces must carry a gradient on a taped step")
        grads = [a.grad if h else a for a, h in zip(inputs, has)]
        wp.launch(adjoint, dim=m.num_envs, device=m.device, record_tape=False, inputs=[
            *inputs, *gains, *limits, m.joint_friction_damping, s(dt), int(m.fixed_base), rhs.grad, *grads,
            *(input_grad("actuation", a)[0] for a in gains), bias.grad, *(int(h) for h in has), int(has_gains)])

    tape.record_func(backward=backward, arrays=[])
