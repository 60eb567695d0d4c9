"""The papers' experiments, one command: train every run of each experiment to its budget, measure its checkpoints
closed loop as deployed, and assemble each experiment's table and figure from the measurement files.

Experiments (``--only`` picks; the order below is the order they run in):

* ``gradient_landscapes``: Schwarke et al.'s Fig. 3 (``scripts/experiments/gradient_landscapes.py``, no training).
* ``shac_vs_ppo``: the protocol: SHAC with the main job's recipe (two ranks of 128 envs, 1000 iterations within
  16.5 min) against rsl_rl's PPO with Isaac Lab's ANYmal-D settings (two ranks of 512 envs, 45 min), three seeds
  each; samples and training minutes at which each run's checkpoints first reach planar error 0.3, 0.2, 0.15 and
  0.12 m/s with at most 1 % falls, and PPO's over SHAC's at each threshold.
* ``contact_models``: Schwarke et al.'s Table 1 on the velocity task: the recipe trained with smoothed, hard and
  soft contact (``env.sim.contact.mode``), three seeds each, the same budget; every policy measured in our hard
  contact (every checkpoint) and MuJoCo (the last); and how each gait looks (their Fig. 7): the LF leg's joint
  angles of each contact model's first-seed policy walking at 0.5 m/s for 4 s in hard contact
  (``contact_models_joints.png``).
* ``contact_models_quadruped``: the same on ``DiffLoco-Quadruped-Forward`` (one process of 128 envs, 300
  iterations), each checkpoint measured in the task's own env (its return, forward speed, falls over 16 episodes of
  10 s) in our hard contact, the last in MuJoCo.
* ``kappa_sweep``: the recipe trained at contact sharpness kappa 30, 100, 300, 1000, 3000 1/m; the last checkpoint in
  hard contact and MuJoCo: the sim-to-sim gap per kappa.
* ``horizon_sweep``: SHAC with horizons 4 ... 128 policy steps at the main job's sample budget (8.2M samples,
  30 min at most) on ANYmal D and ANYmal C: the actor's gradient norm (mean, spread) over training, and the
  closed-loop tracking.
* ``aligned``: Song et al.'s aligned step (MuJoCo forward) with the smoothed and the simplified surrogate (two ranks
  of 64 envs, 20 min) against rsl_rl's PPO on the same MuJoCo env (45 min), three seeds each, measured in MuJoCo.

Everything lives under ``--root`` (``experiment_runs``: training folders, one measurement file per checkpoint, a
file per finished run): a command stopped midway continues where it was (each run resumes from its last
checkpoint; measured checkpoints are not measured again), and ``--report_only`` rebuilds the tables and figures from
the files without a simulator.

    # the smoke check: every experiment with 2-iteration runs of 4 envs, 2 short episodes per checkpoint (minutes)
    .venv/bin/python scripts/experiments/run_all.py --quick
    # one experiment at its full budget, tables into docs/data and figures into docs/figures
    .venv/bin/python scripts/experiments/run_all.py --only shac_vs_ppo --report_dir docs
    # the tables again from the measurement files
    .venv/bin/python scripts/experiments/run_all.py --only shac_vs_ppo --report_only --report_dir docs

Full budgets on a 2-core CPU (training, then about 1 min per checkpoint measured per core, ``--jobs 2``):
shac_vs_ppo 6 runs, ~3.2 h; contact_models 9 runs, ~2.7 h; contact_models_quadruped 9 runs, ~35 min; kappa_sweep
5 runs, ~1.5 h; horizon_sweep 12 runs,
~4.5 h; aligned 9 runs, ~4.3 h; gradient_landscapes ~5 min.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from diffloco_ext.validation.experiment_runs import (  # noqa: E402
    ExperimentRunner,
    MeasureCfg,
    RunSpec,
    group_reach,
    reach_ratio,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
MEASUREMENT = os.path.join(ROOT, "config", "validation", "anymal_d_random100.yaml")
THRESHOLDS = (0.3, 0.2, 0.15, 0.12)
SEEDS = (42, 7, 1)
TASK = "DiffLoco-Velocity-Flat-AnymalD"
ALIGNED = "DiffLoco-Velocity-Flat-AnymalD-Aligned"

#: The main job's SHAC (``scripts/main_job.py``): two ranks of the task's 128 envs, 1000 iterations, 16.5 min.
SHAC = dict(algo="shac", ranks=2, max_iterations=1000, max_minutes=16.5, measure_every=50)
#: rsl_rl's PPO with Isaac Lab's ANYmal-D settings (the task's PPO config), two ranks of 512 envs, 45 min.
PPO = dict(algo="ppo", ranks=2, num_envs=512, max_minutes=45.0, measure_every=50)


@dataclass
class Experiment:
    """One experiment: its question, its runs, how they are measured and what its table compares."""

    question: str
    runs: Callable[[], list[RunSpec]]
    backends: tuple[tuple[str, bool], ...] = (("hard", False),)  # (backend, last checkpoint only)
    ratio: tuple[str, str] | None = None  # (group, group): the second's samples and minutes over the first's
    curve: str = "lin_vel_error"  # the measured quantity plotted (and, for the tracking error, reached)
    extra: Callable[[ExperimentRunner, list[RunSpec]], dict] | None = None
    script: list[str] = field(default_factory=list)  # an experiment that is a script (no runs)


def _seeded(name: str, task: str, seeds=SEEDS, **kw) -> list[RunSpec]:
    return [RunSpec(f"{name.lower().replace(' ', '_').replace('+', '_')}-s{s}", name, task, seed=s, **kw)
            for s in seeds]


def _shac_vs_ppo() -> list[RunSpec]:
    return _seeded("SHAC", TASK, **SHAC) + _seeded("PPO", TASK, **PPO)


def _contact_models() -> list[RunSpec]:
    return [r for mode in ("smoothed", "hard", "soft")
            for r in _seeded(mode, TASK, **SHAC, overrides=(f"env.sim.contact.mode={mode}",))]


def _contact_models_quadruped() -> list[RunSpec]:
    return [r for mode in ("smoothed", "hard", "soft")
            for r in _seeded(f"quadruped {mode}", "DiffLoco-Quadruped-Forward", algo="shac", num_envs=128,
                             max_iterations=300, measure_every=50, overrides=(f"env.sim.contact.mode={mode}",))]


def _kappa_sweep() -> list[RunSpec]:
    return [RunSpec(f"kappa{k}-s42", f"kappa {k}", TASK, seed=42, **SHAC, overrides=(f"env.sim.contact.kappa={k}",))
            for k in (30, 100, 300, 1000, 3000)]


def _horizon_sweep() -> list[RunSpec]:
    budget = 1000 * 2 * 128 * 32  # the main job's samples
    return [RunSpec(f"{robot.lower()}-h{h}-s42", f"{robot} h {h}", f"DiffLoco-Velocity-Flat-{robot}", seed=42,
                    algo="shac", ranks=2, max_iterations=budget // (2 * 128 * h), max_minutes=30.0,
                    measure_every=max(1, 1600 // h), overrides=(f"agent.num_steps_per_env={h}",))
            for robot in ("AnymalD", "AnymalC") for h in (4, 8, 16, 32, 64, 128)]


def _aligned() -> list[RunSpec]:
    common = dict(algo="shac", ranks=2, num_envs=64, max_iterations=1000, max_minutes=20.0, measure_every=50)
    return (_seeded("MuJoCo+smoothed", ALIGNED, **common, overrides=("env.sim.engine_threads=1",))
            + _seeded("MuJoCo+simplified", ALIGNED, **common,
                      overrides=("env.sim.engine_threads=1", "env.sim.surrogate=simplified"))
            + _seeded("PPO on MuJoCo", ALIGNED, **PPO, overrides=("env.sim.engine_threads=1",)))


def _gradient_norms(runner: ExperimentRunner, runs: list[RunSpec]) -> dict:
    """Per run: the actor's gradient norm (before clipping) over training: mean, standard deviation, and the
    standard deviation of its log (the spread independent of its size)."""
    from diffloco_ext.learning.run_history import read_run

    out = {}
    for spec in runs:
        folder = runner.newest(spec)
        series = read_run(folder).get("Policy/actor_grad_norm") if folder else None
        if series is None or not len(series):
            continue
        g = series[:, 1]
        out[spec.name] = {"group": spec.group, "mean": float(g.mean()), "std": float(g.std()),
                          "log_std": float(np.log(np.maximum(g, 1e-12)).std()), "iterations": int(len(g))}
    return out


EXPERIMENTS: dict[str, Experiment] = {
    "gradient_landscapes": Experiment(
        "Do smoothed-contact gradients predict the objective's change through contact events (paper A, Fig. 3)?",
        list, script=["gradient_landscapes.py"]),
    "shac_vs_ppo": Experiment(
        "How many samples and how much training time do SHAC and PPO need to reach each tracking level?",
        _shac_vs_ppo, ratio=("SHAC", "PPO")),
    "contact_models": Experiment(
        "Which contact model trains a policy that transfers to hard contact and MuJoCo (paper A, Table 1)?",
        _contact_models, backends=(("hard", False), ("mujoco", True))),
    "contact_models_quadruped": Experiment(
        "Does the contact model SHAC trains with change the quadruped's gait and its transfer (paper A, Table 1)?",
        _contact_models_quadruped, backends=(("task-hard", False), ("task-mujoco", True)), curve="forward_speed"),
    "kappa_sweep": Experiment(
        "Are training and transfer insensitive to the smoothing level kappa?",
        _kappa_sweep, backends=(("hard", False), ("mujoco", True))),
    "horizon_sweep": Experiment(
        "How does SHAC's horizon trade the gradient's size and variance against tracking (paper A, Fig. 5)?",
        _horizon_sweep, extra=_gradient_norms),
    "aligned": Experiment(
        "Does SHAC on Song et al.'s aligned MuJoCo step learn with fewer samples than PPO on the same env?",
        _aligned, backends=(("mujoco", False),), ratio=("MuJoCo+smoothed", "PPO on MuJoCo")),
}


def quick(spec: RunSpec) -> RunSpec:
    """The smoke version of a run: one process of 4 envs (2 for the MuJoCo env), 2 iterations of 4 steps (a swept
    horizon kept if shorter), every checkpoint measured."""
    overrides = [o for o in spec.overrides if not o.startswith("agent.num_steps_per_env=")]
    horizon = min([4] + [int(o.split("=")[1]) for o in spec.overrides if o.startswith("agent.num_steps_per_env=")])
    return replace(spec, ranks=1, num_envs=2 if spec.task == ALIGNED else 4, max_iterations=2, max_minutes=None,
                   measure_every=1, overrides=(*overrides, f"agent.num_steps_per_env={horizon}"))


def quick_runs(runs: list[RunSpec]) -> list[RunSpec]:
    """One seed per group, the two first groups' values of a sweep (e.g. two horizons), each :func:`quick`."""
    groups = list(dict.fromkeys(r.group for r in runs))[:2] if len({r.group for r in runs}) > 3 else None
    first = {}
    for r in runs:
        if (groups is None or r.group in groups) and r.group not in first:
            first[r.group] = quick(r)
    return list(first.values())


def _tiny_config(root: str) -> str:
    path = os.path.join(root, "quick_measurement.yaml")
    os.makedirs(root, exist_ok=True)
    with open(path, "w") as f:
        f.write("extends: anymal_d\nsettings: {seeds: [0], warmup_s: 0.0}\nscenarios:\n"
                "  - name: random_commands\n    episodes: 2\n    duration_s: 0.5\n")
    return path


def report(name: str, exp: Experiment, runners: dict[str, ExperimentRunner], runs: list[RunSpec]) -> dict:
    """The experiment's table (from the measurement files): per backend, each group's first reach of the thresholds
    and its runs' last measured checkpoint; the ratio of two groups; the experiment's extra columns."""
    out = {"experiment": name, "question": exp.question, "curve": exp.curve, "runs": {}, "backends": {}}
    for spec in runs:
        status = runners[exp.backends[0][0]].status(spec)
        out["runs"][spec.name] = {"group": spec.group, "task": spec.task, "algo": spec.algo, "seed": spec.seed,
                                  "overrides": list(spec.overrides), "iterations": status.iterations,
                                  "samples": status.samples, "training_minutes": status.training_minutes,
                                  "finished": status.finished}
    for backend, _ in exp.backends:
        rows = {spec.name: (spec.group, runners[backend].rows(spec)) for spec in runs}
        table = {"last": {n: r[-1] for n, (_, r) in rows.items() if r}}
        if exp.curve == "lin_vel_error":
            table["reach"] = group_reach(rows, list(THRESHOLDS))
        if exp.ratio:
            table["ratio_samples"] = reach_ratio(table["reach"], *exp.ratio, key="samples")
            table["ratio_minutes"] = reach_ratio(table["reach"], *exp.ratio, key="training_minutes")
        out["backends"][backend] = table
    if exp.extra:
        out["extra"] = exp.extra(runners[exp.backends[0][0]], runs)
    return out


def print_report(rep: dict) -> None:
    print(f"\n## {rep['experiment']}: {rep['question']}")
    for backend, table in rep["backends"].items():
        keys = [k for k in ("lin_vel_error", "ang_vel_error", "return", "forward_speed", "fall_rate", "action_rate")
                if any(k in row for row in table["last"].values())]
        print(f"\n{backend}: last measured checkpoint per run ({', '.join(keys)})")
        for run, row in table["last"].items():
            info = rep["runs"][run]
            values = "  ".join(f"{row.get(k, float('nan')):.3f}" for k in keys)
            print(f"  {run:24s} it {row['iteration']:5d}  {info['training_minutes']:5.1f} min  {values}")
        if "reach" not in table:
            continue
        print(f"{backend}: first checkpoint at planar <= t with <= 1 % falls: runs reached / median samples, minutes")
        for group, per in table["reach"].items():
            cells = []
            for t, e in per.items():
                cell = f"{t}: {e['reached']}/{e['runs']}"
                if e["samples"]:
                    cell += f" {e['samples']['median']:.3g} ({e['training_minutes']['median']:.1f} min)"
                cells.append(cell)
            print(f"  {group:20s} " + " | ".join(cells))
        for key in ("ratio_samples", "ratio_minutes"):
            if key in table:
                print(f"  {key}: " + ", ".join(f"{t}: {v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f})" if v else
                                               f"{t}: -" for t, v in table[key].items()))
    for run, e in rep.get("extra", {}).items():
        print(f"  {run:24s} actor grad norm mean {e['mean']:.3g}, std {e['std']:.3g}, log-std {e['log_std']:.2f}")


def plot(rep: dict, runners: dict[str, ExperimentRunner], runs: list[RunSpec], out: str) -> None:
    """Closed-loop planar error and falls of every measured checkpoint against samples and training minutes, in
    the first backend; one colour per group, one line per run."""
    backend = next(iter(rep["backends"]))
    groups = list(dict.fromkeys(s.group for s in runs))
    colors = {g: plt.cm.tab10(i % 10) for i, g in enumerate(groups)}
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col")
    for spec in runs:
        rows = runners[backend].rows(spec)
        if not rows:
            continue
        for col, key in enumerate(("samples", "training_minutes")):
            x = [r[key] for r in rows]
            label = spec.group if spec.seed == min(s.seed for s in runs if s.group == spec.group) else None
            axes[0, col].plot(x, [r[rep["curve"]] for r in rows], "o-", ms=2, color=colors[spec.group], label=label)
            axes[1, col].plot(x, [r["fall_rate"] for r in rows], "o-", ms=2, color=colors[spec.group])
    if rep["curve"] == "lin_vel_error":
        for t in THRESHOLDS:
            for ax in axes[0]:
                ax.axhline(t, color="0.8", lw=0.6, zorder=0)
    axes[0, 0].set_ylabel({"lin_vel_error": "planar error (m/s)", "forward_speed": "forward speed (m/s)"}.get(
        rep["curve"], rep["curve"]))
    axes[1, 0].set_ylabel("fall rate")
    axes[1, 0].set_xlabel("samples")
    axes[1, 1].set_xlabel("training minutes")
    axes[0, 0].legend(fontsize=8)
    what = "100 uniform-command episodes" if rep["curve"] == "lin_vel_error" else "16 episodes in the task's env"
    fig.suptitle(f"{rep['experiment']}: every measured checkpoint, {backend}, {what}")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _horizon(spec: RunSpec) -> int:
    """The SHAC horizon (policy steps) a run's overrides set."""
    return int(next(o for o in spec.overrides if o.startswith("agent.num_steps_per_env=")).split("=")[1])


def plot_gradient_norms(rep: dict, runs: list[RunSpec], out: str) -> None:
    """The horizon sweep's gradient figure: per robot, the actor's gradient norm over training (mean, with its
    standard deviation) against the horizon (policy steps), log-log."""
    norms = rep.get("extra", {})
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    robots = list(dict.fromkeys(s.task for s in runs))
    for robot in robots:
        pts = sorted(((_horizon(s), norms[s.name]) for s in runs if s.task == robot and s.name in norms),
                     key=lambda p: p[0])
        if not pts:
            continue
        h = [p[0] for p in pts]
        label = robot.replace("DiffLoco-Velocity-Flat-", "")
        axes[0].errorbar(h, [p[1]["mean"] for p in pts], yerr=[p[1]["std"] for p in pts], marker="o", capsize=3,
                         label=label)
        axes[1].plot(h, [p[1]["log_std"] for p in pts], "o-", label=label)
    for ax, ylabel in zip(axes, ("actor gradient norm (mean +- std over iterations)", "std of log gradient norm")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("horizon (policy steps)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_joint_traces(runners: dict[str, ExperimentRunner], runs: list[RunSpec], out: str) -> None:
    """Each group's first run's last checkpoint walking forward at 0.5 m/s for 4 s in hard contact: the LF leg's
    joint angles (HAA, HFE, KFE; rad) over time, one column per joint, one line per group."""
    import tempfile

    from diffloco_ext.validation.closed_loop import TaskInterface
    from diffloco_ext.validation.policy_io import load_checkpoint
    from diffloco_ext.validation.scenarios import load_config
    from diffloco_ext.validation.validation_run import run_validation

    first = {}
    for spec in runs:
        rows = next(iter(runners.values())).rows(spec)
        if spec.group not in first and rows:
            first[spec.group] = (spec, rows[-1]["checkpoint"])
    if not first:
        return
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharex=True)
    with tempfile.TemporaryDirectory() as tmp:
        config_path = os.path.join(tmp, "walk.yaml")
        with open(config_path, "w") as f:
            f.write(f"extends: {os.path.join(ROOT, 'config', 'validation', 'anymal_d.yaml')}\n"
                    "inherit_scenarios: false\nsettings: {seeds: [0], warmup_s: 0.0}\nscenarios:\n"
                    "  - {name: walk, episodes: 1, initial_yaw: 0.0, commands: {schedule: [[4.0, 0.5, 0.0, 0.0]]}}\n")
        for group, (spec, checkpoint) in first.items():
            task = TaskInterface.from_task(spec.task)
            policy = load_checkpoint(checkpoint, spec.task, os.path.join(tmp, spec.name), task.num_obs,
                                     task.num_actions)
            result = run_validation(task, policy, ["hard"], load_config(config_path), reference=False,
                                    printer=lambda *_: None)
            trace = result.runs["hard"].traces["walk"]
            names = list(np.asarray(task.robot.joint_names)[task.to_isaaclab.numpy()])
            for ax, joint in zip(axes, ("LF_HAA", "LF_HFE", "LF_KFE")):
                ax.plot(trace["time"], trace["joint_pos"][:, names.index(joint)], label=group)
                ax.set_title(joint)
    for ax in axes:
        ax.set_xlabel("time (s)")
    axes[0].set_ylabel("joint angle (rad)")
    axes[0].legend(fontsize=8)
    fig.suptitle("walking at 0.5 m/s in hard contact, each contact model's policy (first seed, last checkpoint)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def run_experiment(name: str, args) -> dict | None:
    exp = EXPERIMENTS[name]
    root = os.path.join(args.root, name)
    data_dir = os.path.join(args.report_dir, "data") if args.report_dir else os.path.join(root, "report")
    fig_dir = os.path.join(args.report_dir, "figures") if args.report_dir else os.path.join(root, "report")
    if exp.script:
        cmd = [sys.executable, os.path.join(ROOT, "scripts", "experiments", *exp.script),
               "--out", os.path.join(data_dir, f"{name}.json"), "--figure", os.path.join(fig_dir, f"{name}.png")]
        if args.quick:
            cmd.append("--quick")
        if not args.report_only:
            os.makedirs(data_dir, exist_ok=True)
            subprocess.run(cmd, check=True, cwd=ROOT)
        return None
    runs = exp.runs()
    config = MEASUREMENT
    if args.quick:
        runs, config = quick_runs(runs), _tiny_config(root)
    episodes, seconds = (2, 0.5) if args.quick else (None, 10.0)
    runners = {b: ExperimentRunner(root, MeasureCfg(config, backend=b, jobs=args.jobs,
                                                    episodes=episodes if b.startswith("task-") else None,
                                                    seconds=seconds)) for b, _ in exp.backends}
    if not args.report_only:
        first = runners[exp.backends[0][0]]
        for spec in runs:
            first.train(spec)
            for backend, last_only in exp.backends:
                runners[backend].measure(spec, last_only=last_only)
    rep = report(name, exp, runners, runs)
    print_report(rep)
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, f"{name}.json"), "w") as f:
        json.dump(rep, f, indent=1)
    if any(runners[exp.backends[0][0]].rows(s) for s in runs):
        plot(rep, runners, runs, os.path.join(fig_dir, f"{name}.png"))
    if name == "contact_models":
        plot_joint_traces(runners, runs, os.path.join(fig_dir, f"{name}_joints.png"))
    if exp.extra is _gradient_norms and rep.get("extra"):
        plot_gradient_norms(rep, runs, os.path.join(fig_dir, f"{name}_gradients.png"))
    return rep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(EXPERIMENTS), help="these experiments (default: all)")
    parser.add_argument("--quick", action="store_true", help="the smoke check: tiny runs, tiny measurements")
    parser.add_argument("--root", default=None, help="where runs and measurements live (default: "
                        "logs/experiments, logs/experiments_quick with --quick)")
    parser.add_argument("--report_dir", default=None, help="write <dir>/data/<experiment>.json and "
                        "<dir>/figures/<experiment>.png (e.g. docs; default: <root>/<experiment>/report)")
    parser.add_argument("--report_only", action="store_true", help="assemble the tables from the measurement files")
    parser.add_argument("--jobs", type=int, default=2, help="processes measuring checkpoints (one core each)")
    args = parser.parse_args(argv)
    args.root = os.path.abspath(args.root or os.path.join(ROOT, "logs", "experiments_quick" if args.quick
                                                          else "experiments"))
    for name in args.only or list(EXPERIMENTS):
        print(f"[run_all] {name}: {EXPERIMENTS[name].question}", flush=True)
        run_experiment(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
