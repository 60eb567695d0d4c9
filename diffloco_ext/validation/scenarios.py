"""Validation scenarios and gates from a YAML file (one per robot in ``config/validation/``, user-extendable).

File layout (every key is checked: an unknown key, a wrong type, a missing file or a bad value is a
:class:`ScenarioConfigError` naming the file and the key)::

    robot: anymal_d                    # required: the robot the policy drives (must match the task's)
    extends: anymal_d                  # optional: a robot name (config/validation/<name>.yaml) or a path
    inherit_scenarios: true            # with extends: keep the base file's scenarios (default true)
    settings:                          # defaults, each optional
      seeds: [0, 1, 2]                 #   every scenario runs its episodes once per seed
      episodes: 4                      #   episodes per seed
      duration_s: 10.0                 #   episode length (s)
      warmup_s: 1.0                    #   gates ignore the first seconds (the drop from the reset height)
      stance_height: 0.01              #   m: a foot sphere's bottom this close to the ground is in stance
      fall_height: 0.25                #   m: a base origin below this is a fall (as is base-ground contact)
      max_envs: 128                    #   envs per backend batch
      figure_scenario: vx_sweep        #   the episode of the joint-trajectory figure, gap table and videos
      gait_min_speed: 0.3              #   m/s: an episode's gait is measured over its steps commanded faster
      gait_min_seconds: 2.0            #   s: episodes with less of them get no gait (gait_analysis.py)
      terrain_seed: 0                  #   the generated terrain's draws (scenarios with a terrain)
    gates: {lin_vel_error: 0.3, ...}   # thresholds (:data:`.gates.GATES`); measured <= threshold passes
    scenarios:
      - name: vx_sweep                 # required, unique
        description: ...
        episodes: 1                    # per seed (default settings.episodes)
        seeds: [0]                     # default settings.seeds
        duration_s: 18                 # default: the schedule's length, else settings.duration_s
        commands:                      # one of:
          schedule: [[2.0, 0.0, 0.0, 0.0], [2.0, 0.5, 0.0, 0.0]]  # [hold (s), vx (m/s), vy (m/s), wz (rad/s)]
          # random: {resampling_time: 5.0}   # the task's command generator; keys override its CommandsCfg
        initial_yaw: random            # rad, or "random" (uniform in [-pi, pi), the default)
        friction: [0.4, 1.2]           # a number, or a list cycled over the episodes (default 1.0)
        payload_kg: [-5.0, 5.0]        # kg on the base at its centre of mass (default 0)
        stiffness_scale: 1.0           # factor on the PD k_p (default 1)
        damping_scale: 1.0             # factor on the PD k_d (default 1)
        push: {interval_s: [3.0, 5.0], velocity_xy: 0.5}  # base velocity kicks (world x, y: U(-v, v) each)
        observation_delay_steps: 0     # the policy sees the robot's state this many policy steps late
        gates: {foot_slip: 0.2, base_tilt: null}  # per-scenario thresholds (null: not gated here)
        plot: true                     # a commanded-vs-measured velocity figure (Fig. 6 style)
        terrain: {type: pyramid_stairs_inv, difficulty: 0.28}  # on generated terrain (see below)

A scenario without ``commands`` uses the task's random commands.

Terrain: a scenario with ``terrain`` runs its episodes on tiles of the generated terrain (the task's generator, or
Isaac Lab's rough terrain for a flat task): ``type`` a sub-terrain name of the generator (e.g. ``pyramid_stairs``:
the robot starts on the top platform and walks down; ``pyramid_stairs_inv``: up; ``hf_pyramid_slope``,
``hf_pyramid_slope_inv``, ``boxes``, ``random_rough``) or ``mixed`` (the episodes cycle over every column), and
``difficulty`` in [0, 1]. The run's terrain has one row per difficulty its scenarios name; an episode starts on the
origin of a tile of its type and difficulty (cycling over the columns of that type), at the tile's height plus the
task's reset height. In a file, either every scenario has a terrain or none has (MuJoCo's height field ends at the
terrain's edge: flat-ground episodes run without it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from ..tasks.velocity.env_cfg import CommandsCfg
from .gates import GATES, SCENARIO_GATES

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config" / "validation"

TOP_KEYS = ("robot", "extends", "inherit_scenarios", "settings", "gates", "scenarios")
SCENARIO_KEYS = ("name", "description", "episodes", "seeds", "duration_s", "commands", "initial_yaw", "friction",
                 "payload_kg", "stiffness_scale", "damping_scale", "push", "observation_delay_steps", "gates",
                 "plot", "terrain")
PARAMETER_KEYS = ("friction", "payload_kg", "stiffness_scale", "damping_scale")
PARAMETER_DEFAULTS = {"friction": 1.0, "payload_kg": 0.0, "stiffness_scale": 1.0, "damping_scale": 1.0}


class ScenarioConfigError(ValueError):
    """A malformed validation config file (the message names the file and the key)."""


@dataclass
class Settings:
    """Defaults and run settings (see the module docstring)."""

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    episodes: int = 4
    duration_s: float = 10.0
    warmup_s: float = 1.0
    stance_height: float = 0.01
    fall_height: float = 0.25
    max_envs: int = 128
    figure_scenario: str | None = None
    gait_min_speed: float = 0.3
    gait_min_seconds: float = 2.0
    terrain_seed: int = 0


@dataclass
class Push:
    interval_s: tuple[float, float]  # s between kicks, uniform
    velocity_xy: float  # m/s: each of the world x, y base velocity changes is U(-v, v)


@dataclass(frozen=True)
class TerrainSpec:
    """Where a scenario's episodes run on the generated terrain: tiles of sub-terrain ``type`` (or ``"mixed"``: every
    column) at ``difficulty`` in [0, 1]."""

    type: str
    difficulty: float


@dataclass
class Scenario:
    """One scenario, resolved (defaults filled in)."""

    name: str
    description: str
    episodes: int
    seeds: list[int]
    duration_s: float
    schedule: np.ndarray | None  # [K, 4] (hold s, vx, vy, wz) or None for random commands
    random_commands: dict | None  # overrides of the task's CommandsCfg (random commands), or None (schedule)
    initial_yaw: float | None  # None: random
    parameters: dict[str, list[float]]  # PARAMETER_KEYS -> values cycled over the episodes
    push: Push | None
    observation_delay_steps: int
    gates: dict[str, float | None]  # all scenario gates, merged with the file's
    plot: bool
    terrain: TerrainSpec | None = None  # on generated terrain, or flat ground (None)

    def command_at(self, t: float) -> np.ndarray:
        """The schedule's command (vx, vy, wz) at time ``t`` (s); the last one holds after the schedule."""
        ends = np.cumsum(self.schedule[:, 0])
        k = min(int(np.searchsorted(ends, t, side="right")), len(ends) - 1)
        return self.schedule[k, 1:]

    def commands_cfg(self, task_commands: CommandsCfg) -> CommandsCfg:
        """The random-command generator's config: the task's with this scenario's overrides and any training
        curriculum off (validation samples the full ranges)."""
        return dataclasses.replace(task_commands, curriculum_initial_scale=1.0, curriculum_steps=0,
                                   curriculum_initial_lin_vel_x=None, curriculum_initial_lin_vel_y=None,
                                   curriculum_initial_ang_vel_z=None, **(self.random_commands or {}))

    def parameter(self, name: str, episode: int) -> float:
        values = self.parameters[name]
        return values[episode % len(values)]


@dataclass
class ValidationConfig:
    robot: str
    settings: Settings
    gates: dict[str, float]
    scenarios: list[Scenario]
    source: str

    def scenario(self, name: str) -> Scenario:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(f"no scenario '{name}' in {self.source}: {[s.name for s in self.scenarios]}")

    @property
    def figure_scenario(self) -> Scenario:
        name = self.settings.figure_scenario
        return self.scenario(name) if name else self.scenarios[0]


def default_config_path(robot: str) -> Path:
    """``config/validation/<robot>.yaml``."""
    return CONFIG_DIR / f"{robot}.yaml"


def load_config(path: str | Path) -> ValidationConfig:
    """Read, merge (``extends``) and check a validation config file."""
    raw = _merged(Path(path), seen=())
    return _resolve(raw, str(path))


def _read(path: Path) -> dict:
    if not path.is_file():
        raise ScenarioConfigError(f"validation config '{path}' not found (the robots' defaults are in {CONFIG_DIR})")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ScenarioConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ScenarioConfigError(f"{path}: the file must be a mapping with keys {TOP_KEYS}, got {type(data).__name__}")
    _keys(data, TOP_KEYS, str(path))
    data["_source"] = str(path)
    return data


def _merged(path: Path, seen: tuple) -> dict:
    data = _read(path)
    where = str(path)
    if "extends" not in data:
        return data
    base_ref = data["extends"]
    if not isinstance(base_ref, str):
        raise ScenarioConfigError(f"{where}: 'extends' must be a robot name or a path, got {base_ref!r}")
    base_path = Path(base_ref) if base_ref.endswith((".yaml", ".yml")) else default_config_path(base_ref)
    if not base_path.is_absolute() and not base_path.is_file():
        base_path = path.parent / base_path
    if base_path.resolve() in seen or base_path.resolve() == path.resolve():
        raise ScenarioConfigError(f"{where}: 'extends' loops back to {base_path}")
    base = _merged(base_path, seen + (path.resolve(),))
    inherit = data.get("inherit_scenarios", True)
    if not isinstance(inherit, bool):
        raise ScenarioConfigError(f"{where}: 'inherit_scenarios' must be true or false, got {inherit!r}")
    out = {"robot": data.get("robot", base.get("robot")), "_source": where}
    for key in ("settings", "gates"):
        for name, part in (("base", base), ("file", data)):
            if key in part and not isinstance(part[key], dict):
                raise ScenarioConfigError(f"{part['_source']}: '{key}' must be a mapping, got {part[key]!r}")
        out[key] = {**base.get(key, {}), **data.get(key, {})}
    if not inherit and "figure_scenario" not in (data.get("settings") or {}):
        out["settings"].pop("figure_scenario", None)  # the base's figure scenario is not inherited
    scenarios = list(base.get("scenarios", []) or []) if inherit else []
    own = data.get("scenarios", []) or []
    if not isinstance(own, list):
        raise ScenarioConfigError(f"{where}: 'scenarios' must be a list, got {type(own).__name__}")
    names = [s.get("name") if isinstance(s, dict) else None for s in scenarios]
    for s in own:
        name = s.get("name") if isinstance(s, dict) else None
        if name is not None and name in names:
            scenarios[names.index(name)] = s  # a scenario of the same name replaces the base's
        else:
            scenarios.append(s)
    out["scenarios"] = scenarios
    return out


def _keys(data: dict, allowed: tuple, where: str) -> None:
    unknown = [k for k in data if k not in allowed and k != "_source"]
    if unknown:
        raise ScenarioConfigError(f"{where}: unknown key(s) {unknown}; allowed: {list(allowed)}")


def _number(value, where: str, *, minimum: float | None = None, positive: bool = False, integer: bool = False):
    ok_types = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, ok_types) or not math.isfinite(value):
        kind = "an integer" if integer else "a number"
        raise ScenarioConfigError(f"{where}: must be {kind}, got {value!r}")
    if positive and value <= 0:
        raise ScenarioConfigError(f"{where}: must be > 0, got {value!r}")
    if minimum is not None and value < minimum:
        raise ScenarioConfigError(f"{where}: must be >= {minimum}, got {value!r}")
    return value


def _seeds(value, where: str) -> list[int]:
    if not isinstance(value, list) or not value:
        raise ScenarioConfigError(f"{where}: must be a non-empty list of integers, got {value!r}")
    return [_number(v, f"{where}[{i}]", integer=True, minimum=0) for i, v in enumerate(value)]


def _thresholds(value, where: str, allow_null: bool) -> dict:
    if not isinstance(value, dict):
        raise ScenarioConfigError(f"{where}: must be a mapping of gate name to threshold, got {value!r}")
    out = {}
    for name, t in value.items():
        if name not in GATES:
            raise ScenarioConfigError(f"{where}: unknown gate '{name}'; gates are {list(GATES)}")
        if t is None and allow_null:
            out[name] = None
            continue
        out[name] = float(_number(t, f"{where}.{name}", minimum=0.0))
    return out


def _resolve(raw: dict, where: str) -> ValidationConfig:
    robot = raw.get("robot")
    if not isinstance(robot, str) or not robot:
        raise ScenarioConfigError(f"{where}: 'robot' (the robot's name, e.g. anymal_d) is required")
    settings = Settings()
    given = raw.get("settings", {}) or {}
    if not isinstance(given, dict):
        raise ScenarioConfigError(f"{where}: 'settings' must be a mapping, got {given!r}")
    _keys(given, tuple(f.name for f in dataclasses.fields(Settings)), f"{where}: settings")
    for key, value in given.items():
        w = f"{where}: settings.{key}"
        if key == "seeds":
            value = _seeds(value, w)
        elif key in ("episodes", "max_envs"):
            value = _number(value, w, integer=True, positive=True)
        elif key == "terrain_seed":
            value = _number(value, w, integer=True, minimum=0)
        elif key == "figure_scenario":
            if value is not None and not isinstance(value, str):
                raise ScenarioConfigError(f"{w}: must be a scenario name, got {value!r}")
        elif key == "warmup_s":
            value = float(_number(value, w, minimum=0.0))
        else:
            value = float(_number(value, w, positive=True))
        setattr(settings, key, value)
    gates = _thresholds(raw.get("gates", {}) or {}, f"{where}: gates", allow_null=False)
    missing = [g for g in GATES if g not in gates]
    if missing:
        raise ScenarioConfigError(f"{where}: gates {missing} have no threshold (every gate needs one)")
    items = raw.get("scenarios")
    if not isinstance(items, list) or not items:
        raise ScenarioConfigError(f"{where}: 'scenarios' must be a non-empty list")
    scenarios = [_scenario(item, i, settings, gates, where) for i, item in enumerate(items)]
    names = [s.name for s in scenarios]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScenarioConfigError(f"{where}: scenario names must be unique: {duplicates}")
    on_terrain = [s.name for s in scenarios if s.terrain is not None]
    if on_terrain and len(on_terrain) != len(scenarios):
        raise ScenarioConfigError(f"{where}: scenarios {on_terrain} run on terrain and "
                                  f"{[n for n in names if n not in on_terrain]} on flat ground: either every "
                                  f"scenario of a file has a terrain or none has")
    if settings.figure_scenario is not None and settings.figure_scenario not in names:
        raise ScenarioConfigError(f"{where}: settings.figure_scenario '{settings.figure_scenario}' is not a "
                                  f"scenario: {names}")
    return ValidationConfig(robot=robot, settings=settings, gates=gates, scenarios=scenarios,
                            source=raw.get("_source", where))


def _scenario(item, index: int, settings: Settings, gates: dict, where: str) -> Scenario:
    if not isinstance(item, dict):
        raise ScenarioConfigError(f"{where}: scenarios[{index}] must be a mapping, got {item!r}")
    name = item.get("name")
    if not isinstance(name, str) or not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ScenarioConfigError(f"{where}: scenarios[{index}] needs a 'name' (letters, digits, _ and -), "
                                  f"got {name!r}")
    w = f"{where}: scenario '{name}'"
    _keys(item, SCENARIO_KEYS, w)
    description = item.get("description", "")
    if not isinstance(description, str):
        raise ScenarioConfigError(f"{w}.description must be text, got {description!r}")
    episodes = _number(item.get("episodes", settings.episodes), f"{w}.episodes", integer=True, positive=True)
    seeds = _seeds(item.get("seeds", settings.seeds), f"{w}.seeds")
    schedule, random_commands = _commands(item.get("commands"), f"{w}.commands")
    if "duration_s" in item:
        duration = float(_number(item["duration_s"], f"{w}.duration_s", positive=True))
    elif schedule is not None:
        duration = float(schedule[:, 0].sum())
    else:
        duration = settings.duration_s
    yaw = item.get("initial_yaw", "random")
    if yaw == "random":
        yaw = None
    else:
        yaw = float(_number(yaw, f"{w}.initial_yaw"))
    parameters = {}
    for key in PARAMETER_KEYS:
        value = item.get(key, PARAMETER_DEFAULTS[key])
        values = value if isinstance(value, list) else [value]
        if not values:
            raise ScenarioConfigError(f"{w}.{key}: an empty list")
        parameters[key] = [float(_number(v, f"{w}.{key}", minimum=None if key == "payload_kg" else 0.0))
                           for v in values]
    push = None
    if item.get("push") is not None:
        p = item["push"]
        if not isinstance(p, dict):
            raise ScenarioConfigError(f"{w}.push must be a mapping {{interval_s: [lo, hi], velocity_xy: v}}")
        _keys(p, ("interval_s", "velocity_xy"), f"{w}.push")
        interval = _pair(p.get("interval_s"), f"{w}.push.interval_s", positive=True)
        push = Push(interval, float(_number(p.get("velocity_xy"), f"{w}.push.velocity_xy", minimum=0.0)))
    delay = _number(item.get("observation_delay_steps", 0), f"{w}.observation_delay_steps", integer=True,
                    minimum=0)
    merged = {g: gates[g] for g in SCENARIO_GATES}
    merged.update(_thresholds(item.get("gates", {}) or {}, f"{w}.gates", allow_null=True))
    if "export_mismatch" in merged:
        raise ScenarioConfigError(f"{w}.gates: export_mismatch is checked once per run, not per scenario")
    plot = item.get("plot", False)
    if not isinstance(plot, bool):
        raise ScenarioConfigError(f"{w}.plot must be true or false, got {plot!r}")
    terrain = None
    if item.get("terrain") is not None:
        t = item["terrain"]
        if not isinstance(t, dict):
            raise ScenarioConfigError(f"{w}.terrain must be a mapping {{type: <sub-terrain or mixed>, difficulty: d}}")
        _keys(t, ("type", "difficulty"), f"{w}.terrain")
        if not isinstance(t.get("type"), str) or not t["type"]:
            raise ScenarioConfigError(f"{w}.terrain.type must be a sub-terrain name or 'mixed', got {t.get('type')!r}")
        difficulty = float(_number(t.get("difficulty"), f"{w}.terrain.difficulty", minimum=0.0))
        if difficulty > 1.0:
            raise ScenarioConfigError(f"{w}.terrain.difficulty must be in [0, 1], got {difficulty}")
        terrain = TerrainSpec(t["type"], difficulty)
    return Scenario(name=name, description=description, episodes=int(episodes), seeds=seeds, duration_s=duration,
                    schedule=schedule, random_commands=random_commands, initial_yaw=yaw, parameters=parameters,
                    push=push, observation_delay_steps=int(delay), gates=merged, plot=plot, terrain=terrain)


def _pair(value, where: str, positive: bool = False) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise ScenarioConfigError(f"{where}: must be a list [low, high], got {value!r}")
    lo, hi = (float(_number(v, where, positive=positive)) for v in value)
    if lo > hi:
        raise ScenarioConfigError(f"{where}: low {lo} > high {hi}")
    return lo, hi


def _commands(value, where: str):
    if value is None:
        return None, {}
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in ("schedule", "random"):
        raise ScenarioConfigError(f"{where}: must be {{schedule: [[hold_s, vx, vy, wz], ...]}} or "
                                  f"{{random: {{CommandsCfg overrides}}}}, got {value!r}")
    kind, body = next(iter(value.items()))
    if kind == "schedule":
        if not isinstance(body, list) or not body:
            raise ScenarioConfigError(f"{where}.schedule: a non-empty list of [hold_s, vx, vy, wz]")
        rows = []
        for i, row in enumerate(body):
            if not isinstance(row, list) or len(row) != 4:
                raise ScenarioConfigError(f"{where}.schedule[{i}]: must be [hold_s, vx, vy, wz], got {row!r}")
            rows.append([float(_number(row[0], f"{where}.schedule[{i}] hold_s", positive=True))]
                        + [float(_number(v, f"{where}.schedule[{i}]")) for v in row[1:]])
        return np.array(rows), None
    body = body or {}
    if not isinstance(body, dict):
        raise ScenarioConfigError(f"{where}.random: must be a mapping of CommandsCfg fields, got {body!r}")
    defaults = CommandsCfg()
    allowed = tuple(f.name for f in dataclasses.fields(CommandsCfg) if not f.name.startswith("curriculum"))
    _keys(body, allowed, f"{where}.random")
    overrides = {}
    for key, v in body.items():
        default = getattr(defaults, key)
        w = f"{where}.random.{key}"
        if isinstance(default, bool):
            if not isinstance(v, bool):
                raise ScenarioConfigError(f"{w}: must be true or false, got {v!r}")
        elif isinstance(default, tuple):
            v = _pair(v, w)
        else:
            v = float(_number(v, w, minimum=0.0))
        overrides[key] = v
    return None, overrides
