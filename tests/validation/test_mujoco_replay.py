"""The MuJoCo replay's drive torques equal the simulator's actuator stage (same semantics, two implementations)."""

from __future__ import annotations

import numpy as np

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.validation import MujocoReplay
from diffloco_ext.validation.mujoco_replay import dc_motor_implicit


def test_numpy_drive_torque_matches_the_warp_actuator_stage():
    robot = get_robot("anymal_d")
    n = 64
    model = build_model(robot, n, dtype="float64", gravity=(0.0, 0.0, 0.0))
    sim = Simulator(model, dt=1e-4)
    rng = np.random.default_rng(0)
    q = model.default_q()
    q[:, 7:] += rng.uniform(-1, 1, (n, 12))
    u = np.zeros((n, model.nv))
    u[:, 6:] = rng.uniform(-12, 12, (n, 12))  # beyond the 7.5 rad/s no-load speed: the envelope matters
    target = q[:, 7:] + rng.uniform(-3, 3, (n, 12))  # large errors: saturation at 80 N m
    data = sim.step(sim.state(q, u), sim.control(target), sim.empty_state())
    # the step evaluates the PD at the midpoint q_M = q + dt/2 u, the predictor with H's diagonal there
    mass_diag = np.diagonal(data.H.numpy(), axis1=1, axis2=2)[:, 6:]
    other = -data.bias.numpy()[:, 6:] - model.joint_friction_damping.numpy() * u[:, 6:]
    tau_start, slope = dc_motor_implicit(robot.actuator, target, data.q_mid.numpy()[:, 7:], u[:, 6:], sim.dt,
                                         mass_diag, other)
    expected = tau_start - slope * (data.u_new.numpy()[:, 6:] - u[:, 6:])
    np.testing.assert_allclose(data.tau.numpy(), expected, rtol=1e-12, atol=1e-9)
    assert np.abs(expected).max() == robot.actuator.effort_limit  # the clip was exercised
    assert (slope > 0).any() and (slope == 0).any()  # the implicit speed line too


def test_replay_holds_anymal_d_standing():
    robot = get_robot("anymal_d")
    replay = MujocoReplay(robot, dt=0.005)
    q0 = np.zeros(19)
    q0[2], q0[3], q0[7:] = robot.default_base_height, 1.0, robot.default_joint_positions()
    replay.reset(q0)
    for _ in range(400):
        replay.step(robot.default_joint_positions())
    assert 0.5 < replay.q[2] < 0.6
    assert np.abs(replay.foot_positions()[:, 2] - robot.feet[0].radius).max() < 2e-3
