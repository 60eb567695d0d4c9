"""diffloco_ext.validation.experiment_runs: runs trained to their budget, resumed where they stopped, each checkpoint
measured once into its own file, and the reach tables assembled from the files."""

from __future__ import annotations

import json
import os
import sys

import pytest

from diffloco_ext.validation.experiment_runs import (
    ExperimentRunner,
    MeasureCfg,
    RunSpec,
    first_reach,
    group_reach,
    reach_ratio,
)

TASK = "DiffLoco-Velocity-Flat-AnymalD"
TINY = ("agent.num_steps_per_env=4",)


def _config(tmp_path) -> str:
    config = tmp_path / "tiny.yaml"
    config.write_text("extends: anymal_d\nsettings: {seeds: [0], warmup_s: 0.0}\nscenarios:\n"
                      "  - name: random_commands\n    episodes: 2\n    duration_s: 0.5\n")
    return str(config)


def test_a_run_is_trained_to_its_budget_resumed_and_each_checkpoint_measured_once(tmp_path):
    lines = []
    runner = ExperimentRunner(str(tmp_path / "exp"), MeasureCfg(_config(tmp_path)), printer=lines.append)
    short = RunSpec("shac-s1", "SHAC", TASK, seed=1, num_envs=4, max_iterations=2, overrides=TINY, measure_every=1)
    assert runner.status(short).folder is None
    done = runner.train(short)
    assert done.finished and done.iterations == 2 and done.samples > 0 and done.training_minutes > 0
    assert runner.train(short).summary == done.summary  # finished: nothing is run again
    # a longer budget under the same name (as a run stopped midway): it resumes from its newest checkpoint
    os.remove(os.path.join(runner.root, "runs", "shac-s1.json"))
    longer = RunSpec("shac-s1", "SHAC", TASK, seed=1, num_envs=4, max_iterations=3, overrides=TINY, measure_every=1)
    cmd = runner.command(longer, runner.status(longer))
    assert cmd[cmd.index("--max_iterations") + 1] == "1" and "--resume" in cmd
    assert cmd[cmd.index("--checkpoint") + 1] == "model_2.pt"
    status = runner.train(longer)
    assert status.iterations == 3 and len(runner.folders(longer)) == 2 and status.samples > done.samples
    rows = runner.measure(longer)
    assert [r["iteration"] for r in rows] == [1, 2, 3]  # the origin's checkpoints and the resumed run's
    assert all(0.0 <= r["fall_rate"] <= 1.0 and r["lin_vel_error"] >= 0.0 for r in rows)
    assert [r["samples"] for r in rows] == sorted(r["samples"] for r in rows)
    assert rows[-1]["samples"] == pytest.approx(status.samples)
    measured = [line for line in lines if "measuring" in line]
    assert runner.measure(longer) == rows and [line for line in lines if "measuring" in line] == measured
    with open(os.path.join(runner.measurement_dir(longer), "model_2.json")) as f:
        assert json.load(f)["backend"] == "hard"


def test_commands_budgets_and_bad_specs(tmp_path):
    runner = ExperimentRunner(str(tmp_path), MeasureCfg("x.yaml"))
    ppo = RunSpec("ppo-s7", "PPO", TASK, algo="ppo", seed=7, num_envs=512, ranks=2, max_minutes=45.0)
    cmd = runner.command(ppo, runner.status(ppo))
    assert cmd[:4] == [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    assert cmd[cmd.index("--algo") + 1] == "ppo" and cmd[cmd.index("--max_minutes") + 1] == "45.000"
    assert "--max_iterations" not in cmd and "--resume" not in cmd and cmd[-1] == "agent.save_interval=50"
    assert cmd[cmd.index("--experiment_name") + 1] == "ppo-s7"
    for bad in (dict(algo="sac"), dict(max_iterations=None), dict(ranks=0), dict(name="a/b")):
        with pytest.raises(ValueError, match="run|algo|budget"):
            RunSpec(**{**dict(name="r", group="g", task=TASK, max_iterations=2), **bad})


def test_reach_tables_from_rows():
    def rows(*points):  # (planar error, fall rate, samples, minutes) per checkpoint
        return [dict(iteration=i, lin_vel_error=e, ang_vel_error=0.1, fall_rate=f, samples=s, training_minutes=m)
                for i, (e, f, s, m) in enumerate(points)]

    fast = rows((0.5, 0.0, 1e5, 1.0), (0.25, 0.02, 2e5, 2.0), (0.18, 0.0, 3e5, 3.0))
    assert first_reach(fast, 0.2)["iteration"] == 2  # the 0.25 checkpoint falls too often for 0.3
    assert first_reach(fast, 0.3)["iteration"] == 2 and first_reach(fast, 0.1) is None
    assert first_reach(fast, 0.3, max_fall_rate=0.05)["iteration"] == 1
    runs = {"a1": ("A", fast), "a2": ("A", rows((0.28, 0.0, 4e5, 4.0))),
            "b1": ("B", rows((0.29, 0.0, 4e6, 30.0), (0.15, 0.0, 8e6, 40.0)))}
    reach = group_reach(runs, [0.3, 0.2, 0.15])
    assert reach["A"]["0.3"] == {"runs": 2, "reached": 2, "samples": {"median": 3.5e5, "min": 3e5, "max": 4e5},
                                 "training_minutes": {"median": 3.5, "min": 3.0, "max": 4.0}}
    assert reach["A"]["0.15"]["reached"] == 0 and reach["A"]["0.15"]["samples"] is None
    ratio = reach_ratio(reach, "A", "B")
    assert ratio["0.3"] == {"median": 4e6 / 3.5e5, "min": 4e6 / 4e5, "max": 4e6 / 3e5} and ratio["0.15"] is None


def test_a_checkpoint_measured_in_its_task_env_under_each_physics(tmp_path):
    from diffloco_ext.validation.task_env_measure import measure_in_task_env

    from ..script_modules import load_script

    run = load_script("train").main(["--task", "DiffLoco-Quadruped-Forward", "--num_envs", "2", "--max_iterations",
                                     "1", "--log_root", str(tmp_path), "agent.num_steps_per_env=2"])
    results = {p: measure_in_task_env(f"{run}/model_1.pt", "DiffLoco-Quadruped-Forward", p, num_envs=3, seconds=0.3)
               for p in ("hard", "mujoco")}
    for physics, r in results.items():
        assert r["physics"] == physics and r["episodes"] == 3 and 0.0 <= r["fall_rate"] <= 1.0
        assert {"return", "forward_speed", "action_rate"} <= set(r)
    assert results["hard"]["forward_speed"] != results["mujoco"]["forward_speed"]  # two physics, one start
    with pytest.raises(ValueError, match="unknown physics"):
        measure_in_task_env(f"{run}/model_1.pt", "DiffLoco-Quadruped-Forward", "bullet")
