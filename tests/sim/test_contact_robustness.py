"""Fuzzing: random (often absurd) states and actions never put NaN/inf into the outputs; divergence is flagged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams

NUM_ENVS = 1000
STEPS = 10
EXAMPLES = 10  # 10 examples x 1000 envs x 10 steps = 1e5 env-steps per mode


@pytest.fixture(scope="module", params=["smoothed", "hard", "soft"])
def simulator(request):
    model = build_model(get_robot("anymal_d"), NUM_ENVS, dtype="float32")
    return Simulator(model, dt=0.005, contact=ContactParams(mode=request.param))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), speed=st.floats(0.0, 200.0), height=st.floats(-0.5, 1.5),
       action=st.floats(0.0, 20.0), extreme=st.floats(1.0, 1.0e8))
def test_random_states_never_leak_nan(simulator, seed, speed, height, action, extreme):
    model = simulator.model
    rng = np.random.default_rng(seed)
    q = model.default_q()
    q[:, :2] = rng.uniform(-5, 5, (NUM_ENVS, 2))
    q[:, 2] = height + rng.uniform(-0.3, 0.3, NUM_ENVS)
    quat = rng.normal(size=(NUM_ENVS, 4))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q[:, 7:] = rng.uniform(-np.pi, np.pi, (NUM_ENVS, model.num_joints))
    u = rng.normal(scale=speed, size=(NUM_ENVS, model.nv))
    u[:10] = rng.normal(size=(10, model.nv)) * extreme  # a few envs far outside anything physical
    target = model.default_joint_pos + rng.normal(scale=action, size=(NUM_ENVS, model.num_joints))
    state, out = simulator.state(q, u), simulator.empty_state()
    control = simulator.control(target)
    flagged = np.zeros(NUM_ENVS, dtype=bool)
    for _ in range(STEPS):
        data = simulator.step(state, control, out)
        qn, un = out.numpy()
        assert np.isfinite(qn).all() and np.isfinite(un).all()
        assert np.isfinite(data.contact.force.numpy()).all()
        div = data.diverged.numpy().astype(bool)
        # a flagged env kept its previous state exactly
        np.testing.assert_array_equal(qn[div], state.q.numpy()[div])
        flagged |= div
        state, out = out, state
    if extreme > 1e5:
        assert flagged[:10].all(), "envs moving at absurd speeds were not flagged"


def test_non_finite_input_is_flagged():
    model = build_model(get_robot("anymal_d"), 3, dtype="float32")
    sim = Simulator(model, dt=0.005, contact="smoothed")
    q = model.default_q()
    q[1, 8] = np.nan
    u = np.zeros((3, model.nv), dtype=np.float32)
    u[2, 0] = np.inf
    out = sim.empty_state()
    data = sim.step(sim.state(q, u), sim.control(), out)
    np.testing.assert_array_equal(data.diverged.numpy(), [0, 1, 1])
    assert np.isfinite(out.q.numpy()[0]).all()
