"""SHAC's Lipschitz penalty ``λ·E_o‖∂a/∂o‖²_F`` (``agent.algorithm.lipschitz_penalty``).

The estimate is unbiased for the exact Jacobian norm (checked against ``torch.autograd.functional.jacobian``),
differentiable w.r.t. the actor's weights (float64 finite differences), added to the actor loss with its weight,
and it does what it is for: a few iterations with it leave a smaller policy Jacobian than without."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning import SHACRunnerCfg, make_runner
from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv

from .shac_rollout import run_horizon


def _runner(penalty: float, samples: int = 64, seed: int = 0):
    torch.manual_seed(seed)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=4))
    cfg = SHACRunnerCfg(num_steps_per_env=8, max_iterations=50)
    cfg.algorithm.num_critic_epochs = 2
    cfg.algorithm.lipschitz_penalty = penalty
    cfg.algorithm.lipschitz_samples = samples
    with contextlib.redirect_stdout(io.StringIO()):
        runner = make_runner(env, cfg)
    return env, runner


def _exact_jacobian_norm(actor, obs: TensorDict) -> torch.Tensor:
    group = actor.obs_groups[0]
    x = obs[group]

    def act(row: torch.Tensor) -> torch.Tensor:
        return actor(TensorDict({group: row[None]}, batch_size=[1]))[0]

    return torch.stack([torch.autograd.functional.jacobian(act, x[i]).pow(2).sum() for i in range(x.shape[0])]).mean()


def test_the_estimate_is_unbiased_for_the_jacobian_norm():
    env, runner = _runner(1.0, samples=64)
    alg = runner.alg
    run_horizon(env, alg)
    obs = torch.stack(alg._obs).flatten(0, 1)  # 64 observations: the estimate uses all of them
    exact = _exact_jacobian_norm(alg.actor, obs)
    torch.manual_seed(3)
    estimates = torch.stack([alg._lipschitz_estimate().detach() for _ in range(400)])
    assert exact > 0
    assert estimates.mean() == pytest.approx(float(exact), rel=0.05)


def test_the_penalty_gradient_matches_finite_differences_in_float64():
    env, runner = _runner(1.0, samples=16)
    alg = runner.alg
    run_horizon(env, alg)
    alg.actor.double()
    alg._obs = [o.apply(lambda t: t.double()) for o in alg._obs]
    weight_name = "mlp.0.weight"
    weight = dict(alg.actor.named_parameters())[weight_name]

    # the estimate's parameter gradient, against central differences of the estimate itself (fixed draws)
    torch.manual_seed(7)
    value = alg._lipschitz_estimate()
    (grad,) = torch.autograd.grad(value, [weight])
    rows = [(0, 0), (3, 1), (100, weight.shape[1] - 1)]
    for i, j in rows:
        h = 1e-6
        with torch.no_grad():
            weight[i, j] += h
        torch.manual_seed(7)
        up = alg._lipschitz_estimate().detach()
        with torch.no_grad():
            weight[i, j] -= 2 * h
        torch.manual_seed(7)
        down = alg._lipschitz_estimate().detach()
        with torch.no_grad():
            weight[i, j] += h
        fd = (up - down) / (2 * h)
        assert float(grad[i, j]) == pytest.approx(float(fd), rel=1e-5, abs=1e-8), (i, j)


def test_the_penalty_is_added_to_the_actor_loss_with_its_weight():
    losses = {}
    for penalty in (0.0, 2.0):
        env, runner = _runner(penalty, samples=64)
        alg = runner.alg
        run_horizon(env, alg)
        torch.manual_seed(11)
        expected_penalty = float(alg._lipschitz_estimate()) if penalty else 0.0
        objective = float(alg._objective) / (8 * 8)
        torch.manual_seed(11)
        out = alg.update()
        losses[penalty] = (out["actor"], -objective + penalty * expected_penalty)
        if penalty:
            assert out["policy_lipschitz"] == pytest.approx(expected_penalty, rel=1e-6)
        else:
            assert "policy_lipschitz" not in out  # not computed
    for actor_loss, expected in losses.values():
        assert actor_loss == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_training_with_the_penalty_leaves_a_smoother_policy():
    norms = {}
    for penalty in (0.0, 0.5):
        env, runner = _runner(penalty, samples=64, seed=0)
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(15)
        alg = runner.alg
        run_horizon(env, alg)
        obs = torch.stack(alg._obs).flatten(0, 1)
        norms[penalty] = float(_exact_jacobian_norm(alg.actor, obs.detach()))
        alg._reset_rollout()
    assert norms[0.5] < 0.5 * norms[0.0], norms


def test_bad_penalties_are_errors():
    for penalty, samples in ((-1.0, 8), (float("nan"), 8), (0.1, 0)):
        with pytest.raises(ValueError, match="lipschitz"):
            _runner(penalty, samples=samples)


def test_after_curriculum_the_penalty_waits_for_the_curriculum():
    env, runner = _runner(2.0, samples=64)
    alg = runner.alg
    alg.lipschitz_after_curriculum = True
    for progress, active in ((0.0, False), (0.99, False), (1.0, True)):
        alg.set_learning_rates(0, progress)
        assert alg.lipschitz_active is active
        run_horizon(env, alg)
        objective = float(alg._objective) / (8 * 8)
        out = alg.update()
        if active:
            assert out["policy_lipschitz"] > 0 and out["actor"] > -objective
        else:
            assert "policy_lipschitz" not in out
            assert out["actor"] == pytest.approx(-objective, rel=1e-6, abs=1e-9)

