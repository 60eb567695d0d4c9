"""The hand-written reverse sweep of the projected Gauss-Seidel solve against float64 central differences.

Random Delassus matrices, free velocities, gaps and friction coefficients chosen so that contacts stick, slide
(cone projection active) and separate; every contact mode; gradients w.r.t. G, c, the gaps and mu.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import warp as wp

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import build_model
from diffloco_ext.sim.contact import ContactGeometryData, ContactParams
from diffloco_ext.sim.contact_velocity import ContactVelocityData
from diffloco_ext.sim.delassus import DelassusData
from diffloco_ext.sim.gauss_seidel import GaussSeidelData, projected_gauss_seidel
from diffloco_ext.sim.stage_data import Sizes

N, F = 6, 4
C = 3 * F


def problem(rng):
    A = rng.normal(size=(N, C, C))
    G = np.einsum("eij,ekj->eik", A, A) / C + 0.2 * np.eye(C)
    c = rng.normal(scale=0.5, size=(N, C, 1))
    c[:, 0::3, 0] -= 0.3  # mostly approaching: contacts push
    gap = rng.uniform(-0.01, 0.006, size=(N, F))
    mu = rng.uniform(0.2, 1.0, size=N)
    return G, c, gap, mu


@functools.cache
def _model(grad: bool):
    """An ANYmal D model (four feet) whose friction the problems set; with ``grad``, its parameters take gradients."""
    return build_model(get_robot("anymal_d"), N, dtype="float64", requires_grad=grad)


def solve(params, G, c, gap, mu, weights, tape=None, kappa_scale=None, soft_stiffness=None):
    """The solve stage on the given Delassus matrices, contact-point velocities, gaps and friction coefficients
    (and per-env factors on kappa, default 1, and per-env soft grounds' spring stiffness, default 0: none)."""
    grad = tape is not None
    model = _model(grad)
    model.friction.assign(mu)
    model.contact_kappa_scale.assign(np.ones(N) if kappa_scale is None else kappa_scale)
    model.contact_soft_stiffness.assign(np.zeros(N) if soft_stiffness is None else soft_stiffness)
    if grad:
        model.friction.grad.zero_()
    sizes = Sizes.of(model, params)
    geometry, velocity, delassus, solution = (group.allocate(model, sizes, requires_grad=grad) for group in (
        ContactGeometryData, ContactVelocityData, DelassusData, GaussSeidelData))
    geometry.gap.assign(gap)
    geometry.frame.assign(np.broadcast_to(np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
                                          (N, F, 3, 3)).copy())  # flat ground's frames (the forces read them)
    velocity.c.assign(c)
    delassus.G.assign(G)
    projected_gauss_seidel(model, params, 0.005, geometry, velocity, delassus, solution, tape)
    value = float((solution.impulse.numpy() * weights).sum())
    arrays = dict(G=delassus.G, c=velocity.c, gap=geometry.gap)
    return value, arrays, model, dict(impulse=solution.impulse, history=solution.history)


def central_differences(x: np.ndarray, idx: np.ndarray, loss, eps: float = 1e-7) -> np.ndarray:
    """Central differences of ``loss()`` w.r.t. the entries ``idx`` of the flattened array ``x`` (changed in place
    and restored)."""
    flat = x.reshape(-1)
    fd = []
    for i in idx:
        old = flat[i]
        flat[i] = old + eps
        plus = loss()
        flat[i] = old - eps
        minus = loss()
        flat[i] = old
        fd.append((plus - minus) / (2 * eps))
    return np.array(fd)


@pytest.mark.parametrize("iterations", [10, 2])  # 2: far from converged, so the step sizes matter too
@pytest.mark.parametrize("mode", ["smoothed", "hard", "soft", "smoothed-per-env-kappa", "smoothed-soft-grounds",
                                  "hard-soft-grounds", "smoothed-smooth-soft-grounds"])
def test_reverse_sweep_matches_finite_differences(mode, iterations):
    rng = np.random.default_rng(3)
    G, c, gap, mu = problem(rng)
    # per-env kappa: every env's sharpness scaled by its own factor (0.4-2.5: kappa 120-750 1/m)
    kappa_scale = np.exp(rng.uniform(np.log(0.4), np.log(2.5), size=N)) if mode.endswith("kappa") else None
    # half the envs on soft grounds of their own stiffness, the others in the mode's contact
    soft_stiffness = (np.array([0.0, 1e4, 0.0, 3e4, 0.0, 8e4]) if mode.endswith("grounds") else None)
    smooth_soft = "smooth-soft" in mode  # the soft grounds keep the sigmoid's weight
    mode = mode.split("-")[0]
    params = ContactParams(mode=mode, kappa=300.0, iterations=iterations, smooth_soft_grounds=smooth_soft)
    weights = rng.normal(size=(N, C, 1))
    tape = wp.Tape()
    _, arrays, model, out = solve(params, G, c, gap, mu, weights, tape, kappa_scale, soft_stiffness)
    impulse = out["impulse"]
    assert np.abs(impulse.numpy()).max() > 0
    tape.backward(grads={impulse: wp.array(weights, dtype=wp.float64)})
    analytic = {"G": arrays["G"].grad.numpy(), "c": arrays["c"].grad.numpy(), "gap": arrays["gap"].grad.numpy(),
                "mu": model.friction.grad.numpy()}
    # the problem exercises sliding: some tangential impulse sits on the cone
    hist = out["history"].numpy()[:, -1]
    on_cone = np.abs(np.linalg.norm(hist[..., 1:], axis=-1) - mu[:, None] * hist[..., 0]) < 1e-9
    assert on_cone[hist[..., 0] > 0].any()
    inputs = {"G": G, "c": c, "gap": gap, "mu": mu}
    for name, x in inputs.items():
        idx = rng.choice(x.size, size=min(40, x.size), replace=False)
        fd = central_differences(x, idx, lambda: solve(params, G, c, gap, mu, weights, kappa_scale=kappa_scale,
                                                        soft_stiffness=soft_stiffness)[0])
        got = analytic[name].reshape(-1)[idx]
        scale = max(np.abs(fd).max(), 1e-8)
        assert np.abs(got - fd).max() <= 1e-5 * scale + 1e-9, \
            f"{mode}/{name}: {np.abs(got - fd).max():.2e} vs {scale:.2e}"


def test_per_env_kappa_scale_is_that_envs_kappa():
    """An env's ``contact_kappa_scale`` s gives the smoothed solve of ``kappa * s``: each env's impulses equal those
    of a solve at its own kappa, and hard contact ignores the factor."""
    rng = np.random.default_rng(5)
    G, c, gap, mu = problem(rng)
    weights = np.ones((N, C, 1))
    scale = np.array([0.5, 1.0, 2.0, 0.33, 3.0, 1.5])
    _, _, _, out = solve(ContactParams("smoothed", kappa=300.0), G, c, gap, mu, weights, kappa_scale=scale)
    scaled = out["impulse"].numpy().copy()
    for e, s in enumerate(scale):
        _, _, _, ref = solve(ContactParams("smoothed", kappa=300.0 * s), G, c, gap, mu, weights)
        np.testing.assert_allclose(scaled[e], ref["impulse"].numpy()[e], rtol=1e-12, atol=1e-14)
    assert np.abs(scaled - solve(ContactParams("smoothed"), G, c, gap, mu, weights)[3]["impulse"].numpy()).max() > 1e-4
    _, _, _, hard = solve(ContactParams("hard"), G, c, gap, mu, weights, kappa_scale=scale)
    _, _, _, hard1 = solve(ContactParams("hard"), G, c, gap, mu, weights)
    np.testing.assert_array_equal(hard["impulse"].numpy(), hard1["impulse"].numpy())


@pytest.mark.parametrize("mode", ["smoothed", "hard"])
def test_an_env_on_a_soft_ground_solves_as_soft_contact(mode):
    """``contact_soft_stiffness`` k > 0 puts an env on soft contact's ground with ``k_p = k``, whatever the mode:
    its impulses equal a soft-mode solve's with that stiffness, and the other envs' equal the mode's own."""
    rng = np.random.default_rng(7)
    G, c, gap, mu = problem(rng)
    weights = np.ones((N, C, 1))
    k = np.array([0.0, 1e4, 0.0, 3e4, 0.0, 8e4])
    mixed = solve(ContactParams(mode), G, c, gap, mu, weights, soft_stiffness=k)[3]["impulse"].numpy().copy()
    own = solve(ContactParams(mode), G, c, gap, mu, weights)[3]["impulse"].numpy().copy()
    for e in range(N):
        if k[e] == 0:
            np.testing.assert_array_equal(mixed[e], own[e])
        else:
            ref = solve(ContactParams("soft", soft_stiffness=k[e]), G, c, gap, mu, weights)[3]["impulse"].numpy()
            np.testing.assert_allclose(mixed[e], ref[e], rtol=1e-12, atol=1e-14)
            assert np.abs(mixed[e] - own[e]).max() > 1e-4


def _sigmoid_slope(kappa: float, gap: np.ndarray) -> np.ndarray:
    """d sigma / d g of ``sigma(g) = 1 / (1 + exp(kappa g))`` (1/m)."""
    s = 1.0 / (1.0 + np.exp(kappa * gap))
    return -kappa * s * (1.0 - s)


def test_hard_contacts_surrogate_is_hard_forward_with_a_sigmoids_weight_derivative():
    """``surrogate_kappa`` k leaves hard contact's solve as it is and changes only the gap's gradient through the
    weight: ``dL/dg = (dL/dw) sigma_k'(g)``. The reference for ``dL/dw``: a smoothed solve so sharp (kappa 1e4 at
    gaps of +-2.5 mm, ``|kappa g| = 25``) that its weights are hard contact's to 1e-11, whose gap gradient is
    ``(dL/dw) sigma'`` with its own slope; hard contact without stabilisation, so that the gap enters only there.
    Soft contact and the envs of a soft ground ignore the setting."""
    rng = np.random.default_rng(11)
    G, c, _, mu = problem(rng)
    gap = rng.choice([-2.5e-3, 2.5e-3], size=(N, F))
    gap[:, 0] = 2.5e-3  # some feet above the ground whose impulse would push (approaching)
    weights = rng.normal(size=(N, C, 1))

    def gradients(params, soft_stiffness=None):
        tape = wp.Tape()
        _, arrays, model, out = solve(params, G, c, gap, mu, weights, tape, soft_stiffness=soft_stiffness)
        impulse = out["impulse"].numpy().copy()
        tape.backward(grads={out["impulse"]: wp.array(weights, dtype=wp.float64)})
        return impulse, {name: a.grad.numpy().copy() for name, a in arrays.items()} | {
            "mu": model.friction.grad.numpy().copy()}

    sharp, sharp_grad = gradients(ContactParams("smoothed", kappa=1e4))
    exact, exact_grad = gradients(ContactParams("hard", stabilization=0.0))
    surrogate, surrogate_grad = gradients(ContactParams("hard", stabilization=0.0, surrogate_kappa=300.0))
    np.testing.assert_array_equal(surrogate, exact)  # the forward is hard contact's
    np.testing.assert_allclose(sharp, exact, rtol=1e-8, atol=1e-10)
    assert np.abs(exact_grad["gap"]).max() == 0.0  # no stabilisation: hard contact's gap has no gradient
    dL_dw = sharp_grad["gap"] / _sigmoid_slope(1e4, gap)
    assert np.abs(dL_dw).max() > 1e-3  # the weights matter to the loss
    np.testing.assert_allclose(surrogate_grad["gap"], dL_dw * _sigmoid_slope(300.0, gap), rtol=1e-6, atol=1e-12)
    for name in ("G", "c", "mu"):  # the rest of the reverse sweep is hard contact's
        np.testing.assert_array_equal(surrogate_grad[name], exact_grad[name])
    # with the stabilisation (the default): the exact gradient plus the weight's term
    exact_s = gradients(ContactParams("hard"))[1]["gap"]
    surrogate_s = gradients(ContactParams("hard", surrogate_kappa=300.0))[1]["gap"]
    assert np.abs(surrogate_s - exact_s).max() > 1e-3
    # ignored by soft contact and by the envs of a soft ground
    soft = gradients(ContactParams("soft"))[1]["gap"]
    np.testing.assert_array_equal(gradients(ContactParams("soft", surrogate_kappa=300.0))[1]["gap"], soft)
    k = np.array([0.0, 1e4, 0.0, 3e4, 0.0, 8e4])
    mixed = gradients(ContactParams("hard", stabilization=0.0, surrogate_kappa=300.0), soft_stiffness=k)[1]["gap"]
    mixed_exact = gradients(ContactParams("hard", stabilization=0.0), soft_stiffness=k)[1]["gap"]
    np.testing.assert_array_equal(mixed[k > 0], mixed_exact[k > 0])
    np.testing.assert_allclose(mixed[k == 0], surrogate_grad["gap"][k == 0], rtol=1e-12, atol=1e-15)


def test_smooth_soft_grounds_keep_the_sigmoids_weight_on_the_spring():
    """``smooth_soft_grounds``: an env on a soft ground solves soft contact's spring with the smoothed weight
    ``sigma(kappa g)`` instead of the step. With kappa so sharp (1e4 at gaps of +-2.5 mm) that the sigmoid is the
    step to 1e-11, that is soft contact's solve; at kappa 300 it is not (the feet near the ground push less, the
    approaching ones above it push); the envs off a soft ground are the smoothed mode's, and hard mode ignores it."""
    rng = np.random.default_rng(13)
    G, c, _, mu = problem(rng)
    gap = rng.choice([-2.5e-3, 2.5e-3], size=(N, F))
    weights = np.ones((N, C, 1))
    k = np.array([0.0, 1e4, 0.0, 3e4, 0.0, 8e4])
    soft = k > 0

    def impulses(params, stiffness=k):
        return solve(params, G, c, gap, mu, weights, soft_stiffness=stiffness)[3]["impulse"].numpy().copy()

    sharp = impulses(ContactParams("smoothed", kappa=1e4, smooth_soft_grounds=True))
    for e in np.flatnonzero(soft):
        ref = impulses(ContactParams("soft", soft_stiffness=k[e]), None)
        np.testing.assert_allclose(sharp[e], ref[e], rtol=1e-8, atol=1e-10)
    smooth = impulses(ContactParams("smoothed", smooth_soft_grounds=True))
    step = impulses(ContactParams("smoothed"))
    assert np.abs(smooth[soft] - step[soft]).max() > 1e-3
    np.testing.assert_array_equal(smooth[~soft], step[~soft])
    np.testing.assert_array_equal(impulses(ContactParams("hard", smooth_soft_grounds=True)),
                                  impulses(ContactParams("hard")))
