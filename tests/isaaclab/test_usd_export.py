"""The USD written from the robot descriptions, read back with pxr (no simulation): bodies, mass properties,
joint frames and limits, colliders, material, feet."""

from __future__ import annotations

import os

import numpy as np
import pytest

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.rotations import quat_to_matrix

from .conftest import HAVE_ISAACLAB

if HAVE_ISAACLAB:
    from diffloco_ext.isaaclab import usd_export as ue


def _quat(gf) -> np.ndarray:
    return np.array([gf.GetReal(), *gf.GetImaginary()], dtype=np.float64)


@pytest.fixture(scope="module", params=["anymal_d", "anymal_c"])
def exported(request, tmp_path_factory):
    from pxr import Usd

    robot = get_robot(request.param)
    path = ue.write_robot_usd(robot, str(tmp_path_factory.mktemp("usd") / f"{robot.name}.usda"), friction=0.7)
    return robot, Usd.Stage.Open(path)


def test_articulation_root_and_units(exported):
    from pxr import UsdGeom, UsdPhysics

    robot, stage = exported
    root = stage.GetDefaultPrim()
    assert root.GetPath().pathString == "/Robot" and root.HasAPI(UsdPhysics.ArticulationRootAPI)
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z and UsdGeom.GetStageMetersPerUnit(stage) == 1.0


def test_mass_properties_equal_the_description(exported):
    """Each body's mass, centre of mass and inertia as written (shanks merged with their feet) equal the
    description's to float32 precision."""
    from pxr import UsdPhysics

    robot, stage = exported
    written = {}
    for name in [b.name for b in robot.bodies] + [f.name for f in robot.feet]:
        api = UsdPhysics.MassAPI(stage.GetPrimAtPath(f"/Robot/{name}"))
        moments = np.array(api.GetDiagonalInertiaAttr().Get(), dtype=np.float64)
        axes = quat_to_matrix(_quat(api.GetPrincipalAxesAttr().Get()))
        written[name] = ue.MassProperties(float(api.GetMassAttr().Get()),
                                          np.array(api.GetCenterOfMassAttr().Get(), dtype=np.float64),
                                          axes @ np.diag(moments) @ axes.T)
    for foot in robot.feet:  # the foot body in its parent's frame
        f = written.pop(foot.name)
        written[foot.body] = ue.merge_mass_properties(written[foot.body], ue.MassProperties(
            f.mass, f.com + np.asarray(foot.offset), f.inertia))
    for body in robot.bodies:
        w = written[body.name]
        assert abs(w.mass - body.mass) <= 1e-6 * body.mass, body.name
        assert np.abs(w.com - np.asarray(body.com)).max() <= 1e-6, body.name
        scale = np.abs(body.inertia_matrix).max()
        assert np.abs(w.inertia - body.inertia_matrix).max() <= 1e-6 * scale, body.name


def test_joint_frames_turn_about_the_description_axis(exported):
    """Joint frame X (the USD axis) in the child equals the description's axis, and the parent-side frame is the
    same frame placed by the body's pose."""
    from pxr import UsdPhysics

    robot, stage = exported
    for body in robot.bodies[1:]:
        j = body.joint
        joint = UsdPhysics.RevoluteJoint(stage.GetPrimAtPath(f"/Robot/joints/{j.name}"))
        assert joint.GetAxisAttr().Get() == "X"
        assert [t.pathString for t in joint.GetBody0Rel().GetTargets()] == [f"/Robot/{body.parent}"]
        assert [t.pathString for t in joint.GetBody1Rel().GetTargets()] == [f"/Robot/{body.name}"]
        r1 = quat_to_matrix(_quat(joint.GetLocalRot1Attr().Get()))
        r0 = quat_to_matrix(_quat(joint.GetLocalRot0Attr().Get()))
        np.testing.assert_allclose(r1[:, 0], j.axis, atol=1e-6)
        np.testing.assert_allclose(r0, quat_to_matrix(body.quat) @ r1, atol=1e-6)
        np.testing.assert_allclose(joint.GetLocalPos0Attr().Get(), body.pos, atol=1e-7)
        assert joint.GetLowerLimitAttr().Get() == pytest.approx(np.degrees(j.lower), rel=1e-6)
        assert joint.GetUpperLimitAttr().Get() == pytest.approx(np.degrees(j.upper), rel=1e-6)


def test_feet_colliders_and_material(exported):
    from pxr import UsdGeom, UsdPhysics, UsdShade

    robot, stage = exported
    poses = ue.body_world_poses(robot)
    for foot in robot.feet:  # the foot frame sits at the sphere centre given by the description
        p_shank, r_shank = poses[foot.body]
        xf = UsdGeom.Xformable(stage.GetPrimAtPath(f"/Robot/{foot.name}"))
        origin = np.array(xf.ComputeLocalToWorldTransform(0).ExtractTranslation())
        np.testing.assert_allclose(origin, p_shank + r_shank @ np.asarray(foot.offset), atol=1e-9)
        sphere = UsdGeom.Sphere(stage.GetPrimAtPath(f"/Robot/{foot.name}/collision"))
        assert sphere.GetRadiusAttr().Get() == pytest.approx(foot.radius)
        fixed = UsdPhysics.FixedJoint(stage.GetPrimAtPath(f"/Robot/joints/{foot.name}_fixed"))
        assert [t.pathString for t in fixed.GetBody0Rel().GetTargets()] == [f"/Robot/{foot.body}"]
    colliders = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert len(colliders) == len(robot.collision_shapes) + len(robot.feet)
    assert {p.GetParent().GetName() for p in colliders} >= {"base", "LF_THIGH", "RH_SHANK", "LF_FOOT"}
    material = UsdPhysics.MaterialAPI(stage.GetPrimAtPath("/Robot/PhysicsMaterial"))
    assert material.GetStaticFrictionAttr().Get() == pytest.approx(0.7)
    for prim in colliders:
        bound, _ = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")
        assert bound.GetPath().pathString == "/Robot/PhysicsMaterial"


def test_capsules_span_the_description_segments(exported):
    from pxr import UsdGeom

    robot, stage = exported
    by_body: dict[str, list] = {}
    for shape in robot.collision_shapes:
        by_body.setdefault(shape.body, []).append(shape)
    for body, shapes in by_body.items():
        for i, shape in enumerate(shapes):
            prim = stage.GetPrimAtPath(f"/Robot/{body}/collision_{i}")
            local = np.array(UsdGeom.Xformable(prim).GetLocalTransformation()).T  # row-major Gf -> column vectors
            if shape.is_sphere:
                np.testing.assert_allclose(local[:3, 3], shape.start, atol=1e-9)
                continue
            capsule = UsdGeom.Capsule(prim)
            half = 0.5 * capsule.GetHeightAttr().Get() * local[:3, 2]
            np.testing.assert_allclose(local[:3, 3] - half, shape.start, atol=1e-7)
            np.testing.assert_allclose(local[:3, 3] + half, shape.end, atol=1e-7)
            assert capsule.GetRadiusAttr().Get() == pytest.approx(shape.radius)


def test_split_and_merge_are_inverse():
    body = ue.MassProperties(2.0, np.array([0.1, -0.02, 0.3]), np.diag([0.05, 0.04, 0.03]) + 0.001)
    foot = ue.foot_mass_properties(0.03, [0.0, 0.05, -0.3])
    merged = ue.merge_mass_properties(ue.split_foot_mass(body, foot), foot)
    assert merged.mass == pytest.approx(body.mass)
    np.testing.assert_allclose(merged.com, body.com, atol=1e-15)
    np.testing.assert_allclose(merged.inertia, body.inertia, atol=1e-15)
    with pytest.raises(ValueError, match="cannot be taken out"):
        ue.split_foot_mass(body, ue.foot_mass_properties(0.03, [0, 0, 0], mass=3.0))


@pytest.mark.parametrize("src,dst", [((1, 0, 0), (1, 0, 0)), ((1, 0, 0), (-1, 0, 0)), ((0, 0, 1), (0.6, 0, -0.8)),
                                     ((1, 0, 0), (0, 1, 0))])
def test_rotation_onto(src, dst):
    r = ue.rotation_onto(src, dst)
    np.testing.assert_allclose(r @ np.asarray(src, float), dst, atol=1e-12)
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="friction_combine_mode"):
        ue.write_robot_usd(get_robot("anymal_d"), str(tmp_path / "x.usda"), friction_combine_mode="sum")
    with pytest.raises(ValueError, match="no drive model"):
        ue.write_robot_usd(get_robot("anymal_d").replace(actuator=None), str(tmp_path / "y.usda"))


def test_cached_files_are_written_once(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFLOCO_USD_DIR", str(tmp_path))
    robot = get_robot("anymal_d")
    first = ue.robot_usd_path(robot)
    mtime = os.path.getmtime(first)
    assert ue.robot_usd_path(robot) == first and os.path.getmtime(first) == mtime
    assert ue.robot_usd_path(robot, friction=0.5) != first
    assert ue.ground_usd_path().startswith(str(tmp_path))
