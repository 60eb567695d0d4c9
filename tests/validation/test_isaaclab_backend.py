"""The validation runner on Isaac Lab's engines (the Isaac Lab layer's backend), in a subprocess (an Isaac Lab
simulation per process): the standing controller PASSES the standing scenario, and its gate measurements agree
with MuJoCo's (the same robot, drive, parameters and kicks in both).

Skipped where the Isaac Lab layer or Isaac Lab is not installed. PhysX: ~40 s (Isaac Lab start-up ~16 s); Newton
ran 12 env-steps/s here: slow."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .policies import StandingPolicy, save_torchscript
from .scenario_files import write_config
from .test_verdicts import STANDING, STANDING_PUSH

ROOT = Path(__file__).resolve().parents[2]
HAVE_LAYER = importlib.util.find_spec("diffloco_ext.isaaclab") is not None and importlib.util.find_spec("isaaclab")
pytestmark = pytest.mark.skipif(not HAVE_LAYER, reason="Isaac Lab or the Isaac Lab layer (diffloco_ext.isaaclab) "
                                                       "is not installed here")


def _validate(tmp_path, backend):
    policy = save_torchscript(StandingPolicy(), tmp_path / "policy.pt")
    scenarios = write_config(tmp_path, [STANDING, STANDING_PUSH])
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "validate.py"), "--task",
                           "DiffLoco-Velocity-Flat-AnymalD", "--policy", policy, "--backend", "mujoco", backend,
                           "--scenarios", str(scenarios), "--out", str(out), "--no_reference"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def _agree(summary, backend):
    metrics = summary["backends"]
    for scenario in ("standing", "standing_push"):
        ours = metrics["mujoco"]["scenarios"][scenario]["metrics"]
        theirs = metrics[backend]["scenarios"][scenario]["metrics"]
        assert abs(ours["torque_rms"] - theirs["torque_rms"]) < 0.03, (scenario, ours, theirs)
        assert abs(ours["base_tilt"] - theirs["base_tilt"]) < 0.01, (scenario, ours, theirs)
        assert ours["fall_rate"] == theirs["fall_rate"] == 0.0


def test_isaaclab_physx_passes_the_standing_scenario_like_mujoco(tmp_path):
    summary = _validate(tmp_path, "isaaclab-physx")
    assert summary["verdict"] == "PASS" and set(summary["backends"]) == {"mujoco", "isaaclab-physx"}
    _agree(summary, "isaaclab-physx")
    push = [summary["backends"][b]["scenarios"]["standing_push"]["metrics"]["lin_vel_error"]
            for b in ("mujoco", "isaaclab-physx")]
    assert abs(push[0] - push[1]) < 0.005  # the kicks take the same effect (measured 0.0324 both)


@pytest.mark.slow
def test_isaaclab_newton_passes_the_standing_scenario(tmp_path):
    summary = _validate(tmp_path, "isaaclab-newton")
    assert summary["verdict"] == "PASS"
    _agree(summary, "isaaclab-newton")
