"""The velocity-tracking task (see :mod:`.env_cfg` for the interface and every term), a
:class:`~..locomotion_env.LocomotionEnv`.

Observation groups (a ``TensorDict``): ``"policy"`` [N, 48] (Isaac Lab's order and units, with training noise;
[N, 50] with the gait clock after them, ``cfg.gait_clock``),
``"critic"`` [N, 48 (50) + 13 (+ 5)] (the same without noise, plus privileged: foot contact states (4), foot heights (4,
m), friction (1), base mass scale (1), base centre-of-mass offset (3, m); with ``critic_tracking_features`` also
the tracking errors ``command - velocity`` (vx, vy in m/s, wz in rad/s; 3) and the two tracking kernels (2)).

Events after the resets, as Isaac Lab orders them: commands (resampling timers, heading control), then
interval pushes (a velocity change of the base), then the observations.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from tensordict import TensorDict

from ..locomotion_env import LocomotionEnv
from ..robot_state import BaseState, quat_rotate_inverse, yaw_quat
from ..schedule import checked_fraction_ramp, checked_ramp, ramp_fraction
from . import rewards as R
from .commands import VelocityCommand
from .env_cfg import VelocityEnvCfg
from .gaits import swing_height
from .height_scan import CLIP as SCAN_CLIP, HeightGrid, height_scan, scan_points
from .observations import gait_clock_observation, num_policy_observations, policy_observation, task_policy_terms
from .terrain_levels import TerrainLevels

#: The reward terms, by the name of their weight in :class:`~.env_cfg.RewardsCfg` (and of their log entry).
REWARD_TERMS = ("track_lin_vel_xy", "track_ang_vel_z", "lin_vel_z", "ang_vel_xy", "flat_orientation", "joint_torques",
                "joint_acc", "action_rate", "foot_height_reference", "undesired_contact", "joint_pos_limits",
                "base_height", "alive", "foot_slip", "excess_joint_vel", "torque_saturation", "swing_contact_force",
                "paired_contact_force")


class VelocityEnv(LocomotionEnv):
    """Velocity tracking for a quadruped in the differentiable simulator (see the module docstring)."""

    cfg_class = VelocityEnvCfg

    @property
    def num_policy_obs(self) -> int:
        """48 (Isaac Lab's flat interface); 235 on terrain (its rough interface); + 2 with the gait clock."""
        return num_policy_observations(self.cfg)

    def _model_kwargs(self) -> dict:
        """On generated terrain (``cfg.terrain``): the terrain, as the simulator's height field shared by the envs."""
        self.terrain = None
        if self.cfg.terrain is None:
            return {}
        from diffloco_ext.sim.terrain_generator import generate

        self.terrain = generate(self.cfg.terrain.generator)
        return {"terrain": self.terrain.height_field()}

    def _init_task(self) -> None:
        N, dev, dt = self.num_envs, self.device, self.dtype
        self.commands = VelocityCommand(self.cfg.commands, N, dev, self.generator)
        self.push_time_left = torch.zeros(N, device=dev)
        self.base_mass_scale = torch.ones(N, dtype=dt, device=dev)
        self._draws = self._nominal_draws()
        self.adversarial = torch.zeros(N, dtype=torch.bool, device=dev)  # envs whose draws the adversary moves
        self._reset_since_detach = torch.zeros(N, dtype=torch.bool, device=dev)
        self._leaves: dict[str, torch.Tensor] | None = None
        # the last backward pass's gradients w.r.t. the draws, restored from a checkpoint (the leaves are not saved)
        self._pending_adversary_grads: dict[str, torch.Tensor] | None = None
        self.foot_height = torch.zeros(N, self.model.num_feet, dtype=dt, device=dev)
        self.terrain_levels, self.height_grid, self._levels_started = None, None, False
        if self.terrain is not None:
            t = self.cfg.terrain
            self.height_grid = HeightGrid.of(self.terrain, dtype=dt, device=str(dev))
            self.scan_points = scan_points(dtype=dt).to(dev)
            self.terrain_levels = TerrainLevels(torch.as_tensor(self.terrain.tile_origins, dtype=dt, device=dev), N,
                                                t.generator.size[0], self.cfg.episode_length_s, t.max_init_level,
                                                self.generator)
        self.soft_lower, self.soft_upper = self.soft_joint_limits(self.cfg.rewards.soft_joint_pos_limit_factor)
        self.cfg.gait.check("env.gait")
        self.foot_phase = torch.tensor(self.cfg.gait.offsets_of(self.foot_names), dtype=dt, device=dev)
        self.foot_pairs = torch.tensor(self.cfg.gait.pairs_of(self.foot_names), dtype=torch.long,
                                       device=dev).reshape(-1, 2)
        """The gait's phase offset of each foot (cycle fractions, :class:`~.gaits.GaitCfg`)."""
        names = list(self.model.collision.body_names) if self.model.collision is not None else []
        self.collision_body_names = names
        self._base_bodies = [i for i, n in enumerate(names) if n == "base"]
        self._thigh_bodies = [i for i, n in enumerate(names) if n.endswith("THIGH")]
        self._undesired_bodies = [i for i, n in enumerate(names) if n.endswith(("THIGH", "SHANK"))]
        for key in ("after_curriculum", "weights_after_curriculum", "weights_curriculum_end"):
            unknown = [k for k in getattr(self.cfg.rewards, key) if k not in REWARD_TERMS]
            if unknown:
                raise ValueError(f"env.rewards.{key} names unknown reward terms {unknown}; the terms are "
                                 f"{list(REWARD_TERMS)}")
        self._weights_ramp = checked_ramp("env.rewards.weights_ramp", self.cfg.rewards.weights_ramp,
                                          "policy steps after the curriculum's end")
        for key in ("weights_after_curriculum", "weights_curriculum_end"):
            bad = {k: w for k, w in getattr(self.cfg.rewards, key).items()
                   if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w)}
            if bad:
                raise ValueError(f"env.rewards.{key}: weights must be finite numbers, got {bad}")
        both = sorted(set(self.cfg.rewards.weights_curriculum_end) & set(self.cfg.rewards.after_curriculum))
        if both:
            raise ValueError(f"env.rewards.weights_curriculum_end names terms that env.rewards.after_curriculum holds "
                             f"at 0 until the curriculum's end: {both}")
        self._weights_curriculum_ramp = checked_fraction_ramp("env.rewards.weights_curriculum_ramp",
                                                              self.cfg.rewards.weights_curriculum_ramp)
        r = self.cfg.randomization
        for key in ("adversarial_fraction", "soft_ground_fraction"):
            for name, f in ((key, getattr(r, key)), (f"after_curriculum.{key}", getattr(r.after_curriculum, key))):
                if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 <= f <= 1.0):
                    raise ValueError(f"env.randomization.{name} must be a fraction in [0, 1], got {f!r}")
        key = "soft_ground_stiffness"
        for name, pair in ((key, getattr(r, key)), (f"after_curriculum.{key}", getattr(r.after_curriculum, key))):
            if pair is not None and not (isinstance(pair, (tuple, list)) and len(pair) == 2
                                         and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                 and math.isfinite(x) and x > 0 for x in pair)
                                         and pair[0] <= pair[1]):
                raise ValueError(f"env.randomization.{name} must be [low, high] with 0 < low <= high (N/m), "
                                 f"got {pair!r}")
        if self.cfg.sim.aligned and r.enable:  # options of the differentiable simulator only
            for name, f in (("adversarial_fraction", r.adversarial_fraction),
                            ("after_curriculum.adversarial_fraction", r.after_curriculum.adversarial_fraction),
                            ("soft_ground_fraction", r.soft_ground_fraction),
                            ("after_curriculum.soft_ground_fraction", r.after_curriculum.soft_ground_fraction)):
                if f:
                    raise ValueError(f"env.randomization.{name}={f} needs the differentiable simulator (the adversary "
                                     f"follows its parameter gradient; soft grounds are its contact model); with "
                                     f"env.sim.engine={self.cfg.sim.engine!r} set it to 0, or use the registered "
                                     f"'-Aligned' task")
        self._ranges_ramp = checked_ramp("env.randomization.ranges_ramp", r.ranges_ramp,
                                         "policy steps after the curriculum's end")
        step = r.adversarial_step
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not 0.0 < step <= 1.0:
            raise ValueError(f"env.randomization.adversarial_step must be in (0, 1] (of a range's width), got {step!r}")

    def base_state(self) -> BaseState:
        return BaseState(self.q, self.u, self.params["body_com"][:, 0])

    @property
    def env_origins(self) -> torch.Tensor:
        """[N, 3] where each env's episodes start (world, m): its terrain tile's origin, or 0 on flat ground."""
        if self.terrain_levels is None:
            return torch.zeros(self.num_envs, 3, dtype=self.dtype, device=self.device)
        return self.terrain_levels.origins

    def ground_below(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The ground's height (m) below world points ``x``, ``y`` [N, K] (m): the terrain's (bilinear, as the
        simulator's height field; differentiable in the point) plus the env's ground offset, or the env's plane."""
        if self.height_grid is None:
            return self.ground_height[:, None].expand_as(x)
        return self.height_grid(x, y) + self.ground_height[:, None]

    def height_scan(self) -> torch.Tensor:
        """[N, 187] Isaac Lab's height scan of the current state (no noise, no clip; :mod:`.height_scan`)."""
        return height_scan(self.q[:, :3], self.q[:, 3:7], self.ground_below, self.scan_points)

    # ---- observations ------------------------------------------------------------------------------------------
    def _observations(self) -> TensorDict:
        base_com = self.params["body_com"][:, 0]
        clean = policy_observation(self.q, self.u, base_com, self.commands.command, self.actions,
                                   self.default_joint_pos, self.to_isaaclab)
        scan = self.height_scan() if self.terrain is not None else None
        if scan is not None:
            clean = torch.cat([clean, scan], dim=1)
        if self.cfg.gait_clock:
            time = self.episode_length_buf.to(self.dtype) * self.step_dt
            clean = torch.cat([clean, gait_clock_observation(time, self.cfg.gait.period)], dim=1)
        policy = clean
        noise = self.cfg.observation_noise
        terms = task_policy_terms(self.cfg)
        if noise.enable:  # no noise on the commands, the last actions and the clock
            widths = {"base_lin_vel": noise.base_lin_vel, "base_ang_vel": noise.base_ang_vel,
                      "projected_gravity": noise.projected_gravity, "joint_pos": noise.joint_pos,
                      "joint_vel": noise.joint_vel, "height_scan": noise.height_scan}
            scale = torch.cat([torch.full((size,), widths.get(name, 0.0), dtype=self.dtype, device=self.device)
                               for name, size in terms])
            policy = policy + self.uniform(-1.0, 1.0, *clean.shape) * scale
        if scan is not None:  # Isaac Lab's clip of the scan (after its noise), only there
            bound = torch.cat([torch.full((size,), SCAN_CLIP if name == "height_scan" else math.inf, dtype=self.dtype,
                                          device=self.device) for name, size in terms])
            policy, clean = policy.clamp(-bound, bound), clean.clamp(-bound, bound)
        groups = {"policy": policy}
        if self.cfg.privileged_critic:
            privileged = torch.cat([self.contact_state.to(self.dtype), self.foot_height,
                                    self.params["friction"][:, None], self.base_mass_scale[:, None],
                                    self.params["body_com"][:, 0] - self.nominal["body_com"][:, 0]], dim=1)
            if self.cfg.critic_tracking_features:
                privileged = torch.cat([privileged, self._tracking_features()], dim=1)
            groups["critic"] = torch.cat([clean, privileged], dim=1)
        return TensorDict(groups, batch_size=[self.num_envs])

    def _tracking_features(self) -> torch.Tensor:
        """[N, 5]: ``command - velocity`` (vx, vy m/s, base frame; wz rad/s; the command as the rewards track it:
        ``CommandsCfg.tracking_reference_accel``) and the two tracking kernels of the rewards, differentiable w.r.t.
        the state. The value of a state depends on how well the command is tracked,
        a product of two inputs that a small critic learns slowly: given explicitly, the critic's value (and its
        gradient, which SHAC's actor follows at the end of every horizon) depends on them from the start."""
        c, cmd = self.cfg.rewards, self.commands.reference.to(self.dtype)
        base = self.base_state()
        error = torch.cat([cmd[:, :2] - base.lin_vel_b[:, :2], cmd[:, 2:] - base.ang_vel_b[:, 2:]], dim=1)
        kernels = torch.stack([R.track_lin_vel_xy_exp(cmd, base.lin_vel_b, c.track_lin_vel_xy_std),
                               R.track_ang_vel_z_exp(cmd, base.ang_vel_b, c.track_ang_vel_z_std)], dim=1)
        return torch.cat([error, kernels], dim=1)

    # ---- rewards and terminations ------------------------------------------------------------------------------------
    def _body_gaps(self, out) -> torch.Tensor:
        """Signed gaps [N, K] (m) of the collision bodies (``collision_body_names``: base, thighs, shanks) at the
        state reached, differentiable w.r.t. it (empty for a robot without collision shapes): the bridge's step
        output, computed inside the (replayed) simulator step; the rewards and the terminations read the same."""
        return out.body_gap

    def _rewards(self, out, before):
        c, cmd = self.cfg.rewards, self.commands.command.to(self.dtype)
        tracked = self.commands.reference.to(self.dtype)  # the command, or its rate-limited reference
        base = self.base_state()
        lin_vel_b, ang_vel_b, gravity_b = base.lin_vel_b, base.ang_vel_b, base.projected_gravity_b
        self.foot_height = (out.foot_pos[..., 2] - self.foot_radius
                            - self.ground_below(out.foot_pos[..., 0], out.foot_pos[..., 1]))
        moving = torch.linalg.norm(cmd, dim=1) > self.cfg.foot_height_reference.standing_threshold
        time = self.episode_length_buf.to(self.dtype) * self.step_dt
        reference = swing_height(time, self.foot_phase, self.cfg.gait, moving)
        torque = getattr(out, "joint_torque", None)
        zero = torch.zeros_like(lin_vel_b[:, 0])
        gaps = self._body_gaps(out)
        terms = {
            "track_lin_vel_xy": (c.track_lin_vel_xy,
                                 R.track_lin_vel_xy_exp(tracked, lin_vel_b, c.track_lin_vel_xy_std)),
            "track_ang_vel_z": (c.track_ang_vel_z, R.track_ang_vel_z_exp(tracked, ang_vel_b, c.track_ang_vel_z_std)),
            "lin_vel_z": (c.lin_vel_z, R.lin_vel_z_l2(lin_vel_b)),
            "ang_vel_xy": (c.ang_vel_xy, R.ang_vel_xy_l2(ang_vel_b)),
            "flat_orientation": (c.flat_orientation, R.flat_orientation_l2(gravity_b)),
            "joint_torques": (c.joint_torques, R.joint_torques_l2(torque) if torque is not None else zero),
            "joint_acc": (c.joint_acc, R.joint_acc_l2(self.u[:, 6:], before[1][:, 6:], self.step_dt)),
            "action_rate": (c.action_rate, R.action_rate_l2(self.actions, self.previous_actions)),
            "foot_height_reference": (c.foot_height_reference, R.foot_height_tracking_exp(
                self.foot_height, reference, self.cfg.foot_height_reference.std)),
            "undesired_contact": (c.undesired_contact, R.penetration(gaps[:, self._undesired_bodies])),
            "joint_pos_limits": (c.joint_pos_limits, R.joint_pos_limits(self.q[:, 7:], self.soft_lower,
                                                                         self.soft_upper)),
            "base_height": (c.base_height, torch.square(
                self.q[:, 2] - self.ground_below(self.q[:, 0:1], self.q[:, 1:2])[:, 0] - c.base_height_target)),
            "alive": (c.alive, torch.ones_like(zero)),
            "foot_slip": (c.foot_slip, R.foot_slip(self.foot_height, out.foot_vel, c.foot_slip_height,
                                                   c.foot_slip_width)),
            "excess_joint_vel": (c.excess_joint_vel, R.excess_joint_vel_l2(
                self.u[:, 6:], c.excess_joint_vel_ratio * self.robot.actuator.velocity_limit)),
            "torque_saturation": (c.torque_saturation, self._torque_saturation(before)),
            "swing_contact_force": (c.swing_contact_force, R.swing_contact_force(
                reference / max(self.cfg.gait.swing_height, 1e-9), out.contact_force[..., 2], self._weight())),
            "paired_contact_force": (c.paired_contact_force, R.paired_contact_force(
                self.foot_pairs, out.contact_force[..., 2], self._weight()) * moving),
        }
        if c.weights_curriculum_end:
            f = ramp_fraction(self.commands.progress, self._weights_curriculum_ramp)
            terms.update({k: (terms[k][0] + f * (float(w) - terms[k][0]), terms[k][1])
                          for k, w in c.weights_curriculum_end.items()})
        if self.commands.progress < 1.0:
            terms.update({k: (0.0, terms[k][1]) for k in c.after_curriculum})
        elif c.weights_after_curriculum:
            f = ramp_fraction(self.commands.steps_since_done, self._weights_ramp)
            terms.update({k: (terms[k][0] + f * (float(w) - terms[k][0]), terms[k][1])
                          for k, w in c.weights_after_curriculum.items()})
        self.foot_height = self.foot_height.detach()
        weighted = {k: w * v * self.step_dt for k, (w, v) in terms.items()}
        return sum(weighted.values()), weighted

    def _weight(self) -> torch.Tensor:
        """[N] the robot's weight (N): its randomised masses under the model's gravity."""
        gravity = torch.linalg.norm(self.nominal["gravity"].to(self.dtype), dim=-1)
        return self.params["body_mass"].sum(dim=1) * gravity

    def _termination_reward(self) -> float:
        return self.cfg.rewards.termination

    def _torque_saturation(self, before) -> torch.Tensor:
        """:func:`~.rewards.torque_saturation_l2` of the PD demand ``k_p (q* - q) - k_d qd`` at the policy step's start
        (the state ``before`` the step, this step's targets, this env's randomised gains): where the validation
        measures it, and where a new target asks the most of the drive."""
        q, u = before
        qd = u[:, 6:]
        demand = (self.params["joint_stiffness"] * (self.joint_targets(self.actions) - q[:, 7:])
                  - self.params["joint_damping"] * qd)
        return R.torque_saturation_l2(demand, qd, self.robot.actuator)

    def _terminated(self, out) -> torch.Tensor:
        c = self.cfg.terminations
        gaps = self._body_gaps(out).detach()
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        bodies = (self._base_bodies if c.base_contact else []) + (self._thigh_bodies if c.thigh_contact else [])
        if bodies:
            terminated |= (gaps[:, bodies] < c.contact_margin).any(dim=1)
        elif c.base_contact:  # a robot without collision bodies: the base origin near the ground
            terminated |= self.q[:, 2].detach() < 0.15
        return terminated

    def _metrics(self, out) -> dict[str, torch.Tensor]:
        cmd = self.commands.command.to(self.dtype)
        base = self.base_state()
        return {"lin_vel_xy_error": torch.linalg.norm(cmd[:, :2] - base.lin_vel_b[:, :2], dim=1),
                "ang_vel_z_error": (cmd[:, 2] - base.ang_vel_b[:, 2]).abs()}

    @property
    def curriculum_progress(self) -> float:
        """The command curriculum's progress in [0, 1] (1: the full ranges; learners may schedule on it)."""
        return self.commands.progress

    def _episode_log(self, dones, terminated, diverged, time_outs) -> dict[str, float]:
        """The base class's episode log plus the command curriculum's progress (0-1); with the adversary, its envs'
        count and their mean position in each range (``Adversary/<quantity>``: 0 at the low end, 1 at the high end;
        the com offset's three axes together)."""
        log = super()._episode_log(dones, terminated, diverged, time_outs)
        log["Curriculum/command_progress"] = self.commands.progress
        if self.terrain_levels is not None:
            log["Curriculum/terrain_levels"] = self.terrain_levels.mean_level
        if bool(self.adversarial.any()):  # where the adversary holds its envs: 0 at a range's low end, 1 at its high
            log["Adversary/envs"] = float(self.adversarial.sum())
            for name, (lo, hi) in self._draw_bounds().items():
                value = self._draws[name][self.adversarial].reshape(int(self.adversarial.sum()), -1)
                log[f"Adversary/{name}"] = float(((value - lo) / (hi - lo).clamp(min=1e-12)).mean())
        return log

    # ---- resets, randomisation, events -------------------------------------------------------------------------------
    def _sample_reset(self):
        N, rc = self.num_envs, self.cfg.reset
        q = torch.tensor(self.model.default_q(base_height=rc.height), dtype=self.dtype, device=self.device)
        q[:, :2] = self.uniform(-rc.position_xy, rc.position_xy, N, 2)
        q[:, :3] = q[:, :3] + self.env_origins  # the env's terrain tile (0 on flat ground)
        q[:, 3:7] = yaw_quat(self.uniform(-rc.yaw, rc.yaw, N))
        q[:, 7:] = self.default_joint_pos_sim * self.uniform(*rc.joint_pos_scale, N, self.num_actions)
        u = torch.zeros(N, self.model.nv, dtype=self.dtype, device=self.device)
        u[:, :6] = self.uniform(-rc.velocity, rc.velocity, N, 6)
        u[:, 3:6] = quat_rotate_inverse(q[:, 3:7], u[:, 3:6])  # sampled in the world frame, as Isaac Lab
        return q, u

    def _randomize(self, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        r, N = self.cfg.randomization, self.num_envs
        if not r.enable:
            fresh = self._nominal_draws()
        else:
            r = SimpleNamespace(**r.ranges(self._ranges_after()))
            draw = self.uniform
            fresh = {"base_mass_scale": torch.exp(draw(math.log(r.base_mass_scale[0]), math.log(r.base_mass_scale[1]),
                                                       N))}
            fresh["base_com"] = torch.cat([draw(-r.base_com_xy, r.base_com_xy, N, 2),
                                           draw(-r.base_com_z, r.base_com_z, N)[:, None]], dim=1)
            fresh.update(friction=draw(*r.friction, N), stiffness_scale=draw(*r.stiffness_scale, N, 1),
                         damping_scale=draw(*r.damping_scale, N, 1))
            fresh["soft_ground_stiffness"] = self._nominal_draws()["soft_ground_stiffness"]
            if r.soft_ground_fraction > 0:  # as the other fractions: nothing drawn at 0
                lo, hi = r.soft_ground_stiffness
                soft = torch.rand(N, generator=self.generator, device=self.device) < r.soft_ground_fraction
                k = torch.exp(self.uniform(math.log(lo), math.log(hi), N))
                fresh["soft_ground_stiffness"] = torch.where(soft, k, torch.zeros_like(k))
        self._draws = {k: torch.where(mask.view((N,) + (1,) * (v.dim() - 1)), v, self._draws[k])
                       for k, v in fresh.items()}
        self.base_mass_scale = self._draws["base_mass_scale"]
        fraction = getattr(r, "adversarial_fraction", 0.0) if self.cfg.randomization.enable else 0.0
        chosen = (torch.rand(N, generator=self.generator, device=self.device) < fraction if fraction
                  else torch.zeros_like(mask))
        self.adversarial = torch.where(mask, chosen, self.adversarial)
        self._reset_since_detach = self._reset_since_detach | mask
        return self._params_of(fresh)

    def _ranges_after(self) -> float:
        """How far (0 to 1) the randomisation ranges are from the curriculum's to ``after_curriculum``'s
        (``randomization.ranges_ramp``): 0 while the command curriculum runs."""
        done = self.commands.progress >= 1.0
        return ramp_fraction(self.commands.steps_since_done if done else None, self._ranges_ramp)

    def _nominal_draws(self) -> dict[str, torch.Tensor]:
        """The randomised quantities at their nominal values: friction [N], base mass scale [N], base centre-of-mass
        offset [N, 3] (m, base frame), k_p and k_d scales [N, 1]."""
        N, kw = self.num_envs, dict(dtype=self.dtype, device=self.device)
        return {"base_mass_scale": torch.ones(N, **kw), "base_com": torch.zeros(N, 3, **kw),
                "friction": self.nominal["friction"].clone(), "stiffness_scale": torch.ones(N, 1, **kw),
                "damping_scale": torch.ones(N, 1, **kw), "soft_ground_stiffness": torch.zeros(N, **kw)}

    def _params_of(self, draws: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The simulator's parameter tensors (:data:`~..locomotion_env.RANDOMISED`) of the randomised quantities
        ``draws`` (:meth:`_nominal_draws`' keys), differentiable w.r.t. them."""
        nom, scale = self.nominal, draws["base_mass_scale"]
        com = nom["body_com"].clone()
        com[:, 0, :2] += draws["base_com"][:, :2]
        com[:, 0, 2] += draws["base_com"][:, 2]
        mass = nom["body_mass"].clone()
        mass[:, 0] *= scale
        inertia = nom["body_inertia"].clone()
        inertia[:, 0] *= scale[:, None, None]  # the same mass distribution, scaled (Isaac Lab recomputes inertia)
        return {"friction": draws["friction"], "body_mass": mass, "body_com": com, "body_inertia": inertia,
                "joint_stiffness": nom["joint_stiffness"] * draws["stiffness_scale"],
                "joint_damping": nom["joint_damping"] * draws["damping_scale"],
                "contact_soft_stiffness": draws["soft_ground_stiffness"].detach()}

    def _draw_bounds(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Lower and upper bounds of each randomised quantity under the ranges in force (broadcastable to the
        quantity's shape)."""
        r = SimpleNamespace(**self.cfg.randomization.ranges(self._ranges_after()))
        kw = dict(dtype=self.dtype, device=self.device)
        com = torch.tensor([r.base_com_xy, r.base_com_xy, r.base_com_z], **kw)
        pairs = {"base_mass_scale": r.base_mass_scale, "friction": r.friction, "stiffness_scale": r.stiffness_scale,
                 "damping_scale": r.damping_scale}
        bounds = {k: (torch.tensor(lo, **kw), torch.tensor(hi, **kw)) for k, (lo, hi) in pairs.items()}
        bounds["base_com"] = (-com, com)
        return bounds

    def detach_state(self) -> None:
        """The base class's cut of the gradient chain, then the adversary's step (``randomization.
        adversarial_fraction``): the chosen envs' randomised quantities move by ``adversarial_step`` x their range's
        width along the sign of the last backward pass's gradient w.r.t. them (up the actor's loss, down the return),
        clamped to the ranges in force, unless the env was reset since; then fresh leaves for the next horizon's
        gradient. Envs not chosen keep their draws."""
        super().detach_state()
        leaves, self._leaves = self._leaves, None
        grads = {k: v.grad for k, v in leaves.items()} if leaves is not None else self._pending_adversary_grads
        self._pending_adversary_grads = None
        if grads is not None:
            keep = self.adversarial & ~self._reset_since_detach
            step = self.cfg.randomization.adversarial_step
            with torch.no_grad():
                for name, (lo, hi) in self._draw_bounds().items():
                    grad = grads.get(name)
                    if grad is None:
                        continue
                    value = self._draws[name]
                    moved = torch.minimum(torch.maximum(value + step * (hi - lo) * torch.sign(grad), lo), hi)
                    self._draws[name] = torch.where(keep.view((-1,) + (1,) * (value.dim() - 1)), moved, value)
            self.base_mass_scale = self._draws["base_mass_scale"]
        self._reset_since_detach = torch.zeros_like(self._reset_since_detach)
        learning = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        if bool(self.adversarial.any()) and learning:
            # leaves for the quantities the adversary moves (the ground's kind takes no gradient)
            self._leaves = {k: v.detach().clone().requires_grad_(True) for k, v in self._draws.items()
                            if k != "soft_ground_stiffness"}
            self.params = self._params_of({**self._draws, **self._leaves})
        elif grads is not None:
            self.params = self._params_of(self._draws)
        if grads is not None or self._leaves is not None:  # the moved parameters' observations (critic: friction)
            self._obs = self._observe().detach()

    def _reset_envs(self, mask: torch.Tensor) -> None:
        """The terrain curriculum first (from where the finished episodes ended, their commands), then the reset."""
        if self.terrain_levels is not None and self.cfg.terrain.curriculum and self._levels_started:
            self.terrain_levels.update(mask, self.q[:, :2].detach(), self.commands.command[:, :2].to(self.dtype))
        self._levels_started = True
        super()._reset_envs(mask)

    def _on_reset(self, mask: torch.Tensor) -> None:
        r = self.cfg.randomization
        self.push_time_left = torch.where(mask, self.uniform(*r.push_interval, self.num_envs).float(),
                                          self.push_time_left)
        self.foot_height = torch.where(mask[:, None], torch.zeros_like(self.foot_height), self.foot_height)
        self.commands.resample(mask)
        base = self.base_state()  # the reset state: the tracking reference starts at its velocity
        self.commands.reset_reference(mask, torch.cat((base.lin_vel_b[:, :2], base.ang_vel_b[:, 2:]), dim=1))

    def _post_reset(self, dones: torch.Tensor) -> None:
        self.commands.update(self.step_dt, self.base_state().heading)
        r = self.cfg.randomization
        self.push_time_left = self.push_time_left - self.step_dt
        due = (self.push_time_left <= 0.0) & ~dones
        # with pushes_after_curriculum the timers run during the curriculum but push nobody
        push = due if not (r.pushes_after_curriculum and self.commands.progress < 1.0) else torch.zeros_like(due)
        if r.enable and r.push_velocity_xy > 0 and bool(push.any()):
            dv = self.uniform(-r.push_velocity_xy, r.push_velocity_xy, self.num_envs, 2) * push[:, None]
            self.u = torch.cat((self.u[:, :2] + dv, self.u[:, 2:]), dim=1)  # world-frame velocity change
        self.push_time_left = torch.where(due, self.uniform(*r.push_interval, self.num_envs).float(),
                                          self.push_time_left)

    def _task_state(self) -> dict:
        return {"commands": self.commands.state_dict(), "push_time_left": self.push_time_left.clone(),
                "base_mass_scale": self.base_mass_scale.clone(), "foot_height": self.foot_height.clone(),
                "draws": {k: v.detach().clone() for k, v in self._draws.items()},
                "adversarial": self.adversarial.clone(),
                "reset_since_detach": self._reset_since_detach.clone(),
                "terrain_levels": None if self.terrain_levels is None else self.terrain_levels.levels.clone(),
                # the adversary's next step (at detach_state) follows these: a resumed run takes the same step
                "adversary_grads": None if self._leaves is None else {
                    k: v.grad.detach().clone() for k, v in self._leaves.items() if v.grad is not None}}

    def load_schedule_state(self, state: dict) -> None:
        """The training schedule of a :meth:`state_dict` saved with another env count: the command curriculum's
        clock, and with it everything that follows that clock (the reward-weight and randomisation-range ramps, the
        after-curriculum terms, pushes and command period). The envs' states, draws and random streams stay this
        env's own: its episodes start anew."""
        self.commands.load_clock(state["task"]["commands"])

    def _load_task_state(self, state: dict) -> None:
        self.commands.load_state_dict(state["commands"])
        self.push_time_left = state["push_time_left"].clone()
        self.base_mass_scale = state["base_mass_scale"].clone().to(self.dtype)
        self.foot_height = state["foot_height"].clone().to(self.dtype)
        if self.terrain_levels is not None and state.get("terrain_levels") is not None:
            self.terrain_levels.levels = state["terrain_levels"].clone()
        if "draws" in state:
            nominal = self._nominal_draws()  # draws of options since removed are not taken
            self._draws = {k: v.clone().to(self.dtype) for k, v in state["draws"].items() if k in nominal}
            # states saved before the soft grounds: none on a soft ground
            self._draws.setdefault("soft_ground_stiffness", nominal["soft_ground_stiffness"])
            self.adversarial = state["adversarial"].clone()
        else:  # states saved before the adversary: the draws read back from the parameters
            nom = self.nominal
            self._draws = {"base_mass_scale": self.base_mass_scale.clone(),
                           "base_com": (self.params["body_com"][:, 0] - nom["body_com"][:, 0]).clone(),
                           "friction": self.params["friction"].clone(),
                           "stiffness_scale": self.params["joint_stiffness"][:, :1] / nom["joint_stiffness"][:, :1],
                           "damping_scale": self.params["joint_damping"][:, :1] / nom["joint_damping"][:, :1],
                           "soft_ground_stiffness": self._nominal_draws()["soft_ground_stiffness"]}
            self.adversarial = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._leaves = None
        grads = state.get("adversary_grads")
        self._pending_adversary_grads = (None if grads is None
                                         else {k: v.clone().to(self.dtype) for k, v in grads.items()})
        self._reset_since_detach = state.get("reset_since_detach", torch.zeros_like(self.adversarial)).clone()
