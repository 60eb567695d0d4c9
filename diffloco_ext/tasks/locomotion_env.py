"""The shared body of the locomotion tasks: a robot in the differentiable simulator as a
:class:`~.vec_env.DiffVecEnv` (and a gymnasium env), with Isaac Lab's action and joint-order conventions.

One :meth:`LocomotionEnv.step` is one policy step: actions (Isaac Lab's joint order) -> joint targets
``default + scale * action`` in the simulator's order -> ``sim.substeps`` physics steps (targets held) through
the differentiable simulator -> rewards, terminations, time-outs (the task's hooks) -> resets of the finished
envs (new state and parameters, out of place: their gradient chain is cut, the others' kept) -> the task's
post-reset events -> observations. With grad mode on everything is differentiable w.r.t. the actions since the
last :meth:`detach_state`.

Diverged environments (flagged by the simulator's divergence guard, held at their last sane state) count as
terminated, are reset and are counted in ``extras["log"]["Episode_Termination/diverged"]``: nothing non-finite
reaches the learner. A task subclass provides ``_observations``, ``_rewards``, ``_terminated``, ``_sample_reset``
and may override ``_randomize`` and ``_post_reset``.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from diffloco_ext.assets import get_robot

from .vec_env import FINAL_OBS_KEY, TIME_OUTS_KEY, DiffVecEnv

#: Per-env model parameters a task may randomise (out of place, see :meth:`LocomotionEnv._randomize`).
RANDOMISED = ("friction", "body_mass", "body_com", "body_inertia", "joint_stiffness", "joint_damping",
              "contact_soft_stiffness")


class LocomotionEnv(gym.Env, DiffVecEnv):
    """A robot task in the differentiable simulator. ``cfg`` needs ``robot``, ``num_envs``, ``seed``,
    ``episode_length_s``, ``sim`` (:class:`~diffloco_ext.sim.config.SimCfg`), ``actions`` (``scale``, ``clip``)
    and ``termination_reward``-style fields the subclass reads."""

    metadata = {"render_modes": [None]}
    cfg_class: type = object
    num_policy_obs: int = 0

    def __init__(self, cfg=None, render_mode: str | None = None, **kwargs):
        cfg = self.cfg_class() if cfg is None else cfg
        if not isinstance(cfg, self.cfg_class):
            raise TypeError(f"cfg must be a {self.cfg_class.__name__}, got {type(cfg).__name__}")
        self.cfg = cfg
        self.render_mode = render_mode
        self.robot = get_robot(cfg.robot)
        self.num_envs = N = int(cfg.num_envs)
        self.device = torch.device(cfg.sim.device)
        self.num_actions = n = self.robot.num_joints
        self.step_dt = cfg.sim.policy_dt
        self.max_episode_length = int(round(cfg.episode_length_s / self.step_dt))
        self.model = cfg.sim.build_model(self.robot, N, **self._model_kwargs())
        # terminations and contact penalties read the body gaps; an aligned engine (Song et al.) steps in float64
        self.bridge = cfg.sim.build_bridge(self.model, body_gaps=True)
        self.sim = self.bridge.sim
        self.dtype = self.bridge.dtype  # the states'
        #: the observations' and rewards' precision (``cfg.sim.dtype``; the states' unless an aligned engine runs)
        self.output_dtype = getattr(torch, cfg.sim.dtype)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(cfg.seed))
        self._setup_joint_order()
        zeros = dict(dtype=self.dtype, device=self.device)
        self.actions = torch.zeros(N, n, **zeros)
        self.previous_actions = torch.zeros_like(self.actions)
        self.episode_length_buf = torch.zeros(N, dtype=torch.long, device=self.device)
        self._episode_steps = torch.zeros(N, dtype=torch.long, device=self.device)
        self.nominal = {k: v.clone() for k, v in self.bridge.parameters().items()}
        self.params = {k: v.clone() for k, v in self.nominal.items() if k in RANDOMISED}
        self.q = torch.zeros(N, self.model.nq, **zeros)
        self.u = torch.zeros(N, self.model.nv, **zeros)
        self.contact_state = torch.zeros(N, self.model.num_feet, **zeros)
        self.ground_height = torch.as_tensor(self.model.ground_height.numpy(), **zeros)
        self.last_output = None
        self.step_metrics: dict[str, torch.Tensor] = {}  # the last step's task metrics [N] (``_metrics``), detached
        self._episode_sums: dict[str, torch.Tensor] = {}
        self._diverged_total = 0
        self.observation_space = gym.spaces.Dict(
            {"policy": gym.spaces.Box(-np.inf, np.inf, shape=(self.num_policy_obs,), dtype=np.float32)})
        self.action_space = gym.spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
        self._init_task()
        self._reset_envs(torch.ones(N, dtype=torch.bool, device=self.device))
        self._obs = self._observe()

    def _observe(self) -> TensorDict:
        """The task's observations in :attr:`output_dtype`."""
        obs = self._observations()
        if self.output_dtype != self.dtype:
            obs = obs.apply(lambda t: t.to(self.output_dtype) if t.is_floating_point() else t)
        return obs

    def _model_kwargs(self) -> dict:
        """Extra arguments of :func:`~diffloco_ext.sim.model.build_model` (e.g. a task's terrain); called first."""
        return {}

    def _init_task(self) -> None:
        """Task state created before the first reset (commands, timers, ...)."""

    # ---- conventions ---------------------------------------------------------------------------------------------
    def _setup_joint_order(self) -> None:
        robot, dev, dt = self.robot, self.device, self.dtype
        #: x_isaaclab = x_sim[:, to_isaaclab]; x_sim = x_isaaclab[:, to_sim]
        self.to_isaaclab = torch.as_tensor(robot.isaaclab_permutation(), device=dev)
        self.to_sim = torch.argsort(self.to_isaaclab)
        #: joint names in the policy's (Isaac Lab's) order
        self.joint_names = [robot.joint_names[i] for i in self.to_isaaclab.tolist()]
        self.default_joint_pos_sim = torch.as_tensor(self.model.default_joint_pos, dtype=dt, device=dev)
        self.default_joint_pos = self.default_joint_pos_sim[self.to_isaaclab]
        self.joint_lower = torch.tensor([j.lower for j in robot.joints], dtype=dt, device=dev)
        self.joint_upper = torch.tensor([j.upper for j in robot.joints], dtype=dt, device=dev)
        self.foot_names = [f.name for f in robot.feet]
        self.foot_radius = torch.tensor([f.radius for f in robot.feet], dtype=dt, device=dev)

    def soft_joint_limits(self, factor: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Joint limits shrunk about their middle to ``factor`` of the range (rad, simulator order; +-inf where
        a joint has none), as Isaac Lab's ``soft_joint_pos_limit_factor``."""
        lo, hi = self.joint_lower, self.joint_upper
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * factor
        finite = torch.isfinite(lo) & torch.isfinite(hi)
        inf = torch.full_like(lo, math.inf)
        return torch.where(finite, mid - half, -inf), torch.where(finite, mid + half, inf)

    def joint_targets(self, actions: torch.Tensor) -> torch.Tensor:
        """Joint position targets [N, n] (rad, simulator order) of actions [N, n] in Isaac Lab's order."""
        return self.default_joint_pos_sim + self.cfg.actions.scale * actions[:, self.to_sim]

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
        self._obs = self._observe()
        return self._obs, {}

    def step(self, actions: torch.Tensor):
        """One policy step (see the module docstring). ``actions`` [N, n] in Isaac Lab's joint order."""
        N = self.num_envs
        if not isinstance(actions, torch.Tensor) or tuple(actions.shape) != (N, self.num_actions):
            raise ValueError(f"actions must be a tensor of shape {(N, self.num_actions)}, got "
                             f"{tuple(getattr(actions, 'shape', ()))}")
        actions = actions.to(device=self.device, dtype=self.dtype)
        relative_clip = getattr(self.cfg, "grad_clip_relative", None)
        if relative_clip is not None and actions.requires_grad and torch.is_grad_enabled():
            actions = actions.view_as(actions)  # a node of our own to hook, the caller's tensor untouched
            actions.register_hook(_row_norm_clip(relative_clip))
        if self.cfg.actions.clip is not None:
            actions = actions.clamp(-self.cfg.actions.clip, self.cfg.actions.clip)
        self.previous_actions, self.actions = self.actions, actions
        before = (self.q, self.u)
        out = self.bridge.step(self.q, self.u, self.joint_targets(actions), params=self.params)
        self.last_output = out
        diverged = out.diverged.to(self.device)
        self.q, self.u = out.q, out.u
        if bool(diverged.any()):  # held at its last sane state; non-finite only if it came in so: zeroed
            bad = diverged[:, None]
            self.q = torch.where(bad & ~torch.isfinite(self.q), torch.zeros_like(self.q), self.q)
            self.u = torch.where(bad & ~torch.isfinite(self.u), torch.zeros_like(self.u), self.u)
        if relative_clip is not None and self.q.requires_grad and torch.is_grad_enabled():
            self.q.register_hook(_row_norm_clip(relative_clip))
            self.u.register_hook(_row_norm_clip(relative_clip))
        self.episode_length_buf = self.episode_length_buf + 1
        self.contact_state = out.contact_state
        reward, terms = self._rewards(out, before)
        reward = torch.where(diverged, torch.zeros_like(reward), reward)
        terms = {k: torch.where(diverged, torch.zeros_like(v), v) for k, v in terms.items()}
        terminated = self._terminated(out) | diverged
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        reward = reward + self._termination_reward() * terminated.to(reward.dtype) * self.step_dt
        dones = terminated | time_outs
        metrics = self._metrics(out)
        self.step_metrics = {k: v.detach() for k, v in metrics.items()}  # this step's, before any reset (play)
        self._accumulate(terms, metrics)

        final_obs = self._observe()  # of the state reached, before any reset (differentiable)
        extras = {TIME_OUTS_KEY: time_outs, FINAL_OBS_KEY: final_obs, "log": {}}
        if bool(dones.any()):
            extras["log"] = self._episode_log(dones, terminated, diverged, time_outs)
            self._reset_envs(dones)
        self._post_reset(dones)
        self._obs = self._observe()
        return self._obs, reward.to(self.output_dtype), dones.to(torch.long), extras

    # ---- task hooks ------------------------------------------------------------------------------------------------
    def _observations(self) -> TensorDict:
        raise NotImplementedError

    def _rewards(self, out, before) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(reward [N], {term: weighted value [N]})`` of the step (weights and the policy step included)."""
        raise NotImplementedError

    def _terminated(self, out) -> torch.Tensor:
        raise NotImplementedError

    def _termination_reward(self) -> float:
        return 0.0

    def _metrics(self, out) -> dict[str, torch.Tensor]:
        """Per-env values averaged over each episode for the logs (``Metrics/*``)."""
        return {}

    def _sample_reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh ``(q, u)`` [N, nq], [N, nv] for every env (kept where an env resets)."""
        raise NotImplementedError

    def _randomize(self, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Fresh parameter tensors for the envs in ``mask`` (by name of :data:`RANDOMISED`); default: nominal."""
        return {}

    def _post_reset(self, dones: torch.Tensor) -> None:
        """Events after the resets and before the observations (commands, pushes)."""

    def _on_reset(self, mask: torch.Tensor) -> None:
        """Task state of the envs in ``mask`` at their reset."""

    # ---- resets ------------------------------------------------------------------------------------------------
    def uniform(self, low: float, high: float, *shape) -> torch.Tensor:
        """U(low, high) samples of ``shape`` from the env's generator, in the model's dtype."""
        return (low + (high - low) * torch.rand(*shape, generator=self.generator, device=self.device)).to(self.dtype)

    def _reset_envs(self, mask: torch.Tensor) -> None:
        """New states, parameters and counters for the envs in ``mask`` [N] (values drawn for all envs and kept
        where masked: out of place, so the other envs' gradient chains are untouched)."""
        m = mask[:, None]
        q, u = self._sample_reset()
        self.q = torch.where(m, q, self.q)
        self.u = torch.where(m, u, self.u)
        for name, value in self._randomize(mask).items():
            shape = (self.num_envs,) + (1,) * (value.dim() - 1)
            self.params[name] = torch.where(mask.view(shape), value, self.params[name])
        zeros = torch.zeros_like(self.actions)
        self.actions = torch.where(m, zeros, self.actions)
        self.previous_actions = torch.where(m, zeros, self.previous_actions)
        self.episode_length_buf = torch.where(mask, torch.zeros_like(self.episode_length_buf), self.episode_length_buf)
        self.contact_state = torch.where(m, torch.zeros_like(self.contact_state), self.contact_state)
        self._on_reset(mask)

    # ---- logging ---------------------------------------------------------------------------------------------------
    def _accumulate(self, terms: dict[str, torch.Tensor], metrics: dict[str, torch.Tensor]) -> None:
        values = {**{f"Episode_Reward/{k}": v for k, v in terms.items()},
                  **{f"Metrics/{k}": v for k, v in metrics.items()}}
        self._episode_steps = self._episode_steps + 1
        for key, value in values.items():
            acc = self._episode_sums.get(key)
            value = value.detach()
            self._episode_sums[key] = value.clone() if acc is None else acc + value

    def _episode_log(self, dones, terminated, diverged, time_outs) -> dict[str, float]:
        """Means over the envs that finished: each reward term's episode sum per second of a full episode (Isaac
        Lab's ``Episode_Reward/*``), metrics averaged over the episode's steps, termination counts."""
        steps = self._episode_steps[dones].to(self.dtype).clamp(min=1)
        log = {}
        for key, acc in self._episode_sums.items():
            if key.startswith("Episode_Reward"):
                log[key] = float(acc[dones].mean() / self.cfg.episode_length_s)
            else:
                log[key] = float((acc[dones] / steps).mean())
            self._episode_sums[key] = torch.where(dones, torch.zeros_like(acc), acc)
        self._episode_steps = torch.where(dones, torch.zeros_like(self._episode_steps), self._episode_steps)
        n_div = int((diverged & dones).sum())
        self._diverged_total += n_div
        log["Episode_Termination/diverged"] = float(n_div)
        log["Episode_Termination/terminated"] = float((terminated & ~diverged).sum())
        log["Episode_Termination/time_out"] = float(time_outs.sum())
        log["Episode_Termination/diverged_total"] = float(self._diverged_total)
        return log

    # ---- checkpointing ---------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything needed to continue exactly: state, actions, counters, parameters, RNG (and the task's)."""
        state = {k: getattr(self, k).detach().clone() for k in
                 ("q", "u", "actions", "previous_actions", "episode_length_buf", "_episode_steps", "contact_state")}
        state["params"] = {k: v.detach().clone() for k, v in self.params.items()}
        state["obs"] = self._obs.detach().clone()  # as observed (with its noise draw): not drawn again at the load
        state["generator"] = self.generator.get_state()
        state["task"] = self._task_state()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`; floating-point tensors take this env's precision (a state saved by a float32
        run loads into a float64 env, e.g. for gradient checks)."""

        def own(t: torch.Tensor) -> torch.Tensor:
            return t.clone().to(self.device, dtype=self.dtype if t.is_floating_point() else t.dtype)

        for key in ("q", "u", "actions", "previous_actions", "episode_length_buf", "_episode_steps", "contact_state"):
            setattr(self, key, own(state[key]))
        self.params = {k: own(v) for k, v in state["params"].items() if k in RANDOMISED}
        for k in RANDOMISED:  # states saved before a parameter was randomised: its nominal value
            self.params.setdefault(k, self.nominal[k].clone())
        self.generator.set_state(state["generator"])
        self._load_task_state(state.get("task", {}))
        if "obs" in state:
            self._obs = state["obs"].apply(lambda t: t.clone().to(self.device, dtype=self.output_dtype))
        else:  # states saved before the observations were: computed again (a noise draw more)
            self._obs = self._observe()

    def _task_state(self) -> dict:
        return {}

    def _load_task_state(self, state: dict) -> None:
        pass


def _row_norm_clip(relative: float):
    """A gradient hook scaling each env's row of a state or action gradient down to ``relative`` times the median
    row norm of the batch at this step.

    The backward pass through one policy step of an env that is about to diverge, or that meets a stiff contact
    event, can be orders of magnitude above the others (in a trained rollout the rows' p99 is ~50x and the maximum
    ~1000x the median); clipped per env and per step, such an env cannot set the direction of the batch's gradient.
    The relative bound is scale-free (the loss is a mean over envs and steps, so absolute row norms shrink with the
    batch size); rows that are zero (no gradient reaches them) do not count towards the median."""

    def hook(grad: torch.Tensor | None) -> torch.Tensor | None:
        if grad is None:  # nothing downstream depends on this tensor
            return None
        norm = torch.linalg.norm(grad, dim=1, keepdim=True)
        nonzero = norm[norm > 0]
        if nonzero.numel() == 0:
            return grad
        bound = relative * nonzero.median()
        return grad * torch.clamp(bound / (norm + 1e-30), max=1.0)

    return hook
