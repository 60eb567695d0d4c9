"""The velocity task's policy interface: Isaac Lab's observations (policy and critic groups) on hand-made states, the
actions' joint mapping, the task's registration and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from diffloco_ext.tasks import registry
from diffloco_ext.tasks.velocity.observations import POLICY_TERMS

from .velocity_envs import ISAACLAB_ORDER, make_env


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
    joints = torch.stack([sim_joint[names.index(n)] for n in ISAACLAB_ORDER]).expand(N, 12)
    torch.testing.assert_close(obs[:, 12:24], joints)
    torch.testing.assert_close(obs[:, 24:36], 10 * joints)
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


def test_actions_map_by_name_to_the_simulators_joints(env):
    names = env.robot.joint_names
    for i, name in enumerate(ISAACLAB_ORDER):
        action = torch.zeros(env.num_envs, 12, dtype=torch.float64)
        action[:, i] = 1.0
        delta = env.joint_targets(action) - env.default_joint_pos_sim
        expected = torch.zeros(12, dtype=torch.float64)
        expected[names.index(name)] = 0.5
        torch.testing.assert_close(delta, expected.expand(env.num_envs, 12))


def test_registration_and_bad_input():
    assert "DiffLoco-Velocity-Flat-AnymalD" in registry.task_ids()
    with pytest.raises(KeyError, match="unknown task"):
        registry.load_cfg("DiffLoco-Nope")
    with pytest.raises(ValueError, match="unknown algorithm"):
        registry.load_agent_cfg("DiffLoco-Velocity-Flat-AnymalD", "ddpg")
    env = make_env(num_envs=2)
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(2, 11, dtype=torch.float64))
