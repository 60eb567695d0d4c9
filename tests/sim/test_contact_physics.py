"""Contact against physics: standing still, Coulomb friction on an incline, inelastic drops, kappa -> inf."""

from __future__ import annotations

import numpy as np
import pytest

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams

from .contact_scenes import block, rollout


def test_hard_contact_robot_holds_default_pose_within_1mm_for_10s():
    """ANYmal D under PD to its default pose, dropped from 2 cm: after 5 s of settling, 10 s within 1 mm."""
    robot = get_robot("anymal_d")
    model = build_model(robot, 1, dtype="float64")
    sim = Simulator(model, dt=0.005, contact="hard")
    state = sim.state(model.default_q(base_height=robot.default_base_height + 0.02))
    control = sim.control()
    state, _ = rollout(sim, state, control, 1000, lambda s, d: None)
    base0 = state.q.numpy()[0, :3].copy()
    feet0 = sim.foot_kinematics(state.q, state.u)[0].numpy()[0]
    state, hist = rollout(sim, state, control, 2000,
                          lambda s, d: (s.q.numpy()[0, :3].copy(), d.contact.gap.numpy()[0].copy()))
    base = np.array([h[0] for h in hist])
    gaps = np.array([h[1] for h in hist])
    feet = sim.foot_kinematics(state.q, state.u)[0].numpy()[0]
    assert np.abs(base - base0).max() < 1e-3, f"base moved {np.abs(base - base0).max():.2e} m"
    assert np.abs(feet - feet0).max() < 1e-3, f"feet slipped {np.abs(feet - feet0).max():.2e} m"
    assert 0.0 < -gaps.max() and -gaps.min() < 1e-3, f"penetration {-gaps.min():.2e} m (all feet must touch)"


@pytest.mark.parametrize("mu", [0.2, 0.25, 0.35, 0.5])
def test_block_on_incline_sticks_or_slides_by_coulomb(mu):
    """Incline of 0.3 rad (gravity tilted): sticks for mu > tan(theta); else slides at g (sin - mu cos) +- 1%."""
    theta, g = 0.3, 9.81
    gravity = (-g * np.sin(theta), 0.0, -g * np.cos(theta))
    model = build_model(block(), 1, dtype="float64", gravity=gravity, friction=mu)
    sim = Simulator(model, dt=0.002, contact="hard")
    state = sim.state(model.default_q())
    _, xs = rollout(sim, state, sim.control(np.zeros((1, 0))), 500, lambda s, d: s.q.numpy()[0, :3].copy())
    xs = np.array(xs)
    t = np.arange(1, 501) * 0.002
    accel = -2.0 * np.polyfit(t[100:], xs[100:, 0], 2)[0]
    expected = max(g * (np.sin(theta) - mu * np.cos(theta)), 0.0)
    if expected == 0.0:
        assert abs(xs[-1, 0] - xs[100, 0]) < 1e-5, "the block creeps although mu > tan(theta)"
    else:
        assert accel == pytest.approx(expected, rel=1e-2)
    assert np.abs(xs[:, 1]).max() < 1e-4 and np.abs(xs[:, 2] - 0.05).max() < 1e-3


def test_drop_is_inelastic_with_bounded_penetration():
    """A block dropped from 0.5 m stops at the ground without rebounding; penetration stays below v dt.

    The only upward motion after impact is the capped stabilisation removing the impact's penetration
    (``max_push_speed``, 0.05 m/s = 1.6% of the impact speed); it never lifts the block off the ground.
    """
    model = build_model(block(), 1, dtype="float64", friction=1.0)
    dt = 0.002
    sim = Simulator(model, dt=dt, contact="hard")
    q = model.default_q()
    q[0, 2] = 0.55
    _, hist = rollout(sim, sim.state(q), sim.control(np.zeros((1, 0))), 600,
                      lambda s, d: (s.q.numpy()[0, 2], s.u.numpy()[0, 2], d.contact.gap.numpy()[0].min()))
    z, vz, gap = (np.array(x) for x in zip(*hist))
    impact = np.argmax(gap < 0.0)
    speed = np.sqrt(2 * 9.81 * 0.5)
    assert impact > 0
    assert vz[impact + 1:].max() <= 0.05 * (1 + 1e-5), "rebound after impact"
    assert z[impact:].max() < 0.05 + 1e-4, "the block leaves the ground after impact"
    assert -gap.min() < speed * dt, f"penetration {-gap.min():.2e} m above v dt = {speed * dt:.2e} m"
    slop = sim.contact.slop  # resting contacts are held at g = -slop on purpose
    assert abs(z[-1] - (0.05 - slop)) < 1e-5, "does not come to rest on the ground"


def _stand_trajectory(mode, kappa=300.0):
    model = build_model(get_robot("anymal_c"), 1, dtype="float64")
    sim = Simulator(model, dt=0.005, contact=ContactParams(mode=mode, kappa=kappa, stabilization=0.0))
    state = sim.state(model.default_q(base_height=0.62))
    _, zs = rollout(sim, state, sim.control(), 200, lambda s, d: s.q.numpy()[0, 2])
    return np.array(zs)


def test_smoothed_tends_to_hard_as_kappa_grows():
    """Drop-and-stand of ANYmal C: max |z_smoothed - z_hard| shrinks as kappa grows (table in docs/simulator.md,
    "κ against hard contact").

    Both without stabilisation, so that the two differ only by the sigmoid.
    """
    hard = _stand_trajectory("hard")
    diffs = [np.abs(_stand_trajectory("smoothed", kappa) - hard).max() for kappa in (1e2, 1e3, 1e4, 1e5)]
    assert all(a > b for a, b in zip(diffs, diffs[1:])), diffs
    assert diffs[-1] < 0.05 * diffs[0]
