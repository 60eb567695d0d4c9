"""Per-stage tests (MuJoCo MJX's style): each stage of one step against an independent reference on the same data.

The step-level tests (``test_dynamics_vs_mujoco.py``, ``test_contact_vs_mujoco.py``, the FD gradient tests) check
what comes out of a whole step; these check what each stage of ``Simulator._run`` hands to the next, read from
the :class:`~diffloco_ext.sim.simulator.StepData` of one ``sim.step`` (float64, states with some feet in
contact and some in the air):

1. tree-sparse Cholesky: ``L^T L = H`` (``L`` lower triangular on the ancestor pattern) and ``du = H^-1 rhs``
   (numpy's dense solve);
2. Delassus matrix: ``G = J H^-1 J^T`` (numpy, from the step's own ``J`` and ``H``);
3. contact geometry: gap, frame and Jacobian rows against MuJoCo's ``mj_jac`` at the contact point on the
   exported model (``to_mjmodel``) at the step's midpoint configuration;
4. impulse response: ``du_contact = H^-1 J^T P`` (numpy) with the step's impulses, ``u_new = u_free + du_contact``,
   ``u_free = u + du``, ``c = J u_free``;
5. the projected Gauss-Seidel reverse sweep at ``relaxation != 1`` against float64 central differences;
6. CUDA against CPU gradients through contact steps (skipped without a CUDA device).

Each comparison states its tolerance and checks that it is not vacuous (the compared quantities are non-trivial,
and a nearby wrong answer, e.g. the other triangle or the sphere centre instead of the contact point, fails it).
"""

from __future__ import annotations

from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch
import warp as wp

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.mjcf_exporter import to_mjmodel
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.torch_bridge import TorchSimulator

from .test_gauss_seidel_adjoint import (
    C as GS_C,
    N as GS_N,
    central_differences,
    problem as gs_problem,
    solve as gs_solve,
)

NUM_ENVS = 4
DT = 0.005

# (robot, contact mode, ground height (m)): ANYmal C on a raised ground, so the height enters the gap
CASES = [("anymal_d", "smoothed", 0.0), ("anymal_d", "hard", 0.0), ("anymal_c", "smoothed", 0.02)]


def contact_states(sim, robot, ground, rng):
    """States near the ground: the base placed so that the default pose's lowest foot touches the ground, then
    lowered by 1 cm, tilted by up to ~2 degrees and turned by up to ~50 degrees about z; joints and velocities
    perturbed and the base moving down at 0.3 m/s, so that some feet penetrate and push and some are in the air."""
    model = sim.model
    n = model.num_envs
    q = model.default_q(base_height=robot.default_base_height)
    state = sim.state(q)
    feet = sim.foot_kinematics(state.q, state.u)[0].numpy()
    lowest = (feet[..., 2] - np.array([f.radius for f in robot.feet])).min(axis=1)
    q[:, 2] += ground - lowest - 0.01
    q[:, :2] += rng.uniform(-1.0, 1.0, (n, 2))
    q[:, 7:] += rng.uniform(-0.1, 0.1, (n, model.num_joints))
    quat = np.c_[np.ones(n), rng.uniform(-0.02, 0.02, size=(n, 2)), rng.uniform(-0.5, 0.5, size=(n, 1))]
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    u = rng.normal(scale=0.1, size=(n, model.nv))
    u[:, 2] -= 0.3
    return q, u


def ancestor_mask(dof_parent: np.ndarray) -> np.ndarray:
    """``mask[k, i]``: DOF ``i`` is ``k`` or one of its ancestors (the pattern of the tree-sparse factor)."""
    nv = dof_parent.size
    mask = np.zeros((nv, nv), dtype=bool)
    for k in range(nv):
        i = k
        while i != -1:
            mask[k, i] = True
            i = dof_parent[i]
    return mask


@pytest.fixture(scope="module", params=CASES, ids=[f"{r}-{m}" for r, m, _ in CASES])
def step(request):
    """One ``sim.step`` from contact states: the inputs, the model and numpy copies of the intermediates."""
    robot_name, mode, ground = request.param
    robot = get_robot(robot_name)
    model = build_model(robot, NUM_ENVS, dtype="float64", friction=0.8, ground_height=ground)
    sim = Simulator(model, dt=DT, contact=ContactParams(mode=mode))
    rng = np.random.default_rng(17)
    q, u = contact_states(sim, robot, ground, rng)
    targets = model.default_joint_pos + rng.uniform(-0.2, 0.2, (NUM_ENVS, model.num_joints))
    data = sim.step(sim.state(q, u), sim.control(targets), sim.empty_state())
    d = {name: getattr(data, name).numpy().copy() for name in ("q_mid", "H", "L", "rhs", "du", "u_new")}
    # the solves use H plus the drive speed line's implicit damping, dt b, on the joint diagonal (actuators.py)
    shift = np.concatenate([np.zeros((NUM_ENVS, 6)), data.implicit_damping.numpy()], axis=1)
    d["H_crba"] = d["H"]
    d["H"] = d["H"] + DT * np.einsum("ei,ij->eij", shift, np.eye(model.nv))
    cd = data.contact
    d.update({f"contact_{name}": getattr(cd, name).numpy().copy()
              for name in ("gap", "frame", "J", "u_free", "c", "G", "impulse", "du_contact", "weight")})
    s = SimpleNamespace(robot=robot, model=model, mode=mode, ground=ground, q=q, u=u,
                        dof_parent=model.dof_parent.numpy(), **d)
    # not vacuous: some feet penetrate and push, some are in the air
    gap, P = s.contact_gap, s.contact_impulse[:, :, 0]
    assert (gap < 0).any() and (gap > 0.005).any()
    assert (P[:, 0::3][gap < 0] > 1e-3).any(), "no foot in contact pushes: the contact stages would be idle"
    return s


def rel_err(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def report(what: str, value: float) -> None:
    """Print a measured error (shown with ``pytest -s``)."""
    print(f"\n  {what}: {value:.2e}", end="")


# -- 1. tree-sparse Cholesky ---------------------------------------------------------------------------------
def test_cholesky_factor_reproduces_H_and_solves(step):
    """``H = L^T L`` with ``L`` lower triangular, non-zero only on the ancestor pattern (the only entries the
    factorisation writes: the rest of the array is not initialised and is masked out here). Tolerances: 1e-12
    relative for the product, 1e-11 relative for the solve (condition number of H ~3e3 here)."""
    mask = ancestor_mask(step.dof_parent)
    assert not np.triu(mask, 1).any(), "ancestors come first: the pattern is lower triangular"
    H = step.H
    # H is tree-sparse: zero outside the pattern and its transpose (what makes the no-fill-in factor exact)
    assert np.all(H[:, ~(mask | mask.T)] == 0)
    L = np.where(mask, step.L, 0.0)
    assert np.all(np.diagonal(L, axis1=1, axis2=2) > 0)
    product = np.einsum("eki,ekj->eij", L, L)  # L^T L
    err = rel_err(product, H)
    report(f"{step.robot.name}/{step.mode} |L^T L - H| rel", err)
    assert err <= 1e-12, f"L^T L differs from H: {err:.2e} relative"
    # not vacuous: the other convention (L L^T) is far off, and L has off-diagonal entries
    assert rel_err(np.einsum("eik,ejk->eij", L, L), H) > 1e-3
    assert np.abs(np.tril(L, -1)).max() > 1e-2 * np.abs(L).max()

    ref = np.linalg.solve(H, step.rhs)
    err = rel_err(step.du, ref)
    report(f"{step.robot.name}/{step.mode} du vs numpy solve rel (cond H {np.linalg.cond(H).max():.1e})", err)
    assert err <= 1e-11, f"du differs from numpy.linalg.solve(H, rhs): {err:.2e} relative"
    assert np.abs(ref).max() > 1e-3


# -- 2. Delassus matrix --------------------------------------------------------------------------------------
def test_delassus_matrix_equals_dense_product(step):
    """``G = J H^-1 J^T`` (dense numpy from the step's own J and H) to 1e-11 relative."""
    J, H = step.contact_J, step.H
    ref = J @ np.linalg.solve(H, np.transpose(J, (0, 2, 1)))
    err = rel_err(step.contact_G, ref)
    report(f"{step.robot.name}/{step.mode} G vs J H^-1 J^T rel", err)
    assert err <= 1e-11, f"G differs from J H^-1 J^T: {err:.2e} relative"
    # not vacuous: the feet are coupled through the base (off-diagonal blocks ~1/base mass, far above the tolerance)
    F = step.model.num_feet
    off = max(np.abs(ref[:, 3 * a:3 * a + 3, 3 * b:3 * b + 3]).max() for a in range(F) for b in range(F) if a != b)
    assert off > 1e-3 * np.abs(ref).max()


# -- 3. contact geometry against MuJoCo -----------------------------------------------------------------------
def test_contact_jacobian_and_gap_match_mujoco(step):
    """At the step's midpoint configuration (where the contact stage evaluates them), on the exported model:

    * gap = (MuJoCo's foot geom centre)_z - radius - ground height, to 1e-12 m;
    * frame = (world z, x, y);
    * ``J[3f + r] = frame[f, r] . jacp`` with ``jacp`` MuJoCo's translational Jacobian (``mj_jac``) of the foot's
      body at the contact point ``centre - radius n``, to 1e-12 relative (MuJoCo's free-joint velocity convention
      is ours, so the columns map one to one); ``J`` is exactly zero off the foot's root path.
    """
    robot, J, frame = step.robot, step.contact_J, step.contact_frame
    mj = to_mjmodel(robot, actuators="none", floor=False)
    data = mujoco.MjData(mj)
    ref = np.zeros_like(J)
    ref_centre = np.zeros_like(J)
    ref_gap = np.zeros_like(step.contact_gap)
    jacp, jacr = np.zeros((3, mj.nv)), np.zeros((3, mj.nv))
    normal = np.array([0.0, 0.0, 1.0])
    for e in range(NUM_ENVS):
        data.qpos[:] = step.q_mid[e]
        mujoco.mj_kinematics(mj, data)
        mujoco.mj_comPos(mj, data)
        for f, foot in enumerate(robot.feet):
            gid = mj.geom(foot.name).id
            centre = data.geom_xpos[gid].copy()
            ref_gap[e, f] = centre[2] - foot.radius - step.ground
            mujoco.mj_jac(mj, data, jacp, jacr, centre - foot.radius * normal, mj.geom_bodyid[gid])
            ref[e, 3 * f:3 * f + 3] = frame[e, f] @ jacp
            mujoco.mj_jacGeom(mj, data, jacp, jacr, gid)  # at the sphere centre: the wrong point, for contrast
            ref_centre[e, 3 * f:3 * f + 3] = frame[e, f] @ jacp
    np.testing.assert_allclose(frame, np.broadcast_to(np.eye(3)[[2, 0, 1]], frame.shape), rtol=0, atol=1e-15)
    gap_err = np.abs(step.contact_gap - ref_gap).max()
    report(f"{step.robot.name}/{step.mode} gap vs MuJoCo (m)", gap_err)
    assert gap_err <= 1e-12, f"gap differs from MuJoCo by {gap_err:.2e} m"
    err = rel_err(J, ref)
    report(f"{step.robot.name}/{step.mode} J vs mj_jac rel", err)
    report(f"{step.robot.name}/{step.mode} (contrast) J at sphere centre vs contact point rel",
           rel_err(ref_centre, ref))
    assert err <= 1e-12, f"contact Jacobian differs from MuJoCo's mj_jac at the contact point: {err:.2e} relative"
    # structural zeros: a foot's rows live on its leg and the base only
    path_start, path = step.model.foot_path_start.numpy(), step.model.foot_path.numpy()
    for f in range(step.model.num_feet):
        off_path = np.setdiff1d(np.arange(step.model.nv), path[path_start[f]:path_start[f + 1]])
        assert np.all(J[:, 3 * f:3 * f + 3, off_path] == 0)
    # not vacuous: the Jacobian at the sphere centre (radius 2-3 cm away) is far outside the tolerance
    assert rel_err(ref_centre, ref) > 1e3 * 1e-12
    assert np.ptp(ref_gap) > 0.01


# -- 4. impulse response -------------------------------------------------------------------------------------
def test_impulse_response_equals_dense_solve(step):
    """``du_contact = H^-1 J^T P`` (numpy) with the step's impulses ``P``, to 1e-11 relative; ``u_new = u_free +
    du_contact``, ``u_free = u + du`` and ``c = J u_free`` to 1e-13 relative. The impulses are in the friction
    cone (normal >= 0, |tangential| <= mu normal, to 1e-12)."""
    J, H, P = step.contact_J, step.H, step.contact_impulse
    ref = np.linalg.solve(H, np.transpose(J, (0, 2, 1)) @ P)
    err = rel_err(step.contact_du_contact, ref)
    report(f"{step.robot.name}/{step.mode} du_contact vs H^-1 J^T P rel", err)
    report(f"{step.robot.name}/{step.mode} u_new vs u_free + du_contact rel",
           rel_err(step.u_new, step.contact_u_free + step.contact_du_contact[:, :, 0]))
    assert err <= 1e-11, f"du_contact differs from H^-1 J^T P: {err:.2e} relative"
    assert np.abs(ref).max() > 1e-2, "the impulses change the velocity noticeably"
    u_free = step.u + step.du[:, :, 0]
    assert rel_err(step.contact_u_free, u_free) <= 1e-13
    assert rel_err(step.contact_c, J @ u_free[:, :, None]) <= 1e-13
    assert rel_err(step.u_new, step.contact_u_free + step.contact_du_contact[:, :, 0]) <= 1e-13
    assert np.abs(step.u_new - step.contact_u_free).max() > 1e-2
    Pn, Pt = P[:, 0::3, 0], np.stack([P[:, 1::3, 0], P[:, 2::3, 0]], axis=-1)
    assert Pn.min() >= 0
    assert np.all(np.linalg.norm(Pt, axis=-1) <= 0.8 * Pn + 1e-12)


# -- 5. projected Gauss-Seidel reverse sweep at relaxation != 1 -----------------------------------------------
@pytest.mark.parametrize("iterations", [10, 2])
@pytest.mark.parametrize("mode", ["smoothed", "hard"])
@pytest.mark.parametrize("relaxation", [0.8, 1.3])
def test_gauss_seidel_reverse_sweep_with_relaxation(relaxation, mode, iterations):
    """The hand-written reverse sweep (``gauss_seidel.py``) against float64 central differences (step 1e-7) of
    the impulses' weighted sum w.r.t. G, c, the gaps and mu, on the random problems of
    ``test_gauss_seidel_adjoint.py``, with over- and under-relaxation. Tolerance: 1e-5 of the largest FD entry
    (as the relaxation = 1 test)."""
    rng = np.random.default_rng(23)
    G, c, gap, mu = gs_problem(rng)
    params = ContactParams(mode=mode, kappa=300.0, iterations=iterations, relaxation=relaxation)
    weights = rng.normal(size=(GS_N, GS_C, 1))
    tape = wp.Tape()
    _, arrays, model, out = gs_solve(params, G, c, gap, mu, weights, tape)
    impulse = out["impulse"]
    assert np.abs(impulse.numpy()).max() > 1e-2
    # not vacuous: the relaxation changes the solve (at 10 iterations too: it is not converged to the last digit)
    plain = ContactParams(mode=mode, kappa=300.0, iterations=iterations)
    change = abs(gs_solve(plain, G, c, gap, mu, weights)[0] - gs_solve(params, G, c, gap, mu, weights)[0])
    report(f"relaxation {relaxation} {mode} it={iterations}: loss change against relaxation 1", change)
    assert change > 1e-6
    tape.backward(grads={impulse: wp.array(weights, dtype=wp.float64)})
    analytic = {"G": arrays["G"].grad.numpy(), "c": arrays["c"].grad.numpy(), "gap": arrays["gap"].grad.numpy(),
                "mu": model.friction.grad.numpy()}
    # not vacuous: some impulse slides on the friction cone, some contact separates
    hist = out["history"].numpy()[:, -1]
    on_cone = np.abs(np.linalg.norm(hist[..., 1:], axis=-1) - mu[:, None] * hist[..., 0]) < 1e-9
    assert on_cone[hist[..., 0] > 0].any() and (hist[..., 0] == 0).any()
    errors = {}
    for name, x in {"G": G, "c": c, "gap": gap, "mu": mu}.items():
        idx = rng.choice(x.size, size=min(40, x.size), replace=False)
        fd = central_differences(x, idx, lambda: gs_solve(params, G, c, gap, mu, weights)[0])
        got = analytic[name].reshape(-1)[idx]
        scale = np.abs(fd).max()
        assert scale > 1e-6, f"{name}: finite differences vanish"
        errors[name] = (np.abs(got - fd).max(), scale)
        report(f"relaxation {relaxation} {mode} it={iterations} d/d{name} |analytic - FD| / FD scale",
               errors[name][0] / scale)
    bad = {k: v for k, v in errors.items() if v[0] > 1e-5 * v[1] + 1e-9}
    assert not bad, "reverse sweep differs from FD: " + ", ".join(
        f"{k}: {e:.2e} (FD scale {s:.2e})" for k, (e, s) in bad.items())


# -- 6. CUDA against CPU, with contact ----------------------------------------------------------------------
def contact_gradients(device: str, steps: int = 3):
    """Smoothed contact, float64, ``steps`` steps from a state with feet in and above the ground: the end state,
    the contact forces and the gradients of a weighted loss w.r.t. the joint targets and q0."""
    robot = get_robot("anymal_d")
    bridge = TorchSimulator(Simulator(build_model(robot, 2, dtype="float64", friction=0.8, device=device),
                                      dt=DT, contact="smoothed"))
    model, dev = bridge.sim.model, bridge.device
    rng = np.random.default_rng(4)
    q_np, u_np = contact_states(bridge.sim, robot, 0.0, rng)
    q = torch.tensor(q_np, device=dev, requires_grad=True)
    u = torch.tensor(u_np, device=dev)
    targets = torch.tensor(model.default_joint_pos + rng.uniform(-0.2, 0.2, (2, model.num_joints)), device=dev,
                           requires_grad=True)
    wq, wu = (torch.tensor(rng.normal(size=s), device=dev) for s in ((2, model.nq), (2, model.nv)))
    x, v, loss, forces = q, u, 0.0, []
    for _ in range(steps):
        out = bridge.step(x, v, targets)
        x, v = out.q, out.u
        forces.append(out.contact_force.detach())
        loss = loss + (x * wq).sum() + (v * wu).sum() + 1e-3 * out.contact_force.sum()
    g_target, g_q = torch.autograd.grad(loss, (targets, q))
    return [t.detach().cpu() for t in (x, v, torch.stack(forces), g_target, g_q)]


def assert_same_results(ref, other):
    """q, u, contact forces to 1e-10 and the gradients w.r.t. joint targets and q0 to 1e-8 relative (results of
    :func:`contact_gradients`)."""
    fz = ref[2][..., 2]
    assert fz.max() > 1.0 and fz.min() < 1e-3 * fz.max(), "not vacuous: some feet push, some are (nearly) free"
    for name, a, b in zip(("q", "u", "contact force"), ref[:3], other[:3]):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10, msg=lambda m, n=name: f"{n}: {m}")
    for name, a, b in zip(("d/d joint_target", "d/d q0"), ref[3:], other[3:]):
        assert a.abs().max() > 1e-3, f"{name}: the CPU gradient vanishes, the check would be empty"
        err = ((a - b).abs().max() / a.abs().max()).item()
        report(f"CUDA vs CPU {name} rel", err)
        assert err <= 1e-8, f"{name}: CUDA differs from CPU by {err:.2e} relative"


@pytest.mark.gpu
def test_cuda_gradients_with_contact_match_cpu():
    """Three smoothed-contact steps on CUDA against CPU (the same float64 arithmetic up to operation order and
    fused multiply-adds): :func:`assert_same_results`."""
    assert_same_results(contact_gradients("cpu"), contact_gradients("cuda"))
