"""Every user-facing script explains itself: ``--help`` prints what it does (its docstring) with an example command,
and exits 0. (train.py and main_job.py: tests/learning.)"""

from __future__ import annotations

import pytest

from ..script_modules import SCRIPTS, load_script

NAMES = ["play", "list_envs", "validate", "cross_validate", "export_robot", "benchmark_sim", "benchmark_learners",
         "benchmark_aligned_step", "benchmark_terrain",
         "benchmark_body_gaps", "experiments/compare_learners", "experiments/kappa_sweep",
         "experiments/shac_toy_comparison", "experiments/horizon_gradient_check", "experiments/surrogate_jacobians",
         "experiments/gaits", "experiments/gradient_landscapes",
         "experiments/run_all", "experiments/policy_gradient_quality", "tools/transcribe_assets",
         "tools/compare_checkpoints"]


def test_every_script_is_listed_here():
    found = {str(p.relative_to(SCRIPTS).with_suffix("")) for p in SCRIPTS.rglob("*.py")}
    assert found - {"train", "main_job"} == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_help_describes_the_script_with_an_example(name, capsys):
    module = load_script(name)
    with pytest.raises(SystemExit) as exc:
        module.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ")
    assert module.__doc__.splitlines()[0] in out  # what it does
    assert f"scripts/{name}.py" in out  # how it is run
