"""Stage: rigid-body inertias, composite inertias and the joint-space mass matrix H (CRBA).

``H[k, l] = S_k . (I^c_{b(max(k,l))} S_l)`` for DOFs ``k``, ``l`` on one root path (zero otherwise), with all
inertias about the base origin in world orientation (:mod:`.spatial`). Joint armature is added to the
diagonal. The result equals MuJoCo's ``mj_fullM`` for the same model (free-joint convention of
:mod:`.model`).

Every array slot is written once per step (no read-modify-write in a differentiated kernel); subtree sums
use atomic adds into slots that the same kernel never reads.
"""


import functools

import warp as wp

from .spatial import inertia_times_motion, motion_dot_force
from .warp_setup import warp_types


@functools.cache
def mass_matrix_kernels(dtype):
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33

    @wp.kernel
    def composite_inertia(
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        body_mass: wp.array2d(dtype=dtype),
        body_com: wp.array2d(dtype=vec3),
        body_inertia: wp.array2d(dtype=mat33),
        subtree_start: wp.array(dtype=wp.int32),
        subtree_index: wp.array(dtype=wp.int32),
        inertia_m: wp.array2d(dtype=dtype),
        inertia_h: wp.array2d(dtype=vec3),
        inertia_J: wp.array2d(dtype=mat33),
        composite_m: wp.array2d(dtype=dtype),
        composite_h: wp.array2d(dtype=vec3),
        composite_J: wp.array2d(dtype=mat33),
    ):
        """Each body's inertia ``(m, h, J)`` about the base origin (world orientation), then the sum over each
        body's subtree (``composite_*`` must be zeroed; they are only added to, never read, here)."""
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
        for b in range(num_bodies):
            for k in range(subtree_start[b], subtree_start[b + 1]):
                d = subtree_index[k]
                wp.atomic_add(composite_m, e, b, inertia_m[e, d])
                wp.atomic_add(composite_h, e, b, inertia_h[e, d])
                wp.atomic_add(composite_J, e, b, inertia_J[e, d])

    @wp.kernel
    def joint_space_inertia(
        ancestor_start: wp.array(dtype=wp.int32),
        ancestor_index: wp.array(dtype=wp.int32),
        joint_armature: wp.array(dtype=dtype),
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
            for lb in range(6):
                if fixed_base == 0:
                    H[e, lb, kb] = motion_dot_force(dof_ang[e, lb], dof_lin[e, lb], nb, fb)
                elif lb == kb:
                    H[e, lb, kb] = dtype(1.0)
        for b in range(1, composite_m.shape[1]):
            k = 5 + b
            n, f = inertia_times_motion(composite_m[e, b], composite_h[e, b], composite_J[e, b],
                                        dof_ang[e, k], dof_lin[e, k])
            H[e, k, k] = motion_dot_force(dof_ang[e, k], dof_lin[e, k], n, f) + joint_armature[b - 1]
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

    return composite_inertia, joint_space_inertia
