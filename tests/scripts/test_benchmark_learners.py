"""``scripts/benchmark_learners.py``: a smoke run of the interleaved rounds
(timings are for the benchmark to report, not for tests to assert)."""

from __future__ import annotations

import json
import math

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_a_small_benchmark_reports_consistent_rates(tmp_path):
    bench = load_script("benchmark_learners")
    out = tmp_path / "bench.json"
    summary = bench.main(["--shac_envs", "4", "--ppo_envs", "8", "--rounds", "2", "--iterations", "1", "--warmup", "1",
                          "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(summary))
    assert len(summary["rounds"]) == 2
    best = summary["best"]
    for key in ("shac_s_per_it", "ppo_s_per_it", "rollout_s"):
        assert math.isfinite(best[key]) and best[key] > 0.0
        assert best[key] == min(r[key] for r in summary["rounds"])
    assert best["shac_samples_per_s"] == 4 * summary["shac_steps"] / best["shac_s_per_it"]
    assert summary["ppo_over_shac_samples_per_s"] == best["ppo_samples_per_s"] / best["shac_samples_per_s"]


def test_counts_below_one_are_one_line_errors(capsys):
    main = load_script("benchmark_learners").main
    for flag in ("--rounds", "--iterations", "--warmup", "--shac_envs", "--ppo_envs"):
        assert f"{flag}: expected a positive integer, got 0" in one_line_error(capsys, main, [flag, "0"])
