"""``tasks/schedule.py``: the one linear ramp behind SHAC's value-gradient and Lipschitz ramps, the task's
after-curriculum weights and the Isaac Lab curriculum term."""
from __future__ import annotations

import pytest

from diffloco_ext.tasks.schedule import checked_ramp, ramp_fraction


def test_ramp_fraction_is_zero_before_the_start_linear_between_and_one_from_the_end():
    assert [ramp_fraction(s, (10, 20)) for s in (0, 10, 15, 19, 20, 500)] == [0.0, 0.0, 0.5, 0.9, 1.0, 1.0]
    assert ramp_fraction(None, (0, 20)) == 0.0  # the origin (the curriculum's end) not reached yet
    assert [ramp_fraction(s, (5, 5)) for s in (4, 5)] == [0.0, 1.0]  # a step
    assert ramp_fraction(0, (0, 0)) == 1.0


@pytest.mark.parametrize("bad", [(20, 10), (-1, 5), (1, 2, 3), (1,), "ab", None, ("x", 2)])
def test_a_bad_ramp_is_an_error_naming_it(bad):
    with pytest.raises(ValueError, match="env.rewards.weights_ramp must be \\(start, end\\) policy steps"):
        checked_ramp("env.rewards.weights_ramp", bad, "policy steps")


def test_the_task_and_shac_reject_a_bad_ramp():
    from diffloco_ext.tasks import registry

    cfg = registry.load_cfg("DiffLoco-Velocity-Flat-AnymalD")
    cfg.num_envs = 2
    cfg.rewards.weights_ramp = (9600, 6400)
    with pytest.raises(ValueError, match="env.rewards.weights_ramp must be"):
        registry.make_env("DiffLoco-Velocity-Flat-AnymalD", cfg)
    from diffloco_ext.learning.shac import SHAC

    with pytest.raises(ValueError, match="value_gradient_ramp must be \\(start, end\\) iterations"):
        SHAC(None, None, num_envs=2, horizon=4, value_gradient_ramp=(20, 10))
