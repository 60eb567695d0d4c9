"""Stage: position updates of the Moreau scheme (half step to the midpoint, trapezoidal full step).

``q_out = q + h * (u_a + u_b) / 2`` on the configuration manifold: positions and joint angles add; the base
orientation turns by the body-frame rotation vector ``h (w_a + w_b) / 2`` through the exponential map
(``quat_out = quat ⊗ exp(phi / 2)``, renormalised). The small-angle branch uses the series so the gradient is
finite at zero angular velocity.
"""


import functools

import warp as wp

from .adjoint import input_grad, output_grad
from .warp_setup import warp_types


@functools.cache
def integrator_kernels(dtype):
    t = warp_types(dtype)
    vec3, quat = t.vec3, t.quat

    @wp.func
    def exp_map(phi: vec3):
        """Unit quaternion (x, y, z, w) of the rotation vector ``phi`` (rad)."""
        theta2 = wp.dot(phi, phi)
        half = dtype(0.5)
        s = half - theta2 / dtype(48.0)
        c = dtype(1.0) - theta2 / dtype(8.0)
        if theta2 > dtype(1.0e-6):
            theta = wp.sqrt(theta2)
            s = wp.sin(theta * half) / theta
            c = wp.cos(theta * half)
        return quat(phi[0] * s, phi[1] * s, phi[2] * s, c)

    @wp.kernel
    def integrate_positions(
        q: wp.array2d(dtype=dtype),
        u_a: wp.array2d(dtype=dtype),
        u_b: wp.array2d(dtype=dtype),
        h: dtype,
        q_out: wp.array2d(dtype=dtype),
    ):
        e = wp.tid()
        half = dtype(0.5)
        for k in range(3):
            q_out[e, k] = q[e, k] + h * half * (u_a[e, k] + u_b[e, k])
        w = vec3(u_a[e, 3] + u_b[e, 3], u_a[e, 4] + u_b[e, 4], u_a[e, 5] + u_b[e, 5]) * (h * half)
        rot = quat(q[e, 4], q[e, 5], q[e, 6], q[e, 3])
        out = wp.normalize(rot * exp_map(w))
        q_out[e, 3] = out[3]
        q_out[e, 4] = out[0]
        q_out[e, 5] = out[1]
        q_out[e, 6] = out[2]
        for j in range(q.shape[1] - 7):
            q_out[e, 7 + j] = q[e, 7 + j] + h * half * (u_a[e, 6 + j] + u_b[e, 6 + j])

    @wp.kernel(enable_backward=False)
    def add_velocity(u: wp.array2d(dtype=dtype), du: wp.array3d(dtype=dtype), u_out: wp.array2d(dtype=dtype)):
        """``u_out = u + du`` (``du`` a column per env, as the solves produce it)."""
        e = wp.tid()
        for k in range(u.shape[1]):
            u_out[e, k] = u[e, k] + du[e, k, 0]

    @wp.kernel(enable_backward=False)
    def add_velocity_adjoint(u_out_grad: wp.array2d(dtype=dtype), u_grad: wp.array2d(dtype=dtype),
                             du_grad: wp.array3d(dtype=dtype), has_u: int):
        e = wp.tid()
        for k in range(u_out_grad.shape[1]):
            g = u_out_grad[e, k]
            if has_u != 0:
                u_grad[e, k] = u_grad[e, k] + g
            du_grad[e, k, 0] = du_grad[e, k, 0] + g

    return integrate_positions, add_velocity, add_velocity_adjoint


def add_velocity(u: wp.array, du: wp.array, u_out: wp.array, tape: wp.Tape | None = None) -> None:
    """``u_out = u + du`` for ``u`` [N, nv] and ``du`` [N, nv, 1]; the reverse is recorded on ``tape`` when given."""
    _, forward, adjoint = integrator_kernels(u.dtype)
    N = u.shape[0]
    wp.launch(forward, dim=N, inputs=[u, du, u_out], device=u.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        u_grad, has_u = input_grad("add_velocity.u", u)
        wp.launch(adjoint, dim=N, device=u.device, record_tape=False, inputs=[
            output_grad("add_velocity", "u_out", u_out), u_grad, output_grad("add_velocity", "du", du), has_u])

    tape.record_func(backward=backward, arrays=[])


@functools.cache
def mean_kernels(dtype, vec):
    @wp.kernel(enable_backward=False)
    def accumulate(src: wp.array2d(dtype=vec), weight: dtype, acc: wp.array2d(dtype=vec)):
        e, i = wp.tid()
        acc[e, i] = acc[e, i] + src[e, i] * weight

    @wp.kernel(enable_backward=False)
    def accumulate_adjoint(acc_grad: wp.array2d(dtype=vec), weight: dtype, src_grad: wp.array2d(dtype=vec)):
        e, i = wp.tid()
        src_grad[e, i] = src_grad[e, i] + acc_grad[e, i] * weight

    return accumulate, accumulate_adjoint


def accumulate_mean(src: wp.array, weight: float, acc: wp.array, tape: wp.Tape | None = None) -> None:
    """``acc += weight * src`` for 2-d arrays of one dtype (a term of a mean over substeps, e.g. the contact force
    of one physics step in a policy step's mean); the reverse is recorded on ``tape`` when given."""
    scalar = getattr(src.dtype, "_wp_scalar_type_", src.dtype)
    forward, adjoint = mean_kernels(scalar, src.dtype)
    w = scalar(weight)
    wp.launch(forward, dim=src.shape, inputs=[src, w, acc], device=src.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        wp.launch(adjoint, dim=src.shape, device=src.device, record_tape=False, inputs=[
            output_grad("accumulate_mean", "acc", acc), w, output_grad("accumulate_mean", "src", src)])

    tape.record_func(backward=backward, arrays=[])
