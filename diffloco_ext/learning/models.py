"""Policy and value networks: rsl_rl's :class:`~rsl_rl.models.MLPModel` with LayerNorm, and a tanh-squashed Gaussian.

Paper A's policy (as traced): MLP [128, 64, 32], ELU, LayerNorm after each hidden layer, running observation
normaliser, tanh on the actions, initial log-std −1. It is built from rsl_rl parts so that rsl_rl's export
wrappers (``as_jit``/``as_onnx``), normaliser and config resolution (``class_name``) apply unchanged:

- :class:`LayerNormMLPModel` = ``MLPModel`` whose MLP is ``Linear → activation → LayerNorm`` per hidden layer.
- :class:`SquashedGaussianDistribution` = rsl_rl's ``GaussianDistribution`` sampled with the reparameterisation
  trick (so actions carry gradients to the policy parameters, as SHAC needs) and squashed by tanh; the
  deterministic (inference/export) output is ``tanh(mean)``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from rsl_rl.models import MLPModel
from rsl_rl.modules import GaussianDistribution
from rsl_rl.utils import resolve_nn_activation
from tensordict import TensorDict

_ATANH_EPS = 1e-6


class SquashedGaussianDistribution(GaussianDistribution):
    """Diagonal Gaussian in pre-squash space, ``a = tanh(μ + σ ε)``, ε ~ N(0, I), reparameterised.

    ``mean``/``std``/``params`` refer to the Gaussian before the tanh (so rsl_rl's KL code stays valid; tanh is a
    bijection and leaves the KL unchanged). ``log_prob`` includes the tanh Jacobian; ``entropy`` is the
    pre-squash Gaussian's (an upper bound on the squashed entropy, used for logging only).
    """

    def sample(self) -> torch.Tensor:
        """Reparameterised, squashed sample ``(..., A)`` in (-1, 1), differentiable w.r.t. mean and std."""
        return torch.tanh(self._distribution.rsample())  # type: ignore[union-attr]

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        """``tanh(mean)``."""
        return torch.tanh(mlp_output)

    def as_deterministic_output_module(self) -> nn.Module:
        """Export-friendly ``tanh``."""
        return nn.Tanh()

    def log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        """Log-density of squashed actions ``outputs`` (in (-1, 1)), summed over the last dimension."""
        outputs = outputs.clamp(-1.0 + _ATANH_EPS, 1.0 - _ATANH_EPS)
        pre = torch.atanh(outputs)
        log_det = torch.log1p(-(outputs**2) + _ATANH_EPS)
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
    ) -> None:
        super().__init__(obs, obs_groups, obs_set, output_dim, hidden_dims, activation, obs_normalization, distribution_cfg)
        if layer_norm:
            mlp_output_dim = self.distribution.input_dim if self.distribution is not None else output_dim
            self.mlp = layer_norm_mlp(self._get_latent_dim(), mlp_output_dim, hidden_dims, activation)  # type: ignore[arg-type]
            if self.distribution is not None:
                self.distribution.init_mlp_weights(self.mlp)
