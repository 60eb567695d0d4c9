"""The terrain curriculum's rule by hand: types in contiguous blocks, up past half a tile, down below half the
commanded distance, solved envs to a random level, never below 0. (Against Isaac Lab's own functions:
tests/isaaclab/test_terrain_levels_vs_isaaclab.py.)"""

from __future__ import annotations

import pytest
import torch

from diffloco_ext.tasks.velocity.terrain_levels import TerrainLevels


def _origins(rows=4, cols=2):
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    return torch.stack([8.0 * r, 8.0 * c, 0.1 * r], dim=-1).double()


def test_types_in_blocks_and_initial_levels():
    levels = TerrainLevels(_origins(), 6, 8.0, 20.0, max_init_level=1, generator=torch.Generator().manual_seed(0))
    assert levels.types.tolist() == [0, 0, 0, 1, 1, 1]
    assert set(levels.levels.tolist()) <= {0, 1}
    torch.testing.assert_close(levels.origins, _origins()[levels.levels, levels.types])


def test_up_down_stay_and_the_last_level():
    levels = TerrainLevels(_origins(), 4, 8.0, 20.0, generator=torch.Generator().manual_seed(0))
    levels.levels[:] = torch.tensor([1, 1, 0, 3])
    start = levels.origins[:, :2].clone()
    walked = torch.tensor([[4.5, 0.0], [2.0, 0.0], [0.1, 0.0], [0.0, 4.1]], dtype=torch.float64)
    command = torch.tensor([[1.0, 0.0], [0.5, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    levels.update(torch.ones(4, dtype=torch.bool), start + walked, command)
    # env 0 walked 4.5 m > 4: up; env 1 walked 2 m < 0.5 * 20 * 0.5 = 5: down; env 2 down at level 0 stays 0;
    # env 3 solved the last level: a random level
    assert levels.levels[:3].tolist() == [2, 0, 0]
    assert 0 <= int(levels.levels[3]) < 4
    assert levels.mean_level == pytest.approx(levels.levels.float().mean().item())


def test_bad_inputs():
    with pytest.raises(ValueError, match="tile_origins"):
        TerrainLevels(torch.zeros(3, 3), 2, 8.0, 20.0)
    with pytest.raises(ValueError, match="max_init_level"):
        TerrainLevels(_origins(), 2, 8.0, 20.0, max_init_level=-1)
