"""Experiments as resumable sets of training runs whose checkpoints are measured closed loop, as deployed.

An experiment (``scripts/experiments/run_all.py``) is a list of :class:`RunSpec` s under one folder ``root``:

    root/logs/<algo>/<run name>/<timestamp>/     the run's training folders (``scripts/train.py`` with
                                                 ``--log_root root/logs --experiment_name <run name>``); a run
                                                 interrupted and resumed is a chain of folders (``run_history``)
    root/runs/<run name>.json                    written when the run's budget is done: its spec and totals
    root/measurements/<backend>/<run name>/model_<it>.json
                                                 one file per measured checkpoint and backend: the closed-loop
                                                 metrics and the samples, training and wall-clock minutes at which
                                                 it was saved

:meth:`ExperimentRunner.train` trains a run until its budget (iterations, training minutes) is spent, resuming from
its last checkpoint when a folder exists (an experiment stopped midway continues where it was, losing at most the
iterations since the last checkpoint); :meth:`ExperimentRunner.measure` measures the checkpoints saved every
``measure_every`` iterations that have no file yet, each as :mod:`.checkpoint_selection` does (the exported
policy, deterministic, on the random-command scenario of a validation config, in one backend); tables are assembled
from the files alone (:func:`first_reach`, :func:`group_reach`), so they can be rebuilt without a simulator.

Training minutes are the learners' own per-iteration collection + learning times summed (what the budget counts:
startup, checkpoint writing and time between sessions are not in them); wall-clock minutes are the events' wall time
since the first iteration (a resumed run counts on from its origin's last event).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

import numpy as np

from ..learning.run_history import chain_checkpoints, progress_at, read_run


@dataclass(frozen=True)
class RunSpec:
    """One training run of an experiment.

    ``name``: unique within the experiment (its folder names), e.g. ``shac-s42``; ``group``: the row it belongs to
    in the tables (seeds of one setting share it); ``task``, ``algo`` (``shac`` or ``ppo``), ``seed``, ``num_envs``
    (per rank; None: the task's), ``ranks`` (data-parallel processes, ``torchrun`` when > 1); the budget: at most
    ``max_iterations`` iterations and ``max_minutes`` minutes of training (either may be None, not both);
    ``overrides``: ``env.<field>=<value>`` / ``agent.<field>=<value>`` as ``scripts/train.py`` takes them;
    ``measure_every``: iterations between the checkpoints saved and measured (``agent.save_interval``)."""

    name: str
    group: str
    task: str
    algo: str = "shac"
    seed: int = 42
    num_envs: int | None = None
    ranks: int = 1
    max_iterations: int | None = None
    max_minutes: float | None = None
    overrides: tuple[str, ...] = ()
    measure_every: int = 50

    def __post_init__(self) -> None:
        if self.algo not in ("shac", "ppo"):
            raise ValueError(f"run {self.name}: algo must be 'shac' or 'ppo', got {self.algo!r}")
        if self.max_iterations is None and self.max_minutes is None:
            raise ValueError(f"run {self.name}: give max_iterations, max_minutes or both (the run's budget)")
        if self.ranks < 1 or self.measure_every < 1:
            raise ValueError(f"run {self.name}: ranks and measure_every must be >= 1")
        if not self.name or os.sep in self.name:
            raise ValueError(f"run name {self.name!r}: a non-empty folder name")


@dataclass
class MeasureCfg:
    """How checkpoints are measured: the random-command scenario of ``config`` (a validation config file) in
    ``backend``, ``episodes`` per checkpoint (None: the file's), in ``jobs`` processes. A ``backend`` named
    ``task-<physics>`` measures in the task's own env instead (:mod:`.task_env_measure`: return, the task's metrics,
    falls; ``episodes`` envs, 16 if None, of at most ``seconds``), e.g. ``task-mujoco`` for a task without velocity
    commands."""

    config: str
    backend: str = "hard"
    episodes: int | None = None
    jobs: int = 1
    scenario: str = "random_commands"
    seconds: float | None = None

    @property
    def task_env(self) -> str | None:
        """The physics of a task-env measurement (``task-<physics>``), else None."""
        return self.backend[len("task-"):] if self.backend.startswith("task-") else None


@dataclass
class RunStatus:
    """Where a run stands: its newest training folder (None: not started), iterations done (checkpointed), samples
    and training minutes at that checkpoint, and whether its budget is done."""

    folder: str | None
    iterations: int = 0
    samples: float = 0.0
    training_minutes: float = 0.0
    finished: bool = False
    summary: dict = field(default_factory=dict)


class ExperimentRunner:
    """Trains and measures the runs of one experiment under ``root`` (see the module docstring)."""

    def __init__(self, root: str, measure: MeasureCfg, python: str = sys.executable, repo: str | None = None,
                 printer=print):
        self.root = os.path.abspath(root)
        self.measure_cfg = measure
        self.python = python
        self.repo = repo or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.print = printer

    # ---- where things are ----------------------------------------------------------------------------------------
    def folders(self, spec: RunSpec) -> list[str]:
        """The run's training folders, oldest first."""
        return sorted(p for p in glob.glob(os.path.join(self.root, "logs", spec.algo, spec.name, "*"))
                      if os.path.isdir(p))

    def newest(self, spec: RunSpec) -> str | None:
        """The newest training folder with a checkpoint (an attempt that died before its first is skipped)."""
        with_checkpoints = [f for f in self.folders(spec) if glob.glob(os.path.join(f, "model_*.pt"))]
        return with_checkpoints[-1] if with_checkpoints else None

    def _done_path(self, spec: RunSpec) -> str:
        return os.path.join(self.root, "runs", f"{spec.name}.json")

    def measurement_dir(self, spec: RunSpec) -> str:
        return os.path.join(self.root, "measurements", self.measure_cfg.backend, spec.name)

    def status(self, spec: RunSpec) -> RunStatus:
        folder = self.newest(spec)
        if os.path.isfile(self._done_path(spec)):
            with open(self._done_path(spec)) as f:
                summary = json.load(f)
            return RunStatus(summary.get("folder"), summary["iterations"], summary["samples"],
                             summary["training_minutes"], True, summary)
        if folder is None:
            return RunStatus(None)
        iteration = chain_checkpoints(folder)[-1][0]
        at = progress_at(folder, read_run(folder), [iteration])
        return RunStatus(folder, iteration, float(at["samples"][0]), float(at["training_minutes"][0]))

    # ---- training ------------------------------------------------------------------------------------------------
    def command(self, spec: RunSpec, status: RunStatus) -> list[str] | None:
        """The ``scripts/train.py`` command that spends the rest of the run's budget (resuming from its newest
        checkpoint), or None when nothing is left."""
        left_iterations = None if spec.max_iterations is None else spec.max_iterations - status.iterations
        left_minutes = None if spec.max_minutes is None else spec.max_minutes - status.training_minutes
        if (left_iterations is not None and left_iterations <= 0) or (
                left_minutes is not None and left_minutes <= 0.05):
            return None
        train = os.path.join(self.repo, "scripts", "train.py")
        launcher = [self.python, "-m", "torch.distributed.run", f"--nproc_per_node={spec.ranks}"] \
            if spec.ranks > 1 else [self.python]
        cmd = [*launcher, train, "--task", spec.task, "--algo", spec.algo, "--seed", str(spec.seed),
               "--log_root", os.path.join(self.root, "logs"), "--experiment_name", spec.name]
        if spec.num_envs is not None:
            cmd += ["--num_envs", str(spec.num_envs)]
        if left_iterations is not None:
            cmd += ["--max_iterations", str(left_iterations)]
        if left_minutes is not None:
            cmd += ["--max_minutes", f"{left_minutes:.3f}"]
        if status.folder is not None:
            cmd += ["--resume", "--load_run", os.path.basename(status.folder),
                    "--checkpoint", f"model_{status.iterations}.pt"]
        return [*cmd, f"agent.save_interval={spec.measure_every}", *spec.overrides]

    def train(self, spec: RunSpec) -> RunStatus:
        """Train the run until its budget is spent (resuming if it was started); a no-op for a finished run. A
        training process that fails raises (its log is the run folder's; the run resumes on the next call)."""
        status = self.status(spec)
        if status.finished:
            return status
        cmd = self.command(spec, status)
        if cmd is not None:
            self.print(f"[experiment] {spec.name}: " + ("resuming at iteration "
                       f"{status.iterations} ({status.training_minutes:.1f} min)" if status.folder else "training"))
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [self.repo, os.environ.get("PYTHONPATH")])))
            done = subprocess.run(cmd, cwd=self.repo, env=env)
            if done.returncode != 0:
                raise RuntimeError(f"run {spec.name}: training exited with {done.returncode} ({' '.join(cmd)})")
            status = self.status(spec)
        if status.folder is None:
            raise RuntimeError(f"run {spec.name}: no checkpoint was written")
        summary = {"spec": dataclasses.asdict(spec), "folder": status.folder, "iterations": status.iterations,
                   "samples": status.samples, "training_minutes": status.training_minutes}
        os.makedirs(os.path.dirname(self._done_path(spec)), exist_ok=True)
        _write_json(summary, self._done_path(spec))
        return self.status(spec)

    # ---- measuring -----------------------------------------------------------------------------------------------
    def measure(self, spec: RunSpec, last_only: bool = False) -> list[dict]:
        """Measure the run's checkpoints at multiples of ``measure_every`` and its last (``last_only``: the last
        alone) that have no file yet; return every measured row of the run, by iteration."""
        from .checkpoint_selection import measure_checkpoint_groups

        folder = self.newest(spec)
        if folder is None:
            return []
        chain = chain_checkpoints(folder)
        wanted = chain[-1:] if last_only else [c for c in chain if c[0] % spec.measure_every == 0 or c is chain[-1]]
        out_dir = self.measurement_dir(spec)
        todo = [c for c in wanted if not os.path.isfile(os.path.join(out_dir, f"model_{c[0]}.json"))]
        if todo:
            m = self.measure_cfg
            self.print(f"[experiment] {spec.name}: measuring {len(todo)} checkpoint(s) in {m.backend}")
            if m.task_env is not None:
                from .task_env_measure import measure_in_task_env

                rows = [measure_in_task_env(path, spec.task, m.task_env, algo=spec.algo, num_envs=m.episodes or 16,
                                            seconds=m.seconds) for _, path in todo]
            else:
                rows = measure_checkpoint_groups([todo], spec.task, m.config, m.backend, jobs=m.jobs,
                                                 names=[spec.name], episodes=m.episodes)[0]
            at = progress_at(folder, read_run(folder), [it for it, _ in todo])
            os.makedirs(out_dir, exist_ok=True)
            for k, ((iteration, path), row) in enumerate(zip(todo, rows)):
                record = {**_plain(row), "iteration": iteration, "checkpoint": path, "backend": m.backend,
                          "config": m.config, "samples": float(at["samples"][k]),
                          "training_minutes": float(at["training_minutes"][k]),
                          "wall_minutes": float(at["wall_minutes"][k])}
                _write_json(record, os.path.join(out_dir, f"model_{iteration}.json"))
        return self.rows(spec)

    def rows(self, spec: RunSpec) -> list[dict]:
        """The run's measured checkpoints read from their files, by iteration."""
        return read_rows(self.measurement_dir(spec))


def read_rows(directory: str) -> list[dict]:
    """The measurement files ``model_<it>.json`` of one run, by iteration (empty if there are none)."""
    rows = []
    for path in glob.glob(os.path.join(directory, "model_*.json")):
        with open(path) as f:
            rows.append(json.load(f))
    return sorted(rows, key=lambda r: r["iteration"])


def first_reach(rows: list[dict], threshold: float, max_fall_rate: float = 0.01,
                max_yaw_error: float | None = None) -> dict | None:
    """The first measured checkpoint with planar error ``<= threshold`` (m/s), fall rate ``<= max_fall_rate`` (and
    yaw-rate error ``<= max_yaw_error``, rad/s, when given), or None."""
    for r in rows:
        if r["lin_vel_error"] <= threshold and r["fall_rate"] <= max_fall_rate and (
                max_yaw_error is None or r["ang_vel_error"] <= max_yaw_error):
            return r
    return None


def group_reach(runs: dict[str, tuple[str, list[dict]]], thresholds: list[float], max_fall_rate: float = 0.01,
                max_yaw_error: float | None = None) -> dict[str, dict[str, dict]]:
    """Per group and threshold, over the group's runs (``{run name: (group, rows)}``): how many reached it, and the
    median, min and max of the samples and training minutes at which they first did (over the runs that did)."""
    out: dict[str, dict[str, dict]] = {}
    for group in dict.fromkeys(g for g, _ in runs.values()):
        members = [rows for g, rows in runs.values() if g == group]
        out[group] = {}
        for threshold in thresholds:
            hits = [h for h in (first_reach(rows, threshold, max_fall_rate, max_yaw_error) for rows in members) if h]
            entry = {"runs": len(members), "reached": len(hits)}
            for key in ("samples", "training_minutes"):
                values = np.array([h[key] for h in hits])
                entry[key] = None if not len(hits) else {
                    "median": float(np.median(values)), "min": float(values.min()), "max": float(values.max())}
            out[group][str(threshold)] = entry
    return out


def reach_ratio(reach: dict[str, dict[str, dict]], numerator: str, denominator: str, key: str = "samples") -> dict:
    """Per threshold, ``denominator``'s median over ``numerator``'s (e.g. PPO's samples over SHAC's: how many
    times fewer SHAC needs) with the spread (the smallest and largest ratio of any two runs' values), None where a
    group has not reached it in any run."""
    out = {}
    for threshold, a in reach[numerator].items():
        b = reach[denominator][threshold]
        if a[key] is None or b[key] is None:
            out[threshold] = None
            continue
        out[threshold] = {"median": b[key]["median"] / a[key]["median"], "min": b[key]["min"] / a[key]["max"],
                          "max": b[key]["max"] / a[key]["min"]}
    return out


def _plain(row: dict) -> dict:
    """A measured row with numpy scalars as Python numbers (JSON)."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}


def _write_json(obj: dict, path: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)

