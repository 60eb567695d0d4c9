"""``scripts/benchmark_sim.py``'s paired measurement of the gradient's cost runs (a smoke test: timings are for the
benchmark to report, not for tests to assert; at a few envs the two rollouts take about as long)."""

from __future__ import annotations

import math

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model

from ..script_modules import load_script
from .cli_errors import assert_one_line_failure, one_line_error, run_script


def test_paired_gradient_ratios_give_one_finite_ratio_per_round():
    bench = load_script("benchmark_sim")
    sim = Simulator(build_model(get_robot("anymal_d"), 8), dt=0.005, contact="smoothed")
    ratios = bench.paired_gradient_ratios(sim, steps=4, rounds=3)
    assert len(ratios) == 3 and all(math.isfinite(r) and r > 0.0 for r in ratios), ratios


def test_bad_arguments_are_one_line_errors(capsys):
    """Checked before anything is timed: non-positive counts and time step, a device Warp does not have."""
    import warp as wp

    main = load_script("benchmark_sim").main
    for argv, match in ((["--num-envs", "4", "0"], "--num-envs and --steps must be at least 1"),
                        (["--steps", "0"], "--num-envs and --steps must be at least 1"),
                        (["--dt", "-0.005"], "--dt must be a time step > 0 s"),
                        (["--paired-rounds", "-1"], "0 (off) or more"),
                        (["--device", "tpu"], "unknown device 'tpu'")):
        assert match in one_line_error(capsys, main, argv)
    if not wp.is_cuda_available():
        assert "Warp finds no CUDA device" in one_line_error(capsys, main, ["--device", "cuda"])


def test_a_device_this_machine_lacks_fails_without_a_traceback():
    import warp as wp

    if wp.is_cuda_available():
        return  # nothing to refuse here
    assert_one_line_failure(run_script("benchmark_sim", "--device", "cuda:0"), 2, "no CUDA device")
