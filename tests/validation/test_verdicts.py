"""Verdicts in each backend: bad policies FAIL with the right gate named, a stabilising standing controller
PASSES the standing scenario (payload, gains, friction 0.4-1.2, a push) where the zero-action policy falls.

Why these policies: ANYmal D stands at its default pose under the PD alone, so the zero-action policy is a good
*standing* policy on high friction but ignores every command (a step to 1 m/s: ``lin_vel_error``); at friction
0.4 its feet slide apart and it falls (``fall_rate``). Random actions in [-1, 1] change the targets by up to
1 rad between policy steps (``action_rate``). The standing controller adds joint-space stiffness from the
observation (``tests/validation/policies.py``) and keeps its feet at friction 0.4.
"""

from __future__ import annotations

import pytest

from diffloco_ext.validation.closed_loop import TaskInterface
from diffloco_ext.validation.policy_io import load_policy_file
from diffloco_ext.validation.validation_run import run_validation

from .policies import RandomPolicy, StandingPolicy, ZeroPolicy, save_torchscript
from .scenario_files import make_config

BACKENDS = ["hard", "mujoco"]
STEP = {"name": "vx_step", "episodes": 1, "seeds": [0], "initial_yaw": 0.0,
        "commands": {"schedule": [[1.0, 0.0, 0.0, 0.0], [2.0, 1.0, 0.0, 0.0]]}}
STANDING = {"name": "standing", "episodes": 6, "seeds": [0], "commands": {"schedule": [[4.0, 0.0, 0.0, 0.0]]},
            "payload_kg": [-5.0, 5.0, 0.0, 0.0, 0.0, 0.0], "stiffness_scale": [1.0, 1.0, 0.8, 1.2, 1.0, 1.0],
            "damping_scale": [1.0, 1.0, 0.8, 1.2, 1.0, 1.0], "friction": [1.0, 1.0, 1.0, 1.0, 0.4, 1.2]}
STANDING_PUSH = {"name": "standing_push", "episodes": 2, "seeds": [0], "commands": {"schedule": [[4.0, 0, 0, 0]]},
                 "push": {"interval_s": [1.5, 2.5], "velocity_xy": 0.3}}


@pytest.fixture(scope="module")
def task():
    return TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD")


def _validate(task, tmp_path, module, scenarios, backend):
    policy = load_policy_file(save_torchscript(module, tmp_path / "policy.pt"), task.num_obs, task.num_actions)
    config = make_config(tmp_path, scenarios)
    return run_validation(task, policy, [backend], config, None, reference=False, printer=lambda *a: None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_zero_action_policy_fails_tracking_and_only_tracking(task, tmp_path, backend):
    """... and the gait: commanded to walk, it stands (its 2 s at 1 m/s are classified ``stand``, not the task's
    trot)."""
    result = _validate(task, tmp_path, ZeroPolicy(), [STEP], backend)
    assert result.verdict == "FAIL"
    assert {g.gate for g in result.failing} == {"lin_vel_error", "gait_mismatch"}
    gait = result.runs[backend].gaits["vx_step"]
    assert gait["expected"] == "trot" and gait["share"]["stand"] == 1.0 and gait["mismatch"] == 1.0
    error = next(g for g in result.failing if g.gate == "lin_vel_error")
    assert error.backend == backend and error.scenario == "vx_step"
    # standing still: gated from the 0.5 s warm-up on, error 0 for 0.5 s and 1 m/s for 2 s: a mean of 0.8 m/s
    assert error.value == pytest.approx(0.8, abs=0.01)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_actions_fail_smoothness(task, tmp_path, backend):
    result = _validate(task, tmp_path, RandomPolicy(), [STEP], backend)
    assert result.verdict == "FAIL"
    failing = {g.gate: g for g in result.failing}
    assert "action_rate" in failing and failing["action_rate"].value > 0.6  # E|a - a'| RMS of U(-1, 1): 0.82
    assert "lin_vel_error" in failing


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_standing_controller_passes_standing_where_zero_actions_fall(task, tmp_path, backend):
    good = _validate(task, tmp_path, StandingPolicy(), [STANDING, STANDING_PUSH], backend)
    assert good.verdict == "PASS", [g.describe() for g in good.failing]
    assert good.runs[backend].episodes == 8
    metrics = good.runs[backend].metrics["standing_push"]
    assert metrics["lin_vel_error"] > 0.01  # the pushes did move it
    bad = _validate(task, tmp_path, ZeroPolicy(), [STANDING], backend)
    assert [(g.gate, g.scenario) for g in bad.failing] == [("fall_rate", "standing")]
    assert bad.failing[0].value == pytest.approx(1 / 6)  # the friction-0.4 episode
    # each fall is reported with its time and the command (vx, vy, wz) at that moment: standing, all zero
    falls = bad.runs[backend]
    assert len(falls.fall_times["standing"]) == 1 and 0.0 < falls.fall_times["standing"][0] <= 4.0
    assert falls.fall_commands["standing"] == [[0.0, 0.0, 0.0]]
    assert not good.runs[backend].fall_commands
