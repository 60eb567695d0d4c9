"""Bad robot descriptions give clear errors naming the file and element, never a half-built robot."""

from __future__ import annotations

import numpy as np
import pytest

from diffloco_ext.assets import RobotDescriptionError, get_robot, import_urdf
from diffloco_ext.assets.robot_description import Body, Joint

GOOD_LINK = """<link name="{name}"><inertial><mass value="1.0"/>
  <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>"""


def urdf(*parts: str) -> str:
    return '<robot name="t">' + "".join(parts) + "</robot>"


def joint(name, parent, child, jtype="revolute"):
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="10" velocity="5"/></joint>')


def test_well_formed_minimal_urdf_imports():
    robot = import_urdf(text=urdf(GOOD_LINK.format(name="a"), GOOD_LINK.format(name="b"), joint("j", "a", "b"))).robot
    assert robot.num_bodies == 2 and robot.joint_names == ("j",)


@pytest.mark.parametrize(
    "text, pattern",
    [
        (urdf(GOOD_LINK.format(name="a"), '<link name="b"/>', joint("j", "a", "b")),
         r"bad\.urdf: body 'b'.*missing <inertial>"),
        (urdf(GOOD_LINK.format(name="a"), GOOD_LINK.format(name="b"), joint("j", "a", "b", "planar")),
         r"bad\.urdf: <joint name='j'>: unknown or unsupported joint type 'planar'"),
        (urdf(GOOD_LINK.format(name="a"), GOOD_LINK.format(name="b"), joint("j1", "a", "b"), joint("j2", "b", "a")),
         r"bad\.urdf: .*(cycle|already has parent)"),
        (urdf(GOOD_LINK.format(name="a"), GOOD_LINK.format(name="b"), GOOD_LINK.format(name="c"),
              joint("j1", "b", "c"), joint("j2", "c", "b")),
         r"bad\.urdf: .*(cycle|already has parent|root)"),
        (urdf(GOOD_LINK.format(name="a"),
              '<link name="b"><inertial><mass value="1"/>'
              '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="-0.01"/></inertial></link>',
              joint("j", "a", "b")),
         r"bad\.urdf: body 'b'.*not positive definite"),
        (urdf(GOOD_LINK.format(name="a"), joint("j", "a", "ghost")),
         r"bad\.urdf: <joint name='j'>: child link 'ghost' is not defined"),
        ('<robot name="t"><link name="a">', r"bad\.urdf: not well-formed XML"),
        (urdf(GOOD_LINK.format(name="a").replace('value="1.0"', 'value="heavy"')),
         r"bad\.urdf: <link name='a'> <mass>.*not a number"),
        (urdf(GOOD_LINK.format(name="a"), GOOD_LINK.format(name="a")), r"duplicate <link name='a'>"),
    ],
    ids=["missing-inertial", "unknown-joint-type", "two-node-cycle", "detached-cycle", "non-pd-inertia",
         "undefined-link", "malformed-xml", "bad-number", "duplicate-link"],
)
def test_malformed_urdf_is_a_clear_error(text, pattern):
    with pytest.raises(RobotDescriptionError, match=pattern):
        import_urdf("bad.urdf", text=text)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(RobotDescriptionError, match="nope.urdf: cannot read URDF"):
        import_urdf(tmp_path / "nope.urdf")


def test_quirky_sub_link_inertias_are_fine_once_merged(shared_assets):
    """anymal_c.urdf has sub-links violating the triangle inequality / singular: valid after merging."""
    robot = import_urdf(shared_assets / "anymal_c/anymal_c.urdf").robot
    assert all(np.linalg.eigvalsh(b.inertia_matrix)[0] > 0 for b in robot.bodies)


def test_description_validation_names_the_element():
    robot = get_robot("warp_quadruped")
    bad = robot.bodies[1]
    with pytest.raises(RobotDescriptionError, match="body 'LF_HAA'.*mass must be positive"):
        robot.replace(bodies=(robot.bodies[0], Body(**{**bad.__dict__, "mass": 0.0}), *robot.bodies[2:]))
    with pytest.raises(RobotDescriptionError, match="joint 'LF_HAA': axis"):
        j = Joint(**{**bad.joint.__dict__, "axis": (0.0, 0.0, 0.0)})
        robot.replace(bodies=(robot.bodies[0], Body(**{**bad.__dict__, "joint": j}), *robot.bodies[2:]))
    with pytest.raises(RobotDescriptionError, match="topological order"):
        robot.replace(bodies=(robot.bodies[0], *robot.bodies[2:], robot.bodies[1]))
    with pytest.raises(RobotDescriptionError, match="unknown joint 'XX_HAA'"):
        robot.replace(default_joint_pos={"XX_HAA": 0.0})
