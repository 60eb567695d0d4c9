"""scripts/main_job.py end to end on a tiny schedule: train, select, export, validate, plot; then ``--from_run``
redoes the steps after the training on the same run's checkpoints (what a user does after an interruption).
About 2 min: the job's only test, kept in the default suite."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _main_job():
    spec = importlib.util.spec_from_file_location("main_job", SCRIPTS / "main_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_main_job_trains_ships_validates_and_reruns_from_its_run(tmp_path):
    job = _main_job()
    tiny = ["--iterations", "2", "--num_envs", "8", "--ranks", "1", "--episodes", "2", "--select_from", "1",
            "--select_episodes", "2", "--no_video", "--log_root", str(tmp_path)]
    assert job.main(tiny) == 0  # the verdict FAILs (2 iterations) without --strict: the job itself succeeds
    run = job.latest_run(str(tmp_path))
    with open(os.path.join(run, "main_job_summary.json")) as f:
        first = json.load(f)
    assert first["iterations"] == 2 and first["shipped_iteration"] == 2
    assert all(os.path.isfile(p) for p in first["exported"]) and first["validation_verdict"] in ("PASS", "FAIL")
    assert max(first["export_errors"].values()) < 1e-5
    os.remove(first["exported"][0])
    assert job.main([*tiny, "--from_run", run]) == 0
    with open(os.path.join(run, "main_job_summary.json")) as f:
        again = json.load(f)
    assert again["checkpoint"] == first["checkpoint"] and os.path.isfile(again["exported"][0])
    assert again["validation"] == first["validation"]  # same policy, same episodes: the same measurement
    assert job.latest_run(str(tmp_path)) == run  # no new run folder
