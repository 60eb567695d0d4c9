"""Short-Horizon Actor-Critic (SHAC; Xu et al., ICLR 2022), in the shape of rsl_rl's algorithms.

One iteration, driven by :class:`~diffloco_ext.learning.runner.SHACRunner`:

1. ``act`` / ``process_env_step`` for h steps of N envs *with gradients on*: the actor objective
   ``J = Σ_env Σ_segments [Σ_t γ^t r_t + γ^len V'(s_end)]`` is accumulated, where a segment ends at a done
   (``V' = 0`` for a termination, the target critic's value of the pre-reset observation for a time-out) or at the
   horizon end (``V'(s_h)``). The discount restarts at every segment. ``V'`` is the target critic; its parameters
   get no gradient but its input does.
2. ``compute_returns``: bootstrap the open segments with ``V'(s_h)``; TD(λ) critic targets from the detached
   rewards and next-state values.
3. ``update``: actor loss ``L = −J / (N·h)``, one backward pass through the whole rollout (first-order gradients),
   gradient all-reduce (multi-process), norm clipping, Adam step; then ``num_critic_epochs`` ×
   ``num_critic_mini_batches`` MSE steps of the critic towards the targets; Polyak update of the target critic. A
   non-finite loss or gradient skips that update (counted, logged), the parameters stay as they were, training
   continues.

Observation normalisation as DiffRL's: the statistics stay frozen for the whole iteration (the rollout, its
backward pass and the critic epochs all normalise with the same statistics, as DiffRL's frozen copy of
``obs_rms``), and the iteration's observations are folded into the models' rsl_rl ``EmpiricalNormalization``
after the update, for the next iteration. (Updating within the horizon would make the normalisation, and so
the actor's input, drift between the steps of one backward pass.) One difference remains: DiffRL folds the
observations reached after each step, this learner the ones the actor acted on.
"""

from __future__ import annotations

import copy
import math
from itertools import chain

import torch
import torch.nn as nn
from rsl_rl.utils import reduce_gradients_in_buckets, resolve_class, resolve_obs_groups
from tensordict import TensorDict

from diffloco_ext.learning.env import FINAL_OBS_KEY, split_dones
from diffloco_ext.tasks.schedule import checked_ramp, ramp_fraction


def td_lambda_targets(
    rewards: torch.Tensor, next_values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float
) -> torch.Tensor:
    """TD(λ) value targets over one horizon.

    ``G_t = r_t + γ[(1 − λ) v_t + λ G_{t+1}]``, with ``G_{t+1} := v_t`` when the episode ended at step t (``dones``)
    and after the last step. ``v_t`` is the value of the state reached by step t: 0 for a termination, the
    pre-reset state's value for a time-out.

    Args:
        rewards: ``(h, N)`` rewards r_t.
        next_values: ``(h, N)`` values v_t of the states after each step (0 at terminations).
        dones: ``(h, N)`` bool, episode ended at step t (termination or time-out).

    Returns:
        ``(h, N)`` targets for the values of the states *before* each step.
    """
    targets = torch.empty_like(rewards)
    ret = next_values[-1]
    for t in reversed(range(rewards.shape[0])):
        ret = torch.where(dones[t], next_values[t], ret)
        ret = rewards[t] + gamma * ((1.0 - lam) * next_values[t] + lam * ret)
        targets[t] = ret
    return targets


class SHAC:
    """SHAC learner: an actor trained by backpropagation through h simulator steps, a TD(λ) critic.

    Args:
        actor: rsl_rl-style model mapping observations to ``(N, A)`` actions; sampled with ``stochastic_output=True``
            during training (must be differentiable w.r.t. its parameters, e.g.
            :class:`~diffloco_ext.learning.models.SquashedGaussianDistribution`).
        critic: model mapping observations to ``(N, 1)`` values.
        num_envs: N.
        horizon: h, steps per iteration (the runner's ``num_steps_per_env``).
        max_iterations: iterations over which the ``"linear"`` schedule decays the learning rates.
        multi_gpu_cfg: ``{"global_rank", "local_rank", "world_size"}`` for data-parallel training, else None.
        Other arguments: see :class:`~diffloco_ext.learning.config.SHACAlgorithmCfg`.
    """

    def __init__(
        self,
        actor: nn.Module,
        critic: nn.Module,
        num_envs: int,
        horizon: int,
        actor_learning_rate: float = 2e-3,
        critic_learning_rate: float = 2e-3,
        schedule: str = "linear",
        min_learning_rate: float = 1e-5,
        betas: tuple[float, float] | list[float] = (0.7, 0.95),
        gamma: float = 0.99,
        lam: float = 0.95,
        num_critic_epochs: int = 16,
        num_critic_mini_batches: int = 4,
        target_critic_alpha: float = 0.2,
        max_grad_norm: float = 1.0,
        value_gradient_scale: float = 1.0,
        value_gradient_scale_final: float | None = None,
        value_gradient_ramp: tuple[int, int] | list[int] = (0, 0),
        value_gradient_ramp_from: str = "start",
        lipschitz_penalty: float = 0.0,
        lipschitz_samples: int = 1024,
        lipschitz_after_curriculum: bool = False,
        action_std_at_curriculum_end: float | None = None,
        max_iterations: int = 1,
        device: str = "cpu",
        multi_gpu_cfg: dict | None = None,
        grad_reduce_bucket_mb: float = 25,
    ) -> None:
        if schedule not in ("linear", "constant"):
            raise ValueError(f"Unknown learning-rate schedule '{schedule}'; use 'linear' or 'constant'.")
        if horizon < 1 or num_envs < 1:
            raise ValueError(f"horizon and num_envs must be positive, got {horizon} and {num_envs}.")
        for name, scale in (("value_gradient_scale", value_gradient_scale),
                            ("value_gradient_scale_final", value_gradient_scale_final)):
            if scale is not None and not 0.0 <= scale <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {scale}.")
        ramp = checked_ramp("value_gradient_ramp", value_gradient_ramp)
        if value_gradient_ramp_from not in ("start", "curriculum_end"):
            raise ValueError(f"value_gradient_ramp_from must be 'start' or 'curriculum_end', got "
                             f"'{value_gradient_ramp_from}'.")
        if not (math.isfinite(lipschitz_penalty) and lipschitz_penalty >= 0.0) or int(lipschitz_samples) < 1:
            raise ValueError(f"lipschitz_penalty must be a finite number >= 0 and lipschitz_samples >= 1, got "
                             f"{lipschitz_penalty} and {lipschitz_samples}.")
        if action_std_at_curriculum_end is not None and not (math.isfinite(action_std_at_curriculum_end)
                                                             and action_std_at_curriculum_end > 0.0):
            raise ValueError(f"action_std_at_curriculum_end must be a finite number > 0, got "
                             f"{action_std_at_curriculum_end}.")
        if action_std_at_curriculum_end is not None and getattr(getattr(actor, "distribution", None), "std_type",
                                                                None) not in ("scalar", "log"):
            raise ValueError("action_std_at_curriculum_end needs an actor with a Gaussian distribution (std_type)")
        if not 0.0 <= target_critic_alpha < 1.0:
            raise ValueError(f"target_critic_alpha must be in [0, 1), got {target_critic_alpha}.")
        self.device = device
        self.actor = actor.to(device)
        self.critic = critic.to(device)
        self.target_critic = copy.deepcopy(self.critic)
        self.target_critic.requires_grad_(False)
        self.num_envs = num_envs
        self.horizon = horizon
        self.gamma = gamma
        self.lam = lam
        self.num_critic_epochs = num_critic_epochs
        self.num_critic_mini_batches = num_critic_mini_batches
        self.target_critic_alpha = target_critic_alpha
        self.max_grad_norm = max_grad_norm
        self.value_gradient_scale = float(value_gradient_scale)
        self.value_gradient_scale_init = float(value_gradient_scale)
        self.value_gradient_scale_final = (None if value_gradient_scale_final is None
                                           else float(value_gradient_scale_final))
        self.value_gradient_ramp = ramp
        self.value_gradient_ramp_from = value_gradient_ramp_from
        self.lipschitz_penalty = float(lipschitz_penalty)
        self.lipschitz_samples = int(lipschitz_samples)
        self.lipschitz_after_curriculum = bool(lipschitz_after_curriculum)
        self.action_std_at_curriculum_end = action_std_at_curriculum_end
        #: The iteration at which ``action_std_at_curriculum_end`` set the std (None: not yet); checkpoints carry it,
        #: so a resumed run does not set it again.
        self.action_std_set_iteration: int | None = None
        #: Whether the env's curriculum was complete at the last ``set_learning_rates`` (1 without a curriculum).
        self.curriculum_complete = True
        #: The first iteration at which the env's curriculum was complete
        #: (``value_gradient_ramp_from="curriculum_end"``).
        self.curriculum_end_iteration: int | None = None
        self.schedule = schedule
        self.actor_learning_rate_init = actor_learning_rate
        self.critic_learning_rate_init = critic_learning_rate
        self.min_learning_rate = min_learning_rate
        self.max_iterations = max(1, int(max_iterations))
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=actor_learning_rate, betas=tuple(betas))
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=critic_learning_rate, betas=tuple(betas))

        self.is_multi_gpu = multi_gpu_cfg is not None
        self.gpu_global_rank = multi_gpu_cfg["global_rank"] if multi_gpu_cfg else 0
        self.gpu_world_size = multi_gpu_cfg["world_size"] if multi_gpu_cfg else 1
        self.grad_reduce_bucket_mb = grad_reduce_bucket_mb

        #: Cumulative number of skipped (non-finite) actor / critic updates.
        self.skipped_actor_updates = 0
        self.skipped_critic_updates = 0
        self._reset_rollout()

    # ---- properties used by the runner/logger -------------------------------------------------------------------
    @property
    def learning_rate(self) -> float:
        """Current actor learning rate."""
        return self.actor_optimizer.param_groups[0]["lr"]

    @property
    def critic_learning_rate(self) -> float:
        """Current critic learning rate."""
        return self.critic_optimizer.param_groups[0]["lr"]

    def set_learning_rates(self, iteration: int, curriculum_progress: float = 1.0) -> None:
        """Apply the schedules for ``iteration`` (0-based): learning rates decaying linearly to ``min_learning_rate``
        at ``max_iterations``; the bootstrap-gradient weight along its ramp (if ``value_gradient_scale_final``),
        counted from 0 or from the first iteration with ``curriculum_progress`` (the env's, in [0, 1]) at 1."""
        self.curriculum_complete = curriculum_progress >= 1.0
        if self.action_std_at_curriculum_end is not None and self.curriculum_complete \
                and self.action_std_set_iteration is None:
            # once: the std set to the value, learnt on from there (the optimiser's moments of the std kept)
            dist = self.actor.distribution
            with torch.no_grad():
                if dist.std_type == "log":
                    dist.log_std_param.fill_(math.log(self.action_std_at_curriculum_end))
                else:
                    dist.std_param.fill_(self.action_std_at_curriculum_end)
            self.action_std_set_iteration = int(iteration)
        if self.value_gradient_ramp_from == "curriculum_end" and self.curriculum_end_iteration is None \
                and curriculum_progress >= 1.0:
            self.curriculum_end_iteration = int(iteration)
        # iterations since the schedules' origin: 0, or the curriculum's end (None: not reached yet)
        if self.value_gradient_ramp_from == "start":
            since = iteration
        else:
            since = None if self.curriculum_end_iteration is None else iteration - self.curriculum_end_iteration
        if self.value_gradient_scale_final is not None:
            frac = ramp_fraction(since, self.value_gradient_ramp)
            self.value_gradient_scale = self.value_gradient_scale_init + frac * (
                self.value_gradient_scale_final - self.value_gradient_scale_init)
        # the linear learning-rate decay counts from the same origin (with "curriculum_end": the initial rates until
        # the curriculum is done, then the decay over max_iterations, as the velocity task's recipe; docs/design.md)
        lr_since = 0 if since is None else since
        frac = min(lr_since / self.max_iterations, 1.0) if self.schedule == "linear" else 0.0
        for opt, lr0 in ((self.actor_optimizer, self.actor_learning_rate_init),
                         (self.critic_optimizer, self.critic_learning_rate_init)):
            for group in opt.param_groups:
                group["lr"] = lr0 + (self.min_learning_rate - lr0) * frac

    # ---- rollout ------------------------------------------------------------------------------------------------
    def _reset_rollout(self) -> None:
        self._objective = torch.zeros((), device=self.device)
        self._discount = torch.ones(self.num_envs, device=self.device)
        self._rew_acc = torch.zeros(self.num_envs, device=self.device)
        self._segment_open = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._obs: list[TensorDict] = []
        self._rewards: list[torch.Tensor] = []
        self._next_values: list[torch.Tensor] = []
        self._dones: list[torch.Tensor] = []
        self._targets: torch.Tensor | None = None

    def act(self, obs: TensorDict) -> torch.Tensor:
        """Record ``obs`` for the critic and the normalisers, return reparameterised actions ``(N, A)``."""
        self._obs.append(obs.detach())
        return self.actor(obs, stochastic_output=True)

    def process_env_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict) -> None:
        """Accumulate the actor objective for one step and record the critic's training data.

        Args:
            obs: observations after the step (after automatic resets), batch ``(N,)``.
            rewards: ``(N,)``, differentiable w.r.t. the actions.
            dones: ``(N,)``; ``extras["time_outs"]`` and ``extras["final_observations"]`` as in
                :mod:`diffloco_ext.learning.env`.
        """
        done = dones.to(torch.bool)
        terminated, _ = split_dones(done, extras)
        any_done = bool(done.any())
        next_obs = obs
        if any_done:
            final_obs = extras.get(FINAL_OBS_KEY)
            if final_obs is None:
                raise KeyError(f"A differentiable env must return extras['{FINAL_OBS_KEY}'] (pre-reset observations).")
            for key in final_obs.keys():
                if not bool(torch.isfinite(final_obs[key][done].detach()).all()):
                    raise ValueError(f"extras['{FINAL_OBS_KEY}']['{key}'] is not finite for an env that is done: the "
                                     f"env must reset diverged states before they reach the learner")
            # per row: the pre-reset observation where the env is done, the observation elsewhere (the env
            # contract allows filler in the rows that are not done)
            next_obs = final_obs.apply(lambda f, o: torch.where(done.view(-1, *([1] * (f.dim() - 1))), f, o), obs)
        with torch.no_grad():
            next_values = self.target_critic(next_obs.detach()).squeeze(-1)
            next_values = torch.where(terminated, torch.zeros_like(next_values), next_values)

        self._rew_acc = self._rew_acc + self._discount * rewards
        if any_done and torch.is_grad_enabled():
            # Close the segments of the envs that finished: rewards so far + discounted bootstrap value.
            ids = done.nonzero(as_tuple=True)[0]
            boot = self._bootstrap(self.target_critic(next_obs[ids]).squeeze(-1))
            boot = torch.where(terminated[ids], torch.zeros_like(boot), boot)
            self._objective = self._objective + (self._rew_acc[ids] + self._discount[ids] * self.gamma * boot).sum()
        self._discount = torch.where(done, torch.ones_like(self._discount), self._discount * self.gamma)
        self._rew_acc = torch.where(done, torch.zeros_like(self._rew_acc), self._rew_acc)
        # a segment opened by this step's reset has no step yet: nothing to bootstrap if the horizon ends here
        self._segment_open = ~done

        self._rewards.append(rewards.detach())
        self._next_values.append(next_values)
        self._dones.append(done)

    def compute_returns(self, obs: TensorDict) -> None:
        """Bootstrap the open segments with ``V'(s_h)`` (``obs`` = last observations) and compute the TD(λ) targets."""
        if len(self._rewards) == 0:
            raise RuntimeError("compute_returns called without a rollout.")
        last_values = self._bootstrap(self.target_critic(obs).squeeze(-1))
        # only segments with at least one step (an env reset on the last step closed its segment already)
        open_segments = (self._rew_acc + self._discount * last_values)[self._segment_open]
        self._objective = self._objective + open_segments.sum()
        self._targets = td_lambda_targets(
            torch.stack(self._rewards), torch.stack(self._next_values), torch.stack(self._dones), self.gamma, self.lam
        )

    def _bootstrap(self, values: torch.Tensor) -> torch.Tensor:
        """Bootstrap values with ``value_gradient_scale`` of their gradient (same forward value)."""
        s = self.value_gradient_scale
        if s == 1.0:
            return values
        return s * values + (1.0 - s) * values.detach()

    # ---- update -------------------------------------------------------------------------------------------------
    def update(self) -> dict[str, float]:
        """Actor step, critic epochs, target update. Returns losses and diagnostics of this iteration.

        Keys: ``actor`` and ``critic`` losses, ``actor_grad_norm`` (before clipping), ``value_estimate`` (mean
        target-critic value of the visited states), ``value_target`` (mean TD(λ) target), ``skipped_actor_update``
        and ``skipped_critic_updates`` (this iteration).
        """
        if self._targets is None:
            raise RuntimeError("update called before compute_returns.")
        num_steps = len(self._rewards)
        actor_loss = -self._objective / (num_steps * self.num_envs)
        lipschitz = self._lipschitz_estimate() if self.lipschitz_active else None
        if lipschitz is not None:
            actor_loss = actor_loss + self.lipschitz_penalty * lipschitz

        # Actor: one backward pass through the rollout.
        self.actor_optimizer.zero_grad(set_to_none=False)
        if actor_loss.requires_grad:
            actor_loss.backward()
        actor_ok, actor_grad_norm = self._apply_gradients(self.actor, self.actor_optimizer, actor_loss)
        skipped_actor = 0 if actor_ok else 1
        self.skipped_actor_updates += skipped_actor

        # Critic: epochs of minibatches on the detached rollout.
        obs = torch.stack(self._obs).flatten(0, 1)
        targets = self._targets.flatten()
        values_mean = torch.stack(self._next_values).mean().item()
        batch = targets.shape[0]
        mb_size = max(1, batch // self.num_critic_mini_batches)
        critic_loss_sum, critic_steps, skipped_critic = 0.0, 0, 0
        for _ in range(self.num_critic_epochs):
            perm = torch.randperm(batch, device=self.device)
            for k in range(self.num_critic_mini_batches):
                idx = perm[k * mb_size : (k + 1) * mb_size]
                predicted = self.critic(obs[idx]).squeeze(-1)
                loss = (predicted - targets[idx]).pow(2).mean()
                self.critic_optimizer.zero_grad(set_to_none=False)
                loss.backward()
                ok, _ = self._apply_gradients(self.critic, self.critic_optimizer, loss)
                if ok:
                    critic_loss_sum += loss.item()
                    critic_steps += 1
                else:
                    skipped_critic += 1
        self.skipped_critic_updates += skipped_critic
        self._polyak_update()
        self._update_normalization(obs)

        loss_dict = {
            "actor": actor_loss.item(),
            "critic": critic_loss_sum / critic_steps if critic_steps else float("nan"),
            "actor_grad_norm": actor_grad_norm,
            "value_estimate": values_mean,
            "value_target": targets.mean().item(),
            "skipped_actor_update": float(skipped_actor),
            "skipped_critic_updates": float(skipped_critic),
        }
        if lipschitz is not None:
            loss_dict["policy_lipschitz"] = float(lipschitz.detach())
            loss_dict["lipschitz_penalty"] = self.lipschitz_penalty
        self._reset_rollout()
        return loss_dict

    @property
    def lipschitz_active(self) -> bool:
        """Whether this iteration's actor loss carries the Lipschitz penalty (λ > 0, and the env's curriculum
        complete when ``lipschitz_after_curriculum``)."""
        return self.lipschitz_penalty > 0.0 and (self.curriculum_complete or not self.lipschitz_after_curriculum)

    def _lipschitz_estimate(self) -> torch.Tensor:
        """``E_o ‖∂a/∂o‖²_F`` of the deterministic action ``a`` w.r.t. the raw observations ``o``, on
        ``lipschitz_samples`` of this rollout's observations, differentiable w.r.t. the actor's parameters.

        One random projection per observation (Hutchinson): ``E_v ‖Jᵀv‖² = ‖J‖²_F`` for ``v ~ N(0, I)``, so one
        backward pass instead of one per action."""
        obs = torch.stack(self._obs).flatten(0, 1)
        count = min(self.lipschitz_samples, obs.shape[0])
        idx = torch.randperm(obs.shape[0], device=self.device)[:count]
        groups = list(getattr(self.actor, "obs_groups", obs.keys()))
        inputs = {g: obs[g][idx].detach().clone().requires_grad_(True) for g in groups}
        actions = self.actor(TensorDict(inputs, batch_size=[count]))
        probe = torch.randn_like(actions)
        grads = torch.autograd.grad((actions * probe).sum(), list(inputs.values()), create_graph=True)
        return sum(g.pow(2).sum() for g in grads) / count

    def _apply_gradients(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                         loss: torch.Tensor) -> tuple[bool, float]:
        """All-reduce, check, clip and apply the gradients of ``model``; skip the step if anything is non-finite.

        Returns ``(applied, gradient norm before clipping)``.
        """
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        bad = torch.tensor(0.0 if bool(torch.isfinite(loss.detach()).all()) else 1.0, device=self.device)
        if self.is_multi_gpu:
            reduce_gradients_in_buckets(params, self.gpu_world_size, self.grad_reduce_bucket_mb)
            torch.distributed.all_reduce(bad, op=torch.distributed.ReduceOp.MAX)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        if bool(bad > 0) or not bool(torch.isfinite(grad_norm)):
            optimizer.zero_grad(set_to_none=False)
            return False, float(grad_norm)
        optimizer.step()
        return True, float(grad_norm)

    @torch.no_grad()
    def _update_normalization(self, obs: TensorDict) -> None:
        """Fold the horizon's observations into the observation normalisers (used from the next horizon on)."""
        for model in (self.actor, self.critic, self.target_critic):
            if hasattr(model, "update_normalization"):
                model.update_normalization(obs)

    @torch.no_grad()
    def _polyak_update(self) -> None:
        """``target ← α·target + (1 − α)·critic`` for parameters; buffers (normaliser statistics) copied."""
        alpha = self.target_critic_alpha
        for p_t, p in zip(self.target_critic.parameters(), self.critic.parameters()):
            p_t.mul_(alpha).add_(p, alpha=1.0 - alpha)
        for b_t, b in zip(self.target_critic.buffers(), self.critic.buffers()):
            b_t.copy_(b)

    # ---- modes, checkpoints, distributed ------------------------------------------------------------------------
    def train_mode(self) -> None:
        """Training mode (normalisers update)."""
        self.actor.train()
        self.critic.train()
        self.target_critic.train()

    def eval_mode(self) -> None:
        """Evaluation mode (normalisers frozen)."""
        self.actor.eval()
        self.critic.eval()
        self.target_critic.eval()

    def get_policy(self) -> nn.Module:
        """The actor (deterministic ``tanh(mean)`` output by default)."""
        return self.actor

    def save(self) -> dict:
        """State of all models (incl. normalisers), optimisers and skip counters."""
        return {
            "actor_state_dict": self.actor.state_dict(),
            "critic_state_dict": self.critic.state_dict(),
            "target_critic_state_dict": self.target_critic.state_dict(),
            "actor_optimizer_state_dict": self.actor_optimizer.state_dict(),
            "critic_optimizer_state_dict": self.critic_optimizer.state_dict(),
            "skipped_updates": {"actor": self.skipped_actor_updates, "critic": self.skipped_critic_updates},
            "curriculum_end_iteration": self.curriculum_end_iteration,
            "action_std_set_iteration": self.action_std_set_iteration,
        }

    def load(self, loaded_dict: dict, load_cfg: dict | None, strict: bool) -> bool:
        """Load what :meth:`save` wrote; ``load_cfg`` selects parts (``actor, critic, optimizer, iteration``)."""
        if load_cfg is None:
            load_cfg = {"actor": True, "critic": True, "optimizer": True, "iteration": True}
        if load_cfg.get("actor"):
            self.actor.load_state_dict(loaded_dict["actor_state_dict"], strict=strict)
        if load_cfg.get("critic"):
            self.critic.load_state_dict(loaded_dict["critic_state_dict"], strict=strict)
            self.target_critic.load_state_dict(
                loaded_dict.get("target_critic_state_dict", loaded_dict["critic_state_dict"]), strict=strict
            )
        if load_cfg.get("optimizer"):
            self.actor_optimizer.load_state_dict(loaded_dict["actor_optimizer_state_dict"])
            self.critic_optimizer.load_state_dict(loaded_dict["critic_optimizer_state_dict"])
            skipped = loaded_dict.get("skipped_updates", {})
            self.skipped_actor_updates = int(skipped.get("actor", 0))
            self.skipped_critic_updates = int(skipped.get("critic", 0))
        if load_cfg.get("iteration") and loaded_dict.get("curriculum_end_iteration") is not None:
            self.curriculum_end_iteration = int(loaded_dict["curriculum_end_iteration"])
        if load_cfg.get("iteration") and loaded_dict.get("action_std_set_iteration") is not None:
            self.action_std_set_iteration = int(loaded_dict["action_std_set_iteration"])
        return bool(load_cfg.get("iteration", False))

    def broadcast_parameters(self) -> None:
        """Broadcast all model parameters and buffers from rank 0."""
        for model in (self.actor, self.critic, self.target_critic):
            for tensor in model.state_dict().values():
                torch.distributed.broadcast(tensor, src=0)

    def parameters(self):
        """All trainable parameters (actor, critic)."""
        return chain(self.actor.parameters(), self.critic.parameters())

    @staticmethod
    def construct_algorithm(obs: TensorDict, env, cfg: dict, device: str) -> SHAC:
        """Build actor, critic and SHAC from a runner config dict (see
        :class:`~diffloco_ext.learning.config.SHACRunnerCfg`)."""
        alg_cfg = dict(cfg["algorithm"])
        alg_cfg.pop("class_name", None)
        actor_class, actor_cfg = resolve_class(cfg["actor"])
        critic_class, critic_cfg = resolve_class(cfg["critic"])
        cfg["obs_groups"] = resolve_obs_groups(obs, cfg.get("obs_groups", {}), ["actor", "critic"])
        actor = actor_class(obs, cfg["obs_groups"], "actor", env.num_actions, **actor_cfg).to(device)
        critic = critic_class(obs, cfg["obs_groups"], "critic", 1, **critic_cfg).to(device)
        return SHAC(
            actor,
            critic,
            num_envs=env.num_envs,
            horizon=int(cfg["num_steps_per_env"]),
            max_iterations=int(cfg.get("max_iterations", 1)),
            device=device,
            multi_gpu_cfg=cfg.get("multi_gpu"),
            **alg_cfg,
        )
