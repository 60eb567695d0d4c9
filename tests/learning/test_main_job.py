"""The main job (``scripts/main_job.py``, :mod:`diffloco_ext.validation.main_job`) end to end on a tiny schedule:
train, select, export, validate, plot; then ``--from_run`` redoes the steps after the training on the same run's
checkpoints (what a user does after an interruption), and ships the average of its checkpoints' actors. About 4 min:
kept in the default suite."""

from __future__ import annotations

import json
import os

import pytest

from diffloco_ext.validation import main_job, shipping
from diffloco_ext.validation.tracking_targets import TRACKING_TARGETS

from ..script_modules import load_script


def _main_job():
    return load_script("main_job")


def test_main_job_trains_ships_validates_and_reruns_from_its_run(tmp_path, monkeypatch):
    job = _main_job()
    common = ["--iterations", "2", "--num_envs", "8", "--runs", "1", "--ranks", "1", "--episodes", "2",
              "--target_episodes", "0", "--select_episodes", "2", "--no_video", "--log_root", str(tmp_path)]
    tiny = [*common, "--select_from", "1", "agent.save_interval=1"]
    assert job.main([*tiny, "--target_episodes", "3"]) == 0  # the verdict FAILs (2 iterations) without --strict
    run = main_job.latest_run(str(tmp_path))
    with open(os.path.join(run, "main_job_summary.json")) as f:
        first = json.load(f)
    assert first["iterations"] == 2 and first["shipped_iteration"] == 2
    assert all(os.path.isfile(p) for p in first["exported"]) and first["validation_verdict"] in ("PASS", "FAIL")
    assert max(first["export_errors"].values()) < 1e-5
    # the task issue's measurement, in both validators against their targets: a 2-iteration policy falls
    assert set(first["targets"]) == {"diffloco hard contact", "MuJoCo"}
    for name, r in first["targets"].items():
        assert r["episodes"] == 3 and (r["target_lin_vel_xy_error"], r["target_ang_vel_z_error"]) == \
            TRACKING_TARGETS[name]
        assert r["met"] is (r["falls"] == 0 and r["lin_vel_xy_error"] <= r["target_lin_vel_xy_error"]
                            and r["ang_vel_z_error"] <= r["target_ang_vel_z_error"])
    assert not any(r["met"] for r in first["targets"].values())
    assert os.path.isfile(os.path.join(run, "validation", "random100", "summary.md"))
    os.remove(first["exported"][0])
    assert job.main([*tiny, "--from_run", run]) == 0
    with open(os.path.join(run, "main_job_summary.json")) as f:
        again = json.load(f)
    assert again["checkpoint"] == first["checkpoint"] and os.path.isfile(again["exported"][0])
    assert again["validation"] == first["validation"]  # same policy, same episodes: the same measurement
    assert again["targets"] == {}  # --target_episodes 0: not measured
    assert job.main([*tiny, "--from_run", run, "--strict"]) == 1  # the validation FAILs
    assert main_job.latest_run(str(tmp_path)) == run  # no new run folder
    # the default shipping: the actor averaged over the checkpoints from --select_from on; a 2-iteration policy falls
    # at once (no step measured: NaN errors), so the job falls back to the best checkpoint ...
    saved = run_checkpoints_of(run)
    assert len(saved) >= 2, saved
    rerun = [*common, "--select_from", "0"]
    assert job.main([*rerun, "--from_run", run]) == 0
    with open(os.path.join(run, "main_job_summary.json")) as f:
        fallback = json.load(f)
    assert fallback["shipped_average_of"] is None and fallback["selection"]["average"]["averaged_iterations"] == saved
    assert os.path.basename(fallback["checkpoint"]).startswith("model_")
    # ... and ships the average when it walks (the measurement's NaNs made those of a policy that walks smoothly)
    measure = shipping.measure_checkpoints

    def walking(*a, **k):
        rows = measure(*a, **k)
        return [{**r, "lin_vel_error": 0.1, "action_rate": 0.2} for r in rows]

    monkeypatch.setattr(shipping, "measure_checkpoints", walking)
    assert job.main([*rerun, "--from_run", run]) == 0
    with open(os.path.join(run, "main_job_summary.json")) as f:
        averaged = json.load(f)
    assert averaged["shipped_average_of"] == saved
    assert os.path.basename(averaged["checkpoint"]) == f"average_{saved[0]}-{saved[-1]}.pt"
    assert os.path.isfile(averaged["checkpoint"]) and all(os.path.isfile(p) for p in averaged["exported"])
    assert averaged["validation"] != first["validation"]  # another policy
    # only the average was measured: the checkpoints are measured when it does not qualify (the fallback above)
    assert all("falls" not in r for r in averaged["selection"]["candidates"])
    assert all("falls" in r for r in fallback["selection"]["candidates"])
    assert main_job.latest_run(str(tmp_path)) == run
    # the window is a fraction of the schedule, not of the iterations run: this 2-iteration run read as the first
    # half of a 4-iteration schedule that the guard stopped keeps only what was saved from iteration 2 on
    assert job.main([*common, "--iterations", "4", "--select_from", "0.5", "--from_run", run]) == 0
    with open(os.path.join(run, "main_job_summary.json")) as f:
        stopped = json.load(f)
    assert [r["iteration"] for r in stopped["selection"]["candidates"]] == [saved[-1]] == [2]
    assert stopped["shipped_average_of"] is None and stopped["shipped_iteration"] == 2


def test_main_job_trains_runs_side_by_side_and_ships_the_one_that_falls_least(tmp_path, monkeypatch):
    """Two runs (seeds 42 and 43, a process each): each ships its own choice, both are measured on the softer ground,
    and the one with the fewer falls over its selection episodes ships; the measurement is the real one (every backend
    runs) with its falls set, since a 2-iteration policy falls at once everywhere."""
    job = _main_job()
    measure = shipping.measure_checkpoints
    calls = []

    def rigged(checkpoints, task, config, backend, **kwargs):
        rows = measure(checkpoints, task, config, backend, **kwargs)
        calls.append((backend, [os.path.basename(os.path.dirname(p)) for _, p in checkpoints]))
        out = []
        for row in rows:
            seed_43 = "_main_job_s43" in row["path"]
            falls = (0 if seed_43 else 3) if backend == "mujoco-soft" else (1 if seed_43 else 0)
            out.append({**row, "lin_vel_error": 0.1, "ang_vel_error": 0.1, "action_rate": 0.2, "falls": falls,
                        "fall_rate": falls / row["episodes"]})
        return out

    monkeypatch.setattr(shipping, "measure_checkpoints", rigged)
    args = ["--iterations", "2", "--num_envs", "8", "--runs", "2", "--ranks", "1", "--episodes", "2",
            "--select_episodes", "4", "--select_soft_episodes", "4", "--select_from", "1", "--no_video",
            "--log_root", str(tmp_path), "agent.save_interval=1"]
    assert job.main(args) == 0
    root = os.path.join(tmp_path, "shac", "anymal_d_flat")
    runs = sorted(os.listdir(root), key=lambda r: r.split("_main_job")[1])
    assert [r.split("_main_job")[1] for r in runs] == ["_s42", "_s43"], runs
    shipped = main_job.latest_run(str(tmp_path))
    assert shipped.endswith("_main_job_s43")  # 1 + 0 falls of 8 against 0 + 3
    with open(os.path.join(shipped, "main_job_summary.json")) as f:
        summary = json.load(f)
    assert summary["seed"] == 43 and summary["checkpoint"].startswith(shipped)
    assert [(r["seed"], r["falls"], r["episodes"], r["shipped"]) for r in summary["runs"]] == [(42, 3, 8, False),
                                                                                               (43, 1, 8, True)]
    assert [r["soft_ground"]["falls"] for r in summary["runs"]] == [3, 0]
    assert all(os.path.isfile(p) and p.startswith(shipped) for p in summary["exported"])
    assert not os.path.isfile(os.path.join(tmp_path, "shac", "anymal_d_flat", runs[0], "main_job_summary.json"))
    # each run measured in hard contact (fast commands), then both on the softer ground in one batch
    assert [c[0] for c in calls] == ["hard", "hard", "mujoco-soft"] and calls[-1][1] == runs
    # the same folders again (after an interruption): the same choice, without training
    calls.clear()
    assert job.main([*args, "--from_run", *[os.path.join(root, r) for r in runs]]) == 0
    assert main_job.latest_run(str(tmp_path)) == shipped and sorted(os.listdir(root)) == sorted(runs)
    assert [c[0] for c in calls] == ["hard", "hard", "mujoco-soft"]


def test_main_job_goes_on_without_a_run_that_fails(tmp_path, monkeypatch, capsys):
    """A training run that exits with an error is reported and left out; the others are used. Here the training
    process is a stand-in that fails for seed 43 and makes its run folder for the others."""
    fake = tmp_path / "scripts"
    fake.mkdir()
    (fake / "train.py").write_text(
        "import os, sys, time\n"
        "a = sys.argv[1:]\n"
        "seed, name, root = a[a.index('--seed') + 1], a[a.index('--run_name') + 1], a[a.index('--log_root') + 1]\n"
        "if seed == '43':\n"
        "    sys.exit('diverged')\n"
        "os.makedirs(os.path.join(root, 'shac', 'anymal_d_flat', time.strftime('%Y-%m-%d_%H-%M-%S') + '_' + name))\n")
    monkeypatch.setattr(main_job, "TRAIN_MODULE", [str(fake / "train.py")])
    args = main_job.MainJobCfg(seed=42, runs=2, ranks=1, num_envs=8, train_minutes=1.0, iterations=2,
                               log_root=str(tmp_path / "logs"))
    log_dirs, _ = main_job.train(args)
    assert [os.path.basename(d).split("_main_job")[1] for d in log_dirs] == ["_s42"]
    out = capsys.readouterr().out
    assert "the run of seed 43 failed (exit code 1)" in out and "[seed 43] diverged" in out
    (fake / "train.py").write_text("import sys\nsys.exit(2)\n")
    with pytest.raises(RuntimeError, match="every training run failed"):
        main_job.train(args)


def run_checkpoints_of(run: str) -> list[int]:
    from diffloco_ext.learning.run_history import run_checkpoints

    return [it for it, _ in run_checkpoints(run)]


def test_main_job_says_so_when_a_run_has_no_checkpoint(tmp_path):
    """A run folder without ``model_<iteration>.pt`` (a training killed before its first save, a wrong
    ``--from_run`` path): a clear error naming the folder, not an index error."""
    empty = tmp_path / "2026-01-01_00-00-00_main_job"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no model_<iteration>.pt checkpoint to ship"):
        shipping.select(main_job.MainJobCfg(), [str(empty)])


def test_main_job_bad_input_is_a_one_line_error_before_any_work(tmp_path):
    """A bad override, bad counts or a folder without checkpoints: one line naming the problem, no traceback, and
    (for the override) before the training starts."""
    from ..scripts.cli_errors import assert_one_line_failure, run_script

    assert_one_line_failure(run_script("main_job", "env.nothing=1", "--log_root", str(tmp_path)), 2,
                            "unknown config key 'env.nothing'")
    assert_one_line_failure(run_script("main_job", "--ranks", "0"), 2, "positive integer")
    assert_one_line_failure(run_script("main_job", "--select_from", "2"), 2, "select_from")
    empty = tmp_path / "2026-01-01_00-00-00_main_job"
    empty.mkdir()
    assert_one_line_failure(run_script("main_job", "--from_run", str(empty)), 1, "no model_<iteration>.pt")
    assert not (tmp_path / "shac").exists()


def test_main_job_finds_the_runs_of_its_task(tmp_path):
    """A gait variant's job trains into its own experiment folder, and finds its runs there (not the trot's)."""
    for experiment in ("anymal_d_flat", "anymal_d_flat_pace"):
        os.makedirs(tmp_path / "shac" / experiment / "2026-01-01_00-00-00_main_job")
    os.makedirs(tmp_path / "shac" / "anymal_d_flat_pace" / "2026-01-02_00-00-00_main_job")
    pace = main_job.main_job_runs(str(tmp_path), "DiffLoco-Velocity-Flat-AnymalD-Pace")
    assert [os.path.relpath(p, tmp_path) for p in pace] == [
        os.path.join("shac", "anymal_d_flat_pace", d) for d in ("2026-01-01_00-00-00_main_job",
                                                                 "2026-01-02_00-00-00_main_job")]
    assert main_job.latest_run(str(tmp_path)).endswith(os.path.join("anymal_d_flat", "2026-01-01_00-00-00_main_job"))
