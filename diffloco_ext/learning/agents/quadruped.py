"""SHAC and PPO runner configs of ``DiffLoco-Quadruped-Forward`` (Schwarke et al., arXiv 2404.02887,
section A.2)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import (
    LayerNormMLPModelCfg,
    MLPModelCfg,
    PPORunnerCfg,
    SHACAlgorithmCfg,
    SHACRunnerCfg,
    SquashedGaussianDistributionCfg,
)


@dataclass
class QuadrupedForwardSHACRunnerCfg(SHACRunnerCfg):
    """SHAC with low exploration noise (action std 0.02, as Schwarke et al.'s ANYmal policy) and learning rates
    1e-3: with the default std exp(-1) and 2e-3 the runs reached 0.1-0.2 m/s and kept falling; std 0.05 at 2e-3
    reached 0.67 m/s at iteration 200 and then collapsed; std 0.02 at 1e-3 walks at 0.96 m/s."""

    num_steps_per_env: int = 32
    max_iterations: int = 200
    experiment_name: str = "quadruped_forward"
    actor: MLPModelCfg = field(default_factory=lambda: LayerNormMLPModelCfg(
        distribution_cfg=SquashedGaussianDistributionCfg(init_std=0.02)))
    algorithm: SHACAlgorithmCfg = field(default_factory=lambda: SHACAlgorithmCfg(
        actor_learning_rate=1e-3, critic_learning_rate=1e-3, num_critic_epochs=8))


@dataclass
class QuadrupedForwardPPORunnerCfg(PPORunnerCfg):
    num_steps_per_env: int = 24
    max_iterations: int = 500
    experiment_name: str = "quadruped_forward"
