"""Policies as deployed: TorchScript and ONNX files and rsl_rl checkpoints load, run and agree; a missing file,
a wrong observation size and a non-policy file are clear errors; the export gate compares what it should."""

from __future__ import annotations

import os

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning.cli import new_run_dir
from diffloco_ext.learning.runner import make_runner
from diffloco_ext.tasks import registry
from diffloco_ext.validation.policy_io import (
    PolicyLoadError,
    export_mismatch,
    load_checkpoint,
    load_policy_file,
    load_torchscript,
)

from .policies import StandingPolicy, WrongInputPolicy, save_onnx, save_torchscript

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_torchscript_and_onnx_files_run_and_agree(tmp_path):
    module = StandingPolicy()
    jit_path, onnx_path = save_torchscript(module, tmp_path / "policy.pt"), save_onnx(module, tmp_path / "policy.onnx")
    jit, onnx = load_policy_file(jit_path, 48, 12), load_policy_file(onnx_path, 48, 12)
    assert jit.kind == "torchscript" and onnx.kind == "onnx"
    assert set(jit.exported) == {"jit", "onnx"}  # the sibling file of the other format is found
    obs = torch.randn(64, 48)
    assert torch.allclose(jit(obs), module(obs)) and torch.allclose(onnx(obs), module(obs), atol=1e-6)
    mismatch = export_mismatch(jit, obs)
    assert set(mismatch) == {"jit_vs_onnx"} and mismatch["jit_vs_onnx"] < 1e-5


def test_missing_files_and_wrong_sizes_are_clear_errors(tmp_path):
    with pytest.raises(PolicyLoadError, match="not found"):
        load_policy_file(str(tmp_path / "absent.pt"), 48, 12)
    with pytest.raises(PolicyLoadError, match="checkpoint '.*absent_model.pt' not found"):
        load_checkpoint(str(tmp_path / "absent_model.pt"), TASK, str(tmp_path / "exported"), 48, 12)
    wrong = save_torchscript(WrongInputPolicy(), tmp_path / "wrong.pt")
    with pytest.raises(PolicyLoadError, match=r"rejects a \[2, 48\] observation batch"):
        load_policy_file(wrong, 48, 12)
    with pytest.raises(PolicyLoadError, match="takes 40 observations; the task gives 48"):
        load_policy_file(save_onnx(WrongInputPolicy(), tmp_path / "wrong.onnx", num_obs=40), 48, 12)
    with pytest.raises(PolicyLoadError, match=r"returns \(2, 12\) for a \[2, 48\] batch; the task needs \[2, 8\]"):
        load_policy_file(save_torchscript(StandingPolicy(), tmp_path / "p.pt"), 48, 8)
    torch.save({"actor_state_dict": {}}, tmp_path / "model_1.pt")
    with pytest.raises(PolicyLoadError, match="not a TorchScript policy.*--checkpoint"):
        load_torchscript(str(tmp_path / "model_1.pt"))
    # the other way round: an exported policy given where a checkpoint is expected
    exported = save_torchscript(StandingPolicy(), tmp_path / "policy.pt")
    with pytest.raises(PolicyLoadError, match="exported TorchScript policy, not an rsl_rl checkpoint.*--policy"):
        load_checkpoint(exported, TASK, str(tmp_path / "exported"), 48, 12)


def test_an_exception_without_a_message_is_described_by_its_type():
    from diffloco_ext.validation.policy_io import describe

    assert describe(NotImplementedError()) == "NotImplementedError"
    assert describe(ValueError("bad size\nmore")) == "ValueError: bad size"


def test_a_checkpoint_is_exported_and_the_export_gate_compares_it_with_torch(tmp_path):
    env_cfg = registry.load_cfg(TASK)
    env_cfg.num_envs = 2
    agent_cfg = registry.load_agent_cfg(TASK, "shac")

    class Args:
        log_root, algo = str(tmp_path / "logs"), "shac"

    run_dir = new_run_dir(Args, agent_cfg, env_cfg)  # params/agent.yaml, as training writes it
    runner = make_runner(registry.make_env(TASK, env_cfg), agent_cfg, log_dir=None)
    path = os.path.join(run_dir, "model_0.pt")
    runner.save(path)
    policy = load_checkpoint(path, TASK, str(tmp_path / "exported"), 48, 12)
    assert policy.kind == "torchscript" and policy.checkpoint == path
    assert os.path.isfile(policy.exported["jit"]) and os.path.isfile(policy.exported["onnx"])
    obs = torch.randn(32, 48)
    mismatch = export_mismatch(policy, obs)
    assert set(mismatch) == {"jit", "onnx"} and max(mismatch.values()) < 1e-5
    assert policy(obs).abs().max() > 0  # a real network, not zeros
    with pytest.raises(PolicyLoadError, match="does not load into the runner"):
        load_checkpoint(path, "DiffLoco-Quadruped-Forward", str(tmp_path / "other"), 48, 12)


def test_a_checkpoint_of_isaaclab_train_with_tuples_in_its_params_validates(tmp_path):
    """``isaaclab train`` writes ``params/agent.yaml`` with Isaac Lab's ``dump_yaml``, tuples tagged
    ``!!python/tuple`` (e.g. the distribution's ``std_range``): such a PPO checkpoint loads and is exported."""
    import yaml

    env_cfg = registry.load_cfg(TASK)
    env_cfg.num_envs = 2
    agent_cfg = registry.load_agent_cfg(TASK, "ppo")

    class Args:
        log_root, algo = str(tmp_path / "logs"), "ppo"

    run_dir = new_run_dir(Args, agent_cfg, env_cfg)
    agent_yaml = os.path.join(run_dir, "params", "agent.yaml")
    with open(agent_yaml) as f:
        params = yaml.safe_load(f)
    params["actor"]["distribution_cfg"]["std_range"] = (1.0e-6, 1.0e6)
    with open(agent_yaml, "w") as f:
        yaml.dump(params, f)  # the full dumper, as Isaac Lab's: the tuple gets its Python tag
    with open(agent_yaml) as f:
        assert "!!python/tuple" in f.read()
    runner = make_runner(registry.make_env(TASK, env_cfg), agent_cfg, log_dir=None)
    path = os.path.join(run_dir, "model_0.pt")
    runner.save(path)
    policy = load_checkpoint(path, TASK, str(tmp_path / "exported"), 48, 12)
    obs = torch.randn(8, 48)
    expected = runner.get_inference_policy()(TensorDict({"policy": obs}, batch_size=[8])).float()
    assert torch.allclose(policy(obs), expected, atol=1e-6)


def test_a_checkpoint_whose_critic_reads_other_inputs_still_validates(tmp_path):
    """Validation runs the actor only: a checkpoint whose critic group had another size (a run made before the
    critic's tracking features, 61 inputs against 66) loads, and its policy is the checkpoint's actor."""
    env_cfg = registry.load_cfg(TASK)
    env_cfg.num_envs = 2
    env_cfg.critic_tracking_features = False
    agent_cfg = registry.load_agent_cfg(TASK, "shac")
    runner = make_runner(registry.make_env(TASK, env_cfg), agent_cfg, log_dir=None)
    assert runner.alg.critic.obs_normalizer._mean.shape[-1] == 61
    path = str(tmp_path / "model_0.pt")
    runner.save(path)
    policy = load_checkpoint(path, TASK, str(tmp_path / "exported"), 48, 12)
    obs = torch.randn(16, 48)
    expected = runner.get_inference_policy()(TensorDict({"policy": obs}, batch_size=[16])).float()
    assert torch.allclose(policy(obs), expected, atol=1e-6)
