"""The curriculum-end check: the mean action rate over the curriculum's last iterations, reported once when the
curriculum completes, a warning above its threshold, its place in the SHAC runner (printed, logged, nothing else
changed)."""

import contextlib
import io
import math
import os

import pytest
import torch

from diffloco_ext.learning import SHACRunnerCfg, make_runner
from diffloco_ext.learning.agents.velocity import AnymalDFlatSHACRunnerCfg
from diffloco_ext.learning.curriculum_end_check import CurriculumEndCheck
from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv


def test_the_rate_is_the_mean_over_the_last_window_before_the_curriculum_completes():
    check = CurriculumEndCheck(window=3, warn_action_rate=0.35)
    for rate in (5.0, 0.2, math.nan, 0.3, 0.4):  # the first drops out of the window, NaN (no step pair) is skipped
        assert check.observe(rate, curriculum_complete=False) is None
    assert check.rate_at_end is None and not check.warns()
    assert check.observe(9.0, curriculum_complete=True) == pytest.approx(0.3)  # (0.2 + 0.3 + 0.4) / 3
    assert check.iterations == 3 and not check.warns()
    assert "action rate 0.300 over its last 3 iterations" in check.message(10)
    assert "WARNING" not in check.message(10)
    assert check.observe(0.1, curriculum_complete=False) is None  # reported once per run
    assert check.observe(0.1, curriculum_complete=True) is None and check.rate_at_end == pytest.approx(0.3)


def test_a_chattering_gait_at_the_curriculum_end_warns():
    check = CurriculumEndCheck(window=50, warn_action_rate=0.35)
    for _ in range(60):
        check.observe(0.5, curriculum_complete=False)
    assert check.observe(0.5, curriculum_complete=True) == pytest.approx(0.5)
    assert check.warns() and "WARNING: above 0.35" in check.message(299)
    assert "iteration 300" in check.message(299)
    report_only = CurriculumEndCheck(window=50)
    report_only.observe(2.0, False)
    assert report_only.observe(2.0, True) == pytest.approx(2.0) and not report_only.warns()


def test_no_report_without_a_curriculum_nor_in_a_run_resumed_after_its_end():
    check = CurriculumEndCheck(window=5, warn_action_rate=0.1)
    for _ in range(10):
        assert check.observe(1.0, curriculum_complete=True) is None
    assert check.rate_at_end is None and not check.warns()


def test_bad_settings_are_clear_errors():
    for bad in ({"window": 0}, {"warn_action_rate": 0.0}, {"warn_action_rate": -1.0},
                {"warn_action_rate": float("nan")}):
        with pytest.raises(ValueError, match="curriculum_end_check"):
            CurriculumEndCheck(**bad)


def test_the_anymal_agent_warns_above_the_measured_threshold():
    cfg = AnymalDFlatSHACRunnerCfg().to_dict()["curriculum_end_check"]
    assert cfg == {"window": 50, "warn_action_rate": 0.35}
    assert SHACRunnerCfg().to_dict()["curriculum_end_check"]["warn_action_rate"] is None


def _runner(log_dir=None, **check):
    torch.manual_seed(0)
    env = PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=3, max_episode_length=12))
    env.curriculum_progress = 0.5
    cfg = SHACRunnerCfg(num_steps_per_env=8, max_iterations=20)
    cfg.algorithm.num_critic_epochs = 2
    for key, value in check.items():
        setattr(cfg.curriculum_end_check, key, value)
    with contextlib.redirect_stdout(io.StringIO()):
        return make_runner(env, cfg, log_dir), env


def test_the_runner_reports_the_curriculum_end_once_logs_it_and_changes_nothing_else(tmp_path, capsys):
    runs = []
    for settings in ({}, {"log_dir": str(tmp_path), "window": 2, "warn_action_rate": 1e-9}):
        runner, env = _runner(**settings)  # each run from the same seed (torch's global RNG draws the noise)
        runner.learn(3)
        env.curriculum_progress = 1.0
        runner.learn(2)
        runs.append(runner)
    plain, warning = runs
    out = capsys.readouterr().out
    assert out.count("curriculum complete at iteration 4: action rate") == 2  # both runs report it
    assert out.count("WARNING: above 1e-09") == 1  # only the one with a threshold warns
    for a, b in zip(plain.alg.actor.state_dict().values(), warning.alg.actor.state_dict().values()):
        assert torch.equal(a, b)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path))
    events.Reload()
    logged = events.Scalars("Policy/action_rate_at_curriculum_end")
    rates = [e.value for e in events.Scalars("Policy/action_rate")]
    assert [e.step for e in logged] == [3]
    assert logged[0].value == pytest.approx(sum(rates[1:3]) / 2, rel=1e-6)  # iterations 2 and 3 (the window of 2)


def test_a_run_trained_in_chunks_writes_one_events_file(tmp_path):
    """Several ``learn()`` calls of one run (the CLI's budgeted chunks) go to one TensorBoard events file, every
    iteration in it."""
    runner, _ = _runner(log_dir=str(tmp_path))
    for n in (2, 2, 1):
        runner.learn(n)
    files = [f for f in os.listdir(tmp_path) if f.startswith("events.out.tfevents")]
    assert len(files) == 1, files
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [e.step for e in events.Scalars("Policy/action_rate")] == [0, 1, 2, 3, 4]
