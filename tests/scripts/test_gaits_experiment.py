"""scripts/experiments/gaits.py on a hand-made run folder: a standing controller exported as a main job would, with
the summary's tracking measurement (no policy is trained here)."""

from __future__ import annotations

import json

import pytest

from ..script_modules import load_script
from ..validation.policies import StandingPolicy, save_torchscript


def test_gaits_experiment_on_a_standing_policy(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "exported").mkdir(parents=True)
    policy = save_torchscript(StandingPolicy(), run / "exported" / "policy.pt")
    gait = {"windows": 3, "share": {"stand": 1.0}, "stride_frequency": None, "duty": [1.0] * 4,
            "phase_offsets": [None] * 4, "expected": "pace", "share_expected": 0.0}
    target = {"lin_vel_xy_error": 0.7, "ang_vel_z_error": 0.2, "falls": 0, "episodes": 3, "gait": gait}
    (run / "main_job_summary.json").write_text(json.dumps({
        "task": "DiffLoco-Velocity-Flat-AnymalD-Pace", "exported": [str(policy)], "train_seconds": 60.0,
        "iterations": 10, "targets": {"MuJoCo": target}}))
    out = tmp_path / "gaits.json"
    result = load_script("experiments/gaits").main(["--runs", str(run), "--out", str(out),
                                                    "--figure", str(tmp_path / "gaits.png")])
    entry = result["runs"][0]
    assert entry["gait_name"] == "pace"  # the task's gait, from its config
    # the standing controller, commanded forward, stands: its forward walk is classified as such
    assert entry["forward_walk"]["share"]["stand"] == 1.0
    assert out.exists() and (tmp_path / "gaits.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "| pace |" in printed and "0%" in printed
    # another seed's run for the table only: no forward walk, its gait from the task
    more = load_script("experiments/gaits").main(["--runs", str(run), "--more_runs", str(run)])
    assert len(more["runs"]) == 2 and more["runs"][1]["gait_name"] == "pace" and "forward_walk" not in more["runs"][1]
    with pytest.raises(FileNotFoundError, match="main_job_summary.json"):
        load_script("experiments/gaits").main(["--runs", str(tmp_path)])
