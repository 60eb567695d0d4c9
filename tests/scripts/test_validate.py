"""``scripts/validate.py`` end to end: verdict and exit status, the report folder, clear errors on bad input."""

from __future__ import annotations

import json
import os

import pytest

from diffloco_ext.validation import backend_registry
from diffloco_ext.validation.backend_registry import BackendSpec

from ..script_modules import load_script
from ..validation.policies import StandingPolicy, WrongInputPolicy, ZeroPolicy, save_onnx, save_torchscript
from ..validation.scenario_files import write_config
from .cli_errors import assert_one_line_failure, run_script

TASK = "DiffLoco-Velocity-Flat-AnymalD"
STEP = {"name": "vx_step", "episodes": 1, "seeds": [0, 1], "initial_yaw": 0.0, "plot": True,
        "commands": {"schedule": [[1.0, 0.0, 0.0, 0.0], [1.5, 1.0, 0.0, 0.0]]}}
STAND = {"name": "stand", "episodes": 2, "seeds": [0], "duration_s": 2.0, "commands": {"schedule": [[2.0, 0, 0, 0]]},
         "payload_kg": [-5.0, 5.0]}


@pytest.fixture(scope="module")
def validate():
    return load_script("validate").main


def test_a_failing_policy_exits_1_with_the_report(validate, tmp_path, capsys):
    policy = save_torchscript(ZeroPolicy(), tmp_path / "policy.pt")
    scenarios = write_config(tmp_path, [STEP, STAND])
    out = tmp_path / "report"
    status = validate(["--task", TASK, "--policy", policy, "--backend", "hard", "mujoco", "--scenarios",
                       str(scenarios), "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 1
    assert "[validate] FAIL" in printed and "FAIL hard / vx_step: lin_vel_error" in printed
    assert "FAIL mujoco / vx_step: lin_vel_error" in printed and "episodes done" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "FAIL"
    assert {(g["backend"], g["scenario"], g["gate"]) for g in summary["failing"]} == {
        ("hard", "vx_step", "lin_vel_error"), ("mujoco", "vx_step", "lin_vel_error")}
    assert summary["backends"]["hard"]["episodes"] == 4 and summary["export"] is None  # no sibling to compare
    assert set(summary["gaps"]["trajectory"]) == {"train-sim vs hard", "train-sim vs mujoco", "hard vs mujoco"}
    gap = summary["gaps"]["trajectory"]["hard vs mujoco"]
    assert 0 < gap["joint_mrad"] < 50 and gap["seconds"] == pytest.approx(2.5)
    for name in ("velocity_vx_step.png", "joint_trajectories.png", "torques.png", "foot_contacts.png"):
        assert (out / name).stat().st_size > 10_000, name
    md = (out / "summary.md").read_text()
    assert md.startswith("# Validation: **FAIL**") and "| hard | vx_step | lin_vel_error |" in md


def test_a_passing_policy_exits_0_and_the_export_gate_compares_its_files(validate, tmp_path, capsys):
    policy = save_torchscript(StandingPolicy(), tmp_path / "policy.pt")
    save_onnx(StandingPolicy(), tmp_path / "policy.onnx")
    scenarios = write_config(tmp_path, [STAND])
    status = validate(["--task", TASK, "--policy", policy, "--backend", "mujoco", "--scenarios", str(scenarios),
                       "--out", str(tmp_path / "report"), "--no_reference"])
    assert status == 0 and "[validate] PASS" in capsys.readouterr().out
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["export_gates"][0]["gate"] == "export_mismatch" and summary["export_gates"][0]["passed"]
    assert set(summary["export"]) == {"jit_vs_onnx"}


def test_bad_inputs_exit_2_with_a_clear_message(validate, tmp_path, capsys, monkeypatch):
    good = save_torchscript(ZeroPolicy(), tmp_path / "zero.pt")
    scenarios = write_config(tmp_path, [STAND])

    def run(*args):
        status = validate(["--task", TASK, "--scenarios", str(scenarios), "--out", str(tmp_path / "r"), *args])
        return status, capsys.readouterr().err

    status, err = run("--policy", str(tmp_path / "absent.pt"))
    assert status == 2 and "absent.pt' not found" in err
    status, err = run("--checkpoint", str(tmp_path / "model_9.pt"))
    assert status == 2 and "checkpoint" in err and "not found" in err
    status, err = run("--policy", save_torchscript(WrongInputPolicy(), tmp_path / "wrong.pt"))
    assert status == 2 and "rejects a [2, 48] observation batch" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: anymal_d\nextends: anymal_d\nscenarios: [{name: a, frition: 0.4}]\n")
    status = validate(["--task", TASK, "--policy", good, "--scenarios", str(bad)])
    assert status == 2 and "unknown key(s) ['frition']" in capsys.readouterr().err
    status = validate(["--task", TASK, "--policy", good, "--backend", "bullet"])
    assert status == 2 and "unknown backend 'bullet'" in capsys.readouterr().err
    wrong_robot = write_config(tmp_path, [STAND], robot="anymal_c", name="c.yaml")
    status = validate(["--task", TASK, "--policy", good, "--scenarios", str(wrong_robot)])
    assert status == 2 and "is for robot 'anymal_c'" in capsys.readouterr().err
    for name in ("isaaclab-physx", "isaaclab-newton"):
        monkeypatch.setitem(backend_registry.BACKENDS, name,
                            BackendSpec(backend_registry.ISAACLAB_FACTORY, 0.005, requires=("isaaclab_missing",)))
    status, err = run("--policy", good, "--backend", "isaaclab")
    assert status == 2 and "needs isaaclab_missing, which is not installed" in err
    assert not os.path.exists(tmp_path / "r" / "summary.json")


def test_corrupt_and_foreign_files_exit_2_with_one_line(validate, tmp_path, capsys):
    """A checkpoint that is garbage or of something else, an exported policy given as a checkpoint, a file that is no
    ONNX model: status 2 and one ``[validate] error:`` line naming the file."""
    import torch

    scenarios = write_config(tmp_path, [STAND])

    def error(*args):
        status = validate(["--task", TASK, "--scenarios", str(scenarios), "--out", str(tmp_path / "r"), *args])
        err = capsys.readouterr().err.strip()
        assert status == 2 and "\n" not in err and err.startswith("[validate] error: "), (status, err)
        return err

    corrupt = tmp_path / "model_5.pt"
    corrupt.write_bytes(b"garbage" * 10)
    assert "model_5.pt' does not load into the runner" in error("--checkpoint", str(corrupt))
    foreign = tmp_path / "model_6.pt"
    torch.save({"model_state_dict": {"w": torch.zeros(3)}, "iter": 6}, foreign)
    assert "model_6.pt' does not load into the runner" in error("--checkpoint", str(foreign))
    exported = save_torchscript(ZeroPolicy(), tmp_path / "policy.pt")
    assert "pass it as --policy" in error("--checkpoint", exported)
    not_onnx = tmp_path / "policy.onnx"
    not_onnx.write_bytes(b"\x08\x01garbage")
    assert "is not a readable ONNX model" in error("--policy", str(not_onnx))


def test_a_corrupt_policy_file_fails_without_a_traceback(tmp_path):
    corrupt = tmp_path / "policy.pt"
    corrupt.write_bytes(b"\x00" * 64)
    proc = run_script("validate", "--task", TASK, "--policy", str(corrupt), "--out", str(tmp_path / "r"))
    assert_one_line_failure(proc, 2, "is not a TorchScript policy")
