"""``scripts/joint_speed_peaks.py``: the phase classification on hand-made samples, and a short run end to end."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from ..script_modules import load_script
from .policies import StandingPolicy, save_torchscript
from .scenario_files import write_config


@pytest.fixture(scope="module")
def peaks():
    return load_script("joint_speed_peaks")


def test_samples_above_the_no_load_speed_are_counted_by_joint_type_and_phase(peaks):
    names = ["LF_HFE", "LF_KFE", "RF_KFE"]
    foot_of_joint = [0, 0, 1]
    T, N = 4, 2
    ratio = np.zeros((T, N, 3))
    stance = np.zeros((T, N, 2), dtype=bool)
    stance[2:, 0, 0] = True  # env 0's foot 0 lands at step 2
    stance[:, 1, 1] = True  # env 1's foot 1 is in stance throughout
    ratio[2, 0, 1] = 1.3  # LF knee at touchdown
    ratio[1, 0, 0] = 1.1  # LF hip in swing
    ratio[3, 1, 2] = 1.2  # RF knee in stance
    ratio[3, 0, 1] = 0.99  # below the no-load speed: not counted
    ratio[1, 1, 2] = 2.0  # a fallen or warm-up sample: not valid
    valid = np.ones((T, N), dtype=bool)
    valid[1, 1] = False
    counts = peaks.phase_counts(ratio, stance, valid, names, foot_of_joint)
    assert counts == {"KFE touchdown": 1, "HFE swing": 1, "KFE stance": 1}
    stance[3, 0, 0] = False  # the foot leaves the ground again at step 3
    ratio[3, 0, 1] = 1.5
    assert peaks.phase_counts(ratio, stance, valid, names, foot_of_joint)["KFE liftoff"] == 1


def test_the_script_reports_a_standing_policy_well_below_the_no_load_speed(peaks, tmp_path, capsys, monkeypatch):
    policy = save_torchscript(StandingPolicy(), tmp_path / "policy.pt")
    scenarios = write_config(tmp_path, [{"name": "stand", "episodes": 2, "seeds": [0], "duration_s": 1.5,
                                         "commands": {"schedule": [[1.5, 0, 0, 0]]}}])
    monkeypatch.setattr(sys, "argv", ["joint_speed_peaks.py", "--policy", policy, "--backend", "hard",
                                      "--scenarios", str(scenarios), "--json"])
    peaks.main()
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["steps"] == 2 * (75 - peaks.WARMUP_STEPS)
    assert result["joint_samples_above"] == 0.0 and result["above_by_joint_and_phase"] == {}
    assert 0.0 < result["step_peak_percentiles"]["100"] < 0.5
