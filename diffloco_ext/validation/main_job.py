"""The main job (``make train``): train the velocity task's recipe with SHAC, ship, export, validate, measure, plot.

1. **Train** ``DiffLoco-Velocity-Flat-AnymalD`` with SHAC from scratch, its registered configs (the recipe), seeded,
   on the recipe's fixed schedule of ``iterations`` (1000), stopping earlier at a checkpoint if the wall-clock budget
   ``train_minutes`` runs out (a slower machine), so that one seed gives the same run on any machine. One run on
   ``ranks`` data-parallel processes (two by default: one per core) through ``torchrun``; with ``runs`` > 1, runs of
   seeds ``seed``, ``seed + 1``, ... side by side (on a machine with ``runs x ranks`` cores). Logs and checkpoints in
   ``<log_root>/shac/anymal_d_flat/<timestamp>_main_job[_s<seed>]/``.
2. **Ship** (:mod:`.shipping`): the actor averaged over the checkpoints from ``select_from`` of the schedule on,
   measured closed-loop in hard contact, unless it chatters or does not track; else the checkpoint that falls least.
   **Export** it as deployed: ``exported/policy.pt`` (TorchScript) and ``exported/policy.onnx`` (observation normaliser
   inside, ``[B, 48] -> [B, 12]``; 50 inputs with the gait clock), each checked against the torch policy.
3. **Validate** the exported policy (:mod:`.validation_run`: the scenarios and gates of
   ``config/validation/anymal_d.yaml``) in our hard contact and in MuJoCo, and **measure** it against the tracking
   targets (:mod:`.tracking_targets`: 100 uniform-command episodes in each).
4. **Plot** (``plots/``): learning curves, commanded against measured velocity, the gait; a video (``videos/``).

Prints where everything is, the measurement against its targets and the validation's verdict with what each failing
gate means; writes ``main_job_summary.json`` in the run folder.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import torch
from tensordict import TensorDict

from ..learning.checkpoint import get_checkpoint_path
from ..learning.export import check_exported_policy, export_policy_as_jit, export_policy_as_onnx
from ..learning.learning_curves import plot_learning_curves
from ..learning.runner import make_runner
from ..sim.contact import ContactParams
from ..tasks import registry
from ..tasks.cfg_override import apply_overrides, parse_overrides
from .closed_loop import TaskInterface
from .gates import ON_HARDWARE
from .motion_plots import gait_plot, velocity_plot
from .policy_io import load_policy_file
from .scenarios import default_config_path, load_config
from .shipping import run_seed, select
from .tracking_targets import (
    ROUGH_TARGET_CONFIG,
    TARGET_CONFIG,
    VALIDATORS,
    measure_rough_targets,
    measure_targets,
    random_commands_stats,
)
from .validation_run import run_validation

TASK = "DiffLoco-Velocity-Flat-AnymalD"
RUN_NAME = "main_job"


@dataclass
class MainJobCfg:
    """The main job's options (``scripts/main_job.py``'s flags of the same names). The training recipe itself is the
    task's registered config; ``overrides`` (``env.<field>=<value>``, ``agent.<field>=<value>``) change it."""

    task: str = TASK
    iterations: int | None = None
    """SHAC iterations of the learning-rate schedule; None: the recipe's (``agent.max_iterations``, 1000); 0: no fixed
    schedule, the count fitted to ``train_minutes`` (then a seed's run depends on the machine's speed)."""
    train_minutes: float = 16.5
    """Wall-clock budget of the training: it stops at the first checkpoint after which the next 50 iterations would
    end past it (the whole job, set-up included, fits 20 min on a 2-core CPU)."""
    num_envs: int | None = None
    """Envs per rank; None: the recipe's (128)."""
    runs: int = 1
    ranks: int = 2
    seed: int = 42
    episodes: int | None = None
    """Random-command validation episodes per seed (None: the scenario file's)."""
    target_episodes: int | None = None
    """Episodes of the tracking measurement (None: its file's, 100; 0: skipped)."""
    select_from: float = 0.8
    ship: str = "average"
    select_episodes: int = 100
    select_soft_episodes: int = 100
    log_root: str = "logs"
    no_video: bool = False
    from_run: list[str] | None = None
    strict: bool = False
    overrides: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.runs < 1 or self.ranks < 1:
            raise ValueError(f"runs and ranks must be at least 1 (got {self.runs} and {self.ranks})")
        if self.ship not in ("average", "best"):
            raise ValueError(f"ship must be 'average' or 'best', got {self.ship!r}")
        if not 0.0 <= self.select_from <= 1.0:
            raise ValueError(f"select_from is a fraction of the schedule (0 to 1), got {self.select_from}")


def log(line: str) -> None:
    print(f"[main_job] {line}", flush=True)


def sub(line: str) -> None:
    log(f"  {line}")


def run_seeds(cfg: MainJobCfg) -> list[int]:
    """The seeds of the job's training runs: ``seed``, ``seed + 1``, ... (``runs`` of them)."""
    return [cfg.seed + i for i in range(cfg.runs)]


def run_name(cfg: MainJobCfg, seed: int) -> str:
    """A run's folder suffix: ``main_job`` for a single run, ``main_job_s<seed>`` for one of several."""
    return RUN_NAME if cfg.runs == 1 else f"{RUN_NAME}_s{seed}"


def train_argv(cfg: MainJobCfg, seed: int) -> list[str]:
    """The arguments of :mod:`diffloco_ext.learning.train` (``scripts/train.py``) for the run of ``seed``."""
    return ["--task", cfg.task, "--algo", "shac", "--seed", str(seed), "--max_minutes", str(cfg.train_minutes),
            "--run_name", run_name(cfg, seed), "--log_root", cfg.log_root,
            *([] if cfg.num_envs is None else ["--num_envs", str(cfg.num_envs)]),
            *(["--max_iterations", str(cfg.iterations)] if cfg.iterations else []), *cfg.overrides]


#: The command that runs one training process (``-m diffloco_ext.learning.train`` by default); a test replaces it.
TRAIN_MODULE = ["-m", "diffloco_ext.learning.train"]


def _echo(stream, prefix: str) -> None:
    for line in iter(stream.readline, ""):
        print(f"{prefix}{line}", end="", flush=True)


def train(cfg: MainJobCfg) -> tuple[list[str], float]:
    """Train ``runs`` SHAC runs of seeds :func:`run_seeds` side by side (each on ``ranks`` data-parallel processes
    through torchrun, or one process), each with the same wall-clock guard. Returns ``(log_dirs, seconds)``: the
    folders of the runs that finished (a run that failed is reported and left out; none finishing is an error)."""
    seeds = run_seeds(cfg)
    log(f"1/4 training SHAC on {cfg.task}: {len(seeds)} run(s) (seeds {', '.join(map(str, seeds))}) x "
        f"{cfg.ranks} rank(s), {cfg.train_minutes:.1f} min budget")
    start = time.time()
    before = set(main_job_runs(cfg.log_root, cfg.task))
    procs = []
    for i, seed in enumerate(seeds):
        if cfg.ranks > 1:
            torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
            command = [torchrun, f"--nproc_per_node={cfg.ranks}", "--master_port",
                       str(29500 + (os.getpid() + 17 * i) % 400), *TRAIN_MODULE]
        else:
            command = [sys.executable, "-u", *TRAIN_MODULE]
        proc = subprocess.Popen([*command, *train_argv(cfg, seed)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        echo = threading.Thread(target=_echo, args=(proc.stdout, "" if len(seeds) == 1 else f"[seed {seed}] "),
                                daemon=True)
        echo.start()
        procs.append((seed, proc, echo))
    log_dirs = []
    for seed, proc, echo in procs:
        code = proc.wait()
        echo.join()
        made = [d for d in main_job_runs(cfg.log_root, cfg.task)
                if d not in before and d.endswith("_" + run_name(cfg, seed))]
        if code != 0 or not made:
            log(f"  WARNING: the run of seed {seed} failed (exit code {code}); going on without it")
            continue
        log_dirs.append(made[-1])
    if not log_dirs:
        raise RuntimeError("every training run failed: see the lines above")
    return log_dirs, time.time() - start


_RUN_FOLDER = re.compile(r".*_main_job(_s-?\d+)?")


def main_job_runs(log_root: str, task: str = TASK) -> list[str]:
    """The main job's run folders of ``task`` under ``log_root`` (in its SHAC experiment's folder), oldest first
    (their names start with the timestamp)."""
    root = os.path.join(log_root, "shac", registry.load_agent_cfg(task, "shac").experiment_name)
    if not os.path.isdir(root):
        return []
    return [os.path.abspath(os.path.join(root, d)) for d in sorted(os.listdir(root)) if _RUN_FOLDER.fullmatch(d)]


def latest_run(log_root: str, task: str = TASK) -> str:
    """The latest run folder of the main job of ``task`` under ``log_root``; of a job's several runs (started within
    a minute of each other), the shipped one, which holds ``main_job_summary.json``, once there is one."""
    runs = main_job_runs(log_root, task)
    if not runs:
        raise FileNotFoundError(f"no main job run under {log_root}")

    def started(d):
        return datetime.datetime.strptime(os.path.basename(d)[:19], "%Y-%m-%d_%H-%M-%S")

    job = [d for d in runs if (started(runs[-1]) - started(d)).total_seconds() <= 60]
    shipped = [d for d in job if os.path.isfile(os.path.join(d, "main_job_summary.json"))]
    return (shipped or job)[-1]


def load_run(cfg: MainJobCfg, log_dir: str) -> tuple[object, object]:
    """A runner holding the run's last checkpoint, and its env (the recipe with the job's overrides)."""
    env_cfg = registry.load_cfg(cfg.task)
    if cfg.num_envs is not None:
        env_cfg.num_envs = cfg.num_envs
    agent_cfg = registry.load_agent_cfg(cfg.task, "shac")
    overrides = parse_overrides(cfg.overrides)
    apply_overrides(env_cfg, overrides["env"], "env")
    apply_overrides(agent_cfg, overrides["agent"], "agent")
    env = registry.make_env(cfg.task, env_cfg)
    runner = make_runner(env, agent_cfg, log_dir=None)
    runner.load(get_checkpoint_path(os.path.dirname(log_dir), os.path.basename(log_dir), r"model_\d+\.pt"))
    return runner, env


def export(runner, env, log_dir: str) -> tuple[object, str, str, dict]:
    """Export the runner's policy as deployed (TorchScript and ONNX, normaliser inside) into ``<log_dir>/exported``,
    each checked against the torch policy on the env's observations. Returns ``(torch policy, TorchScript path, ONNX
    path, {"jit": max error, "onnx": max error})``."""
    policy = runner.get_inference_policy()
    export_dir = os.path.join(log_dir, "exported")
    jit_path = export_policy_as_jit(policy, export_dir, "policy.pt")
    onnx_path = export_policy_as_onnx(policy, export_dir, "policy.onnx")
    errors = check_exported_policy(policy, jit_path, onnx_path, env.get_observations()["policy"][:256].float().detach())
    return policy, jit_path, onnx_path, errors


def plots_and_video(cfg: MainJobCfg, log_dir: str, env, policy, results: dict) -> tuple[str, str | None, dict]:
    """The run's plots (``plots/``: learning curves, velocity tracking in the validators, the gait in our hard contact)
    and, unless ``no_video``, ``videos/walk.mp4``. Returns ``(plots folder, video path or None, the training's last
    tracking errors)``."""
    plots = os.path.join(log_dir, "plots")
    os.makedirs(plots, exist_ok=True)
    training_final = plot_learning_curves(log_dir, os.path.join(plots, "learning_curves.png"),
                                          f"SHAC on {cfg.task} (training simulator, smoothed contact)")
    velocity_plot(results, os.path.join(plots, "velocity_tracking.png"))
    env.cfg.sim.contact = ContactParams("hard")
    env.sim.contact = "hard"
    env.cfg.observation_noise.enable = False
    env.cfg.randomization.enable = False
    qs = gait_plot(env, policy, os.path.join(plots, "gait.png"))
    video = None
    if not cfg.no_video:
        from .render import render_states, write_mp4

        video = write_mp4(render_states(env.robot, qs, terrain=getattr(env, "terrain", None)),
                          os.path.join(log_dir, "videos", "walk.mp4"), fps=1 / env.step_dt)
    return plots, video, training_final


def schedule_iterations(cfg: MainJobCfg) -> int:
    """The iterations of the training schedule: ``cfg.iterations``, else the recipe's (an override included)."""
    if cfg.iterations is not None:
        return cfg.iterations
    agent_cfg = registry.load_agent_cfg(cfg.task, "shac")
    apply_overrides(agent_cfg, parse_overrides(cfg.overrides)["agent"], "agent")
    return int(agent_cfg.max_iterations)


def run(cfg: MainJobCfg) -> int:
    """Run the main job (module docstring). Returns the exit code: 0, or with ``strict`` 1 when the validation FAILs or
    a tracking target is missed."""
    torch.set_num_threads(1)
    cfg.iterations = schedule_iterations(cfg)
    t0 = time.time()
    if cfg.from_run is None:
        log_dirs, train_s = train(cfg)
    else:
        log_dirs = [os.path.abspath(d.rstrip("/")) for d in cfg.from_run]
        log(f"1/4 training skipped: the checkpoints of {', '.join(log_dirs)}")
        train_s = float("nan")
    selection = select(cfg, log_dirs, printer=sub)
    log_dir = selection["run"]
    runner, env = load_run(cfg, log_dir)
    checkpoint = get_checkpoint_path(os.path.dirname(log_dir), os.path.basename(log_dir), r"model_\d+\.pt")
    trained_iterations = runner.current_learning_iteration
    if selection["chosen"]["path"] != checkpoint:
        checkpoint = selection["chosen"]["path"]
        runner.load(checkpoint, load_cfg={"actor": True, "critic": True})

    log(f"2/4 exporting the policy of {os.path.basename(checkpoint)}")
    policy_torch, jit_path, onnx_path, export_errors = export(runner, env, log_dir)
    policy = torch.jit.load(jit_path)

    log(f"3/4 validating {jit_path} before hardware (hard contact, MuJoCo)")
    task = TaskInterface.from_task(cfg.task)  # the task as deployed: its play config
    config = load_config(default_config_path(env.robot.name))
    if cfg.episodes is not None:
        config.scenario("random_commands").episodes = cfg.episodes
    deployed = load_policy_file(jit_path, task.num_obs, task.num_actions)
    group = list(getattr(policy_torch, "obs_groups", ["policy"]))[0]
    deployed.reference = lambda obs: policy_torch(TensorDict({group: obs}, batch_size=[obs.shape[0]])).float()
    deployed.exported = {"jit": jit_path, "onnx": onnx_path}
    validation = run_validation(task, deployed, list(VALIDATORS), config, os.path.join(log_dir, "validation"),
                                printer=sub)
    results = {VALIDATORS[name]: random_commands_stats(r, config) for name, r in validation.runs.items()}
    timings = {VALIDATORS[name]: r.seconds for name, r in validation.runs.items()}
    targets = measure_targets(task, deployed, os.path.join(log_dir, "validation", "random100"), cfg.target_episodes,
                              printer=sub)
    rough = None
    if task.height_scan and cfg.target_episodes != 0:  # a rough-interface policy: also on the generated terrain
        rough = measure_rough_targets(task, deployed, os.path.join(log_dir, "validation", "rough"), printer=sub)

    log("4/4 plots and video")
    plots, video, training_final = plots_and_video(cfg, log_dir, env, policy, results)

    chosen = selection["chosen"]
    summary = {"task": cfg.task, "checkpoint": checkpoint, "iterations": trained_iterations,
               "shipped_iteration": chosen["iteration"], "shipped_average_of": chosen.get("averaged_iterations"),
               "seed": run_seed(log_dir), "runs": selection["runs"],
               "selection": {"seconds": selection["seconds"], "episodes_seed": 1,
                             "candidates": [{k: v for k, v in r.items() if k != "path"}
                                            for r in selection["candidates"]],
                             "average": ({k: v for k, v in selection["average"].items() if k != "path"}
                                         if selection["average"] else None)},
               "train_seconds": train_s, "total_seconds": time.time() - t0, "exported": [jit_path, onnx_path],
               "export_errors": export_errors, "training_final": training_final,
               "validation": {k: v.summary() for k, v in results.items()}, "validation_seconds": timings,
               "targets": targets, "rough_targets": rough, "validation_verdict": validation.verdict,
               "validation_failing": [g.to_dict() for g in validation.failing],
               "validation_report": os.path.join(validation.report_dir, "summary.md"),
               "plots": sorted(os.path.join(plots, f) for f in os.listdir(plots)), "video": video,
               "options": dataclasses.asdict(cfg)}
    with open(os.path.join(log_dir, "main_job_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print_summary(log_dir, summary, selection, results, targets, validation)
    ok = validation.passed and all(r["met"] for r in targets.values()) and all(
        s["met"] for per in (rough or {}).values() for s in per.values())
    return 0 if ok or not cfg.strict else 1


def print_summary(log_dir: str, summary: dict, selection: dict, results: dict, targets: dict, validation) -> None:
    """The job's closing lines: where everything is, the measurement against its targets, the verdict."""
    chosen = selection["chosen"]
    print("\n[main_job] done in {:.1f} min".format(summary["total_seconds"] / 60))
    what = (f"the average of {len(chosen['averaged_iterations'])} checkpoints" if chosen.get("averaged_iterations")
            else f"chosen of {len(selection['candidates'])} closed-loop")
    print(f"  checkpoint: {summary['checkpoint']} ({what}; {summary['iterations']} iterations trained)")
    print(f"  exported:   {summary['exported'][0]}, {summary['exported'][1]} (max |exported - torch| "
          f"{max(summary['export_errors'].values()):.1e})")
    print(f"  plots:      {os.path.join(log_dir, 'plots')}/ (learning_curves, velocity_tracking, gait)")
    print(f"  video:      {summary['video']}")
    print(f"  summary:    {os.path.join(log_dir, 'main_job_summary.json')}")
    for name, stats in results.items():
        r = stats.summary()
        print(f"  {name:22s} random commands: v_xy err {r['lin_vel_xy_error']:.3f} m/s, w_z err "
              f"{r['ang_vel_z_error']:.3f} rad/s, falls {r['falls']}/{r['episodes']}")
    if targets:
        first = next(iter(targets.values()))
        print(f"  tracking targets ({first['episodes']} episodes of uniform random commands, "
              f"{os.path.relpath(TARGET_CONFIG)}):")
        for name, r in targets.items():
            print(f"    {name:22s} v_xy err {r['lin_vel_xy_error']:.3f} m/s (<= {r['target_lin_vel_xy_error']}), "
                  f"w_z err {r['ang_vel_z_error']:.3f} rad/s (<= {r['target_ang_vel_z_error']}), falls "
                  f"{r['falls']}/{r['episodes']} (none): {'met' if r['met'] else 'NOT MET'}")
            gait = r.get("gait")
            if gait and gait["windows"]:
                classes = ", ".join(f"{c} {v:.0%}" for c, v in sorted(gait["share"].items(), key=lambda kv: -kv[1])
                                    if v > 0)
                print(f"    {'':22s} gait of {gait['windows']} moving episodes: {classes}; stride "
                      f"{gait['stride_frequency']:.2f} Hz" + (f" (the task's {gait['expected']})"
                                                             if gait.get("expected") else ""))
    for name, per in (summary.get("rough_targets") or {}).items():
        print(f"  rough-terrain targets, {name} ({os.path.relpath(ROUGH_TARGET_CONFIG)}):")
        for scenario, r in per.items():
            values = ", ".join(f"{g} {v:.3f} (<= {r['targets'][g]})" for g, v in r["measured"].items())
            print(f"    {scenario:14s} {values}: {'met' if r['met'] else 'NOT MET'}")
    print(f"  validation: {validation.verdict}, {len(validation.failing)} failing gate(s)")
    for gate in validation.failing[:20]:
        print(f"    FAIL {gate.describe()}")
    if len(validation.failing) > 20:
        print(f"    ... and {len(validation.failing) - 20} more (all in the report)")
    failed = list(dict.fromkeys(gate.gate for gate in validation.failing))
    if failed:
        print("  what the failing gates mean for a robot:")
        for name in failed:
            print(f"    {name}: {ON_HARDWARE[name]}")
    print(f"  report:     {summary['validation_report']}")
