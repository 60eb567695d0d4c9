"""Stage: bias forces (recursive Newton-Euler with zero joint acceleration): Coriolis, centrifugal, gravity.

``bias = C(q, u) u + g(q)``, MuJoCo's ``qfrc_bias`` (so ``H du/dt + bias = applied forces``). Gravity enters as
an upward acceleration of the base. The per-step frame is inertial at this instant and coincides with the
base origin, so the base's bias acceleration is ``(0, -w x v)`` (rate of change of the velocity of the body
point passing through the fixed origin).
"""


import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch_stage
from .coordinates import body_of_dof, dof_of_body
from .kinematics import KinematicsData
from .mass_matrix import MassMatrixData
from .spatial import (
    inertia_times_motion,
    inertia_times_motion_adjoint,
    motion_cross_force,
    motion_cross_motion,
    motion_dot_force,
)
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import warp_types


@dataclass
class BiasForceData(StageData):
    """The recursive Newton-Euler pass at zero joint acceleration; world orientation, about the base origin. The
    body accelerations' and subtree forces' gradient arrays are the reverse pass's working memory."""

    body_acc_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="bias acceleration, angular")
    body_acc_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="bias acceleration, linear")
    body_force_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True,
                                            doc="force each body needs, moment about the origin")
    body_force_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True,
                                            doc="force each body needs")
    subtree_force_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="sum over the subtree, moment")
    subtree_force_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="sum over the subtree, force")
    bias: wp.array = intermediate(lambda s: (s.N, s.nv), doc="bias forces C(q, u) u + g(q) (N, N m)")


@dataclass
class BiasForceInputs(StageInputs):
    """What the RNEA reads: the velocity, the kinematics (body velocities, motion subspace) and the body inertias."""

    u: wp.array = stage_input("scalar", 2, doc="velocities [N, nv]")
    kin: KinematicsData = stage_input(group=KinematicsData)
    mass: MassMatrixData = stage_input(group=MassMatrixData)


@functools.cache
def bias_force_kernels(dtype):
    vec3 = warp_types(dtype).vec3
    T = kernel_types(dtype)
    In = BiasForceInputs.struct_type(dtype)

    @wp.kernel(enable_backward=False)
    def body_bias_forces(model: T.Model, inputs: In, outputs: T.Bias):
        """Bias acceleration of every body and the force it needs, ``F = I A + V x* (I V)``, then the sum of the
        forces over each body's subtree, children into parents (bodies are numbered parents first)."""
        e = wp.tid()
        num_bodies = model.body_parent.shape[0]
        for b in range(num_bodies):
            w = inputs.kin.body_vel_ang[e, b]
            v = inputs.kin.body_vel_lin[e, b]
            acc_ang = vec3(dtype(0.0), dtype(0.0), dtype(0.0))
            acc_lin = -wp.cross(w, v) - model.gravity[e]
            if b > 0:
                p = model.body_parent[b]
                k = dof_of_body(b)
                qd = inputs.u[e, k]
                ca, cl = motion_cross_motion(w, v, inputs.kin.dof_ang[e, k] * qd, inputs.kin.dof_lin[e, k] * qd)
                acc_ang = outputs.body_acc_ang[e, p] + ca
                acc_lin = outputs.body_acc_lin[e, p] + cl
            outputs.body_acc_ang[e, b] = acc_ang
            outputs.body_acc_lin[e, b] = acc_lin
            m = inputs.mass.inertia_m[e, b]
            h = inputs.mass.inertia_h[e, b]
            J = inputs.mass.inertia_J[e, b]
            na, fa = inertia_times_motion(m, h, J, acc_ang, acc_lin)
            nv, fv = inertia_times_motion(m, h, J, w, v)
            nc, fc = motion_cross_force(w, v, nv, fv)
            outputs.body_force_ang[e, b] = na + nc
            outputs.body_force_lin[e, b] = fa + fc
            outputs.subtree_force_ang[e, b] = na + nc
            outputs.subtree_force_lin[e, b] = fa + fc
        for bb in range(num_bodies - 1):
            b2 = num_bodies - 1 - bb
            p2 = model.body_parent[b2]
            outputs.subtree_force_ang[e, p2] = outputs.subtree_force_ang[e, p2] + outputs.subtree_force_ang[e, b2]
            outputs.subtree_force_lin[e, p2] = outputs.subtree_force_lin[e, p2] + outputs.subtree_force_lin[e, b2]

    @wp.kernel(enable_backward=False)
    def project_bias(model: T.Model, inputs: In, outputs: T.Bias):
        """``bias_k = S_k . F^c_{b(k)}`` from the subtree forces; the base's six DOFs see the whole robot's force."""
        e = wp.tid()
        for k in range(outputs.bias.shape[1]):
            b = body_of_dof(k)
            outputs.bias[e, k] = motion_dot_force(inputs.kin.dof_ang[e, k], inputs.kin.dof_lin[e, k],
                                                   outputs.subtree_force_ang[e, b], outputs.subtree_force_lin[e, b])

    @wp.kernel(enable_backward=False)
    def bias_forces_adjoint(model: T.Model, inputs: In, outputs: T.Bias, inputs_grad: In, outputs_grad: T.Bias):
        """Reverse of :func:`project_bias` and :func:`body_bias_forces` for one environment. ``outputs_grad``
        arrives with the bias forces' adjoint; its accelerations' and subtree forces' are zeroed working memory.
        ``inputs_grad`` is accumulated into."""
        e = wp.tid()
        num_bodies = model.body_parent.shape[0]
        dof_ang = inputs.kin.dof_ang
        dof_lin = inputs.kin.dof_lin
        adj_force_ang = outputs_grad.subtree_force_ang
        adj_force_lin = outputs_grad.subtree_force_lin
        adj_acc_ang = outputs_grad.body_acc_ang
        adj_acc_lin = outputs_grad.body_acc_lin
        # bias_k = S_k . F^c_b(k): the base's six DOFs read the base's subtree force, DOF 5 + b body b's
        base_ang = vec3()
        base_lin = vec3()
        for k0 in range(6):
            g0 = outputs_grad.bias[e, k0]
            base_ang = base_ang + dof_ang[e, k0] * g0
            base_lin = base_lin + dof_lin[e, k0] * g0
            inputs_grad.kin.dof_ang[e, k0] = inputs_grad.kin.dof_ang[e, k0] + outputs.subtree_force_ang[e, 0] * g0
            inputs_grad.kin.dof_lin[e, k0] = inputs_grad.kin.dof_lin[e, k0] + outputs.subtree_force_lin[e, 0] * g0
        for b2 in range(num_bodies):  # subtree sums: a body's force adjoint sums its ancestors-or-self's
            a_ang = base_ang
            a_lin = base_lin
            if b2 > 0:
                kb = dof_of_body(b2)
                gb = outputs_grad.bias[e, kb]
                inputs_grad.kin.dof_ang[e, kb] = inputs_grad.kin.dof_ang[e, kb] + outputs.subtree_force_ang[e, b2] * gb
                inputs_grad.kin.dof_lin[e, kb] = inputs_grad.kin.dof_lin[e, kb] + outputs.subtree_force_lin[e, b2] * gb
                p2 = model.body_parent[b2]
                a_ang = dof_ang[e, kb] * gb + adj_force_ang[e, p2]
                a_lin = dof_lin[e, kb] * gb + adj_force_lin[e, p2]
            adj_force_ang[e, b2] = a_ang
            adj_force_lin[e, b2] = a_lin
        for bb in range(num_bodies):  # children before parents: a child's acceleration adjoint reaches its parent
            b = num_bodies - 1 - bb
            w = inputs.kin.body_vel_ang[e, b]
            v = inputs.kin.body_vel_lin[e, b]
            m = inputs.mass.inertia_m[e, b]
            h = inputs.mass.inertia_h[e, b]
            J = inputs.mass.inertia_J[e, b]
            nv, fv = inertia_times_motion(m, h, J, w, v)
            a_n = adj_force_ang[e, b]
            a_f = adj_force_lin[e, b]
            # F = I A + (w x nv + v x fv, w x fv)
            adj_w = wp.cross(nv, a_n) + wp.cross(fv, a_f)
            adj_v = wp.cross(fv, a_n)
            adj_nv = wp.cross(a_n, w)
            adj_fv = wp.cross(a_n, v) + wp.cross(a_f, w)
            am1, ah1, aJ1, aw1, av1 = inertia_times_motion_adjoint(m, h, J, w, v, adj_nv, adj_fv)
            am2, ah2, aJ2, aA_ang, aA_lin = inertia_times_motion_adjoint(
                m, h, J, outputs.body_acc_ang[e, b], outputs.body_acc_lin[e, b], a_n, a_f)
            inputs_grad.mass.inertia_m[e, b] = inputs_grad.mass.inertia_m[e, b] + am1 + am2
            inputs_grad.mass.inertia_h[e, b] = inputs_grad.mass.inertia_h[e, b] + ah1 + ah2
            inputs_grad.mass.inertia_J[e, b] = inputs_grad.mass.inertia_J[e, b] + aJ1 + aJ2
            adj_w = adj_w + aw1
            adj_v = adj_v + av1
            acc_ang_bar = adj_acc_ang[e, b] + aA_ang
            acc_lin_bar = adj_acc_lin[e, b] + aA_lin
            if b == 0:  # A = (0, -w x v - g)
                adj_w = adj_w - wp.cross(v, acc_lin_bar)
                adj_v = adj_v - wp.cross(acc_lin_bar, w)
            else:  # A = A_parent + (w x sa, w x sl + v x sa), (sa, sl) = S qd
                p = model.body_parent[b]
                k = dof_of_body(b)
                adj_acc_ang[e, p] = adj_acc_ang[e, p] + acc_ang_bar
                adj_acc_lin[e, p] = adj_acc_lin[e, p] + acc_lin_bar
                qd = inputs.u[e, k]
                s_ang = dof_ang[e, k]
                s_lin = dof_lin[e, k]
                sa = s_ang * qd
                sl = s_lin * qd
                adj_w = adj_w + wp.cross(sa, acc_ang_bar) + wp.cross(sl, acc_lin_bar)
                adj_v = adj_v + wp.cross(sa, acc_lin_bar)
                adj_sa = wp.cross(acc_ang_bar, w) + wp.cross(acc_lin_bar, v)
                adj_sl = wp.cross(acc_lin_bar, w)
                inputs_grad.kin.dof_ang[e, k] = inputs_grad.kin.dof_ang[e, k] + adj_sa * qd
                inputs_grad.kin.dof_lin[e, k] = inputs_grad.kin.dof_lin[e, k] + adj_sl * qd
                inputs_grad.u[e, k] = inputs_grad.u[e, k] + wp.dot(adj_sa, s_ang) + wp.dot(adj_sl, s_lin)
            inputs_grad.kin.body_vel_ang[e, b] = inputs_grad.kin.body_vel_ang[e, b] + adj_w
            inputs_grad.kin.body_vel_lin[e, b] = inputs_grad.kin.body_vel_lin[e, b] + adj_v

    return body_bias_forces, project_bias, bias_forces_adjoint


def bias_forces(model, u: wp.array, kin, mass, bias: BiasForceData, tape: wp.Tape | None = None) -> None:
    """Body accelerations and forces and their subtree sums, then the bias forces ``bias.bias`` [N, nv], at the
    velocity ``u`` [N, nv], the kinematics ``kin`` and the body inertias of ``mass``; with a ``tape``, the
    hand-written reverse of both is recorded on it."""
    rnea, project, adjoint = bias_force_kernels(model.dtype)
    launch_stage("bias_forces", model, [rnea, project], adjoint, BiasForceInputs(u=u, kin=kin, mass=mass), bias, tape)
