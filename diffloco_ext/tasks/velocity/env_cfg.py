"""Configuration of the velocity-tracking tasks: the single source of truth of what the env does.

The policy interface is exactly Isaac Lab 3.0's ``Isaac-Velocity-Flat-AnymalD`` (``isaaclab_tasks/core/velocity``:
``velocity_env_cfg.py`` and ``config/anymal_d/flat_env_cfg.py``), so a policy moves between this project, Isaac
Lab and a robot unchanged:

* 48 observations, in this order, no scaling, no clipping: base linear velocity (base frame, of the base's centre
  of mass, as Isaac Lab's ``root_lin_vel_b``; m/s, 3), base angular velocity (base frame, rad/s, 3), projected
  gravity (unit vector in the base frame, 3), velocity command (vx, vy in m/s, wz in rad/s, 3), joint positions
  minus the default pose (rad, 12), joint velocities (rad/s, 12), last actions (raw, 12). Joints in Isaac Lab's
  order (grouped by type: LF_HAA, LH_HAA, RF_HAA, RH_HAA, LF_HFE, ..., RH_KFE).
* 12 actions in the same joint order: joint target = default pose + 0.5 x action (rad).
* 50 Hz: ``sim.dt`` 0.005 s x ``sim.substeps`` 4; 20 s episodes; commands resampled every 10 s.

Rewards differ from Isaac Lab's where Isaac Lab's cannot be differentiated (feet air time -> Schwarke et al.'s
sinusoidal foot-height reference, arXiv 2404.02887; contact counts -> smooth penetration penalties); every term and
weight is here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from diffloco_ext.sim.config import SimCfg
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.terrain_generator import TerrainGeneratorCfg, rough_terrains_cfg
from diffloco_ext.tasks.schedule import interpolated_range

from .gaits import GaitCfg, named_gait


@dataclass
class CommandsCfg:
    """Velocity commands, as Isaac Lab's ``UniformVelocityCommandCfg`` of the flat ANYmal-D task.

    In heading mode the yaw-rate command follows a heading target: ``wz = clip(k (heading* - heading), wz range)``
    every policy step. A fraction of envs is commanded to stand still (all zero).
    """

    lin_vel_x: tuple[float, float] = (-1.0, 1.0)  # m/s, base frame
    lin_vel_y: tuple[float, float] = (-1.0, 1.0)  # m/s
    ang_vel_z: tuple[float, float] = (-1.0, 1.0)  # rad/s
    heading: tuple[float, float] = (-math.pi, math.pi)  # rad, world frame
    heading_command: bool = True
    heading_control_stiffness: float = 0.5  # 1/s
    rel_heading_envs: float = 1.0
    rel_standing_envs: float = 0.02
    resampling_time: float = 10.0  # s
    curriculum_initial_scale: float = 1.0
    """Command curriculum: the ranges start scaled by this (1: off) and widen linearly to the full ranges over
    ``curriculum_steps`` policy steps of each env (training time, not episode time)."""
    curriculum_steps: int = 0
    curriculum_initial_lin_vel_x: tuple[float, float] | None = None
    """Initial range of one command (m/s, rad/s) in place of ``curriculum_initial_scale`` x its range: e.g. forward
    speeds only (0.5, 1.0) with (0, 0) for the others, widening to the full ranges over ``curriculum_steps``. A
    policy that already walks learns to modulate its gait with the command; from a standing policy, commands spread
    over all directions average the first-order gradient of a command-independent gait to about zero."""
    curriculum_initial_lin_vel_y: tuple[float, float] | None = None
    curriculum_initial_ang_vel_z: tuple[float, float] | None = None
    resampling_time_final: float | None = None
    """Resampling period (s) once the curriculum has reached the full ranges (at once without a curriculum; None:
    ``resampling_time`` throughout). A training choice, not part of the interface: a shorter period puts more command
    changes in each rollout, and the falls of the trained policies are sideways roll-overs in the seconds after a
    command change (docs/design.md: command changes: period)."""
    boundary_command_fraction: float = 0.0
    """Fraction of the resampled planar commands (vx, vy) moved out to the edge of their ranges once the curriculum
    has reached the full ranges (0: Isaac Lab's uniform sampling throughout). Such a command keeps the direction of
    its uniform draw and gets a length of U(``boundary_command_scale``) of the way to the range's boundary, so the
    corners of the square (|v| up to 1.41 m/s), where the trained policies fell, come up more often. A training
    choice, not part of the interface (docs/design.md: command changes: boundary commands)."""
    boundary_command_scale: tuple[float, float] = (0.85, 1.0)
    tracking_reference_accel: tuple[float, float] | None = None
    """Bounded accelerations (planar m/s^2, yaw rad/s^2) of the reference that the tracking rewards follow (None:
    the command itself, as Isaac Lab's task). With a value the rewards track a reference that moves towards the
    command at most this fast (the planar part along the straight line, by its norm), starting from the base's
    velocity at each reset: a new command is to be reached at a bounded acceleration instead of at once, where
    the trained policies overshoot and fall (sideways roll-overs 0.7-3 s after a command change; docs/design.md:
    command changes: tracking reference). The policy still observes the command; the critic's tracking features
    follow the reference. Once the curriculum has reached the full ranges (at once without a curriculum; during it the
    reference is the command). A training choice, not part of the interface: the validation measures the error to
    the command."""

    @property
    def has_curriculum(self) -> bool:
        """Whether the commands start on ranges other than the full ones."""
        initial = (self.curriculum_initial_lin_vel_x, self.curriculum_initial_lin_vel_y,
                   self.curriculum_initial_ang_vel_z)
        return self.curriculum_steps > 0 and (self.curriculum_initial_scale < 1.0 or
                                              any(r is not None for r in initial))


@dataclass
class ObservationNoiseCfg:
    """Uniform training noise per observation group, half-widths (Isaac Lab's values); commands and last
    actions are exact. ``enable = False`` for evaluation."""

    enable: bool = True
    base_lin_vel: float = 0.1  # m/s
    base_ang_vel: float = 0.2  # rad/s
    projected_gravity: float = 0.05
    joint_pos: float = 0.01  # rad
    joint_vel: float = 1.5  # rad/s
    height_scan: float = 0.1  # m (the rough interface's scan, before its clip to +-1)


@dataclass
class ActionsCfg:
    """Joint position actions: ``target = default + scale * action`` (Isaac Lab's ``JointPositionActionCfg``)."""

    scale: float = 0.5
    clip: float | None = None  # None: actions as given (SHAC's are tanh-squashed, PPO's are unbounded)


@dataclass
class FootHeightReferenceCfg:
    """Schwarke et al.'s foot-height reference (in place of the non-differentiable feet-air-time reward).

    Foot ``f`` should be at the height ``h_ref_f(t)`` of the env's gait (:class:`~.gaits.GaitCfg`, ``env.gait``:
    a swing of ``swing_height`` for the fraction ``1 - duty`` of each ``period``, starting at the foot's phase
    offset; the trot's ``h_ref = 0.08 m * max(0, sin(2 pi t / 0.6 s + phase_f))`` by default) above the ground (the
    bottom of its sphere, m). Envs commanded to stand get ``h_ref = 0``. Reward ``exp(-sum_f (h_f - h_ref_f)^2 /
    std^2)``.
    """

    std: float = 0.15  # m (0.05 made the kernel flat where feet stay down: no gradient towards stepping)
    standing_threshold: float = 0.1  # |command| (m/s, rad/s) below which the reference stays at 0


@dataclass
class RewardsCfg:
    """Reward weights (each term is multiplied by its weight and the policy step, 0.02 s, as in Isaac Lab).

    Tracking and regularisers are Isaac Lab's flat ANYmal-D values, so returns compare; the rest:

    * ``foot_height_reference`` 1.0 (std 0.15 m): takes the place of feet-air-time (0.5 in Isaac Lab's flat
      task); with SHAC it is what makes the robot step (the foot-reference reward reached 0.7 of 1.0);
    * ``undesired_contact`` -1.0 per metre of thigh/shank penetration x 100 (a smooth stand-in for Isaac Lab's
      count of thigh contacts above 1 N, which has no gradient);
    * ``joint_pos_limits`` -10: the simulator models no joint limits (Isaac Lab's PhysX does), so leaving the
      range is penalised (rad outside the soft limits, 95 % of the range as Isaac Lab's
      ``soft_joint_pos_limit_factor``);
    * ``termination`` -1 x (1 / policy step): a fall costs as much as 1 s of full tracking reward;
    * ``base_height`` -50: ``-(h - target)^2``, a differentiable stand-in for the termination, whose penalty no
      gradient sees (SHAC's first-order gradient only sees what is differentiable);
    * ``alive`` 1.0: a constant per step survived, so that the critic values survival above a fall whatever the
      sign of the other terms (DiffRL's Ant gets the same from its height reward). With both, SHAC runs went from
      falling within 1-4 s to surviving whole episodes.
    * ``foot_slip``: the feet's horizontal speed weighted by a smooth stance indicator (1 on the ground, 1/2 at
      ``foot_slip_height``, the validation's stance height), Isaac Lab's Spot foot-slip penalty made
      differentiable; ``excess_joint_vel``: joint speeds beyond ``excess_joint_vel_ratio`` x the DC motor's no-load
      speed. The validation gates both (foot slip in stance, joint speed within the motor's envelope). 0 by
      default here (Isaac Lab's flat ANYmal-D task has neither).
    * ``torque_saturation``: the squared part of the PD demand outside the DC-motor envelope (over the effort
      limit), at the policy step's start, where the validation's saturation gate measures it. 0 by default here.
    * ``swing_contact_force``: the normal force on each foot while the gait's reference has it in swing (weighted by
      the reference's height over its apex), as a fraction of the robot's weight (``rewards.swing_contact_force``).
      0 by default; the gait-clock tasks use it.
    * ``paired_contact_force``: the difference of the normal forces on the feet the gait moves together (equal phase
      offsets: the bound's front pair and hind pair), as a fraction of the robot's weight, while commanded to move
      (``rewards.paired_contact_force``). 0 by default; the bound's gait-clock task uses it.

    ``after_curriculum`` names terms that count only once the command curriculum has reached the full ranges
    (weight 0 before; at once without a curriculum): a training choice, so that a term shaping the gait does not
    change how the policy first learns to walk. ``weights_after_curriculum`` (term -> weight) replaces the weights
    of the terms it names once the curriculum is done (before: their fields' weights, or 0 for the terms that
    ``after_curriculum`` names too): e.g. a stronger ``action_rate`` for a walking policy, while the first gait is
    learnt with Isaac Lab's. ``weights_ramp`` ``(start, end)``: policy steps after the curriculum's end over which
    they take over linearly (the fields' weights until ``start``, the new ones from ``end``; ``(0, 0)``: at once).

    ``weights_curriculum_end`` (term -> weight) moves the weights of the terms it names while the commands widen:
    linearly from their fields' weights, as the curriculum's progress (0 to 1) goes from ``weights_curriculum_ramp``'s
    ``start`` to its ``end``, to the given ones, held from there (and the origin ``weights_after_curriculum``'s ramp
    starts from). A training choice for a gait that has formed early in the curriculum: e.g. a stronger
    ``action_rate`` over its second third keeps the gait from chattering into the curriculum's end, where such gaits
    settled into standing (docs/design.md: action rate). Not for the terms ``after_curriculum`` names (0 until the
    end).
    """

    track_lin_vel_xy: float = 1.0
    track_lin_vel_xy_std: float = 0.5  # m/s
    track_ang_vel_z: float = 0.5
    track_ang_vel_z_std: float = 0.5  # rad/s
    lin_vel_z: float = -2.0
    ang_vel_xy: float = -0.05
    flat_orientation: float = -5.0
    joint_torques: float = -2.5e-5
    joint_acc: float = -2.5e-7
    action_rate: float = -0.01
    foot_height_reference: float = 1.0
    undesired_contact: float = -1.0
    joint_pos_limits: float = -10.0
    soft_joint_pos_limit_factor: float = 0.95
    termination: float = -50.0
    base_height: float = -50.0
    alive: float = 1.0
    base_height_target: float = 0.55  # m above the ground (ANYmal D stands at 0.545 m in the default pose)
    foot_slip: float = 0.0
    foot_slip_height: float = 0.01  # m: the stance indicator is 1/2 here (the validation's stance height)
    foot_slip_width: float = 0.0025  # m: and falls from 0.98 to 0.02 over +-4 widths about it
    excess_joint_vel: float = 0.0
    excess_joint_vel_ratio: float = 0.8  # x the DC motor's no-load speed (ANYmal D: 7.5 rad/s)
    torque_saturation: float = 0.0
    swing_contact_force: float = 0.0
    paired_contact_force: float = 0.0
    after_curriculum: tuple[str, ...] = ()
    weights_after_curriculum: dict[str, float] = field(default_factory=dict)
    weights_ramp: tuple[int, int] = (0, 0)  # policy steps after the curriculum's end
    weights_curriculum_end: dict[str, float] = field(default_factory=dict)
    weights_curriculum_ramp: tuple[float, float] = (0.0, 1.0)  # of the curriculum's progress, 0 <= start <= end <= 1


@dataclass
class RandomizationRangesCfg:
    """Randomisation ranges that take the place of :class:`RandomizationCfg`'s once the command curriculum has
    reached the full ranges (at once without a curriculum); ``None`` keeps that range. Units and meaning as there.

    A training choice, as ``pushes_after_curriculum``: SHAC learns its first gait on narrow ranges and is then
    fine-tuned on the ranges the validation checks (friction 0.4-1.2, +-5 kg, PD gains +-20 %; docs/design.md:
    randomisation after the curriculum)."""

    friction: tuple[float, float] | None = None
    base_mass_scale: tuple[float, float] | None = None
    base_com_xy: float | None = None
    base_com_z: float | None = None
    stiffness_scale: tuple[float, float] | None = None
    damping_scale: tuple[float, float] | None = None
    soft_ground_fraction: float | None = None
    soft_ground_stiffness: tuple[float, float] | None = None
    adversarial_fraction: float | None = None


@dataclass
class RandomizationCfg:
    """Domain randomisation, uniform, resampled for an env at each of its resets (Schwarke et al.: observation noise,
    mass, friction, base velocity pushes; plus centre of mass and PD gains, which help transfer)."""

    enable: bool = True
    friction: tuple[float, float] = (0.4, 1.2)
    base_mass_scale: tuple[float, float] = (0.8, 1.25)  # log-uniform, as Isaac Lab's add_base_mass
    base_com_xy: float = 0.05  # m, half-width
    base_com_z: float = 0.01  # m
    stiffness_scale: tuple[float, float] = (0.85, 1.15)
    damping_scale: tuple[float, float] = (0.85, 1.15)
    soft_ground_fraction: float = 0.0
    """Fraction of the envs (drawn at each reset) that stand on a soft ground: soft contact's penalty spring-damper
    (``sim.contact.soft_damping``, ``soft_friction_damping``) with a spring stiffness drawn from
    ``soft_ground_stiffness``, whatever ``sim.contact.mode`` (the other envs keep it). MuJoCo's soft contacts are
    such a spring; a policy trained on one ground only may lose its gait on them (docs/design.md: soft grounds,
    exploration noise, boundary commands). Soft contact's gradients are those of a stiff spring: a batch on soft
    ground alone did not train. 0: off (no random numbers drawn)."""
    soft_ground_stiffness: tuple[float, float] = (2.0e4, 2.0e4)
    """Spring stiffness k_p of the soft grounds (N/m per foot), log-uniform."""
    adversarial_fraction: float = 0.0
    """Fraction of the envs (drawn at each reset) whose randomised parameters an adversary moves, within the ranges
    in force, against the learner: at the start of every horizon (``detach_state``) each such env's friction, base
    mass scale, centre-of-mass offset and PD-gain scales take a step of ``adversarial_step`` x their range's width in
    the direction that lowers the last horizon's return, the sign of the analytic gradient of the actor's loss w.r.t.
    them (the simulator is differentiable in these parameters). A gradient learner's worst case found per env and
    state, instead of a corner chosen by hand; needs a learner that backpropagates through the env (SHAC), the others
    leave the parameters where they were drawn. 0: off (the draws and their random numbers as without it)."""
    adversarial_step: float = 0.25
    """The adversary's step per horizon, as a fraction of each range's width (0.25: any corner within 4 horizons)."""
    push_interval: tuple[float, float] = (10.0, 15.0)  # s
    push_velocity_xy: float = 0.5  # m/s, added to the base velocity
    pushes_after_curriculum: bool = False
    """Push only once the command curriculum has reached the full ranges (at once without a curriculum). A
    training choice: the early SHAC runs with pushes (and the full randomisation) from the start kept falling; after
    the curriculum, pushes of 0.5 m/s every 3-6 s halved the falls at fast commands, fine-tuning and from scratch
    (docs/design.md: pushes)."""
    after_curriculum: RandomizationRangesCfg = field(default_factory=RandomizationRangesCfg)
    """Ranges that replace these for the resets after the command curriculum is done (None: unchanged)."""
    ranges_ramp: tuple[int, int] = (0, 0)
    """``(start, end)``: policy steps after the curriculum's end over which ``after_curriculum``'s ranges take over
    linearly (each endpoint and fraction moves from its value here to its value there; these ranges until ``start``,
    those from ``end``; ``(0, 0)``: at the curriculum's end). A training choice, as ``RewardsCfg.weights_ramp``: a
    policy fine-tuned at once on the validation's wide ranges chattered on some seeds (docs/design.md: randomisation
    after the curriculum)."""

    def ranges(self, after: float) -> dict[str, object]:
        """The ranges in force when ``after`` (0 to 1) of the way from these to ``after_curriculum``'s: these at 0,
        ``after_curriculum``'s set ones at 1 (exactly), each range's endpoints and each fraction interpolated
        linearly between (the base mass scale's endpoints too, drawn log-uniformly within them)."""
        names = [f.name for f in dataclasses.fields(RandomizationRangesCfg)]
        out = {n: getattr(self, n) for n in names}
        if after <= 0.0:
            return out
        for n in names:
            target = getattr(self.after_curriculum, n)
            if target is None:
                continue
            if after >= 1.0:
                out[n] = target
            elif isinstance(target, (tuple, list)):
                out[n] = interpolated_range(out[n], target, after)
            else:
                out[n] = out[n] + after * (target - out[n])
        return out



@dataclass
class ResetCfg:
    """Initial states, as Isaac Lab's reset events: base at ``height`` with x, y within +-``position_xy`` and
    yaw within +-``yaw``; every base velocity component within +-``velocity``; joints at the default pose
    scaled by U(``joint_pos_scale``), at rest."""

    height: float = 0.65  # m (Isaac Lab's init_state pos z; the robot stands at ~0.545 m)
    position_xy: float = 0.5
    yaw: float = math.pi
    velocity: float = 0.5  # m/s and rad/s
    joint_pos_scale: tuple[float, float] = (0.5, 1.5)


@dataclass
class TerminationsCfg:
    """A base collision shape touching the ground ends the episode (Isaac Lab: base contact force > 1 N), as
    does a thigh touching if ``thigh_contact``; a diverged simulation resets the env and is counted."""

    base_contact: bool = True
    thigh_contact: bool = False
    contact_margin: float = 0.0  # m: a gap below this counts as contact


@dataclass
class TerrainCfg:
    """Generated terrain under the envs (Isaac Lab's ``TerrainImporterCfg`` with a generator and the
    ``terrain_levels`` curriculum; :mod:`diffloco_ext.sim.terrain_generator`, :mod:`.terrain_levels`).

    ``generator``: the tiles (default Isaac Lab's ``ROUGH_TERRAINS_CFG``: 10 levels x 20 columns of six
    sub-terrain types); ``max_init_level``: the highest level an env starts on; ``curriculum``: move envs up and
    down the levels by how far they walked (False: they stay on their first tile)."""

    generator: TerrainGeneratorCfg = field(default_factory=rough_terrains_cfg)
    max_init_level: int = 5
    curriculum: bool = True


@dataclass
class VelocityEnvCfg:
    """The velocity-tracking task (defaults: ANYmal D on flat ground, Isaac Lab's flat task conventions)."""

    robot: str = "anymal_d"
    num_envs: int = 256
    seed: int = 42
    episode_length_s: float = 20.0
    sim: SimCfg = field(default_factory=lambda: SimCfg(dt=0.005, substeps=4, contact=ContactParams("smoothed")))
    commands: CommandsCfg = field(default_factory=CommandsCfg)
    observation_noise: ObservationNoiseCfg = field(default_factory=ObservationNoiseCfg)
    actions: ActionsCfg = field(default_factory=ActionsCfg)
    foot_height_reference: FootHeightReferenceCfg = field(default_factory=FootHeightReferenceCfg)
    gait: GaitCfg = field(default_factory=lambda: named_gait("trot"))
    """The foot-height reference's gait (:mod:`.gaits`): ``env.gait=pace`` takes a named gait, ``env.gait.duty=0.6``
    or ``env.gait.phase_offsets.RF=0.4`` change one value."""
    gait_clock: bool = False
    """The gait-clock interface: the policy also reads the reference's cycle phase, ``(sin, cos)(2 pi t / period)``
    after Isaac Lab's 48 observations (50 inputs; :func:`.observations.gait_clock_observation`). Without it the
    policy cannot see where the episode-clocked reference is in its cycle, and every gait's reference trained a
    trot (docs/tasks.md, "Gaits")."""
    terrain: TerrainCfg | None = None
    """Generated terrain (None: flat ground). With terrain the policy also reads Isaac Lab's height scan, 187 values
    after the 48 (Isaac Lab's rough interface: 235; :mod:`.height_scan`), rewards measure foot heights above the
    ground under each foot, and each env starts on its tile of the terrain curriculum."""
    rewards: RewardsCfg = field(default_factory=RewardsCfg)
    randomization: RandomizationCfg = field(default_factory=RandomizationCfg)
    reset: ResetCfg = field(default_factory=ResetCfg)
    terminations: TerminationsCfg = field(default_factory=TerminationsCfg)
    privileged_critic: bool = True  # an observation group "critic": clean policy terms + contact states, friction, ...
    critic_tracking_features: bool = True
    """The critic group also reads the tracking errors and kernels (5). Without them, with commands spread over
    their ranges, the critic's value ignored the tracking and its gradient at the horizon's end (SHAC's bootstrap)
    held every run at stepping in place: with forward commands U(0.5, 1), SHAC stood (planar error 0.76 m/s)
    while the same run without the bootstrap gradient tracked (0.28 m/s) but fell within 1 s (docs/design.md:
    bootstrap gradient)."""
    grad_clip_relative: float | None = 10.0
    """Per policy step, each env's row of the state and action gradients is scaled down to this multiple of the
    batch's median row norm (None: off). A few envs' gradients explode through stiff contact events or near
    divergence (1e10-1e13 seen in 32-step horizons without a clip; in a trained rollout the rows' p99 is ~50x and
    the maximum ~1000x the median): bounded per env, they cannot set the batch gradient's direction. Forward values
    are untouched."""

    def __setattr__(self, name: str, value) -> None:
        if name == "gait" and isinstance(value, str):  # a named gait (``env.gait=pace``)
            value = named_gait(value)
        object.__setattr__(self, name, value)

    @property
    def policy_dt(self) -> float:
        return self.sim.policy_dt


@dataclass
class AnymalDFlatEnvCfg(VelocityEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD``: Isaac Lab's ``Isaac-Velocity-Flat-AnymalD`` interface, with the training
    recipe of ``make train`` (SHAC from scratch in ~16 min on a 2-core CPU).

    The interface (observations, actions, 50 Hz, episode length) is :class:`VelocityEnvCfg`'s, unchanged; what
    differs from it is how the policy is trained, set in :meth:`__post_init__`, one line each on why. The
    measurements behind each choice: ``docs/design.md``, one table row per choice (named in the comments).
    ``num_envs`` is per process: ``make train`` runs two data-parallel ranks (``torchrun --nproc_per_node=2``).
    """

    robot: str = "anymal_d"
    num_envs: int = 128

    def __post_init__(self):
        c, r, rand = self.commands, self.rewards, self.randomization
        # SHAC's first-order gradient is swamped by input noise at this batch size (design: observation noise)
        self.observation_noise.enable = False
        # tracking 4x Isaac Lab's weights, no torque penalty while the gait forms (design: reward weights)
        r.track_lin_vel_xy, r.track_ang_vel_z, r.joint_torques = 4.0, 2.0, 0.0
        # forward commands first, all directions over 9,600 policy steps (design: command curriculum)
        c.curriculum_initial_lin_vel_x, c.curriculum_initial_lin_vel_y = (0.5, 1.0), (0.0, 0.0)
        c.curriculum_initial_ang_vel_z, c.curriculum_steps = (0.0, 0.0), 9600
        # after the curriculum: new commands every 4 s, a quarter at the square's edge, tracked through a
        # reference that reaches them at 1 m/s^2 (design: command changes)
        c.resampling_time_final = 4.0
        c.boundary_command_fraction = 0.25
        c.tracking_reference_accel = (1.0, 1.0)
        # narrow randomisation while the gait forms (design: randomisation)
        rand.friction, rand.base_mass_scale, rand.base_com_xy = (0.7, 1.2), (0.9, 1.1), 0.02
        rand.stiffness_scale, rand.damping_scale = (0.95, 1.05), (0.95, 1.05)
        # pushes of 0.5 m/s every 3-6 s once the curriculum is done (design: pushes)
        rand.push_velocity_xy, rand.push_interval, rand.pushes_after_curriculum = 0.5, (3.0, 6.0), True
        # then the validation's ranges, ramped in over 4,800 policy steps, a quarter of the envs held at their
        # worst parameters by a gradient adversary, a quarter on soft grounds (design: randomisation after the
        # curriculum, adversary, soft grounds)
        after = rand.after_curriculum
        after.friction, after.base_mass_scale = (0.4, 1.2), (0.8, 1.25)
        after.stiffness_scale, after.damping_scale = (0.8, 1.2), (0.8, 1.2)
        after.adversarial_fraction, rand.adversarial_step = 0.25, 0.1
        after.soft_ground_fraction, after.soft_ground_stiffness = 0.25, (3e4, 1.5e5)
        rand.ranges_ramp = (0, 4800)
        self.sim.contact.smooth_soft_grounds = True
        # foot slip, joint speeds over 0.7 x no-load and torque saturation penalised once the robot walks (design:
        # gait terms); Schwarke et al.'s foot-height reference at 3 (design: foot-height reference)
        r.foot_slip, r.excess_joint_vel, r.excess_joint_vel_ratio, r.torque_saturation = -1.0, -0.1, 0.7, -5.0
        r.after_curriculum = ("foot_slip", "excess_joint_vel", "torque_saturation")
        r.foot_height_reference = 3.0
        # a stronger action-rate penalty over the curriculum's second third (design: action rate), and after
        # the curriculum the joint-speed, action-rate and torque weights of the walking policy (design: late weights)
        r.weights_curriculum_end, r.weights_curriculum_ramp = {"action_rate": -0.1}, (0.33, 0.67)
        r.weights_after_curriculum = {"excess_joint_vel": -3.0, "action_rate": -0.1, "joint_torques": -2.5e-5}
        r.weights_ramp = (6400, 9600)


@dataclass
class AnymalDFlatEnvCfg_PLAY(AnymalDFlatEnvCfg):
    """Playing and validating ``DiffLoco-Velocity-Flat-AnymalD`` (Isaac Lab's ``_PLAY`` pattern): the task as
    deployed, without the training recipe's observation noise, randomisation, pushes and command curriculum (the
    full command ranges from the start, Isaac Lab's 10-s resampling, the tracking rewards to the command)."""

    num_envs: int = 16

    def __post_init__(self):
        super().__post_init__()
        self.observation_noise.enable = False
        self.randomization.enable = False
        self.commands = CommandsCfg()


@dataclass
class AnymalDFlatAlignedEnvCfg(AnymalDFlatEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Aligned``: the same task, interface and recipe trained on Song et al.'s
    aligned step (arXiv 2403.14864): MuJoCo forward (the physics the policy is validated in), the smoothed
    simulator's gradient backward (``env.sim.surrogate=simplified`` for the frozen-contact model: it gives no gradient
    to lifting a stance foot and learned the recipe more slowly, docs/aligned.md). The recipe's gradient adversary and
    soft grounds belong to the differentiable simulator and are off."""

    def __post_init__(self):
        super().__post_init__()
        self.sim.engine, self.sim.surrogate = "mujoco", "smoothed"
        after = self.randomization.after_curriculum
        after.adversarial_fraction = after.soft_ground_fraction = 0.0
        self.sim.contact.smooth_soft_grounds = False


@dataclass
class AnymalDFlatAlignedEnvCfg_PLAY(AnymalDFlatEnvCfg_PLAY):
    """Playing ``DiffLoco-Velocity-Flat-AnymalD-Aligned``: the play config in MuJoCo."""

    def __post_init__(self):
        super().__post_init__()
        self.sim.engine, self.sim.surrogate = "mujoco", "smoothed"
        after = self.randomization.after_curriculum
        after.adversarial_fraction = after.soft_ground_fraction = 0.0


@dataclass
class AnymalDRoughEnvCfg(AnymalDFlatEnvCfg):
    """``DiffLoco-Velocity-Rough-AnymalD``: Isaac Lab's ``Isaac-Velocity-Rough-AnymalD`` interface (the 48, then its
    187-point height scan: 235 observations) on its generated rough terrain with its terrain-level curriculum, and
    the flat task's recipe. As Isaac Lab's rough task: no flat-orientation penalty (slopes tilt the base)."""

    terrain: TerrainCfg | None = field(default_factory=TerrainCfg)

    def __post_init__(self):
        super().__post_init__()
        self.rewards.flat_orientation = 0.0


@dataclass
class AnymalDRoughEnvCfg_PLAY(AnymalDFlatEnvCfg_PLAY):
    """Playing ``DiffLoco-Velocity-Rough-AnymalD`` as Isaac Lab's ``_PLAY``: a smaller terrain (5 levels x 5
    columns), the envs on random tiles without the curriculum."""

    terrain: TerrainCfg | None = field(default_factory=lambda: TerrainCfg(
        generator=rough_terrains_cfg(num_rows=5, num_cols=5), max_init_level=4, curriculum=False))

    def __post_init__(self):
        super().__post_init__()
        self.rewards.flat_orientation = 0.0


@dataclass
class AnymalCFlatEnvCfg(AnymalDFlatEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalC`` (Schwarke et al., section A.3): ANYmal D's recipe on ANYmal C."""

    robot: str = "anymal_c"
    reset: ResetCfg = field(default_factory=lambda: ResetCfg(height=0.6))


@dataclass
class AnymalCFlatEnvCfg_PLAY(AnymalDFlatEnvCfg_PLAY):
    """Playing and validating ``DiffLoco-Velocity-Flat-AnymalC``."""

    robot: str = "anymal_c"
    reset: ResetCfg = field(default_factory=lambda: ResetCfg(height=0.6))


# ---- gaits (one policy per gait, the same interface and recipe; docs/tasks.md, "Gaits") ----------------------------
@dataclass
class AnymalDFlatPaceEnvCfg(AnymalDFlatEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Pace``: the recipe with the pace's foot-height reference (lateral pairs)."""

    gait: GaitCfg = field(default_factory=lambda: named_gait("pace"))


@dataclass
class AnymalDFlatPaceEnvCfg_PLAY(AnymalDFlatEnvCfg_PLAY):
    gait: GaitCfg = field(default_factory=lambda: named_gait("pace"))


@dataclass
class AnymalDFlatBoundEnvCfg(AnymalDFlatEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Bound``: the recipe with the bound's reference (front pair, hind pair)."""

    gait: GaitCfg = field(default_factory=lambda: named_gait("bound"))


@dataclass
class AnymalDFlatBoundEnvCfg_PLAY(AnymalDFlatEnvCfg_PLAY):
    gait: GaitCfg = field(default_factory=lambda: named_gait("bound"))


@dataclass
class AnymalDFlatGallopEnvCfg(AnymalDFlatEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Gallop``: the recipe with the transverse gallop's reference."""

    gait: GaitCfg = field(default_factory=lambda: named_gait("gallop"))


@dataclass
class AnymalDFlatGallopEnvCfg_PLAY(AnymalDFlatEnvCfg_PLAY):
    gait: GaitCfg = field(default_factory=lambda: named_gait("gallop"))


# ---- the gait-clock interface (48 + the gait's clock; docs/tasks.md, "Gaits") ---------------------------------------
#: The gait-clock tasks' weight of ``rewards.swing_contact_force`` (design: gait clock).
GAIT_CLOCK_SWING_CONTACT_FORCE = -4.0
#: The bound's weight of ``rewards.paired_contact_force`` (design: the bound's pairs).
BOUND_PAIRED_CONTACT_FORCE = -4.0


def _gait_clock_recipe(cfg: VelocityEnvCfg) -> None:
    """What the gait-clock tasks add to the recipe: the clock among the inputs, the swing-force penalty."""
    cfg.gait_clock = True
    cfg.rewards.swing_contact_force = GAIT_CLOCK_SWING_CONTACT_FORCE


@dataclass
class AnymalDFlatPaceClockEnvCfg(AnymalDFlatPaceEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Pace-Clock``: the pace with the gait clock among the policy's inputs."""

    def __post_init__(self):
        super().__post_init__()
        _gait_clock_recipe(self)


@dataclass
class AnymalDFlatPaceClockEnvCfg_PLAY(AnymalDFlatPaceEnvCfg_PLAY):
    gait_clock: bool = True


@dataclass
class AnymalDFlatBoundClockEnvCfg(AnymalDFlatBoundEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Bound-Clock``: the bound with the gait clock among the policy's inputs, and
    the pairs' normal forces held equal (the swing-force penalty alone trained half-bounds: one pair split)."""

    def __post_init__(self):
        super().__post_init__()
        _gait_clock_recipe(self)
        self.rewards.paired_contact_force = BOUND_PAIRED_CONTACT_FORCE


@dataclass
class AnymalDFlatBoundClockEnvCfg_PLAY(AnymalDFlatBoundEnvCfg_PLAY):
    gait_clock: bool = True


@dataclass
class AnymalDFlatGallopClockEnvCfg(AnymalDFlatGallopEnvCfg):
    """``DiffLoco-Velocity-Flat-AnymalD-Gallop-Clock``: the gallop with the gait clock among the policy's inputs."""

    def __post_init__(self):
        super().__post_init__()
        _gait_clock_recipe(self)


@dataclass
class AnymalDFlatGallopClockEnvCfg_PLAY(AnymalDFlatGallopEnvCfg_PLAY):
    gait_clock: bool = True
