"""Float64 central finite differences against the tape gradients of one step and of 32-step rollouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.torch_bridge import TorchSimulator

REL_TOL = 1e-5
EPS = 1e-6


@pytest.fixture(scope="module")
def setup():
    model = build_model(get_robot("anymal_d"), 2, dtype="float64")
    bridge = TorchSimulator(Simulator(model, dt=0.005), body_gaps=True)
    rng = np.random.default_rng(11)
    q = torch.tensor(model.default_q())
    q[:, 7:] += torch.tensor(rng.uniform(-0.3, 0.3, (2, 12)))
    quat = torch.tensor(rng.normal(size=(2, 4)))
    q[:, 3:7] = quat / quat.norm(dim=1, keepdim=True)
    u = torch.tensor(rng.normal(size=(2, model.nv)))
    targets = torch.tensor(np.tile(model.default_joint_pos, (2, 1)) + rng.uniform(-0.3, 0.3, (2, 12)))
    weights = [torch.tensor(rng.normal(size=s)) for s in ((2, model.nq), (2, model.nv), (2, 4, 3), (2, 4, 3))]
    return bridge, q, u, targets, weights, rng


def scalar_loss(bridge, q, u, targets, weights, steps):
    """Weighted sum of the step outputs over the rollout: q, u, foot positions and velocities, the contact
    forces when a fifth weight is given, the joint torques when a sixth is."""
    total = 0.0
    for _ in range(steps):
        out = bridge.step(q, u, targets)
        q, u = out.q, out.u
        for value, w in zip((out.q, out.u, out.foot_pos, out.foot_vel, out.contact_force, out.joint_torque), weights):
            total = total + (value * w).sum()
    return total


def check_gradient(bridge, inputs, name, tensor, weights, steps, rng, count=10):
    tensor.requires_grad_(True)
    (grad,) = torch.autograd.grad(scalar_loss(bridge, *inputs, weights, steps), tensor)
    tensor.requires_grad_(False)
    flat = tensor.view(-1)
    idx = rng.choice(flat.numel(), size=min(count, flat.numel()), replace=False)
    fd = []
    with torch.no_grad():
        for i in idx:
            old = flat[i].item()
            flat[i] = old + EPS
            plus = scalar_loss(bridge, *inputs, weights, steps).item()
            flat[i] = old - EPS
            minus = scalar_loss(bridge, *inputs, weights, steps).item()
            flat[i] = old
            fd.append((plus - minus) / (2 * EPS))
    fd = np.array(fd)
    analytic = grad.view(-1)[idx].numpy()
    err = np.abs(analytic - fd).max() / np.abs(fd).max()
    assert np.abs(fd).max() > 1e-6, f"{name}: finite differences vanish, the check would be empty"
    assert err <= REL_TOL, f"{name}: relative error {err:.2e} (steps={steps})"


@pytest.mark.parametrize("steps", [1, 32])
@pytest.mark.parametrize("wrt", ["q0", "u0", "joint_target", "body_mass", "body_com", "body_inertia",
                                 "joint_stiffness", "joint_damping"])
def test_gradient_matches_finite_differences(setup, steps, wrt):
    bridge, q, u, targets, weights, rng = setup
    params = bridge.parameters()
    tensor = {"q0": q, "u0": u, "joint_target": targets}.get(wrt, params.get(wrt))
    check_gradient(bridge, (q, u, targets), wrt, tensor, weights, steps, rng)


def test_wrong_dtype_or_shape_is_a_clear_error(setup):
    bridge, q, u, targets, _, _ = setup
    with pytest.raises(TypeError, match="expected dtype torch.float64"):
        bridge.step(q.float(), u, targets)
    with pytest.raises(ValueError, match=r"joint_target: expected shape \(2, 12\)"):
        bridge.step(q, u, targets[:, :6])


@pytest.mark.gpu
def test_cuda_gradients_match_cpu():
    cpu = TorchSimulator(Simulator(build_model(get_robot("anymal_d"), 2, dtype="float64"), dt=0.005))
    gpu = TorchSimulator(Simulator(build_model(get_robot("anymal_d"), 2, dtype="float64", device="cuda"), dt=0.005))
    results = []
    for bridge in (cpu, gpu):
        dev = bridge.device
        q = torch.tensor(bridge.sim.model.default_q(), device=dev)
        u = torch.zeros((2, 18), dtype=torch.float64, device=dev, requires_grad=True)
        tgt = torch.tensor(np.tile(bridge.sim.model.default_joint_pos, (2, 1)), device=dev, requires_grad=True)
        q1, u1 = bridge.step(q, u, tgt)[:2]
        (q1.sum() + u1.sum()).backward()
        results.append((q1.cpu(), tgt.grad.cpu()))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-8, atol=1e-10)


def test_wrong_device_is_a_clear_error():
    with pytest.raises((RuntimeError, ValueError), match="cuda|device"):
        build_model(get_robot("anymal_d"), 1, device="cuda:0" if not __import__("warp").is_cuda_available() else "tpu")


def test_no_grad_step_equals_differentiable_step(setup):
    bridge, q, u, targets, _, _ = setup
    with torch.no_grad():
        plain = bridge.step(q, u, targets)
    tracked = bridge.step(q, u, targets.clone().requires_grad_(True))
    assert tracked.q.requires_grad and not plain.q.requires_grad
    for a, b in zip(plain, tracked):
        torch.testing.assert_close(a, b.detach(), rtol=0, atol=0)


def test_a_diverged_env_passes_its_gradient_to_the_state_it_keeps(setup):
    bridge, q, u, targets, _, _ = setup
    q_in = q.clone().requires_grad_(True)
    u_in = u.clone()
    u_in[1, 6] = 1.0e4  # beyond the guard's max_speed: env 1 diverges and keeps its state
    u_in.requires_grad_(True)
    out = bridge.step(q_in, u_in, targets)
    assert out.diverged.tolist() == [False, True]
    torch.testing.assert_close(out.q[1], q_in[1].detach(), rtol=0, atol=0)
    (out.q[1] * 2.0).sum().backward(retain_graph=True)
    torch.testing.assert_close(q_in.grad[1], torch.full_like(q_in[1], 2.0), rtol=0, atol=0)
    assert torch.all(q_in.grad[0] == 0) and torch.all(u_in.grad == 0)
    with pytest.raises(RuntimeError, match="backpropagated once"):
        out.u.sum().backward()
    out = bridge.step(q_in, u_in, targets)
    out.u[0].sum().backward()  # the healthy env's gradient goes through the dynamics
    assert torch.any(u_in.grad[0] != 0) and torch.all(u_in.grad[1] == 0)


def test_gradient_memory_shared_between_steps_and_simulators_leaks_nothing(setup):
    """Steps' reverse passes share gradient and scratch arrays (``sim/scratch.py``): the same rollout gives the
    same gradient every time, also when another simulator of the same shapes is reversed in between."""
    bridge, q, u, targets, weights, _ = setup
    other = TorchSimulator(Simulator(build_model(get_robot("anymal_d"), 2, dtype="float64"), dt=0.005,
                                     contact="smoothed"))

    def gradient(b, steps=4):
        t = targets.clone().requires_grad_(True)
        scalar_loss(b, q, u, t, weights, steps).backward()
        return t.grad

    first = gradient(bridge)
    gradient(other)
    torch.testing.assert_close(gradient(bridge), first, rtol=0, atol=0)
    assert torch.any(first != 0)
