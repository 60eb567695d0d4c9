"""The Isaac Lab env config and the validation backend on both engines (one worker process per engine, see
``engine_worker.py``): mass properties read back through Isaac Lab, joint and body order by name, the env builds,
resets and steps, observations in the policy's joint order, the backend's state round trip and standing."""

from __future__ import annotations

import numpy as np
import pytest

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.definitions import ISAACLAB_QUADRUPED_JOINT_ORDER

from .conftest import HAVE_ISAACLAB

if HAVE_ISAACLAB:
    from diffloco_ext.isaaclab import usd_export as ue

ENGINES = ["physx", "newton"]
ROBOT = get_robot("anymal_d")


@pytest.mark.parametrize("engine", ENGINES)
def test_mass_properties_read_back_equal_the_description(probe, engine):
    """Masses, centres of mass and inertias through Isaac Lab equal the description (relative 1e-6: Isaac Lab's
    buffers are float32), each shank merged with its foot body."""
    p = probe(engine)
    names = p["body_names"]
    props = {}
    for i, name in enumerate(names):  # Isaac Lab's inertia: about the centre of mass, in the body (link) frame
        props[name] = ue.MassProperties(p["body_mass"][i], np.asarray(p["body_com"][i]),
                                        np.asarray(p["body_inertia"][i]))
    for foot in ROBOT.feet:
        f = props.pop(foot.name)
        props[foot.body] = ue.merge_mass_properties(props[foot.body], ue.MassProperties(
            f.mass, f.com + np.asarray(foot.offset), f.inertia))
    for body in ROBOT.bodies:
        got = props[body.name]
        assert abs(got.mass - body.mass) <= 1e-6 * body.mass, (engine, body.name, got.mass, body.mass)
        assert np.abs(got.com - np.asarray(body.com)).max() <= 1e-6, (engine, body.name)
        scale = np.abs(body.inertia_matrix).max()
        err = np.abs(got.inertia - body.inertia_matrix).max() / scale
        assert err <= 1e-6, (engine, body.name, err)


@pytest.mark.parametrize("engine", ENGINES)
def test_joint_and_body_order_are_set_by_name(probe, engine):
    """Whatever the engine's own order (Newton: leg by leg; PhysX: by joint type), the articulation's public
    joint order is Isaac Lab's policy order and the body order the description's, feet last."""
    p = probe(engine)
    assert p["joint_names"] == list(ISAACLAB_QUADRUPED_JOINT_ORDER)
    assert p["body_names"] == [b.name for b in ROBOT.bodies] + [f.name for f in ROBOT.feet]
    default = dict(zip(p["joint_names"], p["default_joint_pos"]))
    for name, value in ROBOT.default_joint_pos.items():
        assert default[name] == pytest.approx(value, abs=1e-7)


@pytest.mark.parametrize("engine", ENGINES)
def test_env_builds_resets_and_steps(probe, engine):
    p = probe(engine)
    assert p["obs_shape"] == [4, 48]
    assert p["obs_finite"] and np.isfinite(p["mean_reward"])
    assert "foot_height_reference" in p["reward_terms"] and "feet_air_time" not in p["reward_terms"]
    # the saturation term: ~0 standing on zero actions, large where targets 2.5 rad away saturate the drives
    assert max(p["torque_saturation_at_rest"]) < 1e-6
    assert p["torque_saturation_fraction"] > 0.25 and min(p["torque_saturation_saturated"]) > 0.1
    for name, expected in p["excess_expected"].items():  # the gait terms read the intended quantities
        assert max(expected) > 1e-6, name  # a state where the check means something (reset velocities, steps)
        np.testing.assert_allclose(p["excess_terms"][name], expected, rtol=1e-4, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("engine", ENGINES)
def test_command_curriculum_term_sets_ranges_weights_and_pushes(probe, engine):
    """The project's command curriculum on Isaac Lab's managers: initial ranges at the clock's 0, halfway at 50,
    the full ranges with the final period, the after-curriculum term's weight, the after-curriculum weight of
    another term and the pushes at 100."""
    c = probe(engine)["curriculum"]
    full = c["full_lin_vel_x"]
    start, half, end = c["0"], c["50"], c["100"]
    assert start["progress"] == 0.0 and half["progress"] == 0.5 and end["progress"] == 1.0
    assert start["lin_vel_x"] == [0.5, 1.0] and start["lin_vel_y"] == [0.0, 0.0] and start["ang_vel_z"] == [0, 0]
    np.testing.assert_allclose(half["lin_vel_x"], [(0.5 + full[0]) / 2, (1.0 + full[1]) / 2])
    assert end["lin_vel_x"] == full and end["ang_vel_z"] == [-1.0, 1.0]
    assert start["resampling_time_range"] == [10.0, 10.0] and end["resampling_time_range"] == [4.0, 4.0]
    assert start["foot_slip_weight"] == 0.0 and half["foot_slip_weight"] == 0.0 and end["foot_slip_weight"] == -1.0
    # weights_after_curriculum: the configured weight (Isaac Lab's -0.01) until the ranges are full, then its own
    assert start["action_rate_weight"] == half["action_rate_weight"] == -0.01 and end["action_rate_weight"] == -0.05
    assert c["ramp_action_rate"] == pytest.approx([-0.01, -0.03, -0.05])  # weights_ramp (20, 100): 0, 1/2, 1
    # weights_curriculum_end -0.03 over progress (0.2, 0.6): -0.01 at 0.1, half way at 0.4, -0.03 at 0.8 and when
    # the ranges are full; then weights_ramp (20, 100) from -0.03 to -0.05
    assert c["curriculum_ramp_action_rate"] == pytest.approx([-0.01, -0.02, -0.03, -0.03, -0.04, -0.05])
    assert "after_curriculum holds at 0" in c["curriculum_ramp_conflict_error"]
    assert start["push_x"] == [0.0, 0.0] and end["push_x"] == [-0.5, 0.5]
    commands = np.asarray(c["commands_at_0"])  # drawn from the initial ranges (standing envs: zero)
    moving = np.abs(commands).sum(1) > 0
    assert moving.any() and np.all((commands[moving, 0] >= 0.5) & (commands[moving, 0] <= 1.0))
    assert np.all(commands[:, 1:] == 0.0)
    assert "no_such_term" in c["unknown_term_error"]
    assert "weights_after_curriculum names unknown reward terms ['no_such_weight']" in c["unknown_weight_error"]
    assert c["resumed_progress"] == 0.5  # start_step 50 of 100
    assert c["push_off_ok"] == 0.0 and "no_such_push" in c["unknown_push_error"]


@pytest.mark.parametrize("engine", ENGINES)
def test_command_curriculum_term_widens_the_randomisation_when_done(probe, engine):
    """``RandomizationCfg.after_curriculum`` on Isaac Lab's event terms: until the command ranges are full the
    events keep their ranges; then the material term, built again, draws friction from the new range (0.30-0.35)
    and the gains term has its new range."""
    w = probe(engine)["curriculum"]["widened"]
    half, done = w["50"], w["100"]
    assert not half["rebuilt"] and half["friction_range"] != [0.30, 0.35] and half["friction_drawn"][1] > 0.35
    assert half["stiffness_params"] != [1.3, 1.4]
    assert done["rebuilt"] and done["friction_range"] == [0.30, 0.35] and done["stiffness_params"] == [1.3, 1.4]
    assert 0.30 - 1e-6 <= done["friction_drawn"][0] <= done["friction_drawn"][1] <= 0.35 + 1e-6


@pytest.mark.parametrize("engine", ENGINES)
def test_command_curriculum_term_ramps_the_randomisation_ranges(probe, engine):
    """``RandomizationCfg.ranges_ramp`` on Isaac Lab's event terms: the events' own ranges when the command ranges
    have just become full (the ramp's start), half way at its middle (friction drawn there), the after-curriculum
    ranges at its end."""
    r = probe(engine)["curriculum"]["ramped"]
    own_f, own_k = r["own_friction_range"], r["own_stiffness_params"]
    assert r["100"]["friction_range"] == own_f and r["100"]["stiffness_params"] == own_k
    half_f = [(a + b) / 2 for a, b in zip(own_f, (0.30, 0.35))]
    np.testing.assert_allclose(r["150"]["friction_range"], half_f, atol=1e-9)
    np.testing.assert_allclose(r["150"]["stiffness_params"], [(a + b) / 2 for a, b in zip(own_k, (1.3, 1.4))])
    drawn = r["150"]["friction_drawn"]
    assert half_f[0] - 1e-6 <= drawn[0] <= drawn[1] <= half_f[1] + 1e-6 and drawn[1] > 0.35
    assert r["200"]["friction_range"] == [0.30, 0.35] and r["200"]["stiffness_params"] == [1.3, 1.4]
    assert 0.30 - 1e-6 <= r["200"]["friction_drawn"][0] <= r["200"]["friction_drawn"][1] <= 0.35 + 1e-6


@pytest.mark.parametrize("engine", ENGINES)
def test_observed_joint_positions_are_in_the_policy_order(probe, engine):
    """A joint state written by name shows in the observation's joint block (obs 12:24, minus the default pose)
    in Isaac Lab's order."""
    p = probe(engine)
    values = p["probe_joint_values"]
    expected = [values[n] - ROBOT.default_joint_pos[n] for n in ISAACLAB_QUADRUPED_JOINT_ORDER]
    np.testing.assert_allclose(p["obs_joint_pos_rel"], expected, atol=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_backend_state_round_trip(probe, engine):
    """reset(q, u) then state() gives q, u back in the project's conventions (description joint order, (w, x, y, z),
    angular velocity in the base frame, velocity of the base origin) to float32 precision, also for a tilted,
    turning, moving base; the articulation holds each joint's value under that joint's name."""
    p = probe(engine)
    assert p["backend_name"] == f"isaaclab-{engine}"
    assert p["roundtrip_q"] < 1e-6 and p["roundtrip_u"] < 1e-6
    for name, value in p["joint_pos_set"].items():
        assert p["joint_pos_by_name"][name] == pytest.approx(value, abs=1e-6), name


@pytest.mark.parametrize("engine", ENGINES)
def test_backend_robot_stands_at_zero_action(probe, engine):
    """Dropped from 0.6 m in the default pose with the default targets, ANYmal D stands after 1 s: base at
    0.545 m (the project's hard mode and MuJoCo: 0.545 m) within 1 cm, level, still, barely moved."""
    p = probe(engine)
    q = np.asarray(p["standing_q"])
    assert np.all(np.abs(q[:, 2] - 0.545) < 0.01), q[:, 2]
    assert np.all(np.abs(q[:, :2]).max(axis=1) < 0.02), q[:, :2]
    assert np.all(np.abs(q[:, 3]) > 0.999)  # |w|: tilt below ~5 deg
    assert p["standing_speed"] < 0.05
    torque = np.asarray(p["standing_torque"])
    assert np.all(np.abs(torque) <= ROBOT.actuator.effort_limit)
    assert np.abs(torque).max() > 5.0  # the knees hold the robot up


@pytest.mark.parametrize("engine", ENGINES)
def test_backend_target_moves_the_named_joint(probe, engine):
    """A target 0.2 rad below the default on LF_KFE (description index 2) moves LF_KFE most, in that direction."""
    delta = np.asarray(probe(engine)["moved_joint_delta"])
    k = ROBOT.joint_names.index("LF_KFE")
    assert int(np.argmax(np.abs(delta))) == k and delta[k] < -0.1


@pytest.mark.parametrize("engine", ENGINES)
def test_backend_policy_step_covers_the_policy_dt(probe, engine):
    """Three policy steps of free fall give the speed of 0.06 s of gravity (Newton's physics manager runs a policy
    step's physics steps in one call: looping over them as on PhysX gave four times the time, and policies fell)."""
    vz = np.asarray(probe(engine)["fall_vz_after_3_steps"])
    np.testing.assert_allclose(vz, -9.81 * 0.06, rtol=0.01)
