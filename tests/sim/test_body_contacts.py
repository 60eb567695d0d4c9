"""Collision-body gaps: contact states a task terminates on, a geometric reference, float64 FD gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.rotations import quat_to_matrix
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.body_contacts import body_gaps_torch
from diffloco_ext.sim.terrain import HeightField

from .contact_scenes import block


def _pose(model, hfe, kfe, base_height, quat=(1.0, 0.0, 0.0, 0.0)):
    """ANYmal pose: HFE ``hfe`` / KFE ``kfe`` on the front legs, mirrored on the hind legs (rad)."""
    q = model.default_q(base_height=base_height)
    q[:, 3:7] = quat
    for i, name in enumerate(model.robot.joint_names):
        sign = 1.0 if name[1] == "F" else -1.0
        if name.endswith("HFE"):
            q[:, 7 + i] = sign * hfe
        elif name.endswith("KFE"):
            q[:, 7 + i] = sign * kfe
    return q


def _gaps(sim, q):
    return dict(zip(sim.model.collision.body_names, sim.body_gaps(sim.state(q).q).numpy()[0]))


@pytest.mark.parametrize("name", ["anymal_d", "anymal_c", "warp_quadruped"])
def test_every_robot_has_base_thigh_and_shank_bodies(name):
    robot = get_robot(name)
    names = build_model(robot).collision.body_names
    assert names[0] == "base"
    for leg in ("LF", "RF", "LH", "RH"):
        assert f"{leg}_THIGH" in names and f"{leg}_SHANK" in names
    assert list(names) == [b.name for b in robot.bodies if b.name in names]  # body order


def test_standing_lying_on_its_back_and_kneeling():
    """Terminations must not rest on a base-height proxy: the same base height means different contacts."""
    robot = get_robot("anymal_d")
    sim = Simulator(build_model(robot, 1, dtype="float64"))
    legs = [n for n in sim.model.collision.body_names if n != "base"]
    # Standing (feet on the ground at the default pose): nothing but the feet touches.
    standing = _gaps(sim, _pose(sim.model, 0.4, -0.8, 0.6 - 0.0015))
    assert standing["base"] > 0.4 and min(standing[n] for n in legs) > 0.03
    # On its back (rotated by pi about x) at a base height of 0.2 m: the payload/base touch, the legs are in the air.
    back = _gaps(sim, _pose(sim.model, 0.4, -0.8, 0.2, quat=(0.0, 1.0, 0.0, 0.0)))
    assert back["base"] < -0.02 and min(back[n] for n in legs) > 0.05
    # Kneeling: HFE 0, KFE -1.6 rad, base 0.35 m high: knees (thigh and shank drives) on the ground, feet up.
    q = _pose(sim.model, 0.0, -1.6, 0.35)
    kneel = _gaps(sim, q)
    feet = sim.foot_kinematics(sim.state(q).q, sim.state(q).u)[0].numpy()[0]
    assert feet[:, 2].min() - robot.feet[0].radius > 0.1
    assert kneel["base"] > 0.2
    for leg in ("LF", "RF", "LH", "RH"):
        assert min(kneel[f"{leg}_THIGH"], kneel[f"{leg}_SHANK"]) < 0.0


def _reference_gaps(robot, q, plane_normal, plane_offset):
    """Numpy: each body's capsules placed by MuJoCo-independent kinematics of the description, exact capsule-plane
    gap (min over the segment ends of n . x - d, minus the radius)."""
    parent = robot.parent_indices()
    rot = [quat_to_matrix(q[3:7])]
    pos = [np.asarray(q[:3])]
    for b in range(1, robot.num_bodies):
        body = robot.bodies[b]
        axis = np.asarray(body.joint.axis)
        angle = q[6 + b]
        K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        turn = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K
        p = parent[b]
        pos.append(pos[p] + rot[p] @ np.asarray(body.pos))
        rot.append(rot[p] @ quat_to_matrix(body.quat) @ turn)
    out = {}
    for c in robot.collision_shapes:
        b = robot.body_index(c.body)
        ends = [pos[b] + rot[b] @ np.asarray(x) for x in (c.start, c.end)]
        g = min(np.dot(plane_normal, x) - plane_offset for x in ends) - c.radius
        out[c.body] = min(out.get(c.body, np.inf), g)
    return np.array([out[n] for n in robot.collision_bodies])


@pytest.mark.parametrize("terrain", ["flat", "tilted"])
def test_gaps_match_a_numpy_reference(terrain):
    robot = get_robot("anymal_d")
    rng = np.random.default_rng(3)
    N = 4
    if terrain == "flat":
        model = build_model(robot, N, dtype="float64", ground_height=0.07)
        normal, offset = np.array([0.0, 0.0, 1.0]), 0.07
    else:  # the plane z = 0.2 x - 0.1 y + 0.03 as a height field (bilinear interpolation is exact for it)
        field = HeightField.from_function(lambda x, y: 0.2 * x - 0.1 * y + 0.03, (-3, 3), (-3, 3), 0.5)
        model = build_model(robot, N, dtype="float64", terrain=field)
        normal = np.array([-0.2, 0.1, 1.0]) / np.linalg.norm([-0.2, 0.1, 1.0])
        offset = normal[2] * 0.03
    sim = Simulator(model)
    q = model.default_q()
    q[:, :3] = rng.uniform(-0.5, 0.5, (N, 3))
    quat = rng.normal(size=(N, 4))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q[:, 7:] += rng.uniform(-1.0, 1.0, (N, 12))
    ours = sim.body_gaps(sim.state(q).q).numpy()
    ref = np.array([_reference_gaps(robot, q[e], normal, offset) for e in range(N)])
    np.testing.assert_allclose(ours, ref, atol=1e-12)


def test_step_reports_the_gaps_of_its_end_state():
    robot = get_robot("anymal_d")
    model = build_model(robot, 2, dtype="float64")
    sim = Simulator(model, contact="hard", report_body_gaps=True)
    s0, s1 = sim.state(model.default_q(base_height=0.3)), sim.empty_state(requires_grad=True)
    for tape in (None, __import__("warp").Tape()):
        data = sim.step(s0, sim.control(), s1, tape=tape)
        np.testing.assert_array_equal(data.body_gap.numpy(), sim.body_gaps(s1.q).numpy())
    with pytest.raises(ValueError, match="collision shapes"):
        Simulator(build_model(block(), 1), report_body_gaps=True)


@pytest.mark.parametrize("terrain", ["flat", "bumpy"])
def test_gap_gradient_matches_finite_differences(terrain):
    """d(sum_k w_k gap_k)/dq against float64 central differences at random poses (flat ground and a bumpy field)."""
    robot = get_robot("anymal_d")
    N = 3
    field = None
    if terrain == "bumpy":
        field = HeightField.from_function(lambda x, y: 0.05 * np.sin(3 * x) * np.cos(2 * y), (-2, 2), (-2, 2), 0.05)
    model = build_model(robot, N, dtype="float64", terrain=field)
    sim = Simulator(model)
    rng = np.random.default_rng(7)
    q = model.default_q()
    q[:, :3] = rng.uniform(-0.3, 0.3, (N, 3))
    quat = rng.normal(size=(N, 4))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q[:, 7:] += rng.uniform(-1.0, 1.0, (N, 12))
    q = torch.tensor(q, requires_grad=True)
    w = torch.tensor(rng.normal(size=(N, model.collision.num_bodies)))
    taped = body_gaps_torch(sim, q)
    np.testing.assert_allclose(taped.detach().numpy(), body_gaps_torch(sim, q.detach()).numpy(), atol=1e-13)
    (grad,) = torch.autograd.grad((taped * w).sum(), q)
    eps = 1e-6
    fd = np.zeros(q.shape)
    with torch.no_grad():
        base = q.detach().clone()
        for e in range(N):
            for i in range(model.nq):
                plus, minus = base.clone(), base.clone()
                plus[e, i] += eps
                minus[e, i] -= eps
                fd[e, i] = ((body_gaps_torch(sim, plus) - body_gaps_torch(sim, minus)) * w).sum().item() / (2 * eps)
    err = np.abs(grad.numpy() - fd).max() / np.abs(fd).max()
    assert np.abs(fd[:, 7:]).max() > 1e-2  # the joints move the bodies
    assert err < 1e-6, f"relative error {err:.2e}"
