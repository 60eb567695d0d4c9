"""scripts/experiments/horizon_gradient_check.py in its small mode (2 envs, 2 policy steps, float64)."""

from __future__ import annotations

import pytest

from diffloco_ext.learning.runner import make_runner
from diffloco_ext.tasks import registry

from ..script_modules import load_script

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_horizon_gradient_check_agrees_with_differences_over_a_short_horizon(tmp_path):
    """``scripts/experiments/horizon_gradient_check.py``: over 2 policy steps in float64 without the clip, BPTT's
    directional derivative equals the central difference (a tool that reported agreement it does not measure would
    fail)."""
    env_cfg = registry.load_cfg(TASK)
    env_cfg.num_envs = 2
    runner = make_runner(registry.make_env(TASK, env_cfg), registry.load_agent_cfg(TASK, "shac"), log_dir=None)
    path = str(tmp_path / "model_0.pt")
    runner.save(path)
    check = load_script("experiments/horizon_gradient_check")
    result = check.main(["--checkpoint", path, "--horizon", "2", "--num_envs", "2", "--warmup", "3", "--dtype",
                         "float64", "--no_clip", "--directions", "2", "--eps", "1e-6"])
    for bptt, (fd,) in zip(result["bptt"], result["fd"]):
        assert abs(bptt) > 0 and bptt == pytest.approx(fd, rel=1e-3, abs=1e-9)
