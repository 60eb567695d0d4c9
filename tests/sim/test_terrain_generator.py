"""The terrain generator's layout (Isaac Lab's rough terrain: levels along x, types along y, a flat border), its
tiles' shapes at hand-checked nodes, determinism, the height field it gives the simulator, and bad configs as
one-line errors. (Tile by tile against Isaac Lab's own functions:
tests/isaaclab/test_terrain_generator_vs_isaaclab.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from diffloco_ext.sim import terrain_generator as tg


@pytest.fixture(scope="module")
def rough():
    return tg.generate(tg.rough_terrains_cfg(seed=5))


def test_rough_layout_is_isaac_labs(rough):
    assert rough.heights.shape == (10 * 80 + 400 + 1, 20 * 80 + 400 + 1)
    assert rough.origin_xy == (-60.0, -100.0)
    assert rough.tile_types == (["pyramid_stairs"] * 4 + ["pyramid_stairs_inv"] * 4 + ["boxes"] * 4
                                + ["random_rough"] * 4 + ["hf_pyramid_slope"] * 2 + ["hf_pyramid_slope_inv"] * 2)
    r, c = np.meshgrid(np.arange(10), np.arange(20), indexing="ij")
    np.testing.assert_allclose(rough.tile_origins[..., 0], 8 * r - 36)
    np.testing.assert_allclose(rough.tile_origins[..., 1], 8 * c - 76)
    rows = np.arange(10)[:, None]
    assert ((rough.difficulty >= rows / 10) & (rough.difficulty < (rows + 1) / 10)).all()  # row r: level r
    border = 200
    assert not rough.heights[:border].any() and not rough.heights[-border:].any()
    assert not rough.heights[:, :border].any() and not rough.heights[:, -border:].any()


def test_tiles_at_hand_checked_nodes(rough):
    """Stairs: 6 rings of 0.3 m inside the 1-m band, the centre at 7 steps; the pit mirrored; the origins on top."""
    for col, sign in ((0, 1), (4, -1)):
        d = rough.difficulty[3, col]
        h = 0.05 + d * 0.18
        x0, y0, z0 = rough.tile_origins[3, col]
        assert z0 == pytest.approx(sign * 7 * h)
        # along the tile's x axis through its centre: band (|u| > 3), rings, centre square (|u| <= 1.2)
        for u, level in ((3.5, 0), (2.9, 1), (2.6, 2), (2.0, 4), (1.3, 6), (1.1, 7), (0.0, 7)):  # nodes
            assert rough.height_at(x0 + u, y0) == pytest.approx(sign * level * h, abs=1e-9), (col, u)
        # a node on a riser (0.3 m in from the band) takes the higher side: the second ring up, the first ring down
        assert rough.height_at(x0 + 2.7, y0) == pytest.approx(2 * h if sign > 0 else -h, abs=1e-9)
    slope = rough.tile_origins[9, 16]
    assert slope[2] > 0.6 and rough.height_at(slope[0], slope[1]) == pytest.approx(slope[2])
    boxes = rough.tile_origins[5, 8]
    g = 0.05 + rough.difficulty[5, 8] * 0.15
    assert boxes[2] == pytest.approx(g) and rough.height_at(boxes[0] + 0.9, boxes[1] - 0.9) == pytest.approx(g)
    tile = rough.heights[200 + 5 * 80: 200 + 6 * 80 + 1, 200 + 8 * 80: 200 + 9 * 80 + 1]
    assert np.abs(tile).max() <= g + 1e-9 and len(np.unique(np.round(tile, 9))) > 100  # 289 boxes at U(-g, g)
    rough_tile = rough.heights[200: 200 + 81, 200 + 12 * 80: 200 + 13 * 80 + 1]
    assert set(np.round(rough_tile[3:-3, 3:-3], 9).ravel()) <= {0.02, 0.04, 0.06, 0.08, 0.1}


def test_the_same_seed_gives_the_same_terrain_and_another_seed_another():
    small = dict(num_rows=2, num_cols=5, border_width=1.0)
    a, b = tg.generate(tg.rough_terrains_cfg(seed=1, **small)), tg.generate(tg.rough_terrains_cfg(seed=1, **small))
    c = tg.generate(tg.rough_terrains_cfg(seed=2, **small))
    np.testing.assert_array_equal(a.heights, b.heights)
    assert not np.array_equal(a.heights, c.heights)


def test_height_field_for_the_simulator():
    terrain = tg.generate(tg.rough_terrains_cfg(num_rows=2, num_cols=5, border_width=1.0))
    field = terrain.height_field()
    np.testing.assert_array_equal(field.node_heights(), terrain.heights)
    assert field.grid == (-9.0, -21.0, 0.1, 0.1)
    xs = terrain.origin_xy[0] + 0.1 * np.arange(terrain.heights.shape[0])
    np.testing.assert_allclose(terrain.height_at(xs, np.full_like(xs, -21.0)), terrain.heights[:, 0], atol=1e-12)


@pytest.mark.parametrize("override, match", [
    (dict(sub_terrains={}), "sub_terrains is empty"),
    (dict(num_rows=0), "num_rows must be an integer >= 1"),
    (dict(size=(8.05, 8.0)), "whole number of resolution"),
    (dict(resolution=-0.1), "resolution must be > 0"),
    (dict(difficulty_range=(0.5, 1.5)), r"difficulty_range must lie in \[0, 1\]"),
    (dict(sub_terrains={"stairs": tg.PyramidStairsCfg(step_height_range=(0.2, 0.1))}), "step_height_range"),
    (dict(sub_terrains={"rough": tg.RandomRoughCfg(proportion=0.0)}), "rough.proportion must be > 0"),
    (dict(sub_terrains={"boxes": tg.RandomBoxesCfg()}, size=(8.0, 6.0)), "square"),
    (dict(sub_terrains={"x": object()}), "not a sub-terrain config"),
])
def test_bad_configs_are_one_line_errors(override, match):
    cfg = tg.rough_terrains_cfg(**override)
    with pytest.raises(ValueError, match=match) as err:
        tg.generate(cfg)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="no field 'levels'"):
        tg.rough_terrains_cfg(levels=3)


def test_mujoco_height_field_is_the_same_ground():
    """MuJoCo's hfield built from the generated heights (``to_mjspec(robot, terrain=...)``): rays cast down onto it
    meet the simulator's surface at the nodes and along the cell edges (where MuJoCo's two triangles per cell and the
    simulator's bilinear patch coincide), over stairs, pits, boxes and random rough."""
    import mujoco

    from diffloco_ext.assets import get_robot
    from diffloco_ext.assets.mjcf_exporter import to_mjmodel

    terrain = tg.generate(tg.rough_terrains_cfg(num_rows=2, num_cols=5, border_width=1.0, seed=4, sub_terrains={
        k: v for k, v in tg.rough_terrains_cfg().sub_terrains.items() if "slope" not in k}))
    model = to_mjmodel(get_robot("anymal_d"), terrain=(terrain.heights, terrain.origin_xy, 0.1), actuators="none")
    data = mujoco.MjData(model)
    data.qpos[2] = 50.0  # the robot (free base) far above the field: the rays meet the ground only
    mujoco.mj_forward(model, data)
    gen = np.random.default_rng(0)
    i = gen.integers(0, terrain.heights.shape[0] - 1, 300)
    j = gen.integers(0, terrain.heights.shape[1] - 1, 300)
    along = gen.uniform(0.0, 1.0, 300)
    x = terrain.origin_xy[0] + 0.1 * np.concatenate([i, i + along, i])  # nodes, edges along x, edges along y
    y = terrain.origin_xy[1] + 0.1 * np.concatenate([j, j, j + along])
    geom = np.zeros(1, dtype=np.int32)
    hit = np.array([10.0 - mujoco.mj_ray(model, data, np.array([px, py, 10.0]), np.array([0.0, 0.0, -1.0]), None, 1,
                                         -1, geom) for px, py in zip(x, y)])
    np.testing.assert_allclose(hit, terrain.height_at(x, y), atol=2e-6)
    assert np.ptp(hit) > 0.5  # stairs up and pits down: a real relief


def test_rows_at_given_difficulties():
    from diffloco_ext.sim.terrain_generator import generate, rough_terrains_cfg

    terrain = generate(rough_terrains_cfg(num_rows=2, num_cols=6, border_width=1.0, row_difficulties=(0.28, 0.91)))
    assert terrain.difficulty[:, 0].tolist() == [0.28, 0.91] and (terrain.difficulty[0] == 0.28).all()
    for bad in ((0.5,), (0.2, 1.5)):
        with pytest.raises(ValueError, match="row_difficulties"):
            generate(rough_terrains_cfg(num_rows=2, num_cols=6, row_difficulties=bad))
