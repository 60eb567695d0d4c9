"""The chatter guard: the action rate it measures, the rollback (which snapshot, the learning rate, the limits), its
place in the SHAC runner (logged, checkpointed, a guard that does not fire changes nothing)."""

import contextlib
import io

import pytest
import torch

from diffloco_ext.learning import SHACRunnerCfg, make_runner
from diffloco_ext.learning.chatter_guard import ChatterGuard
from diffloco_ext.tasks.cfg_override import apply_overrides, parse_overrides
from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv


def _runner(log_dir=None, **guard):
    torch.manual_seed(0)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=3, max_episode_length=12))
    cfg = SHACRunnerCfg(num_steps_per_env=8, max_iterations=20)
    cfg.algorithm.num_critic_epochs = 2
    for key, value in guard.items():
        setattr(cfg.chatter_guard, key, value)
    with contextlib.redirect_stdout(io.StringIO()):
        return make_runner(env, cfg, log_dir)


def _iteration(guard, alg, it, rate, curriculum_complete=True):
    """An iteration whose actions change by ``rate`` (RMS over joints) at every step; the learner's first weight
    marks the iterations done (as if the update had set it)."""
    with torch.no_grad():
        alg.actor.mlp[0].weight[0, 0] = float(it + 1)
    actions = torch.zeros(4, 3)
    for step in range(3):
        guard.observe(actions + rate * (step % 2), torch.zeros(4, dtype=torch.bool))
    return guard.end_iteration(alg, it, curriculum_complete)


def _marker(alg) -> float:
    return float(alg.actor.mlp[0].weight[0, 0].detach())


def test_the_action_rate_is_the_rms_change_per_step_without_the_pairs_across_a_reset():
    guard = ChatterGuard()
    a0 = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    a1 = torch.tensor([[3.0, 4.0], [1.0, 1.0]])
    a2 = torch.tensor([[0.0, 0.0], [2.0, 1.0]])
    guard.observe(a0, torch.tensor([False, False]))
    guard.observe(a1, torch.tensor([True, False]))  # env 0 resets after this step: its pair (a1, a2) is skipped
    guard.observe(a2, torch.tensor([False, False]))
    rate, event = guard.end_iteration(alg=None, iteration=0)
    # pairs: env 0 (a0, a1) rms sqrt((9 + 16) / 2); env 1 (a0, a1) 0 and (a1, a2) sqrt(1 / 2)
    expected = (torch.sqrt(torch.tensor(12.5)) + 0.0 + torch.sqrt(torch.tensor(0.5))) / 3
    assert rate == pytest.approx(float(expected)) and event is None
    rate, _ = guard.end_iteration(alg=None, iteration=1)  # a new iteration starts its own pairs
    assert rate != rate  # NaN: no step at all


def test_a_chattering_learner_is_rolled_back_before_the_rise_with_a_smaller_actor_learning_rate():
    runner = _runner()
    alg = runner.alg
    guard = ChatterGuard(max_rise=1.5, min_action_rate=0.15, patience=3, snapshot_interval=5, max_rollbacks=2,
                         value_gradient_factor=0.5, after_curriculum=False)
    for it in range(30):  # healthy, settling from 0.3 to 0.2: snapshots after 5, 10, ..., 30
        assert _iteration(guard, alg, it, max(0.2, 0.3 - 0.01 * it))[1] is None
    assert guard.baseline == pytest.approx(0.2) and guard.firing_level() == pytest.approx(0.3)
    assert _iteration(guard, alg, 30, 0.28)[1] is None
    assert _iteration(guard, alg, 31, 0.31)[1] is None
    assert _iteration(guard, alg, 32, 0.35)[1] is None  # the window's mean 0.313 is above 0.3, its least is not
    rate, event = _iteration(guard, alg, 33, 0.40)  # 0.31, 0.35, 0.40: each above 0.3, after 34 iterations: fires
    assert rate == pytest.approx(0.40) and event.rollbacks == 1 and event.action_rate == pytest.approx(1.06 / 3)
    # the newest snapshot whose next 5 iterations' rate is known and at most halfway from the baseline (0.25): the
    # one after 25 iterations (30's learner has had only 4 iterations)
    assert event.restored_iteration == 25 and _marker(alg) == 25.0
    assert alg.actor_learning_rate_scale == 0.5 == event.learning_rate_scale
    alg.set_learning_rates(10)  # (the schedule's iteration; 20 in all)
    unscaled = alg.actor_learning_rate_init + (alg.min_learning_rate - alg.actor_learning_rate_init) * 10 / 20
    assert alg.learning_rate == pytest.approx(0.5 * unscaled) and alg.critic_learning_rate > alg.learning_rate
    value = torch.tensor([2.0], requires_grad=True)  # the critic's gradient in the actor's objective: halved too
    alg._bootstrap(value).sum().backward()
    assert alg.value_gradient_scale_factor == 0.5 and float(value.grad) == pytest.approx(0.5 * alg.value_gradient_scale)
    # the window starts over; three chattering iterations fire again: the restored snapshot is relabelled by its
    # new rollouts (not yet 5), the newest labelled healthy one is 20
    assert _iteration(guard, alg, 34, 1.0)[1] is None and _iteration(guard, alg, 35, 1.0)[1] is None
    event = _iteration(guard, alg, 36, 1.0)[1]
    assert event.restored_iteration == 20 and event.rollbacks == 2 and event.action_rate == pytest.approx(1.0)
    assert _marker(alg) == 20.0 and alg.actor_learning_rate_scale == 0.25 == event.learning_rate_scale
    assert max(s["iteration"] for s in guard._snapshots) == 20
    # max_rollbacks reached: it measures on and rolls back no more
    for it in range(37, 50):
        assert _iteration(guard, alg, it, 1.0)[1] is None
    assert _marker(alg) == 50.0 and guard.rollbacks == 2


def test_the_guard_fires_on_the_rise_not_on_the_level():
    runner = _runner()
    for settled in (0.1, 0.5):  # a policy settled at any level may stay there; a transient passes
        guard = ChatterGuard(max_rise=1.5, patience=3, snapshot_interval=5, after_curriculum=False)
        for it in range(40):
            transient = 3.0 if it in (20, 21) else 1.0
            assert _iteration(guard, runner.alg, it, transient * settled * (1.0 + 0.3 * (it % 2)))[1] is None
    guard = ChatterGuard(max_rise=1.5, min_action_rate=0.3, patience=2, snapshot_interval=5, after_curriculum=False)
    for it in range(20):  # tripled from a low level, but under the floor
        assert _iteration(guard, runner.alg, it, 0.08 if it < 10 else 0.25)[1] is None


def test_no_rollback_before_the_curriculum_ends_nor_without_a_snapshot():
    runner = _runner()
    guard = ChatterGuard(max_rise=1.5, patience=2, snapshot_interval=5)
    for it in range(20):  # the rate falls during the curriculum: not watched, no baseline, no snapshot
        assert _iteration(guard, runner.alg, it, 1.0 - 0.04 * it, curriculum_complete=False)[1] is None
    assert guard.baseline is None and len(guard._snapshots) == 0
    for it in range(20, 24):  # watching from the curriculum's end: rising before a baseline or a snapshot exists
        assert _iteration(guard, runner.alg, it, 0.2 * (1.0 + (it - 20)), curriculum_complete=True)[1] is None
    assert guard.baseline is None and len(guard._snapshots) == 0 and guard.rollbacks == 0
    assert _marker(runner.alg) == 24.0


def test_a_guard_that_does_not_fire_leaves_the_run_unchanged_and_the_rate_is_logged(tmp_path):
    off = _runner()
    with contextlib.redirect_stdout(io.StringIO()):
        off.learn(6)
    watching = _runner(log_dir=str(tmp_path), max_rise=1e6, patience=2, snapshot_interval=2, after_curriculum=False)
    with contextlib.redirect_stdout(io.StringIO()):
        watching.learn(6)
    for a, b in zip(off.alg.actor.state_dict().values(), watching.alg.actor.state_dict().values()):
        assert torch.equal(a, b)
    assert len(watching.chatter_guard._snapshots) > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path))
    events.Reload()
    rates = [e.value for e in events.Scalars("Policy/action_rate")]
    assert len(rates) == 6 and all(r > 0.0 for r in rates)
    assert [e.value for e in events.Scalars("Train/rollbacks")] == [0.0] * 6


def test_the_runner_rolls_back_prints_it_and_a_checkpoint_keeps_the_lowered_learning_rate(tmp_path, capsys):
    runner = _runner(log_dir=str(tmp_path), max_rise=1e6, patience=1, snapshot_interval=2, after_curriculum=False)
    runner.learn(2)  # a snapshot after iteration 2, labelled by the rates of iterations 3 and 4
    snapshot = {k: v.clone() for k, v in runner.alg.actor.state_dict().items()}
    runner.learn(2)
    runner.chatter_guard.max_rise = 1.0 + 1e-9  # from now on the rate's least rise fires
    runner.chatter_guard.baseline = 1e-9
    runner.learn(1)
    assert "chatter guard" in capsys.readouterr().out
    assert runner.chatter_guard.rollbacks == 1 and runner.current_learning_iteration == 5  # the count goes on
    for key, value in runner.alg.actor.state_dict().items():
        assert torch.equal(value, snapshot[key]), key
    path = str(tmp_path / "resumed.pt")
    runner.save(path)
    resumed = _runner()
    resumed.load(path)
    assert resumed.chatter_guard.rollbacks == 1 and resumed.alg.actor_learning_rate_scale == 0.5
    assert resumed.alg.value_gradient_scale_factor == 1.0  # (value_gradient_factor 1: the guard's default)
    assert len(resumed.chatter_guard._snapshots) == 0  # snapshots stay in memory: a resumed run takes new ones


def test_bad_guard_settings_are_clear_errors():
    for bad in ({"max_rise": 1.0}, {"min_action_rate": -0.1}, {"patience": 0}, {"snapshot_interval": 0},
                {"max_snapshots": 0}, {"learning_rate_factor": 0.0}, {"learning_rate_factor": 1.5},
                {"value_gradient_factor": 0.0},
                {"max_rollbacks": -1}):
        with pytest.raises(ValueError, match="chatter_guard"):
            ChatterGuard(**bad)
    cfg = SHACRunnerCfg()
    apply_overrides(cfg, parse_overrides(["agent.chatter_guard.max_rise=1.5"])["agent"], "agent")
    assert cfg.chatter_guard.max_rise == 1.5
    with pytest.raises(Exception, match="max_ris"):
        apply_overrides(cfg, parse_overrides(["agent.chatter_guard.max_ris=1.5"])["agent"], "agent")
