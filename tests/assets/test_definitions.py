"""The shipped robot definitions against their public sources, loaded in MuJoCo."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from diffloco_ext.assets import ROBOTS, get_robot
from diffloco_ext.assets.mjcf_exporter import to_mjcf, to_mjmodel

from .mujoco_reference import ANYMAL_D_LOCKED, dof_permutation, full_mass_matrix, load_urdf_in_mujoco, qpos_for


def _random_states(robot, rng, count):
    yield ([0.0, 0.0, robot.default_base_height], [1.0, 0.0, 0.0, 0.0],
           dict(zip(robot.joint_names, robot.default_joint_positions())))
    for _ in range(count):
        quat = rng.normal(size=4)
        yield (rng.uniform(-1, 1, 3), quat / np.linalg.norm(quat),
               dict(zip(robot.joint_names, rng.uniform(-1.5, 1.5, 12))))


def _compare_mass_matrices(robot, ours, ref, rng, count=20):
    names = list(robot.joint_names)
    po, pr = dof_permutation(ours, names), dof_permutation(ref, names)
    for pos, quat, joints in _random_states(robot, rng, count):
        m_ours = full_mass_matrix(ours, qpos_for(ours, pos, quat, joints))[np.ix_(po, po)]
        m_ref = full_mass_matrix(ref, qpos_for(ref, pos, quat, joints))[np.ix_(pr, pr)]
        err = np.abs(m_ours - m_ref).max() / np.abs(m_ref).max()
        assert err < 1e-6, f"mass matrix relative error {err:.2e}"


def test_anymal_c_matches_menagerie_mjcf(shared_assets):
    robot = get_robot("anymal_c")
    ref = mujoco.MjModel.from_xml_path(str(shared_assets / "anymal_c/anymal_c_mjcf_physics_only.xml"))
    ours = to_mjmodel(robot, actuators="none", floor=False)
    assert robot.total_mass == pytest.approx(44.965, abs=5e-4)
    assert sum(ours.body_mass) == pytest.approx(sum(ref.body_mass), rel=1e-9)
    for body in robot.bodies:
        assert ours.body_mass[ours.body(body.name).id] == pytest.approx(ref.body_mass[ref.body(body.name).id], rel=1e-9)
    _compare_mass_matrices(robot, ours, ref, np.random.default_rng(1))
    # Foot spheres where Menagerie has them.
    d_o, d_r = mujoco.MjData(ours), mujoco.MjData(ref)
    joints = dict(zip(robot.joint_names, robot.default_joint_positions()))
    for model, data in ((ours, d_o), (ref, d_r)):
        data.qpos[:] = qpos_for(model, [0, 0, 0.6], [1, 0, 0, 0], joints)
        mujoco.mj_kinematics(model, data)
    ref_spheres = sorted(tuple(d_r.geom_xpos[g]) for g in range(ref.ngeom)
                         if ref.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE)
    our_spheres = sorted(tuple(d_o.geom_xpos[ours.geom(f.name).id]) for f in robot.feet)
    np.testing.assert_allclose(our_spheres, ref_spheres, atol=1e-9)


def test_anymal_d_matches_its_urdf_in_mujoco(shared_assets):
    robot = get_robot("anymal_d")
    ref = load_urdf_in_mujoco(shared_assets / "anymal_d/anymal_d.urdf", ANYMAL_D_LOCKED)
    ours = to_mjmodel(robot, actuators="none", floor=False)
    assert robot.total_mass == pytest.approx(57.028, abs=1e-3)
    assert sum(ours.body_mass) == pytest.approx(sum(ref.body_mass), rel=1e-9)
    _compare_mass_matrices(robot, ours, ref, np.random.default_rng(2))


def test_warp_quadruped_matches_its_urdf_in_mujoco(shared_assets):
    robot = get_robot("warp_quadruped")
    ref = load_urdf_in_mujoco(shared_assets / "warp_quadruped/quadruped.urdf")
    ours = to_mjmodel(robot, actuators="none", floor=False)
    assert robot.total_mass == pytest.approx(6.222 + 12 * 2.04, rel=1e-9)
    _compare_mass_matrices(robot, ours, ref, np.random.default_rng(3))


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_default_pose_stands_just_above_the_ground(name):
    """At the default pose and base height all four feet are level and within 6 cm above the ground."""
    robot = get_robot(name)
    model = to_mjmodel(robot)
    data = mujoco.MjData(model)
    data.qpos[:] = qpos_for(model, [0, 0, robot.default_base_height], [1, 0, 0, 0],
                            dict(zip(robot.joint_names, robot.default_joint_positions())))
    mujoco.mj_kinematics(model, data)
    bottoms = np.array([data.geom_xpos[model.geom(f.name).id][2] - f.radius for f in robot.feet])
    assert len(bottoms) == 4
    assert np.all(bottoms > 0.0) and np.all(bottoms < 0.06), bottoms
    assert np.ptp(bottoms) < 1e-6


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_exported_mjcf_round_trips(name):
    """The MJCF text loads back in MuJoCo with the same masses and PD actuators."""
    robot = get_robot(name)
    model = mujoco.MjModel.from_xml_string(to_mjcf(robot))
    assert model.nq == 19 and model.nv == 18 and model.nu == 12
    assert sum(model.body_mass) == pytest.approx(robot.total_mass, rel=1e-9)
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], robot.actuator.stiffness)
    np.testing.assert_allclose(model.actuator_biasprm[:, 2], -robot.actuator.damping)


def test_isaaclab_joint_order_is_grouped_by_type():
    robot = get_robot("anymal_d")
    order = [robot.joint_names[i] for i in robot.isaaclab_permutation()]
    assert order[:4] == ["LF_HAA", "LH_HAA", "RF_HAA", "RH_HAA"]
    assert order[8:] == ["LF_KFE", "LH_KFE", "RF_KFE", "RH_KFE"]


def test_unknown_robot_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown robot 'anymal_x'.*anymal_d"):
        get_robot("anymal_x")


def test_package_does_not_read_shared_assets():
    """Definitions are self-contained: the package source never points at ../shared."""
    import pathlib

    import diffloco_ext

    root = pathlib.Path(diffloco_ext.__file__).parent
    offenders = [p for p in root.rglob("*.py") if "shared/assets" in p.read_text() or "shared\\assets" in p.read_text()]
    assert offenders == []


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_exported_joint_properties(name):
    """Joint limits (rad, on request), axes, damping and armature survive the export unchanged; by default the
    export leaves out what the simulator does not model (joint limits, Coulomb friction loss)."""
    robot = get_robot(name)
    model = to_mjmodel(robot, joint_limits=True, joint_friction=True)
    plain = to_mjmodel(robot)
    assert not plain.jnt_limited.any() and not plain.dof_frictionloss.any()
    for j in robot.joints:
        jid = model.joint(j.name).id
        np.testing.assert_allclose(model.jnt_axis[jid], j.axis, atol=1e-12)
        assert model.dof_frictionloss[model.jnt_dofadr[jid]] == pytest.approx(j.friction)
        if np.isfinite(j.lower):
            np.testing.assert_allclose(model.jnt_range[jid], [j.lower, j.upper], rtol=1e-12)
        assert model.dof_damping[model.jnt_dofadr[jid]] == pytest.approx(j.damping)
        assert model.dof_armature[model.jnt_dofadr[jid]] == pytest.approx(j.armature)


def test_quaternion_order_conversion_to_isaac_lab():
    """Isaac Lab 3.0 quaternions are (x, y, z, w); ours are (w, x, y, z)."""
    import torch

    from diffloco_ext.assets.rotations import quat_to_matrix, wxyz_to_xyzw, xyzw_to_wxyz

    wxyz = np.array([[np.cos(0.3), 0.0, 0.0, np.sin(0.3)]])  # 0.6 rad about z
    xyzw = wxyz_to_xyzw(wxyz)
    np.testing.assert_array_equal(xyzw, [[0.0, 0.0, np.sin(0.3), np.cos(0.3)]])
    np.testing.assert_array_equal(xyzw_to_wxyz(xyzw), wxyz)
    assert torch.equal(xyzw_to_wxyz(wxyz_to_xyzw(torch.tensor(wxyz))), torch.tensor(wxyz))
    np.testing.assert_allclose(quat_to_matrix(wxyz[0])[:2, :2],
                               [[np.cos(0.6), -np.sin(0.6)], [np.sin(0.6), np.cos(0.6)]])
