"""``scripts/cross_validate.py``: two hand-written policies validated side by side in the project's hard contact and
MuJoCo, the table and figure from their reports, and bad arguments."""

from __future__ import annotations

import json

import pytest

from ..script_modules import load_script
from ..validation.policies import RandomPolicy, StandingPolicy, save_torchscript
from ..validation.scenario_files import write_config


@pytest.fixture(scope="module")
def cross():
    return load_script("cross_validate")


def test_a_standing_and_a_shaking_policy_side_by_side(cross, tmp_path):
    stand = save_torchscript(StandingPolicy(), tmp_path / "stand.pt")
    shake = save_torchscript(RandomPolicy(), tmp_path / "shake.pt")
    scenarios = write_config(tmp_path, [{"name": "stand", "episodes": 2, "seeds": [0], "duration_s": 1.5,
                                         "commands": {"schedule": [[1.5, 0, 0, 0]]}}])
    out = tmp_path / "cross"
    result = cross.main(["--policy", f"stand={stand}", f"shake={shake}", "--trained_in", "stand=hard",
                         "--backend", "hard", "mujoco", "--scenarios", str(scenarios), "--out", str(out),
                         "--jobs", "2"])
    assert (out / "stand" / "validate.log").stat().st_size > 0  # two processes at once: each writes its own log
    table = result["table"]
    assert set(table) == {"stand", "shake"} and set(table["stand"]) == {"stand"}
    for backend in ("hard", "mujoco"):
        # standing on a zero command: no drift, no fall, in both validators
        assert table["stand"]["stand"][backend]["lin_vel_error"] < 0.05
        assert table["stand"]["stand"][backend]["fall_rate"] == 0.0
    # the report's own numbers, not recomputed ones
    summary = json.loads((out / "stand" / "summary.json").read_text())
    assert table["stand"]["stand"]["mujoco"]["lin_vel_error"] == \
        summary["backends"]["mujoco"]["scenarios"]["stand"]["metrics"]["lin_vel_error"]
    # the gap is measured from the training simulator's planar error (the spread without --trained_in)
    stand_row = table["stand"]["stand"]
    assert result["transfer_gap"]["stand"]["stand"] == pytest.approx(
        abs(stand_row["mujoco"]["lin_vel_error"] - stand_row["hard"]["lin_vel_error"]))
    assert (out / "cross_validation.png").stat().st_size > 0
    markdown = (out / "cross_validation.md").read_text()
    assert "| stand (hard) |" in markdown and "| shake (?) |" in markdown
    # --reuse reads the reports already there instead of validating again
    again = cross.main(["--policy", f"stand={stand}", f"shake={shake}", "--backend", "hard", "mujoco",
                        "--scenarios", str(scenarios), "--out", str(out), "--reuse"])
    assert again["table"] == table


def test_a_validation_that_crashes_stops_the_script_and_no_stale_report_is_read(cross, tmp_path):
    """A policy validate.py cannot run (wrong input size: exit 2) is an error naming it, even with an old report of
    the same label in the folder."""
    from ..validation.policies import WrongInputPolicy

    wrong = save_torchscript(WrongInputPolicy(), tmp_path / "wrong.pt")
    stale = tmp_path / "cross" / "wrong" / "summary.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    with pytest.raises(SystemExit, match="validation of 'wrong' \\(exit 2\\) failed"):
        cross.main(["--policy", f"wrong={wrong}", "--backend", "hard", "--out", str(tmp_path / "cross")])
    assert not stale.exists()


def test_exported_files_and_checkpoints_are_told_apart_by_content(cross, tmp_path):
    """The main job ships ``average_*.pt`` checkpoints: the name does not decide, the archive's content does."""
    import torch

    exported = save_torchscript(StandingPolicy(), tmp_path / "policy.pt")
    checkpoint = tmp_path / "average_400-650.pt"
    torch.save({"actor_state_dict": {"w": torch.zeros(2)}, "iter": 650}, checkpoint)
    assert cross.is_exported_policy(exported) and cross.is_exported_policy(str(tmp_path / "policy.onnx"))
    assert not cross.is_exported_policy(str(checkpoint))


def test_bad_arguments_are_clear_errors(cross, tmp_path):
    stand = save_torchscript(StandingPolicy(), tmp_path / "stand.pt")
    with pytest.raises(SystemExit, match="not LABEL=VALUE"):
        cross.main(["--policy", stand, "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="given twice"):
        cross.main(["--policy", f"a={stand}", f"a={stand}", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="no file"):
        cross.main(["--policy", f"a={tmp_path / 'missing.pt'}", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="policies not given"):
        cross.main(["--policy", f"a={stand}", "--trained_in", "b=hard", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="--jobs must be at least 1"):
        cross.main(["--policy", f"a={stand}", "--jobs", "0", "--out", str(tmp_path / "o")])
