"""Stage: forward kinematics, motion subspace and body velocities (one thread per environment).

Outputs, per environment, in the per-step frame of :mod:`.spatial` (world orientation, origin at the base):

* ``body_rot`` [N, B] mat33: body-to-world rotation;
* ``body_pos`` [N, B] vec3: body frame origin relative to the base origin (m);
* ``dof_ang``, ``dof_lin`` [N, nv] vec3: motion subspace column of every degree of freedom (``S_k``):
  base translations ``(0, e_k)``, base rotations ``(R_0 e_k, 0)`` (body-frame angular velocity), joint
  ``j``: ``(a, r x a)`` with ``a`` the joint axis in the world and ``r`` the body origin;
* ``body_vel_ang``, ``body_vel_lin`` [N, B] vec3: spatial velocity of every body (``V_b = V_parent + S_b u_b``).
"""


import functools

import warp as wp

from .warp_setup import warp_types


@functools.cache
def kinematics_kernels(dtype):
    t = warp_types(dtype)
    vec3, mat33, quat = t.vec3, t.mat33, t.quat
    zero = dtype(0.0)
    one = dtype(1.0)

    @wp.func
    def base_quat(q: wp.array2d(dtype=dtype), e: int):
        # q stores (w, x, y, z); Warp quaternions are (x, y, z, w).
        return wp.normalize(quat(q[e, 4], q[e, 5], q[e, 6], q[e, 3]))

    @wp.kernel
    def forward_kinematics(
        q: wp.array2d(dtype=dtype),
        body_parent: wp.array(dtype=wp.int32),
        body_pos0: wp.array(dtype=vec3),
        body_rot0: wp.array(dtype=mat33),
        joint_axis: wp.array(dtype=vec3),
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
    ):
        e = wp.tid()
        rot0 = wp.quat_to_matrix(base_quat(q, e))
        body_rot[e, 0] = rot0
        body_pos[e, 0] = vec3(zero, zero, zero)
        dof_ang[e, 0] = vec3(zero, zero, zero)
        dof_ang[e, 1] = vec3(zero, zero, zero)
        dof_ang[e, 2] = vec3(zero, zero, zero)
        dof_lin[e, 0] = vec3(one, zero, zero)
        dof_lin[e, 1] = vec3(zero, one, zero)
        dof_lin[e, 2] = vec3(zero, zero, one)
        dof_ang[e, 3] = vec3(rot0[0, 0], rot0[1, 0], rot0[2, 0])
        dof_ang[e, 4] = vec3(rot0[0, 1], rot0[1, 1], rot0[2, 1])
        dof_ang[e, 5] = vec3(rot0[0, 2], rot0[1, 2], rot0[2, 2])
        dof_lin[e, 3] = vec3(zero, zero, zero)
        dof_lin[e, 4] = vec3(zero, zero, zero)
        dof_lin[e, 5] = vec3(zero, zero, zero)
        for b in range(1, body_parent.shape[0]):
            p = body_parent[b]
            rot_p = body_rot[e, p]
            rot_tree = rot_p * body_rot0[b]
            r = body_pos[e, p] + rot_p * body_pos0[b]
            axis_local = joint_axis[b]
            # Rodrigues: rotation by q about the unit axis, I + sin q K + (1 - cos q) K^2 with K = [axis]x
            angle = q[e, 6 + b]
            K = wp.skew(axis_local)
            turn = wp.identity(n=3, dtype=dtype) + K * wp.sin(angle) + (K * K) * (one - wp.cos(angle))
            body_rot[e, b] = rot_tree * turn
            body_pos[e, b] = r
            a = rot_tree * axis_local
            dof_ang[e, 5 + b] = a
            dof_lin[e, 5 + b] = wp.cross(r, a)

    @wp.kernel
    def body_velocities(
        q: wp.array2d(dtype=dtype),
        u: wp.array2d(dtype=dtype),
        body_parent: wp.array(dtype=wp.int32),
        body_rot: wp.array2d(dtype=mat33),
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
        body_vel_ang: wp.array2d(dtype=vec3),
        body_vel_lin: wp.array2d(dtype=vec3),
    ):
        e = wp.tid()
        body_vel_ang[e, 0] = body_rot[e, 0] * vec3(u[e, 3], u[e, 4], u[e, 5])
        body_vel_lin[e, 0] = vec3(u[e, 0], u[e, 1], u[e, 2])
        for b in range(1, body_parent.shape[0]):
            p = body_parent[b]
            qd = u[e, 5 + b]
            body_vel_ang[e, b] = body_vel_ang[e, p] + dof_ang[e, 5 + b] * qd
            body_vel_lin[e, b] = body_vel_lin[e, p] + dof_lin[e, 5 + b] * qd

    @wp.kernel
    def foot_kinematics(
        q: wp.array2d(dtype=dtype),
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        body_vel_ang: wp.array2d(dtype=vec3),
        body_vel_lin: wp.array2d(dtype=vec3),
        foot_body: wp.array(dtype=wp.int32),
        foot_offset: wp.array(dtype=vec3),
        foot_pos: wp.array2d(dtype=vec3),
        foot_vel: wp.array2d(dtype=vec3),
        foot_rel: wp.array2d(dtype=vec3),
    ):
        """Foot sphere centres in the world (m), their velocities (m/s) and positions relative to ``O``."""
        e, f = wp.tid()
        b = foot_body[f]
        r = body_pos[e, b] + body_rot[e, b] * foot_offset[f]
        foot_rel[e, f] = r
        foot_pos[e, f] = r + vec3(q[e, 0], q[e, 1], q[e, 2])
        foot_vel[e, f] = body_vel_lin[e, b] + wp.cross(body_vel_ang[e, b], r)

    return forward_kinematics, body_velocities, foot_kinematics
