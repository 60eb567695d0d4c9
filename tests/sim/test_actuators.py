"""The actuation stage's hand-written reverse against float64 central finite differences, with every branch of
the DC-motor envelope exercised (tracking inside the envelope, clipped at the speed-dependent bounds, clipped at
the effort limit)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import build_model
from diffloco_ext.sim.actuators import actuation
from diffloco_ext.sim.state import Control

N = 48
DT = 0.005


@pytest.fixture(scope="module")
def problem():
    robot = get_robot("anymal_d")
    model = build_model(robot, N, dtype="float64", requires_grad=True)
    rng = np.random.default_rng(5)
    n = model.num_joints
    q = model.default_q() + np.concatenate([np.zeros((N, 7)), rng.uniform(-0.5, 0.5, (N, n))], axis=1)
    u = rng.normal(size=(N, model.nv))
    u[:, 6:] = rng.uniform(-12.0, 12.0, (N, n))  # beyond the no-load speed: the envelope's bounds move and clip
    target = q[:, 7:] + rng.uniform(-2.0, 2.0, (N, n))  # up to 160 N m of PD torque: saturates often
    ff = rng.normal(scale=5.0, size=(N, n))
    bias = rng.normal(size=(N, model.nv))
    weights = rng.normal(size=(N, model.nv, 1))
    return model, dict(q=q, u=u, target=target, ff=ff, bias=bias), weights


def run(model, values, weights, tape=None):
    grad = tape is not None
    arrays = {k: wp.array(v, dtype=wp.float64, requires_grad=grad) for k, v in values.items()}
    tau = wp.zeros((N, model.num_joints), dtype=wp.float64)
    rhs = wp.zeros((N, model.nv, 1), dtype=wp.float64, requires_grad=grad)
    control = Control(joint_target=arrays["target"], joint_torque=arrays["ff"])
    actuation(model, arrays["q"], arrays["u"], control, arrays["bias"], DT, tau, rhs, tape)
    return float((rhs.numpy() * weights).sum()), arrays, tau, rhs


def test_every_envelope_branch_is_exercised(problem):
    model, values, weights = problem
    _, _, tau, _ = run(model, values, weights)
    tau = tau.numpy()
    act = model.robot.actuator
    vel = values["u"][:, 6:]
    upper = np.clip(act.saturation_effort * (1 - vel / act.velocity_limit), 0, act.effort_limit)
    lower = np.clip(act.saturation_effort * (-1 - vel / act.velocity_limit), -act.effort_limit, 0)
    assert (np.isclose(tau, upper) & (upper < act.effort_limit) & (upper > 0)).any()  # speed-dependent bound
    assert (np.isclose(tau, lower) & (lower > -act.effort_limit) & (lower < 0)).any()
    assert np.isclose(np.abs(tau), act.effort_limit).any()  # effort limit
    assert ((tau > lower + 1e-6) & (tau < upper - 1e-6)).any()  # tracking


def test_reverse_matches_finite_differences(problem):
    model, values, weights = problem
    tape = wp.Tape()
    _, arrays, _, rhs = run(model, values, weights, tape)
    tape.backward(grads={rhs: wp.array(weights, dtype=wp.float64)})
    analytic = {k: a.grad.numpy() for k, a in arrays.items()}
    analytic["stiffness"] = model.joint_stiffness.grad.numpy().copy()
    analytic["damping"] = model.joint_damping.grad.numpy().copy()
    rng = np.random.default_rng(1)
    eps = 1e-7
    gains = {"stiffness": model.joint_stiffness, "damping": model.joint_damping}
    for name in [*values, *gains]:
        if name in gains:
            base = gains[name].numpy().copy()
        else:
            base = values[name]
        flat = base.reshape(-1)
        idx = rng.choice(flat.size, size=40, replace=False)
        fd = []
        for i in idx:
            old = flat[i]
            results = []
            for step in (eps, -eps):
                flat[i] = old + step
                if name in gains:
                    gains[name].assign(base)
                results.append(run(model, values, weights)[0])
            flat[i] = old
            if name in gains:
                gains[name].assign(base)
            fd.append((results[0] - results[1]) / (2 * eps))
        fd = np.array(fd)
        got = analytic[name].reshape(-1)[idx]
        scale = max(np.abs(fd).max(), 1e-8)
        assert np.abs(got - fd).max() <= 1e-6 * scale, f"{name}: {np.abs(got - fd).max():.2e} vs {scale:.2e}"
