"""The rough velocity task: Isaac Lab's rough interface (48 + 187-point height scan) on the generated terrain, envs
on their curriculum tiles, foot heights above the ground under each foot, and gradients through the height field."""

from __future__ import annotations

import numpy as np
import torch

from diffloco_ext.sim.terrain_generator import PyramidSlopeCfg, rough_terrains_cfg
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.velocity.env import VelocityEnv
from diffloco_ext.tasks.velocity.env_cfg import TerrainCfg, VelocityEnvCfg
from diffloco_ext.tasks.velocity.height_scan import scan_points, yaw_of

from .finite_differences import (
    one_step_reward_gradients,
    only_reward_terms,
    three_steps_through_a_reset_match_finite_differences,
)

TASK = "DiffLoco-Velocity-Rough-AnymalD"


def rough_env(num_envs=4, sub_terrains=None, **generator) -> VelocityEnv:
    """The task's interface (no recipe) on a small generated terrain (2 levels x 2 columns unless given), float64."""
    gen = rough_terrains_cfg(num_rows=2, num_cols=2, border_width=2.0, **generator)
    if sub_terrains is not None:
        gen.sub_terrains = sub_terrains
    cfg = VelocityEnvCfg(num_envs=num_envs, seed=3, terrain=TerrainCfg(generator=gen, max_init_level=1))
    cfg.sim.dtype = "float64"
    cfg.observation_noise.enable = False
    cfg.randomization.enable = False
    cfg.commands.heading_command = False
    return VelocityEnv(cfg)


def test_rough_interface_is_the_48_then_isaac_labs_height_scan():
    env = rough_env(num_envs=6, seed=0)
    obs = env.get_observations()
    assert env.num_policy_obs == 235 and obs["policy"].shape == (6, 235)
    for _ in range(3):
        obs, *_ = env.step(torch.rand(6, 12, generator=torch.Generator().manual_seed(1), dtype=torch.float64) - 0.5)
    q = env.q.detach().numpy()
    points = scan_points(dtype=torch.float64).numpy()
    yaw = yaw_of(env.q[:, 3:7].detach()).numpy()
    for e in range(6):  # Isaac Lab's definition from the terrain's own lookup: z_base - h(p_base + R_yaw p_k) - 0.5
        c, s = np.cos(yaw[e]), np.sin(yaw[e])
        x = q[e, 0] + c * points[:, 0] - s * points[:, 1]
        y = q[e, 1] + s * points[:, 0] + c * points[:, 1]
        expected = np.clip(q[e, 2] - env.terrain.height_at(x, y) - 0.5, -1.0, 1.0)
        np.testing.assert_allclose(obs["policy"][e, 48:].numpy(), expected, atol=1e-9)
    np.testing.assert_allclose(obs["critic"][:, :235].numpy(), obs["policy"].numpy())  # the critic reads it too


def test_training_noise_on_the_scan_then_its_clip():
    env = rough_env(num_envs=4)
    env.cfg.observation_noise.enable = True
    noisy = env._observations()["policy"][:, 48:]
    env.cfg.observation_noise.enable = False
    clean = env._observations()["policy"][:, 48:]
    assert 0.05 < (noisy - clean).abs().max() <= 0.1 + 1e-9 and noisy.abs().max() <= 1.0


def test_envs_start_on_their_tiles_and_move_up_and_down_the_levels():
    env = rough_env(num_envs=4)
    levels = env.terrain_levels
    origins = levels.origins
    assert torch.all((env.q[:, :2] - origins[:, :2]).abs() <= env.cfg.reset.position_xy + 1e-9)
    torch.testing.assert_close(env.q[:, 2], origins[:, 2] + env.cfg.reset.height)
    assert levels.types.tolist() == [0, 0, 1, 1]  # two columns: the envs split in blocks
    # env 0 walked 5 m (more than half a tile): up; env 1 stayed where it started with a command: down (at 0: stays)
    before = levels.levels.clone()
    q = env.q.detach().clone()
    q[0, 0] = origins[0, 0] + 5.0
    q[1, :2] = origins[1, :2]
    env.q = q
    env.commands.command[:] = torch.tensor([0.8, 0.0, 0.0])
    env._reset_envs(torch.tensor([True, True, False, False]))
    after = levels.levels
    assert after[0] == (before[0] + 1 if before[0] + 1 < 2 else after[0])  # past the last level: a random one
    assert after[1] == max(int(before[1]) - 1, 0) and after[2:].tolist() == before[2:].tolist()
    assert torch.all((env.q[:2, :2] - levels.origins[:2, :2]).abs() <= env.cfg.reset.position_xy + 1e-9)


def test_foot_heights_are_above_the_ground_under_each_foot():
    env = rough_env(num_envs=4, sub_terrains={"slope": PyramidSlopeCfg(proportion=1.0)}, difficulty_range=(0.9, 1.0))
    env.q = _off_the_platform(env)
    env.step(torch.zeros(4, 12, dtype=torch.float64))
    feet = env.last_output.foot_pos.detach().numpy()
    ground = env.terrain.height_at(feet[..., 0], feet[..., 1])
    np.testing.assert_allclose(env.foot_height.numpy(), feet[..., 2] - env.foot_radius.numpy() - ground, atol=1e-9)
    assert np.ptp(ground, axis=1).max() > 0.1  # the feet stand at different heights on the slope


def _off_the_platform(env) -> torch.Tensor:
    """The robots moved 2.5 m down the pyramid's x slope from its top platform, standing above the slope."""
    q = env.q.detach().clone()
    q[:, 0] = env.terrain_levels.origins[:, 0] + 2.5
    q[:, 2] = torch.as_tensor(env.terrain.height_at(q[:, 0].numpy(), q[:, 1].numpy())) + 0.62
    return q


def test_reward_gradient_through_the_height_field_matches_finite_differences():
    """The foot-height reference and the base height alone, robots on a 0.36-0.4 slope: float64 central differences
    of one step's reward w.r.t. the actions against the gradient through the height field (feet and base heights
    above the ground below them, the contact on the slope)."""
    env = rough_env(num_envs=2, sub_terrains={"slope": PyramidSlopeCfg(proportion=1.0)}, difficulty_range=(0.9, 1.0))
    env.cfg.grad_clip_relative = None
    env.q = _off_the_platform(env)
    with torch.no_grad():
        for _ in range(15):  # settle onto the slope
            env.step(torch.zeros(2, 12, dtype=torch.float64))
    only_reward_terms(env, {"foot_height_reference": 1.0, "base_height": -50.0})
    env.episode_length_buf[:] = torch.tensor([7, 22])
    base = torch.tensor(np.random.default_rng(5).uniform(-0.2, 0.2, (2, 12)))
    _, grad, fd = one_step_reward_gradients(env, base)
    assert grad.abs().max() > 1e-5  # (the reward is per policy step: x 0.02 s)
    torch.testing.assert_close(grad, fd, rtol=1e-4, atol=1e-9)


def test_three_steps_with_the_scan_through_a_reset_match_finite_differences():
    """Every reward term and the 235 observations (the scan differentiable in the base pose over the height field),
    three policy steps with a reset on the terrain in between: float64 central differences."""
    env = rough_env(num_envs=3, sub_terrains={"slope": PyramidSlopeCfg(proportion=1.0)}, difficulty_range=(0.5, 0.6))
    env.cfg.grad_clip_relative = None
    env.q = _off_the_platform(env)
    with torch.no_grad():
        for _ in range(10):
            env.step(torch.zeros(3, 12, dtype=torch.float64))
    env.detach_state()
    assert env.get_observations()["policy"][:, 48:].std() > 0.05  # the slope is in the scan
    three_steps_through_a_reset_match_finite_differences(env, seed=2)


def test_registered_rough_task_and_its_play_config():
    cfg, play = registry.load_cfg(TASK), registry.load_play_cfg(TASK)
    assert cfg.terrain.generator.num_rows == 10 and cfg.terrain.generator.num_cols == 20
    assert cfg.terrain.max_init_level == 5 and cfg.terrain.curriculum and cfg.rewards.flat_orientation == 0.0
    assert (play.terrain.generator.num_rows, play.terrain.generator.num_cols) == (5, 5)
    assert not play.terrain.curriculum and not play.randomization.enable
    assert registry.load_agent_cfg(TASK, "ppo").actor.hidden_dims == [512, 256, 128]


def test_the_rough_task_on_the_aligned_mujoco_step():
    """Song et al.'s aligned step on the terrain: MuJoCo stands on the same height field, the states are its own to
    the bit (a plain engine step on the same arrays), contact states read the ground below each foot."""
    from diffloco_ext.sim.mujoco_engine import MujocoEngine

    cfg = registry.load_play_cfg(TASK)
    cfg.num_envs, cfg.sim.engine, cfg.sim.engine_threads = 2, "mujoco", 1
    env = registry.make_env(TASK, cfg=cfg).unwrapped
    q, u = env.q.detach().clone(), env.u.detach().clone()
    actions = 0.1 * torch.ones(2, 12, dtype=env.dtype)
    env.step(actions)
    t = env.terrain
    engine = MujocoEngine(env.robot, 2, threads=1, terrain=(t.heights, t.origin_xy, t.cfg.resolution))
    engine.set_parameters(friction=env.params["friction"].detach().numpy().reshape(-1))
    plain = engine.step(q.numpy(), u.numpy(), env.joint_targets(actions).detach().numpy())
    assert np.array_equal(env.q.detach().numpy(), plain.q)
    gaps, _ = env.bridge.contact_of(env.q.detach())
    feet = env.last_output.foot_pos.detach().numpy()
    expected = feet[..., 2] - env.foot_radius.numpy() - t.height_at(feet[..., 0], feet[..., 1])
    np.testing.assert_allclose(gaps.numpy(), expected, atol=1e-9)
