"""Taped policy steps replayed as Warp CPU graphs (``sim/taped_replay.py``) against the same steps run as they are.

The recorded path must give exactly the same values and gradients as the plain one (the same kernels on the same
numbers), whatever the inputs of each reuse, after resets, under parameter gradients, and after a change of the
settings a graph bakes in.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.integrator import mean_kernels
from diffloco_ext.sim.torch_bridge import TorchSimulator

from .contact_scenes import block


def _bridge(contact: str, replay: bool, substeps: int = 4, dtype: str = "float64", num_envs: int = 3,
            body_gaps: bool = True):
    model = build_model(get_robot("anymal_d"), num_envs, dtype=dtype)
    return TorchSimulator(Simulator(model, dt=0.005, contact=contact, substeps=substeps), replay_taped=replay,
                          body_gaps=body_gaps)


def _rollouts(bridge: TorchSimulator, iterations: int = 3, steps: int = 4, seed: int = 0):
    """``iterations`` short rollouts with fresh random actions each, an env reset mid-rollout, a gradient to the
    body masses; returns (loss, d loss / d actions, d loss / d masses, d loss / d q0) of each."""
    gen = torch.Generator().manual_seed(seed)
    m = bridge.sim.model
    N = m.num_envs
    q0 = torch.tensor(m.default_q(), dtype=bridge.dtype)
    q0[:, 2] -= 0.03  # feet slightly in the ground: contact from the first step
    u0 = torch.zeros(N, m.nv, dtype=bridge.dtype)
    params = {k: v.clone() for k, v in bridge.parameters().items()}
    results = []
    for _ in range(iterations):
        actions = (0.4 * torch.randn(steps, N, m.num_joints, generator=gen, dtype=bridge.dtype)).requires_grad_(True)
        mass = params["body_mass"].clone().requires_grad_(True)
        q_start = q0.clone().requires_grad_(True)
        q, u = q_start, u0
        loss = 0.0
        for t in range(steps):
            out = bridge.step(q, u, q0[:, 7:] + actions[t], params={**params, "body_mass": mass})
            q, u = out.q, out.u
            if t == 1:  # env 1 resets: its chain is cut
                q = torch.where(torch.arange(N)[:, None] == 1, q0, q)
                u = torch.where(torch.arange(N)[:, None] == 1, u0, u)
            loss = loss + (q**2).sum() + (u**2).sum() + out.foot_pos.sum() + 1e-3 * out.joint_torque.pow(2).sum() \
                + 1e-3 * out.contact_force.sum() + out.foot_vel.pow(2).sum() + out.body_gap.pow(2).sum()
        loss.backward()
        results.append((loss.detach(), actions.grad, mass.grad, q_start.grad))
        q0 = q.detach()
    return results


@pytest.mark.parametrize("contact,substeps", [("smoothed", 4), ("hard", 4), ("none", 4), ("smoothed", 1)])
def test_recorded_steps_give_exactly_the_plain_values_and_gradients(contact, substeps):
    plain = _rollouts(_bridge(contact, replay=False, substeps=substeps))
    replayed_bridge = _bridge(contact, replay=True, substeps=substeps)
    replayed = _rollouts(replayed_bridge)
    assert replayed_bridge._pool.size == 4  # one record per step of a rollout, reused by the next rollouts
    for a, b in zip(plain, replayed):
        for x, y in zip(a, b):
            assert torch.isfinite(x).all() and torch.any(x != 0)
            torch.testing.assert_close(y, x, rtol=0, atol=0)


@pytest.mark.parametrize("replay", [True, False])
def test_the_steps_collision_body_gaps_are_those_of_its_end_state_with_their_gradient(replay):
    """``StepOutput.body_gap`` (computed inside the step, replayed with it) equals the gaps of the step's end state
    computed on their own, in value and in the gradient they pass back to the actions; untaped steps too."""
    from diffloco_ext.sim.body_contacts import body_gaps_torch

    bridge = _bridge("smoothed", replay=replay)
    m = bridge.sim.model
    q0 = torch.tensor(m.default_q(), dtype=bridge.dtype)
    q0[:, 2] -= 0.03
    u0 = torch.zeros(m.num_envs, m.nv, dtype=bridge.dtype)
    w = torch.randn(m.num_envs, m.collision.num_bodies, generator=torch.Generator().manual_seed(3),
                    dtype=bridge.dtype)
    for _ in range(2):  # the second use of a record replays its graphs
        actions = (0.3 * torch.randn(m.num_envs, m.num_joints, dtype=bridge.dtype)).requires_grad_(True)
        out = bridge.step(q0, u0, q0[:, 7:] + actions)
        separate = body_gaps_torch(bridge, out.q)
        torch.testing.assert_close(out.body_gap, separate, rtol=0, atol=1e-14)
        (inside,) = torch.autograd.grad((out.body_gap * w).sum(), actions)
        out = bridge.step(q0, u0, q0[:, 7:] + actions)
        (outside,) = torch.autograd.grad((body_gaps_torch(bridge, out.q) * w).sum(), actions)
        assert inside.abs().max() > 1e-3
        torch.testing.assert_close(inside, outside, rtol=1e-10, atol=1e-12)
        with torch.no_grad():
            plain = bridge.step(q0, u0, q0[:, 7:] + actions)
            torch.testing.assert_close(plain.body_gap, separate.detach(), rtol=0, atol=1e-14)
            # float64 central differences of the same weighted sum w.r.t. a few actions (smoothed contact)
            eps = 1e-6
            for e, j in ((0, 1), (1, 5), (2, 10), (0, 11)):
                plus, minus = actions.detach().clone(), actions.detach().clone()
                plus[e, j] += eps
                minus[e, j] -= eps
                fd = ((bridge.step(q0, u0, q0[:, 7:] + plus).body_gap
                       - bridge.step(q0, u0, q0[:, 7:] + minus).body_gap) * w).sum() / (2 * eps)
                assert abs(fd - inside[e, j]) <= 1e-6 * inside.abs().max() + 1e-9, \
                    (e, j, float(fd), float(inside[e, j]))
    box = TorchSimulator(Simulator(build_model(block(), 2, dtype="float64"), dt=0.005, contact="hard"),
                         replay_taped=replay, body_gaps=True)  # no collision shapes: no gaps
    qb = torch.tensor(box.sim.model.default_q(), dtype=box.dtype)
    assert box.step(qb, torch.zeros(2, box.sim.model.nv, dtype=box.dtype), qb[:, 7:]).body_gap.shape == (2, 0)


@pytest.mark.parametrize("replay", [True, False])
def test_a_bridge_without_body_gaps_reports_none_and_the_same_step(replay):
    """Off by default (a kinematics pass and its reverse per policy step): ``body_gap`` is None, every other
    output and every gradient exactly those of a bridge that computes them."""
    with_gaps, without = _bridge("smoothed", replay=replay), _bridge("smoothed", replay=replay, body_gaps=False)
    assert TorchSimulator(without.sim).body_gaps is False
    with pytest.raises(AttributeError):
        without.body_gaps = True  # fixed at construction: the records bake it in
    m = without.sim.model
    q0 = torch.tensor(m.default_q(), dtype=without.dtype)
    q0[:, 2] -= 0.03
    u0 = torch.zeros(m.num_envs, m.nv, dtype=without.dtype)
    for _ in range(2):  # the second use of a record replays its graphs
        actions = (0.3 * torch.randn(m.num_envs, m.num_joints, dtype=without.dtype)).requires_grad_(True)
        outs = [bridge.step(q0, u0, q0[:, 7:] + actions) for bridge in (with_gaps, without)]
        assert outs[1].body_gap is None and outs[0].body_gap.shape == (m.num_envs, m.collision.num_bodies)
        grads = [torch.autograd.grad(o.q.pow(2).sum() + o.foot_pos.sum() + o.joint_torque.pow(2).sum(), actions)[0]
                 for o in outs]
        for a, b in zip(outs[0][:-1], outs[1][:-1]):
            torch.testing.assert_close(b, a.detach(), rtol=0, atol=0)
        torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)
        with torch.no_grad():
            assert without.step(q0, u0, q0[:, 7:] + actions).body_gap is None


def test_a_change_of_settings_records_the_steps_again():
    plain, replayed = _bridge("smoothed", replay=False), _bridge("smoothed", replay=True)
    for bridge in (plain, replayed):
        _rollouts(bridge, iterations=1)
    first = replayed._pool._free[0]
    for bridge in (plain, replayed):
        bridge.sim.contact = ContactParams("smoothed", kappa=100.0)
        bridge.sim.dt = 0.004
    a, b = _rollouts(plain, iterations=2, seed=1), _rollouts(replayed, iterations=2, seed=1)
    assert first not in replayed._pool._free  # the old records were dropped
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            torch.testing.assert_close(v, u, rtol=0, atol=0)


def test_steps_freed_without_a_backward_pass_return_their_records():
    bridge = _bridge("smoothed", replay=True)
    m = bridge.sim.model
    q0 = torch.tensor(m.default_q())
    for _ in range(5):
        action = torch.zeros(m.num_envs, m.num_joints, dtype=torch.float64, requires_grad=True)
        q, u = q0, torch.zeros(m.num_envs, m.nv, dtype=torch.float64)
        for _ in range(3):
            out = bridge.step(q, u, q0[:, 7:] + action)
            q, u = out.q, out.u
        del out, q, u  # the graph is freed, never backpropagated
    assert bridge._pool.size == 3 and bridge._pool._lent == 0
    # and a step is still backpropagated once only
    out = bridge.step(q0, torch.zeros(m.num_envs, m.nv, dtype=torch.float64), q0[:, 7:] + action)
    out.q.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backpropagated once"):
        out.q.sum().backward()


def test_two_specialisations_of_the_mean_kernel_run_their_own_code_in_one_graph():
    """Warp's CPU graph capture registers kernels by module and key: the mean kernels of the scalar torques and of
    the vec3 forces shared one key, and in one graph both ran the kernel registered last (the scalar mean got the
    vec3 code's strides: wrong values and writes past the array). Each now has a key of its own."""
    vec3 = wp.types.vector(3, wp.float64)
    _, scalar_adjoint = mean_kernels(wp.float64, wp.float64)
    _, vec_adjoint = mean_kernels(wp.float64, vec3)
    assert scalar_adjoint.key != vec_adjoint.key
    acc1, src1 = wp.ones((2, 12), dtype=wp.float64), wp.zeros((2, 12), dtype=wp.float64)
    acc3, src3 = wp.ones((2, 4), dtype=vec3), wp.zeros((2, 4), dtype=vec3)
    wp.capture_begin(device="cpu")
    wp.launch(scalar_adjoint, dim=src1.shape, inputs=[acc1, wp.float64(0.25), src1], device="cpu")
    wp.launch(vec_adjoint, dim=src3.shape, inputs=[acc3, wp.float64(0.25), src3], device="cpu")
    graph = wp.capture_end(device="cpu")
    wp.capture_launch(graph)
    np.testing.assert_array_equal(src1.numpy(), 0.25)
    np.testing.assert_array_equal(src3.numpy(), 0.25)
