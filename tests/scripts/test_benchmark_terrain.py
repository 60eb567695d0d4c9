"""scripts/benchmark_terrain.py: a tiny run (timings are for the benchmark to report, not for tests to assert), and
counts below 1 are one-line errors."""

from __future__ import annotations

import math

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_a_tiny_run_times_flat_and_rough_ground(capsys):
    rows = load_script("benchmark_terrain").main(["--num_envs", "2", "--steps", "2"])[2]
    assert set(rows) == {"flat", "rough"}
    assert all(math.isfinite(v) and v > 0 for pair in rows.values() for v in pair)
    assert "forward+backward" in capsys.readouterr().out


def test_counts_below_one_are_one_line_errors(capsys):
    message = one_line_error(capsys, load_script("benchmark_terrain").main, ["--num_envs", "0"])
    assert "--num_envs" in message and "must be >= 1" in message
