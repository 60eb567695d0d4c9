"""diffloco_ext.learning.run_history: a run read back from its folder, a resumed run joined to its origin."""

from __future__ import annotations

import os

import numpy as np

from diffloco_ext.learning import run_history

from ..script_modules import load_script

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_a_resumed_run_reads_joined_to_its_origin(tmp_path):
    """A run resumed from another's checkpoint with more envs (``--resume --num_envs``): its params record the
    checkpoint, and its history reads the two as one run: the origin's iterations up to the checkpoint, then
    the resumed run's, samples counting on (4 envs x 3 steps per iteration, then 6 x 3) and the checkpoints of both."""
    train = load_script("train")
    common = ["--task", TASK, "--algo", "shac", "--log_root", str(tmp_path), "agent.num_steps_per_env=3",
              "agent.save_interval=1", "--max_iterations", "2"]
    first = train.main([*common, "--num_envs", "4", "--run_name", "first"])
    second = train.main([*common, "--num_envs", "6", "--run_name", "second", "--resume", "--load_run", ".*first",
                         "--checkpoint", "model_1.pt"])
    assert run_history.origin(second) == (first, 1) and run_history.origin(first) is None
    joined = run_history.read_run(second)
    steps, cumulative = joined["samples"][:, 0], joined["samples"][:, 1]
    assert list(steps) == [0, 1, 2]  # the first run's iteration 0 (model_1.pt), then the resumed run's 1 and 2
    # samples = the logged rate x time, the rate truncated to an integer (rsl_rl's logger): an iteration of n samples
    # counts n x floor(r) / r, within n / floor(r) below n
    per_iteration, expected = np.diff(np.concatenate([[0.0], cumulative])), np.array([12.0, 18.0, 18.0])
    rate = joined["Perf/total_fps"][:, 1]
    assert np.all(per_iteration <= expected + 1e-6)
    assert np.all(per_iteration >= expected * (1.0 - 1.0 / np.maximum(rate, 1.0)) - 1e-6)
    assert np.all(np.diff(joined["Perf/total_fps"][:, 2]) >= 0)  # wall-clock counts on
    assert [it for it, _ in run_history.chain_checkpoints(second)] == [1, 2, 3]
    assert run_history.chain_checkpoints(second)[0][1] == os.path.join(first, "model_1.pt")
    training = joined["training"]
    assert list(training[:, 0]) == [0, 1, 2] and np.all(np.diff(training[:, 1]) > 0)
    at = run_history.progress_at(second, joined, [1, 2, 3])  # SHAC's model_<k>.pt: after k iterations
    np.testing.assert_allclose(at["samples"], cumulative)
    np.testing.assert_allclose(at["training_minutes"], training[:, 1] / 60.0)
    assert np.all(np.diff(at["wall_minutes"]) >= 0)
