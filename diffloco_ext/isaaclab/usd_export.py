"""USD of a :class:`~diffloco_ext.assets.RobotDescription` and of a ground plane, written with ``pxr`` (local files:
no asset server needed).

Layout of the robot stage (units m, kg, s; Z up; angles in USD are degrees)::

    /Robot                      Xform, default prim, UsdPhysics.ArticulationRootAPI
        /PhysicsMaterial        UsdShade.Material + UsdPhysics.MaterialAPI, bound to every collider
        /base, /LF_HIP, ...     one Xform per body: RigidBodyAPI + MassAPI; its pose is the body frame in the
                                world at zero joint positions with the base frame at the origin
            /collision_0, ...   the description's collision capsules (UsdGeom.Capsule, or Sphere), CollisionAPI
        /LF_FOOT, ...           one small body per foot sphere, its frame at the sphere centre, holding the sphere
                                collider (Isaac Lab's rewards and contact sensors look up bodies named ``.*FOOT``)
        /joints/LF_HAA, ...     UsdPhysics.RevoluteJoint per description joint, limits in degrees, angular drive
        /joints/LF_FOOT_fixed   UsdPhysics.FixedJoint from the foot's body to the foot

Joints: a USD revolute joint turns about an axis of its joint frame (``X`` here). The joint frame sits at the child
body origin (the description's convention), rotated by ``R_a`` that takes ``X`` onto the description's axis:
``localRot1 = R_a`` in the child and ``localRot0 = quat * R_a`` in the parent (``localPos0 = pos``), so a joint
angle ``q`` turns the child by ``q`` about the description's axis, in the description's sign.

Mass: each body carries the description's mass, centre of mass (``physics:centerOfMass``) and inertia as principal
moments (``physics:diagonalInertia``) with their axes (``physics:principalAxes``) in the body frame. A foot body
gets :data:`FOOT_MASS` of its parent's mass (a solid sphere at the sphere centre); the parent keeps the rest with
its centre of mass and inertia corrected (:func:`split_foot_mass`), so each shank plus its foot is the
description's shank exactly (:func:`merge_mass_properties`). USD stores these as float32 (relative rounding
below 1e-7).

Colliders: the foot spheres and the description's capsules (base, hips where present, thighs, shanks; boxes and
cylinders of the source approximated by capsules inside them, see
:mod:`diffloco_ext.assets.collision_approximation`). They carry no mass (the bodies' ``MassAPI`` is explicit). One
physics material with explicit friction is bound to all of them: engines disagree on the default (without one,
PhysX's ANYmal slid and collapsed while Newton's stood).

Files are written once per content (the file name holds a hash of the description and the options) into
:func:`usd_cache_dir`, atomically, so concurrent processes may ask for the same file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from diffloco_ext.assets.robot_description import RobotDescription
from diffloco_ext.assets.rotations import matrix_to_quat, quat_to_matrix

#: Mass of each foot body (kg), taken from the body the foot sphere is attached to.
FOOT_MASS = 0.02
#: Version of the layout: part of the file hash, bump when the written content changes.
EXPORT_VERSION = 1
FRICTION_COMBINE_MODES = ("average", "min", "multiply", "max")


@dataclass(frozen=True)
class MassProperties:
    """Mass (kg), centre of mass (m) and 3x3 inertia about the centre of mass (kg m^2), in one body frame."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray


def _shift(inertia_com: np.ndarray, mass: float, d: np.ndarray) -> np.ndarray:
    """Inertia about a point ``d`` away from the centre of mass (parallel axis theorem)."""
    d = np.asarray(d, dtype=np.float64)
    return inertia_com + mass * (float(d @ d) * np.eye(3) - np.outer(d, d))


def merge_mass_properties(a: MassProperties, b: MassProperties) -> MassProperties:
    """The mass properties of two bodies rigidly joined (both given in the same frame)."""
    mass = a.mass + b.mass
    com = (a.mass * a.com + b.mass * b.com) / mass
    inertia = _shift(a.inertia, a.mass, a.com - com) + _shift(b.inertia, b.mass, b.com - com)
    return MassProperties(mass, com, inertia)


def foot_mass_properties(radius: float, centre, mass: float = FOOT_MASS) -> MassProperties:
    """A solid sphere of ``mass`` (kg) and ``radius`` (m) centred at ``centre`` (m)."""
    return MassProperties(mass, np.asarray(centre, dtype=np.float64), 0.4 * mass * radius**2 * np.eye(3))


def split_foot_mass(body: MassProperties, foot: MassProperties) -> MassProperties:
    """What remains of ``body`` once ``foot`` (same frame) is taken out: ``merge(result, foot) == body``."""
    mass = body.mass - foot.mass
    if mass <= 0.0:
        raise ValueError(f"a foot of {foot.mass} kg cannot be taken out of a body of {body.mass} kg")
    com = (body.mass * body.com - foot.mass * foot.com) / mass
    inertia = body.inertia - _shift(foot.inertia, foot.mass, foot.com - body.com) - mass * (
        float((com - body.com) @ (com - body.com)) * np.eye(3) - np.outer(com - body.com, com - body.com))
    if np.linalg.eigvalsh(inertia)[0] <= 0.0:
        raise ValueError("taking the foot out leaves a body with a non-positive-definite inertia")
    return MassProperties(mass, com, inertia)


def usd_mass_properties(robot: RobotDescription) -> dict[str, MassProperties]:
    """The mass properties written for each USD body (description bodies, with the feet taken out of their
    parents, and the foot bodies in their own frames), by body name."""
    props = {b.name: MassProperties(b.mass, np.asarray(b.com, dtype=np.float64), b.inertia_matrix)
             for b in robot.bodies}
    for foot in robot.feet:
        in_parent = foot_mass_properties(foot.radius, foot.offset)
        props[foot.body] = split_foot_mass(props[foot.body], in_parent)
        props[foot.name] = foot_mass_properties(foot.radius, np.zeros(3))
    return props


def body_world_poses(robot: RobotDescription) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``(position, 3x3 rotation)`` of every body frame and foot frame in the world at zero joint positions, with
    the base frame at the origin."""
    poses: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for body in robot.bodies:
        if body.parent is None:
            poses[body.name] = (np.zeros(3), np.eye(3))
            continue
        p, r = poses[body.parent]
        poses[body.name] = (p + r @ np.asarray(body.pos), r @ quat_to_matrix(body.quat))
    for foot in robot.feet:
        p, r = poses[foot.body]
        poses[foot.name] = (p + r @ np.asarray(foot.offset), r.copy())
    return poses


def rotation_onto(src, dst) -> np.ndarray:
    """The smallest rotation (3x3) taking unit vector ``src`` onto unit vector ``dst`` (a half turn about an axis
    normal to ``src`` when they are opposite)."""
    a = np.asarray(src, dtype=np.float64) / np.linalg.norm(src)
    b = np.asarray(dst, dtype=np.float64) / np.linalg.norm(dst)
    c = float(a @ b)
    if c > 1.0 - 1e-12:
        return np.eye(3)
    if c < -1.0 + 1e-12:
        normal = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 0.0, 1.0])
        normal /= np.linalg.norm(normal)
        return 2.0 * np.outer(normal, normal) - np.eye(3)
    v = np.cross(a, b)
    vx = np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    return np.eye(3) + vx + vx @ vx / (1.0 + c)


def principal_axes(inertia: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(moments [3], rotation 3x3)`` with ``inertia = R diag(moments) R^T`` and ``det R = +1``."""
    moments, axes = np.linalg.eigh(np.asarray(inertia, dtype=np.float64))
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    return moments, axes


# ---- writing ---------------------------------------------------------------------------------------------------
def _gf_quat(rot: np.ndarray, kind: str = "f"):
    from pxr import Gf

    w, x, y, z = (float(v) for v in matrix_to_quat(rot))
    return Gf.Quatf(w, Gf.Vec3f(x, y, z)) if kind == "f" else Gf.Quatd(w, Gf.Vec3d(x, y, z))


def _set_pose(prim, pos, rot) -> None:
    from pxr import Gf, UsdGeom

    xf = UsdGeom.Xformable(prim)
    xf.ClearXformOpOrder()
    xf.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*(float(v) for v in pos)))
    xf.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(_gf_quat(rot, "d"))


def _define_material(stage, path: str, friction: float, combine_mode: str):
    from pxr import Sdf, UsdPhysics, UsdShade

    material = UsdShade.Material.Define(stage, path)
    api = UsdPhysics.MaterialAPI.Apply(material.GetPrim())
    api.CreateStaticFrictionAttr(float(friction))
    api.CreateDynamicFrictionAttr(float(friction))
    api.CreateRestitutionAttr(0.0)
    prim = material.GetPrim()
    # PhysX's combine mode (PhysxMaterialAPI, authored by name: the PhysX schema module is not needed to write it)
    prim.AddAppliedSchema("PhysxMaterialAPI")
    prim.CreateAttribute("physxMaterial:frictionCombineMode", Sdf.ValueTypeNames.Token).Set(combine_mode)
    prim.CreateAttribute("physxMaterial:restitutionCombineMode", Sdf.ValueTypeNames.Token).Set(combine_mode)
    return material


def _bind(prim, material) -> None:
    from pxr import UsdShade

    UsdShade.MaterialBindingAPI.Apply(prim).Bind(material, UsdShade.Tokens.weakerThanDescendants, "physics")


def _add_capsule(stage, path: str, start, end, radius: float, material):
    from pxr import UsdGeom, UsdPhysics

    a, b = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    length = float(np.linalg.norm(b - a))
    if length < 1e-12:
        geom = UsdGeom.Sphere.Define(stage, path)
        geom.CreateRadiusAttr(float(radius))
        rot = np.eye(3)
    else:
        geom = UsdGeom.Capsule.Define(stage, path)
        geom.CreateAxisAttr("Z")
        geom.CreateHeightAttr(length)
        geom.CreateRadiusAttr(float(radius))
        rot = rotation_onto([0.0, 0.0, 1.0], (b - a) / length)
    _set_pose(geom.GetPrim(), 0.5 * (a + b), rot)
    UsdPhysics.CollisionAPI.Apply(geom.GetPrim())
    _bind(geom.GetPrim(), material)
    return geom


def _set_mass(prim, props: MassProperties) -> None:
    from pxr import Gf, UsdPhysics

    moments, axes = principal_axes(props.inertia)
    mass_api = UsdPhysics.MassAPI.Apply(prim)
    mass_api.CreateMassAttr(float(props.mass))
    mass_api.CreateCenterOfMassAttr(Gf.Vec3f(*(float(v) for v in props.com)))
    mass_api.CreateDiagonalInertiaAttr(Gf.Vec3f(*(float(v) for v in moments)))
    mass_api.CreatePrincipalAxesAttr(_gf_quat(axes, "f"))


def write_robot_usd(robot: RobotDescription, path: str, *, friction: float = 1.0,
                    friction_combine_mode: str = "max") -> str:
    """Write ``robot`` to the USD file ``path`` (layout in the module docstring). ``friction``: static and dynamic
    friction of the robot's physics material, ``friction_combine_mode``: how PhysX combines it with the ground's
    (Newton's MuJoCo-Warp solver always takes the larger of the two). Returns ``path``."""
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

    if friction_combine_mode not in FRICTION_COMBINE_MODES:
        raise ValueError(f"friction_combine_mode must be one of {FRICTION_COMBINE_MODES}, "
                         f"got '{friction_combine_mode}'")
    if robot.actuator is None:
        raise ValueError(f"robot '{robot.name}' has no drive model (actuator): its joints cannot be driven")
    stage = Usd.Stage.CreateNew(path)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/Robot").GetPrim()
    stage.SetDefaultPrim(root)
    UsdPhysics.ArticulationRootAPI.Apply(root)
    material = _define_material(stage, "/Robot/PhysicsMaterial", friction, friction_combine_mode)
    UsdGeom.Scope.Define(stage, "/Robot/joints")

    poses = body_world_poses(robot)
    props = usd_mass_properties(robot)
    shapes_by_body: dict[str, list] = {}
    for shape in robot.collision_shapes:
        shapes_by_body.setdefault(shape.body, []).append(shape)

    def add_body(name: str):
        prim = UsdGeom.Xform.Define(stage, f"/Robot/{name}").GetPrim()
        _set_pose(prim, *poses[name])
        UsdPhysics.RigidBodyAPI.Apply(prim)
        _set_mass(prim, props[name])
        return prim

    act = robot.actuator
    for body in robot.bodies:
        add_body(body.name)
        for i, shape in enumerate(shapes_by_body.get(body.name, [])):
            _add_capsule(stage, f"/Robot/{body.name}/collision_{i}", shape.start, shape.end, shape.radius, material)
        if body.joint is None:
            continue
        j = body.joint
        if j.type != "revolute":
            raise ValueError(f"robot '{robot.name}', joint '{j.name}': only revolute joints are exported, "
                             f"got '{j.type}'")
        align = rotation_onto([1.0, 0.0, 0.0], j.axis)
        joint = UsdPhysics.RevoluteJoint.Define(stage, f"/Robot/joints/{j.name}")
        joint.CreateBody0Rel().SetTargets([Sdf.Path(f"/Robot/{body.parent}")])
        joint.CreateBody1Rel().SetTargets([Sdf.Path(f"/Robot/{body.name}")])
        joint.CreateAxisAttr("X")
        joint.CreateLocalPos0Attr(Gf.Vec3f(*(float(v) for v in body.pos)))
        joint.CreateLocalRot0Attr(_gf_quat(quat_to_matrix(body.quat) @ align))
        joint.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
        joint.CreateLocalRot1Attr(_gf_quat(align))
        if np.isfinite(j.lower) and np.isfinite(j.upper):
            joint.CreateLowerLimitAttr(float(np.degrees(j.lower)))
            joint.CreateUpperLimitAttr(float(np.degrees(j.upper)))
        drive = UsdPhysics.DriveAPI.Apply(joint.GetPrim(), "angular")
        drive.CreateTypeAttr("force")
        drive.CreateStiffnessAttr(float(act.stiffness * np.pi / 180.0))  # USD drive gains are per degree
        drive.CreateDampingAttr(float(act.damping * np.pi / 180.0))
        drive.CreateMaxForceAttr(float(act.saturation_effort))

    for foot in robot.feet:
        prim = add_body(foot.name)
        sphere = UsdGeom.Sphere.Define(stage, f"/Robot/{foot.name}/collision")
        sphere.CreateRadiusAttr(float(foot.radius))
        UsdPhysics.CollisionAPI.Apply(sphere.GetPrim())
        _bind(sphere.GetPrim(), material)
        fixed = UsdPhysics.FixedJoint.Define(stage, f"/Robot/joints/{foot.name}_fixed")
        fixed.CreateBody0Rel().SetTargets([Sdf.Path(f"/Robot/{foot.body}")])
        fixed.CreateBody1Rel().SetTargets([prim.GetPath()])
        fixed.CreateLocalPos0Attr(Gf.Vec3f(*(float(v) for v in foot.offset)))
        fixed.CreateLocalRot0Attr(Gf.Quatf(1.0))
        fixed.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
        fixed.CreateLocalRot1Attr(Gf.Quatf(1.0))
    stage.GetRootLayer().Save()
    return path


def write_ground_usd(path: str, *, size: float = 200.0) -> str:
    """A ground plane at z = 0 (``/Ground`` with a child ``UsdGeom.Plane`` carrying the collider, the shape Isaac
    Lab's ``spawn_ground_plane`` binds its physics material to; the collider is an infinite plane, ``size`` (m)
    only sets the drawn extent). Returns ``path``."""
    from pxr import Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.CreateNew(path)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/Ground").GetPrim()
    stage.SetDefaultPrim(root)
    plane = UsdGeom.Plane.Define(stage, "/Ground/plane")
    plane.CreateAxisAttr("Z")
    plane.CreateWidthAttr(float(size))
    plane.CreateLengthAttr(float(size))
    plane.CreateDisplayColorAttr([(0.45, 0.47, 0.5)])
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())
    stage.GetRootLayer().Save()
    return path


# ---- cached files ----------------------------------------------------------------------------------------------
def usd_cache_dir() -> str:
    """Where generated USD files go: ``$DIFFLOCO_USD_DIR``, else ``~/.cache/diffloco/usd``."""
    return os.environ.get("DIFFLOCO_USD_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "diffloco", "usd")


def _cached(name: str, key: str, writer) -> str:
    directory = usd_cache_dir()
    os.makedirs(directory, exist_ok=True)
    digest = hashlib.sha1(f"{EXPORT_VERSION}:{key}".encode()).hexdigest()[:12]
    path = os.path.join(directory, f"{name}-{digest}.usda")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(suffix=".usda", dir=directory)
        os.close(fd)
        os.remove(tmp)  # pxr creates the layer itself
        try:
            writer(tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return path


def robot_usd_path(robot: RobotDescription, **kwargs) -> str:
    """The robot's USD file (written on first use, see :func:`write_robot_usd` for ``kwargs``)."""
    return _cached(robot.name, repr((robot, sorted(kwargs.items()))),
                   lambda p: write_robot_usd(robot, p, **kwargs))


def ground_usd_path(**kwargs) -> str:
    """The ground plane's USD file (written on first use, see :func:`write_ground_usd`)."""
    return _cached("ground", repr(sorted(kwargs.items())), lambda p: write_ground_usd(p, **kwargs))
