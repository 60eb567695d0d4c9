"""scripts/benchmark_aligned_step.py: a tiny run (timings are for the benchmark to report, not for tests to assert),
and counts below 1 are one-line errors."""

from __future__ import annotations

import math

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_a_tiny_run_times_every_physics(capsys):
    results = load_script("benchmark_aligned_step").main(["--num_envs", "2", "--steps", "2", "--threads", "1"])
    rows = results[2]
    assert set(rows) == {"warp smoothed", "aligned simplified", "aligned smoothed", "mujoco"}
    for label, (forward, both) in rows.items():
        assert math.isfinite(forward) and forward > 0
        assert (both is None) == (label == "mujoco") and (both is None or (math.isfinite(both) and both > 0))
    assert "forward+backward" in capsys.readouterr().out


def test_counts_below_one_are_one_line_errors(capsys):
    message = one_line_error(capsys, load_script("benchmark_aligned_step").main, ["--steps", "0"])
    assert "--steps" in message and "must be >= 1" in message
