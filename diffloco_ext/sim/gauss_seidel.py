"""Stage: projected Gauss-Seidel on the contact impulses and the contact forces, with a hand-written reverse sweep.

The modes (smoothed, hard, soft) are described in :mod:`.contact`. The solve, for contact ``i`` with free
contact-point velocity ``c_i`` (normal, tangent 1, tangent 2; m/s) and weight ``sigma_i``:

* target ``c_i + (push_i, 0, 0)``: hard mode's stabilisation ``push = max(rate * min(g + slop, 0), -max_push)``
  (``rate = stabilization / dt``); soft mode's spring pull ``k_p g / (k_p dt + k_d)``; compliance
  ``R = diag(R_n, R_t, R_t)`` on each diagonal block (soft: ``R_n = 1 / (dt (k_p dt + k_d))``,
  ``R_t = 1 / (dt k_f)``; zero otherwise);
* ``P_i`` (N·s, normal positive when pushing) starts at ``proj(-(G_ii + R)^-1 target_i)``; each of the fixed
  ``iterations`` sweeps (default 10) updates, contact by contact, first the normal impulse by an exact scalar
  Gauss-Seidel step on the residual ``w_i = target_i + sum_j sigma_j G_ij P_j`` (contact ``i``'s own block
  unweighted), then the tangential pair by three projected-gradient steps on the contact's own 2x2 block with the
  isotropic step ``relaxation / lambda_max(G_tt)``, using Schwarke et al.'s (arXiv 2404.02887) projection
  (``P_n <= 0 -> P_i = 0``; ``|P_t| > mu P_n -> P_t`` scaled to ``mu P_n``). The isotropic step makes the fixed point
  exactly Coulomb's law (a block sliding on an incline accelerates at ``g (sin - mu cos)`` to 1e-6); updating normal and
  tangents one after the other converges much faster than one step on the 3-vector (a standing ANYmal drifts 27 µm in
  8 s with 10 sweeps instead of 1 mm);
* smoothed mode's ``sigma_i = 1 / (1 + exp(kappa_e g_i))`` with env ``e``'s own sharpness ``kappa_e = kappa x
  model.contact_kappa_scale[e]`` (1 unless a task randomises it);
* an env with ``model.contact_soft_stiffness[e] = k > 0`` stands on a soft ground whatever the mode: soft mode's
  spring pull, compliance and weight with ``k_p = k`` (``soft_damping``, ``soft_friction_damping`` from the
  settings), so one batch mixes grounds (0, the default: the mode's own contact);
* after the sweeps ``P_i <- sigma_i P_i``, and the mean force over the step ``f_i = frame_i P_i / dt`` (world, N).

Every iterate is written once into ``history`` [N, iterations + 1, F] (and, when taped, every residual into
``residual``); the backward pass walks the sweeps in reverse over these stored values, recomputing each contact
update's intermediates and applying the chain rule by hand (the derivatives of the projection, the tangential
sub-steps, the step sizes and the residual). Warp's automatic adjoint of the same loop was exact but took 8x the
forward time; this one is checked against float64 central finite differences, alone
(``tests/sim/test_gauss_seidel_adjoint.py``, also at ``relaxation != 1`` in ``test_stages.py``) and through whole
steps (``tests/sim/test_contact_gradients.py``).

Where the forward map has a kink (the projection's case switches, ``max``, the clamped sigmoid argument), the
reverse sweep takes the derivative of the branch the forward pass took, as automatic differentiation would.
"""

import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch_stage
from .contact import ContactGeometryData
from .contact_velocity import ContactVelocityData
from .coordinates import contact_funcs, contact_row
from .delassus import DelassusData
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import warp_struct, warp_types

#: Projected-gradient steps on a contact's tangential pair per contact update.
TANGENT_STEPS = 3


@dataclass
class GaussSeidelData(StageData):
    """The contact solve of one step. The weights', targets' and iterates' gradient arrays are the reverse
    sweep's working memory."""

    weight: wp.array = intermediate(lambda s: (s.N, s.F), doc="smoothing weight / contact state")
    target: wp.array = intermediate(lambda s: (s.N, s.F), "vec3", doc="free contact velocity with stabilisation (m/s)")
    history: wp.array = intermediate(lambda s: (s.N, s.I + 1, s.F), "vec3", doc="PGS iterates (N s)")
    residual: wp.array = intermediate(lambda s: (s.N, s.I, s.F), "vec3", values_only=True,
                                      doc="PGS residuals (written when taped)")
    impulse: wp.array = intermediate(lambda s: (s.N, s.C, 1), doc="impulses in the contact frames (N s)")
    force: wp.array = intermediate(lambda s: (s.N, s.F), "vec3",
                                   doc="mean contact force on each foot over the step, world frame (N)")


@dataclass
class GaussSeidelInputs(StageInputs):
    """What the contact solve reads."""

    geometry: ContactGeometryData = stage_input(group=ContactGeometryData)
    velocity: ContactVelocityData = stage_input(group=ContactVelocityData)
    delassus: DelassusData = stage_input(group=DelassusData)


@functools.cache
def solver_settings_type(dtype) -> type:
    """The Warp struct of the solver's scalar settings (:func:`solver_settings`)."""
    return warp_struct(f"SolverSettings{'64' if dtype == wp.float64 else '32'}", __name__, dict(
        mode=wp.int32, kappa=dtype, col_height=dtype, iterations=wp.int32, gap_rate=dtype, gap_offset=dtype,
        max_push_speed=dtype, compliance_n=dtype, compliance_t=dtype, relaxation=dtype, inv_dt=dtype,
        keep_residual=wp.int32, soft_damping=dtype, soft_friction_damping=dtype, surrogate_kappa=dtype,
        smooth_soft_grounds=wp.int32))


_SETTINGS: dict[tuple, object] = {}


def solver_settings(params, dt: float, dtype, keep_residual: bool):
    """The solver's settings for contact settings ``params`` (:class:`~.contact.ContactParams`) at time step
    ``dt`` as a Warp struct (built once per distinct setting): weight mode (0 sigmoid, 1 step), ``kappa`` (1/m),
    ``col_height`` (m), iterations, gap rate (1/s) and offset (m) of the stabilisation, its push cap (m/s), normal
    and tangential compliance (s/kg), relaxation, ``1 / dt`` (1/s), whether the residuals are kept (taped
    steps), soft contact's damping and friction damping (N s/m) for the envs on a soft ground
    (``model.contact_soft_stiffness``), hard contact's surrogate sharpness (1/m; 0 in the other modes), and whether
    the soft grounds keep the smoothed weight (smoothed mode only)."""
    mode, gap_rate, gap_offset, max_push, compliance_n, compliance_t = params.solver_terms(dt)
    values = dict(mode=mode, kappa=params.kappa, col_height=params.col_height, iterations=params.iterations,
                  gap_rate=gap_rate, gap_offset=gap_offset, max_push_speed=max_push, compliance_n=compliance_n,
                  compliance_t=compliance_t, relaxation=params.relaxation, inv_dt=1.0 / dt,
                  keep_residual=int(keep_residual), soft_damping=params.soft_damping,
                  soft_friction_damping=params.soft_friction_damping,
                  surrogate_kappa=params.surrogate_kappa if params.mode == "hard" else 0.0,
                  smooth_soft_grounds=int(params.smooth_soft_grounds and params.mode == "smoothed"))
    key = (dtype, *values.values())
    settings = _SETTINGS.get(key)
    if settings is None:
        if len(_SETTINGS) > 64:
            _SETTINGS.clear()
        settings = _SETTINGS[key] = solver_settings_type(dtype)()
        for name, value in values.items():
            setattr(settings, name, value)
    return settings


@functools.cache
def gauss_seidel_kernels(dtype, num_contacts: int):
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33
    NC = num_contacts
    contact_vector = wp.types.vector(NC, dtype)
    substep_points = wp.types.matrix(shape=(TANGENT_STEPS, 3), dtype=dtype)  # row s: substep s's unprojected point
    substep_pairs = wp.types.matrix(shape=(TANGENT_STEPS, 2), dtype=dtype)  # row s: the pair substep s starts from
    zero = dtype(0.0)
    one = dtype(1.0)
    half = dtype(0.5)
    T = kernel_types(dtype)
    In = GaussSeidelInputs.struct_type(dtype)
    _contact_vector = contact_funcs(dtype)[1]

    @wp.func
    def _block(G: wp.array3d(dtype=dtype), e: int, i: int, j: int):
        """3x3 block ``(i, j)`` of the [N, 3F, 3F] Delassus matrix."""
        ri = contact_row(i, 0)
        rj = contact_row(j, 0)
        return mat33(
            G[e, ri, rj], G[e, ri, rj + 1], G[e, ri, rj + 2],
            G[e, ri + 1, rj], G[e, ri + 1, rj + 1], G[e, ri + 1, rj + 2],
            G[e, ri + 2, rj], G[e, ri + 2, rj + 1], G[e, ri + 2, rj + 2],
        )

    @wp.func
    def _add_block(G_grad: wp.array3d(dtype=dtype), e: int, i: int, j: int, m: mat33):
        for r in range(3):
            for c in range(3):
                G_grad[e, contact_row(i, r), contact_row(j, c)] = G_grad[e, contact_row(i, r), contact_row(j, c)] + (
                    m[r, c])
        return 0

    @wp.func
    def _project(p: vec3, mu: dtype):
        """Schwarke et al.'s proximal projection: no pull; tangential impulse scaled into the friction cone."""
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
    def _tangent_substep(Gii: mat33, w1: dtype, w2: dtype, p: vec3, pn: dtype, r_t: dtype, t1: dtype, t2: dtype):
        """The point one projected-gradient step on the tangential pair ``(t1, t2)`` reaches before its
        projection: ``(pn, t - r_t v)``, ``v = w_t + G_tt (t - p_t)`` the tangential residual at ``t``."""
        v1 = w1 + Gii[1, 1] * (t1 - p[1]) + Gii[1, 2] * (t2 - p[2])
        v2 = w2 + Gii[1, 2] * (t1 - p[1]) + Gii[2, 2] * (t2 - p[2])
        return vec3(pn, t1 - r_t * v1, t2 - r_t * v2)

    @wp.func
    def _weight(g: dtype, mode: int, kappa: dtype, col_height: dtype):
        w = zero
        if mode == 1:
            if g <= zero:
                w = one
        elif g <= col_height:
            w = one / (one + wp.exp(wp.clamp(kappa * g, dtype(-100.0), dtype(50.0))))
        return w

    @wp.func
    def _env_terms(settings: T.Settings, stiffness: dtype):
        """Env terms: (weight mode, gap rate, gap offset, max push, normal and tangential compliance): the
        settings' own, or soft contact's with spring ``stiffness`` (N/m) for an env on a soft ground (> 0): the
        terms of ``ContactParams.solver_terms`` in soft mode (the tests check the two solves agree), with the
        smoothed mode's weight instead of the step if ``smooth_soft_grounds``."""
        if stiffness > zero:
            dt = one / settings.inv_dt
            denom = stiffness * dt + settings.soft_damping
            mode = 1  # soft contact's step weight, or the smoothed mode's sigmoid (``smooth_soft_grounds``)
            if settings.smooth_soft_grounds != 0:
                mode = settings.mode
            return (mode, stiffness / denom, zero, dtype(1.0e30), one / (dt * denom),
                    one / (dt * settings.soft_friction_damping))
        return (settings.mode, settings.gap_rate, settings.gap_offset, settings.max_push_speed,
                settings.compliance_n, settings.compliance_t)

    @wp.kernel(enable_backward=False)
    def projected_gauss_seidel(model: T.Model, inputs: In, outputs: T.Solution, settings: T.Settings):
        """Impulses per contact, then the contact forces: ``history`` [N, iterations + 1, F] holds every iterate
        (written once).

        ``target`` [N, F] is each contact's free velocity plus ``max(gap_rate * min(g + gap_offset, 0), -max_push)``
        on the normal. The compliance ``R = diag(compliance_n, compliance_t, compliance_t)`` is added to each
        diagonal block.
        """
        e = wp.tid()
        G = inputs.delassus.G
        weight = outputs.weight
        target = outputs.target
        history = outputs.history
        relaxation = settings.relaxation
        mu = model.friction[e]
        mode, gap_rate, gap_offset, max_push, comp_n, comp_t = _env_terms(settings, model.contact_soft_stiffness[e])
        kappa = settings.kappa * model.contact_kappa_scale[e]  # the env's own sharpness (1/m)
        for i0 in range(NC):
            g0 = inputs.geometry.gap[e, i0]
            weight[e, i0] = _weight(g0, mode, kappa, settings.col_height)
            push = wp.max(gap_rate * wp.min(g0 + gap_offset, zero), -max_push)
            target[e, i0] = _contact_vector(inputs.velocity.c, e, i0) + vec3(push, zero, zero)
        compliance = wp.diag(vec3(comp_n, comp_t, comp_t))
        step_t = contact_vector()  # the tangential step of every contact (its diagonal block is fixed)
        for i1 in range(NC):
            Gd = _block(G, e, i1, i1) + compliance
            history[e, 0, i1] = _project(-(wp.inverse(Gd) * target[e, i1]), mu)
            r_t1, _disc1 = _tangent_step(Gd, relaxation)
            step_t[i1] = r_t1
        for it in range(settings.iterations):
            for i in range(NC):
                Gii = _block(G, e, i, i) + compliance
                p = history[e, it, i]
                w = target[e, i] + Gii * p
                for j in range(NC):
                    if j < i:
                        w = w + _block(G, e, i, j) * history[e, it + 1, j] * weight[e, j]
                    elif j > i:
                        w = w + _block(G, e, i, j) * history[e, it, j] * weight[e, j]
                if settings.keep_residual != 0:
                    outputs.residual[e, it, i] = w
                # normal first, then the tangential pair with the residual updated by the new normal impulse
                pn = wp.max(p[0] - relaxation * w[0] / Gii[0, 0], zero)
                dn = pn - p[0]
                # tangential pair: projected gradient steps on the contact's own 2x2 block, isotropic step
                # 1 / lambda_max(G_tt) so that the fixed point is exactly Coulomb's maximal dissipation
                r_t = step_t[i]
                w1 = w[1] + Gii[1, 0] * dn
                w2 = w[2] + Gii[2, 0] * dn
                t1 = p[1]
                t2 = p[2]
                for _sub in range(TANGENT_STEPS):
                    pt = _project(_tangent_substep(Gii, w1, w2, p, pn, r_t, t1, t2), mu)
                    t1 = pt[1]
                    t2 = pt[2]
                history[e, it + 1, i] = _project(vec3(pn, t1, t2), mu)
        for i2 in range(NC):
            applied = history[e, settings.iterations, i2] * weight[e, i2]
            force = vec3()
            for r in range(3):
                outputs.impulse[e, contact_row(i2, r), 0] = applied[r]
                force = force + inputs.geometry.frame[e, i2, r] * applied[r]
            outputs.force[e, i2] = force * settings.inv_dt

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
    def projected_gauss_seidel_adjoint(model: T.Model, inputs: In, outputs: T.Solution, settings: T.Settings,
                                       inputs_grad: In, outputs_grad: T.Solution, params_grad: T.Params):
        """Reverse of the forces, then the reverse sweep over the stored iterates and residuals. ``outputs_grad``
        arrives with the adjoints of the impulses and forces; its weights', targets' and iterates' are zeroed
        working memory. ``inputs_grad`` and ``params_grad`` are accumulated into."""
        e = wp.tid()
        G = inputs.delassus.G
        G_grad = inputs_grad.delassus.G
        weight = outputs.weight
        target = outputs.target
        history = outputs.history
        residual = outputs.residual
        adj_history = outputs_grad.history
        adj_target = outputs_grad.target
        adj_weight = outputs_grad.weight
        relaxation = settings.relaxation
        iterations = settings.iterations
        mu = model.friction[e]
        adj_mu = zero
        mode, gap_rate, gap_offset, max_push, comp_n, comp_t = _env_terms(settings, model.contact_soft_stiffness[e])
        compliance = wp.diag(vec3(comp_n, comp_t, comp_t))
        # force_i = sum_r frame_ir impulse_ir / dt;  impulse_i = weight_i * P_i
        for i2 in range(NC):
            g_force = outputs_grad.force[e, i2] * settings.inv_dt
            applied = history[e, iterations, i2] * weight[e, i2]
            a_imp = _contact_vector(outputs_grad.impulse, e, i2)
            for r in range(3):
                a_imp[r] = a_imp[r] + wp.dot(inputs.geometry.frame[e, i2, r], g_force)
                inputs_grad.geometry.frame[e, i2, r] = inputs_grad.geometry.frame[e, i2, r] + g_force * applied[r]
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
                # tangential sub-steps: the pair each starts from and the point it projects, kept for the reverse
                points = substep_points()
                pairs = substep_pairs()
                t1 = p[1]
                t2 = p[2]
                for sub in range(TANGENT_STEPS):
                    x = _tangent_substep(Gii, w1, w2, p, pn, r_t, t1, t2)
                    pairs[sub, 0] = t1
                    pairs[sub, 1] = t2
                    points[sub] = x
                    y = _project(x, mu)
                    t1 = y[1]
                    t2 = y[2]
                # reverse
                adj_z, amu = _project_adjoint(vec3(pn, t1, t2), mu, adj_history[e, it + 1, i])
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
                for sub_r in range(TANGENT_STEPS):
                    s = TANGENT_STEPS - 1 - sub_r
                    xs = points[s]
                    ts1 = pairs[s, 0]
                    ts2 = pairs[s, 1]
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
        kappa = settings.kappa * model.contact_kappa_scale[e]
        surrogate = zero  # hard contact's surrogate sharpness (1/m), not on a soft ground
        if model.contact_soft_stiffness[e] == zero:
            surrogate = settings.surrogate_kappa
        for i0 in range(NC):
            a_t = adj_target[e, i0]
            for r in range(3):
                row = contact_row(i0, r)
                inputs_grad.velocity.c[e, row, 0] = inputs_grad.velocity.c[e, row, 0] + a_t[r]
            g0 = inputs.geometry.gap[e, i0]
            adj_g = zero
            inner = gap_rate * wp.min(g0 + gap_offset, zero)
            if inner > -max_push and g0 + gap_offset < zero:
                adj_g += a_t[0] * gap_rate
            if mode != 1 and g0 <= settings.col_height:
                arg = kappa * g0
                if arg > dtype(-100.0) and arg < dtype(50.0):
                    sigma = weight[e, i0]
                    adj_g += adj_weight[e, i0] * (-kappa * sigma * (one - sigma))
            elif surrogate > zero and g0 <= settings.col_height:
                # hard contact's surrogate: the weight step(g) differentiated as sigma(surrogate g)
                arg = surrogate * g0
                if arg > dtype(-100.0) and arg < dtype(50.0):
                    sigma = one / (one + wp.exp(arg))
                    adj_g += adj_weight[e, i0] * (-surrogate * sigma * (one - sigma))
            inputs_grad.geometry.gap[e, i0] = inputs_grad.geometry.gap[e, i0] + adj_g
        params_grad.friction[e] = params_grad.friction[e] + adj_mu

    return projected_gauss_seidel, projected_gauss_seidel_adjoint


def projected_gauss_seidel(model, params, dt: float, geometry, velocity, delassus, solution: GaussSeidelData,
                           tape: wp.Tape | None = None) -> None:
    """Contact impulses ``solution.impulse`` [N, 3F, 1] and forces ``solution.force`` [N, F] vec3 (world, N; the
    mean over the step) for contact settings ``params`` (:class:`~.contact.ContactParams`) at time step ``dt``,
    from the gaps and frames of ``geometry``, the contact-point velocities ``c`` of ``velocity`` and the Delassus
    matrix of ``delassus`` (see the module docstring); records the reverse sweep on ``tape`` when given.
    ``solution.history`` [N, iterations + 1, F] receives every iterate; with a ``tape``, ``solution.residual``
    [N, iterations, F] receives the residual of every contact update (both kept for the reverse sweep)."""
    forward, adjoint = gauss_seidel_kernels(model.dtype, model.num_feet)
    settings = solver_settings(params, dt, model.dtype, keep_residual=tape is not None)
    launch_stage("projected_gauss_seidel", model, [forward], adjoint,
                 GaussSeidelInputs(geometry=geometry, velocity=velocity, delassus=delassus), solution, tape,
                 extra_inputs=[settings], extra_grads=lambda: [model.parameter_grads("projected_gauss_seidel")])
