"""The actuation stage's hand-written reverse against float64 central finite differences, with every branch of
the DC-motor envelope exercised (tracking, effort limit, zero, and the implicit speed line anchored at the PD
command, at the line and at a flat piece); the loss weighs the impulse ``rhs`` and ``tau_start``."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import actuators as A, build_model
from diffloco_ext.sim.actuators import ActuationData, actuation
from diffloco_ext.sim.bias_forces import BiasForceData
from diffloco_ext.sim.mass_matrix import MassMatrixData
from diffloco_ext.sim.stage_data import Sizes
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
    H = np.zeros((N, model.nv, model.nv))
    H[:, np.arange(model.nv), np.arange(model.nv)] = rng.uniform(0.02, 0.4, (N, model.nv))
    weights = rng.normal(size=(N, model.nv, 1)), 1e-2 * rng.normal(size=(N, model.num_joints))  # tau ~ 1e2 rhs
    return model, dict(q=q, u=u, target=target, ff=ff, bias=bias, H=H), weights


def run(model, values, weights, tape=None):
    """The actuation stage at the given state, control, bias forces and mass matrix; returns the weighted loss of
    ``rhs`` and ``tau_start``, the input arrays, ``(tau_start, branch, slope)`` and ``rhs``."""
    grad = tape is not None
    arrays = {k: wp.array(values[k], dtype=wp.float64, requires_grad=grad) for k in ("q", "u", "target", "ff")}
    sizes = Sizes.of(model)
    bias = BiasForceData.allocate(model, sizes, requires_grad=grad)
    mass = MassMatrixData.allocate(model, sizes, requires_grad=grad)
    act = ActuationData.allocate(model, sizes, requires_grad=grad)
    bias.bias.assign(values["bias"])
    mass.H.assign(values["H"])
    arrays["bias"] = bias.bias
    control = Control(joint_target=arrays["target"], joint_torque=arrays["ff"])
    actuation(model, arrays["q"], arrays["u"], control, bias, mass, DT, act, tape)
    loss = float((act.rhs.numpy() * weights[0]).sum() + (act.tau_start.numpy() * weights[1]).sum())
    return loss, arrays, (act.tau_start, act.drive_branch, act.implicit_damping), act.rhs


def test_every_envelope_branch_is_exercised(problem):
    model, values, weights = problem
    _, _, (tau, branch, slope), _ = run(model, values, weights)
    branch = branch.numpy()
    present = set(branch.ravel().tolist())
    assert {A.TRACKING, A.EFFORT, A.ZERO, A.SPEED_FROM_RAW, A.SPEED_FROM_LINE, A.SPEED_FROM_LIMIT} <= present, present
    act = model.robot.actuator
    speed = np.isin(branch, [A.SPEED_FROM_RAW, A.SPEED_FROM_LINE, A.SPEED_FROM_LIMIT])
    np.testing.assert_allclose(slope.numpy()[speed], act.saturation_effort / act.velocity_limit)
    assert np.all(slope.numpy()[~speed] == 0)


def test_reverse_matches_finite_differences(problem):
    model, values, weights = problem
    tape = wp.Tape()
    _, arrays, outputs, rhs = run(model, values, weights, tape)
    tape.backward(grads={rhs: wp.array(weights[0], dtype=wp.float64),
                         outputs[0]: wp.array(weights[1], dtype=wp.float64)})
    analytic = {k: a.grad.numpy() for k, a in arrays.items() if k != "H"}
    analytic["stiffness"] = model.joint_stiffness.grad.numpy().copy()
    analytic["damping"] = model.joint_damping.grad.numpy().copy()
    rng = np.random.default_rng(1)
    eps = 1e-7
    gains = {"stiffness": model.joint_stiffness, "damping": model.joint_damping}
    for name in [*(k for k in values if k != "H"), *gains]:  # no gradient to H: the branch choice only
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
