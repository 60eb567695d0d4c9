"""Stage: bias forces (recursive Newton-Euler with zero joint acceleration): Coriolis, centrifugal, gravity.

``bias = C(q, u) u + g(q)``, MuJoCo's ``qfrc_bias`` (so ``H du/dt + bias = applied forces``). Gravity enters as
an upward acceleration of the base. The per-step frame is inertial at this instant and coincides with the
base origin, so the base's bias acceleration is ``(0, -w x v)`` (rate of change of the velocity of the body
point passing through the fixed origin).
"""


import functools

import warp as wp

from .spatial import inertia_times_motion, motion_cross_force, motion_cross_motion, motion_dot_force
from .warp_setup import warp_types


@functools.cache
def bias_force_kernels(dtype):
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33

    @wp.kernel
    def body_bias_forces(
        u: wp.array2d(dtype=dtype),
        gravity: vec3,
        body_parent: wp.array(dtype=wp.int32),
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
        body_vel_ang: wp.array2d(dtype=vec3),
        body_vel_lin: wp.array2d(dtype=vec3),
        inertia_m: wp.array2d(dtype=dtype),
        inertia_h: wp.array2d(dtype=vec3),
        inertia_J: wp.array2d(dtype=mat33),
        body_acc_ang: wp.array2d(dtype=vec3),
        body_acc_lin: wp.array2d(dtype=vec3),
        body_force_ang: wp.array2d(dtype=vec3),
        body_force_lin: wp.array2d(dtype=vec3),
        subtree_start: wp.array(dtype=wp.int32),
        subtree_index: wp.array(dtype=wp.int32),
        subtree_force_ang: wp.array2d(dtype=vec3),
        subtree_force_lin: wp.array2d(dtype=vec3),
    ):
        """Bias acceleration of every body and the force it needs, ``F = I A + V x* (I V)``, then the sum of the
        forces over each body's subtree (``subtree_force_*`` must be zeroed; only added to here)."""
        e = wp.tid()
        for b in range(body_parent.shape[0]):
            w = body_vel_ang[e, b]
            v = body_vel_lin[e, b]
            acc_ang = vec3(dtype(0.0), dtype(0.0), dtype(0.0))
            acc_lin = -wp.cross(w, v) - gravity
            if b > 0:
                p = body_parent[b]
                qd = u[e, 5 + b]
                ca, cl = motion_cross_motion(w, v, dof_ang[e, 5 + b] * qd, dof_lin[e, 5 + b] * qd)
                acc_ang = body_acc_ang[e, p] + ca
                acc_lin = body_acc_lin[e, p] + cl
            body_acc_ang[e, b] = acc_ang
            body_acc_lin[e, b] = acc_lin
            m = inertia_m[e, b]
            h = inertia_h[e, b]
            J = inertia_J[e, b]
            na, fa = inertia_times_motion(m, h, J, acc_ang, acc_lin)
            nv, fv = inertia_times_motion(m, h, J, w, v)
            nc, fc = motion_cross_force(w, v, nv, fv)
            body_force_ang[e, b] = na + nc
            body_force_lin[e, b] = fa + fc
        for b2 in range(body_parent.shape[0]):
            for k in range(subtree_start[b2], subtree_start[b2 + 1]):
                d = subtree_index[k]
                wp.atomic_add(subtree_force_ang, e, b2, body_force_ang[e, d])
                wp.atomic_add(subtree_force_lin, e, b2, body_force_lin[e, d])

    @wp.kernel
    def project_bias(
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
        subtree_force_ang: wp.array2d(dtype=vec3),
        subtree_force_lin: wp.array2d(dtype=vec3),
        bias: wp.array2d(dtype=dtype),
    ):
        """``bias_k = S_k . F^c_{b(k)}``; the base's six DOFs see the whole robot's force."""
        e = wp.tid()
        for k in range(bias.shape[1]):
            b = wp.max(k - 5, 0)
            bias[e, k] = motion_dot_force(dof_ang[e, k], dof_lin[e, k], subtree_force_ang[e, b],
                                          subtree_force_lin[e, b])

    return body_bias_forces, project_bias
