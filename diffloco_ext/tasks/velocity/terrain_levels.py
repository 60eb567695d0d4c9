"""The terrain curriculum of Isaac Lab's rough velocity task: which tile each env starts its episodes on.

Isaac Lab 3.0 (``isaaclab/terrains/terrain_importer.py``: ``_compute_env_origins_curriculum``,
``update_env_origins``; ``isaaclab_tasks/core/velocity/mdp/curriculums.py: terrain_levels_vel``):

* each env keeps one terrain **type** (a column of the generated terrain) for the whole run, the envs split into
  contiguous blocks: env ``e`` of ``N`` on column ``floor(e / (N / num_cols))``;
* its **level** (a row) starts uniform in ``0 .. max_init_level``;
* at each of its resets, from where the episode ended: it moves **up** a level if it walked farther than half a tile
  from its tile's origin (``> size_x / 2``, 4 m), else **down** if it walked less than half the distance its
  command asked for over a whole episode (``< |v*_xy| T / 2``, ``T`` the episode length in s); a level past the last
  is replaced by a uniform random level (the solved envs spread over the terrain), a level below 0 stays 0;
* the env then starts on the origin of its (type, level) tile.

The mean level is the curriculum's progress (Isaac Lab logs it as ``Curriculum/terrain_levels``).
"""

from __future__ import annotations

import torch


class TerrainLevels:
    """Per-env terrain type and level, and the origins they give (see the module docstring).

    ``tile_origins`` [num_rows, num_cols, 3] (world, m) of the generated terrain; ``tile_size`` (m) along x (the
    up threshold is half of it); ``episode_length_s`` (s); ``max_init_level``: the highest starting level
    (clipped to the last row); ``generator``: the draws (initial levels, the random level of a solved env).
    """

    def __init__(self, tile_origins: torch.Tensor, num_envs: int, tile_size: float, episode_length_s: float,
                 max_init_level: int = 5, generator: torch.Generator | None = None):
        if tile_origins.ndim != 3 or tile_origins.shape[-1] != 3:
            raise ValueError(f"tile_origins must be [rows, cols, 3], got {tuple(tile_origins.shape)}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not (isinstance(max_init_level, int) and max_init_level >= 0):
            raise ValueError(f"max_init_level must be an integer >= 0, got {max_init_level!r}")
        self.tile_origins = tile_origins
        self.num_rows, self.num_cols = tile_origins.shape[:2]
        self.tile_size, self.episode_length_s = float(tile_size), float(episode_length_s)
        self.generator = generator
        device = tile_origins.device
        top = min(max_init_level, self.num_rows - 1)
        self.levels = torch.randint(0, top + 1, (num_envs,), generator=generator, device=device)
        self.types = torch.div(torch.arange(num_envs, device=device), num_envs / self.num_cols,
                               rounding_mode="floor").long()

    @property
    def origins(self) -> torch.Tensor:
        """[N, 3] the origin of each env's current tile (world, m)."""
        return self.tile_origins[self.levels, self.types]

    @property
    def mean_level(self) -> float:
        return float(self.levels.float().mean())

    def update(self, envs: torch.Tensor, base_xy: torch.Tensor, command_xy: torch.Tensor) -> torch.Tensor:
        """Move the envs ``envs`` (bool [N] or indices) up or down from where their episodes ended: ``base_xy``
        [N, 2] (world, m) and their commands ``command_xy`` [N, 2] (m/s), before the reset. Returns their new
        origins [len(envs), 3]."""
        ids = envs.nonzero().squeeze(-1) if envs.dtype == torch.bool else envs
        distance = torch.linalg.norm(base_xy[ids] - self.origins[ids, :2], dim=1)
        up = distance > self.tile_size / 2
        down = (distance < torch.linalg.norm(command_xy[ids], dim=1) * self.episode_length_s * 0.5) & ~up
        level = self.levels[ids] + up.long() - down.long()
        solved = level >= self.num_rows
        random = torch.randint(0, self.num_rows, level.shape, generator=self.generator, device=level.device)
        self.levels[ids] = torch.where(solved, random, level.clamp(min=0))
        return self.origins[ids]
