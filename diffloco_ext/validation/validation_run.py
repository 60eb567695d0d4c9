"""One validation run: every scenario of a config on every requested backend, the gates, the export gate, the
training-simulator reference of the joint-trajectory figure, the verdict and the report.

    task = TaskInterface.from_task("DiffLoco-Velocity-Flat-AnymalD")
    config = load_config(default_config_path("anymal_d"))
    policy = load_policy_file("logs/.../exported/policy.pt", task.num_obs, task.num_actions)
    result = run_validation(task, policy, ["hard", "mujoco"], config, out_dir="validation_report")
    result.verdict            # "PASS" | "FAIL"; result.failing: the failing gates with value and threshold

Progress goes to ``progress`` (default: print): a line per few seconds with the backend, episodes done and an
estimate of the time left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from . import backend_registry
from .closed_loop import BatchResult, TaskInterface, batch_steps, pack_batches, plan_episodes, run_batch
from .gait_analysis import classify_offsets, gait_summary
from .gates import GateResult, check_gates, scenario_metrics, verdict
from .policy_io import DeployedPolicy, export_mismatch
from .robot_kinematics import RobotKinematics
from .scenarios import ValidationConfig
from .terrain_scenarios import validation_terrain

#: The training simulator's reference run of the figure scenario (not gated): the task's own contact model.
REFERENCE = "train-sim"


@dataclass
class BackendRun:
    """Everything one backend produced."""

    name: str
    metrics: dict[str, dict[str, float]]  # scenario -> gate measurements
    gates: list[GateResult]
    traces: dict[str, dict[str, np.ndarray]]
    episodes: int
    seconds: float
    env_steps: int
    fall_times: dict[str, list[float]] = field(default_factory=dict)
    fall_commands: dict[str, list[list[float]]] = field(default_factory=dict)  # (vx, vy, wz) at each fall
    gaits: dict[str, dict] = field(default_factory=dict)  # scenario -> :func:`.gait_analysis.gait_summary`
    gait_episodes: dict[str, list[dict]] = field(default_factory=dict)  # scenario -> each measured episode's gait


@dataclass
class ValidationResult:
    task: str
    policy: str
    config: str
    verdict: str
    failing: list[GateResult]
    runs: dict[str, BackendRun]
    skipped: dict[str, str]
    export: dict | None
    export_gates: list[GateResult]
    reference: BackendRun | None
    seconds: float
    report_dir: str | None = None
    report: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"


class Progress:
    """Throttled progress lines: episodes done and the time left (from the steps run so far)."""

    def __init__(self, total_steps: dict[str, int], episodes: dict[str, int], printer=print, every_s: float = 5.0):
        self.total, self.episodes, self.printer, self.every = total_steps, episodes, printer, every_s
        self.done = {k: 0 for k in total_steps}
        self.episodes_done = {k: 0 for k in total_steps}
        self.seconds = {k: 0.0 for k in total_steps}
        self.start = time.time()
        self.first_step = {}
        self.last = 0.0
        self.backend = None
        self.backend_start = None
        self.in_batch = 0

    def begin(self, backend: str) -> None:
        self.backend, self.backend_start = backend, time.time()

    def step(self, n: int = 1, force: bool = False, finished: int = 0) -> None:
        """``n`` more policy steps of the current backend; ``finished``: episodes over in its current batch."""
        b = self.backend
        self.done[b] += n
        self.in_batch = finished
        now = time.time()
        if self.first_step.get(b) is None:  # rates from the first step on (not the engine's start-up)
            self.first_step[b] = (now, self.done[b])
        self.seconds[b] = now - self.backend_start
        if not force and (now - self.last < self.every or self.done[b] < 10):  # no estimate from a first step
            return
        self.last = now
        t0, n0 = self.first_step[b]
        rate = (now - t0) / max(self.done[b] - n0, 1)
        left_b = rate * (self.total[b] - self.done[b])
        # validators not started yet: the slowest measured rate per step (the 1-env reference run is not counted)
        rates = [self.seconds[k] / self.done[k] for k in self.total if self.done[k]]
        later = sum(max(rates) * self.total[k] for k in self.total if not self.done[k] and k != REFERENCE)
        self.printer(f"[validate] {b}: {self.episodes_done[b] + self.in_batch}/{self.episodes[b]} episodes done, "
                     f"{100 * self.done[b] / max(self.total[b], 1):.0f} % of its steps, {self.seconds[b]:.0f} s; "
                     f"~{left_b:.0f} s left here, ~{left_b + later:.0f} s in all")

    def batch_done(self, n: int) -> None:
        self.episodes_done[self.backend] += n
        self.in_batch = 0


def _run_backend(name: str, backend, task: TaskInterface, policy, config: ValidationConfig, batches,
                 progress: Progress, record_observations: int, start: float,
                 terrain=None) -> tuple[BackendRun, list[torch.Tensor]]:
    num_envs = backend.num_envs
    kinematics = RobotKinematics(task.robot, num_envs, terrain)
    per_scenario: dict[str, list[dict]] = {}
    fall_times: dict[str, list[float]] = {}
    fall_commands: dict[str, list[list[float]]] = {}
    traces, observations, env_steps = {}, [], 0
    try:
        for batch in batches:
            result: BatchResult = run_batch(backend, policy, task, kinematics, batch, config.settings,
                                            record_observations=record_observations,
                                            on_step=lambda t, total, finished: progress.step(finished=finished))
            env_steps += result.steps * num_envs
            for spec, row in result.episodes:
                per_scenario.setdefault(spec.scenario.name, []).append(row)
                if row["fell"]:
                    fall_times.setdefault(spec.scenario.name, []).append(float(row["fall_time"]))
                    fall_commands.setdefault(spec.scenario.name, []).append([float(x) for x in row["fall_command"]])
            progress.batch_done(len(result.episodes))
            traces.update(result.traces)
            observations += result.observations
            record_observations = max(0, record_observations - sum(o.shape[0] for o in result.observations))
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    metrics, gates, gaits, gait_episodes = {}, [], {}, {}
    effort = task.robot.actuator.effort_limit
    expected = task_gait(task)
    for scenario in config.scenarios:
        rows = per_scenario.get(scenario.name, [])
        if not rows:
            continue
        metrics[scenario.name] = scenario_metrics(rows, effort)
        measured = [r["gait"] for r in rows if r.get("gait") is not None]
        gaits[scenario.name] = gait_summary(measured, expected)
        gait_episodes[scenario.name] = [m.to_dict() for m in measured]
        metrics[scenario.name]["gait_mismatch"] = gaits[scenario.name].get("mismatch", float("nan"))
        # the gait gate where the gait was measured: scenarios commanded to move, of a task with a named gait
        thresholds = scenario.gates if measured and expected else \
            {g: t for g, t in scenario.gates.items() if g != "gait_mismatch"}
        gates += check_gates(metrics[scenario.name], thresholds, name, scenario.name)
    run = BackendRun(name=name, metrics=metrics, gates=gates, traces=traces,
                     episodes=sum(len(v) for v in per_scenario.values()), seconds=time.time() - start,
                     env_steps=env_steps, fall_times=fall_times,
                     fall_commands=fall_commands, gaits=gaits, gait_episodes=gait_episodes)
    return run, observations


def task_gait(task: TaskInterface) -> str | None:
    """The gait class the task's foot-height reference asks for (:func:`.gait_analysis.classify_offsets` of its
    ``env.gait``), or None for a task without a gait or with offsets of no class."""
    gait = getattr(task.env_cfg, "gait", None)
    if gait is None:
        return None
    name, _ = classify_offsets(gait.phase_offsets)
    return None if name == "irregular" else name


def reference_run(task: TaskInterface, policy, config: ValidationConfig, progress: Progress) -> BackendRun:
    """The figure scenario's traced episode in the training simulator (the task's contact model and dtype)."""
    from .sim_backend import SimBackend

    scenario = config.figure_scenario
    spec = [s for s in plan_episodes([scenario]) if s.trace]

    start = time.time()
    terrain = validation_terrain([scenario], task.env_cfg, config.settings.terrain_seed)
    backend = SimBackend(task.robot, 1, task.env_cfg.sim, name=REFERENCE, terrain=terrain)
    run, _ = _run_backend(REFERENCE, backend, task, policy, config, [spec], progress, 0, start, terrain)
    return run


def run_validation(task: TaskInterface, policy: DeployedPolicy, backends: list[str] | str, config: ValidationConfig,
                   out_dir: str | None = None, *, video: bool = False, reference: bool = True, printer=print,
                   export_observations: int = 4096) -> ValidationResult:
    """Validate ``policy`` on ``backends`` (names or aliases, :mod:`.backend_registry`) with the scenarios and
    gates of ``config``; write the report to ``out_dir`` (none if None). See the module docstring."""
    t0 = time.time()
    if config.robot != task.robot.name:
        raise ValueError(f"the validation config {config.source} is for robot '{config.robot}', the task "
                         f"'{task.task}' drives '{task.robot.name}'")
    names, lenient = backend_registry.resolve(backends)
    skipped = {}
    usable = []
    for name in names:
        ok, reason = backend_registry.available(name)
        if ok:
            usable.append(name)
        elif lenient:
            skipped[name] = reason
            printer(f"[validate] skipping backend {name}: {reason}")
        else:
            raise backend_registry.BackendUnavailable(reason)
    if not usable:
        raise backend_registry.BackendUnavailable(f"none of the backends {names} can run here: {skipped}")

    specs = plan_episodes(config.scenarios)
    terrain = validation_terrain(config.scenarios, task.env_cfg, config.settings.terrain_seed)
    num_envs = min(config.settings.max_envs, len(specs))
    batches = pack_batches(specs, num_envs)
    steps = sum(batch_steps(b, task.policy_dt) for b in batches)
    figure_steps = int(round(config.figure_scenario.duration_s / task.policy_dt))
    total = {name: steps for name in usable}
    episodes = {name: len(specs) for name in usable}
    if reference:
        total[REFERENCE], episodes[REFERENCE] = figure_steps, 1
    progress = Progress(total, episodes, printer)
    printer(f"[validate] {task.task}: {len(config.scenarios)} scenarios, {len(specs)} episodes "
            f"({len(batches)} batch(es) of up to {num_envs} envs, {steps} policy steps each) on {usable}")

    runs, observations = {}, []
    for name in usable:
        progress.begin(name)
        start = time.time()
        try:
            backend = backend_registry.make_backend(name, task.robot, num_envs, policy_dt=task.policy_dt,
                                                    terrain=terrain)
        except Exception as err:  # noqa: BLE001 - with `all`, an engine that does not start here is skipped
            if not lenient:
                raise
            skipped[name] = f"could not be started: {type(err).__name__}: {err}"
            printer(f"[validate] skipping backend {name}: {skipped[name]}")
            total.pop(name)
            continue
        run, obs = _run_backend(name, backend, task, policy, config, batches, progress,
                                export_observations if not observations else 0, start, terrain)
        observations += obs
        runs[name] = run
        progress.step(0, force=True)
        failing = [g for g in run.gates if not g.passed]
        printer(f"[validate] {name}: {run.episodes} episodes in {run.seconds:.1f} s, "
                f"{len(failing)} failing gate(s)")
    if not runs:
        raise backend_registry.BackendUnavailable(f"no backend could run: {skipped}")
    ref = None
    if reference:
        progress.begin(REFERENCE)
        ref = reference_run(task, policy, config, progress)

    export, export_gates = None, []
    if observations:
        export = export_mismatch(policy, torch.cat(observations))
        if export is not None:
            export_gates = [GateResult("export_mismatch", max(export.values()), config.gates["export_mismatch"],
                                       "export", "recorded observations")]
    all_gates = [g for run in runs.values() for g in run.gates] + export_gates
    outcome, failing = verdict(all_gates)
    result = ValidationResult(task=task.task, policy=policy.path, config=config.source, verdict=outcome,
                              failing=failing, runs=runs, skipped=skipped, export=export, export_gates=export_gates,
                              reference=ref, seconds=time.time() - t0)
    if out_dir is not None:
        from .report import write_report

        write_report(result, task, config, out_dir, video=video, printer=printer)
    result.seconds = time.time() - t0
    return result
