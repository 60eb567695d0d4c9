"""SHAC and PPO runner configs of the velocity-tracking tasks.

PPO: Isaac Lab's ``AnymalDFlatPPORunnerCfg`` exactly (24 steps per env, MLP [128, 128, 128] ELU for actor and
critic, no observation normaliser, initial std 1, adaptive lr 1e-3 with KL 0.01, clip 0.2, entropy 0.005,
5 epochs x 4 minibatches, 300 iterations), so the comparison is against what Isaac Lab users run.

SHAC: the recipe of ``make train``. Schwarke et al.'s traced policy (MLP [128, 64, 32] ELU + LayerNorm, observation
normaliser, tanh-squashed Gaussian) and DiffRL's critic ([128, 128] here); horizon 32 policy steps (0.64 s); the
critic reads the privileged group; actor and critic lr 1e-3 with linear decay over 1000 iterations. Initial action
std 0.02 instead of the paper's exp(-1): at exp(-1) the exploration noise dominates the batch gradient (the actor
gradients of two rollouts from the same states with different noise have cosine 0.08; 0.40 at std 0.02), and only
the low-noise runs learned to walk (docs/design.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import (
    CurriculumEndCheckCfg,
    DistributionCfg,
    LayerNormMLPModelCfg,
    MLPModelCfg,
    PPOAlgorithmCfg,
    PPORunnerCfg,
    SHACAlgorithmCfg,
    SHACRunnerCfg,
    SquashedGaussianDistributionCfg,
)

_OBS_GROUPS = {"actor": ["policy"], "critic": ["critic"]}


@dataclass
class AnymalDFlatSHACRunnerCfg(SHACRunnerCfg):
    """SHAC of ``make train`` on ``DiffLoco-Velocity-Flat-AnymalD`` (the recipe's learner settings; the
    measurements behind each: ``docs/design.md``)."""

    num_steps_per_env: int = 32
    #: the linear learning-rate decay spans 1000 iterations (~16 min on two ranks of a 2-core CPU), fixed, so that
    #: a seed's run is the same run on any machine up to where a time budget stops it
    max_iterations: int = 1000
    save_interval: int = 50
    experiment_name: str = "anymal_d_flat"
    obs_groups: dict = field(default_factory=lambda: dict(_OBS_GROUPS))
    #: actions bounded by 1.5 (joint targets within 0.75 rad of the default pose; design: action bound)
    actor: MLPModelCfg = field(default_factory=lambda: LayerNormMLPModelCfg(
        hidden_dims=[128, 64, 32], distribution_cfg=SquashedGaussianDistributionCfg(init_std=0.02, action_limit=1.5)))
    critic: MLPModelCfg = field(default_factory=lambda: LayerNormMLPModelCfg(hidden_dims=[128, 128]))
    algorithm: SHACAlgorithmCfg = field(default_factory=lambda: SHACAlgorithmCfg(
        actor_learning_rate=1e-3, critic_learning_rate=1e-3, num_critic_epochs=8, num_critic_mini_batches=4,
        # the bootstrap value's gradient at 0.2 while the robot learns to walk, to 1 over the 20 iterations after
        # the curriculum (design: bootstrap gradient)
        value_gradient_scale=0.2, value_gradient_scale_final=1.0, value_gradient_ramp_from="curriculum_end",
        value_gradient_ramp=(0, 20),
        # the actor's Lipschitz penalty once the robot walks (design: Lipschitz penalty)
        lipschitz_penalty=1e-3, lipschitz_after_curriculum=True,
        # exploration noise reset to 0.25 at the curriculum's end (design: exploration noise)
        action_std_at_curriculum_end=0.25))
    #: warn at the command curriculum's end when the gait chatters (design: curriculum-end check)
    curriculum_end_check: CurriculumEndCheckCfg = field(
        default_factory=lambda: CurriculumEndCheckCfg(window=50, warn_action_rate=0.35))


@dataclass
class AnymalDFlatPPORunnerCfg(PPORunnerCfg):
    num_steps_per_env: int = 24
    max_iterations: int = 300
    save_interval: int = 50
    experiment_name: str = "anymal_d_flat"
    obs_groups: dict = field(default_factory=lambda: {"actor": ["policy"], "critic": ["policy"]})
    actor: MLPModelCfg = field(default_factory=lambda: MLPModelCfg(
        hidden_dims=[128, 128, 128], obs_normalization=False, distribution_cfg=DistributionCfg(init_std=1.0)))
    critic: MLPModelCfg = field(default_factory=lambda: MLPModelCfg(hidden_dims=[128, 128, 128],
                                                                    obs_normalization=False))
    algorithm: PPOAlgorithmCfg = field(default_factory=PPOAlgorithmCfg)


@dataclass
class AnymalCFlatSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    experiment_name: str = "anymal_c_flat"


@dataclass
class AnymalCFlatPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name: str = "anymal_c_flat"


@dataclass
class AnymalDFlatAlignedSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    """SHAC of the recipe on ``DiffLoco-Velocity-Flat-AnymalD-Aligned`` (MuJoCo forward, surrogate backward)."""

    experiment_name: str = "anymal_d_flat_aligned"


@dataclass
class AnymalDFlatAlignedPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    """rsl_rl's PPO with Isaac Lab's settings on the same MuJoCo env (no gradients): paper B's baseline."""

    experiment_name: str = "anymal_d_flat_aligned"


@dataclass
class AnymalDFlatPaceSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    experiment_name: str = "anymal_d_flat_pace"


@dataclass
class AnymalDFlatPacePPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name: str = "anymal_d_flat_pace"


@dataclass
class AnymalDFlatBoundSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    experiment_name: str = "anymal_d_flat_bound"


@dataclass
class AnymalDFlatBoundPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name: str = "anymal_d_flat_bound"


@dataclass
class AnymalDFlatGallopSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    experiment_name: str = "anymal_d_flat_gallop"


@dataclass
class AnymalDFlatGallopPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name: str = "anymal_d_flat_gallop"


@dataclass
class AnymalDFlatPaceClockSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    experiment_name: str = "anymal_d_flat_pace_clock"


@dataclass
class AnymalDFlatPaceClockPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name: str = "anymal_d_flat_pace_clock"


@dataclass
class AnymalDFlatBoundClockSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    experiment_name: str = "anymal_d_flat_bound_clock"


@dataclass
class AnymalDFlatBoundClockPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name: str = "anymal_d_flat_bound_clock"


@dataclass
class AnymalDFlatGallopClockSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    experiment_name: str = "anymal_d_flat_gallop_clock"


@dataclass
class AnymalDFlatGallopClockPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name: str = "anymal_d_flat_gallop_clock"


@dataclass
class AnymalDRoughSHACRunnerCfg(AnymalDFlatSHACRunnerCfg):
    """SHAC of the recipe on ``DiffLoco-Velocity-Rough-AnymalD``."""

    experiment_name: str = "anymal_d_rough"


@dataclass
class AnymalDRoughPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    """rsl_rl's PPO with Isaac Lab's rough ANYmal-D settings: [512, 256, 128] actor and critic, 2000 iterations."""

    max_iterations: int = 2000
    experiment_name: str = "anymal_d_rough"
    actor: MLPModelCfg = field(default_factory=lambda: MLPModelCfg(
        hidden_dims=[512, 256, 128], obs_normalization=False, distribution_cfg=DistributionCfg(init_std=1.0)))
    critic: MLPModelCfg = field(default_factory=lambda: MLPModelCfg(hidden_dims=[512, 256, 128],
                                                                    obs_normalization=False))
