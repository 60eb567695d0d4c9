"""The terrain curriculum against Isaac Lab 3.0's own code (``TerrainImporter``'s curriculum origins and
``update_env_origins``, ``terrain_levels_vel``) run on a stand-in scene: the same levels, types and origins after
the same episodes, from the same seed."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from diffloco_ext.tasks.velocity.terrain_levels import TerrainLevels


def test_levels_follow_isaac_labs_curriculum():
    from isaaclab.terrains.terrain_importer import TerrainImporter
    from isaaclab_tasks.core.velocity.mdp.curriculums import terrain_levels_vel

    rows, cols, n = 5, 4, 24
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    tile_origins = torch.stack([8.0 * r - 16, 8.0 * c - 12, 0.05 * r], dim=-1).float()
    torch.manual_seed(11)
    terrain = SimpleNamespace(cfg=SimpleNamespace(max_init_terrain_level=3,
                                                  terrain_generator=SimpleNamespace(size=(8.0, 8.0))),
                              device="cpu", terrain_origins=tile_origins)
    terrain.env_origins = TerrainImporter._compute_env_origins_curriculum(terrain, n, tile_origins)
    terrain.update_env_origins = lambda ids, up, down: TerrainImporter.update_env_origins(terrain, ids, up, down)
    ours = TerrainLevels(tile_origins, n, 8.0, 20.0, max_init_level=3, generator=torch.Generator().manual_seed(11))
    assert torch.equal(ours.levels, terrain.terrain_levels) and torch.equal(ours.types, terrain.terrain_types)

    gen = torch.Generator().manual_seed(3)
    for _ in range(12):
        ids = torch.randperm(n, generator=gen)[:10]
        pos = torch.zeros(n, 3)
        pos[:, :2] = terrain.env_origins[:, :2] + 6.0 * (torch.rand(n, 2, generator=gen) - 0.5) * 2
        command = torch.zeros(n, 3)
        command[:, :2] = torch.rand(n, 2, generator=gen) - 0.5
        robot = SimpleNamespace(data=SimpleNamespace(root_pos_w=SimpleNamespace(torch=pos)))
        env = SimpleNamespace(scene=_Scene(terrain, robot), max_episode_length_s=20.0,
                              command_manager=SimpleNamespace(get_command=lambda name: command))
        terrain_levels_vel(env, ids)
        ours.update(ids, pos[:, :2], command[:, :2])
        assert torch.equal(ours.levels, terrain.terrain_levels)
        torch.testing.assert_close(ours.origins, terrain.env_origins)
    assert int(ours.levels.max()) > 0  # some envs moved up


class _Scene:
    """The scene's parts the curriculum reads: the terrain, the env origins, the robot by name."""

    def __init__(self, terrain, robot):
        self.terrain, self.env_origins, self._robot = terrain, terrain.env_origins, robot

    def __getitem__(self, name):
        return self._robot
