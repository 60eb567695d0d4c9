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
from dataclasses import dataclass

import warp as wp

from .adjoint import launch_stage
from .cholesky import SolveData
from .contact import ContactGeometryData
from .coordinates import contact_funcs, contact_row
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import warp_types


@dataclass
class ContactVelocityData(StageData):
    """The velocity without contact impulses and the contact-point velocities it gives."""

    u_free: wp.array = intermediate(lambda s: (s.N, s.nv), doc="velocity after the step without impulses")
    c: wp.array = intermediate(lambda s: (s.N, s.C, 1), doc="contact-point velocity without impulses (m/s)")


@dataclass
class ContactVelocityInputs(StageInputs):
    """What the contact-point velocity reads."""

    u: wp.array = stage_input("scalar", 2, doc="start velocities [N, nv]")
    solve: SolveData = stage_input(group=SolveData)
    geometry: ContactGeometryData = stage_input(group=ContactGeometryData)


@functools.cache
def contact_velocity_kernels(dtype):
    vec3 = warp_types(dtype).vec3
    T = kernel_types(dtype)
    In = ContactVelocityInputs.struct_type(dtype)
    foot_rows, foot_vector = contact_funcs(dtype)

    @wp.kernel(enable_backward=False)
    def contact_velocity(model: T.Model, inputs: In, outputs: T.Velocity):
        e = wp.tid()
        J = inputs.geometry.J
        u_free = outputs.u_free
        for k in range(inputs.u.shape[1]):
            u_free[e, k] = inputs.u[e, k] + inputs.solve.du[e, k, 0]
        for f in range(model.foot_path_start.shape[0] - 1):
            s = vec3()
            for p in range(model.foot_path_start[f], model.foot_path_start[f + 1]):
                k = model.foot_path[p]
                s = s + foot_rows(J, e, f, k) * u_free[e, k]
            for r in range(3):
                outputs.c[e, contact_row(f, r), 0] = s[r]

    @wp.kernel(enable_backward=False)
    def contact_velocity_adjoint(model: T.Model, inputs: In, outputs: T.Velocity, inputs_grad: In,
                                 outputs_grad: T.Velocity):
        """Adds ``J^T c_bar`` into the gradient of ``u_free`` (which then holds its whole adjoint), then passes it
        on to ``u`` and ``du``."""
        e = wp.tid()
        J = inputs.geometry.J
        J_grad = inputs_grad.geometry.J
        u_free_grad = outputs_grad.u_free
        for f in range(model.foot_path_start.shape[0] - 1):
            cb = foot_vector(outputs_grad.c, e, f)
            for p in range(model.foot_path_start[f], model.foot_path_start[f + 1]):
                k = model.foot_path[p]
                uk = outputs.u_free[e, k]
                u_free_grad[e, k] = u_free_grad[e, k] + wp.dot(foot_rows(J, e, f, k), cb)
                for r in range(3):
                    J_grad[e, contact_row(f, r), k] = J_grad[e, contact_row(f, r), k] + cb[r] * uk
        for k in range(inputs.u.shape[1]):
            g = u_free_grad[e, k]
            inputs_grad.u[e, k] = inputs_grad.u[e, k] + g
            inputs_grad.solve.du[e, k, 0] = inputs_grad.solve.du[e, k, 0] + g

    return contact_velocity, contact_velocity_adjoint


def contact_velocity(model, u: wp.array, solve, geometry, velocity: ContactVelocityData,
                     tape: wp.Tape | None = None) -> None:
    """``u_free = u + du`` [N, nv] and ``c = J u_free`` [N, 3F, 1] into ``velocity``, for ``u`` [N, nv], the
    velocity change ``du`` [N, nv, 1] of ``solve`` and the contact rows ``J`` [N, 3F, nv] of ``geometry``; records
    the hand-written adjoint on ``tape`` when given."""
    forward, adjoint = contact_velocity_kernels(model.dtype)
    launch_stage("contact_velocity", model, [forward], adjoint,
                 ContactVelocityInputs(u=u, solve=solve, geometry=geometry), velocity, tape)
