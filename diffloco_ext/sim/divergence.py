"""Stage: divergence guard. An environment whose new state is not finite (or absurdly fast, or absurdly far), or
whose state in had no orientation (a zero base quaternion, which the kinematics cannot normalise), is
flagged and keeps its previous state, so NaN/inf never reach the outputs; tasks reset flagged environments.
An environment the actuation stage flagged (``ActuationData.invalid_control``: non-finite control inputs,
which the envelope's clip would otherwise map silently to a torque limit) is held and flagged too.

The reverse pass sends each environment's output gradient to the state it kept: the new one, or, for a flagged
environment, the previous one.
"""

import functools
from dataclasses import dataclass

import warp as wp

from .actuators import ActuationData
from .adjoint import launch_stage, output_grad
from .integrator import IntegratorData
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input


@dataclass
class DivergenceData(StageData):
    """Which environments the guard held."""

    diverged: wp.array = intermediate(lambda s: (s.N,), "int32", zero=True, doc="the env diverged and was held")


@dataclass
class GuardInputs(StageInputs):
    """What the guard reads: the state in, the new state, the actuation's invalid-control flags and the bounds."""

    q: wp.array = stage_input("scalar", 2, doc="coordinates in [N, nq]")
    u: wp.array = stage_input("scalar", 2, doc="velocities in [N, nv]")
    integration: IntegratorData = stage_input(group=IntegratorData)
    act: ActuationData = stage_input(group=ActuationData)
    max_speed: float = stage_input("scalar", doc="bound on every velocity (m/s, rad/s)")
    max_distance: float = stage_input("scalar", doc="bound on every coordinate (m, rad)")


@functools.cache
def divergence_kernels(dtype):
    T = kernel_types(dtype)
    In = GuardInputs.struct_type(dtype)

    @wp.kernel(enable_backward=False)
    def guard(model: T.Model, inputs: In, outputs: T.Guard, q_out: wp.array2d(dtype=dtype),
              u_out: wp.array2d(dtype=dtype)):
        """``(q_out, u_out)``: the new state (``integration``'s ``q_new``, ``u_new``) or, for a flagged env, the
        state in."""
        e = wp.tid()
        q_new = inputs.integration.q_new
        u_new = inputs.integration.u_new
        bad = int(0)
        if inputs.act.invalid_control[e] != 0:
            bad = 1
        for k in range(q_new.shape[1]):
            x = q_new[e, k]
            if not wp.isfinite(x) or wp.abs(x) > inputs.max_distance:
                bad = 1
        for k in range(u_new.shape[1]):
            v = u_new[e, k]
            if not wp.isfinite(v) or wp.abs(v) > inputs.max_speed:
                bad = 1
        norm2 = dtype(0.0)
        for k in range(3, 7):
            norm2 = norm2 + inputs.q[e, k] * inputs.q[e, k]
        if not wp.isfinite(norm2) or norm2 < dtype(1.0e-12):  # a zero quaternion is no orientation
            bad = 1
        outputs.diverged[e] = bad
        if bad != 0:
            for k in range(q_out.shape[1]):
                q_out[e, k] = inputs.q[e, k]
            for k in range(u_out.shape[1]):
                u_out[e, k] = inputs.u[e, k]
        else:
            for k in range(q_out.shape[1]):
                q_out[e, k] = q_new[e, k]
            for k in range(u_out.shape[1]):
                u_out[e, k] = u_new[e, k]

    @wp.kernel(enable_backward=False)
    def guard_adjoint(model: T.Model, inputs: In, outputs: T.Guard, q_out: wp.array2d(dtype=dtype),
                      u_out: wp.array2d(dtype=dtype), inputs_grad: In, outputs_grad: T.Guard,
                      q_out_grad: wp.array2d(dtype=dtype), u_out_grad: wp.array2d(dtype=dtype)):
        """Each env's output adjoint to the state it kept (accumulated into ``inputs_grad``)."""
        e = wp.tid()
        if outputs.diverged[e] != 0:  # the output is the state in
            for k in range(q_out_grad.shape[1]):
                inputs_grad.q[e, k] = inputs_grad.q[e, k] + q_out_grad[e, k]
            for k in range(u_out_grad.shape[1]):
                inputs_grad.u[e, k] = inputs_grad.u[e, k] + u_out_grad[e, k]
        else:
            q_new_grad = inputs_grad.integration.q_new
            u_new_grad = inputs_grad.integration.u_new
            for k in range(q_out_grad.shape[1]):
                q_new_grad[e, k] = q_new_grad[e, k] + q_out_grad[e, k]
            for k in range(u_out_grad.shape[1]):
                u_new_grad[e, k] = u_new_grad[e, k] + u_out_grad[e, k]

    return guard, guard_adjoint


def divergence_guard(model, q: wp.array, u: wp.array, integration, act, max_speed: float, max_distance: float,
                     guard: DivergenceData, q_out: wp.array, u_out: wp.array, tape: wp.Tape | None = None) -> None:
    """``(q_out, u_out)`` = the new state of ``integration``, or the state in ``(q, u)`` where it diverged (flag
    in ``guard.diverged`` [N] int32) or where ``act`` flagged an invalid control; ``max_speed`` (m/s, rad/s) and
    ``max_distance`` (m) bound a sane state. Reverse recorded on ``tape``."""
    forward, adjoint = divergence_kernels(model.dtype)
    inputs = GuardInputs(q=q, u=u, integration=integration, act=act, max_speed=max_speed, max_distance=max_distance)
    launch_stage("divergence_guard", model, [forward], adjoint, inputs, guard, tape, extra_inputs=[q_out, u_out],
                 extra_grads=lambda: [output_grad("divergence_guard", "q_out", q_out),
                                      output_grad("divergence_guard", "u_out", u_out)])


@wp.kernel(enable_backward=False)
def _accumulate_any(flag: wp.array(dtype=wp.int32), any_flag: wp.array(dtype=wp.int32)):
    e = wp.tid()
    if flag[e] != 0:
        any_flag[e] = 1


def accumulate_any(flag: wp.array, any_flag: wp.array) -> None:
    """``any_flag |= flag`` for per-env int32 flags [N] (diverged in any substep of a policy step)."""
    wp.launch(_accumulate_any, dim=flag.shape[0], inputs=[flag, any_flag], device=flag.device, record_tape=False)
