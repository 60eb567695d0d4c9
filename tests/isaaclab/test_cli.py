"""``isaaclab train`` and ``isaaclab play`` on the ``-Isaac`` task, run as a user runs them (CPU, few envs):
PPO for 2 iterations on standalone PhysX (Newton: slow suite), playing a checkpoint in the project's SHAC format
with a headless MP4, and the policy Isaac Lab exports from it equals the project's actor."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from .conftest import run_isaaclab

TASK = "DiffLoco-Velocity-Flat-AnymalD-Isaac"


def _train(user_env, cwd: Path, *presets: str) -> Path:
    args = ["train", "--rl_library", "rsl_rl", "--task", TASK, "--num_envs", "4", "--device", "cpu",
            "--max_iterations", "2", *presets]
    proc = run_isaaclab(args, user_env, cwd, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    runs = sorted((cwd / "logs" / "rsl_rl" / "anymal_d_flat_isaac").iterdir())
    assert runs, "no run directory written"
    checkpoint = runs[-1] / "model_1.pt"
    assert checkpoint.exists(), sorted(p.name for p in runs[-1].iterdir())
    assert "Training time" in proc.stdout
    return checkpoint


def _shac_checkpoint(path: Path) -> torch.nn.Module:
    """A checkpoint as the project's SHAC runner writes it (its actor class and config, random weights)."""
    from tensordict import TensorDict

    from diffloco_ext.learning.agents.velocity import AnymalDFlatSHACRunnerCfg
    from diffloco_ext.learning.models import LayerNormMLPModel

    cfg = dataclasses.asdict(AnymalDFlatSHACRunnerCfg().actor)
    cfg.pop("class_name")
    torch.manual_seed(3)
    actor = LayerNormMLPModel(TensorDict({"policy": torch.zeros(1, 48)}, batch_size=[1]), {"actor": ["policy"]},
                              "actor", 12, **cfg)
    with torch.no_grad():  # a non-trivial normaliser, so that loading it is checked too
        actor.obs_normalizer._mean.uniform_(-0.5, 0.5)
        actor.obs_normalizer._var.uniform_(0.5, 2.0)
        actor.obs_normalizer._std.copy_(actor.obs_normalizer._var.sqrt())
    torch.save({"actor_state_dict": actor.state_dict(), "critic_state_dict": {}, "iter": 7, "infos": None}, path)
    return actor


def test_train_ppo_physx(user_env, tmp_path):
    _train(user_env, tmp_path, "presets=physx")


@pytest.mark.slow
def test_train_ppo_newton_and_play_with_video(user_env, tmp_path):
    checkpoint = _train(user_env, tmp_path)
    proc = run_isaaclab(["play", "--rl_library", "rsl_rl", "--task", TASK, "--num_envs", "2", "--device", "cpu",
                         "--checkpoint", str(checkpoint), "--video", "--video_length", "5", "--viz", "newton"],
                        user_env, tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert list(checkpoint.parent.glob("videos/play/*.mp4"))
    assert (checkpoint.parent / "exported" / "policy.pt").exists()


def test_play_shac_checkpoint_with_video(user_env, tmp_path):
    """``isaaclab play --agent rsl_rl_shac_cfg_entry_point`` loads a SHAC checkpoint's actor (normaliser, LayerNorm
    MLP, tanh), plays it on PhysX and writes a headless MP4 and the exported TorchScript policy, whose actions
    equal the project actor's."""
    import imageio.v3 as iio

    checkpoint = tmp_path / "model_7.pt"
    actor = _shac_checkpoint(checkpoint)
    proc = run_isaaclab(["play", "--rl_library", "rsl_rl", "--task", TASK, "--agent", "rsl_rl_shac_cfg_entry_point",
                         "--num_envs", "1", "--device", "cpu", "--checkpoint", str(checkpoint), "--video",
                         "--video_length", "4", "--viz", "newton", "presets=physx"], user_env, tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    videos = list(tmp_path.glob("videos/play/*.mp4"))
    assert videos, sorted(str(p) for p in tmp_path.rglob("*"))[:50]
    frame = iio.imread(videos[0], index=0)
    assert frame.ndim == 3 and frame.std() > 1.0  # a picture, not a blank frame
    exported = torch.jit.load(str(tmp_path / "exported" / "policy.pt"))
    obs = torch.randn(16, 48)
    with torch.no_grad():
        from tensordict import TensorDict

        expected = actor(TensorDict({"policy": obs}, batch_size=[16]))
        torch.testing.assert_close(exported(obs), expected, atol=1e-5, rtol=1e-5)
    assert expected.abs().max() < 1.5  # tanh-squashed to the recipe's bound: 1.5 tanh(u / 1.5)
