"""The velocity task's commands: the command curriculum, the resampling period, the boundary commands, the tracking
reference the rewards follow."""

from __future__ import annotations

import pytest
import torch

from diffloco_ext.tasks.velocity.env import VelocityEnv

from .velocity_envs import task_cfg


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


def test_env_logs_the_curriculum_progress():
    """The command curriculum's progress is in the episode log (written at the resets, here every 10 steps)."""
    cfg = task_cfg(4)
    cfg.sim.dtype = "float32"
    cfg.observation_noise.enable = False
    cfg.commands.curriculum_steps = 50
    cfg.commands.curriculum_initial_lin_vel_x = (0.5, 1.0)
    cfg.episode_length_s = 0.2  # time-outs every 10 steps, so the episode log is written
    env = VelocityEnv(cfg)
    logs = []
    with torch.no_grad():
        for _ in range(12):
            _, _, _, extras = env.step(torch.zeros(4, 12))
            if extras["log"]:
                logs.append(extras["log"])
    assert env.commands.steps == 12
    assert logs and logs[-1]["Curriculum/command_progress"] == pytest.approx(9 / 50)  # logged before its step's update


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

    cfg = task_cfg(4)
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
