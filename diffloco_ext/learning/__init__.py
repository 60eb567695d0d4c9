"""Learning: SHAC (short-horizon actor-critic through the differentiable simulator) beside rsl_rl's PPO.

- :mod:`.env` — :class:`DiffVecEnv`, the differentiable extension of rsl_rl's ``VecEnv`` that tasks implement.
- :mod:`.shac` — the :class:`SHAC` algorithm; :mod:`.runner` — :class:`SHACRunner` and :func:`make_runner`.
- :mod:`.config` — runner/algorithm/model configs (dataclasses with ``to_dict()``).
- :mod:`.models` — LayerNorm MLP model and tanh-squashed Gaussian on top of rsl_rl's ``MLPModel``.
- :mod:`.toy_envs` — small differentiable torch environments; :mod:`.evaluate`, :mod:`.export`,
  :mod:`.checkpoint`, :mod:`.distributed`, :mod:`.logger` — helpers.
"""

from diffloco_ext.learning.config import (
    DistributionCfg,
    LayerNormMLPModelCfg,
    MLPModelCfg,
    PPOAlgorithmCfg,
    PPORunnerCfg,
    RunnerCfg,
    SHACAlgorithmCfg,
    SHACRunnerCfg,
    SquashedGaussianDistributionCfg,
)
from diffloco_ext.learning.env import DiffVecEnv
from diffloco_ext.learning.models import LayerNormMLPModel, SquashedGaussianDistribution
from diffloco_ext.learning.runner import SHACRunner, build_ppo_runner, make_runner
from diffloco_ext.learning.shac import SHAC, td_lambda_targets

__all__ = [
    "SHAC",
    "DiffVecEnv",
    "DistributionCfg",
    "LayerNormMLPModel",
    "LayerNormMLPModelCfg",
    "MLPModelCfg",
    "PPOAlgorithmCfg",
    "PPORunnerCfg",
    "RunnerCfg",
    "SHACAlgorithmCfg",
    "SHACRunner",
    "SHACRunnerCfg",
    "SquashedGaussianDistribution",
    "SquashedGaussianDistributionCfg",
    "build_ppo_runner",
    "make_runner",
    "td_lambda_targets",
]
