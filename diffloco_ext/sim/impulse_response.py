"""Stage: the velocity change of the contact impulses and the end-of-step velocity, with a hand-written adjoint.

``du = H'^-1 J^T P = L^-1 (W P)`` [N, nv, 1] reuses the Delassus stage's ``W = L^-T J^T`` (:mod:`.delassus`): the
path-sparse product ``W P``, then one solve with ``L`` (ancestors first). The end-of-step velocity is
``u_E = u_free + du`` [N, nv] (``u_free`` of :mod:`.contact_velocity`). Backward, with ``b_bar = H'^-1 u_E_bar``::

    u_free_bar += u_E_bar      P_bar += J b_bar      J_bar += P b_bar^T (on each foot's path)      H_bar -= b_bar du^T

the last as one row-vector update per row of ``H`` (dense rank-one, see :mod:`.cholesky`).
"""

import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch_stage
from .cholesky import SolveData, as_rows, cholesky_funcs, outer_update_func
from .contact import ContactGeometryData
from .contact_velocity import ContactVelocityData
from .coordinates import contact_funcs, contact_row
from .delassus import DelassusData
from .gauss_seidel import GaussSeidelData
from .mass_matrix import MassMatrixData
from .scratch import scratch_array
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import warp_types


@dataclass
class ImpulseResponseData(StageData):
    """The velocity change of a step's contact impulses."""

    du_contact: wp.array = intermediate(lambda s: (s.N, s.nv, 1), values_only=True,
                                        doc="velocity change of the impulses")


@dataclass
class ImpulseResponseInputs(StageInputs):
    """What the impulse response reads (H itself only for its gradient)."""

    mass: MassMatrixData = stage_input(group=MassMatrixData)
    solve: SolveData = stage_input(group=SolveData)
    geometry: ContactGeometryData = stage_input(group=ContactGeometryData)
    velocity: ContactVelocityData = stage_input(group=ContactVelocityData)
    delassus: DelassusData = stage_input(group=DelassusData)
    solution: GaussSeidelData = stage_input(group=GaussSeidelData)


@functools.cache
def impulse_response_kernels(dtype, nv: int):
    vec3 = warp_types(dtype).vec3
    row = wp.types.vector(nv, dtype)
    _solve_in_place = cholesky_funcs(dtype)
    _subtract_outer = outer_update_func(dtype, nv)
    foot_rows, foot_vector = contact_funcs(dtype)
    T = kernel_types(dtype)
    In = ImpulseResponseInputs.struct_type(dtype)

    @wp.kernel(enable_backward=False)
    def impulse_response(model: T.Model, inputs: In, outputs: T.Response, integration_out: T.Integration):
        """``du = L^-1 (W P)`` and ``u_new = u_free + du`` (into ``integration_out``)."""
        e = wp.tid()
        L = inputs.solve.L
        W = inputs.delassus.W
        du = outputs.du_contact
        for k in range(nv):
            du[e, k, 0] = dtype(0.0)
        for f in range(W.shape[2]):
            pf = foot_vector(inputs.solution.impulse, e, f)
            for p in range(model.foot_path_start[f], model.foot_path_start[f + 1]):
                k = model.foot_path[p]
                du[e, k, 0] = du[e, k, 0] + wp.dot(W[e, k, f], pf)
        for k in range(nv):
            s = du[e, k, 0]
            i = model.dof_parent[k]
            while i != -1:
                s = s - L[e, k, i] * du[e, i, 0]
                i = model.dof_parent[i]
            dk = s / L[e, k, k]
            du[e, k, 0] = dk
            integration_out.u_new[e, k] = inputs.velocity.u_free[e, k] + dk

    @wp.kernel(enable_backward=False)
    def impulse_response_adjoint(model: T.Model, inputs: In, outputs: T.Response, integration_out: T.Integration,
                                 inputs_grad: In, outputs_grad: T.Response, integration_grad: T.Integration,
                                 du_rows: wp.array(dtype=row), b_bar: wp.array3d(dtype=dtype),
                                 H_grad_rows: wp.array2d(dtype=row)):
        """For one environment, from the adjoint of ``u_new`` (``b_bar``: working memory; ``du_rows`` and
        ``H_grad_rows``: ``du`` and ``H_bar`` as rows of the same memory, :func:`~.cholesky.as_rows`)."""
        e = wp.tid()
        J = inputs.geometry.J
        J_grad = inputs_grad.geometry.J
        P_grad = inputs_grad.solution.impulse
        for k in range(nv):
            g = integration_grad.u_new[e, k]
            b_bar[e, k, 0] = g
            inputs_grad.velocity.u_free[e, k] = inputs_grad.velocity.u_free[e, k] + g
        _solve_in_place(inputs.solve.L, model.dof_parent, b_bar, e)
        for f in range(model.foot_path_start.shape[0] - 1):
            pf = foot_vector(inputs.solution.impulse, e, f)
            acc = vec3()
            for p in range(model.foot_path_start[f], model.foot_path_start[f + 1]):
                k = model.foot_path[p]
                bk = b_bar[e, k, 0]
                acc = acc + foot_rows(J, e, f, k) * bk
                for r in range(3):
                    J_grad[e, contact_row(f, r), k] = J_grad[e, contact_row(f, r), k] + pf[r] * bk
            for r in range(3):
                P_grad[e, contact_row(f, r), 0] = P_grad[e, contact_row(f, r), 0] + acc[r]
        _subtract_outer(H_grad_rows, b_bar, du_rows, e)

    return impulse_response, impulse_response_adjoint


def impulse_response(model, mass, solve, geometry, velocity, delassus, solution, response: ImpulseResponseData,
                     integration, tape: wp.Tape | None = None) -> None:
    """Velocity change ``response.du_contact = H'^-1 J^T P`` [N, nv, 1] of the impulses ``P`` of ``solution``
    (``J`` of ``geometry``, ``W`` of ``delassus``, the factor of ``solve``) and the end-of-step velocity
    ``integration.u_new = u_free + du`` [N, nv] (``u_free`` of ``velocity``); the hand-written reverse is recorded
    on ``tape`` when given (it adds to the gradient of ``mass``'s ``H``)."""
    forward, adjoint = impulse_response_kernels(model.dtype, model.nv)
    inputs = ImpulseResponseInputs(mass=mass, solve=solve, geometry=geometry, velocity=velocity, delassus=delassus,
                                   solution=solution)

    def grads():
        du = response.du_contact
        b_bar = scratch_array("impulse_response.b_bar", du.shape, du.dtype, du.device, zero=False)
        return [integration.grads, as_rows(du), b_bar, as_rows(mass.grads.H)]

    launch_stage("impulse_response", model, [forward], adjoint, inputs, response, tape,
                 extra_inputs=[integration.values], extra_grads=grads)
