"""SHAC's exploration noise set once at the env's curriculum's end (``agent.algorithm.action_std_at_curriculum_end``),
learnt on from there, not set again after a resume; bad values are errors."""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning import SHACRunnerCfg, make_runner
from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv


def _runner(at_end=None, init_std=0.02):
    torch.manual_seed(0)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=4))
    cfg = SHACRunnerCfg(num_steps_per_env=8, max_iterations=50)
    cfg.actor.distribution_cfg.init_std = init_std
    cfg.algorithm.num_critic_epochs = 2
    cfg.algorithm.action_std_at_curriculum_end = at_end
    with contextlib.redirect_stdout(io.StringIO()):
        runner = make_runner(env, cfg)
    return env, runner


def _scatter(alg, obs: TensorDict) -> tuple[float, torch.Tensor]:
    """The std of the rollout's actions around the deterministic one (before the squash), and the deterministic
    action."""
    with torch.no_grad():
        det = alg.actor(obs)
        samples = alg.actor(obs.expand(4000).clone(), stochastic_output=True)
    L = alg.actor.distribution.action_limit
    pre = lambda a: L * torch.atanh(a / L)  # noqa: E731  (before the squash)
    return float((pre(samples) - pre(det)).std()), det


def test_the_std_set_at_the_curriculums_end_is_learnt_on_and_not_set_again():
    env, runner = _runner(at_end=0.25)
    alg = runner.alg
    obs = env.get_observations()[:1]
    alg.set_learning_rates(0, 0.5)  # curriculum running: the learnt std
    assert _scatter(alg, obs)[0] == pytest.approx(0.02, rel=0.1)
    alg.set_learning_rates(7, 1.0)  # curriculum done: set once
    assert _scatter(alg, obs)[0] == pytest.approx(0.25, rel=0.1)
    assert alg.action_std_set_iteration == 7
    dist = alg.actor.distribution
    param = dist.std_param if dist.std_type == "scalar" else dist.log_std_param
    assert param.requires_grad  # learnt on (no clamp holds it)
    with torch.no_grad():  # as if learnt down to half
        if dist.std_type == "scalar":
            param.mul_(0.5)
        else:
            param.sub_(math.log(2.0))
    alg.set_learning_rates(8, 1.0)
    assert _scatter(alg, obs)[0] == pytest.approx(0.125, rel=0.1)  # not set again
    # a resumed run (the checkpoint carries the iteration it was set at) keeps the learnt std
    state = alg.save()
    assert state["action_std_set_iteration"] == 7
    env2, runner2 = _runner(at_end=0.25)
    runner2.alg.load(state, None, strict=True)
    runner2.alg.set_learning_rates(9, 1.0)
    assert _scatter(runner2.alg, obs)[0] == pytest.approx(0.125, rel=0.1)
    for bad in (0.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="action_std_at_curriculum_end"):
            _runner(at_end=bad)
