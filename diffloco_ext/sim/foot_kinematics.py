"""Stage: foot sphere centres and velocities at a state, in one pass over the tree, with a hand-written adjoint.

What tasks read after every step (foot heights, foot slip): the world position (m) and velocity (m/s) of every
foot sphere's centre at ``(q, u)``. The step's own kinematics (:mod:`.kinematics`) also builds the motion
subspace for the dynamics; this pass keeps only what the feet need: body rotations and positions relative to
the base origin ``O`` (world orientation), and body velocities in the spatial convention of :mod:`.spatial`
(angular velocity ``w``, velocity ``v`` of the body point at ``O``)::

    R_b = R_p R0_b Turn(axis_b, q_b)        r_b = r_p + R_p p0_b          a_b = R_p R0_b axis_b
    w_b = w_p + a_b qd_b                     v_b = v_p + (r_b x a_b) qd_b
    foot: x = r_b + R_b offset               pos = x + base position        vel = v_b + w_b x x

The base rotation ``R_0`` comes from the quaternion through a small kernel differentiated by Warp's tape; the
rest is reversed by hand (children first), checked by the float64 finite-difference tests of ``tests/sim``.
"""

import functools

import warp as wp

from .kinematics import joint_funcs
from .adjoint import input_grad, output_grad
from .scratch import scratch_array
from .warp_setup import warp_types


@functools.cache
def foot_kinematics_kernels(dtype):
    t = warp_types(dtype)
    vec3, mat33, quat = t.vec3, t.mat33, t.quat
    _, _joint_pose, _joint_pose_adjoint = joint_funcs(dtype)

    @wp.kernel
    def base_rotation(q: wp.array2d(dtype=dtype), rot0: wp.array(dtype=mat33)):
        """Base-to-world rotation of the (normalised) quaternion ``q[3:7]`` = (w, x, y, z)."""
        e = wp.tid()
        rot0[e] = wp.quat_to_matrix(wp.normalize(quat(q[e, 4], q[e, 5], q[e, 6], q[e, 3])))

    @wp.kernel(enable_backward=False)
    def foot_states(
        q: wp.array2d(dtype=dtype),
        u: wp.array2d(dtype=dtype),
        rot0: wp.array(dtype=mat33),
        body_parent: wp.array(dtype=wp.int32),
        body_pos0: wp.array(dtype=vec3),
        body_rot0: wp.array(dtype=mat33),
        joint_axis: wp.array(dtype=vec3),
        foot_body: wp.array(dtype=wp.int32),
        foot_offset: wp.array(dtype=vec3),
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        body_w: wp.array2d(dtype=vec3),
        body_v: wp.array2d(dtype=vec3),
        foot_pos: wp.array2d(dtype=vec3),
        foot_vel: wp.array2d(dtype=vec3),
    ):
        """Bodies parents first (rotation, position, velocity kept for the adjoint), then every foot."""
        e = wp.tid()
        R = rot0[e]
        body_rot[e, 0] = R
        body_pos[e, 0] = vec3()
        body_w[e, 0] = R * vec3(u[e, 3], u[e, 4], u[e, 5])
        body_v[e, 0] = vec3(u[e, 0], u[e, 1], u[e, 2])
        for b in range(1, body_parent.shape[0]):
            p = body_parent[b]
            rot, r, a = _joint_pose(body_rot[e, p], body_pos[e, p], body_rot0[b], body_pos0[b], joint_axis[b],
                                    q[e, 6 + b])
            qd = u[e, 5 + b]
            body_rot[e, b] = rot
            body_pos[e, b] = r
            body_w[e, b] = body_w[e, p] + a * qd
            body_v[e, b] = body_v[e, p] + wp.cross(r, a) * qd
        base = vec3(q[e, 0], q[e, 1], q[e, 2])
        for f in range(foot_body.shape[0]):
            b = foot_body[f]
            x = body_pos[e, b] + body_rot[e, b] * foot_offset[f]
            foot_pos[e, f] = x + base
            foot_vel[e, f] = body_v[e, b] + wp.cross(body_w[e, b], x)

    @wp.kernel(enable_backward=False)
    def foot_states_adjoint(
        q: wp.array2d(dtype=dtype),
        u: wp.array2d(dtype=dtype),
        body_parent: wp.array(dtype=wp.int32),
        body_pos0: wp.array(dtype=vec3),
        body_rot0: wp.array(dtype=mat33),
        joint_axis: wp.array(dtype=vec3),
        foot_body: wp.array(dtype=wp.int32),
        foot_offset: wp.array(dtype=vec3),
        body_rot: wp.array2d(dtype=mat33),
        body_pos: wp.array2d(dtype=vec3),
        body_w: wp.array2d(dtype=vec3),
        foot_pos_grad: wp.array2d(dtype=vec3),
        foot_vel_grad: wp.array2d(dtype=vec3),
        adj_rot: wp.array2d(dtype=mat33),
        adj_pos: wp.array2d(dtype=vec3),
        adj_w: wp.array2d(dtype=vec3),
        adj_v: wp.array2d(dtype=vec3),
        q_grad: wp.array2d(dtype=dtype),
        u_grad: wp.array2d(dtype=dtype),
        rot0_grad: wp.array(dtype=mat33),
        has_q: int,
        has_u: int,
    ):
        """Reverse of :func:`foot_states`; ``adj_*`` [N, B] are zeroed scratch."""
        e = wp.tid()
        for f in range(foot_body.shape[0]):
            b = foot_body[f]
            x = body_pos[e, b] + body_rot[e, b] * foot_offset[f]
            g_pos = foot_pos_grad[e, f]
            g_vel = foot_vel_grad[e, f]
            w = body_w[e, b]
            adj_x = g_pos + wp.cross(g_vel, w)
            adj_v[e, b] = adj_v[e, b] + g_vel
            adj_w[e, b] = adj_w[e, b] + wp.cross(x, g_vel)
            adj_pos[e, b] = adj_pos[e, b] + adj_x
            adj_rot[e, b] = adj_rot[e, b] + wp.outer(adj_x, foot_offset[f])
            if has_q != 0:
                for i in range(3):
                    q_grad[e, i] = q_grad[e, i] + g_pos[i]
        num_bodies = body_parent.shape[0]
        for bb in range(num_bodies - 1):
            b = num_bodies - 1 - bb
            p = body_parent[b]
            rot_p = body_rot[e, p]
            r = body_pos[e, b]
            a = rot_p * body_rot0[b] * joint_axis[b]
            qd = u[e, 5 + b]
            aw = adj_w[e, b]
            av = adj_v[e, b]
            # w_b = w_p + a qd;  v_b = v_p + (r x a) qd
            adj_w[e, p] = adj_w[e, p] + aw
            adj_v[e, p] = adj_v[e, p] + av
            g = av * qd
            adj_r = adj_pos[e, b] + wp.cross(a, g)
            adj_a = aw * qd + wp.cross(g, r)
            if has_u != 0:
                u_grad[e, 5 + b] = u_grad[e, 5 + b] + wp.dot(aw, a) + wp.dot(av, wp.cross(r, a))
            # the body's pose from its parent's
            adj_rot_p, adj_angle = _joint_pose_adjoint(rot_p, body_rot0[b], body_pos0[b], joint_axis[b], q[e, 6 + b],
                                                       adj_rot[e, b], adj_r, adj_a)
            if has_q != 0:
                q_grad[e, 6 + b] = q_grad[e, 6 + b] + adj_angle
            adj_rot[e, p] = adj_rot[e, p] + adj_rot_p
            adj_pos[e, p] = adj_pos[e, p] + adj_r
        # base: w_0 = R_0 u[3:6], v_0 = u[0:3]
        aw0 = adj_w[e, 0]
        uw = vec3(u[e, 3], u[e, 4], u[e, 5])
        rot0_grad[e] = rot0_grad[e] + adj_rot[e, 0] + wp.outer(aw0, uw)
        if has_u != 0:
            a_uw = wp.transpose(body_rot[e, 0]) * aw0
            av0 = adj_v[e, 0]
            for i in range(3):
                u_grad[e, i] = u_grad[e, i] + av0[i]
                u_grad[e, 3 + i] = u_grad[e, 3 + i] + a_uw[i]

    return base_rotation, foot_states, foot_states_adjoint


def foot_kinematics(model, q: wp.array, u: wp.array, tape: wp.Tape | None = None) -> tuple[wp.array, wp.array]:
    """Foot sphere centres (world, m) and velocities (world, m/s), each [N, F] vec3, at ``(q, u)``; recorded on
    ``tape`` when given (the outputs then carry gradients back to ``q`` and ``u``)."""
    base_rotation, forward, adjoint = foot_kinematics_kernels(model.dtype)
    t = warp_types(model.dtype)
    m = model
    N, B, F = m.num_envs, m.num_bodies, m.num_feet
    grad = tape is not None
    kw = dict(device=m.device)
    rot0 = wp.empty(N, dtype=t.mat33, requires_grad=grad, **kw)
    body_rot = wp.empty((N, B), dtype=t.mat33, **kw)
    body_pos, body_w, body_v = (wp.empty((N, B), dtype=t.vec3, **kw) for _ in range(3))
    foot_pos, foot_vel = (wp.empty((N, F), dtype=t.vec3, requires_grad=grad, **kw) for _ in range(2))
    if tape is not None:
        with tape:
            wp.launch(base_rotation, dim=N, inputs=[q, rot0], **kw)
    else:
        wp.launch(base_rotation, dim=N, inputs=[q, rot0], **kw)
    wp.launch(forward, dim=N, record_tape=False, inputs=[
        q, u, rot0, m.body_parent, m.body_pos0, m.body_rot0, m.joint_axis, m.foot_body, m.foot_offset, body_rot,
        body_pos, body_w, body_v, foot_pos, foot_vel], **kw)
    if tape is None:
        return foot_pos, foot_vel

    def backward() -> None:
        scratch = [scratch_array("foot_kinematics.adj_rot", (N, B), t.mat33, m.device)]
        scratch += [scratch_array(f"foot_kinematics.adj{i}", (N, B), t.vec3, m.device) for i in range(3)]
        outs = [output_grad("foot_kinematics", name, a) for name, a in (("foot_pos", foot_pos), ("foot_vel", foot_vel))]
        q_grad, has_q = input_grad("foot_kinematics.q", q)
        u_grad, has_u = input_grad("foot_kinematics.u", u)
        wp.launch(adjoint, dim=N, record_tape=False, inputs=[
            q, u, m.body_parent, m.body_pos0, m.body_rot0, m.joint_axis, m.foot_body, m.foot_offset, body_rot,
            body_pos, body_w, *outs, *scratch, q_grad, u_grad, output_grad("foot_kinematics", "rot0", rot0),
            has_q, has_u], **kw)

    tape.record_func(backward=backward, arrays=[])
    return foot_pos, foot_vel
