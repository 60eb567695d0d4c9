"""The terrain generator against Isaac Lab 3.0's own sub-terrain functions (``isaaclab.terrains``), tile by tile at
several difficulties: the height-field types node for node (the vertex heights of Isaac Lab's mesh), the mesh types
by casting rays down onto Isaac Lab's meshes at every node (the higher side where a node lies on a riser), and the
origins; the random types from the same seed (Isaac Lab draws from numpy's and torch's global generators)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.sim import terrain_generator as tg

CFG = tg.rough_terrains_cfg()


def _top_of(meshes, x, y, tol: float = 1e-7) -> np.ndarray:
    """The highest surface of ``meshes`` above each node of the grid ``x`` [nx] x ``y`` [ny]: every non-vertical
    triangle is projected onto the nodes inside its bounding box (barycentric, edges and corners included, so a node
    on a riser gets the higher side)."""
    best = np.full((len(x), len(y)), -np.inf)
    res = x[1] - x[0]
    for mesh in meshes:
        tri = np.asarray(mesh.vertices, dtype=np.float64)[np.asarray(mesh.faces)]
        for a, b, c in tri:
            det = (b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])
            if abs(det) < 1e-12:
                continue  # a vertical face
            lo, hi = np.minimum(np.minimum(a, b), c), np.maximum(np.maximum(a, b), c)
            i0 = max(0, int(np.ceil((lo[0] - x[0]) / res - 1e-6)))
            i1 = min(len(x) - 1, int((hi[0] - x[0]) / res + 1e-6))
            j0 = max(0, int(np.ceil((lo[1] - y[0]) / res - 1e-6)))
            j1 = min(len(y) - 1, int((hi[1] - y[0]) / res + 1e-6))
            if i1 < i0 or j1 < j0:
                continue
            X, Y = np.meshgrid(x[i0:i1 + 1], y[j0:j1 + 1], indexing="ij")
            u = ((X - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (Y - a[1])) / det
            v = ((b[0] - a[0]) * (Y - a[1]) - (X - a[0]) * (b[1] - a[1])) / det
            inside = (u >= -tol) & (v >= -tol) & (u + v <= 1 + tol)
            z = a[2] + u * (b[2] - a[2]) + v * (c[2] - a[2])
            patch = best[i0:i1 + 1, j0:j1 + 1]
            patch[inside] = np.maximum(patch[inside], z[inside])
    return best


def _isaaclab_sub_cfg(name: str):
    from isaaclab.terrains.config.rough import ROUGH_TERRAINS_CFG

    sub = ROUGH_TERRAINS_CFG.sub_terrains[name].copy()
    sub.size = CFG.size
    if hasattr(sub, "horizontal_scale"):
        sub.horizontal_scale, sub.vertical_scale, sub.slope_threshold = 0.1, 0.005, 0.75
    return sub


def test_our_rough_config_is_isaac_labs():
    from isaaclab.terrains.config.rough import ROUGH_TERRAINS_CFG as IL

    assert (IL.size, IL.num_rows, IL.num_cols, IL.border_width) == (CFG.size, CFG.num_rows, CFG.num_cols,
                                                                     CFG.border_width)
    assert (IL.horizontal_scale, IL.vertical_scale) == (CFG.resolution, CFG.vertical_scale)
    assert list(IL.sub_terrains) == list(CFG.sub_terrains)
    for name, ours in CFG.sub_terrains.items():
        theirs = IL.sub_terrains[name]
        assert theirs.proportion == ours.proportion
        for key in ("step_height_range", "step_width", "platform_width", "border_width", "grid_width",
                    "grid_height_range", "noise_range", "noise_step", "slope_range"):
            if hasattr(ours, key):
                assert getattr(theirs, key) == getattr(ours, key), (name, key)
        if hasattr(ours, "inverted"):  # Isaac Lab: a field of the slopes, a class of its own for the stairs
            assert getattr(theirs, "inverted", "Inverted" in type(theirs).__name__) == ours.inverted, name


@pytest.mark.parametrize("name", ["hf_pyramid_slope", "hf_pyramid_slope_inv"])
@pytest.mark.parametrize("difficulty", [0.05, 0.5, 0.93])
def test_slopes_equal_isaac_labs_height_field(name, difficulty):
    sub = _isaaclab_sub_cfg(name)
    meshes, origin = sub.function(difficulty, sub)
    theirs = np.asarray(meshes[0].vertices, dtype=np.float64)[:, 2].reshape(81, 81)
    ours, z = tg.sub_terrain_tile(CFG.sub_terrains[name], difficulty, CFG, seed=0)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    np.testing.assert_allclose([4.0, 4.0, z], origin, atol=1e-6)


def test_random_rough_equals_isaac_labs_from_the_same_seed():
    """Compared before Isaac Lab's mesh conversion (its walls move vertices sideways, which trimesh then merges):
    the inner field its function returns, inside the 3-pixel border its decorator adds."""
    sub = _isaaclab_sub_cfg("random_rough")
    sub.size = tuple((81 - 2 * 3) * sub.horizontal_scale for _ in range(2))  # as the decorator sets it
    np.random.seed(1234)
    from isaaclab.terrains.height_field.hf_terrains import random_uniform_terrain

    inner, origin = random_uniform_terrain.__wrapped__(0.7, sub)
    ours, z = tg.sub_terrain_tile(CFG.sub_terrains["random_rough"], 0.7, CFG, seed=1234)
    assert inner.shape == (75, 75) and not ours[:3].any() and not ours[-3:].any() and not ours[:, :3].any()
    np.testing.assert_allclose(ours[3:-3, 3:-3], inner * 0.005, atol=1e-12)
    np.testing.assert_allclose([4.0, 4.0, z], origin + [0.3, 0.3, 0.0], atol=1e-9)
    assert set(np.unique(np.round(inner * 0.005, 6))) <= {0.02, 0.04, 0.06, 0.08, 0.1}


@pytest.mark.parametrize("name", ["pyramid_stairs", "pyramid_stairs_inv"])
@pytest.mark.parametrize("difficulty", [0.0, 0.28, 0.9])
def test_stairs_are_the_top_of_isaac_labs_mesh_at_every_node(name, difficulty):
    sub = _isaaclab_sub_cfg(name)
    meshes, origin = sub.function(difficulty, sub)
    ours, z = tg.sub_terrain_tile(CFG.sub_terrains[name], difficulty, CFG, seed=0)
    x, y = tg._tile_nodes(CFG)
    np.testing.assert_allclose(ours, _top_of(meshes, x, y), atol=1e-6)
    np.testing.assert_allclose([4.0, 4.0, z], origin, atol=1e-9)


@pytest.mark.parametrize("difficulty", [0.1, 0.8])
def test_boxes_are_the_top_of_isaac_labs_mesh_from_the_same_seed(difficulty):
    sub = _isaaclab_sub_cfg("boxes")
    torch.manual_seed(77)
    meshes, origin = sub.function(difficulty, sub)
    ours, z = tg.sub_terrain_tile(CFG.sub_terrains["boxes"], difficulty, CFG, seed=77)
    x, y = tg._tile_nodes(CFG)
    np.testing.assert_allclose(ours, _top_of(meshes, x, y), atol=1e-6)
    np.testing.assert_allclose([4.0, 4.0, z], origin, atol=1e-6)


def test_layout_and_origins_follow_isaac_labs_generator():
    """Column types, row difficulties and tile origins of Isaac Lab's curriculum layout (a small 3 x 5 terrain of
    the rough types; their generator with the same config)."""
    from isaaclab.terrains import TerrainGenerator
    from isaaclab.terrains.config.rough import ROUGH_TERRAINS_CFG

    il_cfg = ROUGH_TERRAINS_CFG.copy()
    il_cfg.num_rows, il_cfg.num_cols, il_cfg.curriculum, il_cfg.seed = 3, 5, True, 3
    il_cfg.difficulty_range = (0.0, 0.0)  # every tile at difficulty 0: the origins' heights are then deterministic
    il_cfg.sub_terrains = {k: v for k, v in il_cfg.sub_terrains.items() if k != "random_rough"}
    theirs = TerrainGenerator(il_cfg)
    ours = tg.generate(tg.rough_terrains_cfg(num_rows=3, num_cols=5, difficulty_range=(0.0, 0.0), sub_terrains={
        k: v for k, v in tg.rough_terrains_cfg().sub_terrains.items() if k != "random_rough"}))
    # proportions 0.25, 0.25, 0.25, 0.125, 0.125 over 5 columns (Isaac Lab's rule; the origins' heights below differ
    # per type at difficulty 0: stairs 0.35, pit -0.35, boxes 0.05, slopes 0)
    assert ours.tile_types == ["pyramid_stairs", "pyramid_stairs", "pyramid_stairs_inv", "boxes", "hf_pyramid_slope"]
    np.testing.assert_allclose(ours.tile_origins[..., :2], theirs.terrain_origins[..., :2], atol=1e-6)
    # heights of the origins where the difficulty fixes them (stairs, slopes; the boxes' platform at 0.05 m)
    np.testing.assert_allclose(ours.tile_origins[..., 2], theirs.terrain_origins[..., 2], atol=1e-6)
