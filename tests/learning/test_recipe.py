"""The training recipe is config: ``DiffLoco-Velocity-Flat-AnymalD``'s registered configs are what ``make train``
trains, ``scripts/train.py`` builds the same configs, PPO gets the same env without the gradient adversary, and the
play config is the task as deployed."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from diffloco_ext.learning.cli import add_common_args, load_configs
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.cfg_override import ConfigOverrideError, apply_overrides, parse_overrides
from diffloco_ext.tasks.velocity.env_cfg import (
    AnymalCFlatEnvCfg,
    AnymalDFlatEnvCfg,
    AnymalDFlatEnvCfg_PLAY,
    CommandsCfg,
    VelocityEnvCfg,
)
from diffloco_ext.validation.main_job import MainJobCfg, train_argv

TASK = "DiffLoco-Velocity-Flat-AnymalD"

#: The recipe as overrides of the base task (Isaac Lab's flat ANYmal-D settings) and of the base SHAC settings: a
#: change of the recipe is a change of this list (and of docs/design.md).
RECIPE_ENV = [
    "env.num_envs=128", "env.observation_noise.enable=false", "env.rewards.track_lin_vel_xy=4.0",
    "env.rewards.track_ang_vel_z=2.0", "env.rewards.joint_torques=0.0",
    "env.commands.curriculum_initial_lin_vel_x=[0.5, 1.0]", "env.commands.curriculum_initial_lin_vel_y=[0.0, 0.0]",
    "env.commands.curriculum_initial_ang_vel_z=[0.0, 0.0]", "env.commands.curriculum_steps=9600",
    "env.commands.resampling_time_final=4.0", "env.randomization.friction=[0.7, 1.2]",
    "env.randomization.push_velocity_xy=0.5", "env.randomization.push_interval=[3.0, 6.0]",
    "env.randomization.pushes_after_curriculum=true", "env.randomization.base_mass_scale=[0.9, 1.1]",
    "env.randomization.base_com_xy=0.02", "env.randomization.stiffness_scale=[0.95, 1.05]",
    "env.randomization.damping_scale=[0.95, 1.05]", "env.rewards.foot_slip=-1.0", "env.rewards.excess_joint_vel=-0.1",
    "env.rewards.excess_joint_vel_ratio=0.7",
    "env.rewards.weights_after_curriculum={excess_joint_vel: -3.0, action_rate: -0.1, joint_torques: -2.5e-5}",
    "env.rewards.weights_ramp=[6400, 9600]", "env.rewards.weights_curriculum_end={action_rate: -0.1}",
    "env.rewards.weights_curriculum_ramp=[0.33, 0.67]", "env.rewards.torque_saturation=-5.0",
    "env.rewards.after_curriculum=[foot_slip, excess_joint_vel, torque_saturation]",
    "env.rewards.foot_height_reference=3.0", "env.randomization.after_curriculum.friction=[0.4, 1.2]",
    "env.randomization.after_curriculum.base_mass_scale=[0.8, 1.25]",
    "env.randomization.after_curriculum.stiffness_scale=[0.8, 1.2]",
    "env.randomization.after_curriculum.damping_scale=[0.8, 1.2]",
    "env.randomization.after_curriculum.adversarial_fraction=0.25", "env.randomization.ranges_ramp=[0, 4800]",
    "env.randomization.adversarial_step=0.1", "env.randomization.after_curriculum.soft_ground_fraction=0.25",
    "env.randomization.after_curriculum.soft_ground_stiffness=[3e4, 1.5e5]", "env.sim.contact.smooth_soft_grounds=true",
    "env.commands.boundary_command_fraction=0.25", "env.commands.tracking_reference_accel=[1.0, 1.0]",
]


def _args(algo: str, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_common_args(parser)
    parser.add_argument("--max_iterations", type=int, default=None)
    return parser.parse_args(["--task", TASK, "--algo", algo, *extra])


def test_the_registered_task_is_the_recipe_on_the_base_task():
    base = VelocityEnvCfg()
    apply_overrides(base, parse_overrides(RECIPE_ENV)["env"], "env")
    assert dataclasses.asdict(base) == dataclasses.asdict(AnymalDFlatEnvCfg())
    assert dataclasses.asdict(registry.load_cfg(TASK)) == dataclasses.asdict(AnymalDFlatEnvCfg())
    agent = registry.load_agent_cfg(TASK, "shac")
    assert agent.max_iterations == 1000 and agent.actor.distribution_cfg.action_limit == 1.5
    a = agent.algorithm
    assert (a.value_gradient_scale, a.value_gradient_scale_final, a.value_gradient_ramp_from,
            tuple(a.value_gradient_ramp)) == (0.2, 1.0, "curriculum_end", (0, 20))
    assert (a.lipschitz_penalty, a.lipschitz_after_curriculum, a.action_std_at_curriculum_end) == (1e-3, True, 0.25)


def test_train_builds_exactly_the_configs_the_main_job_trains():
    """The main job passes no setting of its own: its training command's configs are the registered ones (with the
    schedule's length and the seed), so ``scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD`` trains the same."""
    argv = train_argv(MainJobCfg(iterations=1000), seed=42)
    assert not [a for a in argv if a.startswith(("env.", "agent."))]
    parser = argparse.ArgumentParser()
    add_common_args(parser)
    for flag in ("--max_iterations", "--max_minutes"):
        parser.add_argument(flag, type=float)
    env_cfg, agent_cfg = load_configs(parser.parse_args(argv))
    assert dataclasses.asdict(env_cfg) == dataclasses.asdict(AnymalDFlatEnvCfg())
    expected = registry.load_agent_cfg(TASK, "shac")
    expected.run_name = "main_job"
    assert agent_cfg.to_dict() == expected.to_dict()


def test_ppo_trains_the_same_env_without_the_gradient_adversary(capsys):
    shac_env, _ = load_configs(_args("shac"))
    ppo_env, ppo_agent = load_configs(_args("ppo"))
    assert "gradient adversary" in capsys.readouterr().out
    assert shac_env.randomization.after_curriculum.adversarial_fraction == 0.25
    assert ppo_env.randomization.after_curriculum.adversarial_fraction is None
    ppo_env.randomization.after_curriculum.adversarial_fraction = 0.25
    assert dataclasses.asdict(ppo_env) == dataclasses.asdict(shac_env)
    assert ppo_agent.algorithm.class_name == "PPO" and ppo_agent.num_steps_per_env == 24
    with pytest.raises(ConfigOverrideError, match="adversarial_fraction"):
        load_configs(_args("ppo", "env.randomization.after_curriculum.adversarial_fraction=0.25"))


def test_the_play_config_is_the_task_as_deployed():
    play, trained = registry.load_play_cfg(TASK), AnymalDFlatEnvCfg()
    assert isinstance(play, AnymalDFlatEnvCfg_PLAY)
    assert not play.observation_noise.enable and not play.randomization.enable
    assert play.commands == CommandsCfg() and not play.commands.has_curriculum
    for name in ("robot", "episode_length_s", "actions", "sim", "reset", "terminations", "foot_height_reference"):
        assert getattr(play, name) == getattr(trained, name), name
    assert registry.load_play_cfg("DiffLoco-Quadruped-Forward") == registry.load_cfg("DiffLoco-Quadruped-Forward")


def test_anymal_c_is_the_recipe_on_anymal_c():
    c, d = dataclasses.asdict(AnymalCFlatEnvCfg()), dataclasses.asdict(AnymalDFlatEnvCfg())
    assert (c.pop("robot"), c.pop("reset")["height"]) == ("anymal_c", 0.6)
    d.pop("robot"), d.pop("reset")
    assert c == d


def test_a_run_of_an_earlier_version_loads_unless_it_used_a_removed_option():
    from diffloco_ext.learning.config import drop_removed_options

    cfg = registry.load_agent_cfg(TASK, "shac").to_dict()
    old = {**cfg, "chatter_guard": {"max_rise": None, "patience": 30},
           "actor": {**cfg["actor"], "action_smoothing": 0.0, "last_action_indices": [36, 48]},
           "algorithm": {**cfg["algorithm"], "lipschitz_penalty_final": None, "lipschitz_ramp": [0, 0],
                         "action_std_after_curriculum": None, "symmetry_cfg": None}}
    assert drop_removed_options(old) == cfg
    for section, key, value in (("actor", "action_smoothing", 0.5), ("algorithm", "action_std_after_curriculum", 0.1),
                                ("", "chatter_guard", {"max_rise": 1.5})):
        used = {**old, key: value} if not section else {**old, section: {**old[section], key: value}}
        with pytest.raises(ValueError, match=key):
            drop_removed_options(used)
    ppo = registry.load_agent_cfg(TASK, "ppo").to_dict()
    assert drop_removed_options(ppo) == ppo  # rsl_rl's own symmetry_cfg stays
