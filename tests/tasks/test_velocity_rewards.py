"""The velocity task's reward terms: each on hand-made states (values, float64 gradient checks), and their weights
over the command curriculum (``after_curriculum``, ``weights_after_curriculum``, ``weights_curriculum_end``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from diffloco_ext.tasks.velocity.env import REWARD_TERMS, VelocityEnv
from diffloco_ext.tasks.velocity.env_cfg import VelocityEnvCfg

from .velocity_envs import make_env, task_cfg


@pytest.fixture(scope="module")
def env():
    return make_env()


def test_tracking_reward_is_one_when_tracking(env):
    from diffloco_ext.tasks.velocity import rewards as R

    cmd = torch.tensor([[0.5, -0.2, 0.3]])
    assert R.track_lin_vel_xy_exp(cmd, torch.tensor([[0.5, -0.2, 9.0]]), 0.5).item() == pytest.approx(1.0)
    assert R.track_lin_vel_xy_exp(cmd, torch.tensor([[0.0, -0.2, 0.0]]), 0.5).item() == pytest.approx(math.exp(-1))
    assert R.track_ang_vel_z_exp(cmd, torch.tensor([[0, 0, 0.3]]), 0.5).item() == pytest.approx(1.0)
    from diffloco_ext.tasks.velocity.gaits import swing_height

    ref = swing_height(torch.tensor([0.15, 0.15]), torch.tensor([0.0, 0.5]), env.cfg.gait, torch.tensor([True, False]))
    # quarter period: the first pair at the apex, the other on the ground; a standing env stays down
    torch.testing.assert_close(ref, torch.tensor([[0.08, 0.0], [0.0, 0.0]]), atol=1e-7, rtol=0)


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


def _curriculum_cfg() -> VelocityEnvCfg:
    """Two envs in float64, no noise or randomisation, a 3-step command curriculum; ``excess_joint_vel`` -0.1 on every
    joint speed, ``foot_slip`` -0.5 only after the curriculum."""
    cfg = task_cfg(2)
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


def _excess_joint_vel_weights(cfg: VelocityEnvCfg, steps: int) -> list[tuple[float, float, int]]:
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
