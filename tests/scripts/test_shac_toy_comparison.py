"""scripts/experiments/shac_toy_comparison.py: a smoke run in seconds (small sample budgets), and the result it
reproduces (slow: about 1.5 min on 2 CPU cores)."""

import pytest

from ..script_modules import load_script


def test_a_small_run_reports_both_learners():
    out = load_script("experiments/shac_toy_comparison").main(["--seeds", "0", "--dim", "2", "--shac-max-samples",
                                                               "1024", "--ppo-max-samples", "1024"])
    assert set(out) == {"SHAC_samples", "SHAC_seconds", "SHAC_solved", "PPO_samples", "PPO_seconds", "PPO_solved",
                        "sample_ratio", "time_ratio"}
    assert 0 < out["SHAC_samples"] <= 1024 + 16 * 32 * 5 and 0 < out["PPO_samples"] <= 1024 + 16 * 32 * 5
    assert out["sample_ratio"] == out["PPO_samples"] / out["SHAC_samples"]


@pytest.mark.slow
def test_shac_needs_at_least_5x_fewer_samples_than_ppo():
    module = load_script("experiments/shac_toy_comparison")
    out = module.main(["--seeds", "0", "1", "2"])
    assert out["SHAC_solved"] and out["PPO_solved"]
    assert out["sample_ratio"] >= 5.0, out
