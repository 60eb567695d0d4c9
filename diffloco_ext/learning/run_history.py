"""A training run's history read back from its folder: checkpoints, TensorBoard scalars, samples and training time,
and the chain of runs a resumed run continues.

A run folder (``logs/<algo>/<experiment>/<timestamp>[_<name>]/``) holds ``model_<iteration>.pt`` checkpoints,
``params/agent.yaml`` and the TensorBoard events both learners write with rsl_rl's tags. A run resumed from a
checkpoint (``scripts/train.py --resume``) is a new folder whose ``params/agent.yaml`` records that checkpoint
(``resume: true``, ``load_checkpoint``); :func:`read_run` and :func:`chain_checkpoints` read it joined to the run it
came from, up to that checkpoint (recursively), so a run interrupted and resumed reads as one.

Samples are environment transitions summed over the data-parallel ranks (``Perf/total_fps`` x the iteration's
collection + learning time, as the loggers compute the rate). Two clocks: ``wall`` (s), the events' wall time since the
first logged iteration began (the compilation before it not counted; a resumed run counts on from its origin's last
event, so time between the two is not counted either), and ``training`` (s), the summed collection + learning time of
the iterations (what the learner spent; the loggers' own per-iteration times).
"""

from __future__ import annotations

import os
import re

import numpy as np

from .checkpoint import read_params_yaml
from .learning_curves import read_scalars

_MODEL = re.compile(r"model_(\d+)\.pt$")
_PERF = ("Perf/total_fps", "Perf/collection_time", "Perf/learning_time")


def run_checkpoints(run_dir: str, since: int = 0) -> list[tuple[int, str]]:
    """``[(iteration, path)]`` of the ``model_<iteration>.pt`` files in ``run_dir`` with ``iteration >= since``,
    by iteration."""
    found = []
    for name in os.listdir(run_dir):
        match = _MODEL.fullmatch(name)
        if match and int(match.group(1)) >= since:
            found.append((int(match.group(1)), os.path.join(run_dir, name)))
    return sorted(found)


def origin(run_dir: str) -> tuple[str, int] | None:
    """``(run directory, iteration)`` of the checkpoint a resumed run started from, as ``scripts/train.py`` records
    it in the run's ``params/agent.yaml``, or None for a run trained from scratch (or one whose origin checkpoint is
    gone: a warning, the run is read alone)."""
    path = os.path.join(run_dir, "params", "agent.yaml")
    params = read_params_yaml(path) if os.path.isfile(path) else {}
    if not params.get("resume"):
        return None
    checkpoint = str(params.get("load_checkpoint", ""))
    match = _MODEL.fullmatch(os.path.basename(checkpoint))
    if match is None or not os.path.isfile(checkpoint):
        print(f"[run_history] {run_dir}: resumed from {checkpoint!r}, which is not there: read from the resume on")
        return None
    return os.path.dirname(checkpoint), int(match.group(1))


def logged_step(run_dir: str, iteration: int) -> int:
    """The logged iteration (TensorBoard step) at whose end checkpoint ``model_<iteration>.pt`` was written: SHAC
    names a checkpoint by the iterations completed (``model_5.pt`` after steps 0-4), rsl_rl's PPO by the index of
    the iteration it was saved in (``model_5.pt`` after step 5); read from the run's ``params/agent.yaml``."""
    path = os.path.join(run_dir, "params", "agent.yaml")
    algo = read_params_yaml(path).get("algorithm", {}).get("class_name") if os.path.isfile(path) else None
    return iteration - 1 if algo == "SHAC" else iteration


def _read_own(run_dir: str) -> dict[str, np.ndarray]:
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"no run directory {run_dir}")
    out = read_scalars(run_dir)
    if not set(_PERF) <= set(out):
        raise ValueError(f"{run_dir}: no rsl_rl performance tags ({sorted(set(_PERF) - set(out))} missing)")
    fps, col, learn = (out[t] for t in _PERF)
    n = min(len(fps), len(col), len(learn))
    seconds = col[:n, 1] + learn[:n, 1]
    out["samples"] = np.stack([fps[:n, 0], np.cumsum(fps[:n, 1] * seconds)], axis=1)
    out["training"] = np.stack([fps[:n, 0], np.cumsum(seconds)], axis=1)
    t0 = fps[0, 2] - seconds[0] if n else 0.0
    for t in out:
        if t not in ("samples", "training"):
            out[t][:, 2] -= t0
    return out


def read_run(run_dir: str) -> dict[str, np.ndarray]:
    """``{tag: [K, 3] (iteration, value, wall s)}`` plus ``"samples"`` and ``"training"`` [K, 2] (iteration,
    cumulative samples / training seconds), joined to the run a resumed run came from (module docstring)."""
    own = _read_own(run_dir)
    source = origin(run_dir)
    if source is None:
        return own
    parent = read_run(source[0])
    last = logged_step(source[0], source[1])
    cut = {t: v[v[:, 0] <= last] for t, v in parent.items()}
    offsets = {t: float(cut[t][-1, 1]) if len(cut[t]) else 0.0 for t in ("samples", "training")}
    fps = cut["Perf/total_fps"]
    wall0 = float(fps[-1, 2]) if len(fps) else 0.0
    joined = {}
    for t in set(cut) | set(own):
        mine = own.get(t)
        if mine is not None:
            mine = mine.copy()
            column, offset = (1, offsets[t]) if t in offsets else (2, wall0)
            mine[:, column] += offset
        joined[t] = np.concatenate([p for p in (cut.get(t), mine) if p is not None])
    return joined


def chain_checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """``[(iteration, path)]`` of a run's checkpoints, with those of the run it resumed from up to the resumed one."""
    source = origin(run_dir)
    before = [] if source is None else [c for c in chain_checkpoints(source[0]) if c[0] <= source[1]]
    return before + [c for c in run_checkpoints(run_dir) if not before or c[0] > before[-1][0]]


def progress_at(run_dir: str, data: dict, iterations: list[int]) -> dict[str, np.ndarray]:
    """At the checkpoints ``model_<iteration>.pt`` of the run (chain) ``run_dir`` read as ``data``
    (:func:`read_run`): ``samples``, ``wall_minutes`` and ``training_minutes`` when each was written."""
    steps = [logged_step(run_dir, i) for i in iterations]
    at = {}
    for key, tag, column, scale in (("samples", "samples", 1, 1.0), ("training_minutes", "training", 1, 60.0),
                                    ("wall_minutes", "Perf/total_fps", 2, 60.0)):
        series = data[tag]
        at[key] = np.interp(steps, series[:, 0], series[:, column]) / scale if len(series) else np.zeros(len(steps))
    return at
