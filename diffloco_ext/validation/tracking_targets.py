"""The velocity task's tracking targets, measured closed-loop on the deployed policy: 100 episodes of 20 s of uniform
random commands (``config/validation/anymal_d_random100.yaml``, seed 0) in our hard contact and in MuJoCo, each
validator against its targets (planar and yaw-rate error, no fall in any episode).

For a policy of the rough interface also the rough-terrain targets (:func:`measure_rough_targets`,
``config/validation/anymal_d_rough.yaml``): on the mixed terrain at difficulty 0.5 (100 episodes of 20 s of uniform
commands) planar and yaw-rate error within 0.35 m/s and 0.35 rad/s and at most 2 % falls; up and down stairs of
10-cm steps and 20-degree slopes (20 episodes each at 0.5 m/s forward) at most 10 % stuck and 2 % falls."""

from __future__ import annotations

import numpy as np

from .closed_loop import TaskInterface
from .scenarios import CONFIG_DIR, load_config
from .validation_run import run_validation

#: The scenario file of the measurement: its ``random_commands`` scenario, 100 episodes of seed 0.
TARGET_CONFIG = str(CONFIG_DIR / "anymal_d_random100.yaml")
#: backend -> the validator's name in the summaries
VALIDATORS = {"hard": "diffloco hard contact", "mujoco": "MuJoCo"}
#: per validator: (planar error in m/s, yaw-rate error in rad/s), the means over the episodes' steps; and no fall
TRACKING_TARGETS = {"diffloco hard contact": (0.25, 0.3), "MuJoCo": (0.3, 0.35)}
#: The rough-terrain measurement's scenario file, and its targets per scenario: gate -> largest value met.
ROUGH_TARGET_CONFIG = str(CONFIG_DIR / "anymal_d_rough.yaml")
ROUGH_TARGETS = {
    "mixed_random": {"lin_vel_error": 0.35, "ang_vel_error": 0.35, "fall_rate": 0.02},
    **{name: {"stuck_rate": 0.1, "fall_rate": 0.02} for name in ("stairs_up", "stairs_down", "slope_up",
                                                                 "slope_down")},
}


class ScenarioStats:
    """The random-command scenario of one validator in the shape of the main job's summary and velocity plot
    (``summary()``; ``traces`` with arrays [T, 1, ...] of the scenario's traced episode)."""

    def __init__(self, metrics: dict, episodes: int, falls: list[float], duration: float, trace: dict):
        self.metrics, self.episodes, self.falls, self.duration = metrics, episodes, falls, duration
        self.traces = {k: np.asarray(v)[:, None] if k != "time" else np.asarray(v) for k, v in trace.items()}

    def summary(self) -> dict:
        lengths = self.falls + [self.duration] * (self.episodes - len(self.falls))
        return {"episodes": self.episodes, "lin_vel_xy_error": self.metrics["lin_vel_error"],
                "ang_vel_z_error": self.metrics["ang_vel_error"], "falls": len(self.falls),
                "mean_length_s": float(np.mean(lengths))}


def random_commands_stats(run, config) -> ScenarioStats:
    """The ``random_commands`` scenario of one backend's validation ``run`` (scenario file ``config``)."""
    scenario = config.scenario("random_commands")
    return ScenarioStats(run.metrics[scenario.name], scenario.episodes * len(scenario.seeds),
                          run.fall_times.get(scenario.name, []), scenario.duration_s, run.traces[scenario.name])


def measure_targets(task: TaskInterface, policy, out_dir: str, episodes: int | None, printer=print) -> dict:
    """The tracking measurement of ``policy`` (``TARGET_CONFIG``'s random commands; ``episodes`` of them if
    given, 0: none) in both validators, each against ``TRACKING_TARGETS``: per validator the summary of
    :class:`ScenarioStats` with ``target_lin_vel_xy_error``, ``target_ang_vel_z_error`` and ``met`` (both errors
    within their targets and no fall), and ``gait`` (:func:`.gait_analysis.gait_summary` of the episodes' steps
    commanded faster than ``gait_min_speed``; ``share_expected``: the share walking the task's gait)."""
    if episodes == 0:
        return {}
    config = load_config(TARGET_CONFIG)
    config.scenarios = [config.scenario("random_commands")]
    config.settings.figure_scenario = "random_commands"
    if episodes is not None:
        config.scenario("random_commands").episodes = episodes
    run = run_validation(task, policy, list(VALIDATORS), config, out_dir, reference=False, printer=printer)
    out = {}
    for backend, result in run.runs.items():
        name = VALIDATORS[backend]
        lin, ang = TRACKING_TARGETS[name]
        r = random_commands_stats(result, config).summary()
        r.update(target_lin_vel_xy_error=lin, target_ang_vel_z_error=ang,
                 met=bool(r["lin_vel_xy_error"] <= lin and r["ang_vel_z_error"] <= ang and r["falls"] == 0))
        gait = result.gaits.get("random_commands")
        if gait is not None:  # the gait over the episodes' steps commanded faster than gait_min_speed
            r["gait"] = {k: gait[k] for k in ("windows", "share", "stride_frequency", "duty", "phase_offsets")
                         if k in gait}
            if "expected" in gait:
                r["gait"].update(expected=gait["expected"], share_expected=1.0 - gait["mismatch"]
                                 if gait["windows"] else None)
        out[name] = r
    return out


def measure_rough_targets(task: TaskInterface, policy, out_dir: str, printer=print) -> dict:
    """The rough-terrain measurement (module docstring) in both validators: per validator and scenario the measured
    values of its targets' gates, the targets and ``met``."""
    config = load_config(ROUGH_TARGET_CONFIG)
    run = run_validation(task, policy, list(VALIDATORS), config, out_dir, reference=False, printer=printer)
    out = {}
    for backend, result in run.runs.items():
        per = {}
        for scenario, targets in ROUGH_TARGETS.items():
            m = result.metrics[scenario]
            per[scenario] = {"measured": {g: float(m[g]) for g in targets}, "targets": targets,
                             "episodes": config.scenario(scenario).episodes,
                             "met": all(m[g] <= t for g, t in targets.items())}
        out[VALIDATORS[backend]] = per
    return out
