"""Isaac Lab (``isaaclab_rl``) runner configs of the ``DiffLoco-*-Isaac`` tasks, for ``isaaclab train|play``.

* ``rsl_rl_cfg_entry_point`` -> :class:`AnymalDFlatPPORunnerCfg`: PPO with the project's PPO settings
  (:mod:`diffloco_ext.learning.agents.velocity`, which are Isaac Lab's flat ANYmal-D settings).
* ``rsl_rl_shac_cfg_entry_point`` -> :class:`AnymalDFlatSHACPlayRunnerCfg`: *playing* a policy trained by the
  project's SHAC (``isaaclab play --agent rsl_rl_shac_cfg_entry_point --checkpoint .../model_N.pt``). Isaac
  Lab's play builds rsl_rl's ``OnPolicyRunner`` (hard-wired) and loads the checkpoint through the algorithm's
  ``load``; the actor is SHAC's (:class:`~diffloco_ext.learning.models.LayerNormMLPModel` with the tanh-squashed
  Gaussian, by rsl_rl's ``class_name``), and the algorithm is :class:`ActorOnlyPPO`, which loads the actor
  only (SHAC's critic reads a privileged group that the Isaac Lab task does not have, and SHAC has its own
  optimiser state). Not for training: SHAC needs the differentiable simulator (``scripts/train.py``).

The agent device is ``cpu`` where there is no CUDA device (Isaac Lab's default is ``cuda:0``).
"""

from __future__ import annotations

import torch
from isaaclab.utils import configclass
from isaaclab_rl.rsl_rl import RslRlMLPModelCfg, RslRlOnPolicyRunnerCfg, RslRlPpoAlgorithmCfg
from rsl_rl.algorithms import PPO

from diffloco_ext.learning.agents import velocity as project_agents


def _device() -> str:
    return "cuda:0" if torch.cuda.is_available() else "cpu"


class ActorOnlyPPO(PPO):
    """rsl_rl's PPO that loads only the actor from a checkpoint (any other entry is ignored) and never the
    iteration count: for playing policies trained by another algorithm with the same actor."""

    def load(self, loaded_dict: dict, load_cfg: dict | None, strict: bool) -> bool:
        if "actor_state_dict" not in loaded_dict:
            raise KeyError(f"the checkpoint has no 'actor_state_dict' (it has {sorted(loaded_dict)})")
        self._raw_actor.load_state_dict(loaded_dict["actor_state_dict"], strict=strict)
        return False


def _ppo_algorithm(a) -> RslRlPpoAlgorithmCfg:
    return RslRlPpoAlgorithmCfg(
        value_loss_coef=a.value_loss_coef, use_clipped_value_loss=a.use_clipped_value_loss, clip_param=a.clip_param,
        entropy_coef=a.entropy_coef, num_learning_epochs=a.num_learning_epochs, num_mini_batches=a.num_mini_batches,
        learning_rate=a.learning_rate, schedule=a.schedule, gamma=a.gamma, lam=a.lam, desired_kl=a.desired_kl,
        max_grad_norm=a.max_grad_norm)


def _mlp(m, stochastic: bool) -> RslRlMLPModelCfg:
    dist = None
    if stochastic and m.distribution_cfg is not None:
        dist = RslRlMLPModelCfg.GaussianDistributionCfg(init_std=m.distribution_cfg.init_std)
        dist.class_name = m.distribution_cfg.class_name
        dist.std_type = m.distribution_cfg.std_type
    cfg = RslRlMLPModelCfg(hidden_dims=list(m.hidden_dims), activation=m.activation,
                           obs_normalization=m.obs_normalization, distribution_cfg=dist)
    cfg.class_name = m.class_name
    return cfg


@configclass
class AnymalDFlatPPORunnerCfg(RslRlOnPolicyRunnerCfg):
    """PPO on ``DiffLoco-Velocity-Flat-AnymalD-Isaac`` (values from the project's PPO config)."""

    num_steps_per_env = 24
    max_iterations = 300
    save_interval = 50
    experiment_name = "anymal_d_flat_isaac"
    obs_groups = {"actor": ["policy"], "critic": ["policy"]}
    actor = RslRlMLPModelCfg(hidden_dims=[128, 128, 128], activation="elu")
    critic = RslRlMLPModelCfg(hidden_dims=[128, 128, 128], activation="elu")
    algorithm = RslRlPpoAlgorithmCfg(
        value_loss_coef=1.0, use_clipped_value_loss=True, clip_param=0.2, entropy_coef=0.005, num_learning_epochs=5,
        num_mini_batches=4, learning_rate=1.0e-3, schedule="adaptive", gamma=0.99, lam=0.95, desired_kl=0.01,
        max_grad_norm=1.0)

    def project_cfg(self):
        return project_agents.AnymalDFlatPPORunnerCfg()

    def __post_init__(self):
        p = self.project_cfg()
        self.num_steps_per_env = p.num_steps_per_env
        self.max_iterations = p.max_iterations
        self.save_interval = p.save_interval
        self.actor = _mlp(p.actor, stochastic=True)
        self.critic = _mlp(p.critic, stochastic=False)
        self.algorithm = _ppo_algorithm(p.algorithm)
        self.device = _device()


@configclass
class AnymalCFlatPPORunnerCfg(AnymalDFlatPPORunnerCfg):
    experiment_name = "anymal_c_flat_isaac"

    def project_cfg(self):
        return project_agents.AnymalCFlatPPORunnerCfg()


@configclass
class AnymalDFlatSHACPlayRunnerCfg(AnymalDFlatPPORunnerCfg):
    """Playing a SHAC checkpoint of ``DiffLoco-Velocity-Flat-AnymalD`` in Isaac Lab (see the module docstring)."""

    experiment_name = "anymal_d_flat"  # the project's SHAC runs log under logs/rsl_rl/anymal_d_flat

    def shac_cfg(self):
        return project_agents.AnymalDFlatSHACRunnerCfg()

    def __post_init__(self):
        super().__post_init__()
        s = self.shac_cfg()
        self.actor = _mlp(s.actor, stochastic=True)
        self.obs_groups = {"actor": ["policy"], "critic": ["policy"]}
        self.algorithm.class_name = f"{__name__}:ActorOnlyPPO"


@configclass
class AnymalCFlatSHACPlayRunnerCfg(AnymalDFlatSHACPlayRunnerCfg):
    experiment_name = "anymal_c_flat"

    def project_cfg(self):
        return project_agents.AnymalCFlatPPORunnerCfg()

    def shac_cfg(self):
        return project_agents.AnymalCFlatSHACRunnerCfg()
