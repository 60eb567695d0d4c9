"""Stage: projected Gauss-Seidel on the contact impulses, and its hand-written reverse sweep.

The forward solve is described in :mod:`.contact` (modes, weights, projection, step sizes). Every iterate is
written once into ``history`` [N, iterations + 1, F] (and, when taped, every residual into ``residual``); the
backward pass walks the sweeps in reverse over these stored values, recomputing each contact update's intermediates and applying the chain rule by hand (the
derivatives of the projection, the tangential sub-steps, the step sizes and the residual). Warp's automatic
adjoint of the same loop was exact but took 8x the forward time; this one is checked against float64 central
finite differences through the whole step (``tests/sim/test_contact_gradients.py``).

Where the forward map has a kink (the projection's case switches, ``max``, the clamped sigmoid argument), the
reverse sweep takes the derivative of the branch the forward pass took, as automatic differentiation would.
"""

import functools

import warp as wp

from .adjoint import input_grad, output_grad
from .scratch import scratch_array
from .warp_setup import warp_types


@functools.cache
def gauss_seidel_kernels(dtype, num_contacts: int):
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33
    NC = num_contacts
    contact_vector = wp.types.vector(NC, dtype)
    TANGENT_STEPS = 3
    zero = dtype(0.0)
    one = dtype(1.0)
    half = dtype(0.5)

    @wp.func
    def _block(G: wp.array3d(dtype=dtype), e: int, i: int, j: int):
        """3x3 block ``(i, j)`` of the [N, 3F, 3F] Delassus matrix."""
        return mat33(
            G[e, 3 * i, 3 * j], G[e, 3 * i, 3 * j + 1], G[e, 3 * i, 3 * j + 2],
            G[e, 3 * i + 1, 3 * j], G[e, 3 * i + 1, 3 * j + 1], G[e, 3 * i + 1, 3 * j + 2],
            G[e, 3 * i + 2, 3 * j], G[e, 3 * i + 2, 3 * j + 1], G[e, 3 * i + 2, 3 * j + 2],
        )

    @wp.func
    def _add_block(G_grad: wp.array3d(dtype=dtype), e: int, i: int, j: int, m: mat33):
        for r in range(3):
            for c in range(3):
                G_grad[e, 3 * i + r, 3 * j + c] = G_grad[e, 3 * i + r, 3 * j + c] + m[r, c]
        return 0

    @wp.func
    def _project(p: vec3, mu: dtype):
        """Paper A's proximal projection: no pull; tangential impulse scaled into the friction cone."""
        out = p
        if p[0] <= zero:
            out = vec3(zero, zero, zero)
        else:
            tn2 = p[1] * p[1] + p[2] * p[2]
            limit = mu * p[0]
            if tn2 > limit * limit:
                scale = limit / wp.sqrt(tn2)
                out = vec3(p[0], p[1] * scale, p[2] * scale)
        return out

    @wp.func
    def _tangent_step(Gii: mat33, relaxation: dtype):
        """Isotropic step ``relaxation / lambda_max(G_tt)`` of the tangential pair, and the discriminant
        ``sqrt((a11 - a22)^2 + 4 a12^2)`` of the 2x2 tangential block (for the reverse pass)."""
        a11 = Gii[1, 1]
        a22 = Gii[2, 2]
        a12 = Gii[1, 2]
        disc = wp.sqrt((a11 - a22) * (a11 - a22) + dtype(4.0) * a12 * a12)
        return relaxation / (half * (a11 + a22 + disc)), disc

    @wp.func
    def _weight(g: dtype, mode: int, kappa: dtype, col_height: dtype):
        w = zero
        if mode == 1:
            if g <= zero:
                w = one
        elif g <= col_height:
            w = one / (one + wp.exp(wp.clamp(kappa * g, dtype(-100.0), dtype(50.0))))
        return w

    @wp.kernel(enable_backward=False)
    def projected_gauss_seidel(
        G: wp.array3d(dtype=dtype),
        c: wp.array3d(dtype=dtype),
        gap: wp.array2d(dtype=dtype),
        friction: wp.array(dtype=dtype),
        mode: int,
        kappa: dtype,
        col_height: dtype,
        iterations: int,
        gap_rate: dtype,
        gap_offset: dtype,
        max_push_speed: dtype,
        compliance_n: dtype,
        compliance_t: dtype,
        relaxation: dtype,
        weight: wp.array2d(dtype=dtype),
        target: wp.array2d(dtype=vec3),
        history: wp.array3d(dtype=vec3),
        impulse: wp.array3d(dtype=dtype),
        residual: wp.array3d(dtype=vec3),
        keep_residual: int,
    ):
        """Impulses per contact: ``history`` [N, iterations + 1, F] holds every iterate (written once).

        ``target`` [N, F] is each contact's free velocity plus ``max(gap_rate * min(g + gap_offset, 0), -max_push)``
        on the normal. The
        compliance ``R = diag(compliance_n, compliance_t, compliance_t)`` is added to each diagonal block.
        """
        e = wp.tid()
        mu = friction[e]
        for i0 in range(NC):
            g0 = gap[e, i0]
            weight[e, i0] = _weight(g0, mode, kappa, col_height)
            push = wp.max(gap_rate * wp.min(g0 + gap_offset, zero), -max_push_speed)
            target[e, i0] = vec3(c[e, 3 * i0, 0] + push, c[e, 3 * i0 + 1, 0], c[e, 3 * i0 + 2, 0])
        compliance = wp.diag(vec3(compliance_n, compliance_t, compliance_t))
        step_t = contact_vector()  # the tangential step of every contact (its diagonal block is fixed)
        for i1 in range(NC):
            Gd = _block(G, e, i1, i1) + compliance
            history[e, 0, i1] = _project(-(wp.inverse(Gd) * target[e, i1]), mu)
            r_t1, _disc1 = _tangent_step(Gd, relaxation)
            step_t[i1] = r_t1
        for it in range(iterations):
            for i in range(NC):
                Gii = _block(G, e, i, i) + compliance
                p = history[e, it, i]
                w = target[e, i] + Gii * p
                for j in range(NC):
                    if j < i:
                        w = w + _block(G, e, i, j) * history[e, it + 1, j] * weight[e, j]
                    elif j > i:
                        w = w + _block(G, e, i, j) * history[e, it, j] * weight[e, j]
                if keep_residual != 0:
                    residual[e, it, i] = w
                # normal first, then the tangential pair with the residual updated by the new normal impulse
                pn = wp.max(p[0] - relaxation * w[0] / Gii[0, 0], zero)
                dn = pn - p[0]
                # tangential pair: projected gradient steps on the contact's own 2x2 block, isotropic step
                # 1 / lambda_max(G_tt) so that the fixed point is exactly Coulomb's maximal dissipation
                a11 = Gii[1, 1]
                a22 = Gii[2, 2]
                a12 = Gii[1, 2]
                r_t = step_t[i]
                w1 = w[1] + Gii[1, 0] * dn
                w2 = w[2] + Gii[2, 0] * dn
                t1 = p[1]
                t2 = p[2]
                for _sub in range(TANGENT_STEPS):
                    v1 = w1 + a11 * (t1 - p[1]) + a12 * (t2 - p[2])
                    v2 = w2 + a12 * (t1 - p[1]) + a22 * (t2 - p[2])
                    pt = _project(vec3(pn, t1 - r_t * v1, t2 - r_t * v2), mu)
                    t1 = pt[1]
                    t2 = pt[2]
                history[e, it + 1, i] = _project(vec3(pn, t1, t2), mu)
        for i2 in range(NC):
            applied = history[e, iterations, i2] * weight[e, i2]
            impulse[e, 3 * i2, 0] = applied[0]
            impulse[e, 3 * i2 + 1, 0] = applied[1]
            impulse[e, 3 * i2 + 2, 0] = applied[2]

    @wp.func
    def _project_adjoint(p: vec3, mu: dtype, adj_out: vec3):
        """Adjoint of :func:`_project` at ``p``: (adjoint w.r.t. ``p``, adjoint w.r.t. ``mu``)."""
        adj_p = adj_out
        adj_mu = zero
        if p[0] <= zero:
            adj_p = vec3(zero, zero, zero)
        else:
            tn2 = p[1] * p[1] + p[2] * p[2]
            limit = mu * p[0]
            if tn2 > limit * limit:
                norm = wp.sqrt(tn2)
                u1 = p[1] / norm
                u2 = p[2] / norm
                radial = u1 * adj_out[1] + u2 * adj_out[2]
                scale = limit / norm
                adj_p = vec3(adj_out[0] + mu * radial, scale * (adj_out[1] - u1 * radial),
                             scale * (adj_out[2] - u2 * radial))
                adj_mu = p[0] * radial
        return adj_p, adj_mu

    @wp.kernel(enable_backward=False)
    def projected_gauss_seidel_adjoint(
        G: wp.array3d(dtype=dtype),
        gap: wp.array2d(dtype=dtype),
        friction: wp.array(dtype=dtype),
        mode: int,
        kappa: dtype,
        col_height: dtype,
        iterations: int,
        gap_rate: dtype,
        gap_offset: dtype,
        max_push_speed: dtype,
        compliance_n: dtype,
        compliance_t: dtype,
        relaxation: dtype,
        weight: wp.array2d(dtype=dtype),
        target: wp.array2d(dtype=vec3),
        history: wp.array3d(dtype=vec3),
        residual: wp.array3d(dtype=vec3),
        impulse_grad: wp.array3d(dtype=dtype),
        adj_history: wp.array3d(dtype=vec3),
        adj_target: wp.array2d(dtype=vec3),
        adj_weight: wp.array2d(dtype=dtype),
        G_grad: wp.array3d(dtype=dtype),
        c_grad: wp.array3d(dtype=dtype),
        gap_grad: wp.array2d(dtype=dtype),
        friction_grad: wp.array(dtype=dtype),
    ):
        """Reverse sweep. ``adj_history``, ``adj_target``, ``adj_weight`` are zeroed scratch; the ``*_grad`` arrays
        are accumulated into."""
        e = wp.tid()
        mu = friction[e]
        adj_mu = zero
        compliance = wp.diag(vec3(compliance_n, compliance_t, compliance_t))
        # impulse_i = weight_i * P_i
        for i2 in range(NC):
            a_imp = vec3(impulse_grad[e, 3 * i2, 0], impulse_grad[e, 3 * i2 + 1, 0], impulse_grad[e, 3 * i2 + 2, 0])
            adj_history[e, iterations, i2] = adj_history[e, iterations, i2] + a_imp * weight[e, i2]
            adj_weight[e, i2] = adj_weight[e, i2] + wp.dot(history[e, iterations, i2], a_imp)
        step_t = contact_vector()
        adj_step_t = contact_vector()  # adjoint of each contact's tangential step, summed over the sweeps
        for i3 in range(NC):
            r_t3, _disc3 = _tangent_step(_block(G, e, i3, i3) + compliance, relaxation)
            step_t[i3] = r_t3
        for itr in range(iterations):
            it = iterations - 1 - itr
            for ii in range(NC):
                i = NC - 1 - ii
                # recompute the forward update (it, i)
                Gii = _block(G, e, i, i) + compliance
                p = history[e, it, i]
                w = residual[e, it, i]
                pn_raw = p[0] - relaxation * w[0] / Gii[0, 0]
                pn = wp.max(pn_raw, zero)
                dn = pn - p[0]
                a11 = Gii[1, 1]
                a22 = Gii[2, 2]
                a12 = Gii[1, 2]
                r_t = step_t[i]
                w1 = w[1] + Gii[1, 0] * dn
                w2 = w[2] + Gii[2, 0] * dn
                # tangential sub-steps: inputs t^s kept for the reverse pass
                t1_0 = p[1]
                t2_0 = p[2]
                x0 = vec3(pn, t1_0 - r_t * (w1 + a11 * (t1_0 - p[1]) + a12 * (t2_0 - p[2])),
                          t2_0 - r_t * (w2 + a12 * (t1_0 - p[1]) + a22 * (t2_0 - p[2])))
                y0 = _project(x0, mu)
                t1_1 = y0[1]
                t2_1 = y0[2]
                x1 = vec3(pn, t1_1 - r_t * (w1 + a11 * (t1_1 - p[1]) + a12 * (t2_1 - p[2])),
                          t2_1 - r_t * (w2 + a12 * (t1_1 - p[1]) + a22 * (t2_1 - p[2])))
                y1 = _project(x1, mu)
                t1_2 = y1[1]
                t2_2 = y1[2]
                x2 = vec3(pn, t1_2 - r_t * (w1 + a11 * (t1_2 - p[1]) + a12 * (t2_2 - p[2])),
                          t2_2 - r_t * (w2 + a12 * (t1_2 - p[1]) + a22 * (t2_2 - p[2])))
                y2 = _project(x2, mu)
                z = vec3(pn, y2[1], y2[2])
                # reverse
                adj_z, amu = _project_adjoint(z, mu, adj_history[e, it + 1, i])
                adj_mu += amu
                adj_pn = adj_z[0]
                adj_t1 = adj_z[1]
                adj_t2 = adj_z[2]
                adj_w1 = zero
                adj_w2 = zero
                adj_rt = zero
                adj_a11 = zero
                adj_a22 = zero
                adj_a12 = zero
                adj_p1 = zero
                adj_p2 = zero
                for sub in range(TANGENT_STEPS):
                    s = TANGENT_STEPS - 1 - sub
                    xs = x0
                    ts1 = t1_0
                    ts2 = t2_0
                    if s == 1:
                        xs = x1
                        ts1 = t1_1
                        ts2 = t2_1
                    elif s == 2:
                        xs = x2
                        ts1 = t1_2
                        ts2 = t2_2
                    adj_x, amu_s = _project_adjoint(xs, mu, vec3(zero, adj_t1, adj_t2))
                    adj_mu += amu_s
                    adj_pn += adj_x[0]
                    v1 = w1 + a11 * (ts1 - p[1]) + a12 * (ts2 - p[2])
                    v2 = w2 + a12 * (ts1 - p[1]) + a22 * (ts2 - p[2])
                    adj_v1 = -r_t * adj_x[1]
                    adj_v2 = -r_t * adj_x[2]
                    adj_rt += -(v1 * adj_x[1] + v2 * adj_x[2])
                    adj_w1 += adj_v1
                    adj_w2 += adj_v2
                    adj_a11 += adj_v1 * (ts1 - p[1])
                    adj_a22 += adj_v2 * (ts2 - p[2])
                    adj_a12 += adj_v1 * (ts2 - p[2]) + adj_v2 * (ts1 - p[1])
                    da1 = a11 * adj_v1 + a12 * adj_v2
                    da2 = a12 * adj_v1 + a22 * adj_v2
                    adj_p1 -= da1
                    adj_p2 -= da2
                    adj_t1 = adj_x[1] + da1
                    adj_t2 = adj_x[2] + da2
                adj_p1 += adj_t1
                adj_p2 += adj_t2
                adj_G = mat33()
                # w1 = w[1] + G10 dn, w2 = w[2] + G20 dn
                adj_dn = adj_w1 * Gii[1, 0] + adj_w2 * Gii[2, 0]
                adj_G[1, 0] = adj_G[1, 0] + adj_w1 * dn
                adj_G[2, 0] = adj_G[2, 0] + adj_w2 * dn
                adj_step_t[i] = adj_step_t[i] + adj_rt
                adj_G[1, 1] = adj_G[1, 1] + adj_a11
                adj_G[2, 2] = adj_G[2, 2] + adj_a22
                adj_G[1, 2] = adj_G[1, 2] + adj_a12
                # dn = pn - p0;  pn = max(pn_raw, 0);  pn_raw = p0 - relaxation w0 / G00
                adj_pn += adj_dn
                adj_p0 = -adj_dn
                adj_w = vec3(zero, adj_w1, adj_w2)
                if pn_raw > zero:
                    adj_p0 += adj_pn
                    adj_w = vec3(-relaxation / Gii[0, 0] * adj_pn, adj_w1, adj_w2)
                    adj_G[0, 0] = adj_G[0, 0] + relaxation * w[0] / (Gii[0, 0] * Gii[0, 0]) * adj_pn
                # w = target_i + Gii p + sum_j weight_j G_ij P_j
                adj_target[e, i] = adj_target[e, i] + adj_w
                adj_G = adj_G + wp.outer(adj_w, p)
                _add_block(G_grad, e, i, i, adj_G)
                adj_p = vec3(adj_p0, adj_p1, adj_p2) + wp.transpose(Gii) * adj_w
                adj_history[e, it, i] = adj_history[e, it, i] + adj_p
                for j2 in range(NC):
                    if j2 != i:
                        Gij = _block(G, e, i, j2)
                        pj = history[e, it, j2]
                        if j2 < i:
                            pj = history[e, it + 1, j2]
                        wj = weight[e, j2]
                        _add_block(G_grad, e, i, j2, wp.outer(adj_w, pj) * wj)
                        gt_adj_w = wp.transpose(Gij) * adj_w
                        adj_weight[e, j2] = adj_weight[e, j2] + wp.dot(gt_adj_w, pj)
                        adj_pj = gt_adj_w * wj
                        if j2 < i:
                            adj_history[e, it + 1, j2] = adj_history[e, it + 1, j2] + adj_pj
                        else:
                            adj_history[e, it, j2] = adj_history[e, it, j2] + adj_pj
        # r_t = relaxation / lam, lam = (a11 + a22 + disc) / 2, once per contact
        for i4 in range(NC):
            Gd = _block(G, e, i4, i4) + compliance
            r_t4, disc = _tangent_step(Gd, relaxation)
            adj_lam = -r_t4 * r_t4 / relaxation * adj_step_t[i4]
            adj_d = mat33()
            if disc > dtype(1.0e-12):
                adj_d[1, 1] = half * adj_lam * (one + (Gd[1, 1] - Gd[2, 2]) / disc)
                adj_d[2, 2] = half * adj_lam * (one - (Gd[1, 1] - Gd[2, 2]) / disc)
                adj_d[1, 2] = half * adj_lam * (dtype(4.0) * Gd[1, 2] / disc)
            else:
                adj_d[1, 1] = half * adj_lam
                adj_d[2, 2] = half * adj_lam
            _add_block(G_grad, e, i4, i4, adj_d)
        # initial guess P0_i = proj(-(G_ii + R)^-1 target_i)
        for i1 in range(NC):
            M = _block(G, e, i1, i1) + compliance
            Minv = wp.inverse(M)
            x_init = -(Minv * target[e, i1])
            adj_x, amu_0 = _project_adjoint(x_init, mu, adj_history[e, 0, i1])
            adj_mu += amu_0
            g_vec = wp.transpose(Minv) * adj_x
            adj_target[e, i1] = adj_target[e, i1] - g_vec
            _add_block(G_grad, e, i1, i1, -wp.outer(g_vec, x_init))
        # target_i = c_i + (push(g_i), 0, 0);  weight_i = sigma(g_i)
        for i0 in range(NC):
            a_t = adj_target[e, i0]
            c_grad[e, 3 * i0, 0] = c_grad[e, 3 * i0, 0] + a_t[0]
            c_grad[e, 3 * i0 + 1, 0] = c_grad[e, 3 * i0 + 1, 0] + a_t[1]
            c_grad[e, 3 * i0 + 2, 0] = c_grad[e, 3 * i0 + 2, 0] + a_t[2]
            g0 = gap[e, i0]
            adj_g = zero
            inner = gap_rate * wp.min(g0 + gap_offset, zero)
            if inner > -max_push_speed and g0 + gap_offset < zero:
                adj_g += a_t[0] * gap_rate
            if mode != 1 and g0 <= col_height:
                arg = kappa * g0
                if arg > dtype(-100.0) and arg < dtype(50.0):
                    sigma = weight[e, i0]
                    adj_g += adj_weight[e, i0] * (-kappa * sigma * (one - sigma))
            gap_grad[e, i0] = gap_grad[e, i0] + adj_g
        friction_grad[e] = friction_grad[e] + adj_mu

    return projected_gauss_seidel, projected_gauss_seidel_adjoint


def projected_gauss_seidel(model, params, dt: float, G, c, gap, weight, target, history, residual, impulse,
                           tape: wp.Tape | None = None) -> None:
    """Contact impulses [N, 3F, 1] (see :mod:`.contact`); records the reverse sweep on ``tape`` when given.

    ``history`` [N, iterations + 1, F] receives every iterate; with a ``tape``, ``residual`` [N, iterations, F]
    receives the residual of every contact update (both kept for the reverse sweep)."""
    dtype = model.dtype
    N, F = model.num_envs, model.num_feet
    forward, adjoint = gauss_seidel_kernels(dtype, F)
    weight_mode, gap_rate, gap_offset, max_push, compliance_n, compliance_t = params.solver_terms(dt)
    scalars = [weight_mode, dtype(params.kappa), dtype(params.col_height), int(params.iterations), dtype(gap_rate),
               dtype(gap_offset), dtype(max_push), dtype(compliance_n), dtype(compliance_t),
               dtype(params.relaxation)]
    vec3 = warp_types(dtype).vec3
    wp.launch(forward, dim=N, inputs=[G, c, gap, model.friction, *scalars, weight, target, history, impulse,
                                      residual, int(tape is not None)], device=model.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        impulse_grad = output_grad("projected_gauss_seidel", "impulse", impulse)
        adj_history = scratch_array("gauss_seidel.adj_history", history.shape, vec3, model.device)
        adj_target = scratch_array("gauss_seidel.adj_target", (N, F), vec3, model.device)
        adj_weight = scratch_array("gauss_seidel.adj_weight", (N, F), dtype, model.device)

        def grad_of(array):  # the kernel adds into every one: a stand-in for an input nobody differentiates
            return input_grad("projected_gauss_seidel", array)[0]

        wp.launch(adjoint, dim=N, inputs=[
            G, gap, model.friction, *scalars, weight, target, history, residual, impulse_grad, adj_history, adj_target,
            adj_weight, grad_of(G), grad_of(c), grad_of(gap), grad_of(model.friction)], device=model.device, record_tape=False)

    tape.record_func(backward=backward, arrays=[])
