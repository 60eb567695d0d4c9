"""MJCF export of a :class:`RobotDescription`, loaded through MuJoCo's ``MjSpec``.

The exported model has the same bodies (frames, masses, centres of mass, full inertias), hinge/slide joints
(axes, viscous damping, armature; limits and Coulomb friction loss only on request, since the simulator models
neither: see :func:`to_mjcf`), a free joint on the base, one sphere geom per foot (named
after the foot) and, on request, one actuator per joint:

* ``actuators="position"``: MuJoCo position servos with the description's PD gains (``kp``, ``kv``) and a force
  range of ± the DC-motor saturation torque. The DC-motor torque-speed line is not representable in MJCF;
  use ``"motor"`` and compute the torque outside (as the validation layer does) when it matters.
* ``actuators="motor"``: torque motors (``ctrl`` = joint torque in N·m, clamped to ± saturation).
* ``actuators="none"``.

Only foot spheres collide (robot self-collision and body-ground contact are left out on purpose: the
differentiable simulator models foot contact only, and the exported model is used to compare against it). The
ground is a plane at z = 0, or a height field (:func:`add_height_field`, ``to_mjspec(robot, terrain=...)``).

The MJCF text is written here with full float precision (``repr``) and then parsed by
``mujoco.MjSpec.from_string``: ``MjSpec.to_xml`` rounds numbers to 6 significant digits, which moves masses
by up to 1e-5 kg and mass matrices by more than the 1e-6 relative the project checks.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np

from .robot_description import RobotDescription

ACTUATOR_KINDS = ("position", "motor", "none")


def _num(*values) -> str:
    return " ".join(repr(float(v)) for v in values)


def to_mjcf(
    robot: RobotDescription,
    *,
    timestep: float = 0.002,
    actuators: str = "position",
    floor: bool = True,
    friction: float = 1.0,
    base_height: float | None = None,
    joint_limits: bool = False,
    joint_friction: bool = False,
    visuals: bool = False,
    body_collisions: bool = False,
) -> str:
    """The robot as MJCF XML text (optionally on a floor plane at z = 0).

    Args:
        robot: The description.
        timestep: MuJoCo time step (s).
        actuators: ``"position"``, ``"motor"`` or ``"none"`` (see module docstring).
        floor: Add a ground plane at z = 0 (contacting the foot spheres only).
        friction: Sliding friction coefficient of foot-ground contacts.
        base_height: Initial base height (m); defaults to ``robot.default_base_height``.
        joint_limits: Write the joints' ``range`` (limited hinges). Off by default: the differentiable simulator
            does not model joint limits, so a comparison would compare different physics (limits are a gate of
            the validation layer and a penalty of the tasks instead).
        visuals: Add the collision capsules as visual geoms (group 1: no contacts, no mass), for rendering.
        joint_friction: Write the joints' Coulomb ``frictionloss``. Off by default for the same reason (the
            simulator models viscous joint damping, which is always written, but no joint Coulomb friction).
        body_collisions: The collision capsules (base, thighs, shanks) collide with the ground as the feet do
            (no mass; not with each other): on terrain, where a shank can hit a stair's edge. Off by default: on
            flat ground the differentiable simulator's feet are its only contacts, and the comparison is like for
            like.
    """
    if actuators not in ACTUATOR_KINDS:
        raise ValueError(f"actuators must be one of {ACTUATOR_KINDS}, got '{actuators}'")
    if actuators != "none" and robot.actuator is None:
        raise ValueError(f"robot '{robot.name}' has no actuator parameters; use actuators='none'")
    root = ET.Element("mujoco", model=robot.name)
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    # Elliptic friction cones with a high impedance ratio make MuJoCo's (soft) friction nearly hard, as in
    # MuJoCo Menagerie's ANYmal model; with the default pyramidal cone and impratio 1 feet creep while standing.
    ET.SubElement(root, "option", timestep=repr(float(timestep)), cone="elliptic", impratio="100")
    world = ET.SubElement(root, "worldbody")
    contact_friction = _num(friction, 0.005, 0.0001)
    # Foot spheres collide with the floor only: floor contype 2, feet conaffinity 2, nothing else collides.
    if floor:
        ET.SubElement(world, "geom", name="floor", type="plane", size="0 0 0.05", contype="2", conaffinity="0",
                      friction=contact_friction)

    height = robot.default_base_height if base_height is None else base_height
    elements: dict[str, ET.Element] = {}
    for body in robot.bodies:
        parent = world if body.parent is None else elements[body.parent]
        pos = (0.0, 0.0, height) if body.parent is None else body.pos
        elem = ET.SubElement(parent, "body", name=body.name, pos=_num(*pos), quat=_num(*body.quat))
        i = body.inertia_matrix
        ET.SubElement(elem, "inertial", pos=_num(*body.com), mass=repr(float(body.mass)),
                      fullinertia=_num(i[0, 0], i[1, 1], i[2, 2], i[0, 1], i[0, 2], i[1, 2]))
        elements[body.name] = elem
        if body.joint is None:
            ET.SubElement(elem, "freejoint", name=f"{body.name}_free")
            continue
        j = body.joint
        attrs = dict(name=j.name, type="hinge" if j.type == "revolute" else "slide", axis=_num(*j.axis),
                     damping=repr(float(j.damping)), armature=repr(float(j.armature)))
        if joint_friction:
            attrs["frictionloss"] = repr(float(j.friction))
        if joint_limits and np.isfinite(j.lower) and np.isfinite(j.upper):
            attrs["range"] = _num(j.lower, j.upper)
        ET.SubElement(elem, "joint", **attrs)

    # the collision capsules as visual geometry only: group 1, no contacts, no mass (inertials are explicit)
    if visuals:
        for i, shape in enumerate(robot.collision_shapes):
            geom = dict(name=f"{shape.body}_visual_{i}", contype="0", conaffinity="0", group="1", mass="0",
                        rgba="0.35 0.38 0.42 1")
            if shape.is_sphere:
                geom.update(type="sphere", size=repr(float(shape.radius)), pos=_num(*shape.start))
            else:
                geom.update(type="capsule", size=repr(float(shape.radius)), fromto=_num(*shape.start, *shape.end))
            ET.SubElement(elements[shape.body], "geom", **geom)

    if body_collisions:  # the capsules against the ground only (conaffinity 2), as the feet
        for i, shape in enumerate(robot.collision_shapes):
            geom = dict(name=f"{shape.body}_collision_{i}", contype="0", conaffinity="2", condim="3", mass="0",
                        friction=contact_friction)
            if shape.is_sphere:
                geom.update(type="sphere", size=repr(float(shape.radius)), pos=_num(*shape.start))
            else:
                geom.update(type="capsule", size=repr(float(shape.radius)), fromto=_num(*shape.start, *shape.end))
            ET.SubElement(elements[shape.body], "geom", **geom)

    for foot in robot.feet:
        ET.SubElement(elements[foot.body], "geom", name=foot.name, type="sphere", size=repr(float(foot.radius)),
                      pos=_num(*foot.offset), contype="0", conaffinity="2", condim="3", mass="0",
                      friction=contact_friction)

    if actuators != "none":
        act = robot.actuator
        group = ET.SubElement(root, "actuator")
        for j in robot.joints:
            force = _num(-act.saturation_effort, act.saturation_effort)
            if actuators == "position":
                ET.SubElement(group, "position", name=j.name, joint=j.name, kp=repr(float(act.stiffness)),
                              kv=repr(float(act.damping)), forcerange=force)
            else:
                ET.SubElement(group, "motor", name=j.name, joint=j.name, ctrlrange=force, forcerange=force)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def to_mjspec(robot: RobotDescription, terrain: tuple | None = None, **kwargs) -> mujoco.MjSpec:
    """The robot as an editable ``MjSpec`` (arguments as :func:`to_mjcf`); with ``terrain`` (``(heights, origin_xy,
    resolution)``), on that height field instead of the floor plane (:func:`add_height_field`)."""
    if terrain is not None:
        kwargs["floor"] = False
    spec = mujoco.MjSpec.from_string(to_mjcf(robot, **kwargs))
    if terrain is not None:
        add_height_field(spec, *terrain, friction=kwargs.get("friction", 1.0))
    return spec


def to_mjmodel(robot: RobotDescription, terrain: tuple | None = None, **kwargs) -> mujoco.MjModel:
    """The robot compiled to an ``MjModel`` (arguments as :func:`to_mjspec`)."""
    return to_mjspec(robot, terrain, **kwargs).compile()


def add_height_field(spec: mujoco.MjSpec, heights: np.ndarray, origin_xy: tuple[float, float], resolution: float,
                     friction: float = 1.0, base_thickness: float = 1.0, name: str = "terrain") -> None:
    """Add a height field to ``spec``'s world as the ground the feet collide with (as the floor plane would):
    ``heights`` [nx, ny] (m) at the nodes ``(x0 + i res, y0 + j res)`` (``origin_xy = (x0, y0)``), the simulator's
    layout (:class:`diffloco_ext.sim.terrain.HeightField`). MuJoCo stores rows along y and columns along x,
    normalised to its elevation range: the geom is placed at the lowest height and spans the range, so the
    surface's nodes are exactly ``heights``. Between nodes MuJoCo's surface is two triangles per cell (the
    simulator's is bilinear): the two agree at the nodes and along the cell edges."""
    h = np.asarray(heights, dtype=np.float64)
    if h.ndim != 2 or min(h.shape) < 2 or not np.isfinite(h).all():
        raise ValueError(f"height field: heights must be a finite [nx >= 2, ny >= 2] array, got shape {h.shape}")
    if not resolution > 0:
        raise ValueError(f"height field: resolution must be > 0 m, got {resolution}")
    nx, ny = h.shape
    low, span = float(h.min()), float(h.max() - h.min())
    elevation = max(span, 1e-6)  # MuJoCo needs a positive elevation range (a flat field: all zero)
    field = spec.add_hfield(name=name, nrow=ny, ncol=nx,
                            size=[(nx - 1) * resolution / 2, (ny - 1) * resolution / 2, elevation, base_thickness])
    field.userdata = ((h - low) / elevation).T.ravel().tolist()
    spec.worldbody.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name,
                            pos=[origin_xy[0] + (nx - 1) * resolution / 2, origin_xy[1] + (ny - 1) * resolution / 2,
                                 low],
                            contype=2, conaffinity=0, friction=[friction, 0.005, 0.0001])
