"""Checkpoint selection: the run's checkpoints measured closed-loop as deployed, the one with the fewest falls (then
the lowest planar error) chosen; the selection's own episodes (seeds) are settable; bad input is a clear error."""

from __future__ import annotations

import pytest

from diffloco_ext.learning.run_history import run_checkpoints
from diffloco_ext.validation.checkpoint_selection import measure_checkpoints, select_checkpoint

from ..script_modules import load_script

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_select_prefers_fewer_falls_then_lower_tracking_error():
    rows = [{"iteration": 500, "fall_rate": 0.12, "lin_vel_error": 0.10},
            {"iteration": 550, "fall_rate": 0.08, "lin_vel_error": 0.14},
            {"iteration": 600, "fall_rate": 0.08, "lin_vel_error": 0.12},
            {"iteration": 650, "fall_rate": 0.20, "lin_vel_error": 0.09}]
    assert select_checkpoint(rows)["iteration"] == 600
    tie = [{"iteration": 1, "fall_rate": 0.0, "lin_vel_error": 0.1}, {"iteration": 2, "fall_rate": 0.0,
                                                                      "lin_vel_error": 0.1}]
    assert select_checkpoint(tie)["iteration"] == 2  # an exact tie: the later checkpoint
    with pytest.raises(ValueError, match="no checkpoints"):
        select_checkpoint([])


def test_select_ranks_chattering_checkpoints_last():
    rows = [{"iteration": 500, "fall_rate": 0.00, "lin_vel_error": 0.10, "action_rate": 1.3},
            {"iteration": 550, "fall_rate": 0.07, "lin_vel_error": 0.14, "action_rate": 0.2},
            {"iteration": 600, "fall_rate": 0.09, "lin_vel_error": 0.12, "action_rate": 0.5}]
    assert select_checkpoint(rows)["iteration"] == 500  # no bound: the fewest falls
    assert select_checkpoint(rows, max_action_rate=0.6)["iteration"] == 550
    rough = [dict(r, action_rate=r["action_rate"] + 1.0) for r in rows]  # all chatter: the smoothest
    assert select_checkpoint(rough, max_action_rate=0.6)["iteration"] == 550
    # a checkpoint that does not track (stands: few falls) ranks after the ones that track
    lazy = rows + [{"iteration": 650, "fall_rate": 0.0, "lin_vel_error": 0.63, "action_rate": 0.3}]
    assert select_checkpoint(lazy, max_action_rate=0.6)["iteration"] == 650
    assert select_checkpoint(lazy, max_action_rate=0.6, max_lin_vel_error=0.25)["iteration"] == 550
    slow = [dict(r, lin_vel_error=r["lin_vel_error"] + 0.5) for r in lazy]  # none tracks: the best tracking
    assert select_checkpoint(slow, max_action_rate=0.6, max_lin_vel_error=0.25)["iteration"] == 600


def test_run_checkpoints_lists_model_files_by_iteration(tmp_path):
    for name in ("model_5.pt", "model_50.pt", "model_100.pt", "model_x.pt", "notes.txt", "model_7.pt.bak"):
        (tmp_path / name).write_bytes(b"")
    assert [i for i, _ in run_checkpoints(str(tmp_path))] == [5, 50, 100]
    assert [i for i, _ in run_checkpoints(str(tmp_path), since=50)] == [50, 100]
    assert run_checkpoints(str(tmp_path), since=101) == []


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    train = load_script("train")
    root = tmp_path_factory.mktemp("runs")
    return train.main(["--task", TASK, "--algo", "shac", "--num_envs", "4", "--log_root", str(root),
                       "agent.num_steps_per_env=4", "agent.save_interval=1", "--max_iterations", "2"])


def test_measure_checkpoints_as_deployed_on_chosen_seeds(tiny_run, tmp_path):
    config = tmp_path / "tiny.yaml"
    # no warm-up: an untrained policy may fall within the default 1 s, and every step before a fall is measured
    config.write_text("extends: anymal_d\nsettings: {seeds: [0], warmup_s: 0.0}\nscenarios:\n"
                      "  - name: random_commands\n    episodes: 2\n    duration_s: 0.5\n")
    candidates = run_checkpoints(tiny_run)
    assert len(candidates) >= 2
    lines = []
    rows = measure_checkpoints(candidates, TASK, str(config), "hard", seeds=[1, 2], episodes=3, printer=lines.append)
    assert [r["iteration"] for r in rows] == [i for i, _ in candidates] and len(lines) == len(rows)
    for row in rows:
        assert row["episodes"] == 6  # 3 episodes x 2 seeds, as asked (the file says 2 x 1)
        assert 0 <= row["falls"] <= 6 and row["falls"] == round(row["fall_rate"] * 6)
        assert row["lin_vel_error"] >= 0.0 and row["ang_vel_error"] >= 0.0 and row["action_rate"] >= 0.0
    assert select_checkpoint(rows) in rows
    with pytest.raises(ValueError, match="no scenario 'no_such_scenario'"):
        measure_checkpoints(candidates, TASK, str(config), "hard", scenario="no_such_scenario")
