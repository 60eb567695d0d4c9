"""The robots' default scenario sets end to end (slow: 1-3 minutes each on this 2-core CPU).

The zero-action policy stands at the default pose: it must FAIL the velocity sweeps and random commands on
tracking in every backend, and fall at friction 0.4, but never on smoothness (its actions never change)."""

from __future__ import annotations

import pytest

from diffloco_ext.validation.closed_loop import TaskInterface
from diffloco_ext.validation.policy_io import load_policy_file
from diffloco_ext.validation.scenarios import default_config_path, load_config
from diffloco_ext.validation.validation_run import run_validation

from .policies import ZeroPolicy, save_torchscript


@pytest.mark.slow
@pytest.mark.parametrize("task_id, backends", [("DiffLoco-Velocity-Flat-AnymalD", ["hard", "mujoco"]),
                                               ("DiffLoco-Velocity-Flat-AnymalC", ["hard"])])
def test_the_default_set_fails_a_standing_policy_for_the_right_reasons(tmp_path, task_id, backends):
    task = TaskInterface.from_task(task_id)
    config = load_config(default_config_path(task.robot.name))
    policy = load_policy_file(save_torchscript(ZeroPolicy(), tmp_path / "zero.pt"), task.num_obs, task.num_actions)
    result = run_validation(task, policy, backends, config, str(tmp_path / "report"))
    assert result.verdict == "FAIL"
    failing = {(g.backend, g.scenario, g.gate) for g in result.failing}
    for backend in backends:
        for scenario in ("vx_sweep", "lateral_sweep", "random_commands"):
            assert (backend, scenario, "lin_vel_error") in failing
        assert (backend, "yaw_sweep", "ang_vel_error") in failing
        assert not any(g[2] == "action_rate" for g in failing)
        assert result.runs[backend].episodes == sum(s.episodes * len(s.seeds) for s in config.scenarios)
    assert (tmp_path / "report" / "summary.md").is_file()
