"""Gate arithmetic: measurements from per-episode sums, thresholds, NaN (no samples) fails, the verdict."""

from __future__ import annotations

import math

import numpy as np

from diffloco_ext.validation.gates import GateResult, MetricSums, check_gates, scenario_metrics, verdict


def _sums():
    sums = MetricSums(2, 3)
    on = np.array([True, True])
    zeros = np.zeros(2)
    for k in range(4):
        sums.add(on if k < 2 else np.array([True, False]), lin_err=np.array([0.1, 0.3]), ang_err=np.array([0.2, 0.0]),
                 torque=np.array([[10.0, 0.0, 0.0], [0.0, 40.0, 0.0]]),
                 saturated=np.array([[True, False, False], [False, False, False]]),
                 qd_ratio=np.array([0.5, 0.9 + k]), limit_excess=zeros, stance=np.array([[True, False]] * 2),
                 slip=np.array([[0.05, 9.0]] * 2), tilt=np.array([0.1, 0.2]), action_rate=np.array([0.01, 0.03]))
    sums.fell[1], sums.fall_time[1] = True, 0.04
    return sums


def test_measurements_weigh_samples_and_masks():
    sums = _sums()
    episodes = [sums.rows(np.array([e])) for e in range(2)]
    episodes = [{k: v[0] for k, v in e.items()} for e in episodes]
    m = scenario_metrics(episodes, effort_limit=80.0)
    # env 0: 4 samples, env 1: 2 (masked after its fall)
    assert math.isclose(m["lin_vel_error"], (4 * 0.1 + 2 * 0.3) / 6)
    assert math.isclose(m["torque_rms"], math.sqrt(2 * 40.0 ** 2 / 6) / 80.0)  # joint 1: env 1's two samples
    assert math.isclose(m["torque_saturation"], 4 / 18)
    assert m["joint_velocity"] == 1.9  # env 1's max over its unmasked samples (k = 0, 1)
    assert math.isclose(m["foot_slip"], 0.05)  # only stance feet count
    assert m["fall_rate"] == 0.5 and math.isclose(m["action_rate"], (4 * 0.01 + 2 * 0.03) / 6)


def test_thresholds_nan_and_verdict():
    results = check_gates({"lin_vel_error": 0.2, "fall_rate": float("nan"), "foot_slip": 0.5},
                          {"lin_vel_error": 0.3, "fall_rate": 0.0, "foot_slip": None}, "hard", "s")
    assert [r.gate for r in results] == ["lin_vel_error", "fall_rate"]  # foot_slip not gated here
    outcome, failing = verdict(results)
    assert outcome == "FAIL" and [r.gate for r in failing] == ["fall_rate"]  # no samples is a failure
    assert "n/a" in failing[0].describe() and failing[0].to_dict()["value"] is None
    assert verdict([GateResult("lin_vel_error", 0.3, 0.3)])[0] == "PASS"  # <= passes
    empty = scenario_metrics([{k: v[0] for k, v in MetricSums(1, 3).rows(np.array([0])).items()}], 80.0)
    assert math.isnan(empty["lin_vel_error"]) and empty["fall_rate"] == 0.0


def test_every_gate_says_what_failing_it_means_for_a_robot():
    from diffloco_ext.validation.gates import GATES, ON_HARDWARE

    assert set(ON_HARDWARE) == set(GATES)
    assert all(len(text) > 20 for text in ON_HARDWARE.values())
