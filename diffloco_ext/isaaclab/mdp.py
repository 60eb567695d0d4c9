"""Isaac Lab manager terms of the velocity task that Isaac Lab does not have (the rest are Isaac Lab's own).

* :class:`foot_height_reference`: Schwarke et al.'s (arXiv 2404.02887) sinusoidal swing-height reference, the project's
  stand-in for feet-air-time (:class:`diffloco_ext.tasks.velocity.env_cfg.FootHeightReferenceCfg`) for the task's gait
  (:class:`diffloco_ext.tasks.velocity.gaits.GaitCfg`), with the same definition as
  :func:`diffloco_ext.tasks.velocity.gaits.swing_height` / ``rewards.foot_height_tracking_exp`` (the functions are
  reused, so both tasks compute the same number from the same foot heights).
* :func:`foot_slip`, :func:`excess_joint_vel`: the gait terms of the same names (``foot_slip``,
  ``excess_joint_vel_l2``) on the feet's link velocities and the joint velocities.
* :class:`swing_contact_force`: the normal force on the feet the gait has in swing, over the robot's weight (the
  project's ``rewards.swing_contact_force`` on the contact sensor's net forces).
* :class:`paired_contact_force`: the difference of the normal forces on the feet the gait moves together, over the
  robot's weight (the project's ``rewards.paired_contact_force`` on the contact sensor's net forces).
* :func:`gait_clock`: the gait-clock interface's two extra observations
  (:func:`diffloco_ext.tasks.velocity.observations.gait_clock_observation`, the same function).
* :func:`torque_saturation`: ``torque_saturation_l2``'s measure on Isaac Lab's actuator efforts (the part of the
  computed effort the DC-motor model clipped away).
"""

from __future__ import annotations

import torch
from isaaclab.managers import ManagerTermBase, RewardTermCfg, SceneEntityCfg

from diffloco_ext.tasks.velocity.gaits import GaitCfg, swing_height as reference_heights
from diffloco_ext.tasks.velocity.observations import gait_clock_observation
from diffloco_ext.tasks.velocity.rewards import (
    excess_joint_vel_l2,
    foot_height_tracking_exp,
    foot_slip as foot_slip_speed,
    paired_contact_force as paired_force_share,
    swing_contact_force as swing_force_share,
)


class foot_height_reference(ManagerTermBase):
    """``exp(-sum_f (h_f - h_ref_f)^2 / std^2)`` [N]: ``h_f`` the height of foot ``f``'s sphere bottom above the
    env's ground (m: the foot body's origin is the sphere centre, see :mod:`.usd_export`), ``h_ref`` the gait's
    reference at the episode time ``episode_length_buf * step_dt`` (s), zero for envs commanded to stand.

    Params: ``asset_cfg`` (the robot, ``body_names`` the feet), ``command_name``, ``foot_radius`` (m), the fields
    of :class:`GaitCfg` (``phase_offsets`` by leg, ``duty``, ``period`` s, ``swing_height`` m) and of
    ``FootHeightReferenceCfg`` (``std`` m, ``standing_threshold``).
    """

    def __init__(self, cfg: RewardTermCfg, env) -> None:
        super().__init__(cfg, env)
        asset_cfg: SceneEntityCfg = cfg.params["asset_cfg"]
        asset = env.scene[asset_cfg.name]
        names = [asset.body_names[i] for i in asset_cfg.body_ids] if not isinstance(asset_cfg.body_ids, slice) \
            else list(asset.body_names)
        p = cfg.params
        self.gait = GaitCfg(phase_offsets=dict(p["phase_offsets"]), duty=p["duty"], period=p["period"],
                            swing_height=p["swing_height"])
        self.phase = torch.tensor(self.gait.offsets_of(names), device=env.device)

    def __call__(self, env, asset_cfg: SceneEntityCfg, command_name: str, foot_radius: float, phase_offsets: dict,
                 duty: float, period: float, swing_height: float, std: float,
                 standing_threshold: float) -> torch.Tensor:
        asset = env.scene[asset_cfg.name]
        foot_z = asset.data.body_link_pos_w.torch[:, asset_cfg.body_ids, 2]
        ground_z = env.scene.env_origins[:, 2:3]
        foot_height = foot_z - foot_radius - ground_z
        command = env.command_manager.get_command(command_name)
        moving = torch.linalg.norm(command, dim=1) > standing_threshold
        time = env.episode_length_buf.to(foot_height.dtype) * env.step_dt
        h_ref = reference_heights(time, self.phase.to(foot_height.dtype), self.gait, moving)
        return foot_height_tracking_exp(foot_height, h_ref, std)


class swing_contact_force(ManagerTermBase):
    """``sum_f s_f F_f / W`` [N] (1): ``F_f`` the contact sensor's normal (world z) net force on foot ``f`` (N),
    ``s_f`` the gait's reference height over its apex at the episode time (0 in stance; zero for envs commanded to
    stand), ``W`` the robot's weight (N, its bodies' masses under the simulation's gravity).

    Params: ``sensor_cfg`` (the contact sensor, ``body_names`` the feet), ``command_name``, the fields of
    :class:`GaitCfg` and ``standing_threshold``.
    """

    def __init__(self, cfg: RewardTermCfg, env) -> None:
        super().__init__(cfg, env)
        p = cfg.params
        sensor_cfg: SceneEntityCfg = p["sensor_cfg"]
        sensor = env.scene.sensors[sensor_cfg.name]
        names = [sensor.body_names[i] for i in sensor_cfg.body_ids] if not isinstance(sensor_cfg.body_ids, slice) \
            else list(sensor.body_names)
        self.gait = GaitCfg(phase_offsets=dict(p["phase_offsets"]), duty=p["duty"], period=p["period"],
                            swing_height=p["swing_height"])
        self.phase = torch.tensor(self.gait.offsets_of(names), device=env.device)
        self.gravity = float(torch.linalg.norm(torch.tensor(env.sim.cfg.gravity, dtype=torch.float64)))

    def __call__(self, env, sensor_cfg: SceneEntityCfg, command_name: str, phase_offsets: dict, duty: float,
                 period: float, swing_height: float, standing_threshold: float) -> torch.Tensor:
        sensor = env.scene.sensors[sensor_cfg.name]
        force_z = sensor.data.net_forces_w.torch[:, sensor_cfg.body_ids, 2]
        command = env.command_manager.get_command(command_name)
        moving = torch.linalg.norm(command, dim=1) > standing_threshold
        time = env.episode_length_buf.to(force_z.dtype) * env.step_dt
        swing = reference_heights(time, self.phase.to(force_z.dtype), self.gait, moving) / max(swing_height, 1e-9)
        weight = env.scene["robot"].data.body_mass.torch.sum(dim=1).to(force_z.dtype) * self.gravity  # randomised
        return swing_force_share(swing, force_z, weight)


class paired_contact_force(ManagerTermBase):
    """``sum_(i, j) |F_i - F_j| / W`` [N] (1) over the pairs of feet with equal phase offsets in the gait
    (:meth:`GaitCfg.pairs_of`), ``F`` the contact sensor's normal (world z) net forces (N), ``W`` the robot's weight
    (N); zero for envs commanded to stand.

    Params: ``sensor_cfg`` (the contact sensor, ``body_names`` the feet), ``command_name``, ``phase_offsets``,
    ``standing_threshold``.
    """

    def __init__(self, cfg: RewardTermCfg, env) -> None:
        super().__init__(cfg, env)
        sensor_cfg: SceneEntityCfg = cfg.params["sensor_cfg"]
        sensor = env.scene.sensors[sensor_cfg.name]
        names = [sensor.body_names[i] for i in sensor_cfg.body_ids] if not isinstance(sensor_cfg.body_ids, slice) \
            else list(sensor.body_names)
        pairs = GaitCfg(phase_offsets=dict(cfg.params["phase_offsets"])).pairs_of(names)
        self.pairs = torch.tensor(pairs, dtype=torch.long, device=env.device).reshape(-1, 2)
        self.gravity = float(torch.linalg.norm(torch.tensor(env.sim.cfg.gravity, dtype=torch.float64)))

    def __call__(self, env, sensor_cfg: SceneEntityCfg, command_name: str, phase_offsets: dict,
                 standing_threshold: float) -> torch.Tensor:
        force_z = env.scene.sensors[sensor_cfg.name].data.net_forces_w.torch[:, sensor_cfg.body_ids, 2]
        moving = torch.linalg.norm(env.command_manager.get_command(command_name), dim=1) > standing_threshold
        weight = env.scene["robot"].data.body_mass.torch.sum(dim=1).to(force_z.dtype) * self.gravity  # randomised
        return paired_force_share(self.pairs, force_z, weight) * moving


def _feet_height_and_velocity(env, asset_cfg: SceneEntityCfg, foot_radius: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The feet's sphere-bottom heights above the env's ground [N, F] (m) and link velocities [N, F, 3] (world, m/s;
    the foot body's origin is its sphere's centre)."""
    asset = env.scene[asset_cfg.name]
    foot_z = asset.data.body_link_pos_w.torch[:, asset_cfg.body_ids, 2]
    return (foot_z - foot_radius - env.scene.env_origins[:, 2:3],
            asset.data.body_link_lin_vel_w.torch[:, asset_cfg.body_ids])


def foot_slip(env, asset_cfg: SceneEntityCfg, foot_radius: float, height: float, width: float) -> torch.Tensor:
    """``sum_f sigmoid((height - h_f) / width) |v_f,xy|`` [N] (m/s): the feet's horizontal link velocity (world; the
    foot body's origin is its sphere's centre) weighted by a smooth stance indicator of the sphere bottom's height
    ``h_f`` above the env's ground (m)."""
    return foot_slip_speed(*_feet_height_and_velocity(env, asset_cfg, foot_radius), height, width)


def excess_joint_vel(env, limit: float, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """``sum_j max(0, |qd_j| - limit)^2`` [N] (rad²/s²)."""
    return excess_joint_vel_l2(env.scene[asset_cfg.name].data.joint_vel.torch[:, asset_cfg.joint_ids], limit)


def torque_saturation(env, effort_limit: float, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """``sum_j ((tau_computed_j - tau_applied_j) / effort_limit)^2`` [N] (1): the PD demand outside the DC-motor
    envelope, as the project's ``torque_saturation_l2``. Isaac Lab's DC motor clips the computed effort to the
    envelope at the joint's speed, so the difference is the part outside it; Isaac Lab's actuators compute it at
    every physics substep, so this is the last substep's (the project's: the policy step's first)."""
    actuators = env.scene[asset_cfg.name].actuators
    excess = (actuators.computed_effort.torch[:, asset_cfg.joint_ids]
              - actuators.applied_effort.torch[:, asset_cfg.joint_ids])
    return torch.sum(torch.square(excess / effort_limit), dim=1)


def gait_clock(env, period: float) -> torch.Tensor:
    """``(sin, cos)(2 pi t / period)`` [N, 2] at the episode time ``t = episode_length_buf * step_dt`` (s), the time
    of the foot-height reference (:class:`foot_height_reference`)."""
    return gait_clock_observation(env.episode_length_buf.to(torch.float32) * env.step_dt, period)
