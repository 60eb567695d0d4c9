"""``scripts/benchmark_sim.py``'s paired measurement of the gradient's cost runs (a smoke test: timings are for the
benchmark to report, not for tests to assert; at a few envs the two rollouts take about as long)."""

from __future__ import annotations

import math

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from ..script_modules import load_script


def test_paired_gradient_ratios_give_one_finite_ratio_per_round():
    bench = load_script("benchmark_sim")
    sim = Simulator(build_model(get_robot("anymal_d"), 8), dt=0.005, contact="smoothed")
    ratios = bench.paired_gradient_ratios(sim, steps=4, rounds=3)
    assert len(ratios) == 3 and all(math.isfinite(r) and r > 0.0 for r in ratios), ratios
