"""Stage: forward kinematics, motion subspace and body velocities (one thread per environment).

Outputs (:class:`KinematicsData`), per environment, in the per-step frame of :mod:`.spatial` (world orientation,
origin at the base):

* ``body_rot`` [N, B] mat33: body-to-world rotation;
* ``body_pos`` [N, B] vec3: body frame origin relative to the base origin (m);
* ``dof_ang``, ``dof_lin`` [N, nv] vec3: motion subspace column of every degree of freedom (``S_k``):
  base translations ``(0, e_k)``, base rotations ``(R_0 e_k, 0)`` (body-frame angular velocity), joint
  ``j``: ``(a, r x a)`` with ``a`` the joint axis in the world and ``r`` the body origin;
* ``body_vel_ang``, ``body_vel_lin`` [N, B] vec3: spatial velocity of every body (``V_b = V_parent + S_b u_b``).

This is the simulator's one pass over the tree: the step runs it at the midpoint, and the foot kinematics
(:mod:`.foot_kinematics`) and collision-body gaps (:mod:`.body_contacts`) at the states they report. The base's
orientation and subspace come from a small kernel differentiated by Warp's tape; the tree (poses, subspace and
velocities in one loop, parents first) has a hand-written reverse (children first).
"""


import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch, launch_stage
from .coordinates import base_funcs, dof_of_body, q_of_body
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import warp_types


@dataclass
class KinematicsData(StageData):
    """Forward kinematics and body velocities of one state; world orientation, about the base origin."""

    body_rot: wp.array = intermediate(lambda s: (s.N, s.B), "mat33", doc="body rotations")
    body_pos: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="body positions (m)")
    dof_ang: wp.array = intermediate(lambda s: (s.N, s.nv), "vec3", doc="motion subspace, angular part")
    dof_lin: wp.array = intermediate(lambda s: (s.N, s.nv), "vec3", doc="motion subspace, linear part")
    body_vel_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="body angular velocities (rad/s)")
    body_vel_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="body velocities at the origin (m/s)")


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


@dataclass
class KinematicsInputs(StageInputs):
    """What the tree pass reads."""

    q: wp.array = stage_input("scalar", 2, doc="coordinates [N, nq]")
    u: wp.array = stage_input("scalar", 2, doc="velocities [N, nv]")


@functools.cache
def kinematics_kernels(dtype):
    _, _joint_pose, _joint_pose_adjoint = joint_funcs(dtype)
    _, base_quat, _, base_linear_velocity, base_angular_velocity = base_funcs(dtype)
    vec3 = warp_types(dtype).vec3
    zero = dtype(0.0)
    one = dtype(1.0)
    T = kernel_types(dtype)
    In = KinematicsInputs.struct_type(dtype)

    @wp.kernel
    def base_kinematics(
        # In:
        q_in: wp.array2d(dtype=dtype),
        # Out:
        kin_out: T.Kin,
    ):
        """The base: its orientation and its six motion-subspace columns (differentiated by Warp's tape)."""
        e = wp.tid()
        rot0 = wp.quat_to_matrix(wp.normalize(base_quat(q_in, e)))
        kin_out.body_rot[e, 0] = rot0
        kin_out.body_pos[e, 0] = vec3(zero, zero, zero)
        for k in range(3):
            kin_out.dof_ang[e, k] = vec3(zero, zero, zero)
            kin_out.dof_lin[e, 3 + k] = vec3(zero, zero, zero)
        kin_out.dof_lin[e, 0] = vec3(one, zero, zero)
        kin_out.dof_lin[e, 1] = vec3(zero, one, zero)
        kin_out.dof_lin[e, 2] = vec3(zero, zero, one)
        kin_out.dof_ang[e, 3] = vec3(rot0[0, 0], rot0[1, 0], rot0[2, 0])
        kin_out.dof_ang[e, 4] = vec3(rot0[0, 1], rot0[1, 1], rot0[2, 1])
        kin_out.dof_ang[e, 5] = vec3(rot0[0, 2], rot0[1, 2], rot0[2, 2])

    @wp.kernel(enable_backward=False)
    def tree_kinematics(model: T.Model, inputs: In, outputs: T.Kin):
        """The base's velocity, then every other body, parents first: its pose, its joint's motion-subspace column
        and its velocity."""
        e = wp.tid()
        q = inputs.q
        u = inputs.u
        outputs.body_vel_ang[e, 0] = outputs.body_rot[e, 0] * base_angular_velocity(u, e)
        outputs.body_vel_lin[e, 0] = base_linear_velocity(u, e)
        for b in range(1, model.body_parent.shape[0]):
            p = model.body_parent[b]
            k = dof_of_body(b)
            rot, r, a = _joint_pose(outputs.body_rot[e, p], outputs.body_pos[e, p], model.body_rot0[b],
                                    model.body_pos0[b], model.joint_axis[b], q[e, q_of_body(b)])
            lin = wp.cross(r, a)
            qd = u[e, k]
            outputs.body_rot[e, b] = rot
            outputs.body_pos[e, b] = r
            outputs.dof_ang[e, k] = a
            outputs.dof_lin[e, k] = lin
            outputs.body_vel_ang[e, b] = outputs.body_vel_ang[e, p] + a * qd
            outputs.body_vel_lin[e, b] = outputs.body_vel_lin[e, p] + lin * qd

    @wp.kernel(enable_backward=False)
    def tree_kinematics_adjoint(model: T.Model, inputs: In, outputs: T.Kin, inputs_grad: In, outputs_grad: T.Kin):
        """Reverse of :func:`tree_kinematics`, children first. The velocity adjoints are accumulated up the tree in
        place (``outputs_grad.body_vel_*`` end as the adjoints of the subtree sums; they have no other reader);
        the base's rotation adjoint is left in ``outputs_grad.body_rot[:, 0]`` for :func:`base_kinematics`'
        automatic adjoint."""
        e = wp.tid()
        q = inputs.q
        u = inputs.u
        grad = outputs_grad
        num_bodies = model.body_parent.shape[0]
        for bb in range(num_bodies - 1):
            b = num_bodies - 1 - bb
            p = model.body_parent[b]
            k = dof_of_body(b)
            rot_p = outputs.body_rot[e, p]
            r = outputs.body_pos[e, b]
            a = outputs.dof_ang[e, k]
            lin = outputs.dof_lin[e, k]
            qd = u[e, k]
            # V_b = V_p + (a, r x a) qd
            a_ang = grad.body_vel_ang[e, b]
            a_lin = grad.body_vel_lin[e, b]
            grad.body_vel_ang[e, p] = grad.body_vel_ang[e, p] + a_ang
            grad.body_vel_lin[e, p] = grad.body_vel_lin[e, p] + a_lin
            inputs_grad.u[e, k] = inputs_grad.u[e, k] + wp.dot(a_ang, a) + wp.dot(a_lin, lin)
            adj_lin = grad.dof_lin[e, k] + a_lin * qd
            adj_a = grad.dof_ang[e, k] + a_ang * qd + wp.cross(adj_lin, r)
            adj_r = grad.body_pos[e, b] + wp.cross(a, adj_lin)
            # the body's pose from its parent's
            adj_rot_p, adj_angle = _joint_pose_adjoint(rot_p, model.body_rot0[b], model.body_pos0[b],
                                                       model.joint_axis[b], q[e, q_of_body(b)],
                                                       grad.body_rot[e, b], adj_r, adj_a)
            inputs_grad.q[e, q_of_body(b)] = inputs_grad.q[e, q_of_body(b)] + adj_angle
            grad.body_rot[e, p] = grad.body_rot[e, p] + adj_rot_p
            grad.body_pos[e, p] = grad.body_pos[e, p] + adj_r
        # the base's velocity: w_0 = R_0 u[3:6], v_0 = u[0:3]
        a_ang0 = grad.body_vel_ang[e, 0]
        a_lin0 = grad.body_vel_lin[e, 0]
        grad.body_rot[e, 0] = grad.body_rot[e, 0] + wp.outer(a_ang0, base_angular_velocity(u, e))
        a_w = wp.transpose(outputs.body_rot[e, 0]) * a_ang0
        for i in range(3):
            inputs_grad.u[e, i] = inputs_grad.u[e, i] + a_lin0[i]
            inputs_grad.u[e, 3 + i] = inputs_grad.u[e, 3 + i] + a_w[i]

    return base_kinematics, tree_kinematics, tree_kinematics_adjoint


def kinematics(model, q: wp.array, u: wp.array, kin: KinematicsData, tape: wp.Tape | None = None) -> None:
    """Body poses, motion subspace and body velocities at ``(q, u)`` into ``kin``; with a ``tape``, the base by
    Warp's tape and the hand-written reverse of the tree are recorded on it."""
    base, tree, adjoint = kinematics_kernels(model.dtype)
    launch(base, model.num_envs, [q, kin.values], model.device, tape)
    launch_stage("kinematics", model, [tree], adjoint, KinematicsInputs(q=q, u=u), kin, tape)
