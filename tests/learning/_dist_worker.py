"""Worker for the 2-process tests (run by torchrun): trains SHAC (or rsl_rl's PPO) on its own envs, writes its
parameters."""

import contextlib
import io
import os
import sys

import torch

from diffloco_ext.learning import SHACRunnerCfg, make_runner
from diffloco_ext.learning.config import PPORunnerCfg
from diffloco_ext.learning.evaluate import evaluate_return
from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv


def _flat(models):
    return torch.cat([t.detach().flatten().float() for m in models for t in m.state_dict().values()])


def ppo(out_dir: str, iterations: int) -> None:
    """rsl_rl's PPO, two CPU ranks: the parameters after training (ranks must agree)."""
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    torch.manual_seed(100 + rank)
    env = PointMassEnv(PointMassCfg(num_envs=16, seed=rank, dim=4))
    cfg = PPORunnerCfg(num_steps_per_env=8, max_iterations=iterations)
    with contextlib.redirect_stdout(io.StringIO()):
        runner = make_runner(env, cfg, log_dir=None, device="cpu")
        before = _flat([runner.alg.actor, runner.alg.critic])
        runner.learn(iterations)
    torch.save({"world_size": torch.distributed.get_world_size(), "backend": torch.distributed.get_backend(),
                "before": before, "after": _flat([runner.alg.actor, runner.alg.critic])},
               os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


def main(out_dir: str, iterations: int) -> None:
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    torch.manual_seed(100 + rank)  # different initial weights per rank: the broadcast must align them
    env = PointMassEnv(PointMassCfg(num_envs=16, seed=rank, dim=4))
    eval_env = lambda: PointMassEnv(PointMassCfg(num_envs=32, seed=7, dim=4))  # noqa: E731
    cfg = SHACRunnerCfg(max_iterations=100)
    cfg.algorithm.num_critic_epochs = 4
    with contextlib.redirect_stdout(io.StringIO()):
        runner = make_runner(env, cfg, log_dir=None, device="cpu")
    models = (runner.alg.actor, runner.alg.critic, runner.alg.target_critic)
    before = _flat(models)
    initial = evaluate_return(eval_env, runner.get_inference_policy())
    with contextlib.redirect_stdout(io.StringIO()):
        runner.learn(iterations)
    final = evaluate_return(eval_env, runner.get_inference_policy())
    torch.save({
        "world_size": torch.distributed.get_world_size(),
        "backend": torch.distributed.get_backend(),
        "before": before,
        "after": _flat(models),
        "initial": initial,
        "final": final,
        "skipped": runner.alg.skipped_actor_updates,
    }, os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


def checkpoint(out_dir: str, mode: str) -> None:
    """``save``: two ranks train SHAC 2 iterations and write ``model_2.pt``; each rank writes its env's state.
    ``resume`` / ``resume_single``: two ranks load ``model_2.pt`` (of two ranks / of one process); each rank writes
    its env's state after the load and after one more iteration (with the parameters)."""
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    torch.manual_seed(100 + rank)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=rank, dim=3, max_episode_length=12))
    cfg = SHACRunnerCfg(num_steps_per_env=4, max_iterations=2, save_interval=2)
    cfg.algorithm.num_critic_epochs = 1
    run = os.path.join(out_dir, "run_single" if mode == "resume_single" else "run")
    with contextlib.redirect_stdout(io.StringIO()):
        runner = make_runner(env, cfg, log_dir=run if mode == "save" else None, device="cpu")
        if mode == "save":
            runner.learn(2)
            torch.save({"saved": env.state_dict()["state"]}, os.path.join(out_dir, f"save{rank}.pt"))
        else:
            runner.load(os.path.join(run, "model_2.pt"))
            loaded = env.state_dict()["state"]
            runner.learn(1)
            torch.save({"loaded": loaded, "after": env.state_dict()["state"],
                        "params": _flat([runner.alg.actor, runner.alg.critic])},
                       os.path.join(out_dir, f"{mode}{rank}.pt"))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3].startswith(("save", "resume")):
        checkpoint(sys.argv[1], sys.argv[3])
    else:
        (ppo if len(sys.argv) > 3 and sys.argv[3] == "ppo" else main)(sys.argv[1], int(sys.argv[2]))
