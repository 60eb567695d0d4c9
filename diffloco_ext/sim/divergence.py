"""Stage: divergence guard. An environment whose new state is not finite (or absurdly fast, or absurdly far), or
whose state in had no orientation (a zero base quaternion, which the kinematics cannot normalise), is
flagged and keeps its previous state, so NaN/inf never reach the outputs; tasks reset flagged environments.
An environment that an earlier stage flagged (``invalid_in``, e.g. the actuation stage's non-finite control
inputs, which the envelope's clip would otherwise map silently to a torque limit) is held and flagged too.

The reverse pass sends each environment's output gradient to the state it kept: the new one, or, for a flagged
environment, the previous one.
"""

import functools

import warp as wp

from .adjoint import input_grad, output_grad
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
        norm2 = q_previous[e, 3] * q_previous[e, 3] + q_previous[e, 4] * q_previous[e, 4] + q_previous[e, 5] * q_previous[
            e, 5] + q_previous[e, 6] * q_previous[e, 6]
        if not wp.isfinite(norm2) or norm2 < dtype(1.0e-12):  # a zero quaternion is no orientation
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
        outs = [output_grad("divergence_guard", name, a) for name, a in (("q_out", q_out), ("u_out", u_out))]
        news = [output_grad("divergence_guard", name, a) for name, a in (("q_new", q_new), ("u_new", u_new))]
        (q_grad, has_q), (u_grad, has_u) = input_grad("divergence_guard.q", q_previous), input_grad(
            "divergence_guard.u", u_previous)
        wp.launch(adjoint, dim=N, device=q_new.device, record_tape=False, inputs=[
            diverged, *outs, *news, q_grad, u_grad, has_q, has_u])

    tape.record_func(backward=backward, arrays=[])


@wp.kernel(enable_backward=False)
def _accumulate_any(flag: wp.array(dtype=wp.int32), any_flag: wp.array(dtype=wp.int32)):
    e = wp.tid()
    if flag[e] != 0:
        any_flag[e] = 1


def accumulate_any(flag: wp.array, any_flag: wp.array) -> None:
    """``any_flag |= flag`` for per-env int32 flags [N] (diverged in any substep of a policy step)."""
    wp.launch(_accumulate_any, dim=flag.shape[0], inputs=[flag, any_flag], device=flag.device, record_tape=False)
