"""scripts/train.py, play.py and list_envs.py: configs with overrides, logs, resume, export, and clear errors."""

from __future__ import annotations

import math
import os

import numpy as np
import onnxruntime
import pytest
import torch
import yaml

from diffloco_ext.learning.runner import make_runner
from diffloco_ext.tasks import TASKS, registry
from diffloco_ext.tasks.cfg_override import ConfigOverrideError, apply_overrides, parse_overrides
from ..script_modules import load_script

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_registration_through_gymnasium_and_the_isaaclab_entry_point():
    import gymnasium as gym
    from importlib.metadata import entry_points

    for task_id in ("DiffLoco-Velocity-Flat-AnymalD", "DiffLoco-Velocity-Flat-AnymalC", "DiffLoco-Quadruped-Forward"):
        kwargs = gym.spec(task_id).kwargs
        assert {"env_cfg_entry_point", "rsl_rl_cfg_entry_point", "shac_cfg_entry_point"} <= set(kwargs)
        for key in ("env_cfg_entry_point", "rsl_rl_cfg_entry_point", "shac_cfg_entry_point"):
            registry.load_cfg(task_id, key)  # every entry point resolves
    values = [e.value for e in entry_points(group="isaaclab.tasks") if e.name == "diffloco"]
    assert values == ["diffloco_ext.tasks"]


def test_the_tasks_module_is_light():
    """Isaac Lab imports it on every command: string entry points only, no Warp or torch import."""
    import subprocess
    import sys

    code = ("import sys, diffloco_ext.tasks; heavy = [m for m in ('warp', 'torch', 'mujoco') if m in sys.modules];"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing diffloco_ext.tasks pulled in {out}"


def test_overrides_are_typed_and_validated():
    cfg = registry.load_cfg(TASK)
    parsed = parse_overrides(["env.sim.contact.kappa=150", "env.num_envs=8", "env.randomization.friction=[0.5, 1.0]",
                              "agent.algorithm.actor_learning_rate=1e-3", "env.sim.contact=hard"])
    apply_overrides(cfg, {k: v for k, v in parsed["env"].items() if k != "sim.contact"})
    assert cfg.sim.contact.kappa == 150.0 and cfg.num_envs == 8 and cfg.randomization.friction == (0.5, 1.0)
    apply_overrides(cfg, {"sim.contact": "hard"})
    assert cfg.sim.contact.mode == "hard"
    agent = registry.load_agent_cfg(TASK, "shac")
    apply_overrides(agent, parsed["agent"])
    assert agent.algorithm.actor_learning_rate == 1e-3
    for bad, match in (({"sim.contact.kapa": "1"}, "unknown config key"), ({"num_envs": "many"}, "expected an integer"),
                       ({"num_envs": "2.5"}, "expected an integer"), ({"sim.dt": "-1"}, "finite number > 0"),
                       ({"sim.contact.kappa": "0"}, "kappa"), ({"randomization.friction": "[1]"}, "list of 2"),
                       ({"sim": "3"}, "fields of SimCfg"), ({"nothing.here": "1"}, "unknown config key")):
        with pytest.raises(ConfigOverrideError, match=match):
            apply_overrides(cfg, bad, "env")
    with pytest.raises(ConfigOverrideError, match="of the form"):
        parse_overrides(["sim.dt=0.01"])


def test_optional_tuple_fields_take_typed_lists():
    """A field annotated ``tuple[float, float] | None`` and None now: a list becomes a tuple of floats; a list of the
    wrong length or with items of the wrong type is an error, null stays None."""
    cfg = registry.load_cfg(TASK)
    assert cfg.commands.curriculum_initial_lin_vel_x is None
    apply_overrides(cfg, {"commands.curriculum_initial_lin_vel_x": "[1, 0.5]"}, "env")
    assert cfg.commands.curriculum_initial_lin_vel_x == (1.0, 0.5)
    assert all(type(v) is float for v in cfg.commands.curriculum_initial_lin_vel_x)
    for bad, match in (("[0.5, 1, 2]", "list of 2"), ("[a, 1]", "expected float"), ("0.5", "expected tuple")):
        with pytest.raises(ConfigOverrideError, match=match):
            apply_overrides(cfg, {"commands.curriculum_initial_lin_vel_y": bad}, "env")
    apply_overrides(cfg, {"commands.curriculum_initial_lin_vel_x": "null"}, "env")
    assert cfg.commands.curriculum_initial_lin_vel_x is None


def test_tuples_of_any_length_take_lists_of_any_length():
    """A field annotated ``tuple[str, ...]`` (``env.rewards.after_curriculum``): a list of any length becomes a tuple,
    items of the wrong type and a non-list are errors."""
    cfg = registry.load_cfg(TASK)
    apply_overrides(cfg, {"rewards.after_curriculum": "[foot_slip, excess_joint_vel]"}, "env")
    assert cfg.rewards.after_curriculum == ("foot_slip", "excess_joint_vel")
    apply_overrides(cfg, {"rewards.after_curriculum": "[]"}, "env")
    assert cfg.rewards.after_curriculum == ()
    for bad, match in (("[1, foot_slip]", "expected str"), ("foot_slip", "a list of str")):
        with pytest.raises(ConfigOverrideError, match=match):
            apply_overrides(cfg, {"rewards.after_curriculum": bad}, "env")


def test_cli_errors_are_clear(capsys, tmp_path):
    train = load_script("train")
    for argv, match in ((["--task", "DiffLoco-Nope"], "unknown task"),
                        (["--task", TASK, "env.sim.contact.kapa=3"], "unknown config key"),
                        (["--task", TASK, "agent.max_iterations=ten"], "expected an integer"),
                        (["--task", TASK, "--algo", "ppo", "env.randomization.after_curriculum.adversarial_fraction=0.3"],
                         "only a learner that backpropagates")):
        with pytest.raises(SystemExit):
            train.main([*argv, "--log_root", str(tmp_path)])
        assert match in capsys.readouterr().err


@pytest.mark.parametrize("algo", ["shac", "ppo"])
def test_train_resume_play_export(tmp_path, algo):
    train, play = load_script("train"), load_script("play")
    common = ["--task", TASK, "--algo", algo, "--num_envs", "8", "--log_root", str(tmp_path), "agent.num_steps_per_env=4",
              "agent.save_interval=1"]
    run = train.main([*common, "--max_iterations", "2", "--run_name", "first"])
    params = yaml.safe_load(open(os.path.join(run, "params", "env.yaml")))
    assert params["num_envs"] == 8 and params["sim"]["substeps"] == 4
    assert yaml.safe_load(open(os.path.join(run, "params", "agent.yaml")))["num_steps_per_env"] == 4
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(run))
    resumed = train.main([*common, "--max_iterations", "1", "--resume", "--load_run", ".*first", "--run_name", "second"])
    checkpoints = sorted(f for f in os.listdir(resumed) if f.startswith("model_"))
    assert checkpoints, "the resumed run saved no checkpoint"
    loaded = torch.load(os.path.join(resumed, checkpoints[-1]), weights_only=False)
    # continued from the first run: SHAC counts completed iterations (2 + 1); rsl_rl's PPO stores the index of the
    # last iteration and re-runs that index on resume (its own convention, as in Isaac Lab)
    assert loaded["iter"] == {"shac": 3, "ppo": 1}[algo]
    result = play.main(["--task", TASK, "--algo", algo, "--num_envs", "4", "--log_root", str(tmp_path), "--load_run",
                        ".*second", "--checkpoint", "latest", "--steps", "5"])
    exported = result["export_dir"]
    jit = torch.jit.load(os.path.join(exported, "policy.pt"))
    obs = torch.randn(3, 48)
    assert jit(obs).shape == (3, 12)
    session = onnxruntime.InferenceSession(os.path.join(exported, "policy.onnx"))
    assert session.get_inputs()[0].shape[1] == 48 and session.run(None, {session.get_inputs()[0].name: obs.numpy()})[0].shape == (3, 12)
    assert result["export_errors"]["jit"] < 1e-5 and result["export_errors"]["onnx"] < 1e-4


def test_a_seed_gives_the_same_run(tmp_path):
    """``--seed`` seeds the network initialisation and the exploration noise (Isaac Lab's train scripts seed torch
    with the agent's seed): two runs of one seed end with the same weights, another seed with others."""
    train = load_script("train")

    def actor(seed, name):
        run = train.main(["--task", TASK, "--algo", "shac", "--num_envs", "4", "--log_root", str(tmp_path),
                          "agent.num_steps_per_env=3", "--max_iterations", "2", "--seed", seed, "--run_name", name])
        return torch.load(os.path.join(run, "model_2.pt"), weights_only=False)["actor_state_dict"]

    torch.manual_seed(123)  # whatever the global generator held before
    a = actor("5", "a")
    torch.manual_seed(456)
    b, c = actor("5", "b"), actor("6", "c")
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    assert any(not torch.equal(a[key], c[key]) for key in a)


def test_play_reports_the_forward_speed_of_a_task_without_commands(tmp_path, capsys):
    """DiffLoco-Quadruped-Forward has no velocity commands: play prints its metrics (forward speed, m/s, the base's
    world-x velocity averaged over every env step) and how the episodes ended."""
    train, play = load_script("train"), load_script("play")
    task = "DiffLoco-Quadruped-Forward"
    train.main(["--task", task, "--algo", "shac", "--num_envs", "4", "--log_root", str(tmp_path),
                "agent.num_steps_per_env=4", "--max_iterations", "1", "--run_name", "q"])
    capsys.readouterr()
    result = play.main(["--task", task, "--algo", "shac", "--num_envs", "3", "--log_root", str(tmp_path),
                        "--load_run", ".*q", "--checkpoint", "latest", "--steps", "6", "--no_export"])
    out = capsys.readouterr().out
    assert "forward_speed" in out and "by termination" in out
    metrics = result["metrics"]
    assert set(metrics) >= {"forward_speed", "speed_error", "terminations", "time_outs"}
    assert math.isfinite(metrics["forward_speed"]) and -5.0 < metrics["forward_speed"] < 5.0
    # speed_error = |v_x - 1 m/s| per step: its mean is at least |mean(v_x) - 1| (Jensen), so the two are consistent
    assert metrics["speed_error"] >= abs(metrics["forward_speed"] - 1.0) - 1e-6  # float32 means
    assert metrics["time_outs"] == 0  # 6 policy steps of 10 s episodes


def test_compare_learners_measures_checkpoints_closed_loop(tmp_path):
    """scripts/compare_learners.py: training curves of two runs, then every checkpoint in hard contact on a small
    random-command scenario, with samples and minutes that grow with the checkpoint's iteration."""
    import json

    train, compare = load_script("train"), load_script("compare_learners")
    common = ["--task", TASK, "--algo", "shac", "--num_envs", "4", "--log_root", str(tmp_path),
              "agent.num_steps_per_env=4", "agent.save_interval=1", "--max_iterations", "2"]
    runs = [train.main([*common, "--run_name", name, "--seed", seed]) for name, seed in (("a", "1"), ("b", "2"))]
    config = tmp_path / "tiny.yaml"
    # no warm-up: an untrained policy may fall within the default 1 s, and every step before a fall is measured
    config.write_text("extends: anymal_d\nsettings: {seeds: [0], warmup_s: 0.0}\nscenarios:\n"
                      "  - name: random_commands\n    episodes: 2\n    duration_s: 1.0\n")
    out = tmp_path / "cmp.png"
    assert compare.main(["--runs", *runs, "--labels", "A", "B", "--out", str(out), "--closed_loop",
                         "--closed_loop_config", str(config), "--jobs", "2"]) == 0
    assert (tmp_path / "cmp_closed_loop.png").is_file()  # (2-iteration runs finish no episode: no training curves)
    summary = json.loads((tmp_path / "cmp_closed_loop.json").read_text())
    assert set(summary) == {"A", "B"}
    for run in summary.values():
        curve = run["curve"]
        assert [r["iteration"] for r in curve] == sorted(r["iteration"] for r in curve) and len(curve) >= 2
        assert all(0.0 <= r["fall_rate"] <= 1.0 and r["lin_vel_error"] >= 0.0 for r in curve)
        assert all(b["samples"] > a["samples"] and b["minutes"] >= a["minutes"] for a, b in zip(curve, curve[1:]))
        assert run["final"] == {k: v for k, v in curve[-1].items() if k not in ("samples", "minutes")}
    # two processes measure each checkpoint as one does (the checkpoints dealt out across the runs)
    assert [r["lin_vel_error"] for r in summary["B"]["curve"]] == [
        r["lin_vel_error"] for r in compare.closed_loop([runs[1]], TASK, str(config), jobs=1)[0]]


def test_compare_learners_joins_a_resumed_run_to_its_origin(tmp_path):
    """A run resumed from another's checkpoint with more envs (``--resume --num_envs``): its params record the
    checkpoint, and compare_learners reads the two as one run: the origin's iterations up to the checkpoint, then
    the resumed run's, samples counting on (4 envs x 3 steps per iteration, then 6 x 3) and the checkpoints of both."""
    train, compare = load_script("train"), load_script("compare_learners")
    common = ["--task", TASK, "--algo", "shac", "--log_root", str(tmp_path), "agent.num_steps_per_env=3",
              "agent.save_interval=1", "--max_iterations", "2"]
    first = train.main([*common, "--num_envs", "4", "--run_name", "first"])
    second = train.main([*common, "--num_envs", "6", "--run_name", "second", "--resume", "--load_run", ".*first",
                         "--checkpoint", "model_1.pt"])
    assert compare.origin(second) == (first, 1) and compare.origin(first) is None
    joined = compare.read_run(second)
    steps, cumulative = joined["samples"][:, 0], joined["samples"][:, 1]
    assert list(steps) == [0, 1, 2]  # the first run's iteration 0 (model_1.pt), then the resumed run's 1 and 2
    # samples = the logged rate x time, the rate truncated to an integer (rsl_rl's logger): an iteration of n samples
    # counts n x floor(r) / r, within n / floor(r) below n
    per_iteration, expected = np.diff(np.concatenate([[0.0], cumulative])), np.array([12.0, 18.0, 18.0])
    rate = joined["Perf/total_fps"][:, 1]
    assert np.all(per_iteration <= expected + 1e-6)
    assert np.all(per_iteration >= expected * (1.0 - 1.0 / np.maximum(rate, 1.0)) - 1e-6)
    assert np.all(np.diff(joined["Perf/total_fps"][:, 2]) >= 0)  # wall-clock counts on
    assert [it for it, _ in compare.chain_checkpoints(second)] == [1, 2, 3]
    assert compare.chain_checkpoints(second)[0][1] == os.path.join(first, "model_1.pt")


def test_compare_learners_counts_a_checkpoint_as_reaching_only_without_more_falls(capsys):
    """A checkpoint whose planar error is below the other run's final one but which falls more often has not reached
    its tracking (the error is measured before the falls); the first one that matches both has."""
    compare = load_script("compare_learners")

    def curve(rows):
        rows = [dict(zip(("iteration", "lin_vel_error", "fall_rate"), r), ang_vel_error=0.1) for r in rows]
        return {"rows": rows, "samples": np.arange(1.0, len(rows) + 1) * 1e6, "minutes": np.arange(1.0, len(rows) + 1)}

    curves = {"A": curve([(50, 0.10, 0.67), (100, 0.12, 0.01), (150, 0.14, 0.0), (200, 0.12, 0.0)]),
              "B": curve([(50, 0.30, 0.0), (100, 0.12, 0.0)])}
    summary = compare.report_closed_loop(curves)
    assert summary["A"]["reaches_B"] == {"iteration": 200, "samples": 4e6, "minutes": 4.0}  # not 50 (falls), not 100
    assert summary["B"]["reaches_A"]["iteration"] == 100
    curves["A"]["rows"][-1]["fall_rate"] = 0.02
    assert "reaches_B" not in compare.report_closed_loop(curves)["A"]
    assert "A does not reach B's final planar error 0.120 m/s with at most its falls (0%)" in capsys.readouterr().out


def test_list_envs_prints_every_task(capsys):
    load_script("list_envs").main()
    out = capsys.readouterr().out
    assert all(task_id in out for task_id in TASKS)


def _flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("obs_groups", "weights_after_curriculum"):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def test_mapping_fields_take_typed_mappings():
    """A field annotated ``dict[str, float]`` (``env.rewards.weights_after_curriculum``): a YAML mapping whose values
    are converted as floats, or one entry by its dotted key; a non-mapping, a key of another type and a value that is
    no number are errors."""
    cfg = registry.load_cfg(TASK)
    apply_overrides(cfg, {"rewards.weights_after_curriculum": "{action_rate: -5e-2, foot_slip: -1}"}, "env")
    assert cfg.rewards.weights_after_curriculum == {"action_rate": -0.05, "foot_slip": -1.0}
    assert all(type(w) is float for w in cfg.rewards.weights_after_curriculum.values())
    for bad, match in (("[action_rate]", "a mapping"), ("{1: 2.0}", "str keys"),
                       ("{action_rate: fast}", "weights_after_curriculum.action_rate': expected float"),
                       ("{action_rate: true}", "expected float")):
        with pytest.raises(ConfigOverrideError, match=match):
            apply_overrides(cfg, {"rewards.weights_after_curriculum": bad}, "env")
    # one entry (Isaac Lab's / Hydra's dotted form): replaced or added, typed as the mapping's values
    apply_overrides(cfg, {"rewards.weights_after_curriculum.action_rate": "-0.1",
                          "rewards.weights_after_curriculum.excess_joint_vel": "-3"}, "env")
    assert cfg.rewards.weights_after_curriculum == {"action_rate": -0.1, "foot_slip": -1.0, "excess_joint_vel": -3.0}
    with pytest.raises(ConfigOverrideError, match="weights_after_curriculum.joint_acc': expected float"):
        apply_overrides(cfg, {"rewards.weights_after_curriculum.joint_acc": "high"}, "env")


def test_config_round_trip_through_yaml(tmp_path):
    """params/env.yaml written from a changed config, read back and applied to a fresh config, gives the same."""
    from diffloco_ext.tasks.cfg_override import dump_yaml, to_dict

    cfg = registry.load_cfg(TASK)
    apply_overrides(cfg, {"sim.contact": "hard", "sim.contact.iterations": "6", "num_envs": "12",
                          "randomization.friction": "[0.3, 0.9]", "commands.heading_command": "false",
                          "rewards.weights_after_curriculum": "{action_rate: -0.05}"})
    dump_yaml(cfg, str(tmp_path / "env.yaml"))
    loaded = yaml.safe_load(open(tmp_path / "env.yaml"))
    fresh = registry.load_cfg(TASK)
    overrides = {k: yaml.safe_dump(v, default_flow_style=True).strip() for k, v in _flatten(loaded)
                 if k != "sim.contact.mode"}
    apply_overrides(fresh, {"sim.contact": loaded["sim"]["contact"]["mode"]})
    apply_overrides(fresh, overrides)
    assert to_dict(fresh) == to_dict(cfg)


def test_learn_within_budget_refits_when_iterations_slow_down():
    """Iterations 3x slower after the probe (a machine that gets loaded): the re-fits keep the run near its
    budget (a single fit from the probe ran about 3x over), and the learning-rate schedule spans what was run."""
    import time
    from types import SimpleNamespace

    from diffloco_ext.learning.cli import learn_within_budget

    class SlowingRunner:
        def __init__(self):
            self.alg = SimpleNamespace(max_iterations=1)
            self.cfg = {}
            self.iterations = 0

        def learn(self, n, init_at_random_ep_len=False):
            for _ in range(n):
                time.sleep(0.01 if self.iterations < 5 else 0.03)
                self.iterations += 1

    runner = SlowingRunner()
    start = time.time()
    total = learn_within_budget(runner, minutes=1.2 / 60.0)
    elapsed = time.time() - start
    assert runner.iterations == total == runner.alg.max_iterations == runner.cfg["max_iterations"]
    assert 0.8 * 1.2 < elapsed < 1.4 * 1.2, elapsed
    # resumed at iteration 30: the fitted iterations come on top, and SHAC's schedule spans the 30 before them too
    resumed = SlowingRunner()
    resumed.current_learning_iteration = 30
    more = learn_within_budget(resumed, minutes=0.3 / 60.0)
    assert resumed.iterations == more == resumed.cfg["max_iterations"]
    assert resumed.alg.max_iterations == resumed.cfg["budget_iterations"] == 30 + more


def test_learn_within_budget_on_a_fixed_schedule_stops_at_a_checkpoint_before_the_budget():
    """``schedule_iterations``: the learning-rate schedule spans them whatever the machine's speed; training runs in
    checkpoint-interval chunks and stops before a chunk that would overrun the budget (a slow machine), or at the
    schedule's end (a fast one)."""
    import time
    from types import SimpleNamespace

    from diffloco_ext.learning.cli import learn_within_budget

    class Runner:
        def __init__(self, seconds):
            self.alg = SimpleNamespace(max_iterations=1)
            self.cfg = {"save_interval": 10}
            self.calls, self.seconds = [], seconds

        def learn(self, n, init_at_random_ep_len=False):
            self.calls.append((n, init_at_random_ep_len))
            time.sleep(self.seconds * n)

    slow = Runner(0.01)  # 0.1 s a chunk, budget 0.35 s: three chunks, the fourth would end at 0.4 s
    start = time.time()
    done = learn_within_budget(slow, minutes=0.35 / 60.0, schedule_iterations=100)
    assert done == 30 and time.time() - start < 0.35
    assert slow.alg.max_iterations == slow.cfg["max_iterations"] == 100  # the schedule is not refitted
    assert slow.calls == [(10, True), (10, False), (10, False)]
    fast = Runner(0.0)
    assert learn_within_budget(fast, minutes=1.0, schedule_iterations=25) == 25
    assert [n for n, _ in fast.calls] == [10, 10, 5] and fast.alg.max_iterations == 25
    # a resumed run trains that many more, and the schedule spans the iterations before the resume too: an
    # interrupted 100-iteration schedule resumed at 40 with the 60 left is the same schedule
    resumed = Runner(0.0)
    resumed.current_learning_iteration = 40
    assert learn_within_budget(resumed, minutes=1.0, schedule_iterations=60) == 60
    assert resumed.alg.max_iterations == resumed.cfg["budget_iterations"] == 100


def test_horizon_gradient_check_agrees_with_differences_over_a_short_horizon(tmp_path):
    """The diagnostic script of docs/tasks.md: over 2 policy steps in float64 without the clip, BPTT's directional
    derivative equals the central difference (a tool that reported agreement it does not measure would fail)."""
    env_cfg = registry.load_cfg(TASK)
    env_cfg.num_envs = 2
    runner = make_runner(registry.make_env(TASK, env_cfg), registry.load_agent_cfg(TASK, "shac"), log_dir=None)
    path = str(tmp_path / "model_0.pt")
    runner.save(path)
    check = load_script("horizon_gradient_check")
    result = check.main(["--checkpoint", path, "--horizon", "2", "--num_envs", "2", "--warmup", "3", "--dtype",
                         "float64", "--no_clip", "--directions", "2", "--eps", "1e-6"])
    for bptt, (fd,) in zip(result["bptt"], result["fd"]):
        assert abs(bptt) > 0 and bptt == pytest.approx(fd, rel=1e-3, abs=1e-9)
