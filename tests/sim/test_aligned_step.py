"""The aligned step (Song et al.): its value is the accurate engine's to the bit, its gradient the surrogate's; the
simplified surrogate's and the foot kinematics' gradients against float64 finite differences; the MuJoCo
engine's parameters and divergence handling; bad combinations as clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.aligned_step import AlignedSimulator
from diffloco_ext.sim.config import SimCfg
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.foot_kinematics import foot_kinematics_torch
from diffloco_ext.sim.mujoco_engine import MujocoEngine

ROBOT = get_robot("anymal_d")
N = 3


def _sim(n=N, contact="smoothed"):
    model = build_model(ROBOT, n, dtype="float64")
    return Simulator(model, dt=0.005, contact=ContactParams(contact, kappa=300.0) if contact == "smoothed"
                     else contact, substeps=4)


def _standing(sim, steps=40):
    """States of robots that stood ``steps`` policy steps in MuJoCo (feet in contact), slightly different per env."""
    model = sim.model
    q = torch.tensor(model.default_q(base_height=ROBOT.default_base_height), dtype=torch.float64)
    q[:, 7:] += 0.05 * torch.linspace(-1, 1, model.num_envs, dtype=torch.float64)[:, None]
    u = torch.zeros(model.num_envs, model.nv, dtype=torch.float64)
    engine = MujocoEngine(ROBOT, model.num_envs, threads=1)
    target = torch.tensor(model.default_joint_pos, dtype=torch.float64).repeat(model.num_envs, 1)
    for _ in range(steps):
        out = engine.step(q.numpy(), u.numpy(), target.numpy())
        q, u = torch.from_numpy(out.q), torch.from_numpy(out.u)
    return q, u, target


@pytest.fixture(scope="module")
def standing():
    return _standing(_sim())


@pytest.mark.parametrize("surrogate", ["simplified", "smoothed"])
def test_value_is_the_engines_to_the_bit(standing, surrogate):
    q, u, target = standing
    sim = _sim()
    aligned = AlignedSimulator(sim, "mujoco", surrogate, threads=1)
    engine = MujocoEngine(ROBOT, N, threads=1)
    a = torch.zeros(N, 12, dtype=torch.float64, requires_grad=True)
    qq, uu = q.clone().requires_grad_(True), u.clone()
    for k in range(3):  # chained: every step's value is a plain MuJoCo step of the previous value
        joint_target = target + 0.2 * torch.sin(a + k)
        out = aligned.step(qq, uu, joint_target)
        plain = engine.step(qq.detach().numpy(), uu.detach().numpy(), joint_target.detach().numpy())
        assert np.array_equal(out.q.detach().numpy(), plain.q) and np.array_equal(out.u.detach().numpy(), plain.u)
        assert np.array_equal(out.joint_torque.detach().numpy(), plain.joint_torque)
        qq, uu = out.q, out.u
    (qq[:, 2].sum() + uu[:, 0].sum()).backward()
    assert a.grad is not None and torch.isfinite(a.grad).all() and a.grad.abs().sum() > 0


def test_gradient_is_the_simplified_surrogates(standing):
    q, u, target = standing
    sim = _sim()
    aligned = AlignedSimulator(sim, "mujoco", "simplified", threads=1)
    x = target.clone().requires_grad_(True)
    out = aligned.step(q, u, x)
    w = torch.randn(N, sim.model.nv, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (grad_aligned,) = torch.autograd.grad((out.u * w).sum(), x)
    params = aligned.parameters()
    _, contact = aligned.contact_of(out.q.detach())
    consts = aligned.surrogate.constants(q, u, params, contact)
    y = target.clone().requires_grad_(True)
    _, u_sur, _ = aligned.surrogate.step(q, u, y, params["joint_stiffness"], params["joint_damping"], consts)
    (grad_surrogate,) = torch.autograd.grad((u_sur * w).sum(), y)
    assert torch.equal(grad_aligned, grad_surrogate)
    assert bool(contact.all()), "a standing robot has every foot in contact"


def test_gradient_is_the_smoothed_simulators(standing):
    q, u, target = standing
    sim = _sim()
    aligned = AlignedSimulator(sim, "mujoco", "smoothed", threads=1)
    x = target.clone().requires_grad_(True)
    out = aligned.step(q, u, x)
    (grad_aligned,) = torch.autograd.grad(out.u[:, :6].sum(), x)
    y = target.clone().requires_grad_(True)
    plain = aligned.bridge.step(q, u, y)
    (grad_smoothed,) = torch.autograd.grad(plain.u[:, :6].sum(), y)
    torch.testing.assert_close(grad_aligned, grad_smoothed, rtol=1e-12, atol=1e-12)


def _fd_check(f, x, eps=1e-6, rtol=1e-5, atol=1e-7):
    """Central finite differences of scalar ``f`` at ``x`` against autograd, in float64."""
    x = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(x), x)
    flat = x.detach().reshape(-1)
    fd = torch.zeros_like(flat)
    for i in range(flat.numel()):
        hi, lo = flat.clone(), flat.clone()
        hi[i] += eps
        lo[i] -= eps
        fd[i] = (f(hi.reshape(x.shape)) - f(lo.reshape(x.shape))) / (2 * eps)
    torch.testing.assert_close(grad.reshape(-1), fd, rtol=rtol, atol=atol)


@pytest.mark.parametrize("stance", [True, False], ids=["stance", "swing"])
def test_simplified_surrogate_gradients_match_finite_differences(standing, stance):
    """The surrogate's step w.r.t. the state and the targets (its constants held, as in training)."""
    q, u, target = standing
    sim = _sim()
    aligned = AlignedSimulator(sim, "mujoco", "simplified", threads=1)
    params = aligned.parameters()
    contact = torch.full((N, 4), stance)
    u = u + 0.1 * torch.randn(u.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    consts = aligned.surrogate.constants(q, u, params, contact)
    w = torch.randn(N, sim.model.nq + sim.model.nv, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    kp, kd = params["joint_stiffness"], params["joint_damping"]
    # targets inside the drive envelope (the clip passes no gradient where it binds, and FD would straddle it)
    target = q[:, 7:] + 0.01 * torch.randn(N, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def loss(qq, uu, tt):
        q1, u1, tau = aligned.surrogate.step(qq, uu, tt, kp, kd, consts)
        return (torch.cat((q1, u1), dim=1) * w).sum() + 1e-3 * tau.sum()

    _fd_check(lambda t: loss(q, u, t), target)
    _fd_check(lambda uu: loss(q, uu, target), u)
    _fd_check(lambda qq: loss(qq, u, target), q)  # the quaternion too (the update renormalises it)


def test_foot_kinematics_gradients_match_finite_differences(standing):
    q, u, _ = standing
    sim = _sim()
    u = u + 0.3 * torch.randn(u.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    w = torch.randn(N, 4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(5))

    def loss(qq, uu):
        pos, vel = foot_kinematics_torch(sim, qq, uu)
        return (torch.cat((pos, vel), dim=2) * w).sum()

    _fd_check(lambda uu: loss(q, uu), u)
    _fd_check(lambda qq: loss(torch.cat((qq[:, :3], q[:, 3:7], qq[:, 7:]), dim=1), u), q)


def test_hard_engine_value_is_the_untaped_simulators(standing):
    q, u, target = standing
    sim = _sim()
    aligned = AlignedSimulator(sim, "hard", "simplified")
    hard = _sim(contact="hard")
    out = aligned.step(q, u, target.clone().requires_grad_(True))
    from diffloco_ext.sim.torch_bridge import TorchSimulator

    with torch.no_grad():
        plain = TorchSimulator(hard).step(q, u, target)
    assert torch.equal(out.q.detach(), plain.q) and torch.equal(out.u.detach(), plain.u)


def test_mujoco_engine_parameters():
    engine = MujocoEngine(ROBOT, 2, threads=1)
    assert engine.base_mass == pytest.approx(ROBOT.bodies[0].mass, rel=1e-9)
    mask = np.array([False, True])
    engine.set_parameters(mask, friction=np.array([0.3, 0.3]), base_mass=np.array([50.0, 50.0]),
                          base_com=np.array([[0.0, 0.0, 0.0], [0.05, 0.0, 0.0]]),
                          stiffness=np.full((2, 1), 60.0))
    assert engine.models[0].body_mass[engine.base_body] == pytest.approx(engine.base_mass)
    assert engine.models[1].body_mass[engine.base_body] == 50.0
    assert engine.models[1].geom_friction[engine._friction_geoms[0], 0] == 0.3
    assert engine.models[0].geom_friction[engine._friction_geoms[0], 0] == 1.0
    assert np.all(engine.stiffness[0] == ROBOT.actuator.stiffness) and np.all(engine.stiffness[1] == 60.0)
    with pytest.raises(ValueError, match="does not fit"):
        engine.set_parameters(friction=np.ones(3))
    with pytest.raises(ValueError, match="base_mass must be > 0"):
        engine.set_parameters(base_mass=np.zeros(2))


def test_mujoco_engine_flags_and_holds_diverged_envs(standing):
    q, u, target = standing
    engine = MujocoEngine(ROBOT, N, threads=1)
    u_bad = u.numpy().copy()
    u_bad[1, 6] = 5.0e3  # beyond the speed guard
    u_bad[2, 0] = np.nan
    out = engine.step(q.numpy(), u_bad, target.numpy())
    assert out.diverged.tolist() == [False, True, True]
    assert np.array_equal(out.q[1:], q.numpy()[1:]) and np.array_equal(out.u[1], u_bad[1])
    assert np.isfinite(out.q[0]).all() and engine.diverged_total == 2


def test_bad_combinations_are_clear_errors():
    with pytest.raises(ValueError, match="float64"):
        AlignedSimulator(Simulator(build_model(ROBOT, 1, dtype="float32"), substeps=4), "mujoco")
    with pytest.raises(ValueError, match="smoothed contact"):
        AlignedSimulator(_sim(1, contact="hard"), "mujoco", "smoothed")
    with pytest.raises(ValueError, match="unknown surrogate"):
        AlignedSimulator(_sim(1), "mujoco", "exact")
    with pytest.raises(ValueError, match="does not divide"):
        AlignedSimulator(_sim(1), "mujoco", engine_dt=0.003)
    with pytest.raises(ValueError, match="SimCfg.engine must be one of"):
        SimCfg(engine="bullet")
    with pytest.raises(ValueError, match="SimCfg.surrogate must be one of"):
        SimCfg(surrogate="exact")
    cfg = SimCfg(substeps=4, engine="mujoco", device="cuda")
    with pytest.raises(ValueError, match="runs on the CPU"):
        cfg.build_bridge(build_model(ROBOT, 1, dtype="float64"))
    with pytest.raises(ValueError, match="feed-forward"):
        aligned = AlignedSimulator(_sim(1), "mujoco", threads=1)
        z = torch.zeros(1, 12, dtype=torch.float64)
        aligned.step(torch.zeros(1, 19, dtype=torch.float64), torch.zeros(1, 18, dtype=torch.float64), z, z)


def test_foot_jacobians_give_the_foot_velocities(standing):
    """``J u`` equals the feet's velocities by the kinematics, for any ``u`` (the Jacobian is assembled from one
    kinematics pass per group of coordinates that move disjoint feet)."""
    q, _, _ = standing
    sim = _sim()
    surrogate = AlignedSimulator(sim, "mujoco", "simplified", threads=1).surrogate
    assert len(surrogate._groups) < sim.model.nv  # the legs' joints share passes
    u = torch.randn(N, sim.model.nv, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    J = surrogate.foot_jacobians(q)
    _, vel = foot_kinematics_torch(sim, q, u)
    torch.testing.assert_close(torch.einsum("nfck,nk->nfc", J, u), vel, rtol=1e-12, atol=1e-12)
