"""Resolving a registered task: its configs (by entry point) and its environment.

    cfg = load_cfg("DiffLoco-Velocity-Flat-AnymalD", "env_cfg_entry_point")   # the task as trained
    play = load_play_cfg("DiffLoco-Velocity-Flat-AnymalD")                    # as played and validated
    env = make_env("DiffLoco-Velocity-Flat-AnymalD", cfg)      # the unwrapped DiffVecEnv

Unknown ids and entry points are clear errors listing what exists.
"""

from __future__ import annotations

import importlib

import gymnasium as gym

from . import TASKS

AGENT_ENTRY_POINTS = {"shac": "shac_cfg_entry_point", "ppo": "rsl_rl_cfg_entry_point"}


def task_ids() -> list[str]:
    """The ids this package registers."""
    return list(TASKS)


def _spec(task_id: str):
    if task_id not in gym.registry or task_id not in TASKS:
        raise KeyError(f"unknown task '{task_id}': registered tasks are {', '.join(TASKS)}")
    return gym.spec(task_id)


def resolve_entry_point(entry_point: str):
    """The object named by ``"package.module:Name"``."""
    module_name, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def load_cfg(task_id: str, key: str = "env_cfg_entry_point"):
    """A fresh instance of the config class that ``task_id`` names under ``key``."""
    spec = _spec(task_id)
    if key not in spec.kwargs:
        raise KeyError(f"task '{task_id}' has no '{key}': it has {sorted(spec.kwargs)}")
    return resolve_entry_point(spec.kwargs[key])()


def load_play_cfg(task_id: str):
    """The config ``task_id`` is played and validated with: its ``play_env_cfg_entry_point`` (Isaac Lab's ``_PLAY``
    pattern: the task as deployed, without the training recipe's noise, randomisation and curriculum), or its env
    config where it registers none."""
    key = "play_env_cfg_entry_point"
    return load_cfg(task_id, key if key in _spec(task_id).kwargs else "env_cfg_entry_point")


def load_agent_cfg(task_id: str, algo: str):
    """The runner config of ``algo`` (``"shac"`` or ``"ppo"``) for ``task_id``."""
    if algo not in AGENT_ENTRY_POINTS:
        raise ValueError(f"unknown algorithm '{algo}': use one of {tuple(AGENT_ENTRY_POINTS)}")
    return load_cfg(task_id, AGENT_ENTRY_POINTS[algo])


def make_env(task_id: str, cfg=None, **kwargs):
    """The unwrapped environment of ``task_id`` built from ``cfg`` (default: the registered env config)."""
    spec = _spec(task_id)
    cfg = load_cfg(task_id) if cfg is None else cfg
    return gym.make(spec.id, cfg=cfg, **kwargs).unwrapped
