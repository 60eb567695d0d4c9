"""Collision capsules: the approximation lies inside its primitive and touches its faces; the shipped robots'
capsules lie inside the collision geometry MuJoCo reads from the public sources and cover every primitive."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from diffloco_ext.assets import RobotDescriptionError, get_robot, import_urdf
from diffloco_ext.assets.collision_approximation import primitive_capsules
from diffloco_ext.assets.robot_description import CollisionShape
from diffloco_ext.assets.rotations import quat_to_matrix

from .mujoco_reference import ANYMAL_D_LOCKED, load_urdf_in_mujoco


def _sdf(kind, size, rot, pos, points):
    """Signed distance (m) of body-frame ``points`` [P, 3] to a primitive (MuJoCo size convention)."""
    local = (np.asarray(points) - pos) @ np.asarray(rot)
    if kind == "sphere":
        return np.linalg.norm(local, axis=1) - size[0]
    if kind == "capsule":
        z = np.clip(local[:, 2], -size[1], size[1])
        return np.linalg.norm(local - np.column_stack([0 * z, 0 * z, z]), axis=1) - size[0]
    if kind == "cylinder":
        d = np.column_stack([np.linalg.norm(local[:, :2], axis=1) - size[0], np.abs(local[:, 2]) - size[1]])
    else:
        d = np.abs(local) - np.asarray(size[:3])
    outside = np.linalg.norm(np.maximum(d, 0.0), axis=1)
    return outside + np.minimum(d.max(axis=1), 0.0)


def _capsule_surface(a, b, r, count=200, rng=np.random.default_rng(0)):
    """Points on the surface of the capsule (a, b, r)."""
    t = rng.uniform(0, 1, count)
    d = rng.normal(size=(count, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return np.asarray(a) + t[:, None] * (np.asarray(b) - np.asarray(a)) + r * d


def _capsule_union_distance(capsules, points):
    best = np.full(len(points), np.inf)
    for a, b, r in capsules:
        a, b = np.asarray(a), np.asarray(b)
        ab = b - a
        t = np.clip(((points - a) @ ab) / max(ab @ ab, 1e-300), 0, 1) if ab @ ab > 0 else np.zeros(len(points))
        best = np.minimum(best, np.linalg.norm(points - (a + t[:, None] * ab), axis=1) - r)
    return best


def _random_rotation(rng):
    q = rng.normal(size=4)
    return quat_to_matrix(q / np.linalg.norm(q))


@pytest.mark.parametrize("kind, size", [("sphere", (0.05,)), ("capsule", (0.02, 0.1)), ("cylinder", (0.02, 0.2)),
                                        ("cylinder", (0.09, 0.074)), ("cylinder", (0.071, 0.0287)),
                                        ("box", (0.447, 0.081, 0.128)), ("box", (0.03, 0.2, 0.05)),
                                        ("box", (0.08, 0.0675, 0.0075))])
def test_capsules_lie_inside_their_primitive_and_touch_its_faces(kind, size):
    rng = np.random.default_rng(1)
    rot, pos = _random_rotation(rng), rng.uniform(-1, 1, 3)
    capsules = primitive_capsules(kind, size, rot, pos)
    for a, b, r in capsules:
        assert _sdf(kind, size, rot, pos, _capsule_surface(a, b, r)).max() < 1e-12
    # the points the approximation is exact at (module docstring): face centres; for a disc also six rim points
    r0 = size[0]
    if kind == "sphere":
        exact = [r0 * s * np.eye(3)[i] for i in range(3) for s in (-1, 1)]
    elif kind == "capsule":
        exact = ([r0 * s * np.eye(3)[i] for i in range(2) for s in (-1, 1)]
                 + [(0, 0, s * (size[1] + r0)) for s in (-1, 1)])
    elif kind == "cylinder":
        exact = [(0, 0, s * size[1]) for s in (-1, 1)]
        angles = np.arange(6) * np.pi / 3 if size[1] < r0 else np.arange(8) * np.pi / 4
        exact += [(r0 * np.cos(t), r0 * np.sin(t), 0.0) for t in angles]
    else:
        exact = [size[i] * s * np.eye(3)[i] for i in range(3) for s in (-1, 1)]
    points = np.array(exact, dtype=np.float64) @ rot.T + pos
    np.testing.assert_allclose(_capsule_union_distance(capsules, points), 0.0, atol=1e-12)


_KINDS = {int(mujoco.mjtGeom.mjGEOM_SPHERE): "sphere", int(mujoco.mjtGeom.mjGEOM_CAPSULE): "capsule",
          int(mujoco.mjtGeom.mjGEOM_CYLINDER): "cylinder", int(mujoco.mjtGeom.mjGEOM_BOX): "box"}


def _source_geoms(model, robot):
    """Per body: the collision primitives MuJoCo reads from the source (feet and mesh stand-ins left out)."""
    feet = [(f.body, np.asarray(f.offset), f.radius) for f in robot.feet]
    out = {}
    for g in range(model.ngeom):
        kind = _KINDS.get(int(model.geom_type[g]))
        body = model.body(model.geom_bodyid[g]).name
        size, pos = model.geom_size[g], model.geom_pos[g]
        if kind is None or model.geom_bodyid[g] == 0 or (kind == "sphere" and size[0] <= 0.001):
            continue
        if kind == "sphere" and any(b == body and np.allclose(o, pos, atol=1e-9) for b, o, _ in feet):
            continue
        out.setdefault(body, []).append((kind, size, quat_to_matrix(model.geom_quat[g]), pos))
    return out


@pytest.mark.parametrize("name", ["anymal_d", "anymal_c", "warp_quadruped"])
def test_shipped_capsules_lie_inside_and_cover_the_source_geometry(name, shared_assets):
    robot = get_robot(name)
    if name == "anymal_c":
        model = mujoco.MjModel.from_xml_path(str(shared_assets / "anymal_c/anymal_c_mjcf_physics_only.xml"))
    elif name == "anymal_d":
        model = load_urdf_in_mujoco(shared_assets / "anymal_d/anymal_d.urdf", ANYMAL_D_LOCKED)
    else:
        model = load_urdf_in_mujoco(shared_assets / "warp_quadruped/quadruped.urdf")
    geoms = _source_geoms(model, robot)
    assert set(geoms) == set(robot.collision_bodies)
    for body, prims in geoms.items():
        capsules = [(c.start, c.end, c.radius) for c in robot.collision_shapes if c.body == body]
        for a, b, r in capsules:  # inside the union of the body's source primitives
            pts = _capsule_surface(a, b, r)
            inside = np.min([_sdf(k, s, R, p, pts) for k, s, R, p in prims], axis=0)
            assert inside.max() < 1e-9, f"{name}/{body}: a capsule leaves the source geometry by {inside.max():.2e} m"
        for k, s, R, p in prims:  # every primitive holds a capsule's axis point
            axis_points = np.array([np.asarray(a) + t * (np.asarray(b) - np.asarray(a)) for a, b, _ in capsules
                                    for t in (0.0, 0.5, 1.0)])
            assert _sdf(k, s, R, p, axis_points).min() < 0, f"{name}/{body}: a {k} has no capsule"


def test_collision_shapes_are_validated():
    robot = get_robot("warp_quadruped")
    good = robot.collision_shapes[0]
    for bad, pattern in ((CollisionShape("nope", good.start, good.end, 0.1), "unknown body"),
                         (CollisionShape(good.body, good.start, good.end, 0.0), "radius"),
                         (CollisionShape(good.body, (np.nan, 0, 0), good.end, 0.1), "start")):
        with pytest.raises(RobotDescriptionError, match=pattern):
            robot.replace(collision_shapes=(bad,))


def test_urdf_importer_keeps_primitives_in_the_merged_body_frame():
    text = """<robot name="t">
      <link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>
        <collision><origin xyz="0 0 0.1"/><geometry><box size="0.2 0.4 0.6"/></geometry></collision></link>
      <link name="b"><collision><origin xyz="0.1 0 0" rpy="0 1.5707963267948966 0"/>
        <geometry><cylinder radius="0.05" length="0.3"/></geometry></collision>
        <collision><geometry><mesh filename="x.dae"/></geometry></collision></link>
      <joint name="fix" type="fixed"><parent link="a"/><child link="b"/><origin xyz="0 0.5 0"/></joint>
    </robot>"""
    prims = import_urdf(text=text).collisions
    assert [(p.link, p.body, p.kind) for p in prims] == [("a", "a", "box"), ("b", "a", "cylinder")]
    np.testing.assert_allclose(prims[0].size, (0.1, 0.2, 0.3))
    np.testing.assert_allclose(prims[1].size, (0.05, 0.15))
    np.testing.assert_allclose(prims[1].pos, (0.1, 0.5, 0.0), atol=1e-12)
    np.testing.assert_allclose(np.array(prims[1].rot) @ [0, 0, 1], (1, 0, 0), atol=1e-12)  # axis along body x


@pytest.mark.parametrize("geometry", ['<box size="0.1 -0.2 0.3"/>', '<box size="0.1 0.2"/>',
                                      '<cylinder radius="0.1"/>', '<cylinder radius="0" length="0.2"/>'])
def test_bad_collision_primitives_are_clear_errors(geometry):
    text = (f'<robot name="t"><link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" '
            f'iyz="0" izz="1"/></inertial><collision><geometry>{geometry}</geometry></collision></link></robot>')
    with pytest.raises(RobotDescriptionError, match="link name='a'"):
        import_urdf(text=text)
