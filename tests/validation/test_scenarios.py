"""Scenario and gate files: the robots' defaults hold the issue's scenarios; malformed files are clear errors."""

from __future__ import annotations

import pytest
import yaml

from diffloco_ext.validation.gates import GATES
from diffloco_ext.validation.scenarios import ScenarioConfigError, default_config_path, load_config

from .scenario_files import make_config, write_config


@pytest.mark.parametrize("robot", ["anymal_d", "anymal_c"])
def test_the_default_files_hold_every_scenario_of_the_issue(robot):
    config = load_config(default_config_path(robot))
    assert config.robot == robot
    by_name = {s.name: s for s in config.scenarios}
    for name, column in (("vx_sweep", 1), ("lateral_sweep", 2), ("yaw_sweep", 3)):
        schedule = by_name[name].schedule
        swept = schedule[:, column]
        assert swept.max() >= 1.0 and swept.min() <= -1.0  # forward and backward (Schwarke et al., Fig. 6)
        assert (schedule[:, [c for c in (1, 2, 3) if c != column]] == 0).all()
    assert by_name["random_commands"].schedule is None
    assert by_name["pushes"].push is not None and by_name["pushes"].push.velocity_xy > 0
    friction = by_name["friction"].parameters["friction"]
    assert min(friction) == 0.4 and max(friction) == 1.2
    assert sorted(set(by_name["payload"].parameters["payload_kg"])) == [-5.0, 5.0]
    gains = by_name["pd_gains"].parameters
    assert set(gains["stiffness_scale"]) == {0.8, 1.2} and set(gains["damping_scale"]) == {0.8, 1.2}
    assert by_name["latency"].observation_delay_steps == 1
    assert len(config.settings.seeds) >= 2
    assert set(config.gates) == set(GATES)
    assert config.figure_scenario.name == "vx_sweep"


def test_extends_inherits_overrides_and_appends(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({
        "robot": "anymal_d", "extends": "anymal_d", "gates": {"foot_slip": 0.05},
        "scenarios": [{"name": "payload", "payload_kg": [-10.0, 10.0]}, {"name": "stairs_free", "duration_s": 3}]}))
    config = load_config(path)
    base = load_config(default_config_path("anymal_d"))
    names = [s.name for s in config.scenarios]
    assert names == [s.name for s in base.scenarios] + ["stairs_free"]
    assert config.scenario("payload").parameters["payload_kg"] == [-10.0, 10.0]
    assert config.gates["foot_slip"] == 0.05 and config.gates["fall_rate"] == base.gates["fall_rate"]
    assert config.scenario("stairs_free").gates["foot_slip"] == 0.05  # file gates reach every scenario
    assert config.scenario("friction").gates["foot_slip"] == base.scenario("friction").gates["foot_slip"]


def test_scenario_gate_overrides_and_null_disable(tmp_path):
    config = make_config(tmp_path, [{"name": "a", "gates": {"base_tilt": None, "foot_slip": 0.3}}])
    gates = config.scenario("a").gates
    assert gates["base_tilt"] is None and gates["foot_slip"] == 0.3


def test_schedule_lookup_and_default_duration(tmp_path):
    config = make_config(tmp_path, [{"name": "s", "commands": {"schedule": [[1.0, 0.5, 0, 0], [2.0, 0, 0, 1.0]]}}])
    s = config.scenario("s")
    assert s.duration_s == 3.0
    assert list(s.command_at(0.5)) == [0.5, 0, 0] and list(s.command_at(1.5)) == [0, 0, 1.0]
    assert list(s.command_at(10.0)) == [0, 0, 1.0]  # the last command holds


BAD = [
    ({"scenarios": [{"name": "a", "episods": 2}]}, "unknown key(s) ['episods']"),
    ({"scenarios": [{"name": "a", "episodes": "two"}]}, "episodes: must be an integer"),
    ({"scenarios": [{"name": "a", "episodes": 0}]}, "episodes: must be > 0"),
    ({"scenarios": [{"name": "a", "friction": [0.4, "high"]}]}, "friction: must be a number"),
    ({"scenarios": [{"name": "a", "friction": -0.1}]}, "friction: must be >= 0"),
    ({"scenarios": [{"name": "a", "commands": {"schedule": [[1.0, 0.5, 0.0]]}}]}, "must be [hold_s, vx, vy, wz]"),
    ({"scenarios": [{"name": "a", "commands": {"shedule": []}}]}, "must be {schedule:"),
    ({"scenarios": [{"name": "a", "commands": {"random": {"lin_vel_x": 1.0}}}]}, "must be a list [low, high]"),
    ({"scenarios": [{"name": "a", "commands": {"random": {"speed": 1.0}}}]}, "unknown key(s) ['speed']"),
    ({"scenarios": [{"name": "a", "push": {"interval": [1, 2], "velocity_xy": 0.5}}]}, "unknown key(s) ['interval']"),
    ({"scenarios": [{"name": "a", "push": {"interval_s": [3, 1], "velocity_xy": 0.5}}]}, "low 3.0 > high 1.0"),
    ({"scenarios": [{"name": "a", "gates": {"tilt": 0.3}}]}, "unknown gate 'tilt'"),
    ({"scenarios": [{"name": "a", "gates": {"export_mismatch": 0.3}}]}, "export_mismatch is checked once per run"),
    ({"scenarios": [{"name": "a", "plot": "yes"}]}, "plot must be true or false"),
    ({"scenarios": [{"name": "a"}, {"name": "a"}]}, "scenario names must be unique: ['a']"),
    ({"scenarios": [{"episodes": 1}]}, "needs a 'name'"),
    ({"scenarios": []}, "'scenarios' must be a non-empty list"),
    ({"scenarios": [{"name": "a"}], "settings": {"seeds": 3}}, "settings.seeds: must be a non-empty list"),
    ({"scenarios": [{"name": "a"}], "settings": {"warmup": 1}}, "unknown key(s) ['warmup']"),
    ({"scenarios": [{"name": "a"}], "settings": {"figure_scenario": "b"}}, "figure_scenario 'b' is not a scenario"),
    ({"scenarios": [{"name": "a"}], "gates": {"lin_vel_error": "low"}}, "gates.lin_vel_error: must be a number"),
    ({"scenarios": [{"name": "a"}], "robots": "anymal_d"}, "unknown key(s) ['robots']"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_malformed_files_name_the_key(tmp_path, change, message):
    data = {"robot": "anymal_d", "extends": "anymal_d", "inherit_scenarios": False, **change}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioConfigError) as err:
        load_config(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_missing_threshold_missing_file_bad_yaml_and_loops(tmp_path):
    path = tmp_path / "nogates.yaml"
    path.write_text(yaml.safe_dump({"robot": "anymal_d", "gates": {"fall_rate": 0.0}, "scenarios": [{"name": "a"}]}))
    with pytest.raises(ScenarioConfigError, match="have no threshold"):
        load_config(path)
    with pytest.raises(ScenarioConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")
    with pytest.raises(ScenarioConfigError, match="not found"):
        write_config(tmp_path, [{"name": "a"}], robot="anymal_x")  # its extends: no file for that robot
        load_config(tmp_path / "scenarios.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: anymal_d\nscenarios: [ {name: a\n")
    with pytest.raises(ScenarioConfigError, match="not valid YAML"):
        load_config(bad)
    loop = tmp_path / "loop.yaml"
    loop.write_text(yaml.safe_dump({"robot": "anymal_d", "extends": str(loop), "scenarios": [{"name": "a"}]}))
    with pytest.raises(ScenarioConfigError, match="loops back"):
        load_config(loop)
    listed = tmp_path / "list.yaml"
    listed.write_text("- robot: anymal_d\n")
    with pytest.raises(ScenarioConfigError, match="must be a mapping"):
        load_config(listed)


def test_the_fast_commands_file_puts_every_planar_command_at_the_edge():
    """``anymal_d_fast_commands.yaml`` (the main job's checkpoint selection): one scenario, 100 episodes, whose
    random commands all lie 0.85-1 of the way to the edge of the [-1, 1]^2 square (0.85-1.41 m/s)."""
    import math

    import torch

    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    config = load_config(default_config_path("anymal_d").parent / "anymal_d_fast_commands.yaml")
    assert [s.name for s in config.scenarios] == ["fast_commands"]
    scenario = config.scenarios[0]
    assert scenario.episodes == 100 and scenario.seeds == [0] and scenario.schedule is None
    cfg = scenario.commands_cfg(CommandsCfg(rel_standing_envs=0.0))
    commands = VelocityCommand(cfg, 2000, "cpu", torch.Generator().manual_seed(0))
    commands.resample(torch.ones(2000, dtype=torch.bool))
    vxy = commands.command[:, :2].double()
    edge = vxy.abs().max(dim=1).values  # the fraction of the way to the square's edge along the command's direction
    assert float(edge.min()) >= 0.85 - 1e-6 and float(edge.max()) <= 1.0 + 1e-6
    speed = vxy.norm(dim=1)
    assert float(speed.min()) >= 0.85 - 1e-6 and float(speed.max()) <= math.sqrt(2) + 1e-6
    assert float((speed > 1.1).double().mean()) > 0.3  # 0.35, against ~0.1 for uniform commands


def test_the_hard_cases_file_runs_friction_04_and_each_pd_gain_corner_apart():
    """``anymal_d_hard_cases.yaml``: 60 episodes at friction 0.4 and 30 at each corner of the +-20 % PD-gain square,
    the default set's hardest cases (3 episodes each there), with the default set's gates."""
    config = load_config(default_config_path("anymal_d").parent / "anymal_d_hard_cases.yaml")
    default = load_config(default_config_path("anymal_d"))
    by_name = {s.name: s for s in config.scenarios}
    assert sorted(by_name) == ["friction_04", "kp08_kd08", "kp08_kd12", "kp12_kd08", "kp12_kd12"]
    friction = by_name["friction_04"]
    assert friction.episodes * len(friction.seeds) == 60 and friction.parameter("friction", 0) == 0.4
    corners = {(by_name[n].parameter("stiffness_scale", 0), by_name[n].parameter("damping_scale", 0))
               for n in by_name if n.startswith("kp")}
    assert corners == {(0.8, 0.8), (1.2, 1.2), (0.8, 1.2), (1.2, 0.8)}
    assert all(by_name[n].episodes * len(by_name[n].seeds) == 30 for n in by_name if n.startswith("kp"))
    assert config.gates == default.gates
    assert by_name["kp08_kd12"].gates == {s.name: s for s in default.scenarios}["pd_gains"].gates


def test_the_thousand_episode_file_is_the_issues_measurement_ten_times_over():
    """``anymal_d_random1000.yaml``: the issue's random commands (``anymal_d_random100.yaml``) with 1000 episodes, for
    a fall rate to a few tenths of a percent; more episodes than a batch holds, so it relies on each batch drawing
    new episodes (``tests/validation/test_closed_loop.py``)."""
    folder = default_config_path("anymal_d").parent
    hundred = load_config(folder / "anymal_d_random100.yaml").scenario("random_commands")
    config = load_config(folder / "anymal_d_random1000.yaml")
    assert [s.name for s in config.scenarios] == ["random_commands"]
    thousand = config.scenarios[0]
    assert thousand.episodes == 1000 and thousand.seeds == hundred.seeds == [0]
    assert thousand.episodes > config.settings.max_envs
    assert thousand.schedule is None and thousand.duration_s == hundred.duration_s == 20.0
    assert config.gates == load_config(folder / "anymal_d_random100.yaml").gates


def test_the_fixed_command_file_holds_one_command_per_scenario():
    """``anymal_d_fixed_commands.yaml``: eight constant commands (standing, forward, sideways, diagonal, turning) for
    8 s each, 4 episodes, the default set's gates: a policy's action rate command by command."""
    folder = default_config_path("anymal_d").parent
    config = load_config(folder / "anymal_d_fixed_commands.yaml")
    commands = {s.name: tuple(float(c) for c in s.command_at(3.0)) for s in config.scenarios}
    assert commands == {"stand": (0.0, 0.0, 0.0), "vx05": (0.5, 0.0, 0.0), "vx10": (1.0, 0.0, 0.0),
                        "vy10": (0.0, 1.0, 0.0), "diag07": (0.7, 0.7, 0.0), "diag10": (1.0, 1.0, 0.0),
                        "yaw10": (0.0, 0.0, 1.0), "vx05yaw": (0.5, 0.0, 1.0)}
    for s in config.scenarios:
        assert s.schedule.shape == (1, 4) and s.duration_s == 8.0 and s.episodes * len(s.seeds) == 4
        assert s.initial_yaw == 0.0
    assert config.gates == load_config(default_config_path("anymal_d")).gates


def test_the_command_changes_file_changes_fast_commands_every_two_and_a_half_seconds():
    """``anymal_d_command_changes.yaml``: 1000 episodes of 20 s whose random commands all lie at the edge of the
    command square (as ``anymal_d_fast_commands.yaml``) and are redrawn every 2.5 s (the task: 10 s), heading
    control as the task's."""
    import torch

    from diffloco_ext.tasks.velocity.commands import VelocityCommand
    from diffloco_ext.tasks.velocity.env_cfg import CommandsCfg

    folder = default_config_path("anymal_d").parent
    config = load_config(folder / "anymal_d_command_changes.yaml")
    assert [s.name for s in config.scenarios] == ["command_changes"]
    scenario = config.scenarios[0]
    assert scenario.episodes == 1000 and scenario.seeds == [0] and scenario.duration_s == 20.0
    cfg = scenario.commands_cfg(CommandsCfg(rel_standing_envs=0.0))
    assert cfg.resampling_time == 2.5 and cfg.heading_command and cfg.resampling_time_final is None
    commands = VelocityCommand(cfg, 500, "cpu", torch.Generator().manual_seed(0))
    commands.resample(torch.ones(500, dtype=torch.bool))
    first = commands.command[:, :2].clone()
    for _ in range(130):  # 2.6 s of policy steps: every command redrawn once, again at the edge
        commands.update(0.02, torch.zeros(500))
    assert not bool((commands.command[:, :2] == first).all(dim=1).any())
    assert float(commands.command[:, :2].abs().max(dim=1).values.min()) >= 0.85 - 1e-6
    assert config.gates == load_config(default_config_path("anymal_d")).gates
