"""URDF importer: a floating-base URDF to a :class:`RobotDescription`, with fixed sub-links merged.

Every link hanging from its parent by a ``fixed`` joint (or by a joint named in ``locked_joints``) is merged
into the nearest moving ancestor body: masses add, the centre of mass is the mass-weighted mean, and the
inertias are rotated into the body frame and moved to the merged centre of mass by the parallel-axis theorem.
Links without ``<inertial>`` are massless frames (the URDF specification allows them); a moving body that
ends with no mass is an error. Sphere collision shapes are kept (they become foot contact spheres).

Every problem raises :class:`RobotDescriptionError` naming the file and the element; nothing half-built
is returned.

All primitive collision shapes (sphere, box, cylinder; meshes are skipped) are also kept, in their body's frame,
as :class:`CollisionPrimitive` (``UrdfImport.collisions``), for the body-terrain collision shapes.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from .robot_description import (
    Body,
    Joint,
    RobotDescription,
    RobotDescriptionError,
    check_mass_properties,
)
from .rotations import matrix_to_quat, rpy_to_matrix

_MOVING_TYPES = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic"}


@dataclass(frozen=True)
class CollisionSphere:
    """A sphere collision shape of the URDF, expressed in the frame of the body it was merged into."""

    link: str
    body: str
    center: tuple[float, float, float]
    radius: float


@dataclass(frozen=True)
class CollisionPrimitive:
    """A primitive ``<collision>`` of the URDF in the frame of the body it was merged into.

    ``kind``: ``"sphere"`` (size ``(r,)``), ``"cylinder"`` (``(r, half_length)``, axis local z) or ``"box"``
    (half extents); ``rot`` (3x3 nested tuples, the primitive's axes as columns) and ``pos`` (m) place it in
    the body frame. Sizes in m (MuJoCo's ``geom_size`` convention).
    """

    link: str
    body: str
    kind: str
    size: tuple[float, ...]
    rot: tuple[tuple[float, float, float], ...]
    pos: tuple[float, float, float]


@dataclass(frozen=True)
class UrdfImport:
    """Result of :func:`import_urdf`: the description and what was merged where."""

    robot: RobotDescription
    spheres: tuple[CollisionSphere, ...]
    merged_links: dict[str, str]
    """Each URDF link name -> name of the body it belongs to after merging."""
    collisions: tuple[CollisionPrimitive, ...] = ()


class _MassAccumulator:
    """Sum of rigid masses expressed in one body frame."""

    def __init__(self) -> None:
        self.parts: list[tuple[float, np.ndarray, np.ndarray]] = []

    def add(self, mass: float, com: np.ndarray, inertia_about_com: np.ndarray) -> None:
        self.parts.append((mass, com, inertia_about_com))

    def total(self) -> tuple[float, np.ndarray, np.ndarray]:
        mass = sum(p[0] for p in self.parts)
        if mass <= 0.0:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        com = sum(p[0] * p[1] for p in self.parts) / mass
        inertia = np.zeros((3, 3))
        for m, c, i_c in self.parts:
            d = c - com
            inertia += i_c + m * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
        return mass, com, 0.5 * (inertia + inertia.T)


def _floats(text: str | None, n: int, default: tuple, where: str) -> np.ndarray:
    if text is None:
        return np.array(default, dtype=np.float64)
    try:
        values = [float(v) for v in text.split()]
    except ValueError as exc:
        raise RobotDescriptionError(f"{where}: cannot parse numbers from '{text}'") from exc
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise RobotDescriptionError(f"{where}: expected {n} finite numbers, got '{text}'")
    return np.array(values, dtype=np.float64)


def _attr_float(elem: ET.Element | None, name: str, default: float, where: str) -> float:
    if elem is None or elem.get(name) is None:
        return default
    try:
        value = float(elem.get(name))
    except ValueError as exc:
        raise RobotDescriptionError(f"{where}: attribute {name}='{elem.get(name)}' is not a number") from exc
    if math.isnan(value):
        raise RobotDescriptionError(f"{where}: attribute {name} is NaN")
    return value


def _origin(elem: ET.Element, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(rotation 3x3, translation 3) of an element's ``<origin>`` child (identity when absent)."""
    origin = elem.find("origin")
    if origin is None:
        return np.eye(3), np.zeros(3)
    xyz = _floats(origin.get("xyz"), 3, (0.0, 0.0, 0.0), f"{where} <origin xyz>")
    rpy = _floats(origin.get("rpy"), 3, (0.0, 0.0, 0.0), f"{where} <origin rpy>")
    return rpy_to_matrix(rpy), xyz


def _link_inertial(link: ET.Element, where: str) -> tuple[float, np.ndarray, np.ndarray] | None:
    """(mass, com, inertia about com) in the link frame, or None for a massless link."""
    inertial = link.find("inertial")
    if inertial is None:
        return None
    mass_elem = inertial.find("mass")
    if mass_elem is None or mass_elem.get("value") is None:
        raise RobotDescriptionError(f"{where} <inertial>: missing <mass value=...>")
    mass = _attr_float(mass_elem, "value", 0.0, f"{where} <mass>")
    if mass < 0.0 or not math.isfinite(mass):
        raise RobotDescriptionError(f"{where} <mass>: mass must be non-negative and finite, got {mass}")
    inertia_elem = inertial.find("inertia")
    if inertia_elem is None:
        raise RobotDescriptionError(f"{where} <inertial>: missing <inertia>")
    comps = {}
    for key in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
        if inertia_elem.get(key) is None:
            raise RobotDescriptionError(f"{where} <inertia>: missing attribute {key}")
        comps[key] = _attr_float(inertia_elem, key, 0.0, f"{where} <inertia>")
    i_local = np.array(
        [
            [comps["ixx"], comps["ixy"], comps["ixz"]],
            [comps["ixy"], comps["iyy"], comps["iyz"]],
            [comps["ixz"], comps["iyz"], comps["izz"]],
        ]
    )
    rot, com = _origin(inertial, f"{where} <inertial>")
    return mass, com, rot @ i_local @ rot.T


def import_urdf(
    path: str | os.PathLike | None = None,
    *,
    text: str | None = None,
    locked_joints: tuple[str, ...] = (),
    name: str | None = None,
) -> UrdfImport:
    """Read a URDF file (or its ``text``) into a floating-base :class:`RobotDescription`.

    Args:
        path: URDF file; used in error messages when ``text`` is given too.
        text: URDF XML text (instead of reading ``path``).
        locked_joints: Names of moving joints to treat as fixed (merged), e.g. a payload's pan/tilt.
        name: Robot name; defaults to the URDF's ``<robot name>``.
    """
    src = str(path) if path is not None else "<urdf text>"
    if text is None:
        if path is None:
            raise ValueError("import_urdf needs a path or text")
        try:
            text = open(path, encoding="utf-8").read()
        except OSError as exc:
            raise RobotDescriptionError(f"{src}: cannot read URDF ({exc})") from exc
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise RobotDescriptionError(f"{src}: not well-formed XML ({exc})") from exc
    if root.tag != "robot":
        raise RobotDescriptionError(f"{src}: root element is <{root.tag}>, expected <robot>")

    links: dict[str, ET.Element] = {}
    for link in root.findall("link"):
        lname = link.get("name")
        if not lname:
            raise RobotDescriptionError(f"{src}: a <link> has no name")
        if lname in links:
            raise RobotDescriptionError(f"{src}: duplicate <link name='{lname}'>")
        links[lname] = link
    if not links:
        raise RobotDescriptionError(f"{src}: no <link> elements")

    children: dict[str, list[ET.Element]] = {n: [] for n in links}
    parent_of: dict[str, str] = {}
    joint_names: set[str] = set()
    for joint in root.findall("joint"):
        jname = joint.get("name")
        where = f"{src}: <joint name='{jname}'>"
        if not jname:
            raise RobotDescriptionError(f"{src}: a <joint> has no name")
        if jname in joint_names:
            raise RobotDescriptionError(f"{where}: duplicate joint name")
        joint_names.add(jname)
        jtype = joint.get("type")
        if jtype != "fixed" and jtype not in _MOVING_TYPES:
            raise RobotDescriptionError(
                f"{where}: unknown or unsupported joint type '{jtype}' "
                f"(supported: fixed, {', '.join(sorted(_MOVING_TYPES))})"
            )
        parent_elem, child_elem = joint.find("parent"), joint.find("child")
        if parent_elem is None or child_elem is None:
            raise RobotDescriptionError(f"{where}: needs <parent link> and <child link>")
        parent, child = parent_elem.get("link"), child_elem.get("link")
        for role, lname in (("parent", parent), ("child", child)):
            if lname not in links:
                raise RobotDescriptionError(f"{where}: {role} link '{lname}' is not defined")
        if child in parent_of:
            raise RobotDescriptionError(
                f"{where}: link '{child}' already has parent '{parent_of[child]}' (not a tree)"
            )
        parent_of[child] = parent
        children[parent].append(joint)
    for lname in locked_joints:
        if lname not in joint_names:
            raise RobotDescriptionError(f"{src}: locked joint '{lname}' is not in the file")

    roots = [n for n in links if n not in parent_of]
    if len(roots) != 1:
        if not roots:
            raise RobotDescriptionError(f"{src}: the joints form a cycle (no root link)")
        raise RobotDescriptionError(f"{src}: {len(roots)} root links {roots}; expected one tree")
    # Walk the tree; a link reached twice or not reached at all means a cycle.
    order: list[str] = []
    stack = [roots[0]]
    visited: set[str] = set()
    while stack:
        lname = stack.pop()
        if lname in visited:
            raise RobotDescriptionError(f"{src}: cycle through link '{lname}'")
        visited.add(lname)
        order.append(lname)
        stack.extend(j.find("child").get("link") for j in reversed(children[lname]))
    unreached = set(links) - visited
    if unreached:
        raise RobotDescriptionError(f"{src}: links {sorted(unreached)} are in a cycle detached from the root")

    # Depth-first walk in file order: owner body and pose of every link in its owner's frame.
    body_order: list[str] = [roots[0]]
    owner = {roots[0]: roots[0]}
    pose_in_owner = {roots[0]: (np.eye(3), np.zeros(3))}
    body_joint: dict[str, tuple[ET.Element, np.ndarray, np.ndarray]] = {}

    def visit(lname: str) -> None:
        for joint in children[lname]:
            child = joint.find("child").get("link")
            where = f"{src}: <joint name='{joint.get('name')}'>"
            rot_o, pos_o = _origin(joint, where)
            rot_p, pos_p = pose_in_owner[lname]
            rot_c, pos_c = rot_p @ rot_o, rot_p @ pos_o + pos_p
            if joint.get("type") == "fixed" or joint.get("name") in locked_joints:
                owner[child] = owner[lname]
                pose_in_owner[child] = (rot_c, pos_c)
            else:
                owner[child] = child
                pose_in_owner[child] = (np.eye(3), np.zeros(3))
                body_order.append(child)
                body_joint[child] = (joint, rot_c, pos_c)
            visit(child)

    visit(roots[0])

    accumulators = {b: _MassAccumulator() for b in body_order}
    spheres: list[CollisionSphere] = []
    collisions: list[CollisionPrimitive] = []
    for lname in order:
        where = f"{src}: <link name='{lname}'>"
        rot, pos = pose_in_owner[lname]
        inertial = _link_inertial(links[lname], where)
        if inertial is not None and inertial[0] > 0.0:
            m, com, i_c = inertial
            accumulators[owner[lname]].add(m, rot @ com + pos, rot @ i_c @ rot.T)
        for coll in links[lname].findall("collision"):
            primitive = _collision_primitive(coll, lname, owner[lname], rot, pos, where)
            if primitive is not None:
                collisions.append(primitive)
            sphere = coll.find("geometry/sphere")
            if sphere is None:
                continue
            radius = _attr_float(sphere, "radius", float("nan"), f"{where} <sphere>")
            if not radius > 0.0:
                raise RobotDescriptionError(f"{where} <sphere>: radius must be positive")
            _, c_pos = _origin(coll, f"{where} <collision>")
            center = rot @ c_pos + pos
            spheres.append(CollisionSphere(lname, owner[lname], tuple(float(v) for v in center), radius))

    bodies: list[Body] = []
    for bname in body_order:
        mass, com, inertia = accumulators[bname].total()
        bwhere = f"{src}: body '{bname}' (link '{bname}' with merged fixed links)"
        if mass <= 0.0:
            raise RobotDescriptionError(f"{bwhere}: missing <inertial> (no mass on the body or merged into it)")
        check_mass_properties(mass, inertia, bwhere)
        joint = None
        pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        parent = None
        if bname in body_joint:
            jelem, rot_c, pos_c = body_joint[bname]
            jwhere = f"{src}: <joint name='{jelem.get('name')}'>"
            axis = _floats(jelem.find("axis").get("xyz") if jelem.find("axis") is not None else None, 3,
                           (1.0, 0.0, 0.0), f"{jwhere} <axis>")
            norm = np.linalg.norm(axis)
            if norm < 1e-9:
                raise RobotDescriptionError(f"{jwhere} <axis>: zero axis")
            limit = jelem.find("limit")
            dyn = jelem.find("dynamics")
            jtype = jelem.get("type")
            unlimited = jtype == "continuous"
            joint = Joint(
                name=jelem.get("name"),
                type=_MOVING_TYPES[jtype],
                axis=tuple(float(v) for v in axis / norm),
                lower=-np.inf if unlimited else _attr_float(limit, "lower", -np.inf, f"{jwhere} <limit>"),
                upper=np.inf if unlimited else _attr_float(limit, "upper", np.inf, f"{jwhere} <limit>"),
                effort_limit=_attr_float(limit, "effort", np.inf, f"{jwhere} <limit>"),
                velocity_limit=_attr_float(limit, "velocity", np.inf, f"{jwhere} <limit>"),
                damping=_attr_float(dyn, "damping", 0.0, f"{jwhere} <dynamics>"),
                friction=_attr_float(dyn, "friction", 0.0, f"{jwhere} <dynamics>"),
            )
            parent = owner[parent_of[bname]]
            pos, quat = pos_c, matrix_to_quat(rot_c)
        bodies.append(
            Body(
                name=bname,
                parent=parent,
                joint=joint,
                pos=tuple(float(v) for v in pos),
                quat=tuple(float(v) for v in quat),
                mass=float(mass),
                com=tuple(float(v) for v in com),
                inertia=tuple(tuple(float(v) for v in row) for row in inertia),
            )
        )
    try:
        robot = RobotDescription(name=name or root.get("name") or "robot", bodies=tuple(bodies), source=src)
    except RobotDescriptionError as exc:
        raise RobotDescriptionError(f"{src}: {exc}") from exc
    return UrdfImport(robot=robot, spheres=tuple(spheres), merged_links=dict(owner), collisions=tuple(collisions))


def _collision_primitive(coll: ET.Element, link: str, body: str, rot: np.ndarray, pos: np.ndarray,
                         where: str) -> CollisionPrimitive | None:
    """A ``<collision>``'s sphere/box/cylinder in the body frame (``rot``, ``pos``: the link in the body); None for
    meshes and other geometry."""
    geometry = coll.find("geometry")
    if geometry is None or len(geometry) == 0:
        return None
    shape = geometry[0]
    cw = f"{where} <collision> <{shape.tag}>"
    if shape.tag == "sphere":
        size = (_attr_float(shape, "radius", float("nan"), cw),)
    elif shape.tag == "cylinder":
        size = (_attr_float(shape, "radius", float("nan"), cw), 0.5 * _attr_float(shape, "length", float("nan"), cw))
    elif shape.tag == "box":
        size = tuple(0.5 * _floats(shape.get("size"), 3, (float("nan"),) * 3, f"{cw} size"))
    else:
        return None
    if not all(v > 0.0 for v in size):
        raise RobotDescriptionError(f"{cw}: sizes must be positive, got {size}")
    c_rot, c_pos = _origin(coll, f"{where} <collision>")
    r, p = rot @ c_rot, rot @ c_pos + pos
    return CollisionPrimitive(link, body, shape.tag, tuple(float(v) for v in size),
                              tuple(tuple(float(v) for v in row) for row in r), tuple(float(v) for v in p))
