"""Stage: position updates of the Moreau scheme (half step to the midpoint, trapezoidal full step).

``q_out = q + h * (u_a + u_b) / 2`` on the configuration manifold: positions and joint angles add; the base
orientation turns by the body-frame rotation vector ``h (w_a + w_b) / 2`` through the exponential map
(``quat_out = quat ⊗ exp(phi / 2)``, renormalised). The small-angle branch uses the series so the gradient is
finite at zero angular velocity.
"""


import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch, launch_stage, output_grad
from .cholesky import SolveData
from .coordinates import BASE_COORDS, base_funcs, dof_of_joint, q_of_joint
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import specialized_kernel_name, warp_types


@dataclass
class IntegratorData(StageData):
    """The step's configurations and end velocity before the divergence guard."""

    q_mid: wp.array = intermediate(lambda s: (s.N, s.nq), doc="midpoint coordinates")
    u_new: wp.array = intermediate(lambda s: (s.N, s.nv), doc="end-of-step velocity (written by the velocity "
                                                              "update: add_velocity, or the contact impulse response)")
    q_new: wp.array = intermediate(lambda s: (s.N, s.nq), doc="end-of-step coordinates")


@dataclass
class VelocityUpdateInputs(StageInputs):
    """What the velocity update without contact reads."""

    u: wp.array = stage_input("scalar", 2, doc="start velocities [N, nv]")
    solve: SolveData = stage_input(group=SolveData)


@functools.cache
def integrator_kernels(dtype):
    t = warp_types(dtype)
    vec3, quat = t.vec3, t.quat
    _, base_quat, store_base_quat, _, base_angular_velocity = base_funcs(dtype)
    T = kernel_types(dtype)
    In = VelocityUpdateInputs.struct_type(dtype)

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
        # In:
        q_in: wp.array2d(dtype=dtype),
        u_a_in: wp.array2d(dtype=dtype),
        u_b_in: wp.array2d(dtype=dtype),
        h: dtype,
        # Out:
        q_out: wp.array2d(dtype=dtype),
    ):
        """``q_out = q + h (u_a + u_b) / 2`` on the configuration manifold (differentiated by Warp's tape)."""
        e = wp.tid()
        half = dtype(0.5)
        for k in range(3):
            q_out[e, k] = q_in[e, k] + h * half * (u_a_in[e, k] + u_b_in[e, k])
        w = (base_angular_velocity(u_a_in, e) + base_angular_velocity(u_b_in, e)) * (h * half)
        store_base_quat(q_out, e, wp.normalize(base_quat(q_in, e) * exp_map(w)))
        for j in range(q_in.shape[1] - BASE_COORDS):
            q_out[e, q_of_joint(j)] = q_in[e, q_of_joint(j)] + h * half * (
                u_a_in[e, dof_of_joint(j)] + u_b_in[e, dof_of_joint(j)])

    @wp.kernel(enable_backward=False)
    def add_velocity(model: T.Model, inputs: In, outputs: T.Integration):
        """``u_new = u + du`` (``du`` a column per env, as the solves produce it)."""
        e = wp.tid()
        for k in range(inputs.u.shape[1]):
            outputs.u_new[e, k] = inputs.u[e, k] + inputs.solve.du[e, k, 0]

    @wp.kernel(enable_backward=False)
    def add_velocity_adjoint(model: T.Model, inputs: In, outputs: T.Integration, inputs_grad: In,
                             outputs_grad: T.Integration):
        e = wp.tid()
        for k in range(inputs.u.shape[1]):
            g = outputs_grad.u_new[e, k]
            inputs_grad.u[e, k] = inputs_grad.u[e, k] + g
            inputs_grad.solve.du[e, k, 0] = inputs_grad.solve.du[e, k, 0] + g

    return integrate_positions, add_velocity, add_velocity_adjoint


def integrate_positions(model, q: wp.array, u_a: wp.array, u_b: wp.array, h: float, q_out: wp.array,
                        tape: wp.Tape | None = None) -> None:
    """``q_out = q + h (u_a + u_b) / 2`` [N, nq] on the configuration manifold (see the module docstring), for
    ``h`` in s; recorded on ``tape`` for Warp's automatic adjoint."""
    kernel = integrator_kernels(model.dtype)[0]
    launch(kernel, model.num_envs, [q, u_a, u_b, model.dtype(h), q_out], model.device, tape)


def add_velocity(model, u: wp.array, solve, integration: IntegratorData, tape: wp.Tape | None = None) -> None:
    """``integration.u_new = u + du`` for ``u`` [N, nv] and the velocity change ``du`` [N, nv, 1] of ``solve``
    (the step without contact); the reverse is recorded on ``tape`` when given."""
    _, forward, adjoint = integrator_kernels(model.dtype)
    launch_stage("add_velocity", model, [forward], adjoint, VelocityUpdateInputs(u=u, solve=solve), integration, tape)


@functools.cache
def mean_kernels(dtype, vec):
    # both specialisations (scalar torques, vec3 forces) run in one recorded policy step: keys of their own
    @wp.kernel(enable_backward=False, name=specialized_kernel_name("accumulate", dtype, vec))
    def accumulate(src: wp.array2d(dtype=vec), weight: dtype, acc: wp.array2d(dtype=vec)):
        e, i = wp.tid()
        acc[e, i] = acc[e, i] + src[e, i] * weight

    @wp.kernel(enable_backward=False, name=specialized_kernel_name("accumulate_adjoint", dtype, vec))
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
