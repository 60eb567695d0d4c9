"""Robot description data model: the static facts the simulator, the tasks and the exporters share.

Frames and units (SI throughout: m, kg, kg·m², rad, N·m, rad/s):

* Every body has a frame. The root body (the floating base) is placed in the world by a free joint.
  Every other body hangs from its parent by exactly one joint; the body frame *is* the joint frame
  (URDF convention, and MuJoCo's with the joint at the body origin).
* ``Body.pos`` / ``Body.quat`` place the body frame in its parent's frame at zero joint position
  (quaternion ``(w, x, y, z)``).
* ``Joint.axis`` is a unit vector in the body (= joint) frame. A revolute joint at position ``q`` rotates the
  body by ``q`` about that axis; a prismatic one translates it by ``q`` along it.
* ``Body.com`` is the centre of mass in the body frame; ``Body.inertia`` the 3x3 rotational inertia about
  the centre of mass, expressed in the body frame.
* ``FootSphere.offset`` is the sphere centre in its body's frame.
* ``CollisionShape.start`` / ``.end`` are the end points of a capsule's axis segment in its body's frame (m);
  a sphere is a capsule whose end points coincide. Collision shapes are *not* foot spheres: feet push on the
  ground in the contact solver; collision shapes only report their gap to the terrain (for terminations and
  penalties of tasks, e.g. base or thigh contact).

Bodies are stored in topological order (every parent before its children), root first; that order is the
simulator's body order, and the order of the joints (one per non-root body) is its joint (DOF) order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

JOINT_TYPES = ("revolute", "prismatic")


class RobotDescriptionError(ValueError):
    """A robot description (or the file it was read from) is malformed. The message names the element."""


@dataclass(frozen=True)
class Joint:
    """A one-degree-of-freedom joint between a body and its parent.

    Attributes:
        name: Joint name (as in the source description, e.g. ``"LF_HAA"``).
        type: ``"revolute"`` (rad) or ``"prismatic"`` (m).
        axis: Unit axis in the child body frame.
        lower, upper: Position limits (rad or m); ``-inf``/``inf`` when unlimited.
        effort_limit: Maximum |torque| (N·m) or |force| (N) of the drive; ``inf`` when unknown.
        velocity_limit: Maximum |velocity| (rad/s or m/s); ``inf`` when unknown.
        damping: Viscous joint damping (N·m·s/rad).
        armature: Reflected rotor inertia added to the joint-space inertia diagonal (kg·m²).
        friction: Coulomb joint friction (N·m); carried for exporters, not modelled by the simulator yet.
    """

    name: str
    type: str = "revolute"
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    lower: float = -np.inf
    upper: float = np.inf
    effort_limit: float = np.inf
    velocity_limit: float = np.inf
    damping: float = 0.0
    armature: float = 0.0
    friction: float = 0.0


@dataclass(frozen=True)
class Body:
    """A rigid body of the tree (see the module docstring for frames).

    Attributes:
        name: Body name.
        parent: Parent body name, ``None`` for the floating base.
        joint: Joint to the parent, ``None`` for the floating base.
        pos: Body frame origin in the parent frame at zero joint position (m).
        quat: Body frame orientation in the parent frame at zero joint position, ``(w, x, y, z)``.
        mass: Mass (kg).
        com: Centre of mass in the body frame (m).
        inertia: 3x3 inertia about the centre of mass in the body frame (kg·m²), row-major nested tuples.
    """

    name: str
    parent: str | None
    joint: Joint | None
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]
    mass: float
    com: tuple[float, float, float]
    inertia: tuple[tuple[float, float, float], ...]

    @property
    def inertia_matrix(self) -> np.ndarray:
        return np.asarray(self.inertia, dtype=np.float64).reshape(3, 3)


@dataclass(frozen=True)
class FootSphere:
    """A contact sphere rigidly attached to a body (ANYmal: one per foot).

    Attributes:
        name: Foot name (e.g. ``"LF_FOOT"``).
        body: Name of the body it is attached to.
        offset: Sphere centre in the body frame (m).
        radius: Sphere radius (m).
    """

    name: str
    body: str
    offset: tuple[float, float, float]
    radius: float


@dataclass(frozen=True)
class CollisionShape:
    """A capsule (a sphere when ``start == end``) rigidly attached to a body, for body-terrain gaps.

    The set of points within ``radius`` of the segment from ``start`` to ``end``. Robots transcribe these from
    their sources' collision geometry (boxes and cylinders approximated by capsules inside them, see
    :mod:`diffloco_ext.assets.collision_approximation`).

    Attributes:
        body: Name of the body it is attached to.
        start, end: Segment end points in the body frame (m).
        radius: Capsule radius (m).
        source: Where it comes from (e.g. ``"LF_thigh_fixed box 0.093x0.063x0.285"``), for humans.
    """

    body: str
    start: tuple[float, float, float]
    end: tuple[float, float, float]
    radius: float
    source: str = ""

    @property
    def is_sphere(self) -> bool:
        return tuple(self.start) == tuple(self.end)


@dataclass(frozen=True)
class ActuatorParams:
    """Joint drive model: PD position tracking inside a DC-motor torque-speed envelope.

    ``tau = clip(kp (q* - q) - kd qdot, -limit(qdot), limit(qdot))`` where the limit follows the DC-motor
    line from ``saturation_effort`` at zero speed to zero at ``velocity_limit``, and is capped at
    ``effort_limit`` (the model of Isaac Lab's ``DCMotorCfg``).

    Attributes:
        stiffness: PD position gain k_p (N·m/rad).
        damping: PD velocity gain k_d (N·m·s/rad).
        effort_limit: Continuous torque limit (N·m).
        saturation_effort: Peak (stall) torque of the motor (N·m).
        velocity_limit: No-load speed of the motor (rad/s).
    """

    stiffness: float
    damping: float
    effort_limit: float
    saturation_effort: float
    velocity_limit: float

    def torque_bounds(self, joint_vel):
        """``(tau_min, tau_max)`` (N·m) of the DC-motor envelope at joint speeds ``joint_vel`` (rad/s; a numpy array or
        a torch tensor, the result of the same kind, differentiable for torch):
        ``tau_max = clip(S (1 - qd / v), 0, E)``, ``tau_min = clip(S (-1 - qd / v), -E, 0)`` (``S`` the saturation
        effort, ``E`` the effort limit, ``v`` the no-load speed). The one definition the task's reward terms, the
        validation and the MuJoCo replay use (the simulator's Warp kernels implement the same line)."""
        ratio = joint_vel / self.velocity_limit
        upper = (self.saturation_effort * (1.0 - ratio)).clip(0.0, self.effort_limit)
        lower = (self.saturation_effort * (-1.0 - ratio)).clip(-self.effort_limit, 0.0)
        return lower, upper

    def pd_torque(self, target, joint_pos, joint_vel, stiffness=None, damping=None):
        """The drive torque (N·m) ``clip(k_p (q* - q) - k_d qd, tau_min(qd), tau_max(qd))`` of joint targets,
        angles and speeds (rad, rad/s; numpy arrays or torch tensors, the result of the same kind, differentiable
        for torch). ``stiffness``, ``damping``: gains broadcastable to the joints (e.g. [N, 1] or [N, n] per env)
        in place of this drive's. The one PD-in-envelope formula of the MuJoCo engine, the surrogate model and
        the validation."""
        kp = self.stiffness if stiffness is None else stiffness
        kd = self.damping if damping is None else damping
        tau = kp * (target - joint_pos) - kd * joint_vel
        lower, upper = self.torque_bounds(joint_vel)
        if hasattr(tau, "maximum"):  # torch
            return tau.maximum(lower).minimum(upper)
        return np.clip(tau, lower, upper)


@dataclass(frozen=True)
class RobotDescription:
    """A floating-base robot: bodies in topological order, foot spheres, actuators and defaults.

    Attributes:
        name: Robot name (``"anymal_d"``, ...).
        bodies: Bodies in topological order, the floating base first.
        feet: Contact spheres.
        actuator: Drive model shared by all actuated joints.
        default_joint_pos: Default (standing) joint positions by joint name (rad); missing joints are 0.
        default_base_height: Standing height of the base frame above the ground (m).
        isaaclab_joint_order: Joint names in the order Isaac Lab's articulation uses for this robot.
        source: Where the figures come from, with license name.
        collision_shapes: Capsules/spheres per body for body-terrain gaps (not foot contacts), any order.
    """

    name: str
    bodies: tuple[Body, ...]
    feet: tuple[FootSphere, ...] = ()
    actuator: ActuatorParams | None = None
    default_joint_pos: dict[str, float] = field(default_factory=dict)
    default_base_height: float = 0.5
    isaaclab_joint_order: tuple[str, ...] = ()
    source: str = ""
    collision_shapes: tuple[CollisionShape, ...] = ()

    def __post_init__(self) -> None:
        validate(self)

    # -- derived views ---------------------------------------------------------------------------------
    @property
    def num_bodies(self) -> int:
        return len(self.bodies)

    @property
    def joints(self) -> tuple[Joint, ...]:
        """Joints in simulator (DOF) order: the joint of each non-root body."""
        return tuple(b.joint for b in self.bodies[1:])

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def num_joints(self) -> int:
        return len(self.bodies) - 1

    @property
    def total_mass(self) -> float:
        return float(sum(b.mass for b in self.bodies))

    @property
    def collision_bodies(self) -> tuple[str, ...]:
        """Names of the bodies that have collision shapes, in body order (the order of body gaps)."""
        have = {c.body for c in self.collision_shapes}
        return tuple(b.name for b in self.bodies if b.name in have)

    def body_index(self, name: str) -> int:
        for i, b in enumerate(self.bodies):
            if b.name == name:
                return i
        raise KeyError(f"robot '{self.name}' has no body '{name}' (bodies: {[b.name for b in self.bodies]})")

    def parent_indices(self) -> np.ndarray:
        """Parent body index per body, -1 for the root (int array, shape ``[num_bodies]``)."""
        return np.array([-1] + [self.body_index(b.parent) for b in self.bodies[1:]], dtype=np.int32)

    def default_joint_positions(self) -> np.ndarray:
        """Default joint positions in simulator order (rad), shape ``[num_joints]``."""
        return np.array([self.default_joint_pos.get(n, 0.0) for n in self.joint_names], dtype=np.float64)

    def isaaclab_permutation(self) -> np.ndarray:
        """Indices ``p`` such that ``x_isaaclab = x_sim[p]`` for per-joint vectors."""
        if not self.isaaclab_joint_order:
            return np.arange(self.num_joints)
        names = self.joint_names
        return np.array([names.index(n) for n in self.isaaclab_joint_order], dtype=np.int64)

    def replace(self, **changes) -> "RobotDescription":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def validate(robot: RobotDescription) -> None:
    """Check a description; raise :class:`RobotDescriptionError` naming the offending element."""
    where = f"robot '{robot.name}'"
    if not robot.bodies:
        raise RobotDescriptionError(f"{where}: has no bodies")
    seen: set[str] = set()
    joint_names: set[str] = set()
    for i, body in enumerate(robot.bodies):
        bw = f"{where}, body '{body.name}'"
        if body.name in seen:
            raise RobotDescriptionError(f"{bw}: duplicate body name")
        if i == 0:
            if body.parent is not None or body.joint is not None:
                raise RobotDescriptionError(f"{bw}: the first body is the floating base and has no parent/joint")
        else:
            if body.parent not in seen:
                raise RobotDescriptionError(
                    f"{bw}: parent '{body.parent}' is not an earlier body (bodies must be in topological order)"
                )
            if body.joint is None:
                raise RobotDescriptionError(f"{bw}: a non-root body needs a joint")
            j = body.joint
            if j.type not in JOINT_TYPES:
                raise RobotDescriptionError(f"{bw}, joint '{j.name}': unknown joint type '{j.type}'")
            if j.name in joint_names:
                raise RobotDescriptionError(f"{bw}: duplicate joint name '{j.name}'")
            joint_names.add(j.name)
            axis = np.asarray(j.axis, dtype=np.float64)
            if axis.shape != (3,) or not np.isfinite(axis).all() or abs(np.linalg.norm(axis) - 1.0) > 1e-6:
                raise RobotDescriptionError(f"{bw}, joint '{j.name}': axis {j.axis} is not a unit 3-vector")
            if not j.lower <= j.upper:
                raise RobotDescriptionError(f"{bw}, joint '{j.name}': lower limit {j.lower} > upper {j.upper}")
            for attr in ("damping", "armature", "friction", "effort_limit", "velocity_limit"):
                if getattr(j, attr) < 0:
                    raise RobotDescriptionError(f"{bw}, joint '{j.name}': negative {attr}")
        seen.add(body.name)
        check_mass_properties(body.mass, body.inertia_matrix, bw)
        for vec, label, n in ((body.pos, "pos", 3), (body.quat, "quat", 4), (body.com, "com", 3)):
            arr = np.asarray(vec, dtype=np.float64)
            if arr.shape != (n,) or not np.isfinite(arr).all():
                raise RobotDescriptionError(f"{bw}: {label} must be {n} finite numbers, got {vec}")
        if abs(np.linalg.norm(body.quat) - 1.0) > 1e-6:
            raise RobotDescriptionError(f"{bw}: quat {body.quat} is not a unit quaternion")
    for foot in robot.feet:
        if foot.body not in seen:
            raise RobotDescriptionError(f"{where}, foot '{foot.name}': unknown body '{foot.body}'")
        if not foot.radius > 0:
            raise RobotDescriptionError(f"{where}, foot '{foot.name}': radius must be positive")
    for i, shape in enumerate(robot.collision_shapes):
        cw = f"{where}, collision shape {i} ({shape.source or 'unnamed'})"
        if shape.body not in seen:
            raise RobotDescriptionError(f"{cw}: unknown body '{shape.body}'")
        for vec, label in ((shape.start, "start"), (shape.end, "end")):
            arr = np.asarray(vec, dtype=np.float64)
            if arr.shape != (3,) or not np.isfinite(arr).all():
                raise RobotDescriptionError(f"{cw}: {label} must be 3 finite numbers, got {vec}")
        if not (np.isfinite(shape.radius) and shape.radius > 0):
            raise RobotDescriptionError(f"{cw}: radius must be positive and finite, got {shape.radius}")
    for name in robot.default_joint_pos:
        if name not in joint_names:
            raise RobotDescriptionError(f"{where}: default_joint_pos names unknown joint '{name}'")
    if robot.isaaclab_joint_order and sorted(robot.isaaclab_joint_order) != sorted(joint_names):
        raise RobotDescriptionError(f"{where}: isaaclab_joint_order is not a permutation of the joint names")


def check_mass_properties(mass: float, inertia: np.ndarray, where: str) -> None:
    """Positive mass and a symmetric positive-definite inertia satisfying the triangle inequality."""
    if not np.isfinite(mass) or mass <= 0.0:
        raise RobotDescriptionError(f"{where}: mass must be positive and finite, got {mass}")
    inertia = np.asarray(inertia, dtype=np.float64)
    if inertia.shape != (3, 3) or not np.isfinite(inertia).all():
        raise RobotDescriptionError(f"{where}: inertia must be a finite 3x3 matrix")
    if np.abs(inertia - inertia.T).max() > 1e-9 * max(1.0, np.abs(inertia).max()):
        raise RobotDescriptionError(f"{where}: inertia is not symmetric")
    eig = np.linalg.eigvalsh(inertia)
    if eig[0] <= 0.0:
        raise RobotDescriptionError(f"{where}: inertia is not positive definite (eigenvalues {eig})")
    a, b, c = eig
    if a + b < c * (1.0 - 1e-6):
        raise RobotDescriptionError(f"{where}: inertia violates the triangle inequality (principal {eig})")
