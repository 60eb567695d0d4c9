"""Validation on generated terrain: the run's terrain and where episodes start on it, the stuck measure, the config's
terrain keys, and a rough-interface policy validated in hard contact and MuJoCo on the same height field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.tasks import registry
from diffloco_ext.validation.scenarios import ScenarioConfigError, load_config
from diffloco_ext.validation.terrain_scenarios import episode_origins, stuck, validation_terrain

TASK = "DiffLoco-Velocity-Rough-AnymalD"
ROUGH = "config/validation/anymal_d_rough.yaml"


def test_stuck_is_a_commanded_window_without_progress():
    T, dt = 600, 0.02  # 12 s
    t = np.arange(T) * dt
    commands = np.zeros((T, 4, 2))
    commands[:, :3, 0] = 0.5
    positions = np.zeros((T, 4, 2))
    positions[:, 0, 0] = 0.5 * t  # walks: 5 m in 10 s
    positions[:, 1, 0] = 0.05 * t  # 0.5 m in 10 s: stuck
    positions[:, 2, 0] = 0.05 * t  # as slow, but fallen at 5 s: no 10-s window standing
    standing = np.ones((T, 4), dtype=bool)
    standing[250:, 2] = False
    # env 3 is commanded nothing and does not move: not stuck
    assert stuck(positions, commands, standing, dt).tolist() == [False, True, False, False]
    assert not stuck(positions[:400], commands[:400], standing[:400], dt).any()  # shorter than a window


def test_the_runs_terrain_has_a_row_per_difficulty_and_every_type():
    config = load_config(ROUGH)
    terrain = validation_terrain(config.scenarios, registry.load_play_cfg(TASK))
    assert terrain.cfg.row_difficulties == (0.2778, 0.5, 0.91)
    assert set(terrain.tile_types) == {"pyramid_stairs", "pyramid_stairs_inv", "boxes", "random_rough",
                                       "hf_pyramid_slope", "hf_pyramid_slope_inv"}
    by_name = {s.name: s for s in config.scenarios}
    origins = episode_origins(terrain, [(by_name["stairs_up"], k) for k in range(3)])
    columns = [c for c, t in enumerate(terrain.tile_types) if t == "pyramid_stairs_inv"]
    expected = [terrain.tile_origins[0, columns[k % len(columns)]] for k in range(3)]
    np.testing.assert_allclose(origins, expected)
    assert origins[0, 2] < 0  # the bottom of the pit: the steps go up from it
    assert validation_terrain(load_config("config/validation/anymal_d.yaml").scenarios, None) is None
    bad = load_config(ROUGH).scenarios[:1]
    bad[0].terrain = type(bad[0].terrain)("lava", 0.5)
    with pytest.raises(ValueError, match="lava"):
        validation_terrain(bad, registry.load_play_cfg(TASK))


def test_terrain_keys_of_the_config(tmp_path):
    def write(body):
        path = tmp_path / "c.yaml"
        path.write_text("extends: anymal_d\ninherit_scenarios: false\nscenarios:\n" + body)
        return path

    both = "  - {name: a, terrain: {type: boxes, difficulty: 0.5}}\n  - {name: b}\n"
    with pytest.raises(ScenarioConfigError, match="either every"):
        load_config(write(both))
    for body, match in (("  - {name: a, terrain: {type: boxes, difficulty: 1.5}}\n", "difficulty"),
                        ("  - {name: a, terrain: {type: boxes, height: 1}}\n", "unknown key"),
                        ("  - {name: a, terrain: boxes}\n", "mapping")):
        with pytest.raises(ScenarioConfigError, match=match):
            load_config(write(body))


@pytest.fixture(scope="module")
def rough_policy(tmp_path_factory):
    from ..script_modules import load_script

    root = tmp_path_factory.mktemp("rough")
    run = load_script("train").main(["--task", TASK, "--num_envs", "2", "--max_iterations", "1", "--log_root",
                                     str(root), "agent.num_steps_per_env=2"])
    return f"{run}/model_1.pt"


def test_a_rough_policy_on_the_same_terrain_in_hard_contact_and_mujoco(rough_policy, tmp_path):
    """Two short scenarios (stairs up, slopes down) in both backends: the episodes start on their tiles, the policy
    reads a 235-input observation whose scan is the terrain's, and the new measures are reported."""
    from diffloco_ext.validation.closed_loop import TaskInterface
    from diffloco_ext.validation.policy_io import load_checkpoint
    from diffloco_ext.validation.validation_run import run_validation

    config = tmp_path / "tiny.yaml"
    config.write_text(
        "extends: anymal_d_rough\ninherit_scenarios: false\nsettings: {seeds: [0], warmup_s: 0.0, "
        "figure_scenario: up}\nscenarios:\n"
        "  - {name: up, episodes: 2, duration_s: 0.4, commands: {schedule: [[0.4, 0.5, 0.0, 0.0]]}, "
        "terrain: {type: pyramid_stairs_inv, difficulty: 0.2778}}\n"
        "  - {name: down, episodes: 1, duration_s: 0.4, terrain: {type: hf_pyramid_slope, difficulty: 0.91}}\n")
    task = TaskInterface.from_task(TASK)
    assert task.height_scan and task.num_obs == 235
    policy = load_checkpoint(rough_policy, TASK, str(tmp_path / "export"), task.num_obs, task.num_actions)
    result = run_validation(task, policy, ["hard", "mujoco"], load_config(config), reference=False,
                            export_observations=64)
    terrain = validation_terrain(load_config(config).scenarios, task.env_cfg)
    for name, run in result.runs.items():
        assert run.episodes == 3
        for scenario in ("up", "down"):
            m = run.metrics[scenario]
            assert 0.0 <= m["stuck_rate"] <= 1.0 and 0.0 <= m["body_contact"] <= 1.0
        start = run.traces["up"]["base_pos"][0]  # the first episode of 'up': on the pit's bottom
        origin = terrain.tile_origins[0, terrain.tile_types.index("pyramid_stairs_inv")]
        assert np.linalg.norm(start[:2] - origin[:2]) < 0.1 and abs(start[2] - origin[2] - 0.65) < 0.1
    assert result.export is not None  # the 235-input observations the policy saw ran through the exported files


def test_the_scan_the_policy_reads_is_the_terrains(rough_policy):
    from diffloco_ext.tasks.velocity.height_scan import scan_points, yaw_of
    from diffloco_ext.validation.closed_loop import TaskInterface, plan_episodes, run_batch
    from diffloco_ext.validation.robot_kinematics import RobotKinematics
    from diffloco_ext.validation.sim_backend import make_backend

    task = TaskInterface.from_task(TASK)
    config = load_config(ROUGH)
    scenario = next(s for s in config.scenarios if s.name == "mixed_random")
    scenario.episodes, scenario.duration_s = 1, 0.04
    scenario.terrain = type(scenario.terrain)("random_rough", 0.5)  # bumps under every scan point
    terrain = validation_terrain([scenario], task.env_cfg)
    seen = []

    class Recorder(torch.nn.Module):
        def forward(self, obs):
            seen.append(obs.clone())
            return torch.zeros(obs.shape[0], 12)

    kin = RobotKinematics(task.robot, 1, terrain)
    backend = make_backend(task.robot, 1, policy_dt=task.policy_dt, sim_dt=0.005, terrain=terrain)
    q0 = None

    class Watch:  # the backend's state when the policy is first asked
        def __getattr__(self, name):
            return getattr(backend, name)

        def state(self):
            nonlocal q0
            q, u = backend.state()
            q0 = q if q0 is None else q0
            return q, u

    run_batch(Watch(), Recorder(), task, kin, plan_episodes([scenario]), config.settings)
    obs, q = seen[0][0].double(), q0[0]
    points = scan_points(dtype=torch.float64).numpy()
    yaw = float(yaw_of(q[None, 3:7])[0])
    x = q[0].item() + np.cos(yaw) * points[:, 0] - np.sin(yaw) * points[:, 1]
    y = q[1].item() + np.sin(yaw) * points[:, 0] + np.cos(yaw) * points[:, 1]
    expected = np.clip(q[2].item() - terrain.height_at(x, y) - 0.5, -1, 1)
    np.testing.assert_allclose(obs[48:].numpy(), expected, atol=1e-6)
    assert np.ptp(expected) > 0.02  # the bumps are in the scan


def test_rough_targets_of_the_main_job(rough_policy, tmp_path, monkeypatch):
    """The rough-terrain measurement's shape on a tiny copy of its scenario file (one short episode each)."""
    from diffloco_ext.validation import tracking_targets
    from diffloco_ext.validation.closed_loop import TaskInterface
    from diffloco_ext.validation.policy_io import load_checkpoint

    lines = ["extends: anymal_d_rough", "settings: {warmup_s: 0.0}", "scenarios:"]
    for s in load_config(ROUGH).scenarios:
        lines.append(f"  - {{name: {s.name}, episodes: 1, duration_s: 0.2, terrain: {{type: {s.terrain.type}, "
                     f"difficulty: {s.terrain.difficulty}}}}}")
    tiny = tmp_path / "rough_tiny.yaml"
    tiny.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(tracking_targets, "ROUGH_TARGET_CONFIG", str(tiny))
    task = TaskInterface.from_task(TASK)
    policy = load_checkpoint(rough_policy, TASK, str(tmp_path / "export"), task.num_obs, task.num_actions)
    out = tracking_targets.measure_rough_targets(task, policy, str(tmp_path / "out"))
    assert set(out) == {"diffloco hard contact", "MuJoCo"}
    for per in out.values():
        assert set(per) == set(tracking_targets.ROUGH_TARGETS)
        for scenario, r in per.items():
            assert set(r["measured"]) == set(tracking_targets.ROUGH_TARGETS[scenario])
            assert r["met"] == all(r["measured"][g] <= t for g, t in r["targets"].items())
