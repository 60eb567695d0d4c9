"""Stage: the velocity without contact impulses and the contact-point velocities it gives, with a hand-written
adjoint.

``u_free = u + du`` [N, nv] (generalised velocity after the step's smooth forces, no impulses) and
``c = J u_free`` [N, 3F, 1] (each foot's contact-point velocity in its contact frame, m/s). A foot's three
rows of ``J`` are non-zero only on the foot's root path (its leg's joints and the base), so each row is a
dot product over that path (about half the DOFs of a quadruped). Backward, for the gradients ``c_bar`` and
``u_free_bar`` that arrive from the later stages::

    u_free_bar += J^T c_bar       u_bar += u_free_bar       du_bar += u_free_bar
    J_bar[r, k] += c_bar[r] u_free[k]     (k on row r's path: the other entries of J are structural zeros)
"""

import functools

import warp as wp

from .adjoint import input_grad, output_grad
from .warp_setup import warp_types


@functools.cache
def contact_velocity_kernels(dtype):
    vec3 = warp_types(dtype).vec3

    @wp.kernel(enable_backward=False)
    def contact_velocity(u: wp.array2d(dtype=dtype), du: wp.array3d(dtype=dtype), J: wp.array3d(dtype=dtype),
                         foot_path_start: wp.array(dtype=wp.int32), foot_path: wp.array(dtype=wp.int32),
                         u_free: wp.array2d(dtype=dtype), c: wp.array3d(dtype=dtype)):
        e = wp.tid()
        for k in range(u.shape[1]):
            u_free[e, k] = u[e, k] + du[e, k, 0]
        for f in range(foot_path_start.shape[0] - 1):
            s = vec3()
            for p in range(foot_path_start[f], foot_path_start[f + 1]):
                k = foot_path[p]
                s = s + vec3(J[e, 3 * f, k], J[e, 3 * f + 1, k], J[e, 3 * f + 2, k]) * u_free[e, k]
            c[e, 3 * f, 0] = s[0]
            c[e, 3 * f + 1, 0] = s[1]
            c[e, 3 * f + 2, 0] = s[2]

    @wp.kernel(enable_backward=False)
    def contact_velocity_adjoint(J: wp.array3d(dtype=dtype), u_free: wp.array2d(dtype=dtype),
                                 foot_path_start: wp.array(dtype=wp.int32), foot_path: wp.array(dtype=wp.int32),
                                 c_grad: wp.array3d(dtype=dtype), u_free_grad: wp.array2d(dtype=dtype),
                                 u_grad: wp.array2d(dtype=dtype), du_grad: wp.array3d(dtype=dtype),
                                 J_grad: wp.array3d(dtype=dtype), has_u: int, has_du: int, has_J: int):
        """Adds ``J^T c_bar`` into ``u_free_grad`` (which then holds ``u_free``'s whole adjoint), then passes it on."""
        e = wp.tid()
        for f in range(foot_path_start.shape[0] - 1):
            cb = vec3(c_grad[e, 3 * f, 0], c_grad[e, 3 * f + 1, 0], c_grad[e, 3 * f + 2, 0])
            for p in range(foot_path_start[f], foot_path_start[f + 1]):
                k = foot_path[p]
                u_free_grad[e, k] = u_free_grad[e, k] + (
                    J[e, 3 * f, k] * cb[0] + J[e, 3 * f + 1, k] * cb[1] + J[e, 3 * f + 2, k] * cb[2])
                if has_J != 0:
                    uk = u_free[e, k]
                    J_grad[e, 3 * f, k] = J_grad[e, 3 * f, k] + cb[0] * uk
                    J_grad[e, 3 * f + 1, k] = J_grad[e, 3 * f + 1, k] + cb[1] * uk
                    J_grad[e, 3 * f + 2, k] = J_grad[e, 3 * f + 2, k] + cb[2] * uk
        for k in range(u_free.shape[1]):
            g = u_free_grad[e, k]
            if has_u != 0:
                u_grad[e, k] = u_grad[e, k] + g
            if has_du != 0:
                du_grad[e, k, 0] = du_grad[e, k, 0] + g

    return contact_velocity, contact_velocity_adjoint


def contact_velocity(u: wp.array, du: wp.array, J: wp.array, foot_path_start: wp.array, foot_path: wp.array,
                     u_free: wp.array, c: wp.array, tape: wp.Tape | None = None) -> None:
    """``u_free = u + du`` [N, nv] and ``c = J u_free`` [N, 3F, 1] for ``u`` [N, nv], ``du`` [N, nv, 1] and contact
    rows ``J`` [N, 3F, nv]; records the hand-written adjoint on ``tape`` when given."""
    forward, adjoint = contact_velocity_kernels(u.dtype)
    N = u.shape[0]
    wp.launch(forward, dim=N, inputs=[u, du, J, foot_path_start, foot_path, u_free, c], device=u.device,
              record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        outs = [output_grad("contact_velocity", name, a) for name, a in (("c", c), ("u_free", u_free))]
        ins = [input_grad(f"contact_velocity.{name}", a) for name, a in (("u", u), ("du", du), ("J", J))]
        wp.launch(adjoint, dim=N, device=u.device, record_tape=False, inputs=[
            J, u_free, foot_path_start, foot_path, *outs, *(g for g, _ in ins), *(h for _, h in ins)])

    tape.record_func(backward=backward, arrays=[])
