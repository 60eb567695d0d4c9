"""SHAC algorithm: TD(λ) targets, the actor objective at terminations/time-outs, NaN handling, learning."""

import contextlib
import io

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning import SHACRunnerCfg, make_runner, td_lambda_targets
from diffloco_ext.learning.env import FINAL_OBS_KEY, TIME_OUTS_KEY, DiffVecEnv
from diffloco_ext.learning.evaluate import evaluate_return
from diffloco_ext.learning.toy_envs import PendulumSwingUpCfg, PendulumSwingUpEnv, PointMassCfg, PointMassEnv


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


# ---- TD(λ) -------------------------------------------------------------------------------------------------------
def test_td_lambda_limits_and_cuts():
    g = torch.Generator().manual_seed(0)
    h, n, gamma = 5, 3, 0.9
    r = torch.rand(h, n, generator=g)
    v = torch.rand(h, n, generator=g)
    no_done = torch.zeros(h, n, dtype=torch.bool)
    # λ = 0: one-step TD targets.
    torch.testing.assert_close(td_lambda_targets(r, v, no_done, gamma, 0.0), r + gamma * v)
    # λ = 1: discounted Monte-Carlo return bootstrapped with the last value.
    mc = torch.empty_like(r)
    ret = v[-1]
    for t in reversed(range(h)):
        ret = r[t] + gamma * ret
        mc[t] = ret
    torch.testing.assert_close(td_lambda_targets(r, v, no_done, gamma, 1.0), mc)
    # A done at step 2 cuts the return: targets before it only see rewards up to step 2 and v[2].
    done = no_done.clone()
    done[2] = True
    out = td_lambda_targets(r, v, done, gamma, 1.0)
    torch.testing.assert_close(out[2], r[2] + gamma * v[2])
    torch.testing.assert_close(out[0], r[0] + gamma * r[1] + gamma**2 * (r[2] + gamma * v[2]))
    torch.testing.assert_close(out[3:], mc[3:])


def test_td_lambda_hand_computed():
    r = torch.tensor([[1.0], [2.0]])
    v = torch.tensor([[10.0], [20.0]])
    done = torch.zeros(2, 1, dtype=torch.bool)
    gamma, lam = 0.5, 0.5
    g1 = 2.0 + 0.5 * 20.0                                  # last step: r + γ v
    g0 = 1.0 + 0.5 * ((1 - lam) * 10.0 + lam * g1)
    torch.testing.assert_close(td_lambda_targets(r, v, done, gamma, lam), torch.tensor([[g0], [g1]]))


# ---- actor objective --------------------------------------------------------------------------------------------
class _ScheduledEnv(DiffVecEnv):
    """Reward = action (so the objective is differentiable); dones follow a fixed schedule.

    ``schedule[t][i]`` is ``None`` (running), ``"term"`` or ``"timeout"`` for env i after step t.
    """

    def __init__(self, schedule, num_envs):
        self.num_envs, self.num_actions, self.max_episode_length = num_envs, 1, 1000
        self.device, self.cfg = torch.device("cpu"), {}
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.schedule, self.t = schedule, 0

    def get_observations(self):
        return TensorDict({"policy": torch.zeros(self.num_envs, 2)}, batch_size=[self.num_envs])

    def detach_state(self):
        pass

    def step(self, actions):
        status = self.schedule[self.t]
        self.t += 1
        dones = torch.tensor([s is not None for s in status], dtype=torch.long)
        time_outs = torch.tensor([s == "timeout" for s in status])
        obs = self.get_observations()
        return obs, actions[:, 0] * 0 + 1.0 + actions[:, 0], dones, {TIME_OUTS_KEY: time_outs, FINAL_OBS_KEY: obs}


def _constant_critic_runner(env, h, gamma, c):
    cfg = SHACRunnerCfg(num_steps_per_env=h)
    cfg.algorithm.gamma = gamma
    runner = _quiet(make_runner, env, cfg)
    alg = runner.alg
    with torch.no_grad():  # constant target critic, zero-mean actions
        last = alg.target_critic.mlp[-1]
        last.weight.zero_()
        last.bias.fill_(c)
        alg.actor.mlp[-1].weight.zero_()
        alg.actor.mlp[-1].bias.zero_()
        alg.actor.distribution.log_std_param.fill_(-30.0)
    return runner


def test_actor_objective_terminations_timeouts_and_horizon_end():
    """Rewards 1 (+ action ≈ 0), target critic ≡ c: check the accumulated objective against the formula."""
    h, gamma, c = 4, 0.5, 3.0
    schedule = [[None, None, None], [None, "term", "timeout"], [None, None, None], [None, None, None]]
    env = _ScheduledEnv(schedule, 3)
    alg = _constant_critic_runner(env, h, gamma, c).alg
    obs = env.get_observations()
    for _ in range(h):
        actions = alg.act(obs)
        obs, r, d, extras = env.step(actions)
        alg.process_env_step(obs, r, d, extras)
    alg.compute_returns(obs)
    seg = lambda k: sum(gamma**i for i in range(k))  # noqa: E731  (k rewards of 1)
    env0 = seg(4) + gamma**4 * c                       # never done: bootstrap V(s_h)
    env1 = seg(2) + 0.0 + seg(2) + gamma**2 * c        # termination after step 1: V = 0, then a new segment
    env2 = seg(2) + gamma**2 * c + seg(2) + gamma**2 * c  # time-out after step 1: bootstrap, new segment
    torch.testing.assert_close(alg._objective.detach(), torch.tensor(env0 + env1 + env2), rtol=1e-5, atol=1e-5)
    # Critic targets: V = 0 after the termination, bootstrap after the time-out (λ irrelevant at a done).
    targets = alg._targets
    torch.testing.assert_close(targets[1, 1], torch.tensor(1.0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(targets[1, 2], torch.tensor(1.0 + gamma * c), rtol=1e-5, atol=1e-5)
    losses = alg.update()
    assert losses["actor"] == pytest.approx(-(env0 + env1 + env2) / (h * 3), rel=1e-5)


def test_reset_on_the_last_step_of_a_horizon_is_not_bootstrapped():
    """An env terminated on the horizon's last step closed its segment there: the horizon end must not add the
    critic's value of its reset state (the old code added V'(s_reset): 4.875 instead of 1.875)."""
    h, gamma, c = 4, 0.5, 3.0
    env = _ScheduledEnv([[None], [None], [None], ["term"]], 1)
    alg = _constant_critic_runner(env, h, gamma, c).alg
    obs = env.get_observations()
    for _ in range(h):
        obs, r, d, extras = env.step(alg.act(obs))
        alg.process_env_step(obs, r, d, extras)
    alg.compute_returns(obs)
    torch.testing.assert_close(alg._objective.detach(), torch.tensor(1.875), rtol=1e-5, atol=1e-5)


class _FillerEnv(_ScheduledEnv):
    """Observations differ per env; the final observations hold the pre-reset observation (``-obs``) in the done
    rows and a filler elsewhere (allowed by the env contract), or NaN in a chosen place."""

    filler, nan_row = 100.0, None

    def get_observations(self):
        return TensorDict({"policy": torch.arange(self.num_envs, dtype=torch.float32)[:, None].repeat(1, 2) + 1.0},
                          batch_size=[self.num_envs])

    def step(self, actions):
        obs, r, d, extras = super().step(actions)
        final = obs["policy"].clone()
        final[d.bool()] *= -1.0
        final[~d.bool()] = self.filler
        if self.nan_row is not None:
            final[self.nan_row] = float("nan")
        extras[FINAL_OBS_KEY] = TensorDict({"policy": final}, batch_size=[self.num_envs])
        return obs, r, d, extras


def test_critic_next_values_are_selected_per_row():
    env = _FillerEnv([[None, "timeout", None]], 3)
    runner = _quiet(make_runner, env, SHACRunnerCfg(num_steps_per_env=1))
    alg = runner.alg
    obs = env.get_observations()
    obs2, r, d, extras = env.step(alg.act(obs))
    alg.process_env_step(obs2, r, d, extras)
    with torch.no_grad():
        expected = alg.target_critic(obs2).squeeze(-1)
        expected[1] = alg.target_critic(extras[FINAL_OBS_KEY][1:2]).squeeze()
    torch.testing.assert_close(alg._next_values[0], expected)
    assert (expected[0] - alg.target_critic(extras[FINAL_OBS_KEY][0:1]).squeeze()).abs() > 1e-6  # the probe bites


def test_non_finite_final_observation_of_a_done_env_is_a_clear_error():
    env = _FillerEnv([[None, "timeout", None], [None, "timeout", None]], 3)
    runner = _quiet(make_runner, env, SHACRunnerCfg(num_steps_per_env=2))
    alg = runner.alg
    env.nan_row = 0  # a row that is not done: filler, ignored
    obs = env.get_observations()
    obs, r, d, extras = env.step(alg.act(obs))
    alg.process_env_step(obs, r, d, extras)
    env.nan_row = 1  # the done row
    obs, r, d, extras = env.step(alg.act(obs))
    with pytest.raises(ValueError, match="not finite for an env that is done"):
        alg.process_env_step(obs, r, d, extras)


def test_observation_normalisation_is_frozen_within_an_iteration():
    """As DiffRL: the statistics the rollout normalises with stay fixed until the update folds the iteration's
    observations in."""
    env = _FillerEnv([[None, None, None]] * 3, 3)
    cfg = SHACRunnerCfg(num_steps_per_env=3)
    cfg.actor.obs_normalization = cfg.critic.obs_normalization = True
    alg = _quiet(make_runner, env, cfg).alg
    before = {k: v.clone() for k, v in alg.actor.state_dict().items() if "normalizer" in k}
    assert before, "the actor has no observation normaliser: the check would be empty"
    obs = env.get_observations()
    for _ in range(3):
        obs, r, d, extras = env.step(alg.act(obs))
        alg.process_env_step(obs, r, d, extras)
        now = alg.actor.state_dict()
        assert all(torch.equal(now[k], v) for k, v in before.items())
    alg.compute_returns(obs)
    alg.update()
    now = alg.actor.state_dict()
    assert any(not torch.equal(now[k], v) for k, v in before.items())


# ---- NaN handling -----------------------------------------------------------------------------------------------
class _NaNGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


class _PoisonedPendulum(PendulumSwingUpEnv):
    """Pendulum whose reward gradient is NaN while ``poison`` is set (forward values unchanged)."""

    poison = False

    def step(self, actions):
        obs, r, d, extras = super().step(actions)
        return obs, (_NaNGrad.apply(r) if self.poison else r), d, extras


def _small_cfg(**kw):
    cfg = SHACRunnerCfg(num_steps_per_env=8, max_iterations=50, **kw)
    cfg.algorithm.num_critic_epochs = 2
    return cfg


def test_nan_gradient_skips_update_and_training_continues():
    torch.manual_seed(0)
    env = _PoisonedPendulum(PendulumSwingUpCfg(num_envs=8))
    runner = _quiet(make_runner, env, _small_cfg())
    _quiet(runner.learn, 1)
    before = [p.detach().clone() for p in runner.alg.actor.parameters()]
    env.poison = True
    _quiet(runner.learn, 1)
    assert runner.last_loss_dict["skipped_actor_update"] == 1.0
    assert runner.alg.skipped_actor_updates == 1
    assert runner.last_loss_dict["actor_grad_norm"] != runner.last_loss_dict["actor_grad_norm"]  # NaN logged
    for b, p in zip(before, runner.alg.actor.parameters()):
        assert torch.equal(b, p.detach())
    env.poison = False
    _quiet(runner.learn, 1)
    assert runner.last_loss_dict["skipped_actor_update"] == 0.0 and runner.alg.skipped_actor_updates == 1
    assert any(not torch.equal(b, p.detach()) for b, p in zip(before, runner.alg.actor.parameters()))
    assert all(torch.isfinite(p).all() for p in runner.alg.actor.parameters())


class _NaNRewardPendulum(PendulumSwingUpEnv):
    def step(self, actions):
        obs, r, d, extras = super().step(actions)
        return obs, r * float("nan"), d, extras


def test_nan_from_env_is_a_clear_error():
    env = _NaNRewardPendulum(PendulumSwingUpCfg(num_envs=4))
    runner = _quiet(make_runner, env, _small_cfg())
    with pytest.raises(ValueError, match="rewards"):
        _quiet(runner.learn, 1)


def test_skip_counts_nonfinite_loss_without_env_check():
    """With ``check_for_nan`` off, a NaN reward makes the actor loss NaN: the update is skipped, not applied."""
    env = _NaNRewardPendulum(PendulumSwingUpCfg(num_envs=4))
    runner = _quiet(make_runner, env, _small_cfg(check_for_nan=False))
    before = [p.detach().clone() for p in runner.alg.actor.parameters()]
    _quiet(runner.learn, 1)
    assert runner.alg.skipped_actor_updates == 1
    assert runner.alg.skipped_critic_updates == runner.alg.num_critic_epochs * runner.alg.num_critic_mini_batches
    for b, p in zip(before, runner.alg.actor.parameters()):
        assert torch.equal(b, p.detach())


def _actor_objective_and_gradient(scale: float, critic_seed: int):
    """One 8-step horizon of the point mass from fixed states: the actor objective and its gradient, with the
    target critic's weights drawn from ``critic_seed``."""
    torch.manual_seed(0)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=4))
    cfg = _small_cfg()
    cfg.algorithm.value_gradient_scale = scale
    runner = _quiet(make_runner, env, cfg)
    alg = runner.alg
    generator = torch.Generator().manual_seed(critic_seed)
    with torch.no_grad():
        for p in alg.target_critic.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    obs = env.get_observations()
    torch.manual_seed(1)
    for _ in range(8):
        obs, r, d, extras = env.step(alg.act(obs))
        alg.process_env_step(obs, r, d, extras)
    alg.compute_returns(obs)
    grads = torch.autograd.grad(alg._objective, list(alg.actor.parameters()))
    return alg._objective.detach(), torch.cat([g.flatten() for g in grads])


def test_value_gradient_scale_zero_lets_no_gradient_through_the_bootstrap_values():
    """``value_gradient_scale = 0``: the objective keeps the bootstrap values (its value changes with the critic)
    but its actor gradient does not depend on the critic; at 1 (SHAC) it does; in between it is the mix."""
    value_a, grad_a = _actor_objective_and_gradient(0.0, critic_seed=1)
    value_b, grad_b = _actor_objective_and_gradient(0.0, critic_seed=2)
    assert not torch.isclose(value_a, value_b)
    torch.testing.assert_close(grad_a, grad_b)
    value_1, grad_1 = _actor_objective_and_gradient(1.0, critic_seed=1)
    _, grad_1b = _actor_objective_and_gradient(1.0, critic_seed=2)
    assert torch.isclose(value_1, value_a) and (grad_1 - grad_1b).norm() > 1e-3 * grad_1.norm()
    _, grad_half = _actor_objective_and_gradient(0.5, critic_seed=1)
    torch.testing.assert_close(grad_half, 0.5 * (grad_a + grad_1))
    with pytest.raises(ValueError, match="value_gradient_scale"):
        _actor_objective_and_gradient(1.5, critic_seed=1)


def test_value_gradient_scale_ramps_between_its_iterations():
    """With ``value_gradient_scale_final`` the weight is the initial one up to the ramp's start, linear on the ramp,
    the final one from its end on (the runner applies the schedules every iteration); a bad ramp or weight is an
    error."""
    env = PointMassEnv(PointMassCfg(num_envs=4, seed=0, dim=2))
    cfg = _small_cfg()
    cfg.algorithm.value_gradient_scale = 0.2
    cfg.algorithm.value_gradient_scale_final = 1.0
    cfg.algorithm.value_gradient_ramp = (10, 20)
    alg = _quiet(make_runner, env, cfg).alg
    for iteration, expected in ((0, 0.2), (10, 0.2), (15, 0.6), (20, 1.0), (500, 1.0)):
        alg.set_learning_rates(iteration)
        assert alg.value_gradient_scale == pytest.approx(expected)
    cfg.algorithm.value_gradient_ramp = (3, 1)
    with pytest.raises(ValueError, match="value_gradient_ramp"):
        _quiet(make_runner, env, cfg)
    cfg.algorithm.value_gradient_ramp = (0, 0)
    cfg.algorithm.value_gradient_scale_final = 2.0
    with pytest.raises(ValueError, match="value_gradient_scale_final"):
        _quiet(make_runner, env, cfg)


def test_value_gradient_ramp_from_the_curriculum_end_waits_for_the_curriculum(tmp_path):
    """``value_gradient_ramp_from="curriculum_end"``: the ramp counts from the first iteration at which the env's
    ``curriculum_progress`` reaches 1 (read by the runner every iteration), the weight stays initial until then,
    and that iteration survives a checkpoint round trip (a resumed run does not restart the ramp)."""
    env = PointMassEnv(PointMassCfg(num_envs=4, seed=0, dim=2))
    cfg = _small_cfg()
    cfg.algorithm.value_gradient_scale = 0.2
    cfg.algorithm.value_gradient_scale_final = 1.0
    cfg.algorithm.value_gradient_ramp = (10, 20)
    cfg.algorithm.value_gradient_ramp_from = "curriculum_end"
    runner = _quiet(make_runner, env, cfg, str(tmp_path))
    alg = runner.alg
    for iteration, progress, expected in ((0, 0.0, 0.2), (30, 0.5, 0.2), (40, 0.99, 0.2), (41, 1.0, 0.2),
                                          (56, 1.0, 0.6), (61, 1.0, 1.0), (62, 0.5, 1.0)):
        alg.set_learning_rates(iteration, progress)
        assert alg.value_gradient_scale == pytest.approx(expected), iteration
    assert alg.curriculum_end_iteration == 41
    lr0 = cfg.algorithm.actor_learning_rate  # the linear decay counts from the curriculum's end too
    alg.max_iterations = 100
    alg.set_learning_rates(91, 1.0)
    assert alg.learning_rate == pytest.approx(lr0 + (cfg.algorithm.min_learning_rate - lr0) * 0.5)
    env.curriculum_progress = 0.3  # the runner reads the env's progress: a curriculum not done holds the weight
    fresh = _quiet(make_runner, PointMassEnv(PointMassCfg(num_envs=4, seed=0, dim=2)), cfg, None)
    fresh.env.curriculum_progress = 0.3
    _quiet(fresh.learn, 3)
    assert fresh.alg.curriculum_end_iteration is None and fresh.alg.value_gradient_scale == pytest.approx(0.2)
    fresh.env.curriculum_progress = 1.0
    _quiet(fresh.learn, 2)
    assert fresh.alg.curriculum_end_iteration == 3
    runner.save(str(tmp_path / "model.pt"))
    resumed = _quiet(make_runner, PointMassEnv(PointMassCfg(num_envs=4, seed=0, dim=2)), cfg, None)
    resumed.load(str(tmp_path / "model.pt"))
    assert resumed.alg.curriculum_end_iteration == 41
    cfg.algorithm.value_gradient_ramp_from = "curriculum"
    with pytest.raises(ValueError, match="value_gradient_ramp_from"):
        _quiet(make_runner, env, cfg)


# ---- learning -----------------------------------------------------------------------------------------------------
def test_shac_improves_point_mass_return_quickly():
    """A few seconds of SHAC on the 8-D point mass: the deterministic return rises well above the initial one."""
    torch.manual_seed(0)
    eval_env = lambda: PointMassEnv(PointMassCfg(num_envs=32, seed=7, dim=8))  # noqa: E731
    env = PointMassEnv(PointMassCfg(num_envs=16, seed=0, dim=8))
    runner = _quiet(make_runner, env, SHACRunnerCfg(max_iterations=200))
    initial = evaluate_return(eval_env, runner.get_inference_policy())
    _quiet(runner.learn, 25, init_at_random_ep_len=True)
    final = evaluate_return(eval_env, runner.get_inference_policy())
    assert final > initial + 10.0, (initial, final)
    assert final > 85.0, (initial, final)
    assert runner.alg.skipped_actor_updates == 0


@pytest.mark.slow
def test_shac_solves_pendulum_swing_up():
    """SHAC (DiffRL defaults, 16 envs) swings the pendulum up: evaluation return ≥ −150 within 200 iterations."""
    torch.manual_seed(1)
    eval_env = lambda: PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=64, seed=12345))  # noqa: E731
    env = PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=16, seed=1))
    runner = _quiet(make_runner, env, SHACRunnerCfg(max_iterations=200))
    best = -float("inf")
    for _ in range(40):
        _quiet(runner.learn, 5)
        best = max(best, evaluate_return(eval_env, runner.get_inference_policy()))
        if best >= -150.0:
            break
    assert best >= -150.0
