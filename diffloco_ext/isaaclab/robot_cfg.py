"""A project robot as an Isaac Lab ``ArticulationCfg``: the USD of :mod:`.usd_export`, the description's drive model
as Isaac Lab's ``DCMotorCfg``, the standing pose, and the joint order fixed by name.

* Actuators: one explicit ``DCMotorCfg`` group over all joints (Isaac Lab computes the torque
  ``clip(k_p (q* - q) - k_d qdot)`` inside the DC-motor torque-speed envelope and sends it to the solver, whose
  own drive gains it sets to zero): k_p, k_d, peak (saturation) torque, continuous torque limit and no-load
  speed from ``robot.actuator`` -- the model of the project's simulator (:mod:`diffloco_ext.sim.actuators`).
* Joint order: ``joint_ordering`` is the description's ``isaaclab_joint_order`` (grouped by joint type: LF_HAA,
  LH_HAA, RF_HAA, RH_HAA, LF_HFE, ...), whatever the engine's own order (Newton's is leg by leg, PhysX's grouped
  by type), so the policy's joint order is the same on every engine; bodies are ordered explicitly too
  (:func:`body_order`).
* Self-collisions off: the project's simulator models foot-ground and body-ground contact only.
"""

from __future__ import annotations

import isaaclab.sim as sim_utils
from isaaclab.actuators import DCMotorCfg
from isaaclab.assets import ArticulationCfg
from isaaclab_newton.sim.schemas import NewtonArticulationCfg
from isaaclab_physx.sim.schemas import PhysxArticulationCfg, PhysxRigidBodyCfg

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.robot_description import RobotDescription

from .usd_export import robot_usd_path


def body_order(robot: RobotDescription) -> tuple[str, ...]:
    """The articulation's public body order: the description's bodies (topological, base first), then the feet."""
    return tuple(b.name for b in robot.bodies) + tuple(f.name for f in robot.feet)


def joint_order(robot: RobotDescription) -> tuple[str, ...]:
    """The articulation's public joint order: Isaac Lab's for this robot (the policy's)."""
    return tuple(robot.isaaclab_joint_order) or robot.joint_names


def dc_motor_cfg(robot: RobotDescription) -> DCMotorCfg:
    """The description's drive model (all joints) as Isaac Lab's DC motor."""
    act = robot.actuator
    if act is None:
        raise ValueError(f"robot '{robot.name}' has no drive model (actuator)")
    armature = {j.name: float(j.armature) for j in robot.joints}
    return DCMotorCfg(
        joint_names_expr=list(robot.joint_names),
        stiffness=float(act.stiffness),
        damping=float(act.damping),
        saturation_effort=float(act.saturation_effort),
        actuator_effort_limit=float(act.effort_limit),
        actuator_velocity_limit=float(act.velocity_limit),
        armature=armature,
        friction=0.0,  # the project's simulator models no joint Coulomb friction
    )


def robot_cfg(robot: str | RobotDescription, *, prim_path: str = "{ENV_REGEX_NS}/Robot", base_height: float = 0.65,
              friction: float = 1.0, friction_combine_mode: str = "max") -> ArticulationCfg:
    """The Isaac Lab articulation of a project robot (name or description), spawned at ``base_height`` (m) in its
    default pose. ``friction``/``friction_combine_mode``: the robot's physics material (see
    :func:`~.usd_export.write_robot_usd`)."""
    robot = get_robot(robot) if isinstance(robot, str) else robot
    return ArticulationCfg(
        prim_path=prim_path,
        spawn=sim_utils.UsdFileCfg(
            usd_path=robot_usd_path(robot, friction=friction, friction_combine_mode=friction_combine_mode),
            activate_contact_sensors=True,
            rigid_props=PhysxRigidBodyCfg(
                disable_gravity=False, retain_accelerations=False, linear_damping=0.0, angular_damping=0.0,
                max_linear_velocity=1000.0, max_angular_velocity=1000.0, max_depenetration_velocity=1.0,
            ),
            articulation_props=[
                PhysxArticulationCfg(enabled_self_collisions=False, solver_position_iteration_count=4,
                                     solver_velocity_iteration_count=0),
                NewtonArticulationCfg(self_collision_enabled=False),
            ],
        ),
        init_state=ArticulationCfg.InitialStateCfg(
            pos=(0.0, 0.0, float(base_height)),
            joint_pos={name: float(robot.default_joint_pos.get(name, 0.0)) for name in robot.joint_names},
        ),
        actuators={"legs": dc_motor_cfg(robot)},
        soft_joint_pos_limit_factor=0.95,
        joint_ordering=joint_order(robot),
        body_ordering=body_order(robot),
    )
