"""Which gait does each gait's policy walk, and how well does it track? (the gaits of ``docs/results.md``)

For each ``scripts/main_job.py`` run folder given (one per gait and interface: ``--task
DiffLoco-Velocity-Flat-AnymalD[-Pace|-Bound|-Gallop][-Clock]``), from its ``main_job_summary.json``: the task, the
training time, and the tracking measurement (100 episodes of uniform random commands, 20 s, in our hard contact and
MuJoCo): planar and yaw-rate errors, falls, and the gait of every episode over its steps commanded faster than 0.3
m/s (:mod:`diffloco_ext.validation.gait_analysis`): the share of each class, the share walking the task's gait, the
stride frequency and duty factors. Then the exported policy walks forward in MuJoCo
(``config/validation/anymal_d_gait_patterns.yaml``: 0.5 m/s, then 1.0 m/s) for the contact-pattern figure: one row
per gait, the stance of each foot over the last 2 s at each speed, and the phase offsets of the measured episodes on
the circle.

    .venv/bin/python scripts/experiments/gaits.py --runs logs/shac/anymal_d_flat/<run> \\
        logs/shac/anymal_d_flat_pace/<run> logs/shac/anymal_d_flat_bound/<run> logs/shac/anymal_d_flat_gallop/<run> \\
        --out docs/data/gaits.json --figure docs/figures/gaits.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from diffloco_ext.validation.closed_loop import TaskInterface
from diffloco_ext.validation.gait_analysis import CLASSES, LEGS
from diffloco_ext.validation.policy_io import load_policy_file
from diffloco_ext.validation.scenarios import CONFIG_DIR, load_config
from diffloco_ext.validation.validation_run import run_validation, task_gait

PATTERN_CONFIG = str(CONFIG_DIR / "anymal_d_gait_patterns.yaml")
#: The validators of the tracking measurement, by their names in the main job's summary.
VALIDATORS = ("diffloco hard contact", "MuJoCo")


def read_run(run: str) -> dict:
    """The task, policy and measurements of one main-job run folder."""
    path = os.path.join(run, "main_job_summary.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{run} has no main_job_summary.json: not a finished scripts/main_job.py run")
    with open(path) as f:
        summary = json.load(f)
    out = {"run": os.path.abspath(run), "task": summary["task"], "policy": summary["exported"][0],
           "train_minutes": summary["train_seconds"] / 60.0 if summary.get("train_seconds") else None,
           "iterations": summary["iterations"], "validators": {}}
    for name in VALIDATORS:
        r = summary.get("targets", {}).get(name)
        if r is None:
            continue
        gait = r.get("gait") or {}
        out["validators"][name] = {
            "lin_vel_xy_error": r["lin_vel_xy_error"], "ang_vel_z_error": r["ang_vel_z_error"], "falls": r["falls"],
            "episodes": r["episodes"], "gait_episodes": gait.get("windows"), "share": gait.get("share"),
            "share_expected": gait.get("share_expected"), "stride_frequency": gait.get("stride_frequency"),
            "duty": gait.get("duty"), "phase_offsets": gait.get("phase_offsets")}
    return out


def walk_patterns(entry: dict, config_path: str) -> dict:
    """The exported policy of ``entry`` on the pattern scenario in MuJoCo: its trace (stance, time, command)."""
    task = TaskInterface.from_task(entry["task"])
    policy = load_policy_file(entry["policy"], task.num_obs, task.num_actions)
    config = load_config(config_path)
    result = run_validation(task, policy, ["mujoco"], config, None, reference=False, printer=lambda *a: None)
    run = result.runs["mujoco"]
    name = config.scenarios[0].name
    trace = run.traces[name]
    return {"expected": task_gait(task), "time": trace["time"], "stance": trace["stance"], "command": trace["command"],
            "alive": trace["alive"], "gait": run.gaits.get(name, {}), "foot_names": [f.name for f in task.robot.feet]}


def figure(entries: list[dict], patterns: list[dict], path: str, window_s: float = 2.0) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(15, 2.6 * len(entries)))
    for row, (entry, pat) in enumerate(zip(entries, patterns)):
        t, stance, cmd = pat["time"], np.asarray(pat["stance"]), np.asarray(pat["command"])
        order = [next(i for i, n in enumerate(pat["foot_names"]) if n[:2] == leg) for leg in LEGS]
        speeds = sorted({round(float(v), 2) for v in cmd[:, 0] if v > 0.05})
        for col, speed in enumerate(speeds[:2]):
            ax = fig.add_subplot(len(entries), 3, 3 * row + col + 1)
            at = np.flatnonzero(np.isclose(cmd[:, 0], speed))
            end = t[at[-1]]
            keep = (t > end - window_s) & (t <= end)
            for f, i in enumerate(order):
                ax.fill_between(t[keep], f - 0.4, f + 0.4, where=stance[keep, i], step="mid", color=f"C{f}")
            ax.set_yticks(range(len(LEGS)), LEGS)
            ax.set_xlabel("time (s)")
            interface = "gait clock" if entry["task"].endswith("-Clock") else "48 obs"
            ax.set_title(f"{entry['gait_name']} ({interface}): stance in MuJoCo at {speed:g} m/s", fontsize=9)
        ax = fig.add_subplot(len(entries), 3, 3 * row + 3, projection="polar")
        offsets = entry["validators"].get("MuJoCo", {}).get("episode_offsets") or []
        for f, leg in enumerate(LEGS[1:], start=1):
            phases = np.array([o[f] for o in offsets if o[f] is not None])
            ax.scatter(2 * np.pi * phases, np.full(len(phases), 0.55 + 0.15 * f), s=10, alpha=0.5, color=f"C{f}",
                       label=leg)
        ax.set_ylim(0, 1.1)
        ax.set_yticks([])
        ax.set_xticks(np.linspace(0, 2 * np.pi, 4, endpoint=False), ["0", "0.25", "0.5", "0.75"])
        ax.set_title("MuJoCo, 100 episodes: offsets after LF", fontsize=9)
        ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(-0.2, -0.2))
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def seed_of(run: str):
    """The seed the run trained with (its ``params/env.yaml``), or None."""
    from diffloco_ext.learning.checkpoint import read_params_yaml

    path = os.path.join(run, "params", "env.yaml")
    return read_params_yaml(path).get("seed") if os.path.isfile(path) else None


def expected_gait(task: str) -> str | None:
    """The gait class of the task's foot-height reference."""
    from diffloco_ext.tasks import registry
    from diffloco_ext.validation.gait_analysis import classify_offsets

    name, _ = classify_offsets(registry.load_cfg(task).gait.phase_offsets)
    return None if name == "irregular" else name


def episode_offsets(run: str, validator: str) -> list:
    """Each measured episode's phase offsets in the tracking measurement's report (``validation/random100``)."""
    backend = {"diffloco hard contact": "hard", "MuJoCo": "mujoco"}[validator]
    path = os.path.join(run, "validation", "random100", "summary.json")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        report = json.load(f)
    episodes = report["backends"].get(backend, {}).get("gait_episodes", {}).get("random_commands", [])
    return [e["phase_offsets"] for e in episodes]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="scripts/main_job.py run folders, one per gait")
    parser.add_argument("--patterns", default=PATTERN_CONFIG, help="the scenario file of the contact patterns")
    parser.add_argument("--out", default=None, help="write the measurements as JSON")
    parser.add_argument("--figure", default=None, help="write the contact-pattern figure (PNG)")
    parser.add_argument("--more_runs", nargs="*", default=[], help="more run folders (e.g. other seeds) for the "
                        "table and the JSON, not the figure")
    args = parser.parse_args(argv)
    entries, patterns = [], []
    for k, run in enumerate([*args.runs, *args.more_runs]):
        entry = read_run(run)
        for name in entry["validators"]:
            entry["validators"][name]["episode_offsets"] = episode_offsets(run, name)
        entry["seed"] = seed_of(run)
        if k < len(args.runs):  # the figure's runs: their forward walk too
            pattern = walk_patterns(entry, args.patterns)
            entry["gait_name"] = pattern["expected"] or "custom"
            entry["forward_walk"] = {k: pattern["gait"].get(k) for k in ("share", "stride_frequency", "duty",
                                                                          "phase_offsets")}
            patterns.append(pattern)
        else:
            entry["gait_name"] = expected_gait(entry["task"]) or "custom"
        entries.append(entry)
    print("| gait | task | seed | training (min) | validator | planar error (m/s) | yaw error (rad/s) | falls | "
          "moving episodes | own gait | other classes | stride (Hz) | duty (mean) |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for e in entries:
        for name, v in e["validators"].items():
            share = v["share"] or {}
            others = ", ".join(f"{c} {share[c]:.0%}" for c in CLASSES if share.get(c) and c != e["gait_name"])
            own = v["share_expected"]
            duty = np.nanmean([d for d in (v["duty"] or []) if d is not None]) if v["duty"] else float("nan")
            print(f"| {e['gait_name']} | `{e['task']}` | {e['seed']} | {e['train_minutes'] or float('nan'):.1f} | "
                  f"{name} | "
                  f"{v['lin_vel_xy_error']:.3f} | {v['ang_vel_z_error']:.3f} | {v['falls']}/{v['episodes']} | "
                  f"{v['gait_episodes']} | {'n/a' if own is None else f'{own:.0%}'} | {others or '-'} | "
                  f"{v['stride_frequency'] or float('nan'):.2f} | {duty:.2f} |")
    out = {"runs": [{k: v for k, v in e.items()} for e in entries]}
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    if args.figure:
        print(f"figure: {figure(entries[:len(args.runs)], patterns, args.figure)}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
