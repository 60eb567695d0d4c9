"""SHAC vs PPO sample efficiency on the 8-D point mass (slow: about 1.5 min on 2 CPU cores)."""

import pytest

from ..script_modules import load_script


@pytest.mark.slow
def test_shac_needs_at_least_5x_fewer_samples_than_ppo():
    module = load_script("shac_toy_comparison")
    out = module.main(["--seeds", "0", "1", "2"])
    assert out["SHAC_solved"] and out["PPO_solved"]
    assert out["sample_ratio"] >= 5.0, out
