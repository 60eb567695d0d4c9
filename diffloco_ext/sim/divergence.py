"""Stage: divergence guard. An environment whose new state is not finite (or absurdly fast, or absurdly far) is
flagged and keeps its previous state, so NaN/inf never reach the outputs; tasks reset flagged environments.
An environment that an earlier stage flagged (``invalid_in``, e.g. the actuation stage's non-finite control
inputs, which the envelope's clip would otherwise map silently to a torque limit) is held and flagged too.

The reverse pass sends each environment's output gradient to the state it kept: the new one, or, for a flagged
environment, the previous one.
"""

import functools

import warp as wp

from .scratch import scratch_array


@functools.cache
def divergence_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def guard(q_new: wp.array2d(dtype=dtype), u_new: wp.array2d(dtype=dtype), q_previous: wp.array2d(dtype=dtype),
              u_previous: wp.array2d(dtype=dtype), invalid_in: wp.array(dtype=wp.int32), max_speed: dtype,
              max_distance: dtype, diverged: wp.array(dtype=wp.int32), q_out: wp.array2d(dtype=dtype), u_out: wp.array2d(dtype=dtype)):
        e = wp.tid()
        bad = int(0)
        if invalid_in[e] != 0:
            bad = 1
        for k in range(q_new.shape[1]):
            x = q_new[e, k]
            if not wp.isfinite(x) or wp.abs(x) > max_distance:
                bad = 1
        for k in range(u_new.shape[1]):
            v = u_new[e, k]
            if not wp.isfinite(v) or wp.abs(v) > max_speed:
                bad = 1
        diverged[e] = bad
        if bad != 0:
            for k in range(q_out.shape[1]):
                q_out[e, k] = q_previous[e, k]
            for k in range(u_out.shape[1]):
                u_out[e, k] = u_previous[e, k]
        else:
            for k in range(q_out.shape[1]):
                q_out[e, k] = q_new[e, k]
            for k in range(u_out.shape[1]):
                u_out[e, k] = u_new[e, k]

    @wp.kernel(enable_backward=False)
    def guard_adjoint(diverged: wp.array(dtype=wp.int32), q_out_grad: wp.array2d(dtype=dtype),
                      u_out_grad: wp.array2d(dtype=dtype), q_new_grad: wp.array2d(dtype=dtype),
                      u_new_grad: wp.array2d(dtype=dtype), q_previous_grad: wp.array2d(dtype=dtype),
                      u_previous_grad: wp.array2d(dtype=dtype), has_q_previous: int, has_u_previous: int):
        e = wp.tid()
        if diverged[e] != 0:
            if has_q_previous != 0:
                for k in range(q_out_grad.shape[1]):
                    q_previous_grad[e, k] = q_previous_grad[e, k] + q_out_grad[e, k]
            if has_u_previous != 0:
                for k in range(u_out_grad.shape[1]):
                    u_previous_grad[e, k] = u_previous_grad[e, k] + u_out_grad[e, k]
        else:
            for k in range(q_out_grad.shape[1]):
                q_new_grad[e, k] = q_new_grad[e, k] + q_out_grad[e, k]
            for k in range(u_out_grad.shape[1]):
                u_new_grad[e, k] = u_new_grad[e, k] + u_out_grad[e, k]

    return guard, guard_adjoint


def divergence_guard(q_new: wp.array, u_new: wp.array, q_previous: wp.array, u_previous: wp.array,
                     max_speed: float, max_distance: float, diverged: wp.array, q_out: wp.array, u_out: wp.array,
                     tape: wp.Tape | None = None, invalid: wp.array | None = None) -> None:
    """``(q_out, u_out)`` = the new state, or the previous one where it diverged (flag in ``diverged`` [N] int32);
    ``max_speed`` (m/s, rad/s) and ``max_distance`` (m) bound a sane state; ``invalid`` [N] int32 (optional)
    flags environments an earlier stage found invalid (held and flagged too). Reverse recorded on ``tape``."""
    forward, adjoint = divergence_kernels(q_new.dtype)
    s = q_new.dtype
    N = q_new.shape[0]
    if invalid is None:
        invalid = scratch_array("divergence.none_invalid", (N,), wp.int32, q_new.device)
    wp.launch(forward, dim=N, device=q_new.device, record_tape=False, inputs=[
        q_new, u_new, q_previous, u_previous, invalid, s(max_speed), s(max_distance), diverged, q_out, u_out])
    if tape is None:
        return

    def backward() -> None:
        if q_out.grad is None or u_out.grad is None or q_new.grad is None or u_new.grad is None:
            return
        has_q = q_previous.requires_grad and q_previous.grad is not None
        has_u = u_previous.requires_grad and u_previous.grad is not None
        wp.launch(adjoint, dim=N, device=q_new.device, record_tape=False, inputs=[
            diverged, q_out.grad, u_out.grad, q_new.grad, u_new.grad, q_previous.grad if has_q else q_out.grad,
            u_previous.grad if has_u else u_out.grad, int(has_q), int(has_u)])

    tape.record_func(backward=backward, arrays=[])
