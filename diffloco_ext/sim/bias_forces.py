"""Stage: bias forces (recursive Newton-Euler with zero joint acceleration): Coriolis, centrifugal, gravity.

``bias = C(q, u) u + g(q)``, MuJoCo's ``qfrc_bias`` (so ``H du/dt + bias = applied forces``). Gravity enters as
an upward acceleration of the base. The per-step frame is inertial at this instant and coincides with the
base origin, so the base's bias acceleration is ``(0, -w x v)`` (rate of change of the velocity of the body
point passing through the fixed origin).
"""


import functools

import warp as wp

from .adjoint import input_grad, output_grad
from .scratch import scratch_array
from .spatial import (
    inertia_times_motion,
    inertia_times_motion_adjoint,
    motion_cross_force,
    motion_cross_motion,
    motion_dot_force,
)
from .warp_setup import warp_types


@functools.cache
def bias_force_kernels(dtype):
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33

    @wp.kernel(enable_backward=False)
    def body_bias_forces(
        u: wp.array2d(dtype=dtype),
        gravity: wp.array(dtype=vec3),
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
        subtree_force_ang: wp.array2d(dtype=vec3),
        subtree_force_lin: wp.array2d(dtype=vec3),
    ):
        """Bias acceleration of every body and the force it needs, ``F = I A + V x* (I V)``, then the sum of the
        forces over each body's subtree, children into parents (bodies are numbered parents first)."""
        e = wp.tid()
        for b in range(body_parent.shape[0]):
            w = body_vel_ang[e, b]
            v = body_vel_lin[e, b]
            acc_ang = vec3(dtype(0.0), dtype(0.0), dtype(0.0))
            acc_lin = -wp.cross(w, v) - gravity[e]
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
            subtree_force_ang[e, b] = na + nc
            subtree_force_lin[e, b] = fa + fc
        for bb in range(body_parent.shape[0] - 1):
            b2 = body_parent.shape[0] - 1 - bb
            p2 = body_parent[b2]
            subtree_force_ang[e, p2] = subtree_force_ang[e, p2] + subtree_force_ang[e, b2]
            subtree_force_lin[e, p2] = subtree_force_lin[e, p2] + subtree_force_lin[e, b2]

    @wp.kernel(enable_backward=False)
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

    @wp.kernel(enable_backward=False)
    def body_bias_forces_adjoint(
        u: wp.array2d(dtype=dtype),
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
        subtree_force_ang: wp.array2d(dtype=vec3),
        subtree_force_lin: wp.array2d(dtype=vec3),
        bias_grad: wp.array2d(dtype=dtype),
        adj_force_ang: wp.array2d(dtype=vec3),
        adj_force_lin: wp.array2d(dtype=vec3),
        adj_acc_ang: wp.array2d(dtype=vec3),
        adj_acc_lin: wp.array2d(dtype=vec3),
        u_grad: wp.array2d(dtype=dtype),
        dof_ang_grad: wp.array2d(dtype=vec3),
        dof_lin_grad: wp.array2d(dtype=vec3),
        body_vel_ang_grad: wp.array2d(dtype=vec3),
        body_vel_lin_grad: wp.array2d(dtype=vec3),
        inertia_m_grad: wp.array2d(dtype=dtype),
        inertia_h_grad: wp.array2d(dtype=vec3),
        inertia_J_grad: wp.array2d(dtype=mat33),
    ):
        """Reverse of :func:`project_bias` and :func:`body_bias_forces` for one environment (``adj_*`` scratch
        [N, B])."""
        e = wp.tid()
        num_bodies = body_parent.shape[0]
        # bias_k = S_k . F^c_b(k): the base's six DOFs read the base's subtree force, DOF 5 + b body b's
        base_ang = vec3()
        base_lin = vec3()
        for k0 in range(6):
            g0 = bias_grad[e, k0]
            base_ang = base_ang + dof_ang[e, k0] * g0
            base_lin = base_lin + dof_lin[e, k0] * g0
            dof_ang_grad[e, k0] = dof_ang_grad[e, k0] + subtree_force_ang[e, 0] * g0
            dof_lin_grad[e, k0] = dof_lin_grad[e, k0] + subtree_force_lin[e, 0] * g0
        for b2 in range(num_bodies):  # subtree sums: a body's force adjoint sums its ancestors-or-self's
            a_ang = base_ang
            a_lin = base_lin
            if b2 > 0:
                kb = 5 + b2
                gb = bias_grad[e, kb]
                dof_ang_grad[e, kb] = dof_ang_grad[e, kb] + subtree_force_ang[e, b2] * gb
                dof_lin_grad[e, kb] = dof_lin_grad[e, kb] + subtree_force_lin[e, b2] * gb
                p2 = body_parent[b2]
                a_ang = dof_ang[e, kb] * gb + adj_force_ang[e, p2]
                a_lin = dof_lin[e, kb] * gb + adj_force_lin[e, p2]
            adj_force_ang[e, b2] = a_ang
            adj_force_lin[e, b2] = a_lin
        for bb in range(num_bodies):  # children before parents: a child's acceleration adjoint reaches its parent
            b = num_bodies - 1 - bb
            w = body_vel_ang[e, b]
            v = body_vel_lin[e, b]
            m = inertia_m[e, b]
            h = inertia_h[e, b]
            J = inertia_J[e, b]
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
                m, h, J, body_acc_ang[e, b], body_acc_lin[e, b], a_n, a_f)
            inertia_m_grad[e, b] = inertia_m_grad[e, b] + am1 + am2
            inertia_h_grad[e, b] = inertia_h_grad[e, b] + ah1 + ah2
            inertia_J_grad[e, b] = inertia_J_grad[e, b] + aJ1 + aJ2
            adj_w = adj_w + aw1
            adj_v = adj_v + av1
            acc_ang_bar = adj_acc_ang[e, b] + aA_ang
            acc_lin_bar = adj_acc_lin[e, b] + aA_lin
            if b == 0:  # A = (0, -w x v - g)
                adj_w = adj_w - wp.cross(v, acc_lin_bar)
                adj_v = adj_v - wp.cross(acc_lin_bar, w)
            else:  # A = A_parent + (w x sa, w x sl + v x sa), (sa, sl) = S qd
                p = body_parent[b]
                adj_acc_ang[e, p] = adj_acc_ang[e, p] + acc_ang_bar
                adj_acc_lin[e, p] = adj_acc_lin[e, p] + acc_lin_bar
                qd = u[e, 5 + b]
                s_ang = dof_ang[e, 5 + b]
                s_lin = dof_lin[e, 5 + b]
                sa = s_ang * qd
                sl = s_lin * qd
                adj_w = adj_w + wp.cross(sa, acc_ang_bar) + wp.cross(sl, acc_lin_bar)
                adj_v = adj_v + wp.cross(sa, acc_lin_bar)
                adj_sa = wp.cross(acc_ang_bar, w) + wp.cross(acc_lin_bar, v)
                adj_sl = wp.cross(acc_lin_bar, w)
                dof_ang_grad[e, 5 + b] = dof_ang_grad[e, 5 + b] + adj_sa * qd
                dof_lin_grad[e, 5 + b] = dof_lin_grad[e, 5 + b] + adj_sl * qd
                u_grad[e, 5 + b] = u_grad[e, 5 + b] + wp.dot(adj_sa, s_ang) + wp.dot(adj_sl, s_lin)
            body_vel_ang_grad[e, b] = body_vel_ang_grad[e, b] + adj_w
            body_vel_lin_grad[e, b] = body_vel_lin_grad[e, b] + adj_v

    return body_bias_forces, project_bias, body_bias_forces_adjoint


def bias_forces(model, u: wp.array, kin, data, tape: wp.Tape | None = None) -> None:
    """Body accelerations and forces and their subtree sums into ``data``, then ``bias``; with a ``tape``, the
    hand-written reverse of both is recorded in their place."""
    rnea, project, adjoint = bias_force_kernels(model.dtype)
    m, k, d = model, kin, data
    N = m.num_envs
    wp.launch(rnea, dim=N, device=m.device, record_tape=False, inputs=[
        u, m.gravity, m.body_parent, k.dof_ang, k.dof_lin, k.body_vel_ang, k.body_vel_lin, d.inertia_m, d.inertia_h,
        d.inertia_J, d.body_acc_ang, d.body_acc_lin, d.body_force_ang, d.body_force_lin, d.subtree_force_ang,
        d.subtree_force_lin])
    wp.launch(project, dim=N, device=m.device, record_tape=False,
              inputs=[k.dof_ang, k.dof_lin, d.subtree_force_ang, d.subtree_force_lin, d.bias])
    if tape is None:
        return

    def grad(array):  # the kernel adds into every one: a stand-in for an input nobody differentiates
        return input_grad("bias_forces", array)[0]

    def backward() -> None:
        bias_grad = output_grad("bias_forces", "bias", d.bias)
        shape, vec = d.body_force_ang.shape, d.body_force_ang.dtype
        scratch = [scratch_array(f"bias_forces.adj{i}", shape, vec, m.device, zero=i >= 2) for i in range(4)]
        wp.launch(adjoint, dim=N, device=m.device, record_tape=False, inputs=[
            u, m.body_parent, k.dof_ang, k.dof_lin, k.body_vel_ang, k.body_vel_lin, d.inertia_m, d.inertia_h,
            d.inertia_J, d.body_acc_ang, d.body_acc_lin, d.subtree_force_ang, d.subtree_force_lin, bias_grad,
            *scratch, grad(u), grad(k.dof_ang), grad(k.dof_lin), grad(k.body_vel_ang), grad(k.body_vel_lin),
            grad(d.inertia_m), grad(d.inertia_h), grad(d.inertia_J)])

    tape.record_func(backward=backward, arrays=[])
