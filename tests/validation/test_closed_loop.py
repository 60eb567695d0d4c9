"""The closed-loop runner: random commands over the full ranges whatever curriculum the training config carries,
and the gate sums of a standing robot."""

from __future__ import annotations

import dataclasses

import torch

from diffloco_ext.validation.closed_loop import TaskInterface, _Group, batch_groups, pack_batches, plan_episodes

from .scenario_files import make_config


def test_a_training_curriculum_does_not_narrow_the_validation_commands(tmp_path):
    task = TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD")
    task.env_cfg.commands = dataclasses.replace(task.env_cfg.commands, curriculum_initial_scale=0.1,
                                                curriculum_steps=10_000, rel_standing_envs=0.0)
    config = make_config(tmp_path, scenarios=[{"name": "random", "episodes": 16, "seeds": [0]}])
    group = _Group(config.scenario("random"), 0, list(range(16)), task.env_cfg.commands)
    group.command(0.0, torch.zeros(16, dtype=torch.float64), task.policy_dt)
    drawn = group.commands.command.abs()
    assert drawn[:, 0].max() > 0.5 and drawn[:, 1].max() > 0.5  # 16 draws in [-1, 1]: all below 0.1 if narrowed
    assert group.commands.cfg.heading_command  # the task's own generator settings otherwise
    assert task.env_cfg.commands.curriculum_initial_scale == 0.1  # the task's config is left as it was


class _ScriptedBackend:
    """A backend whose robots follow a script, whatever the joint targets: every env stands in the default pose and
    slides along world x at ``speed[e]`` m/s; the envs of ``hops`` are lifted 5 cm at every other policy step (their
    feet pass through the stance band, as landing and lifting feet do, without ever staying in it)."""

    def __init__(self, model, speed, hops, policy_dt):
        self.name, self.num_envs, self.policy_dt = "scripted", len(speed), policy_dt
        self.model, self.speed, self.hops, self.t = model, torch.as_tensor(speed, dtype=torch.float64), hops, 0

    def set_parameters(self, params):
        pass

    def reset(self, q, u, env_mask=None):
        self.t = 0

    def step(self, joint_target):
        self.t += 1

    def state(self):
        q = torch.as_tensor(self.model.default_q(base_height=0.59), dtype=torch.float64).clone()  # feet 1.5 mm up
        q[:, 0] = self.speed * self.t * self.policy_dt
        if self.t % 2 == 1:
            q[self.hops, 2] += 0.05
        u = torch.zeros(self.num_envs, self.model.nv, dtype=torch.float64)
        u[:, 0] = self.speed
        return q, u

    def joint_torque(self):
        return torch.zeros(self.num_envs, self.model.nv - 6, dtype=torch.float64)


def test_foot_slip_counts_feet_on_the_ground_for_the_whole_policy_step(tmp_path):
    """Env 0's feet slide on the ground at 0.3 m/s; env 1's feet move at 2 m/s and touch the stance band at every
    other step only (a foot in swing): the slip gate measures env 0's sliding, not env 1's passing feet."""
    from diffloco_ext.validation.closed_loop import plan_episodes, run_batch
    from diffloco_ext.validation.robot_kinematics import RobotKinematics

    from .policies import ZeroPolicy

    task = TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD")
    config = make_config(tmp_path, scenarios=[{"name": "slide", "episodes": 2, "seeds": [0], "duration_s": 1.0,
                                               "commands": {"schedule": [[1.0, 0.0, 0.0, 0.0]]}}],
                         settings={"warmup_s": 0.1})
    kinematics = RobotKinematics(task.robot, 2)
    backend = _ScriptedBackend(kinematics.model, [0.3, 2.0], [1], task.policy_dt)
    result = run_batch(backend, torch.jit.script(ZeroPolicy()), task, kinematics,
                       plan_episodes(config.scenarios), config.settings)
    (_, sliding), (_, hopping) = result.episodes
    assert sliding["stance"] > 0 and hopping["stance"] == 0
    assert abs(sliding["slip"] / sliding["stance"] - 0.3) < 1e-9


def test_a_scenario_split_over_batches_draws_new_episodes_in_each(tmp_path):
    """More episodes of one (scenario, seed) than a batch holds: the second batch's initial yaws and commands are new
    draws, not the first batch's again (they were, before: 1000 episodes ran 128 distinct ones eight times), while a
    scenario that fits one batch keeps the draws it always had."""
    task = TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD")
    config = make_config(tmp_path, scenarios=[{"name": "random", "episodes": 8, "seeds": [0]}])
    specs = plan_episodes(config.scenarios)
    first, second = pack_batches(specs, 4)
    assert [s.index for s in first] == [0, 1, 2, 3] and [s.index for s in second] == [4, 5, 6, 7]
    heading = torch.zeros(4, dtype=torch.float64)
    drawn = []
    for batch in (first, second):
        (group,) = batch_groups(batch, task.env_cfg.commands).values()
        drawn.append((group.yaw, group.command(0.0, heading, task.policy_dt).clone()))
    assert not torch.allclose(drawn[0][0], drawn[1][0])
    assert not torch.allclose(drawn[0][1], drawn[1][1])
    (whole,) = batch_groups(pack_batches(specs, 8)[0], task.env_cfg.commands).values()
    unsplit = _Group(config.scenario("random"), 0, list(range(8)), task.env_cfg.commands)
    torch.testing.assert_close(whole.yaw, unsplit.yaw)  # one batch: the (scenario, seed)'s own stream, as before
    torch.testing.assert_close(drawn[0][0], _Group(config.scenario("random"), 0, list(range(4)),
                                                   task.env_cfg.commands).yaw)


class _RecordingPolicy(torch.nn.Module):
    """Zero actions; keeps every observation batch it is given."""

    def __init__(self):
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        self.seen.append(obs.clone())
        return torch.zeros(obs.shape[0], 12)


def test_the_gait_clock_runs_on_the_episode_time_and_is_never_delayed(tmp_path):
    """A clock task's policy gets 50 inputs; the last two are the training env's clock at the episode time
    ``t * policy_dt`` of every step, also where the scenario delays the observed state."""
    from diffloco_ext.tasks.velocity.observations import gait_clock_observation
    from diffloco_ext.validation.closed_loop import run_batch
    from diffloco_ext.validation.robot_kinematics import RobotKinematics

    task = TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD-Bound-Clock")
    assert task.num_obs == 50 and task.gait_clock
    assert TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD").num_obs == 48
    config = make_config(tmp_path, scenarios=[{"name": "late", "episodes": 2, "seeds": [0], "duration_s": 0.5,
                                               "observation_delay_steps": 3,
                                               "commands": {"schedule": [[1.0, 0.0, 0.0, 0.0]]}}],
                         settings={"warmup_s": 0.1})
    kinematics = RobotKinematics(task.robot, 2)
    policy = _RecordingPolicy()
    run_batch(_ScriptedBackend(kinematics.model, [0.3, 0.3], [], task.policy_dt), policy, task, kinematics,
              plan_episodes(config.scenarios), config.settings)
    assert len(policy.seen) == 25
    for t, obs in enumerate(policy.seen):
        assert obs.shape == (2, 50)
        expected = gait_clock_observation(torch.full((2,), t * task.policy_dt, dtype=torch.float64), 0.6).float()
        torch.testing.assert_close(obs[:, 48:], expected, rtol=0, atol=1e-6)
