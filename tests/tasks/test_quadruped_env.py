"""``DiffLoco-Quadruped-Forward`` (Schwarke et al., arXiv 2404.02887, A.2): SHAC's Ant observations and rewards on
hand-made states, its terminations and time-out, and its step gradient against float64 finite differences."""

from __future__ import annotations

import math

import pytest
import torch

from diffloco_ext.tasks import registry
from diffloco_ext.tasks.quadruped.env import QuadrupedForwardEnv
from diffloco_ext.tasks.quadruped.env_cfg import QuadrupedForwardEnvCfg

from .finite_differences import three_steps_through_a_reset_match_finite_differences

S = math.sqrt(0.5)
#: base orientations (w, x, y, z) of the hand-made state: upright, yawed +90 deg, pitched +90 deg about y
QUATS = [(1.0, 0.0, 0.0, 0.0), (S, 0.0, 0.0, S), (S, 0.0, S, 0.0)]


def make_env(num_envs: int = 3) -> QuadrupedForwardEnv:
    cfg = QuadrupedForwardEnvCfg(num_envs=num_envs, seed=5)
    cfg.sim.dtype = "float64"
    return QuadrupedForwardEnv(cfg)


def _hand_made_state(env: QuadrupedForwardEnv):
    """Base heights 0.45 / 0.40 / 0.30 m in the orientations of ``QUATS``, forward speeds 1.0 / 0.5 / 1.6 m/s (world
    x), body-frame angular velocity (1, 2, 3) rad/s, joint angles and speeds distinct per joint, actions set."""
    q, u = env.q.clone(), env.u.clone()
    q[:, 2] = torch.tensor([0.45, 0.40, 0.30])
    q[:, 3:7] = torch.tensor(QUATS, dtype=q.dtype)
    q[:, 7:] = 0.01 * torch.arange(12, dtype=q.dtype)  # simulator order
    u[:, 0:3] = torch.tensor([[1.0, 0.1, 0.0], [0.5, -0.2, 0.05], [1.6, 0.0, -0.1]])
    u[:, 3:6] = torch.tensor([1.0, 2.0, 3.0])
    u[:, 6:] = torch.arange(12, dtype=u.dtype) - 6.0
    env.q, env.u = q, u
    env.actions = 0.1 * torch.arange(36, dtype=q.dtype).reshape(3, 12) - 1.0
    return q, u


def test_task_is_registered_with_its_entry_points():
    env_cfg = registry.load_cfg("DiffLoco-Quadruped-Forward")
    assert isinstance(env_cfg, QuadrupedForwardEnvCfg)
    assert isinstance(registry.make_env("DiffLoco-Quadruped-Forward", QuadrupedForwardEnvCfg(num_envs=2)),
                      QuadrupedForwardEnv)
    assert env_cfg.episode_length_s == 10.0 and env_cfg.termination_height == 0.25
    assert env_cfg.rewards.target_speed == 1.0


def test_observations_on_a_hand_made_state():
    """DiffRL Ant's layout (49): height, quaternion, world linear velocity, world angular velocity, joint angles and
    0.1 x joint speeds in Isaac Lab's order, the up axis's z, the forward axis's world x, the last actions."""
    env = make_env()
    q, u = _hand_made_state(env)
    obs = env._observations()["policy"]
    assert obs.shape == (3, 49) and env.num_policy_obs == 49
    torch.testing.assert_close(obs[:, 0], q[:, 2])
    torch.testing.assert_close(obs[:, 1:5], q[:, 3:7])
    torch.testing.assert_close(obs[:, 5:8], u[:, 0:3])
    # the body-frame angular velocity (1, 2, 3) in world axes: upright as is; yawed +90: (-2, 1, 3); pitched +90
    # about y (body x -> world -z, body z -> world x): (3, 2, -1)
    expected_w = torch.tensor([[1.0, 2.0, 3.0], [-2.0, 1.0, 3.0], [3.0, 2.0, -1.0]], dtype=obs.dtype)
    torch.testing.assert_close(obs[:, 8:11], expected_w)
    torch.testing.assert_close(obs[:, 11:23], q[:, 7:][:, env.to_isaaclab])
    torch.testing.assert_close(obs[:, 23:35], 0.1 * u[:, 6:][:, env.to_isaaclab])
    assert env.joint_names[:4] == ["LF_HAA", "LH_HAA", "RF_HAA", "RH_HAA"]  # Isaac Lab's grouping by joint type
    torch.testing.assert_close(obs[:, 35], torch.tensor([1.0, 1.0, 0.0], dtype=obs.dtype))  # up axis, world z
    torch.testing.assert_close(obs[:, 36], torch.tensor([1.0, 0.0, 0.0], dtype=obs.dtype))  # forward axis, world x
    torch.testing.assert_close(obs[:, 37:49], env.actions)


def test_rewards_on_a_hand_made_state():
    """Each term by hand: the speed kernel exp(-(vx - 1)^2 / 0.5^2), uprightness 0.1 x up_z, heading = the forward
    axis's world x, height above 0.25 m, -0.005 x |a|^2."""
    env = make_env()
    q, _ = _hand_made_state(env)
    total, terms = env._rewards(None, None)
    vx = torch.tensor([1.0, 0.5, 1.6], dtype=q.dtype)
    expected = {
        "speed": torch.exp(-(vx - 1.0) ** 2 / 0.25),
        "up": 0.1 * torch.tensor([1.0, 1.0, 0.0], dtype=q.dtype),
        "heading": torch.tensor([1.0, 0.0, 0.0], dtype=q.dtype),
        "height": torch.tensor([0.20, 0.15, 0.05], dtype=q.dtype),
        "action": -0.005 * (env.actions**2).sum(dim=1),
    }
    assert set(terms) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(terms[name], value, msg=name)
    torch.testing.assert_close(total, sum(expected.values()))


def test_a_fall_below_the_termination_height_and_the_time_out_end_episodes():
    """Env 0 times out at the 500th step (10 s at 50 Hz), env 1 (upside down, base at 0.2 m) falls, env 2 goes on;
    the two that ended are reset near the default pose, with the time-out flag only for env 0."""
    env = make_env()
    assert env.max_episode_length == 500 and env.step_dt == pytest.approx(0.02)
    q = env.q.clone()
    q[1, 2], q[1, 3:7] = 0.2, torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=q.dtype)
    env.q = q
    env.episode_length_buf[0] = env.max_episode_length - 1
    env.episode_length_buf[2] = 7
    _, reward, dones, extras = env.step(torch.zeros(3, 12, dtype=torch.float64))
    assert dones.tolist() == [1, 1, 0]
    assert extras["time_outs"].tolist() == [True, False, False]
    assert extras["log"]["Episode_Termination/terminated"] == 1.0
    assert extras["log"]["Episode_Termination/time_out"] == 1.0
    assert env.episode_length_buf.tolist() == [0, 0, 8]
    assert float(extras["final_observations"]["policy"][1, 0]) < 0.25  # the fallen state, before its reset
    default = torch.tensor(env.model.default_q()[0], dtype=env.dtype)
    torch.testing.assert_close(env.q[:2, :7], default[:7].expand(2, 7))  # reset: base pose nominal
    assert float((env.q[:2, 7:] - default[7:]).abs().max()) <= env.cfg.reset_noise
    assert torch.isfinite(reward).all()


def test_env_step_gradients_match_finite_differences_through_a_reset():
    """Float64 central differences of rewards and observations over 3 policy steps w.r.t. the actions, env 0
    timing out after the second; the gradient clip off (the exact gradient)."""
    env = make_env()
    env.cfg.grad_clip_relative = None
    with torch.no_grad():  # settled on its feet, so the steps below have contacts
        for _ in range(10):
            env.step(torch.zeros(3, 12, dtype=torch.float64))
    three_steps_through_a_reset_match_finite_differences(env, seed=3)
