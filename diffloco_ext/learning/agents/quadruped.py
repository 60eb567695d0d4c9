"""SHAC and PPO runner configs of ``DiffLoco-Quadruped-Forward`` (paper A, section A.2)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import PPORunnerCfg, SHACAlgorithmCfg, SHACRunnerCfg


@dataclass
class QuadrupedForwardSHACRunnerCfg(SHACRunnerCfg):
    num_steps_per_env: int = 32
    max_iterations: int = 200
    experiment_name: str = "quadruped_forward"
    algorithm: SHACAlgorithmCfg = field(default_factory=lambda: SHACAlgorithmCfg(
        actor_learning_rate=2e-3, critic_learning_rate=2e-3, num_critic_epochs=8))


@dataclass
class QuadrupedForwardPPORunnerCfg(PPORunnerCfg):
    num_steps_per_env: int = 24
    max_iterations: int = 500
    experiment_name: str = "quadruped_forward"
