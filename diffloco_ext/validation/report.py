"""The validation report folder: ``summary.md``, ``summary.json``, matplotlib figures, optional videos.

* ``velocity_<scenario>.png``: commanded vs measured base velocity over time, one column per backend (Schwarke
  et al.'s Fig. 6 style, arXiv 2404.02887), for the scenarios marked ``plot: true``;
* ``joint_trajectories.png``: the figure scenario's joint angles, the training simulator against every
  validator on the same command sequence (Schwarke et al.'s Fig. 8 style);
* ``torques.png``: applied drive torque against joint speed with the DC-motor envelope (all traced episodes),
  and over time for the figure scenario with the effort limit;
* ``foot_contacts.png``: the figure scenario's stance pattern per backend;
* ``gait.png``: the gait (:mod:`.gait_analysis`) of every measured episode per backend: each foot's phase offset
  after LF on the circle (the task's gait's offsets marked) and the share of each gait class;
* the sim-to-sim gaps (``summary.md`` tables, ``summary.json["gaps"]``): the figure episode's trajectories
  (base height, yaw, joints, planar velocity, RMS over the time both robots stand) between every pair of
  backends and the training simulator, and the gate measurements of every scenario side by side;
* ``videos/<backend>_<scenario>.mp4`` with ``--video`` (MuJoCo's offscreen renderer, :mod:`.render`).
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np

from .gates import GATES, SCENARIO_GATES

VIDEO_STRIDE = 4  # policy steps per video frame
TRAJECTORY_GAPS = {"base_height_mm": "base height RMS (mm)", "yaw_deg": "yaw RMS (deg)",
                   "joint_mrad": "joint angle RMS (mrad)", "planar_velocity": "planar velocity RMS (m/s)"}


def _save(fig, path: str) -> str:
    """Lay out, write (PNG, 100 dpi) and close ``fig``; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _plt().close(fig)
    return path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _yaw(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q[:, 3], q[:, 4], q[:, 5], q[:, 6]
    return np.unwrap(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def trajectory_gap(a: dict, b: dict) -> dict[str, float]:
    """RMS differences of two traces of the same episode over the steps where both robots stand."""
    T = min(len(a["time"]), len(b["time"]))
    both = np.asarray(a["alive"][:T]) & np.asarray(b["alive"][:T])
    if not both.any():
        return {k: float("nan") for k in TRAJECTORY_GAPS} | {"seconds": 0.0}

    def rms(x):
        return float(np.sqrt(np.mean(np.square(x[:T][both]))))

    return {"base_height_mm": 1e3 * rms(a["base_pos"][:T, 2] - b["base_pos"][:T, 2]),
            "yaw_deg": np.degrees(rms(_yaw(a["q"][:T]) - _yaw(b["q"][:T]))),
            "joint_mrad": 1e3 * rms(a["joint_pos"][:T] - b["joint_pos"][:T]),
            "planar_velocity": rms(np.linalg.norm(a["lin_vel_b"][:T, :2] - b["lin_vel_b"][:T, :2], axis=1)),
            "seconds": float(both.sum() * (a["time"][1] - a["time"][0]) if T > 1 else 0.0)}


def _figure_traces(result, scenario: str) -> dict[str, dict]:
    traces = {}
    if result.reference is not None and scenario in result.reference.traces:
        traces[result.reference.name] = result.reference.traces[scenario]
    for name, run in result.runs.items():
        if scenario in run.traces:
            traces[name] = run.traces[scenario]
    return traces


def velocity_figure(traces: dict[str, dict], title: str, path: str) -> str:
    plt = _plt()
    fig, axes = plt.subplots(3, len(traces), figsize=(5.5 * len(traces), 7.5), sharex=True, squeeze=False)
    for col, (name, tr) in enumerate(traces.items()):
        t = tr["time"]
        for row, (label, cmd, meas) in enumerate((("v_x (m/s)", tr["command"][:, 0], tr["lin_vel_b"][:, 0]),
                                                 ("v_y (m/s)", tr["command"][:, 1], tr["lin_vel_b"][:, 1]),
                                                 ("w_z (rad/s)", tr["command"][:, 2], tr["ang_vel_b"][:, 2]))):
            ax = axes[row, col]
            ax.plot(t, cmd, "k--", lw=1.2, label="command")
            ax.plot(t, meas, lw=1.0, label="measured")
            fell = ~np.asarray(tr["alive"])
            if fell.any():
                ax.axvline(t[np.argmax(fell)], color="r", lw=1, label="fall")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_title(name)
                ax.legend(loc="upper right", fontsize=8)
        axes[-1, col].set_xlabel("time (s)")
    fig.suptitle(title)
    return _save(fig, path)


def joint_figure(traces: dict[str, dict], joint_names: list[str], title: str, path: str) -> str:
    """Joint angles (Isaac Lab order in the traces) on a legs x joint-types grid."""
    plt = _plt()
    legs = sorted({n.split("_")[0] for n in joint_names}, key=lambda s: ("LF", "RF", "LH", "RH").index(s)
                  if s in ("LF", "RF", "LH", "RH") else 9)
    kinds = list(dict.fromkeys(n.split("_", 1)[1] for n in joint_names))
    fig, axes = plt.subplots(len(legs), len(kinds), figsize=(4.5 * len(kinds), 2.4 * len(legs)), sharex=True,
                             squeeze=False)
    for j, name in enumerate(joint_names):
        leg, kind = name.split("_")[0], name.split("_", 1)[1]
        ax = axes[legs.index(leg), kinds.index(kind)]
        for k, (backend, tr) in enumerate(traces.items()):
            style = dict(color="k", lw=1.6, ls="--") if k == 0 else dict(lw=1.0)
            ax.plot(tr["time"], tr["joint_pos"][:, j], label=backend, **style)
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    for ax in axes[:, 0]:
        ax.set_ylabel("angle (rad)")
    fig.suptitle(title)
    return _save(fig, path)


def torque_figure(result, actuator, figure_scenario: str, path: str) -> str:
    plt = _plt()
    runs = list(result.runs.values())
    fig, axes = plt.subplots(2, len(runs), figsize=(5.5 * len(runs), 8), squeeze=False)
    v, E = actuator.velocity_limit, actuator.effort_limit
    speed = np.linspace(-1.3 * v, 1.3 * v, 200)
    lo, hi = actuator.torque_bounds(speed)
    for col, run in enumerate(runs):
        ax = axes[0, col]
        for scenario, tr in run.traces.items():
            alive = np.asarray(tr["alive"])
            ax.scatter(tr["joint_vel"][alive].ravel(), tr["joint_torque"][alive].ravel(), s=1, alpha=0.3)
        ax.plot(speed, hi, "r-", lw=1.2, label="DC-motor envelope")
        ax.plot(speed, lo, "r-", lw=1.2)
        ax.set_xlabel("joint speed (rad/s)")
        ax.set_ylabel("drive torque (N m)")
        ax.set_title(f"{run.name}: traced episodes (step-mean torque vs end-of-step speed)", fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
        ax.grid(alpha=0.3)
        ax = axes[1, col]
        tr = run.traces.get(figure_scenario)
        if tr is not None:
            ax.plot(tr["time"], tr["joint_torque"], lw=0.7)
        ax.axhline(E, color="r", lw=1)
        ax.axhline(-E, color="r", lw=1)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("drive torque (N m)")
        ax.set_title(f"{run.name}: {figure_scenario}, 12 joints, +-effort limit")
        ax.grid(alpha=0.3)
    return _save(fig, path)


def contact_figure(traces: dict[str, dict], foot_names: list[str], title: str, path: str) -> str:
    plt = _plt()
    fig, axes = plt.subplots(len(traces), 1, figsize=(11, 1.3 + 1.1 * len(traces)), sharex=True, squeeze=False)
    for ax, (name, tr) in zip(axes[:, 0], traces.items()):
        t = tr["time"]
        for f in range(len(foot_names)):
            ax.fill_between(t, f - 0.4, f + 0.4, where=tr["stance"][:, f], step="mid", color=f"C{f}")
        ax.set_yticks(range(len(foot_names)), foot_names)
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("time (s)")
    fig.suptitle(title)
    return _save(fig, path)


def gait_figure(result, expected_offsets: dict | None, title: str, path: str) -> str | None:
    """Per backend: every measured episode's phase offsets of RF, LH, RH after LF on the unit circle (the task's
    gait's offsets as crosses) and the share of each gait class over all scenarios; None if nothing was measured."""
    from .gait_analysis import CLASSES, LEGS

    runs = {n: r for n, r in result.runs.items() if any(r.gait_episodes.values())}
    if not runs:
        return None
    plt = _plt()
    fig = plt.figure(figsize=(5.0 * len(runs), 8.5))
    for col, (name, run) in enumerate(runs.items()):
        episodes = [e for eps in run.gait_episodes.values() for e in eps]
        ax = fig.add_subplot(2, len(runs), col + 1, projection="polar")
        for f, leg in enumerate(LEGS[1:], start=1):
            phases = np.array([e["phase_offsets"][f] for e in episodes if e["phase_offsets"][f] is not None])
            radius = 0.55 + 0.15 * f
            ax.scatter(2 * np.pi * phases, np.full(len(phases), radius), s=12, alpha=0.5, color=f"C{f}", label=leg)
            if expected_offsets is not None:
                ax.scatter([2 * np.pi * (expected_offsets[leg] - expected_offsets["LF"])], [radius], marker="x",
                           s=90, color="k")
        ax.scatter([0.0], [0.55], s=30, color="C0", label="LF (reference)")
        ax.set_ylim(0, 1.1)
        ax.set_yticks([])
        ax.set_xticks(np.linspace(0, 2 * np.pi, 4, endpoint=False), ["0", "0.25", "0.5", "0.75"])
        ax.set_title(f"{name}: phase offsets after LF (cycles)\nx: the task's gait", fontsize=9)
        ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(-0.15, -0.15))
        ax = fig.add_subplot(2, len(runs), len(runs) + col + 1)
        counts = [sum(e["gait"] == c for e in episodes) for c in CLASSES]
        ax.bar(range(len(CLASSES)), np.array(counts) / max(1, len(episodes)))
        ax.set_xticks(range(len(CLASSES)), CLASSES, rotation=45, fontsize=8)
        ax.set_ylabel("share of measured episodes")
        ax.set_ylim(0, 1)
        ax.set_title(f"{name}: {len(episodes)} episodes", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title)
    return _save(fig, path)


def _fmt(value: float) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.3g}"


def write_report(result, task, config, out_dir: str, video: bool = False, printer=print) -> dict:
    """Write the report of ``result`` (:class:`~.validation_run.ValidationResult`) to ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    robot = task.robot
    joint_names = [robot.joint_names[i] for i in task.to_isaaclab.tolist()]
    figure = config.figure_scenario.name
    plots, videos = [], []

    for scenario in config.scenarios:
        if scenario.plot:
            traces = _figure_traces(result, scenario.name) if scenario.name == figure else \
                {n: r.traces[scenario.name] for n, r in result.runs.items() if scenario.name in r.traces}
            if traces:
                plots.append(velocity_figure(traces, f"{scenario.name}: commanded vs measured base velocity "
                                             f"({scenario.description})",
                                             os.path.join(out_dir, f"velocity_{scenario.name}.png")))
    fig_traces = _figure_traces(result, figure)
    if fig_traces:
        plots.append(joint_figure(fig_traces, joint_names, f"{figure}: joint angles, training simulator "
                                  f"(dashed) vs validators, same commands",
                                  os.path.join(out_dir, "joint_trajectories.png")))
        plots.append(contact_figure(fig_traces, [f.name for f in robot.feet],
                                    f"{figure}: stance (foot bottom within {config.settings.stance_height * 100:.1f}"
                                    " cm of the ground)", os.path.join(out_dir, "foot_contacts.png")))
    if result.runs:
        plots.append(torque_figure(result, robot.actuator, figure, os.path.join(out_dir, "torques.png")))
        gait = getattr(task.env_cfg, "gait", None)
        path = gait_figure(result, None if gait is None else gait.phase_offsets,
                           f"gait over the steps commanded faster than {config.settings.gait_min_speed:g} m/s "
                           f"(stance: foot within {config.settings.stance_height * 100:.1f} cm of the ground)",
                           os.path.join(out_dir, "gait.png"))
        if path is not None:
            plots.append(path)

    gaps = {"trajectory": {}, "metrics": {}}
    for a, b in itertools.combinations(fig_traces, 2):
        gaps["trajectory"][f"{a} vs {b}"] = trajectory_gap(fig_traces[a], fig_traces[b])
    for scenario in config.scenarios:
        values = {n: r.metrics.get(scenario.name) for n, r in result.runs.items() if scenario.name in r.metrics}
        if len(values) < 1:
            continue
        gaps["metrics"][scenario.name] = {
            g: {**{n: values[n][g] for n in values},
                "spread": float(np.nanmax([values[n][g] for n in values]) - np.nanmin([values[n][g] for n in values]))
                if all(np.isfinite(values[n][g]) for n in values) else float("nan")}
            for g in SCENARIO_GATES}

    if video:
        from .render import render_states, write_mp4
        from .terrain_scenarios import validation_terrain

        terrain = validation_terrain(config.scenarios, task.env_cfg, config.settings.terrain_seed)

        os.makedirs(os.path.join(out_dir, "videos"), exist_ok=True)
        for name, tr in fig_traces.items():
            try:
                # every 4th policy step (12.5 fps), no shadows: ~0.15 s a frame on a software renderer
                frames = render_states(robot, tr["q"][::VIDEO_STRIDE], shadows=False, terrain=terrain)
                videos.append(write_mp4(frames, os.path.join(out_dir, "videos", f"{name}_{figure}.mp4"),
                                        fps=1.0 / (VIDEO_STRIDE * task.policy_dt)))
            except RuntimeError as err:
                printer(f"[validate] no video: {err}")
                videos.append(f"failed: {err}")
                break

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, (float, np.floating)):
            return None if not np.isfinite(x) else float(x)
        return x

    summary = {
        "verdict": result.verdict, "task": result.task, "policy": result.policy, "config": result.config,
        "seconds": result.seconds,
        "failing": [g.to_dict() for g in result.failing],
        "backends": {n: {"seconds": r.seconds, "episodes": r.episodes, "env_steps": r.env_steps,
                         "fall_times_s": r.fall_times, "fall_commands": r.fall_commands,
                         "gaits": clean(r.gaits), "gait_episodes": r.gait_episodes,
                         "scenarios": {s: {"metrics": clean(m), "gates": [g.to_dict() for g in r.gates
                                                                           if g.scenario == s]}
                                       for s, m in r.metrics.items()}}
                     for n, r in result.runs.items()},
        "skipped": result.skipped,
        "export": result.export, "export_gates": [g.to_dict() for g in result.export_gates],
        "reference": None if result.reference is None else {"name": result.reference.name, "scenario": figure,
                                                            "seconds": result.reference.seconds},
        "gaps": clean(gaps), "plots": plots, "videos": videos,
        "gate_units": {g: GATES[g][0] for g in GATES},
    }
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(_markdown(result, config, summary, out_dir))
    result.report_dir = os.path.abspath(out_dir)
    result.report = summary
    return summary


def _markdown(result, config, summary: dict, out_dir: str) -> str:
    lines = [f"# Validation: **{result.verdict}**", "",
             f"- task: `{result.task}`", f"- policy: `{result.policy}`", f"- scenarios and gates: `{result.config}`",
             f"- backends: {', '.join(result.runs)}" + (f" (skipped: {', '.join(result.skipped)})"
                                                       if result.skipped else ""),
             f"- time: {result.seconds:.0f} s", ""]
    if result.failing:
        lines += ["## Failing gates", "", "| backend | scenario | gate | measured | threshold |",
                  "|---|---|---|---:|---:|"]
        lines += [f"| {g.backend} | {g.scenario} | {g.gate} | {_fmt(g.value)} {g.unit} | {g.threshold:.3g} {g.unit} |"
                  for g in result.failing]
        lines.append("")
    else:
        lines += ["Every gate passed.", ""]
    gates = list(SCENARIO_GATES)
    for name, run in result.runs.items():
        lines += [f"## {name} ({run.episodes} episodes, {run.seconds:.0f} s)", "",
                  "| scenario | " + " | ".join(gates) + " |", "|---|" + "---:|" * len(gates)]
        failed = {(g.scenario, g.gate) for g in run.gates if not g.passed}
        gated = {(g.scenario, g.gate) for g in run.gates}
        for scenario, metrics in run.metrics.items():
            cells = []
            for g in gates:
                mark = " ✗" if (scenario, g) in failed else ("" if (scenario, g) in gated else " (not gated)")
                cells.append(_fmt(metrics[g]) + mark)
            lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
        lines.append("")
        for scenario, times in run.fall_times.items():
            commands = run.fall_commands.get(scenario, [])
            falls = ", ".join(f"{t:.2f} s ({', '.join(f'{c:+.2f}' for c in cmd)})" for t, cmd in zip(times, commands))
            lines += [f"Falls in {scenario} (time, command vx, vy, wz at the fall): {falls}", ""]
    gait_rows = [(n, sc, g) for n, r in result.runs.items() for sc, g in r.gaits.items() if g["windows"]]
    if gait_rows:
        lines += ["## Gaits (episodes measured over their steps commanded faster than "
                  f"{config.settings.gait_min_speed:g} m/s)", "",
                  "| backend | scenario | episodes | classes | stride (Hz) | duty LF, RF, LH, RH "
                  "| offsets RF, LH, RH |",
                  "|---|---|---:|---|---:|---|---|"]
        for name, scenario, g in gait_rows:
            classes = ", ".join(f"{c} {v:.0%}" for c, v in sorted(g["share"].items(), key=lambda kv: -kv[1]) if v > 0)
            lines.append(f"| {name} | {scenario} | {g['windows']} | {classes} | {_fmt(g['stride_frequency'])} | "
                         + ", ".join(_fmt(v) for v in g["duty"]) + " | "
                         + ", ".join(_fmt(v) for v in g["phase_offsets"][1:]) + " |")
        expected = next((g.get("expected") for _, _, g in gait_rows if g.get("expected")), None)
        lines += ["", f"The task's gait: {expected or 'no class (not gated)'}.", ""]
    lines += ["Thresholds: " + ", ".join(f"{g} <= {config.gates[g]:g} {GATES[g][0]}".strip() for g in config.gates)
              + " (scenario overrides in the config).", ""]
    if result.export is not None:
        lines += ["## Export", "", ", ".join(f"{k}: max |difference| {v:.2e}" for k, v in result.export.items())
                  + f" (threshold {config.gates['export_mismatch']:g})", ""]
    else:
        lines += ["## Export", "", "not checked (no checkpoint and no sibling export to compare with)", ""]
    traj = summary["gaps"]["trajectory"]
    if traj:
        lines += [f"## Sim-to-sim gaps: {config.figure_scenario.name}, same commands", "",
                  "| pair | " + " | ".join(TRAJECTORY_GAPS.values()) + " | compared over (s) |",
                  "|---|" + "---:|" * (len(TRAJECTORY_GAPS) + 1)]
        for pair, g in traj.items():
            cells = " | ".join(_fmt(g[k]) for k in TRAJECTORY_GAPS)
            lines.append(f"| {pair} | {cells} | {_fmt(g['seconds'])} |")
        lines.append("")
    metrics = summary["gaps"]["metrics"]
    if metrics and len(result.runs) > 1:
        backends = list(result.runs)
        lines += ["## Sim-to-sim gaps: gate measurements", "",
                  "| scenario | gate | " + " | ".join(backends) + " | spread |",
                  "|---|---|" + "---:|" * (len(backends) + 1)]
        for scenario, per_gate in metrics.items():
            for g in ("lin_vel_error", "ang_vel_error", "fall_rate", "torque_rms", "foot_slip", "base_tilt"):
                row = per_gate[g]
                lines.append(f"| {scenario} | {g} | " + " | ".join(_fmt(row.get(b)) for b in backends)
                             + f" | {_fmt(row['spread'])} |")
        lines.append("")
    if summary["plots"]:
        lines += ["## Figures", ""] + [f"![{os.path.basename(p)}]({os.path.relpath(p, out_dir)})"
                                       for p in summary["plots"]] + [""]
    if summary["videos"]:
        lines += ["## Videos", ""] + [f"- {v if v.startswith('failed') else os.path.relpath(v, out_dir)}"
                                      for v in summary["videos"]] + [""]
    return "\n".join(lines)
