"""The velocity-tracking task as a differentiable vectorised environment (:class:`~..vec_env.DiffVecEnv`).

One :meth:`VelocityEnv.step` is one 50 Hz policy step: actions (Isaac Lab joint order) -> joint targets in the
simulator's order -> ``sim.substeps`` physics steps through the differentiable simulator (targets held) -> rewards,
terminations, time-outs -> resets of the finished envs (new state, new randomised parameters, new command; their
gradient chain is cut, the others' kept) -> pushes -> observations. With grad mode on, observations and rewards
are differentiable w.r.t. the actions of this and all earlier steps since :meth:`detach_state`.

Observation groups (a ``TensorDict``): ``"policy"`` [N, 48] (Isaac Lab's order and units, with training noise),
``"critic"`` [N, 48 + 13] (the same without noise, plus privileged: foot contact states (4), foot heights (4, m),
friction (1), base mass scale (1), base centre-of-mass offset (3, m)).

Diverged environments (flagged by the simulator's divergence guard, held at their last sane state) are
terminated, reset and counted (``extras["log"]["Episode_Termination/diverged"]``); nothing non-finite reaches
the learner.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator
from diffloco_ext.sim.torch_bridge import TorchSimulator

from ..robot_state import BaseState, quat_rotate_inverse, yaw_quat
from ..vec_env import FINAL_OBS_KEY, TIME_OUTS_KEY, DiffVecEnv
from . import rewards as R
from .commands import VelocityCommand
from .env_cfg import VelocityEnvCfg

#: Observation terms of the policy group, in order, with their sizes (Isaac Lab's flat ANYmal-D task).
POLICY_TERMS = (("base_lin_vel", 3), ("base_ang_vel", 3), ("projected_gravity", 3), ("velocity_commands", 3),
                ("joint_pos", 12), ("joint_vel", 12), ("actions", 12))
#: Foot phase offsets of the trot reference by foot name suffix (diagonal pairs LF+RH and RF+LH).
TROT_PHASE = {"LF": 0.0, "RH": 0.0, "RF": math.pi, "LH": math.pi}


class VelocityEnv(gym.Env, DiffVecEnv):
    """Velocity tracking for a quadruped in the differentiable simulator (see the module docstring)."""

    metadata = {"render_modes": [None]}

    def __init__(self, cfg: VelocityEnvCfg | None = None, render_mode: str | None = None, **kwargs):
        cfg = VelocityEnvCfg() if cfg is None else cfg
        if not isinstance(cfg, VelocityEnvCfg):
            raise TypeError(f"cfg must be a VelocityEnvCfg, got {type(cfg).__name__}")
        self.cfg = cfg
        self.render_mode = render_mode
        self.robot = get_robot(cfg.robot)
        self.num_envs = int(cfg.num_envs)
        self.device = torch.device(cfg.sim.device)
        self.num_actions = self.robot.num_joints
        self.step_dt = cfg.sim.policy_dt
        self.max_episode_length = int(round(cfg.episode_length_s / self.step_dt))
        self.model = cfg.sim.build_model(self.robot, self.num_envs)
        self.sim = Simulator.from_cfg(self.model, cfg.sim)
        self.bridge = TorchSimulator(self.sim)
        self.dtype = self.bridge.dtype
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(cfg.seed))
        self._setup_indices()
        self.commands = VelocityCommand(cfg.commands, self.num_envs, self.device, self.generator)
        n, N = self.num_actions, self.num_envs
        self.actions = torch.zeros(N, n, dtype=self.dtype, device=self.device)
        self.previous_actions = torch.zeros_like(self.actions)
        self.episode_length_buf = torch.zeros(N, dtype=torch.long, device=self.device)
        self._episode_steps = torch.zeros(N, dtype=torch.long, device=self.device)
        self.push_time_left = torch.zeros(N, device=self.device)
        self._nominal = {k: v.clone() for k, v in self.bridge.parameters().items()}
        self.params = {k: v.clone() for k, v in self._nominal.items() if k in _RANDOMISED}
        self._scales = {"base_mass": torch.ones(N, dtype=self.dtype, device=self.device)}
        self.q = torch.zeros(N, self.model.nq, dtype=self.dtype, device=self.device)
        self.u = torch.zeros(N, self.model.nv, dtype=self.dtype, device=self.device)
        self._contact_state = torch.zeros(N, self.model.num_feet, dtype=self.dtype, device=self.device)
        self._foot_height = torch.zeros_like(self._contact_state)
        self.ground_height = torch.as_tensor(self.model.ground_height.numpy(), dtype=self.dtype, device=self.device)
        self._episode_sums: dict[str, torch.Tensor] = {}
        self._counts = {"diverged": 0}
        obs_space = gym.spaces.Box(-np.inf, np.inf, shape=(sum(s for _, s in POLICY_TERMS),), dtype=np.float32)
        self.observation_space = gym.spaces.Dict({"policy": obs_space})
        self.action_space = gym.spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
        self._reset_envs(torch.ones(N, dtype=torch.bool, device=self.device))
        self._obs = self._observations()

    # ---- indices and conventions ----------------------------------------------------------------------------
    def _setup_indices(self) -> None:
        robot, dev, dt = self.robot, self.device, self.dtype
        #: x_isaaclab = x_sim[:, to_isaaclab]; x_sim = x_isaaclab[:, to_sim]
        self.to_isaaclab = torch.as_tensor(robot.isaaclab_permutation(), device=dev)
        self.to_sim = torch.argsort(self.to_isaaclab)
        self.joint_names = [robot.joint_names[i] for i in self.to_isaaclab.tolist()]
        self.default_joint_pos_sim = torch.as_tensor(self.model.default_joint_pos, dtype=dt, device=dev)
        self.default_joint_pos = self.default_joint_pos_sim[self.to_isaaclab]
        lower = torch.tensor([j.lower for j in robot.joints], dtype=dt, device=dev)
        upper = torch.tensor([j.upper for j in robot.joints], dtype=dt, device=dev)
        mid, half = 0.5 * (lower + upper), 0.5 * (upper - lower) * self.cfg.rewards.soft_joint_pos_limit_factor
        finite = torch.isfinite(lower) & torch.isfinite(upper)
        inf = torch.full_like(lower, math.inf)
        self.soft_lower = torch.where(finite, mid - half, -inf)
        self.soft_upper = torch.where(finite, mid + half, inf)
        self.foot_names = [f.name for f in robot.feet]
        self.foot_radius = torch.tensor([f.radius for f in robot.feet], dtype=dt, device=dev)
        self.foot_phase = torch.tensor([TROT_PHASE.get(f.name[:2], 0.0) for f in robot.feet], dtype=dt, device=dev)

    # ---- DiffVecEnv / rsl_rl VecEnv ------------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        return self._obs

    def detach_state(self) -> None:
        self.q, self.u = self.q.detach(), self.u.detach()
        self.actions = self.actions.detach()
        self.previous_actions = self.previous_actions.detach()
        self._obs = self._obs.detach()

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Reset every env (gymnasium API): returns ``(observations, extras)``."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self._reset_envs(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        self._obs = self._observations()
        return self._obs, {}

    def step(self, actions: torch.Tensor):
        """One policy step (see the module docstring). ``actions`` [N, 12] in Isaac Lab's joint order."""
        N = self.num_envs
        if tuple(actions.shape) != (N, self.num_actions):
            raise ValueError(f"actions must have shape {(N, self.num_actions)}, got {tuple(actions.shape)}")
        actions = actions.to(device=self.device, dtype=self.dtype)
        if self.cfg.actions.clip is not None:
            actions = actions.clamp(-self.cfg.actions.clip, self.cfg.actions.clip)
        self.previous_actions, self.actions = self.actions, actions
        target = self.default_joint_pos_sim + self.cfg.actions.scale * actions[:, self.to_sim]
        joint_vel_before = self.u[:, 6:]
        out = self.bridge.step(self.q, self.u, target, params=self._step_params())
        self.q, self.u = out.q, out.u
        self.episode_length_buf = self.episode_length_buf + 1
        self._contact_state = out.contact_state

        base = BaseState(self.q, self.u, self.params["body_com"][:, 0])
        body_gaps = self._body_gaps(out)
        reward, terms = self._rewards(base, out, joint_vel_before, body_gaps)

        terminated, diverged = self._terminations(out, body_gaps)
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        reward = reward + self.cfg.rewards.termination * terminated.to(reward.dtype) * self.step_dt
        dones = terminated | time_outs
        self._accumulate(terms, reward)

        final_obs = self._observations()  # of the state reached, before any reset (differentiable)
        extras = {TIME_OUTS_KEY: time_outs, FINAL_OBS_KEY: final_obs, "log": {}}
        if bool(dones.any()):
            extras["log"] = self._episode_log(dones, terminated, diverged, time_outs)
            self._reset_envs(dones)
        self.commands.update(self.step_dt, BaseState(self.q, self.u, self.params["body_com"][:, 0]).heading)
        self._push(~dones)
        self._obs = self._observations()
        return self._obs, reward, dones.to(torch.long), extras

    # ---- parts of the step ---------------------------------------------------------------------------------------
    def _step_params(self) -> dict[str, torch.Tensor]:
        return self.params

    def _body_gaps(self, out) -> torch.Tensor:
        """Signed gaps [N, K] (m) of the collision bodies (base, thighs, shanks) at the state reached."""
        gaps = getattr(out, "body_gap", None)
        if gaps is None:
            return torch.zeros(self.num_envs, 0, dtype=self.dtype, device=self.device)
        return gaps

    def _rewards(self, base: BaseState, out, joint_vel_before: torch.Tensor, body_gaps: torch.Tensor):
        c, cmd = self.cfg.rewards, self.commands.command.to(self.dtype)
        lin_vel_b, ang_vel_b, gravity_b = base.lin_vel_b, base.ang_vel_b, base.projected_gravity_b
        torque = getattr(out, "joint_torque", None)
        foot_height = out.foot_pos[..., 2] - self.foot_radius - self.ground_height[:, None]
        self._foot_height = foot_height.detach()
        moving = (torch.linalg.norm(cmd, dim=1) > self.cfg.foot_height_reference.standing_threshold)
        time = self.episode_length_buf.to(self.dtype) * self.step_dt
        reference = R.foot_height_reference(time, self.foot_phase, self.cfg.foot_height_reference, moving)
        terms = {
            "track_lin_vel_xy": (c.track_lin_vel_xy, R.track_lin_vel_xy_exp(cmd, lin_vel_b, c.track_lin_vel_xy_std)),
            "track_ang_vel_z": (c.track_ang_vel_z, R.track_ang_vel_z_exp(cmd, ang_vel_b, c.track_ang_vel_z_std)),
            "lin_vel_z": (c.lin_vel_z, R.lin_vel_z_l2(lin_vel_b)),
            "ang_vel_xy": (c.ang_vel_xy, R.ang_vel_xy_l2(ang_vel_b)),
            "flat_orientation": (c.flat_orientation, R.flat_orientation_l2(gravity_b)),
            "joint_torques": (c.joint_torques, R.joint_torques_l2(torque) if torque is not None
                              else torch.zeros_like(lin_vel_b[:, 0])),
            "joint_acc": (c.joint_acc, R.joint_acc_l2(self.u[:, 6:], joint_vel_before, self.step_dt)),
            "action_rate": (c.action_rate, R.action_rate_l2(self.actions, self.previous_actions)),
            "foot_height_reference": (c.foot_height_reference, R.foot_height_tracking_exp(
                foot_height, reference, self.cfg.foot_height_reference.std)),
            "undesired_contact": (c.undesired_contact, R.penetration(body_gaps[:, self._undesired_bodies()])),
            "joint_pos_limits": (c.joint_pos_limits, R.joint_pos_limits(self.q[:, 7:], self.soft_lower,
                                                                         self.soft_upper)),
        }
        reward = sum(weight * value for weight, value in terms.values()) * self.step_dt
        return reward, {k: v * w * self.step_dt for k, (w, v) in terms.items()}

    def _undesired_bodies(self) -> list[int]:
        names = getattr(self.model, "collision_body_names", ())
        return [i for i, n in enumerate(names) if n.endswith(("THIGH", "SHANK"))]

    def _terminations(self, out, body_gaps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.cfg.terminations
        diverged = out.diverged.to(self.device)
        terminated = diverged.clone()
        names = getattr(self.model, "collision_body_names", ())
        touching = body_gaps.detach() < c.contact_margin
        for i, name in enumerate(names):
            if (c.base_contact and name == "base") or (c.thigh_contact and name.endswith("THIGH")):
                terminated |= touching[:, i]
        if not names and c.base_contact:  # no collision bodies: the base origin below the feet's reach
            terminated |= self.q[:, 2].detach() < 0.15
        return terminated, diverged

    def _push(self, mask: torch.Tensor) -> None:
        """Interval pushes: add U(+-push_velocity_xy) to the base's planar velocity (m/s, world)."""
        r = self.cfg.randomization
        self.push_time_left = self.push_time_left - self.step_dt
        due = (self.push_time_left <= 0.0) & mask
        if r.enable and r.push_velocity_xy > 0 and bool(due.any()):
            dv = (2.0 * torch.rand(self.num_envs, 2, generator=self.generator, device=self.device) - 1.0) * r.push_velocity_xy
            dv = dv.to(self.dtype) * due[:, None]
            self.u = torch.cat((self.u[:, :2] + dv, self.u[:, 2:]), dim=1)
        self.push_time_left = torch.where(due, self._uniform(*r.push_interval, self.num_envs), self.push_time_left)

    # ---- observations --------------------------------------------------------------------------------------------
    def _observations(self) -> TensorDict:
        base = BaseState(self.q, self.u, self.params["body_com"][:, 0])
        joint_pos = self.q[:, 7:][:, self.to_isaaclab] - self.default_joint_pos
        joint_vel = self.u[:, 6:][:, self.to_isaaclab]
        terms = [base.lin_vel_b, base.ang_vel_b, base.projected_gravity_b, self.commands.command.to(self.dtype),
                 joint_pos, joint_vel, self.actions]
        clean = torch.cat(terms, dim=1)
        noise_cfg = self.cfg.observation_noise
        if noise_cfg.enable:
            widths = [noise_cfg.base_lin_vel, noise_cfg.base_ang_vel, noise_cfg.projected_gravity, 0.0,
                      noise_cfg.joint_pos, noise_cfg.joint_vel, 0.0]
            scale = torch.cat([torch.full((s,), w, dtype=self.dtype, device=self.device)
                               for (_, s), w in zip(POLICY_TERMS, widths)])
            noise = (2.0 * torch.rand(clean.shape, generator=self.generator, device=self.device) - 1.0).to(self.dtype)
            policy = clean + noise * scale
        else:
            policy = clean
        groups = {"policy": policy}
        if self.cfg.privileged_critic:
            privileged = torch.cat([self._contact_state.to(self.dtype), self._foot_height,
                                    self.params["friction"][:, None], self._scales["base_mass"][:, None],
                                    self.params["body_com"][:, 0] - self._nominal["body_com"][:, 0]], dim=1)
            groups["critic"] = torch.cat([clean, privileged], dim=1)
        return TensorDict(groups, batch_size=[self.num_envs])

    # ---- resets and randomisation --------------------------------------------------------------------------------
    def _uniform(self, low: float, high: float, *shape) -> torch.Tensor:
        return low + (high - low) * torch.rand(*shape, generator=self.generator, device=self.device)

    def _reset_envs(self, mask: torch.Tensor) -> None:
        """New states, parameters, commands and counters for the envs in ``mask`` [N] (values drawn for all
        envs and kept where masked: out of place, so the other envs' gradient chains are untouched)."""
        N, dt, rc, dev = self.num_envs, self.dtype, self.cfg.reset, self.device
        m = mask[:, None]
        q = torch.tensor(self.model.default_q(base_height=rc.height), dtype=dt, device=dev)
        q[:, :2] = self._uniform(-rc.position_xy, rc.position_xy, N, 2).to(dt)
        q[:, 3:7] = yaw_quat(self._uniform(-rc.yaw, rc.yaw, N).to(dt))
        q[:, 7:] = self.default_joint_pos_sim * self._uniform(*rc.joint_pos_scale, N, self.num_actions).to(dt)
        u = torch.zeros(N, self.model.nv, dtype=dt, device=dev)
        u[:, :6] = self._uniform(-rc.velocity, rc.velocity, N, 6).to(dt)
        u[:, 3:6] = quat_rotate_inverse(q[:, 3:7], u[:, 3:6])  # sampled in the world frame, as Isaac Lab
        self.q = torch.where(m, q, self.q)
        self.u = torch.where(m, u, self.u)
        self._randomize(mask)
        zeros = torch.zeros_like(self.actions)
        self.actions = torch.where(m, zeros, self.actions)
        self.previous_actions = torch.where(m, zeros, self.previous_actions)
        self.episode_length_buf = torch.where(mask, torch.zeros_like(self.episode_length_buf), self.episode_length_buf)
        self._contact_state = torch.where(m, torch.zeros_like(self._contact_state), self._contact_state)
        self._foot_height = torch.where(m, torch.zeros_like(self._foot_height), self._foot_height)
        r = self.cfg.randomization
        self.push_time_left = torch.where(mask, self._uniform(*r.push_interval, N), self.push_time_left)
        self.commands.resample(mask)

    def _randomize(self, mask: torch.Tensor) -> None:
        r, N, dt, nom = self.cfg.randomization, self.num_envs, self.dtype, self._nominal
        if not r.enable:
            fresh = {k: nom[k] for k in self.params}
            mass_scale = torch.ones(N, dtype=dt, device=self.device)
        else:
            mass_scale = torch.exp(self._uniform(math.log(r.base_mass_scale[0]), math.log(r.base_mass_scale[1]), N)).to(dt)
            com = nom["body_com"].clone()
            com[:, 0, :2] += self._uniform(-r.base_com_xy, r.base_com_xy, N, 2).to(dt)
            com[:, 0, 2] += self._uniform(-r.base_com_z, r.base_com_z, N).to(dt)
            mass = nom["body_mass"].clone()
            mass[:, 0] *= mass_scale
            inertia = nom["body_inertia"].clone()
            inertia[:, 0] *= mass_scale[:, None, None]  # same shape of the mass distribution, scaled
            fresh = {
                "friction": self._uniform(*r.friction, N).to(dt),
                "body_mass": mass, "body_com": com, "body_inertia": inertia,
                "joint_stiffness": nom["joint_stiffness"] * self._uniform(*r.stiffness_scale, N, 1).to(dt),
                "joint_damping": nom["joint_damping"] * self._uniform(*r.damping_scale, N, 1).to(dt),
            }
        for name, value in fresh.items():
            shape = (N,) + (1,) * (value.dim() - 1)
            self.params[name] = torch.where(mask.view(shape), value, self.params[name])
        self._scales["base_mass"] = torch.where(mask, mass_scale, self._scales["base_mass"])

    # ---- logging ---------------------------------------------------------------------------------------------------
    def _accumulate(self, terms: dict[str, torch.Tensor], reward: torch.Tensor) -> None:
        lin_err = torch.linalg.norm(self.commands.command[:, :2].to(self.dtype) - BaseState(
            self.q, self.u, self.params["body_com"][:, 0]).lin_vel_b[:, :2], dim=1)
        ang_err = (self.commands.command[:, 2].to(self.dtype) - self.u[:, 5]).abs()
        values = {**{f"Episode_Reward/{k}": v for k, v in terms.items()},
                  "Metrics/lin_vel_xy_error": lin_err, "Metrics/ang_vel_z_error": ang_err}
        self._episode_steps = self._episode_steps + 1
        for key, value in values.items():
            acc = self._episode_sums.get(key)
            value = value.detach()
            self._episode_sums[key] = value.clone() if acc is None else acc + value

    def _episode_log(self, dones, terminated, diverged, time_outs) -> dict[str, float]:
        """Means over the envs that finished: each reward term's episode sum per second of a full episode (Isaac
        Lab's ``Episode_Reward/*``), mean tracking errors over the episode (m/s, rad/s), termination counts."""
        steps = self._episode_steps[dones].to(self.dtype).clamp(min=1)
        log = {}
        for key, acc in self._episode_sums.items():
            if key.startswith("Episode_Reward"):  # Isaac Lab's normalisation: per second of a full episode
                log[key] = float(acc[dones].mean() / self.cfg.episode_length_s)
            else:  # mean over the steps the episode had
                log[key] = float((acc[dones] / steps).mean())
            self._episode_sums[key] = torch.where(dones, torch.zeros_like(acc), acc)
        self._episode_steps = torch.where(dones, torch.zeros_like(self._episode_steps), self._episode_steps)
        n_div = int((diverged & dones).sum())
        self._counts["diverged"] += n_div
        log["Episode_Termination/diverged"] = float(n_div)
        log["Episode_Termination/terminated"] = float((terminated & ~diverged).sum())
        log["Episode_Termination/time_out"] = float(time_outs.sum())
        log["Episode_Termination/diverged_total"] = float(self._counts["diverged"])
        return log

    # ---- checkpointing -----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"q": self.q.detach().clone(), "u": self.u.detach().clone(), "actions": self.actions.detach().clone(),
                "previous_actions": self.previous_actions.detach().clone(),
                "episode_length_buf": self.episode_length_buf.clone(), "push_time_left": self.push_time_left.clone(),
                "params": {k: v.clone() for k, v in self.params.items()},
                "scales": {k: v.clone() for k, v in self._scales.items()},
                "commands": self.commands.state_dict(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        for key in ("q", "u", "actions", "previous_actions", "episode_length_buf", "push_time_left"):
            setattr(self, key, state[key].clone().to(self.device))
        self.params = {k: v.clone() for k, v in state["params"].items()}
        self._scales = {k: v.clone() for k, v in state["scales"].items()}
        self.commands.load_state_dict(state["commands"])
        self.generator.set_state(state["generator"])
        self._obs = self._observations()


_RANDOMISED = ("friction", "body_mass", "body_com", "body_inertia", "joint_stiffness", "joint_damping")

