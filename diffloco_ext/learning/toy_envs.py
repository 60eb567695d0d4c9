"""Small differentiable environments written in torch, for developing and testing the learners.

Both follow the :class:`~diffloco_ext.learning.env.DiffVecEnv` protocol: smooth dynamics written with torch ops,
so a rollout is differentiable end to end; automatic resets; ``extras["time_outs"]`` and
``extras["final_observations"]``; an own ``torch.Generator`` so that ``state_dict``/``load_state_dict`` capture
everything needed to continue a run bit-for-bit.

- :class:`PendulumSwingUpEnv`: torque-limited pendulum swing-up (the classic gym ``Pendulum`` physics: g = 10 m/s²,
  m = 1 kg, l = 1 m, Δt = 0.05 s, torque ≤ 2 N·m, too weak to lift the pendulum directly, so it must swing).
  Time-outs only.
- :class:`PointMassEnv`: 2-D point mass driven to the origin; leaving the arena is a termination.

Actions are in [-1, 1] (clamped, so PPO's unbounded Gaussian samples are valid too; SHAC's tanh-squashed actions
pass the clamp with unit gradient).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import asdict, dataclass

import torch
from tensordict import TensorDict

from diffloco_ext.learning.env import FINAL_OBS_KEY, TIME_OUTS_KEY, DiffVecEnv


class _TorchToyEnv(DiffVecEnv):
    """Shared bookkeeping: one state tensor ``(N, S)``, episode counters, automatic resets, RNG.

    Subclasses define ``_sample_state``, ``_dynamics``, ``_reward``, ``_terminated`` and ``_observe``.
    """

    def __init__(self, cfg, num_actions: int, device: str | torch.device = "cpu") -> None:
        self.cfg = cfg
        self.device = torch.device(device)
        self.num_envs = int(cfg.num_envs)
        self.num_actions = num_actions
        self.max_episode_length = int(cfg.max_episode_length)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(cfg.seed))
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.state = self._sample_state(self.num_envs)

    # ---- rsl_rl VecEnv -------------------------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        """Current observations, ``TensorDict({"policy": (N, O)})``."""
        return self._obs_dict(self.state)

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """One control step; see :meth:`DiffVecEnv.step`."""
        if actions.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"actions must have shape {(self.num_envs, self.num_actions)}, got {tuple(actions.shape)}")
        actions = actions.to(self.device).clamp(-1.0, 1.0)
        next_state = self._dynamics(self.state, actions)
        rewards = self._reward(next_state, actions)
        self.episode_length_buf = self.episode_length_buf + 1
        terminated = self._terminated(next_state)
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        dones = terminated | time_outs
        final_obs = self._obs_dict(next_state)
        # Fresh states for every env (RNG use independent of how many envs finish), kept only where done.
        fresh = self._sample_state(self.num_envs)
        self.state = torch.where(dones.unsqueeze(-1), fresh, next_state)
        self.episode_length_buf = torch.where(dones, torch.zeros_like(self.episode_length_buf), self.episode_length_buf)
        extras = {TIME_OUTS_KEY: time_outs, FINAL_OBS_KEY: final_obs}
        return self._obs_dict(self.state), rewards, dones.to(torch.long), extras

    # ---- DiffVecEnv ----------------------------------------------------------------------------------------------
    def detach_state(self) -> None:
        """Cut the autograd graph at the current state."""
        self.state = self.state.detach()

    def state_dict(self) -> dict:
        """Simulation state, episode counters and RNG state (for exact resumption)."""
        return {
            "state": self.state.detach().clone(),
            "episode_length_buf": self.episode_length_buf.clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.state = state["state"].to(self.device).clone()
        self.episode_length_buf = state["episode_length_buf"].to(self.device).clone()
        self.generator.set_state(state["generator"])

    def cfg_dict(self) -> dict:
        """The configuration as a dict (for logging)."""
        return asdict(self.cfg)

    # ---- helpers -------------------------------------------------------------------------------------------------
    def _uniform(self, n: int, dim: int, half_range: float) -> torch.Tensor:
        u = torch.rand(n, dim, generator=self.generator, device=self.device)
        return (2.0 * u - 1.0) * half_range

    def _obs_dict(self, state: torch.Tensor) -> TensorDict:
        return TensorDict({"policy": self._observe(state)}, batch_size=[self.num_envs], device=self.device)

    @abstractmethod
    def _sample_state(self, n: int) -> torch.Tensor: ...

    @abstractmethod
    def _dynamics(self, state: torch.Tensor, actions: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def _reward(self, state: torch.Tensor, actions: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def _terminated(self, state: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def _observe(self, state: torch.Tensor) -> torch.Tensor: ...


@dataclass
class PendulumSwingUpCfg:
    """Pendulum swing-up parameters (SI units; angle 0 = upright)."""

    num_envs: int = 64
    seed: int = 0
    dt: float = 0.05
    """Control and integration step [s]."""
    gravity: float = 10.0
    mass: float = 1.0
    length: float = 1.0
    max_torque: float = 2.0
    """Torque at action 1 [N·m]."""
    max_episode_length: int = 200
    """Steps per episode (10 s)."""
    velocity_cost: float = 0.1
    action_cost: float = 0.001
    init_angle: float = math.pi
    """Initial angle drawn uniformly from [-init_angle, init_angle] [rad]."""
    init_velocity: float = 1.0
    """Initial angular velocity drawn uniformly from [-init_velocity, init_velocity] [rad/s]."""


class PendulumSwingUpEnv(_TorchToyEnv):
    """Torque-limited pendulum swing-up.

    State ``(θ, θ̇)`` with θ = 0 upright; dynamics (semi-implicit Euler, uniform rod about its end)
    θ̈ = 3g/(2l)·sin θ + 3/(m l²)·τ, τ = max_torque·a. Observation ``(cos θ, sin θ, θ̇)``, shape ``(N, 3)``.
    Reward per step (after the step) r = −[2(1 − cos θ) + c_v θ̇² + c_a τ²], a smooth version of gym's
    −[θ² + 0.1 θ̇² + 0.001 τ²] (equal to second order at the top). Episodes end by time-out only.
    """

    def __init__(self, cfg: PendulumSwingUpCfg | None = None, device: str | torch.device = "cpu") -> None:
        super().__init__(cfg or PendulumSwingUpCfg(), num_actions=1, device=device)

    def _sample_state(self, n: int) -> torch.Tensor:
        return torch.cat([self._uniform(n, 1, self.cfg.init_angle), self._uniform(n, 1, self.cfg.init_velocity)], -1)

    def _dynamics(self, state: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        theta, theta_dot = state[:, 0], state[:, 1]
        torque = c.max_torque * actions[:, 0]
        theta_ddot = 3.0 * c.gravity / (2.0 * c.length) * torch.sin(theta) + 3.0 / (c.mass * c.length**2) * torque
        theta_dot = theta_dot + c.dt * theta_ddot
        theta = theta + c.dt * theta_dot
        return torch.stack([theta, theta_dot], dim=-1)

    def _reward(self, state: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        torque = c.max_torque * actions[:, 0]
        return -(2.0 * (1.0 - torch.cos(state[:, 0])) + c.velocity_cost * state[:, 1] ** 2 + c.action_cost * torque**2)

    def _terminated(self, state: torch.Tensor) -> torch.Tensor:
        return torch.zeros(state.shape[0], dtype=torch.bool, device=state.device)

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.cos(state[:, 0]), torch.sin(state[:, 0]), state[:, 1]], dim=-1)


@dataclass
class PointMassCfg:
    """2-D point-mass navigation parameters (SI units)."""

    num_envs: int = 64
    seed: int = 0
    dim: int = 2
    """Number of spatial dimensions (= number of actions)."""
    dt: float = 0.1
    mass: float = 1.0
    max_force: float = 1.0
    """Force per axis at action 1 [N]."""
    drag: float = 0.5
    """Linear drag coefficient [1/s]."""
    arena_half_width: float = 3.0
    """Leaving the box [-w, w]^dim is a termination [m]."""
    init_position: float = 2.0
    """Initial position drawn uniformly from [-init_position, init_position]^dim [m]."""
    init_velocity: float = 0.5
    max_episode_length: int = 100
    action_cost: float = 0.01


class PointMassEnv(_TorchToyEnv):
    """Point mass (in ``dim`` dimensions, default 2) pushed towards the origin; terminates when it leaves the arena.

    State ``(p, v)``, ``(N, 2·dim)``; v̇ = F/m − drag·v, semi-implicit Euler. Observation = state.
    Reward r = exp(−|p|²/(2·dim)) − c_a |a|²/dim (positive, so terminating early loses reward).
    """

    def __init__(self, cfg: PointMassCfg | None = None, device: str | torch.device = "cpu") -> None:
        cfg = cfg or PointMassCfg()
        super().__init__(cfg, num_actions=int(cfg.dim), device=device)

    def _sample_state(self, n: int) -> torch.Tensor:
        d = int(self.cfg.dim)
        return torch.cat([self._uniform(n, d, self.cfg.init_position), self._uniform(n, d, self.cfg.init_velocity)], -1)

    def _dynamics(self, state: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        pos, vel = state[:, : c.dim], state[:, c.dim :]
        vel = vel + c.dt * (c.max_force * actions / c.mass - c.drag * vel)
        pos = pos + c.dt * vel
        return torch.cat([pos, vel], dim=-1)

    def _reward(self, state: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        pos = state[:, : self.cfg.dim]
        return torch.exp(-0.5 * (pos**2).mean(-1)) - self.cfg.action_cost * (actions**2).mean(-1)

    def _terminated(self, state: torch.Tensor) -> torch.Tensor:
        return (state[:, : self.cfg.dim].abs() > self.cfg.arena_half_width).any(-1)

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        return state.clone()
