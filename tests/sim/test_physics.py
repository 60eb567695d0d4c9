"""The simulator against physics: free fall, a pendulum's period, momentum and energy of a free robot."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ellipk

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.robot_description import Body, Joint, RobotDescription
from diffloco_ext.sim import Simulator, build_model


def run(sim, state, control, steps, record=None):
    out = sim.empty_state()
    history = []
    for _ in range(steps):
        sim.step(state, control, out)
        state, out = out, state
        if record is not None:
            history.append(record(state))
    return state, history


def passive(model):
    model.joint_stiffness.zero_()
    model.joint_damping.zero_()
    return model


def test_free_fall_matches_g_t2_over_2():
    """Unactuated robot released at rest: every body falls together, z(t) = z0 - g t^2 / 2 exactly."""
    model = passive(build_model(get_robot("anymal_d"), 2, dtype="float64"))
    sim = Simulator(model, dt=0.004)
    q0 = model.default_q(base_height=10.0)
    state, _ = run(sim, sim.state(q0), sim.control(), 250)
    q, u = state.numpy()
    t = 250 * 0.004
    np.testing.assert_allclose(q[:, 2], 10.0 - 0.5 * 9.81 * t**2, rtol=1e-12)
    np.testing.assert_allclose(u[:, 2], -9.81 * t, rtol=1e-12)
    np.testing.assert_allclose(q[:, 7:], q0[:, 7:], atol=1e-12)  # no internal motion
    np.testing.assert_allclose(q[:, 3:7], q0[:, 3:7], atol=1e-12)


def pendulum(mass=2.0, length=0.8, inertia_yy=0.01) -> RobotDescription:
    base = Body("base", None, None, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), 1.0, (0.0, 0.0, 0.0),
                ((0.1, 0, 0), (0, 0.1, 0), (0, 0, 0.1)))
    bob = Body("bob", "base", Joint("hinge", axis=(0.0, 1.0, 0.0)), (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), mass,
               (0.0, 0.0, -length), ((0.01, 0, 0), (0, inertia_yy, 0), (0, 0, 0.01)))
    return RobotDescription("pendulum", (base, bob))


@pytest.mark.parametrize("amplitude", [0.1, 1.5])
def test_pendulum_period_matches_analytic(amplitude):
    """Physical pendulum (fixed base): T = 4 sqrt(I / (m g l)) K(sin(theta0 / 2)) within 0.1%."""
    mass, length, iyy = 2.0, 0.8, 0.01
    model = build_model(pendulum(mass, length, iyy), 1, dtype="float64", fixed_base=True)
    dt = 1e-3
    sim = Simulator(model, dt=dt)
    q0 = np.array([[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, amplitude]])
    inertia = iyy + mass * length**2
    expected = 4.0 * np.sqrt(inertia / (mass * 9.81 * length)) * ellipk(np.sin(amplitude / 2) ** 2)
    _, angles = run(sim, sim.state(q0), sim.control(np.zeros((1, 1))), int(2.2 * expected / dt),
                    record=lambda s: s.q.numpy()[0, 7])
    angles = np.array(angles)
    # downward zero crossings, linearly interpolated
    idx = np.where((angles[:-1] > 0) & (angles[1:] <= 0))[0]
    crossings = (idx + angles[idx] / (angles[idx] - angles[idx + 1]) + 1) * dt
    assert len(crossings) >= 2
    period = crossings[1] - crossings[0]
    assert period == pytest.approx(expected, rel=1e-3)
    assert np.abs(angles).max() == pytest.approx(amplitude, rel=2e-3)  # amplitude kept (no numerical damping)


def momentum_and_energy(sim, q, u):
    """Linear momentum (world), angular momentum about the world origin, kinetic energy."""
    H, _ = sim.dynamics_terms(q, u)
    p = np.einsum("eij,ej->ei", H, u)
    w, x, y, z = q[:, 3:7].T
    rot = np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], 1)
    angular = np.einsum("eij,ej->ei", rot, p[:, 3:6]) + np.cross(q[:, :3], p[:, :3])
    return p[:, :3], angular, 0.5 * np.einsum("ei,ei->e", u, p)


def momentum_drift(dt, duration=0.5):
    model = passive(build_model(get_robot("anymal_d"), 3, dtype="float64", gravity=(0.0, 0.0, 0.0)))
    sim = Simulator(model, dt=dt)
    rng = np.random.default_rng(0)
    q = model.default_q()
    u = rng.normal(size=(3, model.nv)) * np.r_[np.full(6, 0.5), np.full(12, 2.0)]
    p0, l0, e0 = momentum_and_energy(sim, q, u)
    state, _ = run(sim, sim.state(q, u), sim.control(), int(round(duration / dt)))
    p1, l1, e1 = momentum_and_energy(sim, *state.numpy())
    return (np.abs(p1 - p0).max() / np.abs(p0).max(), np.abs(l1 - l0).max() / np.abs(l0).max(),
            np.abs(e1 - e0).max() / e0.max())


def test_free_robot_conserves_momentum_and_energy_to_first_order():
    """Zero gravity, no actuation, vigorous joint motion for 0.5 s.

    The Moreau scheme evaluates the bias forces at the start velocity, so it is first-order accurate: the
    drift of momentum and energy is small and halves when dt halves. Measured (dt = 1 ms): linear momentum
    ~5e-4, angular momentum ~2e-3, kinetic energy ~2e-3 relative.
    """
    coarse = momentum_drift(1e-3)
    fine = momentum_drift(5e-4)
    for name, c, f in zip(("linear momentum", "angular momentum", "energy"), coarse, fine):
        assert c < 5e-3, f"{name} drift {c:.2e} at dt = 1 ms"
        assert 1.6 < c / f < 2.4, f"{name} drift does not converge at first order: {c:.2e} -> {f:.2e}"
