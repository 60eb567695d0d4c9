"""URDF import: merged masses and inertias against a direct computation from the file, and against MuJoCo."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from diffloco_ext.assets import import_urdf
from diffloco_ext.assets.mjcf_exporter import to_mjmodel
from diffloco_ext.assets.robot_description import FootSphere
from diffloco_ext.assets.rotations import rpy_to_matrix

from .mujoco_reference import ANYMAL_D_LOCKED, dof_permutation, full_mass_matrix, load_urdf_in_mujoco, qpos_for

URDFS = {
    "anymal_c": ("anymal_c/anymal_c.urdf", ()),
    "anymal_d": ("anymal_d/anymal_d.urdf", ANYMAL_D_LOCKED),
    "warp_quadruped": ("warp_quadruped/quadruped.urdf", ()),
}


def _origin(elem):
    o = elem.find("origin")
    xyz = np.zeros(3) if o is None or o.get("xyz") is None else np.array([float(v) for v in o.get("xyz").split()])
    rpy = np.zeros(3) if o is None or o.get("rpy") is None else np.array([float(v) for v in o.get("rpy").split()])
    t = np.eye(4)
    t[:3, :3], t[:3, 3] = rpy_to_matrix(rpy), xyz
    return t


def direct_rigid_bodies(path, locked):
    """Independent computation: every link's pose at zero joint angles, grouped by moving body.

    Returns {body link name: (mass, com in body frame, inertia about com in body frame)}.
    """
    root = ET.parse(path).getroot()
    joints = root.findall("joint")
    child_joint = {j.find("child").get("link"): j for j in joints}
    links = {l.get("name"): l for l in root.findall("link")}
    world = {}

    def pose(name):
        if name not in world:
            j = child_joint.get(name)
            world[name] = np.eye(4) if j is None else pose(j.find("parent").get("link")) @ _origin(j)
        return world[name]

    def body_of(name):
        j = child_joint.get(name)
        if j is None or (j.get("type") != "fixed" and j.get("name") not in locked):
            return name
        return body_of(j.find("parent").get("link"))

    groups = {}
    for name, link in links.items():
        inertial = link.find("inertial")
        if inertial is None:
            continue
        m = float(inertial.find("mass").get("value"))
        a = {k: float(inertial.find("inertia").get(k)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        i_loc = np.array([[a["ixx"], a["ixy"], a["ixz"]], [a["ixy"], a["iyy"], a["iyz"]],
                          [a["ixz"], a["iyz"], a["izz"]]])
        body = body_of(name)
        rel = np.linalg.inv(pose(body)) @ pose(name) @ _origin(inertial)
        groups.setdefault(body, []).append((m, rel[:3, 3], rel[:3, :3] @ i_loc @ rel[:3, :3].T))
    result = {}
    for body, parts in groups.items():
        mass = sum(p[0] for p in parts)
        com = sum(p[0] * p[1] for p in parts) / mass
        inertia = sum(p[2] + p[0] * ((p[1] - com) @ (p[1] - com) * np.eye(3) - np.outer(p[1] - com, p[1] - com))
                      for p in parts)
        result[body] = (mass, com, inertia)
    return result, sum(float(l.find("inertial/mass").get("value")) for l in links.values()
                       if l.find("inertial") is not None)


@pytest.mark.parametrize("robot", sorted(URDFS))
def test_merged_mass_properties_match_direct_computation(shared_assets, robot):
    rel, locked = URDFS[robot]
    imported = import_urdf(shared_assets / rel, locked_joints=locked).robot
    expected, total = direct_rigid_bodies(shared_assets / rel, locked)
    assert imported.total_mass == pytest.approx(total, rel=1e-12)
    assert {b.name for b in imported.bodies} == set(expected)
    assert imported.num_joints == 12
    for body in imported.bodies:
        mass, com, inertia = expected[body.name]
        assert body.mass == pytest.approx(mass, rel=1e-12), body.name
        np.testing.assert_allclose(body.com, com, atol=1e-12, err_msg=body.name)
        np.testing.assert_allclose(body.inertia_matrix, inertia, rtol=1e-10, atol=1e-12, err_msg=body.name)


def test_known_totals(shared_assets):
    assert import_urdf(shared_assets / "anymal_c/anymal_c.urdf").robot.total_mass == pytest.approx(52.135, abs=1e-3)
    assert import_urdf(shared_assets / "anymal_d/anymal_d.urdf").robot.total_mass == pytest.approx(57.03, abs=1e-2)


def test_anymal_d_import_matches_mujoco_urdf_import(shared_assets, rng=np.random.default_rng(0)):
    """Our merge + MJCF export against MuJoCo's own URDF import (fusestatic): masses and mass matrices."""
    path = shared_assets / "anymal_d/anymal_d.urdf"
    imp = import_urdf(path, locked_joints=ANYMAL_D_LOCKED)
    ours = to_mjmodel(imp.robot, actuators="none", floor=False)
    ref = load_urdf_in_mujoco(path, ANYMAL_D_LOCKED)
    assert sum(ours.body_mass) == pytest.approx(sum(ref.body_mass), rel=1e-12)
    names = list(imp.robot.joint_names)
    for _ in range(5):
        joints = dict(zip(names, rng.uniform(-1.0, 1.0, len(names))))
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        m_ours = full_mass_matrix(ours, qpos_for(ours, [0.1, -0.2, 0.5], quat, joints))
        m_ref = full_mass_matrix(ref, qpos_for(ref, [0.1, -0.2, 0.5], quat, joints))
        po, pr = dof_permutation(ours, names), dof_permutation(ref, names)
        np.testing.assert_allclose(m_ours[np.ix_(po, po)], m_ref[np.ix_(pr, pr)], rtol=1e-9, atol=1e-10)


def test_foot_spheres_are_found_in_merged_bodies(shared_assets):
    imp = import_urdf(shared_assets / "anymal_d/anymal_d.urdf", locked_joints=ANYMAL_D_LOCKED)
    assert sorted(s.link for s in imp.spheres) == ["LF_FOOT", "LH_FOOT", "RF_FOOT", "RH_FOOT"]
    assert all(s.body.endswith("SHANK") and s.radius == pytest.approx(0.031455) for s in imp.spheres)
    # The sphere sits where MuJoCo's URDF import puts the fused foot geom.
    ref = load_urdf_in_mujoco(shared_assets / "anymal_d/anymal_d.urdf", ANYMAL_D_LOCKED)
    robot = imp.robot.replace(feet=tuple(FootSphere(s.link, s.body, s.center, s.radius) for s in imp.spheres))
    ours = to_mjmodel(robot, actuators="none", floor=False)
    import mujoco

    for model in (ours, ref):
        data = mujoco.MjData(model)
        data.qpos[:] = qpos_for(model, [0, 0, 0.6], [1, 0, 0, 0], dict.fromkeys(robot.joint_names, 0.3))
        mujoco.mj_kinematics(model, data)
        spheres = sorted(
            tuple(np.round(data.geom_xpos[g], 9))
            for g in range(model.ngeom)
            if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE and model.geom_size[g, 0] > 0.01
        )
        if model is ours:
            expected = spheres
        else:
            np.testing.assert_allclose(spheres, expected, atol=1e-9)
