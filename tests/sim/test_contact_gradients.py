"""Float64 central finite differences through contact steps and 32-step rollouts, in every contact mode.

Hard mode is checked away from switching instants: a robot standing still with all feet in contact, sticking
well inside the friction cone. "Informative gradients" (Schwarke et al., arXiv 2404.02887, Fig. 3): with a foot
just above the ground, the next base height depends on the action through smoothed contact only.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.torch_bridge import TorchSimulator

from .test_gradients import check_gradient

NUM_ENVS = 2


def standing_state(robot, steps=300):
    """A settled standing state under hard contact (numpy q, u)."""
    model = build_model(robot, NUM_ENVS, dtype="float64")
    sim = Simulator(model, dt=0.005, contact="hard")
    state, out = sim.state(model.default_q(base_height=robot.default_base_height - 0.04)), sim.empty_state()
    control = sim.control()
    for _ in range(steps):
        sim.step(state, control, out)
        state, out = out, state
    return state.numpy()


@pytest.fixture(scope="module")
def scene():
    robot = get_robot("anymal_d")
    q, u = standing_state(robot)
    rng = np.random.default_rng(5)
    weights = [torch.tensor(rng.normal(size=s)) for s in ((NUM_ENVS, 19), (NUM_ENVS, 18), (NUM_ENVS, 4, 3),
                                                          (NUM_ENVS, 4, 3), (NUM_ENVS, 4, 3))]
    weights[4] *= 1e-3  # contact forces (N) are ~1e3 times the other outputs: keep every term in the loss
    return robot, q, u, rng, weights


def make_bridge(robot, mode, **kwargs):
    model = build_model(robot, NUM_ENVS, dtype="float64", friction=0.8)
    return TorchSimulator(Simulator(model, dt=0.005, contact=ContactParams(mode=mode, **kwargs)))


def inputs_for(mode, robot, q, u, rng):
    q = torch.tensor(q.copy())
    u = torch.tensor(u.copy())
    targets = torch.tensor(np.tile(robot.default_joint_positions(), (NUM_ENVS, 1)))
    if mode != "hard":  # smoothed and soft: a moving robot, feet above and below the ground
        q[:, 2] += torch.tensor([0.004, -0.003])
        u += torch.tensor(rng.normal(scale=0.3, size=u.shape))
        targets += torch.tensor(rng.uniform(-0.2, 0.2, targets.shape))
    else:  # hard: stay standing, small smooth excitation only
        targets += torch.tensor(rng.uniform(-0.02, 0.02, targets.shape))
    return q, u, targets


CASES = [(mode, wrt) for mode in ("smoothed", "hard", "soft")
         for wrt in ("joint_target", "q0", "u0", "friction", "body_mass", "body_inertia")
         # sticking hard contacts inside the cone do not depend on mu: checked separately (zero gradient)
         if not (mode == "hard" and wrt == "friction")]


@pytest.mark.parametrize("steps", [1, 32])
@pytest.mark.parametrize("mode, wrt", CASES)
def test_contact_gradient_matches_finite_differences(scene, mode, steps, wrt):
    robot, q_np, u_np, rng, weights = scene
    bridge = make_bridge(robot, mode)
    q, u, targets = inputs_for(mode, robot, q_np, u_np, rng)
    tensor = {"joint_target": targets, "q0": q, "u0": u}.get(wrt)
    if tensor is None:
        tensor = bridge.parameters()[wrt]
    check_gradient(bridge, (q, u, targets), f"{mode}/{wrt}", tensor, weights, steps, rng, count=8)


def test_hard_sticking_contacts_do_not_depend_on_friction(scene):
    robot, q_np, u_np, rng, weights = scene
    bridge = make_bridge(robot, "hard")
    q, u, targets = inputs_for("hard", robot, q_np, u_np, rng)
    mu = bridge.parameters()["friction"]
    mu.requires_grad_(True)
    q1, u1 = bridge.step(q, u, targets)[:2]
    (grad,) = torch.autograd.grad((q1 * weights[0]).sum() + (u1 * weights[1]).sum(), mu)
    mu.requires_grad_(False)
    assert torch.all(grad == 0)


def test_smoothed_contact_gives_informative_gradients_before_touchdown():
    """Feet 1.5 cm above the ground, falling slowly. The ground reaction (the only external vertical force, so
    the only way an action changes the robot's vertical momentum) depends on the action through smoothed
    contact and not at all through hard contact (Schwarke et al., Fig. 3)."""
    robot = get_robot("anymal_d")
    grads = {}
    for mode in ("smoothed", "hard"):
        bridge = make_bridge(robot, mode)
        model = bridge.sim.model
        q = torch.tensor(model.default_q(base_height=robot.default_base_height))
        state = bridge.sim.state(q.numpy())
        feet = bridge.sim.foot_kinematics(state.q, state.u)[0].numpy()
        q[:, 2] += 0.015 - (feet[:, :, 2].min(axis=1) - robot.feet[0].radius)[0]
        u = torch.zeros((NUM_ENVS, model.nv), dtype=torch.float64)
        u[:, 2] = -0.1
        targets = torch.tensor(np.tile(robot.default_joint_positions(), (NUM_ENVS, 1)), requires_grad=True)
        out = bridge.step(q, u, targets)
        (grad,) = torch.autograd.grad(out.contact_force[..., 2].sum(), targets)
        grads[mode] = grad
        if mode == "hard":
            assert torch.all(out.contact_force == 0)
        else:
            assert out.contact_force[..., 2].min() > 0  # force at a distance
    assert torch.all(grads["hard"] == 0)
    assert grads["smoothed"].abs().max() > 1e-3


def test_step_output_reports_contact_state(scene):
    robot, q_np, u_np, rng, _ = scene
    for mode in ("hard", "smoothed"):
        bridge = make_bridge(robot, mode)
        q, u, targets = inputs_for("hard", robot, q_np, u_np, rng)
        out = bridge.step(q, u, targets)
        assert out.contact_state.shape == (NUM_ENVS, 4) and out.foot_gap.shape == (NUM_ENVS, 4)
        assert torch.all(out.foot_gap < 0)  # standing: every foot slightly in the ground
        if mode == "hard":
            assert torch.all(out.contact_state == 1)
        else:
            assert torch.all((out.contact_state > 0.5) & (out.contact_state < 1))
        assert torch.all(out.contact_force[..., 2] > 0)
