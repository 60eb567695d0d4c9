"""Task discovery: ``isaaclab list_envs`` lists the differentiable and the Isaac Lab ids from this checkout's
entry points; the registration module is light (no Isaac Lab import); the registered configs resolve."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

from .conftest import ROOT, run_isaaclab

DIFFERENTIABLE = ["DiffLoco-Velocity-Flat-AnymalD", "DiffLoco-Velocity-Flat-AnymalC", "DiffLoco-Quadruped-Forward"]
ISAAC = ["DiffLoco-Velocity-Flat-AnymalD-Isaac", "DiffLoco-Velocity-Flat-AnymalC-Isaac"]


def test_list_envs_lists_our_ids(user_env, tmp_path):
    proc = run_isaaclab(["list_envs", "--keyword", "DiffLoco"], user_env, tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for task_id in DIFFERENTIABLE + ISAAC:
        assert f" {task_id} " in proc.stdout, (task_id, proc.stdout[-3000:])
    isaac_rows = [line for line in proc.stdout.splitlines() if "-Isaac " in line]
    assert all("isaaclab.envs:ManagerBasedRLEnv" in row and "rsl_rl" in row for row in isaac_rows)


def test_registration_module_is_light():
    """Importing the entry-point modules imports no Isaac Lab, torch or Warp (every `isaaclab` command imports
    them: they must be cheap and cannot fail on a heavy import)."""
    code = ("import sys; import diffloco_ext.tasks, diffloco_ext.isaaclab.tasks; "
            "heavy = [m for m in ('isaaclab', 'isaaclab_tasks', 'torch', 'warp', 'pxr') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_isaac_ids_point_at_isaac_lab_and_resolve(tmp_path, monkeypatch):
    from diffloco_ext.isaaclab import tasks
    from diffloco_ext.tasks.registry import resolve_entry_point

    for task_id in ISAAC:
        spec = gym.spec(task_id)
        assert spec.entry_point == "isaaclab.envs:ManagerBasedRLEnv"
        assert tasks.PROJECT_TASK[task_id] in DIFFERENTIABLE
        for key in ("env_cfg_entry_point", "rsl_rl_cfg_entry_point", "rsl_rl_shac_cfg_entry_point"):
            assert isinstance(spec.kwargs[key], str) and ":" in spec.kwargs[key]
    # the configs themselves (USD files written into a temporary folder)
    monkeypatch.setenv("DIFFLOCO_USD_DIR", str(tmp_path))
    env_cfg = resolve_entry_point(gym.spec(ISAAC[0]).kwargs["env_cfg_entry_point"])()
    agent_cfg = resolve_entry_point(gym.spec(ISAAC[0]).kwargs["rsl_rl_cfg_entry_point"])()
    assert env_cfg.decimation == 4 and env_cfg.sim.dt == pytest.approx(0.005)
    assert env_cfg.actions.joint_pos.scale == 0.5 and env_cfg.actions.joint_pos.use_default_offset
    assert env_cfg.scene.robot.spawn.usd_path.startswith(str(tmp_path))
    assert agent_cfg.num_steps_per_env == 24 and agent_cfg.actor.hidden_dims == [128, 128, 128]


def test_env_cfg_values_come_from_the_project_task(tmp_path, monkeypatch):
    """The Isaac Lab config carries the project's values: changing the project's config changes it."""
    monkeypatch.setenv("DIFFLOCO_USD_DIR", str(tmp_path))
    from diffloco_ext.isaaclab.env_cfg import AnymalDFlatIsaacEnvCfg, mirrorable
    from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatEnvCfg
    from diffloco_ext.tasks.velocity.gaits import GAITS

    class Custom(AnymalDFlatIsaacEnvCfg):
        def project_task(self):
            t = mirrorable(AnymalDFlatEnvCfg())
            t.rewards.alive = 2.5
            t.observation_noise.joint_vel = 0.7
            t.commands.lin_vel_x = (-0.3, 0.4)
            t.reset.height = 0.7
            t.gait = "pace"
            return t

    cfg, ref = Custom(), AnymalDFlatEnvCfg()
    assert cfg.rewards.alive.weight == 2.5 and cfg.observations.policy.joint_vel.noise.n_max == 0.7
    assert cfg.commands.base_velocity.ranges.lin_vel_x == (-0.3, 0.4)
    assert cfg.scene.robot.init_state.pos[2] == 0.7
    pace = cfg.rewards.foot_height_reference.params
    assert pace["phase_offsets"] == GAITS["pace"] and (pace["duty"], pace["period"]) == (0.5, 0.6)
    base = AnymalDFlatIsaacEnvCfg()
    assert base.rewards.termination.weight == ref.rewards.termination
    assert base.rewards.foot_height_reference.params["std"] == ref.foot_height_reference.std
    assert base.events.physics_material.params["static_friction_range"] == ref.randomization.friction

    class Widened(AnymalDFlatIsaacEnvCfg):  # the ground carries the lowest friction the robot draws (contacts: max)
        def project_task(self):
            t = mirrorable(AnymalDFlatEnvCfg())
            t.randomization.friction = (0.7, 1.2)
            t.randomization.after_curriculum.friction = (0.5, 1.2)
            return t

    widened = Widened()
    assert widened.sim.physics_material.static_friction == 0.5
    assert widened.curriculum.commands.params["friction_after_curriculum"] == (0.5, 1.2)
    assert widened.events.physics_material.params["static_friction_range"] == (0.7, 1.2)


def test_a_gait_clock_task_gives_the_twin_the_same_clock(tmp_path, monkeypatch):
    """A project task with the gait clock gives its twin the clock term (the project's function, the gait's period)
    after the 48 and the swing-force penalty; without them the twin's policy group is Isaac Lab's 48 terms."""
    monkeypatch.setenv("DIFFLOCO_USD_DIR", str(tmp_path))
    from types import SimpleNamespace

    import torch

    from diffloco_ext.isaaclab.env_cfg import AnymalDFlatIsaacEnvCfg, mirrorable
    from diffloco_ext.isaaclab.mdp import gait_clock, paired_contact_force, swing_contact_force
    from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatBoundClockEnvCfg
    from diffloco_ext.tasks.velocity.gaits import GAITS

    class Clocked(AnymalDFlatIsaacEnvCfg):
        def project_task(self):
            return mirrorable(AnymalDFlatBoundClockEnvCfg())

    clocked = Clocked()
    term = clocked.observations.policy.gait_clock
    assert term.func is gait_clock and term.params == {"period": 0.6}
    swing = clocked.rewards.swing_contact_force  # the clock task's swing-force penalty, with the bound's phases
    assert swing.func is swing_contact_force and swing.weight == -4.0
    assert swing.params["phase_offsets"] == GAITS["bound"] and swing.params["period"] == 0.6
    paired = clocked.rewards.paired_contact_force  # the bound's pairs held together
    assert paired.func is paired_contact_force and paired.weight == -4.0
    assert paired.params["phase_offsets"] == GAITS["bound"]
    plain = AnymalDFlatIsaacEnvCfg()
    assert plain.observations.policy.gait_clock is None and plain.rewards.swing_contact_force is None
    assert plain.rewards.paired_contact_force is None
    env = SimpleNamespace(episode_length_buf=torch.tensor([0, 15, 30]), step_dt=0.02)
    torch.testing.assert_close(gait_clock(env, 0.6), torch.tensor([[0.0, 1.0], [0.0, -1.0], [0.0, 1.0]]),
                               rtol=0, atol=1e-6)


def test_the_twin_carries_the_training_recipe_but_what_isaac_lab_has_no_counterpart_for(tmp_path, monkeypatch):
    """One source: the Isaac Lab twin is built from the registered task's recipe (weights, curriculum, randomisation
    after it); only :data:`NOT_MIRRORED`'s settings are switched off, and nothing else differs."""
    import dataclasses

    monkeypatch.setenv("DIFFLOCO_USD_DIR", str(tmp_path))
    from diffloco_ext.isaaclab.env_cfg import NOT_MIRRORED, AnymalDFlatIsaacEnvCfg, mirrorable
    from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatEnvCfg

    recipe = AnymalDFlatEnvCfg()
    twin = AnymalDFlatIsaacEnvCfg()
    assert twin.rewards.track_lin_vel_xy.weight == recipe.rewards.track_lin_vel_xy == 4.0
    assert twin.rewards.foot_height_reference.weight == recipe.rewards.foot_height_reference == 3.0
    params = twin.curriculum.commands.params
    assert params["initial_lin_vel_x"] == recipe.commands.curriculum_initial_lin_vel_x == (0.5, 1.0)
    assert params["num_steps"] == recipe.commands.curriculum_steps
    assert params["friction_after_curriculum"] == recipe.randomization.after_curriculum.friction
    assert twin.observations.policy.enable_corruption is recipe.observation_noise.enable is False

    def flat(d, prefix=""):
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    a, b = flat(dataclasses.asdict(recipe)), flat(dataclasses.asdict(mirrorable(AnymalDFlatEnvCfg())))
    assert {k for k in a if a[k] != b[k]} == {k for k in NOT_MIRRORED if a[k] != NOT_MIRRORED[k]}


def test_project_command_options_without_an_isaaclab_counterpart_are_clear_errors():
    """The project's boundary commands and tracking reference have no counterpart in Isaac Lab's
    ``UniformVelocityCommand`` and tracking terms, nor the adversary's gradient steps (``adversarial_fraction``) and
    the soft grounds in Isaac Lab's uniform events: mapping a task that uses them is an error, not a silently
    different task. The curriculum itself maps (``curriculum_cfg``)."""
    from diffloco_ext.isaaclab.env_cfg import commands_cfg, curriculum_cfg
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg, RandomizationCfg, RewardsCfg

    with pytest.raises(ValueError, match="boundary_command_fraction"):
        commands_cfg(CommandsCfg(boundary_command_fraction=0.5))
    with pytest.raises(ValueError, match="tracking_reference_accel"):
        commands_cfg(CommandsCfg(tracking_reference_accel=(2.0, 2.0)))
    from diffloco_ext.isaaclab.env_cfg import events_cfg
    from diffloco_ext.tasks.velocity.env_cfg import RandomizationRangesCfg, ResetCfg
    with pytest.raises(ValueError, match="adversarial_fraction"):
        events_cfg(RandomizationCfg(after_curriculum=RandomizationRangesCfg(adversarial_fraction=0.3)), ResetCfg())
    with pytest.raises(ValueError, match="soft_ground_fraction"):
        events_cfg(RandomizationCfg(after_curriculum=RandomizationRangesCfg(soft_ground_fraction=0.25)), ResetCfg())
    assert events_cfg(RandomizationCfg(), ResetCfg()).actuator_gains is not None
    assert commands_cfg(CommandsCfg()).base_velocity.resampling_time_range == (10.0, 10.0)
    # without a curriculum the final period holds from the start; with one, the initial period (the term switches)
    assert commands_cfg(CommandsCfg(resampling_time_final=4.0)).base_velocity.resampling_time_range == (4.0, 4.0)
    c = CommandsCfg(curriculum_steps=10, curriculum_initial_lin_vel_x=(0.5, 1.0), resampling_time_final=4.0)
    assert commands_cfg(c).base_velocity.resampling_time_range == (10.0, 10.0)
    r = RewardsCfg(after_curriculum=("foot_slip",), weights_after_curriculum={"action_rate": -0.05},
                   weights_curriculum_end={"joint_acc": -1e-6}, weights_curriculum_ramp=(0.25, 0.75))
    rand = RandomizationCfg(pushes_after_curriculum=True)
    params = curriculum_cfg(c, r, rand).commands.params
    assert params["num_steps"] == 10 and params["initial_lin_vel_x"] == (0.5, 1.0)
    assert params["resampling_time_final"] == 4.0 and params["after_curriculum"] == ["foot_slip"]
    assert params["weights_after_curriculum"] == {"action_rate": -0.05}
    assert params["weights_curriculum_end"] == {"joint_acc": -1e-6}
    assert params["weights_curriculum_ramp"] == [0.25, 0.75]
    assert params["push_term"] == "push_robot"
    off = curriculum_cfg(CommandsCfg(curriculum_steps=10), RewardsCfg(), RandomizationCfg()).commands.params
    assert off["num_steps"] == 0 and off["push_term"] is None  # no initial range differs: no curriculum
