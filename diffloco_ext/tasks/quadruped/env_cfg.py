"""Configuration of ``DiffLoco-Quadruped-Forward`` (Schwarke et al., arXiv 2404.02887, section A.2): the small Warp
quadruped walks forward at a constant 1.0 m/s; observations as SHAC's Ant task (DiffRL); actions are joint position
targets tracked by PD with the torque capped at 20 N·m (the robot's drive envelope); an episode ends when the base
centre drops below 0.25 m, or after 10 s."""

from __future__ import annotations

from dataclasses import dataclass, field

from diffloco_ext.sim.config import SimCfg
from diffloco_ext.sim.contact import ContactParams


@dataclass
class QuadrupedActionsCfg:
    scale: float = 0.5  # rad per unit action, about the default pose
    clip: float | None = None


@dataclass
class QuadrupedRewardsCfg:
    """Per policy step: forward-speed tracking ``exp(-(vx - target)^2 / std^2)``, plus DiffRL Ant's shaping terms
    (uprightness 0.1, heading 1.0, height above the termination height) and a small action penalty. vx is the base's
    world-x speed."""

    target_speed: float = 1.0  # m/s, world x
    speed: float = 1.0
    speed_std: float = 0.5  # m/s
    up: float = 0.1
    heading: float = 1.0
    height: float = 1.0
    action: float = -0.005


@dataclass
class QuadrupedForwardEnvCfg:
    robot: str = "warp_quadruped"
    num_envs: int = 128
    seed: int = 42
    episode_length_s: float = 10.0
    termination_height: float = 0.25  # m, base centre
    reset_noise: float = 0.05  # joint angles +- (rad) and base velocities +- (m/s, rad/s)
    joint_vel_obs_scale: float = 0.1  # DiffRL Ant's scaling of joint velocities in the observation
    grad_clip_relative: float | None = 10.0  # per-env bound: multiple of the batch's median row (see VelocityEnvCfg)
    sim: SimCfg = field(default_factory=lambda: SimCfg(dt=0.005, substeps=4, contact=ContactParams("smoothed")))
    actions: QuadrupedActionsCfg = field(default_factory=QuadrupedActionsCfg)
    rewards: QuadrupedRewardsCfg = field(default_factory=QuadrupedRewardsCfg)
