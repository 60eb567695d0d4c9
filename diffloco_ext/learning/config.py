"""Training configuration as dataclasses, mirroring Isaac Lab's rsl_rl runner configs (``RslRlOnPolicyRunnerCfg``).

The runner configs have the same field names as Isaac Lab's (``seed, device, num_steps_per_env, max_iterations,
obs_groups, clip_actions, check_for_nan, save_interval, experiment_name, run_name, logger, neptune_project,
wandb_project, resume, load_run, load_checkpoint, actor, critic, algorithm``); ``to_dict()`` gives the nested plain
dict that the runners take (``Runner(env, cfg.to_dict(), log_dir, device)``). ``algorithm.class_name`` selects the
learner: ``"SHAC"`` (this package) or ``"PPO"`` (rsl_rl), see :func:`diffloco_ext.learning.runner.make_runner`.

SHAC defaults are those of the original SHAC (DiffRL, Ant): horizon 32, actor/critic lr 2e-3 with Adam
β = (0.7, 0.95) and linear decay, λ = 0.95, γ = 0.99, 16 critic epochs × 4 minibatches, target α = 0.2,
grad-norm clip 1.0; the actor is Schwarke et al.'s (arXiv 2404.02887) traced policy (MLP [128, 64, 32] ELU +
LayerNorm, normaliser, tanh, initial log-std −1), the critic DiffRL's [64, 64] ELU (+ LayerNorm).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

_MODELS = "diffloco_ext.learning.models"


def _to_dict(obj) -> dict:
    return dataclasses.asdict(obj)


#: Options of earlier versions that this one removed (tried and not adopted: ``docs/design.md``), per section of a
#: runner config, with the value that meant "off". A run's ``params/agent.yaml`` that still lists them loads when
#: each is off (:func:`drop_removed_options`); a run that used one cannot be rebuilt by this version.
REMOVED_OPTIONS = {
    "actor": {"action_smoothing": 0.0, "last_action_indices": None},
    "critic": {"action_smoothing": 0.0, "last_action_indices": None},
    "algorithm": {"lipschitz_penalty_final": None, "lipschitz_ramp": None, "action_std_after_curriculum": None,
                  "symmetry_cfg": None},
    "": {"chatter_guard": None},
}


def drop_removed_options(cfg: dict) -> dict:
    """``cfg`` (a runner config as a plain dict, e.g. a run's ``params/agent.yaml``) without :data:`REMOVED_OPTIONS`;
    a removed option that was on is a ``ValueError`` naming it (PPO keeps rsl_rl's own ``symmetry_cfg``)."""
    out = dict(cfg)
    shac = str((cfg.get("algorithm") or {}).get("class_name", "")).upper() == "SHAC"
    for section, removed in REMOVED_OPTIONS.items():
        part = out if section == "" else dict(out.get(section) or {})
        for key, off in removed.items():
            if key not in part or (key == "symmetry_cfg" and not shac):
                continue
            value = part.pop(key)
            if key == "chatter_guard":
                used = isinstance(value, dict) and value.get("max_rise") is not None
            else:  # the indices and the ramp act only with the blend's factor and lambda's final value
                used = key not in ("last_action_indices", "lipschitz_ramp") and value not in (None, off)
            if used:
                name = f"{section}.{key}" if section else key
                raise ValueError(f"the run was trained with {name}={value!r}, an option this version removed "
                                 f"(docs/design.md, options not adopted)")
        if section:
            out[section] = part
    return out


@dataclass
class DistributionCfg:
    """rsl_rl ``GaussianDistribution`` arguments (``init_std`` in scalar space even for ``std_type="log"``)."""

    class_name: str = "GaussianDistribution"
    init_std: float = 1.0
    std_type: str = "scalar"


@dataclass
class SquashedGaussianDistributionCfg(DistributionCfg):
    """tanh-squashed, reparameterised Gaussian; default initial log-std −1 (Schwarke et al.).

    ``action_limit``: actions are ``L·tanh(u / L)`` with ``L = action_limit`` (raw action units; 1 = Schwarke et
    al.'s tanh, i.e. joint targets within ±0.5 rad of the default pose at the velocity task's action scale 0.5)."""

    class_name: str = f"{_MODELS}:SquashedGaussianDistribution"
    init_std: float = math.exp(-1.0)
    std_type: str = "log"
    action_limit: float = 1.0


@dataclass
class MLPModelCfg:
    """rsl_rl ``MLPModel`` arguments."""

    class_name: str = "MLPModel"
    hidden_dims: list[int] = field(default_factory=lambda: [256, 256, 256])
    activation: str = "elu"
    obs_normalization: bool = True
    distribution_cfg: DistributionCfg | None = None


@dataclass
class LayerNormMLPModelCfg(MLPModelCfg):
    """:class:`~diffloco_ext.learning.models.LayerNormMLPModel` arguments (Schwarke et al.'s actor by default)."""

    class_name: str = f"{_MODELS}:LayerNormMLPModel"
    hidden_dims: list[int] = field(default_factory=lambda: [128, 64, 32])
    layer_norm: bool = True


@dataclass
class SHACAlgorithmCfg:
    """Arguments of :class:`diffloco_ext.learning.shac.SHAC` (DiffRL Ant defaults)."""

    class_name: str = "SHAC"
    actor_learning_rate: float = 2e-3
    critic_learning_rate: float = 2e-3
    schedule: str = "linear"
    """``"linear"``: both learning rates decay linearly to ``min_learning_rate`` over ``max_iterations``;
    ``"constant"``."""
    min_learning_rate: float = 1e-5
    betas: tuple[float, float] = (0.7, 0.95)
    gamma: float = 0.99
    lam: float = 0.95
    num_critic_epochs: int = 16
    num_critic_mini_batches: int = 4
    target_critic_alpha: float = 0.2
    """Polyak factor: ``target ← α·target + (1 − α)·critic`` after each critic update."""
    max_grad_norm: float = 1.0
    value_gradient_scale: float = 1.0
    """Weight of the gradient through the bootstrap values ``γ^h V'(s_h)`` in the actor's objective: 1 is SHAC
    (the critic's state gradient carries the long-term effect of the actions), 0 keeps the values in the
    objective's value but lets no gradient through them (the actor then follows the horizon's rewards only)."""
    value_gradient_scale_final: float | None = None
    """If set, the weight moves linearly from ``value_gradient_scale`` to this over ``value_gradient_ramp``."""
    value_gradient_ramp: tuple[int, int] = (0, 0)
    """Iterations ``(start, end)`` of the ramp (the weight is ``value_gradient_scale`` before ``start`` and
    ``value_gradient_scale_final`` from ``end`` on). E.g. a low weight while a command curriculum teaches the policy
    to walk (the critic of a standing policy pulls towards standing), then 1 (SHAC) once it walks."""
    value_gradient_ramp_from: str = "start"
    """What ``value_gradient_ramp``'s iterations count from: ``"start"`` (iteration 0) or ``"curriculum_end"`` (the
    first iteration at which the env's ``curriculum_progress`` is 1 on every rank; the weight stays at
    ``value_gradient_scale`` until then), so that a curriculum that advances with the policy's tracking (its gate)
    and the ramp stay in order. The linear learning-rate decay counts from the same origin (initial rates until the
    curriculum's end, then the decay over ``max_iterations``)."""
    lipschitz_penalty: float = 0.0
    """λ of the actor's Lipschitz penalty ``λ·E_o‖∂a/∂o‖²_F`` (the deterministic action's Jacobian w.r.t. the raw
    observations, Frobenius norm squared, estimated with one random projection per observation), added to the
    actor loss (0: off). The gradient-penalty form of Lipschitz-constrained policies (Chen et al., 2024,
    "Learning Smooth Humanoid Locomotion through Lipschitz-Constrained Policies"): it limits how fast the action
    can follow the state, so no reward term has to trade tracking for smoothness."""
    lipschitz_samples: int = 1024
    """Observations of the rollout (drawn at random each iteration) the penalty is estimated on."""
    lipschitz_after_curriculum: bool = False
    """Penalise only once the env's curriculum is complete (its ``curriculum_progress`` at 1 on every rank), as the
    task's ``after_curriculum`` reward terms: a penalty from the first iteration keeps SHAC from finding a gait
    (docs/design.md: Lipschitz penalty)."""
    action_std_at_curriculum_end: float | None = None
    """If set, the actor's exploration noise (the std of its Gaussian before the squash, raw action units) is set to
    this once, at the first iteration with the env's curriculum complete, and learnt on from there (SHAC's
    first-order gradient lowers it: 0.25 -> 0.16 over 700 iterations on the velocity task; docs/design.md:
    exploration noise). Checkpoints carry the iteration it was set at, so a resumed run does not set it again."""


@dataclass
class PPOAlgorithmCfg:
    """rsl_rl ``PPO`` arguments (Isaac Lab's ``RslRlPpoAlgorithmCfg`` fields and defaults for locomotion)."""

    class_name: str = "PPO"
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    learning_rate: float = 1e-3
    schedule: str = "adaptive"
    gamma: float = 0.99
    lam: float = 0.95
    entropy_coef: float = 0.005
    desired_kl: float = 0.01
    max_grad_norm: float = 1.0
    value_loss_coef: float = 1.0
    use_clipped_value_loss: bool = True
    clip_param: float = 0.2
    normalize_advantage_per_mini_batch: bool = False
    symmetry_cfg: dict | None = None
    """rsl_rl's symmetry extension (data augmentation and/or mirror loss), as Isaac Lab's ``RslRlSymmetryCfg``:
    e.g. ``{"use_data_augmentation": True, "data_augmentation_func":
    "diffloco_ext.tasks.velocity.symmetry:left_right_augmentation"}``. None: off."""


@dataclass
class RunnerCfg:
    """Fields shared by all runner configs (Isaac Lab's ``RslRlBaseRunnerCfg``)."""

    seed: int = 42
    device: str = "cpu"
    num_steps_per_env: int = 32
    """Steps per env per iteration; for SHAC the short horizon h."""
    max_iterations: int = 500
    obs_groups: dict[str, list[str]] = field(default_factory=lambda: {"actor": ["policy"], "critic": ["policy"]})
    clip_actions: float | None = None
    check_for_nan: bool = True
    save_interval: int = 50
    experiment_name: str = "diffloco"
    run_name: str = ""
    logger: str = "tensorboard"
    progress: str = "line"
    """Console output per iteration: ``"line"`` (one progress line) or ``"block"`` (rsl_rl's block)."""
    neptune_project: str = "diffloco"
    wandb_project: str = "diffloco"
    resume: bool = False
    load_run: str = ".*"
    load_checkpoint: str = "model_.*.pt"

    def to_dict(self) -> dict:
        """Nested plain dict for the runner (dataclasses converted recursively)."""
        return _to_dict(self)


@dataclass
class CurriculumEndCheckCfg:
    """:class:`~diffloco_ext.learning.curriculum_end_check.CurriculumEndCheck` arguments: the training rollouts'
    action rate over the command curriculum's last ``window`` iterations, printed when the curriculum completes, with
    a warning above ``warn_action_rate`` (a gait that chatters then; such runs tended to end standing still,
    docs/design.md: curriculum-end check). Changes nothing in the run."""

    window: int = 50
    warn_action_rate: float | None = None
    """Warn above this rate (raw action units per policy step); None: report only."""


@dataclass
class SHACRunnerCfg(RunnerCfg):
    """Config of :class:`diffloco_ext.learning.runner.SHACRunner`."""

    class_name: str = "SHACRunner"
    curriculum_end_check: CurriculumEndCheckCfg = field(default_factory=CurriculumEndCheckCfg)
    actor: MLPModelCfg = field(
        default_factory=lambda: LayerNormMLPModelCfg(distribution_cfg=SquashedGaussianDistributionCfg())
    )
    critic: MLPModelCfg = field(default_factory=lambda: LayerNormMLPModelCfg(hidden_dims=[64, 64]))
    algorithm: SHACAlgorithmCfg = field(default_factory=SHACAlgorithmCfg)


@dataclass
class PPORunnerCfg(RunnerCfg):
    """Config of rsl_rl's ``OnPolicyRunner`` with PPO (see :func:`diffloco_ext.learning.runner.make_runner`)."""

    class_name: str = "OnPolicyRunner"
    num_steps_per_env: int = 24
    actor: MLPModelCfg = field(
        default_factory=lambda: MLPModelCfg(hidden_dims=[128, 64, 32], distribution_cfg=DistributionCfg())
    )
    critic: MLPModelCfg = field(default_factory=lambda: MLPModelCfg(hidden_dims=[128, 64, 32]))
    algorithm: PPOAlgorithmCfg = field(default_factory=PPOAlgorithmCfg)
