"""Height-field terrain: the query, equivalence with flat ground, incline physics, standing on bumps, gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.terrain import HeightField, query_terrain
from diffloco_ext.sim.torch_bridge import TorchSimulator

from .contact_scenes import block, rollout
from .test_gradients import check_gradient


def test_query_is_exact_on_a_plane_and_clamps_outside():
    a, b, c = 0.3, -0.2, 0.05
    field = HeightField.from_function(lambda x, y: a * x + b * y + c, (-1.0, 1.0), (-0.5, 1.5), 0.25)
    model = build_model(block(), 1, dtype="float64", terrain=field, ground_height=0.01)
    rng = np.random.default_rng(0)
    inside = np.column_stack([rng.uniform(-1, 1, 20), rng.uniform(-0.5, 1.5, 20), rng.uniform(-1, 1, 20)])
    height, normal, gap = query_terrain(model, inside[None])
    expected = a * inside[:, 0] + b * inside[:, 1] + c + 0.01
    n = np.array([-a, -b, 1.0]) / np.linalg.norm([-a, -b, 1.0])
    np.testing.assert_allclose(height[0], expected, atol=1e-12)
    np.testing.assert_allclose(normal[0], np.tile(n, (20, 1)), atol=1e-12)
    np.testing.assert_allclose(gap[0], (inside[:, 2] - expected) * n[2], atol=1e-12)
    # Outside: the edge height continues horizontally (x beyond 1, y below -0.5, both).
    outside = np.array([[3.0, 0.5, 0.0], [0.2, -4.0, 0.0], [-2.0, 9.0, 0.0]])
    height, normal, _ = query_terrain(model, outside[None])
    clamped = np.array([[1.0, 0.5], [0.2, -0.5], [-1.0, 1.5]])
    np.testing.assert_allclose(height[0], a * clamped[:, 0] + b * clamped[:, 1] + c + 0.01, atol=1e-12)
    for k, slope in enumerate(([0.0, -b, 1.0], [-a, 0.0, 1.0], [0.0, 0.0, 1.0])):
        np.testing.assert_allclose(normal[0, k], np.array(slope) / np.linalg.norm(slope), atol=1e-12)


def test_bad_height_fields_are_clear_errors():
    with pytest.raises(ValueError, match="rows >= 2"):
        HeightField(np.zeros((1, 4)), 0.1)
    with pytest.raises(ValueError, match="spacing"):
        HeightField(np.zeros((3, 3)), -0.1)
    with pytest.raises(ValueError, match="finite"):
        HeightField(np.full((3, 3), np.nan), 0.1)


def test_constant_height_field_equals_flat_ground():
    """ANYmal D dropped on flat ground at 0.1 m and on a constant 0.1 m height field: the same trajectory."""
    robot = get_robot("anymal_d")
    field = HeightField(np.full((5, 4), 0.07), spacing=(1.0, 1.5), origin=(-2.0, -2.0, 0.03))
    trajectories = []
    for kwargs in (dict(ground_height=0.1), dict(terrain=field)):
        model = build_model(robot, 2, dtype="float64", **kwargs)
        sim = Simulator(model, dt=0.005, contact="smoothed")
        q = model.default_q(base_height=0.71)
        q[1, 0] = 0.3
        _, hist = rollout(sim, sim.state(q), sim.control(), 60,
                          lambda s, d: np.concatenate([s.q.numpy().ravel(), d.contact.gap.numpy().ravel()]))
        trajectories.append(np.array(hist))
    np.testing.assert_allclose(trajectories[1], trajectories[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("mu", [0.2, 0.25, 0.35, 0.5])
def test_block_on_tilted_height_field_sticks_or_slides_by_coulomb(mu):
    """A plane of slope 0.3 rad as a height field, gravity vertical: the block sticks for mu > tan(theta), else
    slides down the slope at g (sin - mu cos) +- 1% (the flat-ground test tilts gravity instead)."""
    theta, g = 0.3, 9.81
    field = HeightField.from_function(lambda x, y: -np.tan(theta) * x, (-1.0, 3.0), (-1.0, 1.0), 0.5)
    robot = block()
    model = build_model(robot, 1, dtype="float64", friction=mu, terrain=field)
    sim = Simulator(model, dt=0.002, contact="hard")
    normal = np.array([np.sin(theta), 0.0, np.cos(theta)])
    down = np.array([np.cos(theta), 0.0, -np.sin(theta)])
    q = model.default_q()
    q[0, :3] = robot.default_base_height * normal
    q[0, 3:7] = [np.cos(theta / 2), 0.0, np.sin(theta / 2), 0.0]  # rotated about y: its bottom on the slope
    _, xs = rollout(sim, sim.state(q), sim.control(np.zeros((1, 0))), 500, lambda s, d: s.q.numpy()[0, :3].copy())
    xs = np.array(xs)
    along, off = xs @ down, xs @ normal
    t = np.arange(1, 501) * 0.002
    accel = 2.0 * np.polyfit(t[100:], along[100:], 2)[0]
    expected = max(g * (np.sin(theta) - mu * np.cos(theta)), 0.0)
    if expected == 0.0:
        assert abs(along[-1] - along[100]) < 1e-5, "the block creeps although mu > tan(theta)"
    else:
        assert accel == pytest.approx(expected, rel=1e-2)
    assert np.abs(xs[:, 1]).max() < 1e-4 and np.abs(off - robot.default_base_height).max() < 1e-3


def test_anymal_d_stands_on_a_bumpy_field_under_hard_contact():
    """Random bumps of +-1.5 cm every 10 cm: ANYmal D under PD to its default pose stays up for 3 s."""
    rng = np.random.default_rng(4)
    field = HeightField(rng.uniform(-0.015, 0.015, (41, 41)), spacing=0.1, origin=(-2.0, -2.0))
    robot = get_robot("anymal_d")
    model = build_model(robot, 1, dtype="float64", terrain=field)
    sim = Simulator(model, dt=0.005, contact="hard", report_body_gaps=True)
    state = sim.state(model.default_q(base_height=robot.default_base_height + 0.03))
    _, hist = rollout(sim, state, sim.control(), 600, lambda s, d: (
        s.q.numpy()[0].copy(), d.contact.gap.numpy()[0].min(), d.body_gap.numpy()[0].min(), d.diverged.numpy()[0]))
    q = np.array([h[0] for h in hist])
    assert not any(h[3] for h in hist)
    assert q[:, 2].min() > 0.5 and np.abs(q[-200:, 2] - q[-1, 2]).max() < 2e-3  # up and settled
    assert np.abs(q[-1, :2]).max() < 0.05  # no walking away
    tilt = 2 * np.arcsin(np.linalg.norm(q[:, 4:6], axis=1))  # roll/pitch (yaw ~ 0): angle of the x/y quat part
    assert tilt.max() < 0.1
    assert min(h[1] for h in hist[100:]) > -5e-3  # feet rest on the bumps
    assert min(h[2] for h in hist) > 0.0  # no knee, thigh or base touches


@pytest.mark.parametrize("wrt", ["q0", "u0", "joint_target"])
def test_smoothed_contact_gradient_on_a_height_field(wrt):
    """Float64 central differences through 3 smoothed contact steps on smooth bumps (feet above and below)."""
    robot = get_robot("anymal_d")
    field = HeightField.from_function(lambda x, y: 0.01 * np.sin(5 * x + 1) * np.cos(4 * y), (-1.5, 1.5),
                                      (-1.5, 1.5), 0.05)
    model = build_model(robot, 2, dtype="float64", friction=0.8, terrain=field)
    bridge = TorchSimulator(Simulator(model, dt=0.005, contact=ContactParams(mode="smoothed")))
    rng = np.random.default_rng(12)
    q = torch.tensor(model.default_q(base_height=robot.default_base_height))
    q[:, 2] += torch.tensor([0.004, -0.006])
    q[:, 0] += torch.tensor([0.013, -0.021])
    u = torch.tensor(rng.normal(scale=0.3, size=(2, model.nv)))
    targets = torch.tensor(np.tile(robot.default_joint_positions(), (2, 1)) + rng.uniform(-0.2, 0.2, (2, 12)))
    weights = [torch.tensor(rng.normal(size=s)) for s in ((2, 19), (2, 18), (2, 4, 3), (2, 4, 3), (2, 4, 3))]
    weights[4] *= 1e-3
    out = bridge.step(q, u, targets)
    normals = query_terrain(model, out.foot_pos.numpy())[1]
    assert np.abs(normals[..., :2]).max() > 0.01  # the feet stand on slopes
    tensor = {"q0": q, "u0": u, "joint_target": targets}[wrt]
    check_gradient(bridge, (q, u, targets), f"heightfield/{wrt}", tensor, weights, 3, rng, count=8)


@pytest.fixture(scope="module")
def standing_on_bumps():
    """ANYmal D settled under hard contact on smooth 1 cm bumps (float64, 2 envs)."""
    robot = get_robot("anymal_d")
    field = HeightField.from_function(lambda x, y: 0.01 * np.sin(5 * x + 1) * np.cos(4 * y), (-1.5, 1.5),
                                      (-1.5, 1.5), 0.05)
    model = build_model(robot, 2, dtype="float64", friction=0.8, terrain=field)
    sim = Simulator(model, dt=0.005, contact="hard")
    state, _ = rollout(sim, sim.state(model.default_q(base_height=robot.default_base_height - 0.02)), sim.control(),
                       300, lambda s, d: None)
    return robot, TorchSimulator(sim), [torch.tensor(a) for a in state.numpy()]


@pytest.mark.parametrize("wrt", ["q0", "u0", "joint_target"])
def test_hard_contact_gradient_standing_on_a_height_field(standing_on_bumps, wrt):
    """Hard contact away from switching (standing on the bumps, sticking): float64 FD through 4 steps."""
    robot, bridge, (q, u) = standing_on_bumps
    rng = np.random.default_rng(5)
    targets = torch.tensor(np.tile(robot.default_joint_positions(), (2, 1)) + rng.uniform(-0.02, 0.02, (2, 12)))
    weights = [torch.tensor(rng.normal(size=s)) for s in ((2, 19), (2, 18), (2, 4, 3), (2, 4, 3), (2, 4, 3))]
    weights[4] *= 1e-3
    tensor = {"q0": q, "u0": u, "joint_target": targets}[wrt]
    check_gradient(bridge, (q, u, targets), f"heightfield-hard/{wrt}", tensor, weights, 4, rng, count=8)


def test_height_at_is_the_bilinear_surface_with_the_origins_offset():
    heights = np.array([[0.0, 0.2, 0.4], [0.1, 0.3, 0.9]])
    field = HeightField(heights, (0.5, 0.25), (1.0, -1.0, 0.05))
    xs, ys = np.array([1.0, 1.5, 1.25, 1.5, 9.0]), np.array([-1.0, -0.75, -0.875, -0.5, -0.5])
    expected = np.array([0.0, 0.3, 0.15, 0.9, 0.9]) + 0.05  # nodes, a cell's centre, the clamped edge
    np.testing.assert_allclose(field.height_at(xs, ys), expected, atol=1e-12)
