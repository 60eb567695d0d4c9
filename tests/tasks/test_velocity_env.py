"""The velocity task: Isaac Lab's interface on hand-made states, rewards, flags, randomisation, gradients."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from diffloco_ext.tasks import registry
from diffloco_ext.tasks.robot_state import wrap_to_pi as wrap
from diffloco_ext.tasks.velocity.env import POLICY_TERMS, REWARD_TERMS, VelocityEnv
from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatEnvCfg

from .finite_differences import (check_action_gradients, loss_through_steps,
                                 three_steps_through_a_reset_match_finite_differences)

ISAACLAB_ORDER = [f"{leg}_{kind}" for kind in ("HAA", "HFE", "KFE") for leg in ("LF", "LH", "RF", "RH")]


def make_env(num_envs=4, dtype="float64", noise=False, randomize=True, heading=True, **sim):
    cfg = AnymalDFlatEnvCfg(num_envs=num_envs, seed=3)
    cfg.commands.heading_command = heading
    cfg.sim.dtype = dtype
    cfg.observation_noise.enable = noise
    cfg.randomization.enable = randomize
    for k, v in sim.items():
        setattr(cfg.sim, k, v)
    return VelocityEnv(cfg)


@pytest.fixture(scope="module")
def env():
    return make_env()


def test_policy_interface_is_isaac_labs(env):
    assert [n for n, _ in POLICY_TERMS] == ["base_lin_vel", "base_ang_vel", "projected_gravity", "velocity_commands",
                                            "joint_pos", "joint_vel", "actions"]
    assert env.get_observations()["policy"].shape == (4, 48)
    assert env.joint_names == ISAACLAB_ORDER
    assert env.step_dt == pytest.approx(0.02) and env.max_episode_length == 1000
    assert env.cfg.actions.scale == 0.5
    # default pose, Isaac Lab's: HAA 0, front HFE 0.4, hind HFE -0.4, front KFE -0.8, hind KFE 0.8
    expected = {"HAA": (0.0, 0.0), "HFE": (0.4, -0.4), "KFE": (-0.8, 0.8)}
    for name, value in zip(env.joint_names, env.default_joint_pos.tolist()):
        front, hind = expected[name[3:]]
        assert value == pytest.approx(front if name[1] == "F" else hind)


def test_observations_on_a_hand_made_state(env):
    """Base yawed by +90 deg and pitched, moving along world x, spinning about base z, a base centre of mass
    offset: each term as Isaac Lab defines it."""
    N = env.num_envs
    q = torch.tensor(env.model.default_q(), dtype=torch.float64)
    yaw, pitch = math.pi / 2, 0.2
    qz = torch.tensor([math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)], dtype=torch.float64)
    qy = torch.tensor([math.cos(pitch / 2), 0, math.sin(pitch / 2), 0], dtype=torch.float64)
    from diffloco_ext.tasks.robot_state import quat_multiply
    q[:, 3:7] = quat_multiply(qz.expand(N, 4), qy.expand(N, 4))
    sim_joint = torch.arange(12, dtype=torch.float64) * 0.01
    q[:, 7:] = env.default_joint_pos_sim + sim_joint
    u = torch.zeros(N, env.model.nv, dtype=torch.float64)
    u[:, 0] = 1.0  # world x
    u[:, 5] = 0.5  # base z rate
    u[:, 6:] = sim_joint * 10
    env.q, env.u = q, u
    com = env.params["body_com"][:, 0].clone()
    obs = env._observations()["policy"]
    R = torch.tensor([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]]) @ torch.tensor(
        [[math.cos(pitch), 0, math.sin(pitch)], [0, 1, 0], [-math.sin(pitch), 0, math.cos(pitch)]])
    R = R.double()
    v_origin_b = R.T @ torch.tensor([1.0, 0, 0], dtype=torch.float64)
    w_b = torch.tensor([0, 0, 0.5], dtype=torch.float64)
    torch.testing.assert_close(obs[:, 0:3], v_origin_b + torch.linalg.cross(w_b.expand(N, 3), com))
    torch.testing.assert_close(obs[:, 3:6], w_b.expand(N, 3))
    torch.testing.assert_close(obs[:, 6:9], (R.T @ torch.tensor([0, 0, -1.0], dtype=torch.float64)).expand(N, 3))
    torch.testing.assert_close(obs[:, 9:12], env.commands.command.double())
    names = env.robot.joint_names
    torch.testing.assert_close(obs[:, 12:24], torch.stack([sim_joint[names.index(n)] for n in ISAACLAB_ORDER]).expand(N, 12))
    torch.testing.assert_close(obs[:, 24:36], 10 * torch.stack([sim_joint[names.index(n)] for n in ISAACLAB_ORDER]).expand(N, 12))
    torch.testing.assert_close(obs[:, 36:48], env.actions)
    # the critic group: the clean policy terms, privileged terms, and the tracking errors and kernels last
    critic = env._observations()["critic"]
    assert critic.shape == (N, 48 + 13 + 5)
    torch.testing.assert_close(critic[:, :48], obs)
    cmd = env.commands.command.double()
    error = torch.cat([cmd[:, :2] - obs[:, 0:2], cmd[:, 2:] - obs[:, 5:6]], dim=1)
    torch.testing.assert_close(critic[:, -5:-2], error)
    torch.testing.assert_close(critic[:, -2], torch.exp(-error[:, :2].square().sum(1) / 0.25))
    torch.testing.assert_close(critic[:, -1], torch.exp(-error[:, 2].square() / 0.25))
    # with critic_drive_gains, the PD-gain scales each env drew, after the rest
    env.cfg.critic_drive_gains = True
    try:
        with_gains = env._observations()["critic"]
    finally:
        env.cfg.critic_drive_gains = False
    assert with_gains.shape == (N, 48 + 13 + 5 + 2)
    torch.testing.assert_close(with_gains[:, :-2], critic)
    kp, kd = env.params["joint_stiffness"], env.params["joint_damping"]
    torch.testing.assert_close(with_gains[:, -2], kp[:, 3] / env.nominal["joint_stiffness"][:, 3])
    torch.testing.assert_close(with_gains[:, -1], kd[:, 3] / env.nominal["joint_damping"][:, 3])
    assert with_gains[:, -2].std() > 0.01  # drawn per env


def test_actions_map_by_name_to_the_simulators_joints(env):
    names = env.robot.joint_names
    for i, name in enumerate(ISAACLAB_ORDER):
        action = torch.zeros(env.num_envs, 12, dtype=torch.float64)
        action[:, i] = 1.0
        delta = env.joint_targets(action) - env.default_joint_pos_sim
        expected = torch.zeros(12, dtype=torch.float64)
        expected[names.index(name)] = 0.5
        torch.testing.assert_close(delta, expected.expand(env.num_envs, 12))


def test_tracking_reward_is_one_when_tracking(env):
    from diffloco_ext.tasks.velocity import rewards as R

    cmd = torch.tensor([[0.5, -0.2, 0.3]])
    assert R.track_lin_vel_xy_exp(cmd, torch.tensor([[0.5, -0.2, 9.0]]), 0.5).item() == pytest.approx(1.0)
    assert R.track_lin_vel_xy_exp(cmd, torch.tensor([[0.0, -0.2, 0.0]]), 0.5).item() == pytest.approx(math.exp(-1))
    assert R.track_ang_vel_z_exp(cmd, torch.tensor([[0, 0, 0.3]]), 0.5).item() == pytest.approx(1.0)
    ref = R.foot_height_reference(torch.tensor([0.15, 0.15]), torch.tensor([0.0, math.pi]),
                                  env.cfg.foot_height_reference, torch.tensor([True, False]))
    # quarter period: the first pair at the apex, the other on the ground; a standing env stays down
    torch.testing.assert_close(ref, torch.tensor([[0.08, 0.0], [0.0, 0.0]]), atol=1e-7, rtol=0)


def test_fall_proxy_terms_are_zero_while_walking_and_grow_past_their_thresholds():
    """The hinge penalties (tilt, roll/pitch rate, planar tracking error): zero with zero gradient inside their
    thresholds, ``(|x| - threshold)^2`` beyond, finite gradients at zero, float64 finite differences."""
    from diffloco_ext.tasks.velocity import rewards as R

    tilt = math.sin(math.radians(30.0))
    g = torch.tensor([[0.0, 0.0, -1.0], [0.1, 0.05, -0.99], [0.0, tilt, -math.cos(math.radians(30.0))]],
                     dtype=torch.float64, requires_grad=True)
    value = R.excess_tilt_l2(g, 0.2)
    torch.testing.assert_close(value.detach(), torch.tensor([0.0, 0.0, (tilt - 0.2) ** 2], dtype=torch.float64))
    value.sum().backward()
    assert torch.isfinite(g.grad).all() and g.grad[:2].abs().max() == 0.0
    assert g.grad[2, 1].item() == pytest.approx(2 * (tilt - 0.2))
    w = torch.tensor([[3.0, -4.0, 7.0], [0.5, 0.5, -9.0]], dtype=torch.float64)
    torch.testing.assert_close(R.excess_ang_vel_xy_l2(w, 1.5), torch.tensor([3.5**2, 0.0], dtype=torch.float64))
    cmd = torch.tensor([[1.0, 0.0, 0.3], [0.5, 0.5, 0.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 2.0, 0.0], [0.6, 0.4, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(R.excess_lin_vel_xy_error_l2(cmd, v, 0.5), torch.tensor([1.5**2, 0.0],
                                                                                        dtype=torch.float64))
    x = torch.tensor([[0.31, -0.27, -0.9], [1.7, 0.4, 2.0]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: R.excess_tilt_l2(t, 0.2) + R.excess_ang_vel_xy_l2(t, 0.3)
                                    + R.excess_lin_vel_xy_error_l2(cmd, t, 0.1), (x,))


def test_fall_proxy_terms_enter_the_reward_with_their_weights():
    cfg = AnymalDFlatEnvCfg(num_envs=2, seed=3)
    cfg.sim.dtype = "float64"
    cfg.observation_noise.enable = cfg.randomization.enable = False
    cfg.rewards.excess_tilt = -100.0
    env = VelocityEnv(cfg)
    env.reset()
    env.step(torch.zeros(2, 12, dtype=torch.float64))
    q = env.q.detach().clone()
    roll = math.radians(40.0)  # env 0 rolled by 40 degrees about the base's x axis, env 1 level
    q[0, 3:7] = torch.tensor([math.cos(roll / 2), math.sin(roll / 2), 0.0, 0.0], dtype=torch.float64)
    q[1, 3:7] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    env.q = q
    _, terms = env._rewards(env.last_output, (env.q, env.u))
    expected = -100.0 * (math.sin(roll) - cfg.rewards.excess_tilt_threshold) ** 2 * env.step_dt
    assert terms["excess_tilt"][0].item() == pytest.approx(expected, rel=1e-9)
    assert terms["excess_tilt"][1].item() == 0.0
    assert terms["excess_ang_vel_xy"].abs().max() == 0.0  # weight 0 by default


def test_gait_terms_on_hand_made_states():
    """Foot slip: the feet's horizontal speed weighted 1 on the ground, 1/2 at the stance height, ~0 above it;
    joint speed beyond its limit: zero inside, squared beyond; both float64 finite differences."""
    from diffloco_ext.tasks.velocity import rewards as R

    h = torch.tensor([[0.0, 0.01, 0.05, -0.01]], dtype=torch.float64)
    v = torch.tensor([[[0.3, 0.4, 9.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, -1.0]]], dtype=torch.float64)
    slip = R.foot_slip(h, v, 0.01, 0.0025)
    sig = lambda x: 1.0 / (1.0 + math.exp(-x))  # noqa: E731
    expected = 0.5 * sig(4.0) + 0.5 + 2.0 * sig(-16.0)  # the last foot moves vertically only: no slip
    assert slip.item() == pytest.approx(expected, abs=2e-6)
    qd = torch.tensor([[1.0, -7.0, 6.5, 8.0]], dtype=torch.float64)
    assert R.excess_joint_vel_l2(qd, 6.0).item() == pytest.approx(1.0 + 0.25 + 4.0)
    hh = torch.tensor([[0.004, 0.012, -0.003, 0.02]], dtype=torch.float64, requires_grad=True)
    vv = torch.tensor([[[0.3, -0.2, 0.1], [1.1, 0.5, 0.0], [-0.4, 0.9, 0.2], [0.7, 0.0, 0.0]]], dtype=torch.float64,
                      requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: R.foot_slip(a, b, 0.01, 0.0025), (hh, vv))
    x = torch.tensor([[6.3, -7.1, 2.0, 9.4]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: R.excess_joint_vel_l2(t, 6.0), (x,))
    # touchdown: only downward speed counts, weighted 1/2 at the band's height and ~0 far above it
    down = R.foot_touchdown(torch.tensor([[0.03, 0.0, 0.03, 0.5]], dtype=torch.float64),
                            torch.tensor([[[5.0, 0.0, -0.4], [0.0, 0.0, 0.3], [0.0, 0.0, -1.0], [0.0, 0.0, -2.0]]],
                                         dtype=torch.float64), 0.03, 0.01)
    assert down.item() == pytest.approx(0.5 * 0.16 + 0.5 * 1.0 + 4.0 * sig(-47.0), rel=1e-9)
    falling = torch.tensor([[[0.3, -0.2, -0.6], [1.1, 0.5, -0.1], [-0.4, 0.9, 0.2], [0.7, 0.0, -1.3]]],
                           dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: R.foot_touchdown(a, b, 0.03, 0.01), (hh, falling))
    # action smoothness: zero on a ramp (constant rate), 4 per joint on a +1/-1 alternation
    ramp = [torch.tensor([[0.1 * k, -0.2 * k]], dtype=torch.float64) for k in (3, 2, 1)]
    assert R.action_smoothness_l2(*ramp).item() == pytest.approx(0.0, abs=1e-15)
    flip = [torch.tensor([[s_, -s_]], dtype=torch.float64) for s_ in (1.0, -1.0, 1.0)]
    assert R.action_smoothness_l2(*flip).item() == pytest.approx(2 * 16.0)
    abc = [torch.randn(2, 12, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    assert torch.autograd.gradcheck(R.action_smoothness_l2, tuple(abc))


def test_torque_saturation_term_is_the_validations_measure_and_differentiable():
    """The PD demand outside the DC-motor envelope at the step's start, on hand-computed numbers (ANYmal D: stall
    120 N m, limit 80 N m, no-load 7.5 rad/s), the envelope the same for numpy and torch, and the term's gradient
    w.r.t. the actions equal to float64 finite differences through an env step."""
    from diffloco_ext.tasks.velocity import rewards as R

    env = make_env(num_envs=3)
    a = env.robot.actuator
    assert (a.saturation_effort, a.effort_limit, a.velocity_limit) == (120.0, 80.0, 7.5)
    qd = torch.tensor([[0.0, 0.0, 7.0, -7.0, 3.0]], dtype=torch.float64)
    demand = torch.tensor([[50.0, -100.0, 20.0, 60.0, 90.0]], dtype=torch.float64)  # 60: braking at -7 rad/s
    lo, hi = a.torque_bounds(qd)  # by hand: hi 80, 80, 8, 80, 72; lo -80, -80, -80, -8, -80
    torch.testing.assert_close(hi, torch.tensor([[80.0, 80.0, 8.0, 80.0, 72.0]], dtype=torch.float64))
    torch.testing.assert_close(lo, torch.tensor([[-80.0, -80.0, -80.0, -8.0, -80.0]], dtype=torch.float64))
    lo_np, hi_np = a.torque_bounds(qd.numpy())
    np.testing.assert_allclose(lo_np, lo.numpy())
    np.testing.assert_allclose(hi_np, hi.numpy())
    # the parts outside: 0, 20, 12, 0, 18 N m
    assert R.torque_saturation_l2(demand, qd, a).item() == pytest.approx((20.0**2 + 12.0**2 + 18.0**2) / 80.0**2)
    rng = np.random.default_rng(1)
    actions = torch.tensor(rng.uniform(-4.0, 4.0, (3, 12)), requires_grad=True)  # targets up to 2 rad away
    state = env.state_dict()

    def term(act):
        env.load_state_dict(state)
        before = (env.q, env.u)
        env.step(act)
        return env._torque_saturation(before)

    value = term(actions)
    assert (value > 0).all()
    (grad,) = torch.autograd.grad(value.sum(), actions)
    with torch.no_grad():
        for i, j in [(0, 3), (1, 8), (2, 11), (2, 0)]:
            x = actions.detach().clone()
            x[i, j] += 1e-6
            plus = term(x).sum().item()
            x[i, j] -= 2e-6
            fd = (plus - term(x).sum().item()) / 2e-6
            assert grad[i, j].item() == pytest.approx(fd, rel=1e-6, abs=1e-9)


def _curriculum_cfg() -> AnymalDFlatEnvCfg:
    """Two envs in float64, no noise or randomisation, a 3-step command curriculum; ``excess_joint_vel`` -0.1 on every
    joint speed, ``foot_slip`` -0.5 only after the curriculum."""
    cfg = AnymalDFlatEnvCfg(num_envs=2, seed=3)
    cfg.sim.dtype = "float64"
    cfg.observation_noise.enable = cfg.randomization.enable = False
    cfg.rewards.foot_slip = -0.5
    cfg.rewards.excess_joint_vel = -0.1
    cfg.rewards.excess_joint_vel_ratio = 0.0  # every joint speed counts
    cfg.rewards.after_curriculum = ("foot_slip",)
    cfg.commands.curriculum_steps = 3
    cfg.commands.curriculum_initial_scale = 0.5
    return cfg


def _step_rewards(env: VelocityEnv) -> dict[str, torch.Tensor]:
    """One zero-action step; the weighted reward terms of it, and ``excess_joint_vel``'s weight (its weighted term
    over the unweighted one) as ``"excess_joint_vel_weight"``."""
    from diffloco_ext.tasks.velocity import rewards as R

    env.step(torch.zeros(2, 12, dtype=torch.float64))
    _, terms = env._rewards(env.last_output, (env.q, env.u))
    raw = R.excess_joint_vel_l2(env.u[:, 6:], 0.0) * env.step_dt
    return {**terms, "excess_joint_vel_weight": (terms["excess_joint_vel"] / raw).mean()}


def _excess_joint_vel_weights(cfg: AnymalDFlatEnvCfg, steps: int) -> list[tuple[float, float, int]]:
    """A new env of ``cfg`` stepped ``steps`` times with zero actions: per step ``excess_joint_vel``'s weight, the
    curriculum's progress and the policy steps since its end."""
    env = VelocityEnv(cfg)
    env.reset()
    out = []
    for _ in range(steps):
        weight = _step_rewards(env)["excess_joint_vel_weight"].item()
        out.append((weight, env.commands.progress, env.commands.steps_since_done))
    return out


def test_after_curriculum_terms_count_only_once_the_curriculum_is_done():
    cfg = _curriculum_cfg()
    env = VelocityEnv(cfg)
    env.reset()
    slips = []
    for _ in range(5):
        terms = _step_rewards(env)
        slips.append(terms["foot_slip"].abs().max().item())
        assert terms["excess_joint_vel"].abs().max().item() > 0.0  # not named: counts from the start
    assert slips[0] == 0.0 and slips[-1] > 0.0 and env.commands.progress == 1.0
    assert set(terms) == set(REWARD_TERMS) | {"excess_joint_vel_weight"}
    cfg.rewards.after_curriculum = ("foot_slide",)
    with pytest.raises(ValueError, match="unknown reward terms \\['foot_slide'\\]"):
        VelocityEnv(cfg)


def test_weights_after_curriculum_replace_the_weights_once_the_curriculum_is_done():
    """``rewards.weights_after_curriculum``: the field's weight while the commands widen, the given one after (and
    for a term ``after_curriculum`` names too: 0, then the given one)."""
    from diffloco_ext.tasks.velocity import rewards as R

    cfg = _curriculum_cfg()
    cfg.rewards.weights_after_curriculum = {"excess_joint_vel": -0.3, "foot_slip": -2.0}
    env = VelocityEnv(cfg)
    env.reset()
    weights = []
    for _ in range(5):
        terms = _step_rewards(env)
        weights.append(terms["excess_joint_vel_weight"].item())
        assert (terms["foot_slip"].abs().max().item() == 0.0) == (env.commands.progress < 1.0)
    assert weights[0] == pytest.approx(-0.1) and weights[-1] == pytest.approx(-0.3)
    slip_raw = R.foot_slip(env.foot_height, env.last_output.foot_vel, cfg.rewards.foot_slip_height,
                           cfg.rewards.foot_slip_width) * env.step_dt
    torch.testing.assert_close(terms["foot_slip"], -2.0 * slip_raw)
    # weights_ramp: the new weights take over linearly over policy steps 1-3 after the curriculum's end
    cfg.rewards.weights_ramp = (1, 3)
    fractions = []
    for weight, progress, since in _excess_joint_vel_weights(cfg, 7):
        f = 0.0 if progress < 1.0 or since < 1 else min(1.0, (since - 1) / 2)
        assert weight == pytest.approx(-0.1 + f * (-0.3 + 0.1))
        fractions.append(f)
    assert fractions[0] == 0.0 and 0.5 in fractions and fractions[-1] == 1.0
    cfg.rewards.weights_ramp = (3, 1)
    with pytest.raises(ValueError, match="weights_ramp"):
        VelocityEnv(cfg)
    cfg.rewards.weights_ramp = (0, 0)
    cfg.rewards.weights_after_curriculum = {"action_rates": -0.05}
    with pytest.raises(ValueError, match="weights_after_curriculum names unknown reward terms \\['action_rates'\\]"):
        VelocityEnv(cfg)
    cfg.rewards.weights_after_curriculum = {"action_rate": float("nan")}
    with pytest.raises(ValueError, match="finite numbers"):
        VelocityEnv(cfg)


def test_weights_curriculum_end_move_the_weights_while_the_commands_widen():
    """``rewards.weights_curriculum_end``: the field's weight until the curriculum's progress reaches the ramp's
    start, the given weight from its end, linear between; ``weights_after_curriculum`` then starts from it."""
    cfg = _curriculum_cfg()
    cfg.commands.curriculum_steps = 6
    cfg.rewards.weights_curriculum_end = {"excess_joint_vel": -0.4}
    cfg.rewards.weights_curriculum_ramp = (1 / 3, 2 / 3)
    seen = []
    for weight, progress, _ in _excess_joint_vel_weights(cfg, 8):
        f = min(1.0, max(0.0, (progress - 1 / 3) / (1 / 3)))
        assert weight == pytest.approx(-0.1 + f * (-0.4 + 0.1))
        seen.append(f)
    assert seen[0] == 0.0 and any(0.0 < f < 1.0 for f in seen) and seen[-1] == 1.0
    # after the curriculum, weights_after_curriculum ramps from the weight the curriculum ended with
    cfg.rewards.weights_after_curriculum = {"excess_joint_vel": -1.0}
    cfg.rewards.weights_ramp = (0, 4)
    for weight, progress, since in _excess_joint_vel_weights(cfg, 12):
        f = min(1.0, since / 4) if progress >= 1.0 else None
        if f is not None:
            assert weight == pytest.approx(-0.4 + f * (-1.0 + 0.4))
    assert f == 1.0
    for bad, match in (({"weights_curriculum_ramp": (0.5, 0.2)}, "weights_curriculum_ramp must be"),
                       ({"weights_curriculum_ramp": (0.0, 1.5)}, "weights_curriculum_ramp must be"),
                       ({"weights_curriculum_end": {"foot_slip": -1.0}}, "after_curriculum holds .* \\['foot_slip'\\]"),
                       ({"weights_curriculum_end": {"action_rates": -1.0}}, "unknown reward terms"),
                       ({"weights_curriculum_end": {"action_rate": float("inf")}}, "finite numbers")):
        cfg = _curriculum_cfg()
        for k, v in bad.items():
            setattr(cfg.rewards, k, v)
        with pytest.raises(ValueError, match=match):
            VelocityEnv(cfg)


def test_randomisation_stays_in_its_ranges():
    env = make_env(num_envs=64, dtype="float32")
    r = env.cfg.randomization
    f = env.params["friction"]
    assert f.min() >= r.friction[0] and f.max() <= r.friction[1] and f.std() > 0.1
    scale = env.params["body_mass"][:, 0] / env.nominal["body_mass"][:, 0]
    assert scale.min() >= r.base_mass_scale[0] - 1e-6 and scale.max() <= r.base_mass_scale[1] + 1e-6
    torch.testing.assert_close(env.params["body_mass"][:, 1:], env.nominal["body_mass"][:, 1:])
    dcom = env.params["body_com"][:, 0] - env.nominal["body_com"][:, 0]
    assert dcom[:, :2].abs().max() <= r.base_com_xy + 1e-6 and dcom[:, 2].abs().max() <= r.base_com_z + 1e-6
    kp = env.params["joint_stiffness"] / env.nominal["joint_stiffness"]
    assert kp.min() >= r.stiffness_scale[0] - 1e-6 and kp.max() <= r.stiffness_scale[1] + 1e-6
    cmd = env.commands.command
    assert cmd[:, :2].abs().max() <= 1.0 and cmd[:, 2].abs().max() <= 1.0


def test_ground_softness_sets_each_envs_kappa_and_old_states_load():
    """``randomization.contact_kappa_scale``: a log-uniform factor per env on the smoothed contact's kappa, inside
    its range, that the simulator uses (envs on a softer ground stand lower: their feet sink deeper before the
    contact holds them); off (1, 1) by default; a malformed range is an error naming the field; a state saved
    before the option loads with every env at the nominal kappa."""
    cfg = AnymalDFlatEnvCfg(num_envs=64, seed=3)
    cfg.sim.dtype = "float32"
    cfg.observation_noise.enable = False
    r = cfg.randomization
    r.contact_kappa_scale = (0.4, 2.5)
    # every other draw at its nominal value and every env dropped in the same pose: only kappa differs
    r.push_velocity_xy, r.base_com_xy, r.base_com_z = 0.0, 0.0, 0.0
    r.friction = r.base_mass_scale = r.stiffness_scale = r.damping_scale = (1.0, 1.0)
    cfg.reset.velocity, cfg.reset.joint_pos_scale, cfg.reset.position_xy = 0.0, (1.0, 1.0), 0.0
    env = VelocityEnv(cfg)
    scale = env.params["contact_kappa_scale"]
    assert scale.min() >= 0.4 - 1e-6 and scale.max() <= 2.5 + 1e-6
    assert abs(float(torch.log(scale).mean())) < 0.2 and float(torch.log(scale).std()) > 0.3  # log-uniform
    with torch.no_grad():
        for _ in range(40):  # dropped from 0.65 m: standing after ~0.5 s
            env.step(torch.zeros(env.num_envs, 12))
    z = env.q[:, 2]  # base height (m): lower the softer the ground, in order of kappa
    order = torch.argsort(scale)
    assert float(z[order[:10]].max()) < float(z[order[-10:]].min()) - 0.003, (z[order[:10]], z[order[-10:]])
    assert float(torch.corrcoef(torch.stack((torch.log(scale), z)))[0, 1]) > 0.9
    state = env.state_dict()
    del state["params"]["contact_kappa_scale"]
    del state["task"]["draws"]["contact_kappa_scale"]
    env.load_state_dict(state)
    assert torch.equal(env.params["contact_kappa_scale"], torch.ones(64))
    env.reset()  # the next draws fill the nominal entries
    assert not torch.equal(env.params["contact_kappa_scale"], torch.ones(64))
    default = make_env(num_envs=8, dtype="float32")
    assert torch.equal(default.params["contact_kappa_scale"], torch.ones(8))
    for bad in [(0.0, 1.0), (2.0, 1.0), (float("nan"), 1.0), (1.0,), "soft"]:
        for after in (False, True):
            cfg = AnymalDFlatEnvCfg(num_envs=2, seed=3)
            target = cfg.randomization.after_curriculum if after else cfg.randomization
            target.contact_kappa_scale = bad
            with pytest.raises(ValueError, match="contact_kappa_scale"):
                VelocityEnv(cfg)


def test_soft_grounds_put_that_share_of_the_envs_on_a_spring():
    """``randomization.soft_ground_fraction``: that share of the envs (drawn at each reset) stands on soft contact's
    spring with a stiffness from ``soft_ground_stiffness`` (log-uniform), the others on the training's smoothed
    contact; the soft envs stand lower the softer their spring; off by default; malformed values are errors."""
    cfg = AnymalDFlatEnvCfg(num_envs=64, seed=3)
    cfg.sim.dtype = "float32"
    cfg.observation_noise.enable = False
    r = cfg.randomization
    r.soft_ground_fraction, r.soft_ground_stiffness = 0.5, (1.0e4, 1.0e5)
    r.push_velocity_xy, r.base_com_xy, r.base_com_z = 0.0, 0.0, 0.0
    r.friction = r.base_mass_scale = r.stiffness_scale = r.damping_scale = (1.0, 1.0)
    cfg.reset.velocity, cfg.reset.joint_pos_scale, cfg.reset.position_xy = 0.0, (1.0, 1.0), 0.0
    env = VelocityEnv(cfg)
    k = env.params["contact_soft_stiffness"]
    soft = k > 0
    assert 20 <= int(soft.sum()) <= 44
    assert k[soft].min() >= 1.0e4 * (1 - 1e-6) and k[soft].max() <= 1.0e5 * (1 + 1e-6)
    with torch.no_grad():
        for _ in range(50):  # dropped from 0.65 m: standing after ~0.5 s
            env.step(torch.zeros(env.num_envs, 12))
    z = env.q[:, 2]
    assert float(torch.corrcoef(torch.stack((torch.log(k[soft]), z[soft])))[0, 1]) > 0.9  # stiffer: higher
    softest = z[soft][torch.argsort(k[soft])[:2]]
    assert float(softest.max()) < float(z[~soft].min()) - 0.001  # ~1e4 N/m sinks deeper than smoothed (3 mm)
    stiffest = z[soft][torch.argsort(k[soft])[-2:]]
    assert float(stiffest.min()) > float(z[~soft].max()) + 0.001  # ~1e5 N/m stands higher (2 mm)
    assert torch.equal(make_env(num_envs=4, dtype="float32").params["contact_soft_stiffness"], torch.zeros(4))
    for key, bad in [("soft_ground_fraction", 1.5), ("soft_ground_stiffness", (0.0, 1.0e4)),
                     ("soft_ground_stiffness", (2.0e4, 1.0e4))]:
        cfg = AnymalDFlatEnvCfg(num_envs=2, seed=3)
        setattr(cfg.randomization.after_curriculum, key, bad)
        with pytest.raises(ValueError, match=key):
            VelocityEnv(cfg)


def test_randomisation_widens_once_the_curriculum_is_done():
    """``randomization.after_curriculum``: resets during the command curriculum draw from the base ranges, resets
    after it from the ranges set there (the others unchanged); without a curriculum the wide ranges hold at once."""
    def env_with(curriculum_steps: int) -> VelocityEnv:
        cfg = AnymalDFlatEnvCfg(num_envs=256, seed=3)
        cfg.sim.dtype = "float32"
        r = cfg.randomization
        r.friction, r.base_mass_scale, r.stiffness_scale = (0.9, 1.0), (0.9, 1.1), (0.95, 1.05)
        r.after_curriculum.friction, r.after_curriculum.base_mass_scale = (0.3, 0.5), (1.2, 1.3)
        if curriculum_steps:
            cfg.commands.curriculum_steps = curriculum_steps
            cfg.commands.curriculum_initial_scale = 0.5
        return VelocityEnv(cfg)

    def drawn(env):
        mass = (env.params["body_mass"][:, 0] / env.nominal["body_mass"][:, 0])
        kp = env.params["joint_stiffness"][:, 0] / env.nominal["joint_stiffness"][:, 0]
        return env.params["friction"], mass, kp

    env = env_with(curriculum_steps=4)
    f, m, kp = drawn(env)  # the first reset: the curriculum has not begun
    assert f.min() >= 0.9 and f.max() <= 1.0 and m.max() < 1.2
    with torch.no_grad():
        for _ in range(5):
            env.step(torch.zeros(env.num_envs, 12))
    assert env.commands.progress == 1.0
    env.reset()
    f, m, kp = drawn(env)
    assert f.min() >= 0.3 and f.max() <= 0.5 and f.std() > 0.03
    assert m.min() >= 1.2 - 1e-6 and m.max() <= 1.3 + 1e-6
    assert kp.min() >= 0.95 - 1e-6 and kp.max() <= 1.05 + 1e-6  # not set after the curriculum: unchanged
    f, m, _ = drawn(env_with(curriculum_steps=0))
    assert f.max() <= 0.5 and m.min() >= 1.2 - 1e-6


def test_randomisation_ranges_ramp_widens_them_linearly_after_the_curriculum():
    """``randomization.ranges_ramp``: the curriculum's ranges until ``start`` policy steps after its end, then each
    endpoint moves linearly to ``after_curriculum``'s, reached exactly at ``end``; a malformed ramp is an error naming
    the field."""
    from diffloco_ext.tasks.velocity.env_cfg import RandomizationCfg, RandomizationRangesCfg

    r = RandomizationCfg(friction=(0.8, 1.2), base_com_xy=0.02, adversarial_fraction=0.0,
                         after_curriculum=RandomizationRangesCfg(friction=(0.4, 1.0), base_com_xy=0.06,
                                                                 adversarial_fraction=0.5))
    assert r.ranges(0.0)["friction"] == (0.8, 1.2) and r.ranges(1.0)["friction"] == (0.4, 1.0)
    half = r.ranges(0.5)
    assert half["friction"] == pytest.approx((0.6, 1.1)) and half["base_com_xy"] == pytest.approx(0.04)
    assert half["adversarial_fraction"] == pytest.approx(0.25)
    assert half["stiffness_scale"] == r.stiffness_scale  # not set after the curriculum: unchanged

    cfg = AnymalDFlatEnvCfg(num_envs=512, seed=3)
    cfg.sim.dtype = "float32"
    rc = cfg.randomization
    rc.friction, rc.after_curriculum.friction = (0.9, 1.0), (0.1, 0.2)
    rc.ranges_ramp = (2, 6)
    cfg.commands.curriculum_steps, cfg.commands.curriculum_initial_scale = 2, 0.5
    env = VelocityEnv(cfg)
    seen = []
    with torch.no_grad():
        for _ in range(9):
            seen.append(env._ranges_after())
            env.reset()  # every env draws from the ranges in force
            f = env.params["friction"]
            lo, hi = rc.ranges(seen[-1])["friction"]
            assert f.min() >= lo - 1e-6 and f.max() <= hi + 1e-6 and f.max() - f.min() > 0.5 * (hi - lo)
            env.step(torch.zeros(env.num_envs, 12))
    # steps 0-1: the curriculum; 2-4: the ramp's start (since_done 0-2); then linear to 1 at since_done 6
    assert seen == pytest.approx([0.0, 0.0, 0.0, 0.0, 0.0, 0.25, 0.5, 0.75, 1.0])
    f = env.params["friction"]
    assert f.min() >= 0.1 - 1e-6 and f.max() <= 0.2 + 1e-6
    for bad in ((5, 2), (-1, 3), "x"):
        cfg = AnymalDFlatEnvCfg(num_envs=2)
        cfg.randomization.ranges_ramp = bad
        with pytest.raises(ValueError, match="ranges_ramp"):
            VelocityEnv(cfg)


def test_edge_fraction_puts_that_share_of_the_draws_on_the_ranges_endpoints():
    """``randomization.edge_fraction``: about that fraction of each range's draws sits at one of its two endpoints
    (either, about equally), the rest uniform inside; 0 leaves the draws (and the seed's stream) as they were; set
    after the curriculum it applies to the resets after it; a value outside [0, 1] is an error naming the field."""
    def env_with(edge, after=None, curriculum_steps=0, seed=5):
        cfg = AnymalDFlatEnvCfg(num_envs=2000, seed=seed)
        cfg.sim.dtype = "float32"
        cfg.randomization.edge_fraction = edge
        cfg.randomization.after_curriculum.edge_fraction = after
        if curriculum_steps:
            cfg.commands.curriculum_steps = curriculum_steps
            cfg.commands.curriculum_initial_scale = 0.5
        return VelocityEnv(cfg)

    def at_edges(env):
        r = env.cfg.randomization
        f = env.params["friction"]
        kp = env.params["joint_stiffness"][:, 0] / env.nominal["joint_stiffness"][:, 0]
        lo = (f - r.friction[0]).abs() < 1e-6
        hi = (f - r.friction[1]).abs() < 1e-6
        kp_edge = ((kp - r.stiffness_scale[0]).abs() < 1e-5) | ((kp - r.stiffness_scale[1]).abs() < 1e-5)
        assert f.min() >= r.friction[0] - 1e-6 and f.max() <= r.friction[1] + 1e-6
        assert kp.min() >= r.stiffness_scale[0] - 1e-5 and kp.max() <= r.stiffness_scale[1] + 1e-5
        return lo.float().mean().item(), hi.float().mean().item(), kp_edge.float().mean().item()

    lo, hi, kp_edge = at_edges(env_with(0.4))
    assert lo == pytest.approx(0.2, abs=0.04) and hi == pytest.approx(0.2, abs=0.04)
    assert kp_edge == pytest.approx(0.4, abs=0.05)
    assert at_edges(env_with(0.0)) == (0.0, 0.0, 0.0)
    torch.testing.assert_close(env_with(0.0).params["friction"], env_with(0.0, after=0.0).params["friction"])
    env = env_with(0.0, after=1.0, curriculum_steps=4)
    assert at_edges(env)[:2] == (0.0, 0.0)  # the curriculum has not begun
    with torch.no_grad():
        for _ in range(5):
            env.step(torch.zeros(env.num_envs, 12))
    env.reset()
    lo, hi, kp_edge = at_edges(env)
    assert lo + hi == pytest.approx(1.0) and kp_edge == pytest.approx(1.0) and 0.4 < lo < 0.6
    for bad in (1.5, -0.1, True):
        with pytest.raises(ValueError, match="env.randomization.edge_fraction must be a fraction"):
            env_with(bad)
    with pytest.raises(ValueError, match="after_curriculum.edge_fraction"):
        env_with(0.0, after=2.0)


def _exact_env(num_envs: int, **randomization) -> VelocityEnv:
    """Float64, no noise, no heading control, no gradient clips (the exact gradient), the given
    ``randomization`` fields set."""
    cfg = AnymalDFlatEnvCfg(num_envs=num_envs, seed=3)
    cfg.sim.dtype = "float64"
    cfg.observation_noise.enable = False
    cfg.commands.heading_command = False
    for key, value in randomization.items():
        setattr(cfg.randomization, key, value)
    env = VelocityEnv(cfg)
    env.cfg.state_grad_clip = env.cfg.action_grad_clip = env.cfg.grad_clip_relative = None
    return env


def _adversarial_env(num_envs: int, fraction: float = 1.0) -> VelocityEnv:
    """:func:`_exact_env` with the adversary on ``fraction`` of the envs, settled on the ground."""
    env = _exact_env(num_envs, adversarial_fraction=fraction)
    with torch.no_grad():
        for _ in range(30):  # dropped from 0.65 m: on its feet after ~0.5 s
            env.step(torch.zeros(num_envs, 12, dtype=torch.float64))
    return env


def _return_through(env: VelocityEnv, actions) -> torch.Tensor:
    total = 0.0
    for a in actions:
        total = total + env.step(a)[1].sum()
    return total


def test_adversary_moves_the_chosen_envs_draws_down_the_return_within_the_ranges():
    """``randomization.adversarial_fraction``: at ``detach_state`` the chosen envs' randomised quantities step by
    ``adversarial_step`` x the range's width along the sign of the last backward pass's gradient of the loss (minus
    the return) w.r.t. them, clamped to the ranges; envs not chosen, and envs reset since the last cut, keep theirs;
    without the adversary no parameter carries a gradient; a bad fraction or step is an error naming the field."""
    env = _adversarial_env(16, fraction=0.5)
    chosen = env.adversarial.clone()
    assert 0 < int(chosen.sum()) < 16
    env.detach_state()
    assert env.params["joint_stiffness"].requires_grad and env.params["friction"].requires_grad
    before = {k: v.clone() for k, v in env._draws.items()}
    leaves = env._leaves
    rng = np.random.default_rng(1)
    actions = [torch.tensor(rng.uniform(-0.5, 0.5, (16, 12))) for _ in range(4)]
    env.episode_length_buf[3] = env.max_episode_length - 2  # env 3 times out (and resets) within the horizon
    (-_return_through(env, actions)).backward()
    grads = {k: leaf.grad.clone() for k, leaf in leaves.items()}
    reset = env._reset_since_detach.clone()
    assert reset[3] and int(reset.sum()) < 4
    fresh = {k: v.clone() for k, v in env._draws.items()}  # the reset envs' new draws
    env.detach_state()
    moved = 0
    for name, (lo, hi) in env._draw_bounds().items():
        width = hi - lo
        expected = torch.minimum(torch.maximum(before[name] + 0.25 * width * torch.sign(grads[name]), lo), hi)
        for i in range(16):
            if reset[i]:
                torch.testing.assert_close(env._draws[name][i], fresh[name][i])
            elif chosen[i]:
                torch.testing.assert_close(env._draws[name][i], expected[i])
                moved += int((env._draws[name][i] != before[name][i]).any())
            else:
                torch.testing.assert_close(env._draws[name][i], before[name][i])
        assert bool((env._draws[name] >= lo - 1e-12).all() and (env._draws[name] <= hi + 1e-12).all())
    assert moved >= 10
    # the parameters the simulator uses are the moved draws'
    torch.testing.assert_close(env.params["joint_stiffness"].detach(),
                               env.nominal["joint_stiffness"] * env._draws["stiffness_scale"])
    torch.testing.assert_close(env.params["friction"].detach(), env._draws["friction"])
    no = torch.zeros(16, dtype=torch.bool)
    log = env._episode_log(~no, no, no, no)
    assert log["Adversary/envs"] == float(env.adversarial.sum())
    lo, hi = env._draw_bounds()["friction"]
    assert log["Adversary/friction"] == pytest.approx(float(((env._draws["friction"] - lo) / (hi - lo))[
        env.adversarial].mean()))
    off = _adversarial_env(4, fraction=0.0)
    off.detach_state()
    assert not any(v.requires_grad for v in off.params.values()) and off._leaves is None
    for key, bad in (("adversarial_fraction", 1.5), ("adversarial_step", 0.0), ("adversarial_step", True)):
        cfg = AnymalDFlatEnvCfg(num_envs=2, seed=3)
        setattr(cfg.randomization, key, bad)
        with pytest.raises(ValueError, match=f"env.randomization.{key}"):
            VelocityEnv(cfg)


def test_return_gradients_wrt_the_randomised_quantities_match_finite_differences():
    """The adversary's direction: float64 central differences of the return of 3 policy steps (robots on the
    ground, random actions) w.r.t. friction, base mass scale, centre-of-mass offset and PD-gain scales, against
    the gradient the leaves of ``detach_state`` receive."""
    env = _adversarial_env(2)
    state = env.state_dict()
    draws = {k: v.clone() for k, v in env._draws.items()}
    rng = np.random.default_rng(2)
    actions = [torch.tensor(rng.uniform(-0.5, 0.5, (2, 12))) for _ in range(3)]

    def total(values):
        env.load_state_dict(state)
        env.params = env._params_of(values)
        return _return_through(env, actions)

    # the quantities the adversary moves (the ground's kind, contact_kappa_scale and soft grounds, takes no gradient)
    leaves = {k: v.clone().requires_grad_(True) for k, v in draws.items()
              if k not in ("contact_kappa_scale", "soft_ground_stiffness")}
    grads = dict(zip(leaves, torch.autograd.grad(total({**draws, **leaves}), list(leaves.values()))))
    eps, checked = 1e-6, 0
    with torch.no_grad():
        for name, index in [("friction", (0,)), ("base_mass_scale", (1,)), ("base_com", (0, 0)), ("base_com", (1, 2)),
                            ("stiffness_scale", (0, 0)), ("damping_scale", (1, 0)), ("friction", (1,))]:
            plus = {k: v.clone() for k, v in draws.items()}
            plus[name][index] += eps
            minus = {k: v.clone() for k, v in draws.items()}
            minus[name][index] -= eps
            fd = (total(plus).item() - total(minus).item()) / (2 * eps)
            g = grads[name][index].item()
            assert abs(g - fd) <= 1e-5 * max(1.0, abs(fd)), (name, index, g, fd)
            checked += abs(fd) > 1e-6
    assert checked >= 5


def test_time_out_and_termination_flags():
    env = make_env()
    env.episode_length_buf[:] = env.max_episode_length - 1
    env.episode_length_buf[1] = 0
    with torch.no_grad():
        _, _, dones, extras = env.step(torch.zeros(4, 12, dtype=torch.float64))
    assert dones.tolist() == [1, 0, 1, 1]
    assert extras["time_outs"].tolist() == [True, False, True, True]
    assert env.episode_length_buf.tolist() == [0, 1, 0, 0]
    # a robot lying on the ground: its base touches, the episode terminates (not a time-out)
    env.q = env.q.clone()
    env.q[2, 2] = 0.05
    with torch.no_grad():
        _, _, dones, extras = env.step(torch.zeros(4, 12, dtype=torch.float64))
    assert dones[2] == 1 and not extras["time_outs"][2]
    assert extras["log"]["Episode_Termination/terminated"] >= 1


def test_a_diverged_env_is_reset_and_counted():
    env = make_env()
    env.u = env.u.clone()
    env.u[0, 6] = float("nan")
    with torch.no_grad():
        obs, reward, dones, extras = env.step(torch.zeros(4, 12, dtype=torch.float64))
    assert dones[0] == 1 and not extras["time_outs"][0]
    assert extras["log"]["Episode_Termination/diverged"] == 1.0
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
    assert torch.isfinite(extras["final_observations"]["policy"]).all()
    assert torch.isfinite(env.q).all() and torch.isfinite(env.u).all()


def test_env_step_gradients_match_finite_differences_through_a_reset():
    """Float64 central differences of rewards and observations over 3 policy steps w.r.t. the actions, with env 0
    timing out (and resetting) after the second step. Heading control is off: the command is exogenous (no
    gradient flows through the heading feedback, on purpose: the policy must not learn to move its command), so
    a heading-controlled command would make the finite differences see a dependence the gradient rightly lacks."""
    env = make_env(num_envs=3, heading=False)
    env.cfg.state_grad_clip = env.cfg.action_grad_clip = env.cfg.grad_clip_relative = None  # the exact gradient
    r = env.cfg.rewards  # the gait terms on (0 by default), the joint-speed hinge active at these speeds
    r.foot_slip, r.excess_joint_vel, r.excess_joint_vel_ratio = -1.0, -0.1, 0.05
    r.action_smoothness = -0.1  # through three steps: a_(t-2) carries the first step's actions into the third
    # (the clips are checked below)
    state, actions = three_steps_through_a_reset_match_finite_differences(env, seed=0)
    # env 0 reset after step 1: its last step's observations do not depend on its first actions
    env.load_state_dict(state)
    a0 = actions[0].detach().clone().requires_grad_(True)
    env.step(a0)
    env.step(actions[1].detach())
    obs, _, dones, _ = env.step(actions[2].detach())
    (g,) = torch.autograd.grad(obs["policy"][0].sum(), a0, allow_unused=True)
    assert g is None or g[0].abs().max() == 0


def test_env_step_gradients_match_finite_differences_with_the_tracking_reference():
    """As above with ``tracking_reference_accel`` on (no curriculum: from the start): the tracking rewards follow a
    reference that moves during the three steps and restarts at the reset env's velocity, both exogenous (no
    gradient), so the finite differences and the gradient agree through them."""
    env = _exact_env(3)
    env.cfg.commands.tracking_reference_accel = (1.0, 1.0)  # the command generator's own cfg (the same object)
    env.commands.reference = env.commands.command + torch.tensor([[0.6, -0.4, 0.5]])  # 0.6 s from the command
    three_steps_through_a_reset_match_finite_differences(env, seed=1)
    moved = env.commands.reference - env.commands.command
    assert float(moved[1:].abs().max()) > 0.1  # the reference still on its way (not the command) for envs 1 and 2


def _delayed_env(num_envs: int, fraction: float) -> VelocityEnv:
    return _exact_env(num_envs, observation_delay_fraction=fraction)


def test_observation_delay_shows_the_chosen_envs_policy_the_previous_steps_state():
    """``randomization.observation_delay_fraction``: the chosen envs' policy observation is the observation of the
    state one policy step before (base velocities, gravity, joints) with this step's command and last actions, as
    the validation's ``latency`` scenario builds it; right after a reset, of the reset state; the critic's and the
    other envs' observations are of the current state; the final observations (before a reset) are delayed too.
    0 draws no random numbers (a seed's runs are unchanged); a bad fraction is an error naming the field."""
    from diffloco_ext.tasks.velocity.observations import policy_observation

    env = _delayed_env(8, 0.5)
    late = env.observation_delayed.clone()
    assert 0 < int(late.sum()) < 8
    rng = np.random.default_rng(4)

    def observed(q, u):
        return policy_observation(q, u, env.params["body_com"][:, 0], env.commands.command, env.actions,
                                  env.default_joint_pos, env.to_isaaclab)

    torch.testing.assert_close(env.get_observations()["policy"], observed(env.q, env.u))  # after the reset
    env.episode_length_buf[2] = env.max_episode_length - 3  # env 2 times out (resets) at the third step
    for t in range(4):
        q0, u0 = env.q.clone(), env.u.clone()
        obs, _, dones, extras = env.step(torch.tensor(rng.uniform(-0.5, 0.5, (8, 12))))
        kept = ~dones.bool()  # only an env that resets draws its delay again
        assert torch.equal(env.observation_delayed[kept], late[kept])
        expected = torch.where(late[:, None], observed(q0, u0), observed(env.q, env.u))
        if t == 2:
            assert bool(dones[2])
            late = env.observation_delayed.clone()  # env 2 drew again at its reset: it sees its reset state
            expected[2] = observed(env.q, env.u)[2]
        else:  # (the final observations hold the command before this step's resampling)
            state_part = [*range(9), *range(12, 48)]
            torch.testing.assert_close(extras["final_observations"]["policy"][:, state_part], expected[:, state_part])
        torch.testing.assert_close(obs["policy"], expected)
        torch.testing.assert_close(obs["critic"][:, :48], observed(env.q, env.u))
        assert not torch.allclose(observed(q0, u0)[late], observed(env.q, env.u)[late])  # the delay shows
    # a saved state restores the delayed envs and the state they see
    state = env.state_dict()
    a = torch.tensor(rng.uniform(-0.5, 0.5, (8, 12)))
    first = env.step(a)[0]["policy"]
    env.load_state_dict(state)
    torch.testing.assert_close(env.step(a)[0]["policy"], first)
    # off: no draw (the same stream as before the option)
    off, plain = _delayed_env(4, 0.0), make_env(num_envs=4, heading=False)
    assert torch.equal(off.generator.get_state(), plain.generator.get_state()) and not off.observation_delayed.any()
    for bad in (1.5, -0.1, True):
        cfg = AnymalDFlatEnvCfg(num_envs=2, seed=3)
        cfg.randomization.observation_delay_fraction = bad
        with pytest.raises(ValueError, match="env.randomization.observation_delay_fraction"):
            VelocityEnv(cfg)
    cfg = AnymalDFlatEnvCfg(num_envs=2, seed=3)
    cfg.randomization.after_curriculum.observation_delay_fraction = 2.0
    with pytest.raises(ValueError, match="after_curriculum.observation_delay_fraction"):
        VelocityEnv(cfg)


def test_delayed_observation_gradients_match_finite_differences():
    """Float64 central differences of the delayed envs' observations (and the rewards) over 3 policy steps w.r.t.
    the actions: the delayed state is the previous step's, in the graph (a policy step's action reaches the
    delayed observation one step later)."""
    env = _delayed_env(3, 1.0)
    with torch.no_grad():
        for _ in range(10):
            env.step(torch.zeros(3, 12, dtype=torch.float64))
    state = env.state_dict()
    rng = np.random.default_rng(5)
    actions = [torch.tensor(rng.uniform(-0.3, 0.3, (3, 12))).requires_grad_(True) for _ in range(3)]
    grads = torch.autograd.grad(loss_through_steps(env, state, actions), actions)
    assert check_action_gradients(env, state, actions, grads, [(0, 0, 4), (1, 1, 7), (0, 2, 11), (1, 0, 2)]) >= 3
    # the last step's delayed joint observations depend on the second step's action, not on the third's
    env.load_state_dict(state)
    a = [x.detach().clone().requires_grad_(True) for x in actions]
    for x in a:
        obs = env.step(x)[0]["policy"]
    g1, g2 = torch.autograd.grad(obs[:, 12:36].sum(), [a[1], a[2]], allow_unused=True)
    assert g1.abs().max() > 0 and (g2 is None or g2.abs().max() == 0)


def test_relative_gradient_clip_bounds_outlier_envs_only():
    """The relative clip scales a row above ``k`` times the batch's median row norm down to that bound, leaves the
    rows below it (and zero rows, which do not count towards the median) untouched."""
    from diffloco_ext.tasks.locomotion_env import _row_norm_clip

    grad = torch.zeros(6, 4, dtype=torch.float64)
    grad[0, 0], grad[1, 1], grad[2, 2], grad[3, 3], grad[4, 0] = 1.0, 2.0, 3.0, 1e6, 2.5  # row 5: zero
    clipped = _row_norm_clip(None, 2.0)(grad.clone())
    median = 2.5  # of the non-zero rows 1, 2, 3, 2.5, 1e6
    assert torch.allclose(clipped[:3], grad[:3]) and torch.allclose(clipped[4:], grad[4:])
    assert torch.isclose(clipped[3].norm(), torch.tensor(2.0 * median, dtype=torch.float64))
    assert torch.allclose(clipped[3] / clipped[3].norm(), grad[3] / grad[3].norm())  # direction kept
    both = _row_norm_clip(1.5, 2.0)(grad.clone())  # the absolute bound is the tighter one here
    assert torch.linalg.norm(both, dim=1).max() <= 1.5 + 1e-12
    # in an env rollout: on by default, and it changes the gradient only where a row is an outlier
    env = make_env(num_envs=4, heading=False)
    assert env.cfg.grad_clip_relative is not None


def test_registration_and_bad_input():
    assert "DiffLoco-Velocity-Flat-AnymalD" in registry.task_ids()
    with pytest.raises(KeyError, match="unknown task"):
        registry.load_cfg("DiffLoco-Nope")
    with pytest.raises(ValueError, match="unknown algorithm"):
        registry.load_agent_cfg("DiffLoco-Velocity-Flat-AnymalD", "ddpg")
    env = make_env(num_envs=2)
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(2, 11, dtype=torch.float64))


def test_state_gradient_clip_bounds_each_envs_gradient():
    """The per-env, per-step clip of the state gradient bounds what one env contributes; off, the same rollout
    gives the exact (larger) gradient."""
    grads = {}
    for clip in (None, 1e-3):
        env = make_env(num_envs=2, heading=False)
        env.cfg.state_grad_clip = clip
        env.cfg.action_grad_clip = env.cfg.grad_clip_relative = None
        a = [torch.full((2, 12), 0.1, dtype=torch.float64, requires_grad=True) for _ in range(3)]
        total = sum(env.step(x)[1].sum() for x in a)
        grads[clip] = torch.autograd.grad(total, a[0])[0]
    assert grads[None].norm() > 3 * grads[1e-3].norm() > 0  # what remains: the actions' direct effect on their own step


def test_command_curriculum_widens_from_its_initial_ranges():
    """Commands start on the curriculum's initial ranges (forward speeds only here), widen linearly to the full
    ranges over ``curriculum_steps`` policy steps and stay there; the heading controller's yaw-rate limit follows."""
    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    cfg = CommandsCfg(curriculum_steps=100, curriculum_initial_lin_vel_x=(0.5, 1.0),
                      curriculum_initial_lin_vel_y=(0.0, 0.0), curriculum_initial_ang_vel_z=(0.0, 0.0),
                      rel_standing_envs=0.0)
    gen = torch.Generator().manual_seed(0)
    cmd = VelocityCommand(cfg, 4096, "cpu", gen)
    everyone = torch.ones(4096, dtype=torch.bool)
    cmd.resample(everyone)
    assert float(cmd.command[:, 0].min()) >= 0.5 and float(cmd.command[:, 0].max()) <= 1.0
    assert float(cmd.command[:, 1].abs().max()) == 0.0
    cmd.update(0.02, torch.full((4096,), 3.0))  # heading far from its targets: the yaw rate is clamped to ~0
    assert float(cmd.command[:, 2].abs().max()) <= 1.0 / 100 + 1e-6
    cmd.steps = 50
    assert cmd.current_range("lin_vel_x") == pytest.approx((-0.25, 1.0))
    assert cmd.current_range("ang_vel_z") == pytest.approx((-0.5, 0.5))
    cmd.resample(everyone)
    assert float(cmd.command[:, 0].min()) < -0.2 and float(cmd.command[:, 1].abs().max()) > 0.45
    cmd.steps = 1000
    assert cmd.current_range("lin_vel_y") == cfg.lin_vel_y and cmd.progress == 1.0
    plain = VelocityCommand(CommandsCfg(curriculum_steps=100), 8, "cpu", gen)  # no initial ranges given: off
    assert plain.progress == 1.0 and plain.current_range("lin_vel_x") == (-1.0, 1.0)
    scaled = VelocityCommand(CommandsCfg(curriculum_steps=100, curriculum_initial_scale=0.3), 8, "cpu", gen)
    assert scaled.current_range("ang_vel_z") == pytest.approx((-0.3, 0.3))


def test_resampling_period_shortens_once_the_curriculum_is_done():
    """``resampling_time_final`` applies once the commands have reached their full ranges, not before."""
    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    cfg = CommandsCfg(curriculum_steps=100, curriculum_initial_lin_vel_x=(0.5, 1.0), resampling_time=10.0,
                      resampling_time_final=4.0)
    cmd = VelocityCommand(cfg, 8, "cpu", torch.Generator().manual_seed(0))
    everyone = torch.ones(8, dtype=torch.bool)
    cmd.resample(everyone)
    assert cmd.resampling_time == 10.0 and float(cmd.time_left.max()) == 10.0
    cmd.steps = 100
    cmd.resample(everyone)
    assert cmd.resampling_time == 4.0 and float(cmd.time_left.max()) == 4.0
    for _ in range(200):  # 4 s of policy steps: every env resampled once more, on the new period
        cmd.update(0.02, torch.zeros(8))
    assert float(cmd.time_left.max()) <= 4.0
    assert VelocityCommand(CommandsCfg(), 2, "cpu", torch.Generator()).resampling_time == 10.0


def test_boundary_commands_move_a_fraction_to_the_edge_once_the_curriculum_is_done():
    """``boundary_command_fraction`` moves that fraction of the planar commands out along their direction to
    ``boundary_command_scale`` of the range box's edge (so corners such as (1, 1) come up more often), inside the
    ranges, and only once the curriculum has reached the full ranges; the default keeps Isaac Lab's uniform draw."""
    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    n = 20000
    everyone = torch.ones(n, dtype=torch.bool)

    def draw(cfg, steps=0):
        cmd = VelocityCommand(cfg, n, "cpu", torch.Generator().manual_seed(0))
        cmd.steps = steps
        cmd.resample(everyone)
        return cmd.command

    uniform = draw(CommandsCfg(rel_standing_envs=0.0))
    edge = draw(CommandsCfg(rel_standing_envs=0.0, boundary_command_fraction=0.5, boundary_command_scale=(0.9, 1.0)))
    fast = lambda c: float((torch.linalg.norm(c[:, :2], dim=1) > 1.1).float().mean())  # noqa: E731
    assert fast(uniform) == pytest.approx(0.11, abs=0.01)  # the corners beyond 1.1 m/s of the uniform square
    assert fast(edge) > 0.2 and float(edge[:, :2].abs().max()) <= 1.0
    # a moved command keeps its direction and lies between 0.9 and 1 of the way to the box's edge
    reach = edge[:, :2].abs().max(dim=1).values
    moved = reach >= 0.9
    assert 0.5 <= float(moved.float().mean()) <= 0.6  # half moved, plus the uniform draws already that far out
    assert torch.equal(edge[:, 2], uniform[:, 2])  # the yaw rate is not touched
    cross = edge[:, 0] * uniform[:, 1] - edge[:, 1] * uniform[:, 0]
    assert float(cross.abs().max()) < 1e-5 and bool(((edge[:, :2] * uniform[:, :2]).sum(1) >= 0).all())
    # during a curriculum the draws stay uniform in the current (narrowed) ranges
    cur = CommandsCfg(rel_standing_envs=0.0, boundary_command_fraction=1.0, curriculum_steps=100,
                      curriculum_initial_lin_vel_x=(0.5, 1.0), curriculum_initial_lin_vel_y=(0.0, 0.0))
    early, done = draw(cur, steps=10), draw(cur, steps=100)
    assert float(early[:, 1].abs().max()) <= 0.1 + 1e-6
    assert float(done[:, :2].abs().max(dim=1).values.min()) >= 0.85 - 1e-6
    for bad in (dict(boundary_command_fraction=1.5), dict(boundary_command_scale=(0.9, 1.2)),
                dict(boundary_command_scale=(0.0, 1.0))):
        with pytest.raises(ValueError, match="boundary_command"):
            VelocityCommand(CommandsCfg(**bad), 2, "cpu", torch.Generator())


def test_curriculum_gate_holds_the_ranges_until_the_policy_tracks():
    """``curriculum_gate_lin_vel_error``: the curriculum's clock stops while the running planar error of the moving
    envs is above the gate and runs while it is below; standing envs and non-finite errors are not counted; without
    the error it is a clear error; the running error survives a state round trip; bad gates are rejected."""
    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    cfg = CommandsCfg(rel_standing_envs=0.0, curriculum_steps=100, curriculum_initial_lin_vel_x=(0.5, 1.0),
                      curriculum_gate_lin_vel_error=0.3, curriculum_gate_window=4)
    n, heading = 6, torch.zeros(6)
    cmd = VelocityCommand(cfg, n, "cpu", torch.Generator().manual_seed(0))
    cmd.resample(torch.ones(n, dtype=torch.bool))
    for _ in range(20):  # a policy that stands: error 0.75 m/s
        cmd.update(0.02, heading, torch.full((n,), 0.75))
    assert cmd.steps == 0 and cmd.progress == 0.0 and cmd.gate_error == pytest.approx(0.75)
    for _ in range(20):  # it walks: the running error falls below 0.3 after a few steps and the clock runs
        cmd.update(0.02, heading, torch.full((n,), 0.1))
    assert 10 < cmd.steps < 20 and cmd.gate_error < 0.3
    before = cmd.steps
    error = torch.full((n,), 0.1)
    error[0] = float("nan")  # a diverged env: not counted
    cmd.is_standing_env[1] = True  # a standing env tracking badly: not counted
    error[1] = 50.0
    cmd.update(0.02, heading, error)
    assert cmd.steps == before + 1 and cmd.gate_error < 0.3
    state = cmd.state_dict()
    fresh = VelocityCommand(cfg, n, "cpu", torch.Generator().manual_seed(0))
    fresh.load_state_dict(state)
    assert fresh.steps == cmd.steps and fresh.gate_error == cmd.gate_error
    with pytest.raises(ValueError, match="planar tracking error"):
        cmd.update(0.02, heading)
    ungated = VelocityCommand(CommandsCfg(curriculum_steps=100, curriculum_initial_scale=0.5), n, "cpu",
                              torch.Generator())
    ungated.update(0.02, heading)
    assert ungated.steps == 1  # no gate: the step count alone, no error needed
    for bad in (dict(curriculum_gate_lin_vel_error=0.0), dict(curriculum_gate_lin_vel_error=float("nan")),
                dict(curriculum_gate_window=0)):
        with pytest.raises(ValueError, match="curriculum_gate"):
            VelocityCommand(CommandsCfg(**bad), 2, "cpu", torch.Generator())


def test_env_feeds_the_curriculum_gate_and_logs_the_progress():
    """In the env, the gate reads each step's planar tracking error: a standing (zero-action) robot on forward
    commands of 0.5-1 m/s keeps the curriculum at 0; the progress and the running error are in the episode log."""
    cfg = AnymalDFlatEnvCfg(num_envs=4, seed=3)
    cfg.sim.dtype = "float32"
    cfg.observation_noise.enable = False
    cfg.commands.rel_standing_envs = 0.0
    cfg.commands.curriculum_steps = 50
    cfg.commands.curriculum_initial_lin_vel_x = (0.5, 1.0)
    cfg.commands.curriculum_initial_lin_vel_y = (0.0, 0.0)
    cfg.commands.curriculum_initial_ang_vel_z = (0.0, 0.0)
    cfg.commands.curriculum_gate_lin_vel_error = 0.3
    cfg.episode_length_s = 0.2  # time-outs every 10 steps, so the episode log is written
    env = VelocityEnv(cfg)
    logs = []
    with torch.no_grad():
        for _ in range(12):
            _, _, _, extras = env.step(torch.zeros(4, 12))
            if extras["log"]:
                logs.append(extras["log"])
    assert env.commands.steps == 0 and env.commands.gate_error > 0.3
    assert logs and logs[-1]["Curriculum/command_progress"] == 0.0
    assert logs[-1]["Curriculum/gate_lin_vel_error"] == pytest.approx(env.commands.gate_error, rel=0.2)


def _push_env(after_curriculum: bool, curriculum_steps: int) -> VelocityEnv:
    cfg = AnymalDFlatEnvCfg(num_envs=4, seed=5)
    cfg.sim.dtype = "float32"
    cfg.observation_noise.enable = False
    cfg.randomization.push_velocity_xy = 1.0
    cfg.randomization.push_interval = (0.1, 0.1)  # every 5 policy steps
    cfg.randomization.pushes_after_curriculum = after_curriculum
    if curriculum_steps:
        cfg.commands.curriculum_steps = curriculum_steps
        cfg.commands.curriculum_initial_scale = 0.5
    return VelocityEnv(cfg)


def _planar_velocity_jumps(env: VelocityEnv, steps: int) -> list[int]:
    """Policy steps at which some env's world-frame planar base velocity jumped by > 0.3 m/s after the step."""
    jumps = []
    with torch.no_grad():
        for k in range(steps):
            env.step(torch.zeros(env.num_envs, 12))
            before = env.last_output.u[:, :2].clone()  # the physics' end-of-step velocity
            after = env.u[:, :2]  # after the step's events (the push)
            if bool(((after - before).norm(dim=1) > 0.3).any()):
                jumps.append(k)
    return jumps


def test_pushes_kick_at_their_interval_and_wait_for_the_curriculum_when_asked():
    """Pushes change the base's planar velocity at the push interval; with ``pushes_after_curriculum`` nobody is
    pushed while the command curriculum runs, and pushes start once it has reached the full ranges."""
    plain = _planar_velocity_jumps(_push_env(False, 0), 12)
    assert plain and all(k % 5 == 4 for k in plain), plain  # a push every 0.1 s = 5 policy steps
    waiting = _push_env(True, 8)  # the curriculum reaches the full ranges after 8 policy steps
    jumps = _planar_velocity_jumps(waiting, 16)
    assert jumps and min(jumps) >= 8, jumps
    assert _planar_velocity_jumps(_push_env(True, 0), 6), "without a curriculum the pushes start at once"


def test_fall_replay_repeats_the_commands_under_which_envs_fell():
    """``fall_replay_fraction``: once the curriculum is done, a fall within ``fall_replay_window`` s of its command's
    draw stores that command (vx, vy and, in heading mode, the heading error it started with); that share of later
    draws repeats stored ones, a heading env's new target set as far from its heading then as the fallen one's was.
    Late falls, standing envs and falls during the curriculum are not stored; fraction 0 draws what it always did."""
    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    n, dt = 6, 0.02
    cfg = CommandsCfg(rel_standing_envs=0.0, fall_replay_fraction=1.0, fall_replay_buffer=4, fall_replay_window=1.0)
    cmd = VelocityCommand(cfg, n, "cpu", torch.Generator().manual_seed(0))
    everyone = torch.ones(n, dtype=torch.bool)
    cmd.resample(everyone)  # nothing stored yet: the uniform draws
    plain = VelocityCommand(dataclasses.replace(cfg, fall_replay_fraction=0.0), n, "cpu",
                            torch.Generator().manual_seed(0))
    plain.resample(everyone)
    torch.testing.assert_close(cmd.command, plain.command)
    heading = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
    for _ in range(10):  # 0.2 s
        cmd.update(dt, heading)
    started = wrap(cmd.heading_target.double() - heading)
    torch.testing.assert_close(cmd.draw_heading_error.double(), started, atol=1e-6, rtol=0)
    fell = torch.tensor([True, False, False, False, False, False])
    cmd.record_falls(fell, heading)
    assert cmd.fall_count == 1
    stored = cmd.command[0].clone()
    # every later draw repeats env 0's command: the same (vx, vy), and the heading error it started with
    cmd.resample(everyone)
    assert torch.allclose(cmd.command[:, :2], stored[:2].expand(n, 2))
    turned = heading + 0.5
    cmd.update(dt, turned)
    torch.testing.assert_close(wrap(cmd.heading_target.double() - turned), started[0].expand(n), atol=1e-6, rtol=0)
    # a fall long after its draw, or of a standing env, is not blamed on the command
    for _ in range(60):  # 1.2 s > the window
        cmd.update(dt, turned)
    cmd.record_falls(torch.ones(n, dtype=torch.bool), turned)
    assert cmd.fall_count == 1
    cmd.resample(everyone)
    cmd.is_standing_env[:] = True
    cmd.update(dt, turned)
    cmd.record_falls(torch.ones(n, dtype=torch.bool), turned)
    assert cmd.fall_count == 1
    # during a curriculum nothing is stored or replayed, and the draws are those of fraction 0
    cur = dataclasses.replace(cfg, curriculum_steps=1000, curriculum_initial_lin_vel_x=(0.5, 1.0))
    a = VelocityCommand(cur, n, "cpu", torch.Generator().manual_seed(1))
    b = VelocityCommand(dataclasses.replace(cur, fall_replay_fraction=0.0), n, "cpu", torch.Generator().manual_seed(1))
    for c in (a, b):
        c.resample(everyone)
        c.update(dt, heading)
        c.record_falls(everyone, heading)
        c.resample(everyone)
    assert a.fall_count == 0
    torch.testing.assert_close(a.command, b.command)
    # the ring buffer keeps the last falls; the state round-trips for a bit-exact resume
    state = cmd.state_dict()
    again = VelocityCommand(cfg, n, "cpu", torch.Generator().manual_seed(0))
    again.load_state_dict(state)
    assert again.fall_count == cmd.fall_count and torch.equal(again.fall_buffer, cmd.fall_buffer)
    for bad in (dict(fall_replay_fraction=1.5), dict(fall_replay_buffer=0), dict(fall_replay_window=0.0)):
        with pytest.raises(ValueError, match="fall_replay"):
            VelocityCommand(CommandsCfg(**bad), 2, "cpu", torch.Generator())


def test_env_stores_the_commands_of_its_falls_for_replay():
    """The env hands its terminated envs (not time-outs, not diverged ones) to the command generator before it
    resets them, and logs how many commands the replay holds."""
    env = make_env()
    env.cfg.commands.fall_replay_fraction = 0.5
    env.commands.cfg = env.cfg.commands
    env.episode_length_buf[:] = env.max_episode_length - 1
    env.episode_length_buf[2] = 5
    env.q = env.q.clone()
    env.q[2, 2] = 0.05  # env 2 lies on the ground; the others time out
    with torch.no_grad():
        _, _, _, extras = env.step(torch.zeros(4, 12, dtype=torch.float64))
    assert env.commands.fall_count == 1
    assert extras["log"]["Curriculum/fall_replay_commands"] == 1.0


def test_tracking_reference_reaches_a_new_command_at_its_bounded_acceleration():
    """``tracking_reference_accel``: the reference the tracking rewards follow starts at the base's velocity at a
    reset and moves towards the command at most (a_planar, a_yaw) x dt per step (the planar part along the straight
    line), reaching it and then staying on it; without the option it is the command itself."""
    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    dt, n = 0.02, 3
    everyone = torch.ones(n, dtype=torch.bool)
    cfg = CommandsCfg(heading_command=False, rel_standing_envs=0.0, tracking_reference_accel=(2.0, 4.0))
    cmd = VelocityCommand(cfg, n, "cpu", torch.Generator().manual_seed(0))
    cmd.resample(everyone)
    cmd.command = torch.tensor([[1.0, 1.0, 1.0], [-0.6, 0.8, -1.0], [0.0, 0.0, 0.0]])
    start = torch.tensor([[-1.0, -1.0, -1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    cmd.reset_reference(everyone, start)
    torch.testing.assert_close(cmd.reference, start)
    path = []
    for _ in range(100):  # 2 s
        cmd.update(dt, torch.zeros(n))
        path.append(cmd.reference.clone())
    path = torch.stack([start] + path)
    step = path[1:] - path[:-1]
    assert float(torch.linalg.norm(step[..., :2], dim=-1).max()) <= 2.0 * dt + 1e-6
    assert float(step[..., 2].abs().max()) <= 4.0 * dt + 1e-6
    # env 0: 2 sqrt(2) m/s to go at 2 m/s^2 takes 1.41 s (71 steps), on the straight line; its yaw 2 rad/s in 0.5 s
    planar_left = torch.linalg.norm(cmd.command[0, :2] - path[:, 0, :2], dim=1)
    assert 70 <= int((planar_left > 1e-6).sum()) <= 72
    torch.testing.assert_close(path[:, 0, 0], path[:, 0, 1])
    assert int(((cmd.command[0, 2] - path[:, 0, 2]).abs() > 1e-6).sum()) == 25
    torch.testing.assert_close(cmd.reference, cmd.command)  # all reached within 2 s, and held
    assert float(path[:, 2].abs().max()) == 0.0  # already at its command
    # a resampled command is ramped to from the reference, not jumped to
    cmd.command = torch.tensor([[0.0, 0.0, 0.0]] * n)
    cmd.update(dt, torch.zeros(n))
    assert float(torch.linalg.norm(cmd.reference[0, :2] - torch.tensor([1.0, 1.0]))) == pytest.approx(2.0 * dt)
    # without the option the reference is the command, at a reset and after every update
    plain = VelocityCommand(CommandsCfg(heading_command=False), n, "cpu", torch.Generator().manual_seed(0))
    plain.resample(everyone)
    plain.reset_reference(everyone, start)
    torch.testing.assert_close(plain.reference, plain.command)
    plain.update(dt, torch.zeros(n))
    torch.testing.assert_close(plain.reference, plain.command)
    # during a curriculum the reference is the command; from its end on it ramps
    cur = VelocityCommand(CommandsCfg(heading_command=False, rel_standing_envs=0.0, tracking_reference_accel=(2.0, 4.0),
                                      curriculum_steps=10, curriculum_initial_scale=0.5), n, "cpu",
                          torch.Generator().manual_seed(0))
    cur.resample(everyone)
    cur.reset_reference(everyone, start)
    torch.testing.assert_close(cur.reference, cur.command)
    cur.update(dt, torch.zeros(n))
    torch.testing.assert_close(cur.reference, cur.command)
    cur.steps = 10
    cur.reset_reference(everyone, start)
    torch.testing.assert_close(cur.reference, start)
    cur.update(dt, torch.zeros(n))
    assert float(torch.linalg.norm(cur.reference[:, :2] - start[:, :2], dim=1).max()) <= 2.0 * dt + 1e-6
    for bad in ((0.0, 1.0), (1.0, float("nan")), (1.0,)):
        with pytest.raises(ValueError, match="tracking_reference_accel"):
            VelocityCommand(CommandsCfg(tracking_reference_accel=bad), 2, "cpu", torch.Generator())


def test_tracking_rewards_follow_the_reference_and_the_metrics_the_command():
    """With ``tracking_reference_accel`` the tracking rewards (and the critic's tracking features) measure the base's
    velocity against the reference; the tracking error the env reports (the validation's measure) is to the
    command."""
    from diffloco_ext.tasks.velocity import rewards as R

    cfg = AnymalDFlatEnvCfg(num_envs=4, seed=3)
    cfg.commands.tracking_reference_accel = (1.0, 1.0)
    cfg.observation_noise.enable = False
    cfg.randomization.enable = False
    env = VelocityEnv(cfg)
    env.reset()
    env.step(torch.zeros(4, 12, dtype=env.dtype))
    command = torch.tensor([[1.0, 0.0, 0.5]] * 4)
    ref = torch.tensor([[0.2, 0.1, 0.3]] * 4)
    env.commands.command, env.commands.reference = command.clone(), ref.clone()
    c, base = cfg.rewards, env.base_state()
    _, terms = env._rewards(env.last_output, (env.q, env.u))
    lin = R.track_lin_vel_xy_exp(ref.to(env.dtype), base.lin_vel_b, c.track_lin_vel_xy_std)
    ang = R.track_ang_vel_z_exp(ref.to(env.dtype), base.ang_vel_b, c.track_ang_vel_z_std)
    torch.testing.assert_close(terms["track_lin_vel_xy"], c.track_lin_vel_xy * lin * env.step_dt)
    torch.testing.assert_close(terms["track_ang_vel_z"], c.track_ang_vel_z * ang * env.step_dt)
    to_command = R.track_lin_vel_xy_exp(command.to(env.dtype), base.lin_vel_b, c.track_lin_vel_xy_std)
    assert float((lin - to_command).abs().min()) > 0.05  # the two differ on this state: the test can tell them apart
    features = env._tracking_features()
    torch.testing.assert_close(features[:, :2], (ref.to(env.dtype)[:, :2] - base.lin_vel_b[:, :2]).to(features.dtype))
    torch.testing.assert_close(features[:, 3], lin.to(features.dtype))
    error = env._metrics(None)["lin_vel_xy_error"]
    torch.testing.assert_close(error, torch.linalg.norm(command.to(env.dtype)[:, :2] - base.lin_vel_b[:, :2], dim=1))
