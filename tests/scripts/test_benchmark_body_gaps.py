"""scripts/benchmark_body_gaps.py: a tiny run of the interleaved rounds (timings are for the benchmark to report,
not for tests to assert), and counts below 1 are one-line errors."""

from __future__ import annotations

import math

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_a_tiny_run_times_both_ways_of_reading_the_gaps(capsys):
    results = load_script("benchmark_body_gaps").main(["--num-envs", "2", "--steps", "2", "--substeps", "1",
                                                       "--rounds", "1"])
    assert set(results) == {True, False}
    assert all(set(r) == {True, False} and all(math.isfinite(s) and s > 0 for s in r.values())
               for r in results.values())
    assert "gaps after the step" in capsys.readouterr().out


def test_counts_below_one_are_one_line_errors(capsys):
    message = one_line_error(capsys, load_script("benchmark_body_gaps").main, ["--steps", "0", "--rounds", "-1"])
    assert "--steps 0, --rounds -1: every count must be at least 1" in message
