"""SHAC's mirror loss (``agent.algorithm.symmetry_cfg``, rsl_rl's symmetry extension): its value is the definition,
its gradient w.r.t. the actor's weights matches float64 finite differences, a few iterations with it leave a more
symmetric policy than without, and bad settings are clear errors.

The toy: the point mass is symmetric under the reflection of its first coordinate (position, velocity and force
change sign together)."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning import SHACRunnerCfg, make_runner
from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv
from diffloco_ext.tasks.cfg_override import apply_overrides, parse_overrides

from .shac_rollout import run_horizon

DIM = 3


def mirror_first_axis(env=None, obs=None, actions=None):
    """rsl_rl's signature: the batch and its reflection ``x_0 -> -x_0`` (positions, velocities, forces)."""
    sign_obs = torch.ones(2 * DIM)
    sign_obs[0] = sign_obs[DIM] = -1.0
    sign_act = torch.ones(DIM)
    sign_act[0] = -1.0
    out_obs = None if obs is None else TensorDict(
        {k: torch.cat([v, v * sign_obs.to(v.dtype)]) for k, v in obs.items()}, batch_size=[2 * obs.batch_size[0]])
    out_act = None if actions is None else torch.cat([actions, actions * sign_act.to(actions.dtype)])
    return out_obs, out_act


def _runner(coeff: float | None, seed: int = 0, **symmetry):
    torch.manual_seed(seed)
    env = PointMassEnv(PointMassCfg(num_envs=16, seed=0, dim=DIM))
    cfg = SHACRunnerCfg(num_steps_per_env=8, max_iterations=50)
    cfg.algorithm.num_critic_epochs = 2
    if coeff is not None:
        cfg.algorithm.symmetry_cfg = {"use_mirror_loss": True, "mirror_loss_coeff": coeff,
                                      "data_augmentation_func": mirror_first_axis, **symmetry}
    with contextlib.redirect_stdout(io.StringIO()):
        runner = make_runner(env, cfg)
    return env, runner


def _manual_loss(actor, obs: torch.Tensor, target: torch.Tensor | None = None) -> torch.Tensor:
    """mean((pi(M o) - M pi(o))^2), the second term held at ``target`` if given."""
    mirrored, _ = mirror_first_axis(obs=TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))
    both = actor(mirrored)
    n = obs.shape[0]
    if target is None:
        _, target = mirror_first_axis(actions=both[:n])
        target = target[n:].detach()
    return (both[n:] - target).pow(2).mean()


def test_the_mirror_loss_is_its_definition_and_enters_the_actor_loss():
    env, runner = _runner(0.5)
    alg = runner.alg
    run_horizon(env, alg)
    obs = torch.stack(alg._obs).flatten(0, 1)["policy"]
    value = alg._symmetry_loss()
    assert value > 0  # a random network is not symmetric
    torch.testing.assert_close(value, _manual_loss(alg.actor, obs))
    _, plain = _runner(None)
    assert plain.alg.symmetry is None
    losses = alg.update()
    assert losses["symmetry"] == pytest.approx(float(value.detach()), rel=1e-5)


def test_the_mirror_loss_gradient_matches_finite_differences_in_float64():
    env, runner = _runner(1.0)
    alg = runner.alg
    run_horizon(env, alg)
    alg.actor.double()
    alg._obs = [o.apply(lambda t: t.double()) for o in alg._obs]
    obs = torch.stack(alg._obs).flatten(0, 1)["policy"]
    weight = dict(alg.actor.named_parameters())["mlp.0.weight"]
    value = alg._symmetry_loss()
    (grad,) = torch.autograd.grad(value, [weight])
    with torch.no_grad():  # rsl_rl holds the mirrored action fixed: differences of the loss with that target fixed
        n = obs.shape[0]
        _, target = mirror_first_axis(actions=alg.actor(TensorDict({"policy": obs}, batch_size=[n])))
        target = target[n:]
    for i, j in [(0, 0), (5, 1), (20, 2 * DIM - 1)]:
        h = 1e-6
        with torch.no_grad():
            weight[i, j] += h
            up = _manual_loss(alg.actor, obs, target)
            weight[i, j] -= 2 * h
            down = _manual_loss(alg.actor, obs, target)
            weight[i, j] += h
        assert float(grad[i, j]) == pytest.approx(float((up - down) / (2 * h)), rel=1e-5, abs=1e-10)


def test_training_with_the_mirror_loss_leaves_a_more_symmetric_policy():
    def symmetry_after(coeff):
        env, runner = _runner(coeff, seed=1)
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(30)
        run_horizon(env, runner.alg)
        obs = torch.stack(runner.alg._obs).flatten(0, 1)["policy"]
        return float(_manual_loss(runner.alg.actor, obs))

    assert symmetry_after(10.0) < 0.3 * symmetry_after(0.0)


def test_bad_symmetry_settings_are_clear_errors():
    with pytest.raises(ValueError, match="no sample batch"):
        _runner(1.0, use_data_augmentation=True)
    with pytest.raises(ValueError, match="unknown keys"):
        _runner(1.0, mirror_coeff=1.0)
    with pytest.raises(ValueError, match="mirror_loss_coeff"):
        _runner(-1.0)
    with pytest.raises(ValueError, match="data_augmentation_func"):
        _runner(1.0, data_augmentation_func=None)


def test_the_cli_sets_it_as_isaac_labs_symmetry_cfg():
    cfg = SHACRunnerCfg()
    overrides = parse_overrides(["agent.algorithm.symmetry_cfg={use_mirror_loss: true, mirror_loss_coeff: 0.1, "
                                 "data_augmentation_func: 'diffloco_ext.tasks.velocity.symmetry:left_right_augmentation'}"])
    apply_overrides(cfg, overrides["agent"], "agent")
    assert cfg.algorithm.symmetry_cfg == {"use_mirror_loss": True, "mirror_loss_coeff": 0.1, "data_augmentation_func":
                                          "diffloco_ext.tasks.velocity.symmetry:left_right_augmentation"}


def test_ppo_takes_the_same_setting_with_the_velocity_tasks_mirror(tmp_path):
    """rsl_rl's PPO with mirrored samples and the mirror loss on the velocity task (both observation groups,
    the privileged critic's too, go through the task's mirror); the loss is logged."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ..script_modules import load_script

    with contextlib.redirect_stdout(io.StringIO()):
        run = load_script("train").main([
            "--task", "DiffLoco-Velocity-Flat-AnymalD", "--algo", "ppo", "--num_envs", "8", "--max_iterations", "2",
            "--log_root", str(tmp_path),
            "agent.algorithm.symmetry_cfg={use_data_augmentation: true, use_mirror_loss: true, mirror_loss_coeff: 0.5, "
            "data_augmentation_func: 'diffloco_ext.tasks.velocity.symmetry:left_right_augmentation'}"])
    acc = EventAccumulator(run)
    acc.Reload()
    values = [e.value for e in acc.Scalars("Loss/symmetry")]
    assert len(values) == 2 and all(v > 0 for v in values)
