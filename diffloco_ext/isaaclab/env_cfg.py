"""The velocity-tracking task as an Isaac Lab ``ManagerBasedRLEnvCfg`` (``DiffLoco-Velocity-Flat-*-Isaac``).

Every value is read from the project's task config (:mod:`diffloco_ext.tasks.velocity.env_cfg`, the single
source of truth); this module only says which Isaac Lab term carries it. The policy interface is the same, so a
policy moves between the differentiable task and this one unchanged: 48 observations in the same order with the
same training noise (and the gait clock after them where the task has it: :func:`.mdp.gait_clock`), 12 actions in
Isaac Lab's joint order (``target = default + 0.5 action``), 50 Hz (0.005 s x 4), 20 s episodes.

Project terms (weight) and the Isaac Lab terms that carry them:

* tracking, lin_vel_z, ang_vel_xy, flat_orientation, joint_torques, joint_acc, action_rate: Isaac Lab's ``mdp``
  functions of the same names (Isaac Lab's torques and accelerations are the last physics step's, the project's
  the policy step's mean);
* foot_height_reference (1.0): :class:`~.mdp.foot_height_reference` (the project's functions);
* undesired_contact (-1.0 per cm of thigh/shank penetration): ``undesired_contacts``, the count of thighs and shanks
  with contact force > 1 N (penetration is not observable in PhysX/Newton);
* joint_pos_limits (-10), termination (-50), base_height (-50, 0.55 m), alive (1.0): ``joint_pos_limits`` (soft
  factor 0.95), ``is_terminated``, ``base_height_l2``, ``is_alive``;
* foot_slip, excess_joint_vel, torque_saturation (gait terms): :mod:`.mdp`'s terms of the same names (the project's
  functions; torque_saturation on the actuators' computed and applied efforts, at the last substep);
  swing_contact_force (where the task weights it): :class:`~.mdp.swing_contact_force` on the contact sensor's feet;
  ``after_curriculum``: :mod:`.curriculum` turns them on when the command ranges are full.

Randomisation at every reset, as the project's: foot and body friction U(0.4, 1.2) (Isaac Lab samples static and
dynamic friction apart, made consistent; the ground's material has the range's lower bound and both combine by
``max``, so the robot's value is the contact's on PhysX and on Newton), base mass x log-U(0.8, 1.25) with its
inertia scaled alike, base centre of mass +-5 cm (x, y) / +-1 cm (z), PD gains x U(0.85, 1.15) (Isaac Lab per
joint, the project one factor per env), pushes of +-0.5 m/s every 10-15 s. Resets: base at 0.65 m, +-0.5 m, yaw
+-pi, every velocity component +-0.5, joints at the default pose x U(0.5, 1.5). The ranges the project's
``RandomizationCfg.after_curriculum`` sets take the events' place once the command curriculum is done
(:mod:`.curriculum`).

The project's command curriculum (initial ranges widening to the full ones, then the final resampling period, the
``after_curriculum`` reward terms, the ``weights_curriculum_end`` and ``weights_after_curriculum`` weights and the
pushes) is the curriculum term ``commands`` (:mod:`.curriculum`), on
Isaac Lab's policy-step counter. The twins carry the registered tasks' training recipe (``make train``'s), except
the settings :data:`NOT_MIRRORED` names, which Isaac Lab has no counterpart for.

Physics presets (``presets=NAME`` on the ``isaaclab`` command line): ``newton_mjwarp`` (default; MuJoCo-Warp,
2 substeps, implicitfast, elliptic cones, impratio 100, as Isaac Lab's flat ANYmal-D task), ``physx`` (standalone
PhysX, package ``ovphysx``, or Isaac Sim's PhysX where Isaac Sim is installed), ``isaacsim_physx`` (Isaac Sim's:
needs Isaac Sim and an RTX GPU), ``ovphysx``.
"""

from __future__ import annotations

import isaaclab.sim as sim_utils
from isaaclab.assets import AssetBaseCfg
from isaaclab.envs import ManagerBasedRLEnvCfg, mdp
from isaaclab.managers import (
    CurriculumTermCfg as CurrTerm,
    EventTermCfg as EventTerm,
    ObservationGroupCfg as ObsGroup,
    ObservationTermCfg as ObsTerm,
    RewardTermCfg as RewTerm,
    SceneEntityCfg,
    TerminationTermCfg as DoneTerm,
)
from isaaclab.physics import PhysxAutoCfg
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.sensors import ContactSensorCfg
from isaaclab.sim import SimulationCfg
from isaaclab.utils import configclass
from isaaclab.utils.noise import UniformNoiseCfg as Unoise
from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg, NewtonShapeCfg
from isaaclab_ov.physics import OvPhysxCfg
from isaaclab_physx.physics import PhysxCfg
from isaaclab_physx.sim.spawners.materials import PhysxRigidBodyMaterialCfg
from isaaclab_tasks.utils import PresetCfg

from diffloco_ext.assets import get_robot
from diffloco_ext.tasks.velocity import env_cfg as task_cfg

from . import mdp as diffloco_mdp
from .curriculum import RANDOMIZATION_AFTER_CURRICULUM, velocity_command_curriculum
from .robot_cfg import robot_cfg
from .usd_export import ground_usd_path
from .warp_cpu import enable_cpu_pinned_fallback


@configclass
class VelocityPhysicsCfg(PresetCfg):
    """Physics presets (see the module docstring)."""

    isaacsim_physx = PhysxCfg()
    ovphysx = OvPhysxCfg()
    physx = PhysxAutoCfg(isaacsim_physx=isaacsim_physx, ovphysx=ovphysx)
    newton_mjwarp = NewtonCfg(
        solver_cfg=MJWarpSolverCfg(njmax=200, nconmax=64, cone="elliptic", impratio=100.0, integrator="implicitfast",
                                   use_mujoco_contacts=False),
        num_substeps=2,
        debug_mode=False,
        default_shape_cfg=NewtonShapeCfg(margin=0.0, ke=160000.0, kd=1100.0),
    )
    default = newton_mjwarp


def ground_material(friction: float) -> PhysxRigidBodyMaterialCfg:
    """The ground's physics material: ``friction`` static and dynamic, combined with the robot's by ``max`` (the
    combine mode is PhysX's; Newton's MuJoCo-Warp always takes the larger of the two)."""
    return PhysxRigidBodyMaterialCfg(static_friction=friction, dynamic_friction=friction, restitution=0.0,
                                     friction_combine_mode="max", restitution_combine_mode="max")


@configclass
class VelocitySceneCfg(InteractiveSceneCfg):
    """A ground plane (our USD), the robot, contact sensors on every body."""

    ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.GroundPlaneCfg())
    robot = None
    contact_forces = ContactSensorCfg(prim_path="{ENV_REGEX_NS}/Robot/.*", history_length=3, track_air_time=True)
    light = AssetBaseCfg(prim_path="/World/light", spawn=sim_utils.DistantLightCfg(intensity=3000.0))


def policy_observations(noise: task_cfg.ObservationNoiseCfg, command_name: str = "base_velocity",
                        gait_clock_period: float | None = None):
    """The policy group: the project's 48 observations in its order, with its training noise (uniform +-width);
    with ``gait_clock_period`` (s) the gait clock after them (50, the task's ``gait_clock``)."""

    def unoise(width: float):
        return Unoise(n_min=-width, n_max=width) if width > 0 else None

    @configclass
    class PolicyCfg(ObsGroup):
        base_lin_vel = ObsTerm(func=mdp.base_lin_vel, noise=unoise(noise.base_lin_vel))
        base_ang_vel = ObsTerm(func=mdp.base_ang_vel, noise=unoise(noise.base_ang_vel))
        projected_gravity = ObsTerm(func=mdp.projected_gravity, noise=unoise(noise.projected_gravity))
        velocity_commands = ObsTerm(func=mdp.generated_commands, params={"command_name": command_name})
        joint_pos = ObsTerm(func=mdp.joint_pos_rel, noise=unoise(noise.joint_pos))
        joint_vel = ObsTerm(func=mdp.joint_vel_rel, noise=unoise(noise.joint_vel))
        actions = ObsTerm(func=mdp.last_action)
        gait_clock = None if gait_clock_period is None else ObsTerm(func=diffloco_mdp.gait_clock,
                                                                    params={"period": gait_clock_period})

        def __post_init__(self):
            self.enable_corruption = noise.enable
            self.concatenate_terms = True

    @configclass
    class ObservationsCfg:
        policy: PolicyCfg = PolicyCfg()

    return ObservationsCfg()


def actions_cfg(joint_names, actions: task_cfg.ActionsCfg):
    @configclass
    class ActionsCfg:
        joint_pos = mdp.JointPositionActionCfg(asset_name="robot", joint_names=list(joint_names), preserve_order=True,
                                               scale=actions.scale, use_default_offset=True, clip=None if actions.clip
                                               is None else {".*": (-actions.clip, actions.clip)})

    return ActionsCfg()


def commands_cfg(c: task_cfg.CommandsCfg):
    if c.boundary_command_fraction > 0.0:
        raise ValueError("boundary_command_fraction (planar commands moved to the edge of their ranges) has no "
                         "counterpart in Isaac Lab's UniformVelocityCommand here; use 0")
    if c.tracking_reference_accel is not None:
        raise ValueError("tracking_reference_accel (the tracking rewards follow a rate-limited reference of the "
                         "command) has no counterpart in Isaac Lab's velocity tracking terms here; use None")
    # without a curriculum the project's task uses resampling_time_final (if set) from the start; with one,
    # resampling_time until the ranges are full (curriculum_cfg's term switches it)
    period = c.resampling_time if c.resampling_time_final is None or c.has_curriculum else c.resampling_time_final

    @configclass
    class CommandsCfg:
        base_velocity = mdp.UniformVelocityCommandCfg(
            asset_name="robot", resampling_time_range=(period, period),
            rel_standing_envs=c.rel_standing_envs, rel_heading_envs=c.rel_heading_envs,
            heading_command=c.heading_command, heading_control_stiffness=c.heading_control_stiffness,
            debug_vis=False,
            ranges=mdp.UniformVelocityCommandCfg.Ranges(lin_vel_x=c.lin_vel_x, lin_vel_y=c.lin_vel_y,
                                                        ang_vel_z=c.ang_vel_z, heading=c.heading),
        )

    return CommandsCfg()


def curriculum_cfg(c: task_cfg.CommandsCfg, r: task_cfg.RewardsCfg, rand: task_cfg.RandomizationCfg):
    """The project's command curriculum (:mod:`.curriculum`): always present, so that it can be set on the
    ``isaaclab`` command line (``env.curriculum.commands.params.num_steps=...``); without one in the project's task
    (``has_curriculum`` false) it keeps the full ranges and turns nothing off."""
    pushes = rand.enable and rand.push_velocity_xy > 0

    @configclass
    class CurriculumCfg:
        commands = CurrTerm(func=velocity_command_curriculum, params={
            "command_name": "base_velocity", "num_steps": c.curriculum_steps if c.has_curriculum else 0,
            "initial_scale": c.curriculum_initial_scale, "initial_lin_vel_x": c.curriculum_initial_lin_vel_x,
            "initial_lin_vel_y": c.curriculum_initial_lin_vel_y, "initial_ang_vel_z": c.curriculum_initial_ang_vel_z,
            "start_step": 0,
            "resampling_time": c.resampling_time, "resampling_time_final": c.resampling_time_final,
            "after_curriculum": list(r.after_curriculum),
            "weights_after_curriculum": dict(r.weights_after_curriculum), "weights_ramp": list(r.weights_ramp),
            "weights_curriculum_end": dict(r.weights_curriculum_end),
            "weights_curriculum_ramp": list(r.weights_curriculum_ramp),
            "push_term": "push_robot" if pushes and rand.pushes_after_curriculum else None,
            **{f"{name}_after_curriculum": getattr(rand.after_curriculum, name)
               for name in RANDOMIZATION_AFTER_CURRICULUM}, "ranges_ramp": list(rand.ranges_ramp)})

    return CurriculumCfg()


def rewards_cfg(r: task_cfg.RewardsCfg, foot: task_cfg.FootHeightReferenceCfg, gait: task_cfg.GaitCfg,
                foot_radius: float, velocity_limit: float, effort_limit: float):
    cmd = {"command_name": "base_velocity"}

    @configclass
    class RewardsCfg:
        track_lin_vel_xy = RewTerm(func=mdp.track_lin_vel_xy_exp, weight=r.track_lin_vel_xy,
                                   params={**cmd, "std": r.track_lin_vel_xy_std})
        track_ang_vel_z = RewTerm(func=mdp.track_ang_vel_z_exp, weight=r.track_ang_vel_z,
                                  params={**cmd, "std": r.track_ang_vel_z_std})
        lin_vel_z = RewTerm(func=mdp.lin_vel_z_l2, weight=r.lin_vel_z)
        ang_vel_xy = RewTerm(func=mdp.ang_vel_xy_l2, weight=r.ang_vel_xy)
        flat_orientation = RewTerm(func=mdp.flat_orientation_l2, weight=r.flat_orientation)
        joint_torques = RewTerm(func=mdp.joint_torques_l2, weight=r.joint_torques)
        joint_acc = RewTerm(func=mdp.joint_acc_l2, weight=r.joint_acc)
        action_rate = RewTerm(func=mdp.action_rate_l2, weight=r.action_rate)
        foot_height_reference = RewTerm(
            func=diffloco_mdp.foot_height_reference, weight=r.foot_height_reference,
            params={**cmd, "asset_cfg": SceneEntityCfg("robot", body_names=".*_FOOT", preserve_order=True),
                    "foot_radius": foot_radius, "phase_offsets": dict(gait.phase_offsets), "duty": gait.duty,
                    "period": gait.period, "swing_height": gait.swing_height, "std": foot.std,
                    "standing_threshold": foot.standing_threshold})
        undesired_contact = RewTerm(
            func=mdp.undesired_contacts, weight=r.undesired_contact,
            params={"sensor_cfg": SceneEntityCfg("contact_forces", body_names=[".*THIGH", ".*SHANK"]),
                    "threshold": 1.0})
        joint_pos_limits = RewTerm(func=mdp.joint_pos_limits, weight=r.joint_pos_limits)
        termination = RewTerm(func=mdp.is_terminated, weight=r.termination)
        base_height = RewTerm(func=mdp.base_height_l2, weight=r.base_height,
                              params={"target_height": r.base_height_target})
        alive = RewTerm(func=mdp.is_alive, weight=r.alive)
        foot_slip = RewTerm(
            func=diffloco_mdp.foot_slip, weight=r.foot_slip,
            params={"asset_cfg": SceneEntityCfg("robot", body_names=".*_FOOT", preserve_order=True),
                    "foot_radius": foot_radius, "height": r.foot_slip_height, "width": r.foot_slip_width})
        excess_joint_vel = RewTerm(func=diffloco_mdp.excess_joint_vel, weight=r.excess_joint_vel,
                                   params={"limit": r.excess_joint_vel_ratio * velocity_limit})
        torque_saturation = RewTerm(func=diffloco_mdp.torque_saturation, weight=r.torque_saturation,
                                    params={"effort_limit": effort_limit})
        swing_contact_force = RewTerm(
            func=diffloco_mdp.swing_contact_force, weight=r.swing_contact_force,
            params={**cmd, "sensor_cfg": SceneEntityCfg("contact_forces", body_names=".*_FOOT", preserve_order=True),
                    "phase_offsets": dict(gait.phase_offsets), "duty": gait.duty, "period": gait.period,
                    "swing_height": gait.swing_height, "standing_threshold": foot.standing_threshold}) \
            if r.swing_contact_force else None
        paired_contact_force = RewTerm(
            func=diffloco_mdp.paired_contact_force, weight=r.paired_contact_force,
            params={**cmd, "sensor_cfg": SceneEntityCfg("contact_forces", body_names=".*_FOOT", preserve_order=True),
                    "phase_offsets": dict(gait.phase_offsets), "standing_threshold": foot.standing_threshold}) \
            if r.paired_contact_force else None

    return RewardsCfg()


def terminations_cfg(t: task_cfg.TerminationsCfg):
    @configclass
    class TerminationsCfg:
        time_out = DoneTerm(func=mdp.time_out, time_out=True)
        base_contact = DoneTerm(func=mdp.illegal_contact, params={
            "sensor_cfg": SceneEntityCfg("contact_forces", body_names="base"), "threshold": 1.0}) \
            if t.base_contact else None
        thigh_contact = DoneTerm(func=mdp.illegal_contact, params={
            "sensor_cfg": SceneEntityCfg("contact_forces", body_names=".*THIGH"), "threshold": 1.0}) \
            if t.thigh_contact else None

    return TerminationsCfg()


def events_cfg(rand: task_cfg.RandomizationCfg, reset: task_cfg.ResetCfg):
    v = reset.velocity
    on = rand.enable
    if rand.adversarial_fraction or rand.after_curriculum.adversarial_fraction:
        raise ValueError("randomization.adversarial_fraction (parameters moved along the return's gradient) needs a "
                         "differentiable simulator; Isaac Lab's randomisation events draw uniformly: set it to 0 for "
                         "the Isaac Lab task")
    if rand.soft_ground_fraction or rand.after_curriculum.soft_ground_fraction:
        raise ValueError("randomization.soft_ground_fraction (envs on the training simulator's soft contact) has no "
                         "counterpart in Isaac Lab's randomisation events: set it to 0 for the Isaac Lab task")

    @configclass
    class EventsCfg:
        physics_material = EventTerm(func=mdp.randomize_rigid_body_material, mode="reset", params={
            "asset_cfg": SceneEntityCfg("robot", body_names=".*"), "static_friction_range": rand.friction,
            "dynamic_friction_range": rand.friction, "restitution_range": (0.0, 0.0), "num_buckets": 64,
            "make_consistent": True}) if on else None
        base_mass = EventTerm(func=mdp.randomize_rigid_body_mass, mode="reset", params={
            "asset_cfg": SceneEntityCfg("robot", body_names="base"), "mass_distribution_params": rand.base_mass_scale,
            "operation": "scale", "distribution": "log_uniform", "recompute_inertia": True}) if on else None
        base_com = EventTerm(func=mdp.randomize_rigid_body_com, mode="reset", params={
            "asset_cfg": SceneEntityCfg("robot", body_names="base"),
            "com_range": {"x": (-rand.base_com_xy, rand.base_com_xy), "y": (-rand.base_com_xy, rand.base_com_xy),
                          "z": (-rand.base_com_z, rand.base_com_z)}}) if on else None
        actuator_gains = EventTerm(func=mdp.randomize_actuator_gains, mode="reset", params={
            "asset_cfg": SceneEntityCfg("robot", joint_names=".*"),
            "stiffness_distribution_params": rand.stiffness_scale, "damping_distribution_params": rand.damping_scale,
            "operation": "scale", "distribution": "uniform"}) if on else None
        reset_base = EventTerm(func=mdp.reset_root_state_uniform, mode="reset", params={
            "pose_range": {"x": (-reset.position_xy, reset.position_xy), "y": (-reset.position_xy, reset.position_xy),
                           "yaw": (-reset.yaw, reset.yaw)},
            "velocity_range": {k: (-v, v) for k in ("x", "y", "z", "roll", "pitch", "yaw")}})
        reset_robot_joints = EventTerm(func=mdp.reset_joints_by_scale, mode="reset", params={
            "position_range": reset.joint_pos_scale, "velocity_range": (0.0, 0.0)})
        # pushes_after_curriculum: curriculum_cfg's term holds this push at 0 m/s until the ranges are full
        push_robot = EventTerm(func=mdp.push_by_setting_velocity, mode="interval", interval_range_s=rand.push_interval,
                               params={"velocity_range": {"x": (-rand.push_velocity_xy, rand.push_velocity_xy),
                                                          "y": (-rand.push_velocity_xy, rand.push_velocity_xy)}}) \
            if on and rand.push_velocity_xy > 0 else None

    return EventsCfg()


#: The training recipe's settings that have no counterpart in Isaac Lab (the mapping raises on them), with the
#: values that switch them off: the boundary commands and the tracking rewards' rate-limited reference (no Isaac Lab
#: command or reward term does either), the adversary (moves parameters along the differentiable simulator's
#: gradient) and the soft grounds (the project's contact model). The Isaac Lab twins train the recipe without them.
NOT_MIRRORED = {
    "commands.boundary_command_fraction": 0.0,
    "commands.tracking_reference_accel": None,
    "randomization.after_curriculum.adversarial_fraction": None,
    "randomization.adversarial_fraction": 0.0,
    "randomization.after_curriculum.soft_ground_fraction": None,
    "randomization.soft_ground_fraction": 0.0,
}


def mirrorable(task: task_cfg.VelocityEnvCfg) -> task_cfg.VelocityEnvCfg:
    """``task`` with :data:`NOT_MIRRORED`'s settings switched off (in place; returned)."""
    for path, value in NOT_MIRRORED.items():
        *parents, name = path.split(".")
        owner = task
        for p in parents:
            owner = getattr(owner, p)
        setattr(owner, name, value)
    return task


@configclass
class DiffLocoVelocityEnvCfg(ManagerBasedRLEnvCfg):
    """The project's velocity task in Isaac Lab (see the module docstring). Subclasses override
    :meth:`project_task`, the project's config the values are read from."""

    sim: SimulationCfg = SimulationCfg(physics=VelocityPhysicsCfg())
    scene: VelocitySceneCfg = VelocitySceneCfg(num_envs=4096, env_spacing=2.5)
    observations: object = None
    actions: object = None
    commands: object = None
    rewards: object = None
    terminations: object = None
    events: object = None
    curriculum: object = None

    def __post_init__(self):
        super().__post_init__()
        enable_cpu_pinned_fallback()
        t = self.project_task()
        robot = get_robot(t.robot)
        if robot.actuator is None or not robot.feet:
            raise ValueError(f"robot '{robot.name}' needs a drive model and feet for the velocity task")
        radii = {f.radius for f in robot.feet}
        if len(radii) != 1:
            raise ValueError(f"robot '{robot.name}': the foot-height term assumes one foot radius, got {sorted(radii)}")
        self.decimation = t.sim.substeps
        self.episode_length_s = t.episode_length_s
        self.sim.dt = t.sim.dt
        self.sim.render_interval = self.decimation
        self.seed = t.seed
        # the lowest friction the robot draws (before or after the curriculum's widening): the ground's, by max
        rand = t.randomization
        lows = [rand.friction[0]] + ([rand.after_curriculum.friction[0]] if rand.after_curriculum.friction else [])
        friction_floor = min(lows) if rand.enable else 1.0
        self.sim.physics_material = ground_material(friction_floor)
        self.scene.ground.spawn = sim_utils.GroundPlaneCfg(usd_path=ground_usd_path(),
                                                          physics_material=ground_material(friction_floor))
        self.scene.robot = robot_cfg(robot, base_height=t.reset.height)
        self.scene.contact_forces.update_period = self.sim.dt
        self.observations = policy_observations(t.observation_noise,
                                                gait_clock_period=t.gait.period if t.gait_clock else None)
        self.actions = actions_cfg(robot.isaaclab_joint_order or robot.joint_names, t.actions)
        self.commands = commands_cfg(t.commands)
        self.rewards = rewards_cfg(t.rewards, t.foot_height_reference, t.gait, radii.pop(),
                                   robot.actuator.velocity_limit, robot.actuator.effort_limit)
        self.terminations = terminations_cfg(t.terminations)
        self.events = events_cfg(t.randomization, t.reset)
        self.curriculum = curriculum_cfg(t.commands, t.rewards, t.randomization)
        self.viewer.eye = (3.0, 3.0, 1.5)
        self.viewer.origin_type = "asset_root"
        self.viewer.asset_name = "robot"

    def project_task(self) -> task_cfg.VelocityEnvCfg:
        """The project's task config whose values this config carries."""
        return mirrorable(task_cfg.AnymalDFlatEnvCfg())

    def play_mode(self):
        """Playback: Isaac Lab's defaults (at most 50 envs, no observation noise) and no pushes."""
        super().play_mode()
        self.events.push_robot = None


@configclass
class AnymalDFlatIsaacEnvCfg(DiffLocoVelocityEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Isaac``: ``DiffLoco-Velocity-Flat-AnymalD`` in Isaac Lab."""

    def project_task(self) -> task_cfg.VelocityEnvCfg:
        return mirrorable(task_cfg.AnymalDFlatEnvCfg())


@configclass
class AnymalCFlatIsaacEnvCfg(DiffLocoVelocityEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalC-Isaac``: ``DiffLoco-Velocity-Flat-AnymalC`` in Isaac Lab."""

    def project_task(self) -> task_cfg.VelocityEnvCfg:
        return mirrorable(task_cfg.AnymalCFlatEnvCfg())

