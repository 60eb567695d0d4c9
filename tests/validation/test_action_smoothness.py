"""``scripts/action_smoothness.py``: the statistics on hand-made actions, the Jacobian split on a linear policy,
and a short run end to end (random actions chatter, the standing controller does not)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ..script_modules import load_script
from .policies import RandomPolicy, StandingPolicy, save_torchscript


@pytest.fixture(scope="module")
def smooth():
    return load_script("action_smoothness")


def test_statistics_of_a_sinusoid(smooth):
    dt, steps = 0.02, 1050
    t = np.arange(steps) * dt
    a = np.zeros((steps, 1, 12))
    phases = np.arange(12) * np.pi / 6  # spread, so that the RMS over the joints is the same at every step
    a[:, 0, :] = np.sin(2 * np.pi * 3.0 * t[:, None] + phases)  # amplitude 1 at 3 Hz on every joint
    row = smooth.statistics(a, limit=1.5, dt=dt)[0]
    # the change per step of A sin(2 pi f t + p) has RMS A * 2 sin(pi f dt) / sqrt(2) over the spread phases
    assert row["action_rate"] == pytest.approx(2 * np.sin(np.pi * 3.0 * dt) / np.sqrt(2), rel=0.02)
    assert row["bands"]["2.5-5 Hz"] > 0.98 and row["near_bound"] == 0.0


def test_jacobian_of_a_linear_policy_by_group(smooth, tmp_path):
    import torch

    path = save_torchscript(StandingPolicy(k_q=1.0, k_v=0.02), tmp_path / "standing.pt")
    jac = smooth.jacobian_by_group(str(path), torch.randn(50, 48), samples=10)
    assert jac["joint_pos"] == pytest.approx(12.0, rel=1e-5)
    assert jac["joint_vel"] == pytest.approx(12 * 0.02**2, rel=1e-4)
    assert jac["projected_gravity"] == 0.0 and jac["total"] == pytest.approx(12.0048, rel=1e-5)


def test_end_to_end_random_actions_chatter_and_standing_does_not(smooth, tmp_path, capsys):
    random_path = save_torchscript(RandomPolicy(), tmp_path / "random.pt")
    standing_path = save_torchscript(StandingPolicy(), tmp_path / "standing.pt")
    out = tmp_path / "fig.png"
    assert smooth.main(["--policy", f"random={random_path}", f"standing={standing_path}", "--commands", "0",
                        "--out", str(out)]) == 0
    report = json.loads(out.with_suffix(".json").read_text())
    assert out.is_file()
    assert report["random"]["commands"]["0"]["action_rate"] == pytest.approx(np.sqrt(2 / 3), rel=0.05)
    assert report["standing"]["commands"]["0"]["action_rate"] < 0.01
    assert "action rate" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        smooth.main(["--policy", "nolabel"])
