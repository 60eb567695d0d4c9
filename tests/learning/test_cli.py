"""The rsl_rl-style command line's library (``diffloco_ext.learning.cli``): task registration, typed and validated
config overrides, the YAML round trip, training within a wall-clock budget. The scripts that use it (train.py,
play.py, list_envs.py): ``tests/scripts/``."""

from __future__ import annotations

import pytest
import yaml

from diffloco_ext.tasks import registry
from diffloco_ext.tasks.cfg_override import ConfigOverrideError, apply_overrides, parse_overrides

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_registration_through_gymnasium_and_the_isaaclab_entry_point():
    from importlib.metadata import entry_points

    import gymnasium as gym

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
    from diffloco_ext.tasks.velocity.env_cfg import VelocityEnvCfg

    cfg = VelocityEnvCfg()  # the base task: no command curriculum
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
