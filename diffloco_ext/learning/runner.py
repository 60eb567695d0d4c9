"""Runners: :class:`SHACRunner` (shape of rsl_rl's ``OnPolicyRunner``) and :func:`make_runner` choosing SHAC or PPO.

``SHACRunner(env, train_cfg, log_dir, device)`` owns the loop; :class:`~diffloco_ext.learning.shac.SHAC` owns the
update. Per iteration: detach the env state (cut the graph of the previous horizon), roll out
``num_steps_per_env`` steps with gradients, update, log (rsl_rl's logger: reward, episode length, losses, FPS, ETA
plus the SHAC scalars), save every ``save_interval`` iterations.

Iteration counting: ``current_learning_iteration`` is the number of completed iterations; checkpoint
``model_<n>.pt`` holds the state after n iterations and a runner loaded from it continues with iteration n.
Checkpoints hold actor, critic, target critic (with their observation normalisers), both optimisers, the
iteration, skip counters, the torch RNG state and, if the env has ``state_dict()``, the env state. Each iteration's
action rate (:class:`~diffloco_ext.learning.curriculum_end_check.ActionRate`) is logged and reported at the
curriculum's end.
"""

from __future__ import annotations

import os
import time

import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils import check_nan, resolve_callable

import diffloco_ext
from diffloco_ext.learning.checkpoint import non_finite_entries, save_atomic
from diffloco_ext.learning.curriculum_end_check import ActionRate, CurriculumEndCheck
from diffloco_ext.learning.distributed import configure_distributed
from diffloco_ext.learning.env import is_differentiable_env
from diffloco_ext.learning.export import export_policy_as_jit, export_policy_as_onnx
from diffloco_ext.learning.logger import TrainingLogger
from diffloco_ext.learning.shac import SHAC


def resolve_algorithm(class_name) -> type:
    """``"SHAC"`` → :class:`SHAC`; anything else through rsl_rl's ``resolve_callable`` (e.g. ``"PPO"``)."""
    if class_name in ("SHAC", SHAC):
        return SHAC
    return resolve_callable(class_name)


class SHACRunner:
    """Training loop for SHAC on a :class:`~diffloco_ext.learning.env.DiffVecEnv`.

    Args:
        env: differentiable vectorised env.
        train_cfg: ``SHACRunnerCfg().to_dict()`` or an equivalent dict.
        log_dir: TensorBoard/checkpoint directory; None disables logging, printing and saving during ``learn``.
        device: torch device of the learner (``"cpu"``, ``"cuda:0"``...).
    """

    def __init__(self, env, train_cfg: dict, log_dir: str | None = None, device: str = "cpu") -> None:
        if not is_differentiable_env(env):
            raise TypeError("SHACRunner needs a differentiable env (DiffVecEnv: step with gradients + detach_state).")
        self.env = env
        self.cfg = train_cfg
        self.device = device
        self.env_state_restored = False  # set by load() when a checkpoint's env state was loaded
        self.cfg["multi_gpu"] = configure_distributed(device)
        self.is_distributed = self.cfg["multi_gpu"] is not None
        self.gpu_world_size = self.cfg["multi_gpu"]["world_size"] if self.is_distributed else 1
        self.gpu_global_rank = self.cfg["multi_gpu"]["global_rank"] if self.is_distributed else 0

        obs = self.env.get_observations().to(self.device)
        alg_class = resolve_algorithm(self.cfg["algorithm"]["class_name"])
        self.alg: SHAC = alg_class.construct_algorithm(obs, self.env, self.cfg, self.device)

        self.logger = TrainingLogger(
            log_dir=log_dir,
            cfg=self.cfg,
            env_cfg=getattr(self.env, "cfg", {}),
            num_envs=self.env.num_envs,
            is_distributed=self.is_distributed,
            gpu_world_size=self.gpu_world_size,
            gpu_global_rank=self.gpu_global_rank,
            device=self.device,
        )
        self.logger.git_status_repos.append(diffloco_ext.__file__)
        #: Measures the action rate of the rollouts (logged, and read by the curriculum-end check).
        self.action_rate = ActionRate(is_distributed=self.is_distributed)
        #: Reports the action rate as the env's curriculum completes, warning when the gait chatters then.
        self.curriculum_end_check = CurriculumEndCheck(**(self.cfg.get("curriculum_end_check") or {}))
        self.current_learning_iteration = 0
        #: Loss dict of the last completed iteration (see :meth:`SHAC.update`).
        self.last_loss_dict: dict[str, float] = {}

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """Run ``num_learning_iterations`` SHAC iterations (continuing from ``current_learning_iteration``)."""
        if init_at_random_ep_len:
            self.env.episode_length_buf = torch.randint_like(
                self.env.episode_length_buf, high=int(self.env.max_episode_length)
            )
        self.alg.train_mode()
        if self.is_distributed:
            self.alg.broadcast_parameters()
        self.logger.init_logging_writer()
        horizon = int(self.cfg["num_steps_per_env"])
        check = self.cfg.get("check_for_nan", True)

        start_it = self.current_learning_iteration
        total_it = start_it + num_learning_iterations
        for it in range(start_it, total_it):
            start = time.time()
            self.alg.set_learning_rates(it, self._curriculum_progress())
            self.env.detach_state()
            obs = self.env.get_observations().to(self.device)
            for _ in range(horizon):
                actions = self.alg.act(obs)
                obs, rewards, dones, extras = self.env.step(actions.to(self.env.device))
                if check:
                    check_nan(obs.detach(), rewards.detach(), dones)
                obs, rewards, dones = obs.to(self.device), rewards.to(self.device), dones.to(self.device)
                self.action_rate.observe(actions, dones)
                self.alg.process_env_step(obs, rewards, dones, extras)
                self.logger.process_env_step(rewards.detach(), dones, extras)
            self.alg.compute_returns(obs)
            stop = time.time()
            collect_time, start = stop - start, stop

            loss_dict = self.alg.update()
            action_rate = self.action_rate.end_iteration()
            rate_at_curriculum_end = self.curriculum_end_check.observe(action_rate, self.alg.curriculum_complete)
            learn_time = time.time() - start
            self.current_learning_iteration = it + 1
            self.last_loss_dict = loss_dict
            if rate_at_curriculum_end is not None and self.gpu_global_rank == 0:
                print(self.curriculum_end_check.message(it), flush=True)

            self.logger.log(
                it=it,
                start_it=start_it,
                total_it=total_it,
                collect_time=collect_time,
                learn_time=learn_time,
                loss_dict={"actor": loss_dict["actor"], "critic": loss_dict["critic"]},
                learning_rate=self.alg.learning_rate,
                action_std=self._action_std(),
                rnd_weight=None,
                extra_scalars={
                    "Policy/actor_grad_norm": loss_dict["actor_grad_norm"],
                    "Policy/action_rate": action_rate,
                    **({"Policy/action_rate_at_curriculum_end": rate_at_curriculum_end}
                       if rate_at_curriculum_end is not None else {}),
                    **({"Policy/lipschitz": loss_dict["policy_lipschitz"]} if "policy_lipschitz" in loss_dict else {}),
                    "Value/estimate": loss_dict["value_estimate"],
                    "Value/target": loss_dict["value_target"],
                    "Loss/critic_learning_rate": self.alg.critic_learning_rate,
                    "Train/skipped_actor_updates": self.alg.skipped_actor_updates,
                    "Train/skipped_critic_updates": self.alg.skipped_critic_updates,
                },
            )
            if self.current_learning_iteration % self.cfg["save_interval"] == 0:
                ranks = self._gather_rank_states()  # every rank takes part; rank 0 writes
                if self.logger.writer is not None:
                    self.save(os.path.join(self.logger.log_dir, f"model_{self.current_learning_iteration}.pt"),
                              rank_states=ranks)

        ranks = self._gather_rank_states()
        if self.logger.writer is not None:
            self.save(os.path.join(self.logger.log_dir, f"model_{self.current_learning_iteration}.pt"),
                      rank_states=ranks)
            self.logger.stop_logging_writer()

    def _rank_state(self) -> dict:
        """This process's share of a checkpoint: its env's state and its torch RNG state."""
        env_state = self.env.state_dict() if callable(getattr(self.env, "state_dict", None)) else None
        return {"env_state": env_state, "num_envs": self.env.num_envs, "torch_rng": torch.get_rng_state()}

    def _gather_rank_states(self) -> list[dict] | None:
        """Every rank's :meth:`_rank_state`, on rank 0 (None on the others and without ranks). A collective: all
        ranks call it at the same iterations. Data-parallel ranks run different envs (their own seeds); a checkpoint
        holds each one's, so that a resumed run's ranks continue their own episodes instead of all continuing rank
        0's (identical ranks: the same gradient twice, half the batch)."""
        if not self.is_distributed:
            return None
        gathered = [None] * self.gpu_world_size if self.gpu_global_rank == 0 else None
        torch.distributed.gather_object(self._rank_state(), gathered, dst=0)
        return gathered

    def _curriculum_progress(self) -> float:
        """The env's ``curriculum_progress`` in [0, 1] (1 for an env without one), the lowest over the ranks."""
        progress = torch.tensor([float(getattr(self.env, "curriculum_progress", 1.0))])
        if self.is_distributed:
            torch.distributed.all_reduce(progress, op=torch.distributed.ReduceOp.MIN)
        return float(progress)

    def _action_std(self) -> torch.Tensor:
        dist = getattr(self.alg.actor, "distribution", None)
        if dist is None or dist._distribution is None:
            return torch.zeros(1)
        return dist.std.detach()

    # ---- checkpoints --------------------------------------------------------------------------------------------
    def save(self, path: str, infos: dict | None = None, rank_states: list[dict] | None = None) -> None:
        """Write a checkpoint atomically. Raises ``RuntimeError`` (writing nothing) if a model holds NaN/inf.
        ``rank_states``: every data-parallel rank's env and RNG state (:meth:`_gather_rank_states`), stored beside
        this process's."""
        saved = self.alg.save()
        bad = non_finite_entries({k: v for k, v in saved.items() if k.endswith("_state_dict") and "optimizer" not in k})
        if bad:
            raise RuntimeError(f"Refusing to write checkpoint '{path}': non-finite values in {bad[:5]}.")
        saved["iter"] = self.current_learning_iteration
        saved["infos"] = infos
        saved["rng_state"] = {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        }
        if callable(getattr(self.env, "state_dict", None)):
            saved["env_state"] = self.env.state_dict()
            saved["num_envs"] = self.env.num_envs
        if rank_states is not None:
            saved["rank_states"] = rank_states
        save_atomic(saved, path)
        self.logger.save_model(path, self.current_learning_iteration)

    def load(self, path: str, load_cfg: dict | None = None, strict: bool = True,
             map_location: str | None = None) -> dict:
        """Load a checkpoint.

        ``load_cfg`` (None = everything) selects ``actor, critic, optimizer, iteration`` as in rsl_rl, plus ``rng``
        (torch RNG state) and ``env`` (env state; restored only if the env has ``load_state_dict`` and the same
        ``num_envs``; with another ``num_envs``, only the env's training schedule, if it has
        ``load_schedule_state``). Returns the ``infos`` stored with the checkpoint.
        """
        loaded = torch.load(path, weights_only=False, map_location=map_location)
        if self.alg.load(loaded, load_cfg, strict):
            self.current_learning_iteration = int(loaded["iter"])
        want = (lambda key: True) if load_cfg is None else (lambda key: bool(load_cfg.get(key)))
        # a data-parallel run's checkpoint holds every rank's env and RNG state: each rank takes its own (a run
        # resumed on as many ranks), else rank 0's (one process resuming any run)
        ranks = loaded.get("rank_states")
        rank = self.gpu_global_rank if self.is_distributed else 0
        own = ranks[rank] if ranks and (len(ranks) == self.gpu_world_size or not self.is_distributed) else None
        rng = loaded.get("rng_state")
        if want("rng") and rng is not None:
            torch.set_rng_state(own["torch_rng"] if own is not None else rng["torch"])
            if (rng.get("cuda") is not None and torch.cuda.is_available()
                    and len(rng["cuda"]) == torch.cuda.device_count()):
                torch.cuda.set_rng_state_all(rng["cuda"])
        env_state, num_envs = (own["env_state"], own["num_envs"]) if own is not None else (
            loaded.get("env_state"), loaded.get("num_envs"))
        if want("env") and env_state is not None and callable(getattr(self.env, "load_state_dict", None)) \
                and num_envs == self.env.num_envs:
            self.env.load_state_dict(env_state)
            self.env_state_restored = True  # the envs continue mid-episode: no random episode lengths at learn()
            if self.is_distributed and own is None and rank > 0:
                # one state for several ranks (a checkpoint of a single process or of another rank count): the same
                # episodes and random streams on every rank would make the ranks duplicates; each rank > 0 draws
                # from its own streams from here on (its envs diverge at their next random draw)
                generator = getattr(self.env, "generator", None)
                if generator is not None:
                    generator.manual_seed(int(generator.initial_seed()) + 7919 * rank)
                torch.manual_seed(torch.initial_seed() + 7919 * rank)
                print(f"[diffloco] rank {rank}: the checkpoint holds one env state ({len(ranks or []) or 1} "
                      f"rank(s)), loaded with rank-{rank} random streams", flush=True)
        elif want("env") and env_state is not None and callable(getattr(self.env, "load_schedule_state", None)):
            # another env count (e.g. a small batch for the curriculum, a larger one after it): the episodes start
            # anew, but the env's training schedule (its curriculum's clock) goes on; without this the curriculum
            # would start again from its first step
            self.env.load_schedule_state(env_state)
            if self.gpu_global_rank == 0:
                print(f"[diffloco] the checkpoint's envs ({num_envs} per rank) differ from this run's "
                      f"({self.env.num_envs}): new episodes, the training schedule (curriculum progress "
                      f"{float(getattr(self.env, 'curriculum_progress', 1.0)):.2f}) carried over", flush=True)
        return loaded.get("infos")

    # ---- inference and export -----------------------------------------------------------------------------------
    def get_inference_policy(self, device: str | None = None):
        """The actor in eval mode: ``policy(obs_tensordict) -> (N, A)`` deterministic actions ``tanh(mean)``."""
        self.alg.eval_mode()
        return self.alg.get_policy().to(device) if device is not None else self.alg.get_policy()

    def export_policy_to_jit(self, path: str, filename: str = "policy.pt") -> str:
        """TorchScript export (see :mod:`diffloco_ext.learning.export`)."""
        return export_policy_as_jit(self.alg.get_policy(), path, filename)

    def export_policy_to_onnx(self, path: str, filename: str = "policy.onnx", verbose: bool = False) -> str:
        """ONNX export (see :mod:`diffloco_ext.learning.export`)."""
        return export_policy_as_onnx(self.alg.get_policy(), path, filename, verbose)

    def add_git_repo_to_log(self, repo_file_path: str) -> None:
        """Register a repository whose git state is stored with the logs."""
        self.logger.git_status_repos.append(repo_file_path)


class PPORunner(OnPolicyRunner):
    """rsl_rl's ``OnPolicyRunner``, whose data-parallel set-up also runs on CPUs: rsl_rl's own requires
    ``cuda:<LOCAL_RANK>`` and NCCL; here the process group comes from
    :func:`~diffloco_ext.learning.distributed.configure_distributed` (gloo on CPU, NCCL on CUDA, the same checks
    otherwise), so ``torchrun --nproc_per_node 2 scripts/train.py --algo ppo`` uses both cores of a CPU machine."""

    def _configure_multi_gpu(self) -> None:
        multi = configure_distributed(self.device)
        self.cfg["multi_gpu"] = multi
        self.is_distributed = multi is not None
        self.gpu_world_size = multi["world_size"] if multi else 1
        self.gpu_local_rank = multi["local_rank"] if multi else 0
        self.gpu_global_rank = multi["global_rank"] if multi else 0


def make_runner(env, train_cfg, log_dir: str | None = None, device: str | None = None):
    """Build the runner selected by ``algorithm.class_name``: :class:`SHACRunner` for SHAC, else rsl_rl's
    ``OnPolicyRunner`` (PPO). ``train_cfg`` is a config dataclass (``SHACRunnerCfg``/``PPORunnerCfg``) or its dict;
    ``device`` defaults to the config's."""
    cfg = train_cfg.to_dict() if hasattr(train_cfg, "to_dict") else dict(train_cfg)
    device = device or cfg.get("device", "cpu")
    if resolve_algorithm(cfg["algorithm"]["class_name"]) is SHAC:
        return SHACRunner(env, cfg, log_dir, device)
    runner = PPORunner(env, cfg, log_dir, device)
    runner.logger.__class__ = TrainingLogger  # same state, adds the one-line progress (cfg["progress"])
    return runner


def build_ppo_runner(env, ppo_cfg, log_dir: str | None = None, device: str | None = None) -> OnPolicyRunner:
    """rsl_rl ``OnPolicyRunner`` from a :class:`~diffloco_ext.learning.config.PPORunnerCfg` (or its dict)."""
    runner = make_runner(env, ppo_cfg, log_dir, device)
    if not isinstance(runner, OnPolicyRunner):
        raise ValueError("build_ppo_runner needs a config with algorithm.class_name = 'PPO'.")
    return runner
