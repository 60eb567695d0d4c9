"""Validation on generated terrain: the run's terrain, where each episode starts on it, and when a robot is stuck.

:func:`validation_terrain`: the terrain of a run whose scenarios have a ``terrain`` (:class:`~.scenarios.TerrainSpec`):
the task's generator (its sub-terrains, proportions, tile size and border; Isaac Lab's rough terrain for a task on
flat ground) with one row per difficulty the scenarios name (sorted), enough columns for every sub-terrain type to
have one (``1 / the smallest proportion``; Isaac Lab's play terrain has 5 columns, without the inverted slope) and the
file's ``settings.terrain_seed``. Every
backend of the run gets its arrays (our height field, MuJoCo's ``hfield``), as the kinematics that judge contacts do.

:func:`episode_origins`: an episode of a scenario of type ``t`` and difficulty ``d`` starts on the origin of a tile
of column type ``t`` (``mixed``: any column) in the row of difficulty ``d``; the ``k``-th episode of a (scenario,
seed) takes the ``k``-th such column, cycling. For Isaac Lab's pyramids the origin is the centre platform: the
stairs (``pyramid_stairs``) and slopes (``hf_pyramid_slope``) go down from it, their ``_inv`` forms up.

:func:`stuck`: an episode is stuck when, in some window of ``window_s`` (10 s) while the robot stands (has not
fallen), its mean commanded planar speed exceeds ``min_speed`` (0.3 m/s) and its base moved less than
``min_distance`` (1 m) from where the window began.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..sim.terrain_generator import GeneratedTerrain, TerrainGeneratorCfg, generate, rough_terrains_cfg
from .scenarios import Scenario


def validation_terrain(scenarios: list[Scenario], env_cfg, seed: int = 0) -> GeneratedTerrain | None:
    """The run's terrain (module docstring), or None when no scenario has a terrain."""
    specs = [s.terrain for s in scenarios if s.terrain is not None]
    if not specs:
        return None
    task_terrain = getattr(env_cfg, "terrain", None)
    base: TerrainGeneratorCfg = task_terrain.generator if task_terrain is not None else rough_terrains_cfg()
    types = set(base.sub_terrains) | {"mixed"}
    for s in scenarios:
        if s.terrain.type not in types:
            raise ValueError(f"scenario '{s.name}': terrain type '{s.terrain.type}' is not one of the task's "
                             f"sub-terrains {sorted(base.sub_terrains)} (or 'mixed')")
    difficulties = tuple(sorted({t.difficulty for t in specs}))
    proportions = [sub.proportion for sub in base.sub_terrains.values()]
    columns = max(base.num_cols, math.ceil(sum(proportions) / min(proportions) - 1e-9))
    cfg = dataclasses.replace(base, num_rows=len(difficulties), num_cols=columns, row_difficulties=difficulties,
                              seed=int(seed), sub_terrains=dict(base.sub_terrains))
    return generate(cfg)


def episode_origins(terrain: GeneratedTerrain, episodes: list[tuple[Scenario, int]]) -> np.ndarray:
    """[B, 3] the tile origin (world, m) each episode ``(scenario, index within its scenario and seed)`` starts on."""
    rows = list(terrain.cfg.row_difficulties)
    out = np.zeros((len(episodes), 3))
    for e, (scenario, index) in enumerate(episodes):
        spec = scenario.terrain
        columns = [c for c, t in enumerate(terrain.tile_types) if spec.type in ("mixed", t)]
        if not columns:
            raise ValueError(f"scenario '{scenario.name}': the terrain has no column of type '{spec.type}' "
                             f"(its columns: {sorted(set(terrain.tile_types))}; a type with a small proportion "
                             f"needs more columns)")
        out[e] = terrain.tile_origins[rows.index(spec.difficulty), columns[index % len(columns)]]
    return out


def stuck(positions: np.ndarray, commands: np.ndarray, standing: np.ndarray, dt: float, window_s: float = 10.0,
          min_distance: float = 1.0, min_speed: float = 0.3) -> np.ndarray:
    """[N] bool (module docstring): ``positions`` [T, N, 2] base xy (world, m) and ``commands`` [T, N, 2] planar
    commands (m/s) at each policy step, ``standing`` [T, N] bool (not fallen, within the episode), step ``dt`` (s)."""
    T, N = standing.shape
    w = int(round(window_s / dt))
    out = np.zeros(N, dtype=bool)
    if T < w:
        return out
    speed = np.linalg.norm(commands, axis=-1)
    csum = np.concatenate([np.zeros((1, N)), np.cumsum(speed, axis=0)])
    ok = np.concatenate([np.zeros((1, N)), np.cumsum(~standing, axis=0)])
    for start in range(0, T - w + 1):
        end = start + w
        whole = (ok[end] - ok[start]) == 0
        fast = (csum[end] - csum[start]) / w > min_speed
        moved = np.linalg.norm(positions[end - 1] - positions[start], axis=-1)
        out |= whole & fast & (moved < min_distance)
    return out
