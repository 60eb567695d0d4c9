"""Policy and value networks: rsl_rl's :class:`~rsl_rl.models.MLPModel` with LayerNorm, and a tanh-squashed Gaussian.

Schwarke et al.'s policy (arXiv 2404.02887, as traced): MLP [128, 64, 32], ELU, LayerNorm after each hidden layer,
running observation normaliser, tanh on the actions, initial log-std −1. It is built from rsl_rl parts so that
rsl_rl's export wrappers (``as_jit``/``as_onnx``), normaliser and config resolution (``class_name``) apply unchanged:

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

    ``L`` is ``action_limit`` (in the env's raw action units; default 1, Schwarke et al.'s plain tanh): the squash is
    the identity near 0 (so ``σ`` is the action noise there whatever ``L``) and bounds the actions to ``(-L, L)``. With
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
    """``[Linear → activation → LayerNorm] × len(hidden_dims) → Linear``; shapes
    ``(B, input_dim) → (B, output_dim)``."""
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
    ) -> None:
        super().__init__(obs, obs_groups, obs_set, output_dim, hidden_dims, activation, obs_normalization,
                         distribution_cfg)
        if layer_norm:
            mlp_output_dim = self.distribution.input_dim if self.distribution is not None else output_dim
            self.mlp = layer_norm_mlp(self._get_latent_dim(), mlp_output_dim, hidden_dims, activation)  # type: ignore[arg-type]
            if self.distribution is not None:
                self.distribution.init_mlp_weights(self.mlp)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # checkpoints saved before the removal of the actor's last-action blend carry its two buffers (``alpha`` 0
        # when it was off): dropped; a checkpoint trained with the blend on acted through it, and is refused
        alpha = state_dict.pop(prefix + "last_action.alpha", None)
        state_dict.pop(prefix + "last_action.indices", None)
        if alpha is not None and float(alpha) != 0.0:
            error_msgs.append(f"{prefix}last_action.alpha: the checkpoint's policy blends its last action "
                              f"(alpha {float(alpha):g}), which this version no longer does")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
