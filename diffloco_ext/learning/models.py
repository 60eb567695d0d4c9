"""Policy and value networks: rsl_rl's :class:`~rsl_rl.models.MLPModel` with LayerNorm, and a tanh-squashed Gaussian.

Paper A's policy (as traced): MLP [128, 64, 32], ELU, LayerNorm after each hidden layer, running observation
normaliser, tanh on the actions, initial log-std −1. It is built from rsl_rl parts so that rsl_rl's export
wrappers (``as_jit``/``as_onnx``), normaliser and config resolution (``class_name``) apply unchanged:

- :class:`LayerNormMLPModel` = ``MLPModel`` whose MLP is ``Linear → activation → LayerNorm`` per hidden layer.
- :class:`SquashedGaussianDistribution` = rsl_rl's ``GaussianDistribution`` sampled with the reparameterisation
  trick (so actions carry gradients to the policy parameters, as SHAC needs) and squashed by
  ``L·tanh(·/L)`` (``action_limit`` L, default 1: plain tanh); the deterministic (inference/export) output is
  ``L·tanh(mean/L)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from rsl_rl.models import MLPModel
from rsl_rl.modules import GaussianDistribution
from rsl_rl.utils import resolve_nn_activation
from tensordict import TensorDict

_ATANH_EPS = 1e-6


class ScaledTanh(nn.Module):
    """``limit · tanh(x / limit)`` elementwise: the identity near 0, bounded by ``±limit`` (TorchScript/ONNX-friendly).

    ``limit`` is a buffer, so it travels in checkpoints: a policy loaded from one acts with the limit it was trained
    with whatever the config that rebuilt it says (a checkpoint saved before it was a buffer keeps the config's)."""

    def __init__(self, limit: float = 1.0) -> None:
        super().__init__()
        self.register_buffer("limit", torch.tensor(float(limit)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.limit * torch.tanh(x / self.limit)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + "limit"
        if key not in state_dict:  # saved before the limit was a buffer: the config's (the run's params/agent.yaml)
            state_dict[key] = self.limit.detach().clone()
        loaded = float(state_dict[key])
        if not (math.isfinite(loaded) and loaded > 0.0):
            error_msgs.append(f"{key}: the action limit must be a finite positive number, got {loaded}")
        elif loaded != float(self.limit):
            print(f"[diffloco] the checkpoint's action limit {loaded:g} replaces the config's {float(self.limit):g}",
                  flush=True)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class SquashedGaussianDistribution(GaussianDistribution):
    """Diagonal Gaussian in pre-squash space, ``a = L·tanh((μ + σ ε) / L)``, ε ~ N(0, I), reparameterised.

    ``L`` is ``action_limit`` (in the env's raw action units; default 1, paper A's plain tanh): the squash is the
    identity near 0 (so ``σ`` is the action noise there whatever ``L``) and bounds the actions to ``(-L, L)``. With
    the velocity task's action scale 0.5 rad, ``L = 1`` bounds joint targets to ±0.5 rad around the default pose.
    ``mean``/``std``/``params`` refer to the Gaussian before the squash (so rsl_rl's KL code stays valid; the squash
    is a bijection and leaves the KL unchanged). ``log_prob`` includes the squash's Jacobian; ``entropy`` is the
    pre-squash Gaussian's (an upper bound on the squashed entropy, used for logging only).
    """

    def __init__(self, output_dim: int, action_limit: float = 1.0, **kwargs) -> None:
        if not (math.isfinite(action_limit) and action_limit > 0.0):
            raise ValueError(f"action_limit must be a finite positive number, got {action_limit!r}")
        super().__init__(output_dim, **kwargs)
        self._squash = ScaledTanh(action_limit)

    @property
    def action_limit(self) -> float:
        """L (raw action units): the config's, or the loaded checkpoint's."""
        return float(self._squash.limit)

    def sample(self) -> torch.Tensor:
        """Reparameterised, squashed sample ``(..., A)`` in (-L, L), differentiable w.r.t. mean and std."""
        return self._squash(self._distribution.rsample())  # type: ignore[union-attr]

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        """``L·tanh(mean / L)``."""
        return self._squash(mlp_output)

    def as_deterministic_output_module(self) -> nn.Module:
        """Export-friendly squash (:class:`ScaledTanh`)."""
        return ScaledTanh(self.action_limit)

    def log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        """Log-density of squashed actions ``outputs`` (in (-L, L)), summed over the last dimension."""
        unit = (outputs / self.action_limit).clamp(-1.0 + _ATANH_EPS, 1.0 - _ATANH_EPS)
        pre = self.action_limit * torch.atanh(unit)
        log_det = torch.log1p(-(unit**2) + _ATANH_EPS)
        return (self._distribution.log_prob(pre) - log_det).sum(dim=-1)  # type: ignore[union-attr]


def layer_norm_mlp(
    input_dim: int, output_dim: int, hidden_dims: tuple[int, ...] | list[int], activation: str = "elu"
) -> nn.Sequential:
    """``[Linear → activation → LayerNorm] × len(hidden_dims) → Linear``; shapes ``(B, input_dim) → (B, output_dim)``."""
    layers: list[nn.Module] = []
    dims = [input_dim, *[input_dim if d == -1 else d for d in hidden_dims]]
    for d_in, d_out in zip(dims[:-1], dims[1:]):
        layers += [nn.Linear(d_in, d_out), resolve_nn_activation(activation), nn.LayerNorm(d_out)]
    layers.append(nn.Linear(dims[-1], output_dim))
    return nn.Sequential(*layers)


class LayerNormMLPModel(MLPModel):
    """rsl_rl ``MLPModel`` with an optional LayerNorm after each hidden layer (default on).

    Same constructor as ``MLPModel`` plus ``layer_norm``; inputs are the selected observation groups concatenated,
    ``(B, obs_dim)``; outputs ``(B, output_dim)``.
    """

    def __init__(
        self,
        obs: TensorDict,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int,
        hidden_dims: tuple[int, ...] | list[int] = (128, 64, 32),
        activation: str = "elu",
        obs_normalization: bool = True,
        distribution_cfg: dict | None = None,
        layer_norm: bool = True,
        action_smoothing: float = 0.0,
        last_action_indices: tuple[int, int] | list[int] = (36, 48),
    ) -> None:
        super().__init__(obs, obs_groups, obs_set, output_dim, hidden_dims, activation, obs_normalization, distribution_cfg)
        if layer_norm:
            mlp_output_dim = self.distribution.input_dim if self.distribution is not None else output_dim
            self.mlp = layer_norm_mlp(self._get_latent_dim(), mlp_output_dim, hidden_dims, activation)  # type: ignore[arg-type]
            if self.distribution is not None:
                self.distribution.init_mlp_weights(self.mlp)
        self.last_action = LastActionBlend(action_smoothing, last_action_indices, self.obs_dim, output_dim)

    def forward(self, obs: TensorDict, masks=None, hidden_state=None, stochastic_output: bool = False) -> torch.Tensor:
        """The MLP's (sampled or deterministic) action, blended with the observed last action when
        ``action_smoothing`` > 0 (:class:`LastActionBlend`)."""
        out = super().forward(obs, masks, hidden_state, stochastic_output)
        if not self.last_action.active:
            return out
        raw = torch.cat([obs[group] for group in self.obs_groups], dim=-1)
        return self.last_action(out, raw)

    def get_output_log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        if self.last_action.active:
            raise NotImplementedError(
                "action_smoothing > 0 makes the action depend on the observed last action outside the distribution; "
                "its log-probability (PPO's ratio) is not defined here: use action_smoothing=0 with PPO")
        return super().get_output_log_prob(outputs)

    def as_jit(self) -> nn.Module:
        """rsl_rl's TorchScript wrapper, followed by the last-action blend when it is active."""
        inner = super().as_jit()
        return _BlendedExport(inner, self.last_action) if self.last_action.active else inner

    def as_onnx(self, verbose: bool) -> nn.Module:
        """rsl_rl's ONNX wrapper, followed by the last-action blend when it is active."""
        inner = super().as_onnx(verbose)
        return _BlendedExport(inner, self.last_action) if self.last_action.active else inner


class LastActionBlend(nn.Module):
    """``a = α·a_prev + (1 − α)·π(o)``: a first-order low-pass on the actions inside the policy.

    ``a_prev`` is read from the policy's own (raw, un-normalised) observation: the velocity task's last-actions group
    (``last_action_indices`` = (36, 48) of the 48 Isaac Lab observations, the previous step's raw action, 0 after a
    reset). So the policy stays a stateless map of the task's 48 observations to its 12 actions, with Isaac Lab's
    conventions unchanged (a deployment stack that feeds the last action as Isaac Lab does gets the same filter).
    At the 50 Hz policy rate, ``α = 0.5`` passes the 1.7 Hz gait at 0.96 and the 3.3 Hz harmonic at 0.86 of its
    amplitude and a 25 Hz (Nyquist) alternation at 1/3. Convex, so actions stay inside the squash's ``(−L, L)``.
    ``α`` and the indices are buffers: a checkpoint acts with the blend it was trained with."""

    def __init__(self, alpha: float, indices, obs_dim: int, action_dim: int) -> None:
        super().__init__()
        alpha = float(alpha)
        if not (0.0 <= alpha < 1.0):
            raise ValueError(f"action_smoothing must lie in [0, 1), got {alpha!r}")
        start, end = (int(i) for i in indices)
        if alpha > 0.0 and not (0 <= start < end <= obs_dim and end - start == action_dim):
            raise ValueError(f"last_action_indices {list(indices)} must select {action_dim} of the actor's "
                             f"{obs_dim} observations (the last actions)")
        self.register_buffer("alpha", torch.tensor(alpha))
        self.register_buffer("indices", torch.tensor([start, end], dtype=torch.long))
        self.active = alpha > 0.0

    def forward(self, action: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        previous = obs[..., int(self.indices[0]):int(self.indices[1])]
        return self.alpha * previous + (1.0 - self.alpha) * action

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        for key, value in (("alpha", self.alpha), ("indices", self.indices)):
            state_dict.setdefault(prefix + key, value.detach().clone())  # checkpoints from before the blend: none
        if float(state_dict[prefix + "alpha"]) != float(self.alpha):
            print(f"[diffloco] the checkpoint's action smoothing {float(state_dict[prefix + 'alpha']):g} replaces the "
                  f"config's {float(self.alpha):g}", flush=True)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        alpha = float(self.alpha)
        if not (0.0 <= alpha < 1.0):
            error_msgs.append(f"{prefix}alpha: action_smoothing must lie in [0, 1), got {alpha}")
        self.active = alpha > 0.0


class _BlendedExport(nn.Module):
    """An rsl_rl export wrapper (``(B, obs_dim) → (B, A)``) followed by :class:`LastActionBlend` on its input."""

    def __init__(self, inner: nn.Module, blend: LastActionBlend) -> None:
        super().__init__()
        self.inner = inner
        self.alpha = float(blend.alpha)
        self.start, self.end = int(blend.indices[0]), int(blend.indices[1])
        for name in ("input_names", "output_names", "get_dummy_inputs", "is_recurrent"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.alpha * x[:, self.start:self.end] + (1.0 - self.alpha) * self.inner(x)

    @torch.jit.export
    def reset(self) -> None:
        pass
