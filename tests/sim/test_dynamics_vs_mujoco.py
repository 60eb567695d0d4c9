"""H(q) and bias(q, u) against MuJoCo's mj_fullM and qfrc_bias; foot positions against MuJoCo's geoms."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.mjcf_exporter import to_mjmodel
from diffloco_ext.sim import Simulator, build_model

NUM_STATES = 24


def random_states(model, rng):
    n = model.num_envs
    q = model.default_q()
    q[:, :3] = rng.uniform(-3.0, 3.0, (n, 3))
    quat = rng.normal(size=(n, 4))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q[:, 7:] = rng.uniform(-2.0, 2.0, (n, model.num_joints))
    u = rng.normal(scale=2.0, size=(n, model.nv))
    return q, u


@pytest.mark.parametrize("robot_name", ["anymal_c", "anymal_d", "warp_quadruped"])
def test_mass_matrix_and_bias_match_mujoco(robot_name):
    robot = get_robot(robot_name)
    model = build_model(robot, NUM_STATES, dtype="float64")
    sim = Simulator(model)
    q, u = random_states(model, np.random.default_rng(7))
    H, bias = sim.dynamics_terms(q, u)
    mj = to_mjmodel(robot, actuators="none", floor=False)
    data = mujoco.MjData(mj)
    for e in range(NUM_STATES):
        data.qpos[:], data.qvel[:] = q[e], u[e]
        mujoco.mj_forward(mj, data)
        M = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, data, M)
        assert np.abs(H[e] - M).max() <= 1e-8 * np.abs(M).max(), f"state {e}: H differs"
        assert np.abs(bias[e] - data.qfrc_bias).max() <= 1e-8 * np.abs(data.qfrc_bias).max(), f"state {e}: bias"
    # the states are not trivial: H varies from state to state
    assert np.abs(H[0] - H[1]).max() > 1e-2


def test_foot_positions_and_velocities_match_mujoco():
    robot = get_robot("anymal_d")
    model = build_model(robot, 8, dtype="float64")
    sim = Simulator(model)
    q, u = random_states(model, np.random.default_rng(3))
    state = sim.state(q, u)
    pos, vel = (a.numpy() for a in sim.foot_kinematics(state.q, state.u))
    mj = to_mjmodel(robot, actuators="none", floor=False)
    data = mujoco.MjData(mj)
    res = np.zeros(6)
    for e in range(model.num_envs):
        data.qpos[:], data.qvel[:] = q[e], u[e]
        mujoco.mj_forward(mj, data)
        for f, foot in enumerate(robot.feet):
            gid = mj.geom(foot.name).id
            np.testing.assert_allclose(pos[e, f], data.geom_xpos[gid], atol=1e-12)
            mujoco.mj_objectVelocity(mj, data, mujoco.mjtObj.mjOBJ_GEOM, gid, res, 0)  # world frame [rot, lin]
            np.testing.assert_allclose(vel[e, f], res[3:], atol=1e-11)


def test_float32_matches_float64():
    robot = get_robot("anymal_d")
    q, u = random_states(build_model(robot, 4, dtype="float64"), np.random.default_rng(1))
    H64, b64 = Simulator(build_model(robot, 4, dtype="float64")).dynamics_terms(q, u)
    H32, b32 = Simulator(build_model(robot, 4, dtype="float32")).dynamics_terms(q, u)
    assert np.abs(H32 - H64).max() <= 1e-5 * np.abs(H64).max()
    assert np.abs(b32 - b64).max() <= 1e-5 * np.abs(b64).max()
