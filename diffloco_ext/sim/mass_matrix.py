"""Stage: rigid-body inertias, composite inertias and the joint-space mass matrix H (CRBA).

``H[k, l] = S_k . (I^c_{b(max(k,l))} S_l)`` for DOFs ``k``, ``l`` on one root path (zero otherwise), with all
inertias about the base origin in world orientation (:mod:`.spatial`). Joint armature (per env, [N, n], no
gradient) is added to the diagonal. The result equals MuJoCo's ``mj_fullM`` for the same model (free-joint convention of
:mod:`.model`).

The composite inertias are summed over each body's subtree in one pass, children into parents (bodies are
numbered parents first), and the reverse pass runs the same tree the other way (hand-written, no atomics).
"""


import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch_stage
from .coordinates import dof_of_body
from .kinematics import KinematicsData
from .spatial import inertia_times_motion, inertia_times_motion_adjoint, motion_dot_force
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import warp_types


@dataclass
class MassMatrixData(StageData):
    """Body inertias, composite (subtree) inertias and H of one state; about the base origin, world orientation.

    The composite inertias' gradient arrays are the reverse pass's working memory (their adjoints)."""

    inertia_m: wp.array = intermediate(lambda s: (s.N, s.B), doc="body masses (kg)")
    inertia_h: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="first moments about the origin (kg m)")
    inertia_J: wp.array = intermediate(lambda s: (s.N, s.B), "mat33", doc="rotational inertias about the origin")
    composite_m: wp.array = intermediate(lambda s: (s.N, s.B), doc="subtree masses (kg)")
    composite_h: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="subtree first moments")
    composite_J: wp.array = intermediate(lambda s: (s.N, s.B), "mat33", doc="subtree rotational inertias")
    H: wp.array = intermediate(lambda s: (s.N, s.nv, s.nv), zero=True, doc="joint-space mass matrix (CRBA)")


@dataclass
class MassMatrixInputs(StageInputs):
    """What the CRBA reads: the poses and motion subspace of a kinematics pass."""

    kin: KinematicsData = stage_input(group=KinematicsData)


@functools.cache
def mass_matrix_kernels(dtype):
    vec3 = warp_types(dtype).vec3
    T = kernel_types(dtype)
    In = MassMatrixInputs.struct_type(dtype)

    @wp.kernel(enable_backward=False)
    def composite_inertia(model: T.Model, inputs: In, outputs: T.Mass):
        """Each body's inertia ``(m, h, J)`` about the base origin (world orientation), then the sum over each
        body's subtree, children into parents (bodies are numbered parents first)."""
        e = wp.tid()
        num_bodies = model.body_parent.shape[0]
        for b in range(num_bodies):
            rot = inputs.kin.body_rot[e, b]
            m = model.body_mass[e, b]
            c = inputs.kin.body_pos[e, b] + rot * model.body_com[e, b]
            J = rot * model.body_inertia[e, b] * wp.transpose(rot) + (
                wp.identity(n=3, dtype=dtype) * wp.dot(c, c) - wp.outer(c, c)
            ) * m
            outputs.inertia_m[e, b] = m
            outputs.inertia_h[e, b] = c * m
            outputs.inertia_J[e, b] = J
            outputs.composite_m[e, b] = m
            outputs.composite_h[e, b] = c * m
            outputs.composite_J[e, b] = J
        for bb in range(num_bodies - 1):
            b = num_bodies - 1 - bb
            p = model.body_parent[b]
            outputs.composite_m[e, p] = outputs.composite_m[e, p] + outputs.composite_m[e, b]
            outputs.composite_h[e, p] = outputs.composite_h[e, p] + outputs.composite_h[e, b]
            outputs.composite_J[e, p] = outputs.composite_J[e, p] + outputs.composite_J[e, b]

    @wp.kernel(enable_backward=False)
    def joint_space_inertia(model: T.Model, inputs: In, outputs: T.Mass):
        """H (zeroed beforehand) from the composite inertias, one environment per thread.

        With ``model.fixed_base`` the base block is the identity and the base-joint coupling zero, so a solve
        leaves the base at rest when its right-hand side is zero.
        """
        e = wp.tid()
        H = outputs.H
        m0 = outputs.composite_m[e, 0]
        h0 = outputs.composite_h[e, 0]
        J0 = outputs.composite_J[e, 0]
        for kb in range(6):
            nb, fb = inertia_times_motion(m0, h0, J0, inputs.kin.dof_ang[e, kb], inputs.kin.dof_lin[e, kb])
            for lb in range(kb, 6):  # one value for both triangles: H is symmetric for any inertia given
                if model.fixed_base == 0:
                    value = motion_dot_force(inputs.kin.dof_ang[e, lb], inputs.kin.dof_lin[e, lb], nb, fb)
                    H[e, lb, kb] = value
                    H[e, kb, lb] = value
                elif lb == kb:
                    H[e, lb, kb] = dtype(1.0)
        for b in range(1, model.body_parent.shape[0]):
            k = dof_of_body(b)
            n, f = inertia_times_motion(outputs.composite_m[e, b], outputs.composite_h[e, b],
                                        outputs.composite_J[e, b], inputs.kin.dof_ang[e, k], inputs.kin.dof_lin[e, k])
            H[e, k, k] = motion_dot_force(inputs.kin.dof_ang[e, k], inputs.kin.dof_lin[e, k], n, f) + (
                model.joint_armature[e, b - 1])
            if model.fixed_base == 0:
                for l in range(6):
                    value = motion_dot_force(inputs.kin.dof_ang[e, l], inputs.kin.dof_lin[e, l], n, f)
                    H[e, l, k] = value
                    H[e, k, l] = value
            for a in range(model.ancestor_start[b], model.ancestor_start[b + 1]):
                la = dof_of_body(model.ancestor_index[a])
                value_a = motion_dot_force(inputs.kin.dof_ang[e, la], inputs.kin.dof_lin[e, la], n, f)
                H[e, la, k] = value_a
                H[e, k, la] = value_a

    @wp.kernel(enable_backward=False)
    def mass_matrix_adjoint(model: T.Model, inputs: In, outputs: T.Mass, inputs_grad: In, outputs_grad: T.Mass,
                            params_grad: T.Params):
        """Reverse of :func:`composite_inertia` + :func:`joint_space_inertia` for one environment. ``outputs_grad``
        arrives with the adjoints of H and of the body inertias (what later stages gave them); its composite
        inertias' are zeroed working memory. ``inputs_grad`` and ``params_grad`` are accumulated into."""
        e = wp.tid()
        num_bodies = model.body_parent.shape[0]
        H_grad = outputs_grad.H
        cm = outputs.composite_m
        ch = outputs.composite_h
        cJ = outputs.composite_J
        dof_ang = inputs.kin.dof_ang
        dof_lin = inputs.kin.dof_lin
        dof_ang_grad = inputs_grad.kin.dof_ang
        dof_lin_grad = inputs_grad.kin.dof_lin
        # H -> composite inertias and motion subspace
        if model.fixed_base == 0:
            for kb in range(6):
                sw = dof_ang[e, kb]
                sv = dof_lin[e, kb]
                nb, fb = inertia_times_motion(cm[e, 0], ch[e, 0], cJ[e, 0], sw, sv)
                adj_nb = vec3()
                adj_fb = vec3()
                for lb in range(kb, 6):
                    g = H_grad[e, lb, kb]
                    if lb != kb:
                        g = g + H_grad[e, kb, lb]
                    adj_nb = adj_nb + dof_ang[e, lb] * g
                    adj_fb = adj_fb + dof_lin[e, lb] * g
                    dof_ang_grad[e, lb] = dof_ang_grad[e, lb] + nb * g
                    dof_lin_grad[e, lb] = dof_lin_grad[e, lb] + fb * g
                am, ah, aJ, aw, av = inertia_times_motion_adjoint(cm[e, 0], ch[e, 0], cJ[e, 0], sw, sv, adj_nb, adj_fb)
                outputs_grad.composite_m[e, 0] = outputs_grad.composite_m[e, 0] + am
                outputs_grad.composite_h[e, 0] = outputs_grad.composite_h[e, 0] + ah
                outputs_grad.composite_J[e, 0] = outputs_grad.composite_J[e, 0] + aJ
                dof_ang_grad[e, kb] = dof_ang_grad[e, kb] + aw
                dof_lin_grad[e, kb] = dof_lin_grad[e, kb] + av
        for b in range(1, num_bodies):
            k = dof_of_body(b)
            sw = dof_ang[e, k]
            sv = dof_lin[e, k]
            n, f = inertia_times_motion(cm[e, b], ch[e, b], cJ[e, b], sw, sv)
            gkk = H_grad[e, k, k]
            adj_n = sw * gkk
            adj_f = sv * gkk
            dof_ang_grad[e, k] = dof_ang_grad[e, k] + n * gkk
            dof_lin_grad[e, k] = dof_lin_grad[e, k] + f * gkk
            if model.fixed_base == 0:
                for l in range(6):
                    g = H_grad[e, l, k] + H_grad[e, k, l]
                    adj_n = adj_n + dof_ang[e, l] * g
                    adj_f = adj_f + dof_lin[e, l] * g
                    dof_ang_grad[e, l] = dof_ang_grad[e, l] + n * g
                    dof_lin_grad[e, l] = dof_lin_grad[e, l] + f * g
            for a in range(model.ancestor_start[b], model.ancestor_start[b + 1]):
                la = dof_of_body(model.ancestor_index[a])
                ga = H_grad[e, la, k] + H_grad[e, k, la]
                adj_n = adj_n + dof_ang[e, la] * ga
                adj_f = adj_f + dof_lin[e, la] * ga
                dof_ang_grad[e, la] = dof_ang_grad[e, la] + n * ga
                dof_lin_grad[e, la] = dof_lin_grad[e, la] + f * ga
            am, ah, aJ, aw, av = inertia_times_motion_adjoint(cm[e, b], ch[e, b], cJ[e, b], sw, sv, adj_n, adj_f)
            outputs_grad.composite_m[e, b] = outputs_grad.composite_m[e, b] + am
            outputs_grad.composite_h[e, b] = outputs_grad.composite_h[e, b] + ah
            outputs_grad.composite_J[e, b] = outputs_grad.composite_J[e, b] + aJ
            dof_ang_grad[e, k] = dof_ang_grad[e, k] + aw
            dof_lin_grad[e, k] = dof_lin_grad[e, k] + av
        # composite = sum over the subtree -> each body inertia collects its ancestors-or-self adjoints
        # (parents first: the composite adjoints become that running sum)
        for b in range(num_bodies):
            if b > 0:
                p = model.body_parent[b]
                outputs_grad.composite_m[e, b] = outputs_grad.composite_m[e, b] + outputs_grad.composite_m[e, p]
                outputs_grad.composite_h[e, b] = outputs_grad.composite_h[e, b] + outputs_grad.composite_h[e, p]
                outputs_grad.composite_J[e, b] = outputs_grad.composite_J[e, b] + outputs_grad.composite_J[e, p]
        # body inertia about O: m, h = m c, J = R I R^T + m (|c|^2 E - c c^T), c = r + R com
        for b in range(num_bodies):
            rot = inputs.kin.body_rot[e, b]
            m = model.body_mass[e, b]
            com = model.body_com[e, b]
            c = inputs.kin.body_pos[e, b] + rot * com
            am = outputs_grad.inertia_m[e, b] + outputs_grad.composite_m[e, b]
            ah = outputs_grad.inertia_h[e, b] + outputs_grad.composite_h[e, b]
            aJ = outputs_grad.inertia_J[e, b] + outputs_grad.composite_J[e, b]
            sym = aJ + wp.transpose(aJ)
            trace = aJ[0, 0] + aJ[1, 1] + aJ[2, 2]
            adj_mass = am + wp.dot(ah, c) + wp.dot(c, c) * trace - wp.dot(c, aJ * c)
            adj_c = ah * m + (c * (dtype(2.0) * trace) - sym * c) * m
            I = model.body_inertia[e, b]
            adj_rot = aJ * rot * wp.transpose(I) + wp.transpose(aJ) * rot * I + wp.outer(adj_c, com)
            inputs_grad.kin.body_rot[e, b] = inputs_grad.kin.body_rot[e, b] + adj_rot
            inputs_grad.kin.body_pos[e, b] = inputs_grad.kin.body_pos[e, b] + adj_c
            params_grad.body_mass[e, b] = params_grad.body_mass[e, b] + adj_mass
            params_grad.body_com[e, b] = params_grad.body_com[e, b] + wp.transpose(rot) * adj_c
            params_grad.body_inertia[e, b] = params_grad.body_inertia[e, b] + wp.transpose(rot) * aJ * rot

    return composite_inertia, joint_space_inertia, mass_matrix_adjoint


def mass_matrix(model, kin, mass: MassMatrixData, tape: wp.Tape | None = None) -> None:
    """Body and composite inertias and H (zeroed beforehand) at the poses and motion subspace of ``kin``
    (:class:`~.kinematics.KinematicsData`) into ``mass``; with a ``tape``, the hand-written reverse
    (:func:`mass_matrix_adjoint`) is recorded on it."""
    composite, crba, adjoint = mass_matrix_kernels(model.dtype)
    launch_stage("mass_matrix", model, [composite, crba], adjoint, MassMatrixInputs(kin=kin), mass, tape,
                 extra_grads=lambda: [model.parameter_grads("mass_matrix")])
