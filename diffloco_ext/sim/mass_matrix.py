"""Stage: rigid-body inertias, composite inertias and the joint-space mass matrix H (CRBA).

``H[k, l] = S_k . (I^c_{b(max(k,l))} S_l)`` for DOFs ``k``, ``l`` on one root path (zero otherwise), with all
inertias about the base origin in world orientation (:mod:`.spatial`). Joint armature (per env, [N, n], no
gradient) is added to the diagonal. The result equals MuJoCo's ``mj_fullM`` for the same model (free-joint convention of
:mod:`.model`).

The composite inertias are summed over each body's subtree in one pass, children into parents (bodies are
numbered parents first), and the reverse pass runs the same tree the other way (hand-written, no atomics).
"""


import functools

import warp as wp

from .scratch import scratch_array
from .spatial import inertia_times_motion, inertia_times_motion_adjoint, motion_dot_force
from .warp_setup import warp_types


@functools.cache
def mass_matrix_kernels(dtype):
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33

    @wp.kernel(enable_backward=False)
    def composite_inertia(
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        body_mass: wp.array2d(dtype=dtype),
        body_com: wp.array2d(dtype=vec3),
        body_inertia: wp.array2d(dtype=mat33),
        body_parent: wp.array(dtype=wp.int32),
        inertia_m: wp.array2d(dtype=dtype),
        inertia_h: wp.array2d(dtype=vec3),
        inertia_J: wp.array2d(dtype=mat33),
        composite_m: wp.array2d(dtype=dtype),
        composite_h: wp.array2d(dtype=vec3),
        composite_J: wp.array2d(dtype=mat33),
    ):
        """Each body's inertia ``(m, h, J)`` about the base origin (world orientation), then the sum over each
        body's subtree, children into parents (bodies are numbered parents first)."""
        e = wp.tid()
        num_bodies = body_mass.shape[1]
        for b in range(num_bodies):
            rot = body_rot[e, b]
            m = body_mass[e, b]
            c = body_pos[e, b] + rot * body_com[e, b]
            inertia_m[e, b] = m
            inertia_h[e, b] = c * m
            inertia_J[e, b] = rot * body_inertia[e, b] * wp.transpose(rot) + (
                wp.identity(n=3, dtype=dtype) * wp.dot(c, c) - wp.outer(c, c)
            ) * m
            composite_m[e, b] = m
            composite_h[e, b] = c * m
            composite_J[e, b] = inertia_J[e, b]
        for bb in range(num_bodies - 1):
            b = num_bodies - 1 - bb
            p = body_parent[b]
            composite_m[e, p] = composite_m[e, p] + composite_m[e, b]
            composite_h[e, p] = composite_h[e, p] + composite_h[e, b]
            composite_J[e, p] = composite_J[e, p] + composite_J[e, b]

    @wp.kernel(enable_backward=False)
    def joint_space_inertia(
        ancestor_start: wp.array(dtype=wp.int32),
        ancestor_index: wp.array(dtype=wp.int32),
        joint_armature: wp.array2d(dtype=dtype),
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
        composite_m: wp.array2d(dtype=dtype),
        composite_h: wp.array2d(dtype=vec3),
        composite_J: wp.array2d(dtype=mat33),
        fixed_base: int,
        H: wp.array3d(dtype=dtype),
    ):
        """H from the composite inertias, one environment per thread. ``H`` must be zeroed.

        With ``fixed_base`` the base block is the identity and the base-joint coupling zero, so a solve leaves
        the base at rest when its right-hand side is zero.
        """
        e = wp.tid()
        for kb in range(6):
            nb, fb = inertia_times_motion(composite_m[e, 0], composite_h[e, 0], composite_J[e, 0],
                                          dof_ang[e, kb], dof_lin[e, kb])
            for lb in range(kb, 6):  # one value for both triangles: H is symmetric for any inertia given
                if fixed_base == 0:
                    value = motion_dot_force(dof_ang[e, lb], dof_lin[e, lb], nb, fb)
                    H[e, lb, kb] = value
                    H[e, kb, lb] = value
                elif lb == kb:
                    H[e, lb, kb] = dtype(1.0)
        for b in range(1, composite_m.shape[1]):
            k = 5 + b
            n, f = inertia_times_motion(composite_m[e, b], composite_h[e, b], composite_J[e, b],
                                        dof_ang[e, k], dof_lin[e, k])
            H[e, k, k] = motion_dot_force(dof_ang[e, k], dof_lin[e, k], n, f) + joint_armature[e, b - 1]
            if fixed_base == 0:
                for l in range(6):
                    value = motion_dot_force(dof_ang[e, l], dof_lin[e, l], n, f)
                    H[e, l, k] = value
                    H[e, k, l] = value
            for a in range(ancestor_start[b], ancestor_start[b + 1]):
                la = 5 + ancestor_index[a]
                value_a = motion_dot_force(dof_ang[e, la], dof_lin[e, la], n, f)
                H[e, la, k] = value_a
                H[e, k, la] = value_a

    @wp.kernel(enable_backward=False)
    def mass_matrix_adjoint(
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        body_mass: wp.array2d(dtype=dtype),
        body_com: wp.array2d(dtype=vec3),
        body_inertia: wp.array2d(dtype=mat33),
        body_parent: wp.array(dtype=wp.int32),
        ancestor_start: wp.array(dtype=wp.int32),
        ancestor_index: wp.array(dtype=wp.int32),
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
        inertia_m: wp.array2d(dtype=dtype),
        inertia_h: wp.array2d(dtype=vec3),
        composite_m: wp.array2d(dtype=dtype),
        composite_h: wp.array2d(dtype=vec3),
        composite_J: wp.array2d(dtype=mat33),
        fixed_base: int,
        H_grad: wp.array3d(dtype=dtype),
        adj_cm: wp.array2d(dtype=dtype),
        adj_ch: wp.array2d(dtype=vec3),
        adj_cJ: wp.array2d(dtype=mat33),
        inertia_m_grad: wp.array2d(dtype=dtype),
        inertia_h_grad: wp.array2d(dtype=vec3),
        inertia_J_grad: wp.array2d(dtype=mat33),
        dof_ang_grad: wp.array2d(dtype=vec3),
        dof_lin_grad: wp.array2d(dtype=vec3),
        body_rot_grad: wp.array2d(dtype=mat33),
        body_pos_grad: wp.array2d(dtype=vec3),
        body_mass_grad: wp.array2d(dtype=dtype),
        body_com_grad: wp.array2d(dtype=vec3),
        body_inertia_grad: wp.array2d(dtype=mat33),
    ):
        """Reverse of :func:`composite_inertia` + :func:`joint_space_inertia` for one environment.

        ``adj_c*`` are zeroed scratch for the composite inertias' adjoints. ``inertia_*_grad`` arrive holding the
        adjoints that later stages (bias forces) gave the body inertias; the body-inertia map is reversed here.
        """
        e = wp.tid()
        num_bodies = body_mass.shape[1]
        # H -> composite inertias and motion subspace
        if fixed_base == 0:
            for kb in range(6):
                sw = dof_ang[e, kb]
                sv = dof_lin[e, kb]
                nb, fb = inertia_times_motion(composite_m[e, 0], composite_h[e, 0], composite_J[e, 0], sw, sv)
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
                am, ah, aJ, aw, av = inertia_times_motion_adjoint(composite_m[e, 0], composite_h[e, 0],
                                                                    composite_J[e, 0], sw, sv, adj_nb, adj_fb)
                adj_cm[e, 0] = adj_cm[e, 0] + am
                adj_ch[e, 0] = adj_ch[e, 0] + ah
                adj_cJ[e, 0] = adj_cJ[e, 0] + aJ
                dof_ang_grad[e, kb] = dof_ang_grad[e, kb] + aw
                dof_lin_grad[e, kb] = dof_lin_grad[e, kb] + av
        for b in range(1, num_bodies):
            k = 5 + b
            sw = dof_ang[e, k]
            sv = dof_lin[e, k]
            n, f = inertia_times_motion(composite_m[e, b], composite_h[e, b], composite_J[e, b], sw, sv)
            gkk = H_grad[e, k, k]
            adj_n = sw * gkk
            adj_f = sv * gkk
            dof_ang_grad[e, k] = dof_ang_grad[e, k] + n * gkk
            dof_lin_grad[e, k] = dof_lin_grad[e, k] + f * gkk
            if fixed_base == 0:
                for l in range(6):
                    g = H_grad[e, l, k] + H_grad[e, k, l]
                    adj_n = adj_n + dof_ang[e, l] * g
                    adj_f = adj_f + dof_lin[e, l] * g
                    dof_ang_grad[e, l] = dof_ang_grad[e, l] + n * g
                    dof_lin_grad[e, l] = dof_lin_grad[e, l] + f * g
            for a in range(ancestor_start[b], ancestor_start[b + 1]):
                la = 5 + ancestor_index[a]
                ga = H_grad[e, la, k] + H_grad[e, k, la]
                adj_n = adj_n + dof_ang[e, la] * ga
                adj_f = adj_f + dof_lin[e, la] * ga
                dof_ang_grad[e, la] = dof_ang_grad[e, la] + n * ga
                dof_lin_grad[e, la] = dof_lin_grad[e, la] + f * ga
            am, ah, aJ, aw, av = inertia_times_motion_adjoint(composite_m[e, b], composite_h[e, b],
                                                                composite_J[e, b], sw, sv, adj_n, adj_f)
            adj_cm[e, b] = adj_cm[e, b] + am
            adj_ch[e, b] = adj_ch[e, b] + ah
            adj_cJ[e, b] = adj_cJ[e, b] + aJ
            dof_ang_grad[e, k] = dof_ang_grad[e, k] + aw
            dof_lin_grad[e, k] = dof_lin_grad[e, k] + av
        # composite = sum over the subtree -> each body inertia collects its ancestors-or-self adjoints
        # (parents first: the scratch becomes that running sum)
        for b in range(num_bodies):
            if b > 0:
                p = body_parent[b]
                adj_cm[e, b] = adj_cm[e, b] + adj_cm[e, p]
                adj_ch[e, b] = adj_ch[e, b] + adj_ch[e, p]
                adj_cJ[e, b] = adj_cJ[e, b] + adj_cJ[e, p]
            inertia_m_grad[e, b] = inertia_m_grad[e, b] + adj_cm[e, b]
            inertia_h_grad[e, b] = inertia_h_grad[e, b] + adj_ch[e, b]
            inertia_J_grad[e, b] = inertia_J_grad[e, b] + adj_cJ[e, b]
        # body inertia about O: m, h = m c, J = R I R^T + m (|c|^2 E - c c^T), c = r + R com
        for b in range(num_bodies):
            rot = body_rot[e, b]
            m = body_mass[e, b]
            com = body_com[e, b]
            c = body_pos[e, b] + rot * com
            am = inertia_m_grad[e, b]
            ah = inertia_h_grad[e, b]
            aJ = inertia_J_grad[e, b]
            sym = aJ + wp.transpose(aJ)
            trace = aJ[0, 0] + aJ[1, 1] + aJ[2, 2]
            adj_mass = am + wp.dot(ah, c) + wp.dot(c, c) * trace - wp.dot(c, aJ * c)
            adj_c = ah * m + (c * (dtype(2.0) * trace) - sym * c) * m
            I = body_inertia[e, b]
            adj_rot = aJ * rot * wp.transpose(I) + wp.transpose(aJ) * rot * I + wp.outer(adj_c, com)
            body_rot_grad[e, b] = body_rot_grad[e, b] + adj_rot
            body_pos_grad[e, b] = body_pos_grad[e, b] + adj_c
            body_mass_grad[e, b] = body_mass_grad[e, b] + adj_mass
            body_com_grad[e, b] = body_com_grad[e, b] + wp.transpose(rot) * adj_c
            body_inertia_grad[e, b] = body_inertia_grad[e, b] + wp.transpose(rot) * aJ * rot

    return composite_inertia, joint_space_inertia, mass_matrix_adjoint


def mass_matrix(model, kin, data, tape: wp.Tape | None = None) -> None:
    """Body and composite inertias and H into ``data`` (see :func:`mass_matrix_kernels`); with a ``tape``, the
    hand-written reverse (:func:`mass_matrix_adjoint`) is recorded in their place."""
    composite, crba, adjoint = mass_matrix_kernels(model.dtype)
    m, k, d = model, kin, data
    N = m.num_envs
    wp.launch(composite, dim=N, device=m.device, record_tape=False, inputs=[
        k.body_rot, k.body_pos, m.body_mass, m.body_com, m.body_inertia, m.body_parent,
        d.inertia_m, d.inertia_h, d.inertia_J, d.composite_m, d.composite_h, d.composite_J])
    wp.launch(crba, dim=N, device=m.device, record_tape=False, inputs=[
        m.ancestor_start, m.ancestor_index, m.joint_armature, k.dof_ang, k.dof_lin, d.composite_m, d.composite_h,
        d.composite_J, int(m.fixed_base), d.H])
    if tape is None:
        return

    def grad(array):
        if array.requires_grad and array.grad is not None:
            return array.grad
        return scratch_array("mass_matrix.unused_grad", array.shape, array.dtype, array.device)

    def backward() -> None:
        if d.H.grad is None:
            return
        scratch = [scratch_array(f"mass_matrix.adj_composite{i}", d.composite_m.shape, a.dtype, m.device)
                   for i, a in enumerate((d.composite_m, d.composite_h, d.composite_J))]
        wp.launch(adjoint, dim=N, device=m.device, record_tape=False, inputs=[
            k.body_rot, k.body_pos, m.body_mass, m.body_com, m.body_inertia, m.body_parent,
            m.ancestor_start, m.ancestor_index, k.dof_ang, k.dof_lin, d.inertia_m, d.inertia_h, d.composite_m,
            d.composite_h, d.composite_J, int(m.fixed_base), d.H.grad, *scratch, grad(d.inertia_m),
            grad(d.inertia_h), grad(d.inertia_J), grad(k.dof_ang), grad(k.dof_lin), grad(k.body_rot),
            grad(k.body_pos), grad(m.body_mass), grad(m.body_com), grad(m.body_inertia)])

    tape.record_func(backward=backward, arrays=[])
