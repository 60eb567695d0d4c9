"""SHAC vs PPO sample efficiency on the 8-D point mass (slow: about 1.5 min on 2 CPU cores)."""

import importlib.util
import os
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "shac_toy_comparison.py")


@pytest.mark.slow
def test_shac_needs_at_least_5x_fewer_samples_than_ppo():
    spec = importlib.util.spec_from_file_location("shac_toy_comparison", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    out = module.main(["--seeds", "0", "1", "2"])
    assert out["SHAC_solved"] and out["PPO_solved"]
    assert out["sample_ratio"] >= 5.0, out
