"""scripts/experiments/gradient_landscapes.py in its quick mode: the measurements, their agreement statistics and
the figure; the smoothed model's first-order gradient is the slope of its own objective (float64), and the
statistics tell a gradient that tracks the objective from one that does not."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ..script_modules import load_script


def test_quick_landscape_gradient_is_the_objectives_slope(tmp_path):
    script = load_script("experiments/gradient_landscapes")
    out, fig = tmp_path / "landscapes.json", tmp_path / "landscapes.png"
    result = script.main(["--quick", "--out", str(out), "--figure", str(fig)])
    assert json.loads(out.read_text())["joint"] == "LF_KFE" and fig.stat().st_size > 10_000
    drop = result["scenes"]["drop"]
    assert set(drop["models"]) == {"hard", "smoothed 300"} and len(drop["randomized_smoothing"]["grad"]) == 21
    theta = np.asarray(result["theta"])
    smoothed = drop["models"]["smoothed 300"]
    J, grad = np.asarray(smoothed["J"]), np.asarray(smoothed["grad"])
    assert J.max() - J.min() > 0.01  # the knee offset moves the landing: a landscape, not a constant
    # the backpropagated gradient is the slope of the objective: central differences on the 0.04-rad grid
    slope = (J[2:] - J[:-2]) / (theta[2:] - theta[:-2])
    assert np.corrcoef(grad[1:-1], slope)[0, 1] > 0.95
    assert np.allclose(grad[1:-1], slope, atol=0.15 * np.abs(slope).max())


def test_agreement_statistics_tell_a_tracking_gradient_from_a_blind_one():
    script = load_script("experiments/gradient_landscapes")
    theta = np.linspace(-0.4, 0.4, 81)
    J = np.sin(3 * theta) + (theta > 0.1)  # a smooth part and a jump, as contact events make
    local = script.agreement(theta, J, 3 * np.cos(3 * theta))  # exact between events, blind to the jump
    assert local["max_abs_grad"] == pytest.approx(3.0) and local["sign_agreement"] > 0.9
    bump = np.exp(-0.5 * ((theta - 0.1) / 0.03) ** 2) / (0.03 * np.sqrt(2 * np.pi))
    smoothed = script.agreement(theta, J, 3 * np.cos(3 * theta) + bump)  # the jump spread over its neighbourhood
    assert smoothed["correlation"] > 0.9 > local["correlation"]
    wrong = script.agreement(theta, J, -3 * np.cos(3 * theta))
    assert wrong["sign_agreement"] < 0.3 and wrong["correlation"] < 0
