"""scripts/experiments/compare_learners.py: training curves of runs side by side, every checkpoint measured closed loop,
a resumed run joined to its origin, and when a run counts as reaching another's tracking."""

from __future__ import annotations

import numpy as np

from ..script_modules import load_script

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_compare_learners_measures_checkpoints_closed_loop(tmp_path):
    """Training curves of two runs, then every checkpoint in hard contact on a small
    random-command scenario, with samples and minutes that grow with the checkpoint's iteration."""
    import json

    train, compare = load_script("train"), load_script("experiments/compare_learners")
    common = ["--task", TASK, "--algo", "shac", "--num_envs", "4", "--log_root", str(tmp_path),
              "agent.num_steps_per_env=4", "agent.save_interval=1", "--max_iterations", "2"]
    runs = [train.main([*common, "--run_name", name, "--seed", seed]) for name, seed in (("a", "1"), ("b", "2"))]
    config = tmp_path / "tiny.yaml"
    # no warm-up: an untrained policy may fall within the default 1 s, and every step before a fall is measured
    config.write_text("extends: anymal_d\nsettings: {seeds: [0], warmup_s: 0.0}\nscenarios:\n"
                      "  - name: random_commands\n    episodes: 2\n    duration_s: 1.0\n")
    out = tmp_path / "cmp.png"
    assert compare.main(["--runs", *runs, "--labels", "A", "B", "--out", str(out), "--closed_loop",
                         "--closed_loop_config", str(config), "--jobs", "2"]) == 0
    assert (tmp_path / "cmp_closed_loop.png").is_file()  # (2-iteration runs finish no episode: no training curves)
    summary = json.loads((tmp_path / "cmp_closed_loop.json").read_text())
    assert set(summary) == {"A", "B"}
    for run in summary.values():
        curve = run["curve"]
        assert [r["iteration"] for r in curve] == sorted(r["iteration"] for r in curve) and len(curve) >= 2
        assert all(0.0 <= r["fall_rate"] <= 1.0 and r["lin_vel_error"] >= 0.0 for r in curve)
        assert all(b["samples"] > a["samples"] and b["minutes"] >= a["minutes"] for a, b in zip(curve, curve[1:]))
        assert run["final"] == {k: v for k, v in curve[-1].items() if k not in ("samples", "minutes")}
    # two processes measure each checkpoint as one does (the checkpoints dealt out across the runs)
    assert [r["lin_vel_error"] for r in summary["B"]["curve"]] == [
        r["lin_vel_error"] for r in compare.closed_loop([runs[1]], TASK, str(config), jobs=1)[0]]
    # --closed_loop_every: only the checkpoints at multiples of it
    assert [r["iteration"] for r in compare.closed_loop([runs[1]], TASK, str(config), every=2)[0]] == [2]


def test_compare_learners_counts_a_checkpoint_as_reaching_only_without_more_falls(capsys):
    """A checkpoint whose planar error is below the other run's final one but which falls more often has not reached
    its tracking (the error is measured before the falls); the first one that matches both has."""
    compare = load_script("experiments/compare_learners")

    def curve(rows):
        rows = [dict(zip(("iteration", "lin_vel_error", "fall_rate"), r), ang_vel_error=0.1) for r in rows]
        return {"rows": rows, "samples": np.arange(1.0, len(rows) + 1) * 1e6, "minutes": np.arange(1.0, len(rows) + 1)}

    curves = {"A": curve([(50, 0.10, 0.67), (100, 0.12, 0.01), (150, 0.14, 0.0), (200, 0.12, 0.0)]),
              "B": curve([(50, 0.30, 0.0), (100, 0.12, 0.0)])}
    summary = compare.report_closed_loop(curves)
    assert summary["A"]["reaches_B"] == {"iteration": 200, "samples": 4e6, "minutes": 4.0}  # not 50 (falls), not 100
    assert summary["B"]["reaches_A"]["iteration"] == 100
    curves["A"]["rows"][-1]["fall_rate"] = 0.02
    assert "reaches_B" not in compare.report_closed_loop(curves)["A"]
    assert "A does not reach B's final planar error 0.120 m/s with at most its falls (0%)" in capsys.readouterr().out


def test_compare_learners_reports_the_first_checkpoint_under_each_threshold():
    """``--reach``: the first checkpoint at or below each planar error with at most the allowed falls (and yaw)."""
    compare = load_script("experiments/compare_learners")
    rows = [dict(iteration=i, lin_vel_error=e, fall_rate=f, ang_vel_error=y)
            for i, e, f, y in ((10, 0.4, 0.0, 0.2), (20, 0.24, 0.02, 0.2), (30, 0.22, 0.0, 0.5), (40, 0.2, 0.0, 0.25))]
    curves = {"A": {"rows": rows, "samples": np.array([1.0, 2.0, 3.0, 4.0]), "minutes": np.array([1.0, 2, 3, 4])}}
    reached = compare.report_reach(curves, [0.25, 0.1], yaw=0.3, falls=0.0)["A"]
    assert reached["0.25"] == {"iteration": 40, "samples": 4.0, "minutes": 4.0}  # 20 falls, 30 misses the yaw
    assert reached["0.1"] is None
    assert compare.report_reach(curves, [0.25], yaw=None, falls=0.0)["A"]["0.25"]["iteration"] == 30
