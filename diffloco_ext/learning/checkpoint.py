"""Checkpoint files: atomic writes, finding the checkpoint to resume from, and reading a run's ``params/*.yaml``.

A checkpoint is written to a temporary file in the target directory and moved into place with ``os.replace``, so
a crash or a full disk never leaves a truncated file and never destroys an existing checkpoint of the same name.
"""

from __future__ import annotations

import os
import re
import tempfile

import torch
import yaml


def save_atomic(obj: object, path: str) -> None:
    """``torch.save(obj, path)`` through a temporary file + ``os.replace`` (atomic on POSIX)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def non_finite_entries(state: dict, prefix: str = "") -> list[str]:
    """Names of floating tensors in a (nested) state dict that contain NaN or inf."""
    bad = []
    for key, value in state.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            bad += non_finite_entries(value, prefix=f"{name}.")
        elif isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            bad.append(name)
    return bad


class _ParamsLoader(yaml.SafeLoader):
    """YAML's safe loader plus ``!!python/tuple`` (read as a tuple): Isaac Lab's ``dump_yaml`` writes the tuples of
    its configs with that tag (e.g. ``std_range`` of an rsl_rl distribution), and a run of ``isaaclab train`` is as
    much a run as one of ``scripts/train.py``. Every other Python tag stays refused."""


_ParamsLoader.add_constructor("tag:yaml.org,2002:python/tuple",
                              lambda loader, node: tuple(loader.construct_sequence(node, deep=True)))


def read_params_yaml(path: str) -> dict:
    """A run's ``params/agent.yaml`` or ``params/env.yaml`` as a dict (written by ``scripts/train.py`` or by
    ``isaaclab train``); an empty file is ``{}``."""
    with open(path) as f:
        data = yaml.load(f, Loader=_ParamsLoader)  # noqa: S506 - a safe loader with one extra tag
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of config fields, got {type(data).__name__}")
    return data


def _natural_key(name: str) -> list:
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", name)]


def get_checkpoint_path(log_root: str, load_run: str = ".*", load_checkpoint: str = "model_.*.pt") -> str:
    """Latest checkpoint matching ``load_checkpoint`` in the latest run directory matching ``load_run``.

    Run directories and checkpoint names are compared in natural order (``model_10.pt`` after ``model_9.pt``), as in
    Isaac Lab's ``get_checkpoint_path``.
    """
    if not os.path.isdir(log_root):
        raise FileNotFoundError(f"No log directory '{log_root}'.")
    runs = sorted((d for d in os.listdir(log_root)
                   if os.path.isdir(os.path.join(log_root, d)) and re.fullmatch(load_run, d)),
                  key=_natural_key)
    if not runs:
        raise FileNotFoundError(f"No run directory matching '{load_run}' in '{log_root}'.")
    run_dir = os.path.join(log_root, runs[-1])
    checkpoints = sorted((f for f in os.listdir(run_dir) if re.fullmatch(load_checkpoint, f)), key=_natural_key)
    if not checkpoints:
        raise FileNotFoundError(f"No checkpoint matching '{load_checkpoint}' in '{run_dir}'.")
    return os.path.join(run_dir, checkpoints[-1])
