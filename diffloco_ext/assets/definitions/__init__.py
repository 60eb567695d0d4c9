"""The project's robot definitions (figures transcribed by ``scripts/tools/transcribe_assets.py``)."""

from __future__ import annotations

from ..robot_description import ActuatorParams, Body, CollisionShape, FootSphere, Joint, RobotDescription

#: Joint order of Isaac Lab's ANYmal/quadruped articulations: grouped by joint type, legs LF, LH, RF, RH.
ISAACLAB_QUADRUPED_JOINT_ORDER = tuple(
    f"{leg}_{kind}" for kind in ("HAA", "HFE", "KFE") for leg in ("LF", "LH", "RF", "RH")
)


def build_robot(
    name: str,
    figures,
    *,
    actuator: ActuatorParams,
    default_joint_pos: dict[str, float],
    default_base_height: float,
    source: str,
    isaaclab_joint_order: tuple[str, ...] = ISAACLAB_QUADRUPED_JOINT_ORDER,
) -> RobotDescription:
    """A :class:`RobotDescription` from a figures module (``BODIES``, ``FEET`` and ``COLLISION_SHAPES`` tuples of
    dicts)."""
    bodies = tuple(
        Body(
            name=b["name"], parent=b["parent"], pos=b["pos"], quat=b["quat"], mass=b["mass"], com=b["com"],
            inertia=b["inertia"], joint=None if b["joint"] is None else Joint(type="revolute", **b["joint"]),
        )
        for b in figures.BODIES
    )
    feet = tuple(FootSphere(**f) for f in figures.FEET)
    shapes = tuple(CollisionShape(**c) for c in getattr(figures, "COLLISION_SHAPES", ()))
    return RobotDescription(
        name=name, bodies=bodies, feet=feet, actuator=actuator, default_joint_pos=dict(default_joint_pos),
        default_base_height=default_base_height, isaaclab_joint_order=isaaclab_joint_order, source=source,
        collision_shapes=shapes,
    )


def anymal_default_joint_pos() -> dict[str, float]:
    """Isaac Lab's ANYmal standing pose: HAA 0, HFE ±0.4 (front +), KFE ∓0.8 (front −), in rad."""
    pose = {}
    for leg in ("LF", "RF", "LH", "RH"):
        front = leg[1] == "F"
        pose[f"{leg}_HAA"] = 0.0
        pose[f"{leg}_HFE"] = 0.4 if front else -0.4
        pose[f"{leg}_KFE"] = -0.8 if front else 0.8
    return pose


#: ANYdrive 3 as a DC-motor model: the envelope of Isaac Lab's ``ANYDRIVE_3_SIMPLE_ACTUATOR_CFG`` (80 N·m effort
#: limit, 120 N·m saturation, 7.5 rad/s) with PD gains k_p 80 N·m/rad (legged_gym's ANYmal value) and
#: k_d 4 N·m·s/rad. Isaac Lab's simple gains (k_p 40, k_d 5) cannot hold the 57 kg ANYmal D in its default pose:
#: in our hard-contact simulation it sags to a 0.41 m base height and shifts 13 cm backwards; with 80/4 it stands
#: at 0.545 m, still within 0.1 mm over 10 s (tests/sim/test_contact_physics.py).
ANYDRIVE_3 = ActuatorParams(stiffness=80.0, damping=4.0, effort_limit=80.0, saturation_effort=120.0,
                            velocity_limit=7.5)
