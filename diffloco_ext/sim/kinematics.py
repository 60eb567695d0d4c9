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

from .adjoint import input_grad, output_grad
from .warp_setup import warp_types


@functools.cache
def joint_funcs(dtype):
    """Device functions of one revolute joint: a child's pose from its parent's, and the reverse of that."""
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33
    one = dtype(1.0)

    @wp.func
    def joint_turn(axis: vec3, angle: dtype):
        """Rodrigues: rotation by ``angle`` about the unit ``axis``, ``I + sin K + (1 - cos) K^2``, K = [axis]x."""
        K = wp.skew(axis)
        return wp.identity(n=3, dtype=dtype) + K * wp.sin(angle) + (K * K) * (one - wp.cos(angle))

    @wp.func
    def joint_pose(rot_p: mat33, pos_p: vec3, rot0: mat33, pos0: vec3, axis: vec3, angle: dtype):
        """Child rotation and origin (``R_p R0 Turn(angle)``, ``r_p + R_p p0``) and the joint axis in the world."""
        rot_tree = rot_p * rot0
        return rot_tree * joint_turn(axis, angle), pos_p + rot_p * pos0, rot_tree * axis

    @wp.func
    def joint_pose_adjoint(rot_p: mat33, rot0: mat33, pos0: vec3, axis: vec3, angle: dtype, adj_rot: mat33,
                           adj_pos: vec3, adj_axis: vec3):
        """Reverse of :func:`joint_pose` for the adjoints of its three outputs: the adjoint it adds to the parent's
        rotation and the angle's (the parent's origin receives ``adj_pos`` unchanged)."""
        rot_tree = rot_p * rot0
        turn = joint_turn(axis, angle)
        adj_tree = adj_rot * wp.transpose(turn) + wp.outer(adj_axis, axis)
        K = wp.skew(axis)
        d_turn = K * wp.cos(angle) + (K * K) * wp.sin(angle)
        adj_angle = wp.ddot(wp.transpose(rot_tree) * adj_rot, d_turn)
        return adj_tree * wp.transpose(rot0) + wp.outer(adj_pos, pos0), adj_angle

    return joint_turn, joint_pose, joint_pose_adjoint


@functools.cache
def kinematics_kernels(dtype):
    _, _joint_pose, _joint_pose_adjoint = joint_funcs(dtype)
    t = warp_types(dtype)
    vec3, mat33, quat = t.vec3, t.mat33, t.quat
    zero = dtype(0.0)
    one = dtype(1.0)

    @wp.func
    def base_quat(q: wp.array2d(dtype=dtype), e: int):
        # q stores (w, x, y, z); Warp quaternions are (x, y, z, w).
        return wp.normalize(quat(q[e, 4], q[e, 5], q[e, 6], q[e, 3]))

    @wp.kernel
    def base_kinematics(
        q: wp.array2d(dtype=dtype),
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
    ):
        """The base: its orientation and its six motion-subspace columns (differentiated by Warp's tape)."""
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

    @wp.kernel(enable_backward=False)
    def tree_kinematics(
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
        """Every other body, parents first, and its joint's motion-subspace column."""
        e = wp.tid()
        for b in range(1, body_parent.shape[0]):
            p = body_parent[b]
            rot, r, a = _joint_pose(body_rot[e, p], body_pos[e, p], body_rot0[b], body_pos0[b], joint_axis[b],
                                    q[e, 6 + b])
            body_rot[e, b] = rot
            body_pos[e, b] = r
            dof_ang[e, 5 + b] = a
            dof_lin[e, 5 + b] = wp.cross(r, a)

    @wp.kernel(enable_backward=False)
    def tree_kinematics_adjoint(
        q: wp.array2d(dtype=dtype),
        body_parent: wp.array(dtype=wp.int32),
        body_pos0: wp.array(dtype=vec3),
        body_rot0: wp.array(dtype=mat33),
        joint_axis: wp.array(dtype=vec3),
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        body_rot_grad: wp.array2d(dtype=mat33),
        body_pos_grad: wp.array2d(dtype=vec3),
        dof_ang_grad: wp.array2d(dtype=vec3),
        dof_lin_grad: wp.array2d(dtype=vec3),
        q_grad: wp.array2d(dtype=dtype),
    ):
        """Reverse of :func:`tree_kinematics`, children first; the base's adjoints are left in
        ``body_rot_grad[:, 0]`` for :func:`base_kinematics`' automatic adjoint."""
        e = wp.tid()
        num_bodies = body_parent.shape[0]
        for bb in range(num_bodies - 1):
            b = num_bodies - 1 - bb
            p = body_parent[b]
            rot_p = body_rot[e, p]
            r = body_pos[e, b]
            a = rot_p * body_rot0[b] * joint_axis[b]
            adj_lin = dof_lin_grad[e, 5 + b]
            adj_r = body_pos_grad[e, b] + wp.cross(a, adj_lin)
            adj_a = dof_ang_grad[e, 5 + b] + wp.cross(adj_lin, r)
            adj_rot_p, adj_angle = _joint_pose_adjoint(rot_p, body_rot0[b], body_pos0[b], joint_axis[b], q[e, 6 + b],
                                                       body_rot_grad[e, b], adj_r, adj_a)
            q_grad[e, 6 + b] = q_grad[e, 6 + b] + adj_angle
            body_rot_grad[e, p] = body_rot_grad[e, p] + adj_rot_p
            body_pos_grad[e, p] = body_pos_grad[e, p] + adj_r

    @wp.kernel(enable_backward=False)
    def body_velocities(
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

    @wp.kernel(enable_backward=False)
    def body_velocities_adjoint(
        u: wp.array2d(dtype=dtype),
        body_parent: wp.array(dtype=wp.int32),
        body_rot: wp.array2d(dtype=mat33),
        dof_ang: wp.array2d(dtype=vec3),
        dof_lin: wp.array2d(dtype=vec3),
        vel_ang_grad: wp.array2d(dtype=vec3),
        vel_lin_grad: wp.array2d(dtype=vec3),
        u_grad: wp.array2d(dtype=dtype),
        body_rot_grad: wp.array2d(dtype=mat33),
        dof_ang_grad: wp.array2d(dtype=vec3),
        dof_lin_grad: wp.array2d(dtype=vec3),
        has_u: int,
    ):
        """Reverse of :func:`body_velocities`, children first. The velocity adjoints are accumulated up the tree in
        place (``vel_*_grad`` end as the adjoints of the subtree sums; they have no other reader)."""
        e = wp.tid()
        num_bodies = body_parent.shape[0]
        for bb in range(num_bodies - 1):
            b = num_bodies - 1 - bb
            p = body_parent[b]
            a_ang = vel_ang_grad[e, b]
            a_lin = vel_lin_grad[e, b]
            vel_ang_grad[e, p] = vel_ang_grad[e, p] + a_ang
            vel_lin_grad[e, p] = vel_lin_grad[e, p] + a_lin
            qd = u[e, 5 + b]
            dof_ang_grad[e, 5 + b] = dof_ang_grad[e, 5 + b] + a_ang * qd
            dof_lin_grad[e, 5 + b] = dof_lin_grad[e, 5 + b] + a_lin * qd
            if has_u != 0:
                u_grad[e, 5 + b] = u_grad[e, 5 + b] + wp.dot(a_ang, dof_ang[e, 5 + b]) + wp.dot(
                    a_lin, dof_lin[e, 5 + b])
        a_ang0 = vel_ang_grad[e, 0]
        a_lin0 = vel_lin_grad[e, 0]
        w = vec3(u[e, 3], u[e, 4], u[e, 5])
        body_rot_grad[e, 0] = body_rot_grad[e, 0] + wp.outer(a_ang0, w)
        if has_u != 0:
            a_w = wp.transpose(body_rot[e, 0]) * a_ang0
            for i in range(3):
                u_grad[e, i] = u_grad[e, i] + a_lin0[i]
                u_grad[e, 3 + i] = u_grad[e, 3 + i] + a_w[i]

    return base_kinematics, tree_kinematics, tree_kinematics_adjoint, body_velocities, body_velocities_adjoint


def forward_kinematics(model, q: wp.array, kin, tape: wp.Tape | None = None) -> None:
    """Body poses and motion subspace of ``q`` into ``kin`` (base by Warp's tape, the tree by hand)."""
    base, tree, tree_adjoint = kinematics_kernels(model.dtype)[:3]
    m, k = model, kin
    wp.launch(base, dim=m.num_envs, device=m.device, inputs=[q, k.body_rot, k.body_pos, k.dof_ang, k.dof_lin])
    wp.launch(tree, dim=m.num_envs, device=m.device, record_tape=False,
              inputs=[q, m.body_parent, m.body_pos0, m.body_rot0, m.joint_axis, k.body_rot, k.body_pos, k.dof_ang,
                      k.dof_lin])
    if tape is None:
        return

    def backward() -> None:
        outs = [output_grad("forward_kinematics", name, getattr(k, name))
                for name in ("body_rot", "body_pos", "dof_ang", "dof_lin")]
        q_grad, _ = input_grad("forward_kinematics.q", q)
        wp.launch(tree_adjoint, dim=m.num_envs, device=m.device, record_tape=False,
                  inputs=[q, m.body_parent, m.body_pos0, m.body_rot0, m.joint_axis, k.body_rot, k.body_pos,
                          *outs, q_grad])

    tape.record_func(backward=backward, arrays=[])


def body_velocities(model, u: wp.array, kin, tape: wp.Tape | None = None) -> None:
    """Spatial velocities of every body at ``u`` into ``kin`` (needs its poses and motion subspace); the hand-written
    reverse is recorded on ``tape`` when given."""
    forward, adjoint = kinematics_kernels(model.dtype)[3:5]
    m, k = model, kin
    wp.launch(forward, dim=m.num_envs, device=m.device, record_tape=False,
              inputs=[u, m.body_parent, k.body_rot, k.dof_ang, k.dof_lin, k.body_vel_ang, k.body_vel_lin])
    if tape is None:
        return

    def backward() -> None:
        outs = [output_grad("body_velocities", name, getattr(k, name)) for name in ("body_vel_ang", "body_vel_lin")]
        inner = [output_grad("body_velocities", name, getattr(k, name)) for name in ("body_rot", "dof_ang", "dof_lin")]
        u_grad, has_u = input_grad("body_velocities.u", u)
        wp.launch(adjoint, dim=m.num_envs, device=m.device, record_tape=False, inputs=[
            u, m.body_parent, k.body_rot, k.dof_ang, k.dof_lin, *outs, u_grad, *inner, has_u])

    tape.record_func(backward=backward, arrays=[])
