"""Stage: actuator torques (PD position tracking inside a DC-motor envelope) and passive joint damping.

``tau = clip(k_p (q* - q) - k_d qdot + tau_ff, tau_min(qdot), tau_max(qdot))`` with the DC-motor torque-speed
line of Isaac Lab's ``DCMotorCfg``::

    tau_max = clip(S (1 - qdot / v_max), 0, E)        tau_min = clip(S (-1 - qdot / v_max), -E, 0)

(``S`` saturation torque, ``E`` effort limit, ``v_max`` the motor's no-load speed; N·m, rad/s). The clip is
piecewise linear: its gradient is zero where a torque saturates, as the physics says.
"""


import functools

import warp as wp


@functools.cache
def actuator_kernels(dtype):
    @wp.kernel
    def pd_dc_motor(
        q: wp.array2d(dtype=dtype),
        u: wp.array2d(dtype=dtype),
        joint_target: wp.array2d(dtype=dtype),
        joint_torque_ff: wp.array2d(dtype=dtype),
        stiffness: wp.array2d(dtype=dtype),
        damping: wp.array2d(dtype=dtype),
        effort_limit: dtype,
        saturation_effort: dtype,
        velocity_limit: dtype,
        tau: wp.array2d(dtype=dtype),
    ):
        e = wp.tid()
        zero = dtype(0.0)
        one = dtype(1.0)
        for j in range(tau.shape[1]):
            pos = q[e, 7 + j]
            vel = u[e, 6 + j]
            raw = stiffness[e, j] * (joint_target[e, j] - pos) - damping[e, j] * vel + joint_torque_ff[e, j]
            upper = wp.clamp(saturation_effort * (one - vel / velocity_limit), zero, effort_limit)
            lower = wp.clamp(saturation_effort * (-one - vel / velocity_limit), -effort_limit, zero)
            tau[e, j] = wp.clamp(raw, lower, upper)

    @wp.kernel
    def impulse_rhs(
        u: wp.array2d(dtype=dtype),
        tau: wp.array2d(dtype=dtype),
        bias: wp.array2d(dtype=dtype),
        joint_friction_damping: wp.array(dtype=dtype),
        dt: dtype,
        fixed_base: int,
        rhs: wp.array3d(dtype=dtype),
    ):
        """``dt * h`` with ``h = applied - bias``: actuator torque and viscous joint damping on the joints."""
        e = wp.tid()
        for k in range(rhs.shape[1]):
            applied = dtype(0.0)
            if k >= 6:
                applied = tau[e, k - 6] - joint_friction_damping[k - 6] * u[e, k]
            value = dt * (applied - bias[e, k])
            if fixed_base != 0 and k < 6:
                value = dtype(0.0)
            rhs[e, k, 0] = value

    return pd_dc_motor, impulse_rhs
