"""SHAC runner: checkpoint round trip, atomic saving, logging, export, PPO through the same entry point."""

import contextlib
import glob
import io
import os

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning import PPORunnerCfg, SHACRunner, SHACRunnerCfg, build_ppo_runner, make_runner
from diffloco_ext.learning.checkpoint import get_checkpoint_path, read_params_yaml
from diffloco_ext.learning.toy_envs import PendulumSwingUpCfg, PendulumSwingUpEnv, PointMassCfg, PointMassEnv


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def _cfg(**kw):
    cfg = SHACRunnerCfg(num_steps_per_env=8, max_iterations=20, **kw)
    cfg.algorithm.num_critic_epochs = 2
    return cfg


def _runner(seed=0, env_seed=0, log_dir=None, **kw):
    torch.manual_seed(seed)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=env_seed, dim=3, max_episode_length=12))
    return _quiet(make_runner, env, _cfg(**kw), log_dir)


def test_config_to_dict_mirrors_isaaclab_fields():
    d = SHACRunnerCfg().to_dict()
    for key in ("seed", "device", "num_steps_per_env", "max_iterations", "save_interval", "experiment_name",
                "run_name", "logger", "resume", "load_run", "load_checkpoint", "actor", "critic", "algorithm",
                "obs_groups", "check_for_nan"):
        assert key in d
    assert d["algorithm"]["class_name"] == "SHAC" and d["num_steps_per_env"] == 32
    assert d["actor"]["hidden_dims"] == [128, 64, 32] and d["actor"]["layer_norm"] is True
    assert d["actor"]["distribution_cfg"]["std_type"] == "log"
    assert abs(d["actor"]["distribution_cfg"]["init_std"] - np.exp(-1)) < 1e-12
    assert PPORunnerCfg().to_dict()["algorithm"]["class_name"] == "PPO"


def test_paper_a_actor_architecture():
    runner = _runner()
    actor = runner.alg.actor
    kinds = [type(m).__name__ for m in actor.mlp]
    assert kinds == ["Linear", "ELU", "LayerNorm"] * 3 + ["Linear"]
    assert [m.out_features for m in actor.mlp if isinstance(m, torch.nn.Linear)] == [128, 64, 32, 3]
    torch.testing.assert_close(actor.distribution.log_std_param, torch.full((3,), -1.0))
    assert actor.obs_normalization
    obs = runner.env.get_observations()
    assert actor(obs).abs().max() < 1.0  # tanh-squashed deterministic output


def test_checkpoint_round_trip_continues_like_an_uninterrupted_run(tmp_path):
    k = 3
    uninterrupted = _runner(seed=5, env_seed=5)
    _quiet(uninterrupted.learn, k, init_at_random_ep_len=True)
    _quiet(uninterrupted.learn, 1)
    expected = uninterrupted.last_loss_dict

    first = _runner(seed=5, env_seed=5)
    _quiet(first.learn, k, init_at_random_ep_len=True)
    path = str(tmp_path / f"model_{k}.pt")
    first.save(path)
    ckpt = torch.load(path, weights_only=False)
    for key in ("actor_state_dict", "critic_state_dict", "target_critic_state_dict", "actor_optimizer_state_dict",
                "critic_optimizer_state_dict", "iter", "rng_state", "env_state"):
        assert key in ckpt
    assert any("obs_normalizer" in name for name in ckpt["actor_state_dict"])
    assert ckpt["iter"] == k

    torch.manual_seed(999)  # a fresh process would have other RNG and env states
    fresh = _runner(seed=999, env_seed=999)
    fresh.load(path)
    assert fresh.current_learning_iteration == k
    _quiet(fresh.learn, 1)
    assert fresh.last_loss_dict == expected
    for a, b in zip(fresh.alg.actor.parameters(), uninterrupted.alg.actor.parameters()):
        assert torch.equal(a, b)


def test_save_is_atomic_and_refuses_nan(tmp_path):
    runner = _runner()
    path = str(tmp_path / "model_1.pt")
    runner.save(path)
    assert os.listdir(tmp_path) == ["model_1.pt"]
    good = torch.load(path, weights_only=False)
    with torch.no_grad():
        next(runner.alg.actor.parameters()).fill_(float("nan"))
    with pytest.raises(RuntimeError, match="non-finite"):
        runner.save(path)
    assert os.listdir(tmp_path) == ["model_1.pt"]  # no temp file left, old checkpoint intact
    kept = torch.load(path, weights_only=False)
    for name, value in good["actor_state_dict"].items():
        assert torch.equal(value, kept["actor_state_dict"][name])


def test_run_params_written_by_isaaclab_train_are_read_with_their_tuples(tmp_path):
    """Isaac Lab's ``dump_yaml`` writes tuples as ``!!python/tuple``: such a run's ``params/agent.yaml`` (an
    ``isaaclab train`` checkpoint handed to validation or play) reads, and other Python tags stay refused."""
    import yaml

    path = tmp_path / "agent.yaml"
    path.write_text("class_name: OnPolicyRunner\nactor:\n  distribution_cfg:\n    std_range: !!python/tuple\n"
                    "    - 1.0e-06\n    - 1000000.0\n")
    assert read_params_yaml(str(path))["actor"]["distribution_cfg"]["std_range"] == (1e-6, 1e6)
    path.write_text("x: !!python/object/apply:os.getcwd []\n")
    with pytest.raises(yaml.constructor.ConstructorError):
        read_params_yaml(str(path))
    path.write_text("")
    assert read_params_yaml(str(path)) == {}
    path.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="mapping"):
        read_params_yaml(str(path))


def test_learn_logs_prints_and_saves(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log_dir = str(tmp_path / "run")
    runner = _runner(log_dir=log_dir, save_interval=2)
    runner.learn(3)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("it ")]
    assert len(lines) == 3 and lines[-1].startswith("it    3/3 | reward") and "steps/s | ETA" in lines[-1], out
    block = _runner(log_dir=str(tmp_path / "block"), save_interval=2, progress="block")
    capsys.readouterr()
    block.learn(3)
    out = capsys.readouterr().out
    for text in ("Learning iteration 2/3", "Steps per second", "Mean actor loss", "Mean critic loss",
                 "Mean reward", "Mean episode length", "ETA", "Policy/actor_grad_norm", "Value/estimate",
                 "Loss/critic_learning_rate", "Train/skipped_actor_updates"):
        assert text in out, text
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(log_dir, "model_*.pt"))) == [
        "model_2.pt", "model_3.pt"]
    assert get_checkpoint_path(str(tmp_path), "run", r"model_.*\.pt").endswith("model_3.pt")
    acc = EventAccumulator(log_dir)
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in ("Train/mean_reward", "Train/mean_episode_length", "Loss/actor", "Loss/critic", "Loss/learning_rate",
                "Loss/critic_learning_rate", "Policy/actor_grad_norm", "Value/estimate", "Value/target",
                "Perf/total_fps", "Train/skipped_actor_updates", "Train/skipped_critic_updates"):
        assert tag in tags, tag


def test_linear_learning_rate_schedule():
    runner = _runner()
    alg = runner.alg
    alg.set_learning_rates(0)
    assert alg.learning_rate == pytest.approx(2e-3) and alg.critic_learning_rate == pytest.approx(2e-3)
    alg.set_learning_rates(10)  # half of max_iterations = 20
    assert alg.learning_rate == pytest.approx(0.5 * (2e-3 + 1e-5))
    alg.set_learning_rates(20)
    assert alg.learning_rate == pytest.approx(1e-5)


def test_exported_jit_and_onnx_match_torch_policy(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    runner = _runner()
    _quiet(runner.learn, 2)  # non-trivial normaliser statistics and weights
    policy = runner.get_inference_policy()
    obs = torch.randn(17, 6) * 3.0
    with torch.no_grad():
        expected = torch.tanh(policy.mlp(policy.obs_normalizer(obs)))
        via_td = policy(TensorDict({"policy": obs}, batch_size=[17]))
    torch.testing.assert_close(expected, via_td)
    assert expected.abs().max() < 1.0
    jit_path = runner.export_policy_to_jit(str(tmp_path))
    onnx_path = runner.export_policy_to_onnx(str(tmp_path))
    jit_policy = torch.jit.load(jit_path)
    torch.testing.assert_close(jit_policy(obs), expected, rtol=1e-6, atol=1e-6)
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    (onnx_out,) = session.run(["actions"], {"obs": obs.numpy()})
    np.testing.assert_allclose(onnx_out, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_make_runner_selects_ppo_and_ppo_runs_on_the_differentiable_env():
    from rsl_rl.runners import OnPolicyRunner

    torch.manual_seed(0)
    env = PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=8))
    cfg = PPORunnerCfg(num_steps_per_env=8)
    runner = _quiet(build_ppo_runner, env, cfg)
    assert isinstance(runner, OnPolicyRunner)
    _quiet(runner.learn, 2)
    shac = _quiet(make_runner, PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=8)), _cfg())
    assert isinstance(shac, SHACRunner)
    with pytest.raises(ValueError):
        _quiet(build_ppo_runner, env, _cfg())


def test_shac_runner_rejects_non_differentiable_env():
    class Plain:
        num_envs = 2

    with pytest.raises(TypeError, match="differentiable"):
        SHACRunner(Plain(), _cfg().to_dict())


def test_action_limit_bounds_samples_log_prob_and_export(tmp_path):
    """``action_limit`` L: actions L·tanh(u/L) — bounded by L, identity near 0, log-density by change of variables,
    the same map in TorchScript and ONNX, and a clear error for a bad limit."""
    from diffloco_ext.learning.models import SquashedGaussianDistribution

    dist = SquashedGaussianDistribution(3, action_limit=2.5, init_std=3.0, std_type="log")
    mean = torch.tensor([[0.0, 4.0, -9.0]]).repeat(4000, 1)
    dist.update(mean)
    samples = dist.sample()
    assert samples.abs().max() < 2.5 and samples.abs().max() > 2.0  # the bound acts and is not 1
    torch.testing.assert_close(dist.deterministic_output(torch.tensor([1e-3, 40.0])), torch.tensor([1e-3, 2.5]),
                               rtol=1e-5, atol=1e-6)
    # log-density of a = L tanh(u / L): log N(u) - log(1 - (a/L)^2), checked against autograd's Jacobian
    u = torch.tensor([[0.3, 1.7, -2.2]], dtype=torch.float64, requires_grad=True)
    d64 = SquashedGaussianDistribution(3, action_limit=2.5, init_std=0.7, std_type="log").double()
    d64.update(torch.zeros(1, 3, dtype=torch.float64))
    a = 2.5 * torch.tanh(u / 2.5)
    jac = torch.autograd.grad(a.sum(), u)[0]
    expected = (torch.distributions.Normal(0.0, 0.7).log_prob(u) - torch.log(jac)).sum()
    torch.testing.assert_close(d64.log_prob(a.detach()), expected.detach().expand(1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="action_limit"):
        SquashedGaussianDistribution(3, action_limit=0.0)

    ort = pytest.importorskip("onnxruntime")
    cfg = _cfg()
    cfg.actor.distribution_cfg.action_limit = 3.0
    torch.manual_seed(0)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=3, max_episode_length=12))
    runner = _quiet(make_runner, env, cfg, None)
    policy = runner.get_inference_policy()
    with torch.no_grad():  # outputs beyond 1 so that a plain tanh would differ
        policy.mlp[-1].bias.fill_(5.0)
        obs = torch.randn(9, 6)
        expected = 3.0 * torch.tanh(policy.mlp(policy.obs_normalizer(obs)) / 3.0)
    assert expected.min() > 1.2
    jit_policy = torch.jit.load(runner.export_policy_to_jit(str(tmp_path)))
    torch.testing.assert_close(jit_policy(obs), expected, rtol=1e-6, atol=1e-6)
    session = ort.InferenceSession(runner.export_policy_to_onnx(str(tmp_path)), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["actions"], {"obs": obs.numpy()})[0], expected.numpy(), rtol=1e-5,
                               atol=1e-5)


def test_the_action_limit_travels_with_the_checkpoint(tmp_path, capsys):
    """A checkpoint trained with limit 3 loaded into a runner whose config says 1 acts (and exports) with 3; a
    checkpoint saved without the buffer keeps the config's limit."""
    cfg = _cfg()
    cfg.actor.distribution_cfg.action_limit = 3.0
    torch.manual_seed(0)
    trained = _quiet(make_runner, PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=3, max_episode_length=12)), cfg,
                     None)
    with torch.no_grad():
        trained.alg.actor.mlp[-1].bias.fill_(5.0)
    path = str(tmp_path / "model_0.pt")
    trained.save(path)
    plain = _runner()
    plain.load(path)
    assert "action limit 3 replaces the config's 1" in capsys.readouterr().out
    obs = plain.env.get_observations()
    with torch.no_grad():
        torch.testing.assert_close(plain.get_inference_policy()(obs), trained.get_inference_policy()(obs))
    assert float(plain.get_inference_policy()(obs).max()) > 1.2
    jit = torch.jit.load(plain.export_policy_to_jit(str(tmp_path)))
    assert float(jit(torch.randn(4, 6)).max()) > 1.2
    old = torch.load(path, weights_only=False)
    del old["actor_state_dict"]["distribution._squash.limit"]
    torch.save(old, str(tmp_path / "old.pt"))
    fresh = _runner()
    fresh.load(str(tmp_path / "old.pt"))
    assert fresh.alg.actor.distribution.action_limit == 1.0
