"""The rough task's height scan on hand-made terrains (flat, a step, a slope) against Isaac Lab's definition (base
height minus hit height minus 0.5, points on a yaw-aligned 17 x 11 grid, x fastest), and its gradient (float64
finite differences). Against Isaac Lab's own grid and observation code:
tests/isaaclab/test_height_scan_vs_isaaclab.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from diffloco_ext.sim import terrain_generator as tg
from diffloco_ext.tasks.velocity.height_scan import HeightGrid, height_scan, scan_points, scan_positions


def _quat(roll=0.0, pitch=0.0, yaw=0.0) -> torch.Tensor:
    """(w, x, y, z) of ZYX Euler angles."""
    cr, sr, cp, sp, cy, sy = (f(a / 2) for a in (roll, pitch, yaw) for f in (math.cos, math.sin))
    return torch.tensor([[cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
                          cr * cp * sy - sr * sp * cy]], dtype=torch.float64)


def test_scan_points_in_isaac_labs_order():
    p = scan_points()
    assert p.shape == (187, 2)
    expected = {0: (-0.8, -0.5), 1: (-0.7, -0.5), 16: (0.8, -0.5), 17: (-0.8, -0.4), 93: (0.0, 0.0), 186: (0.8, 0.5)}
    for k, xy in expected.items():
        assert p[k].tolist() == pytest.approx(xy, abs=1e-6), k


@pytest.mark.parametrize("yaw", [0.0, 0.7, -2.5])
def test_flat_ground_reads_base_height_minus_half_a_metre_whatever_the_pose(yaw):
    base = torch.tensor([[1.0, -2.0, 0.6]], dtype=torch.float64)
    flat = lambda x, y: torch.zeros_like(x)  # noqa: E731
    for quat in (_quat(yaw=yaw), _quat(roll=0.2, pitch=-0.3, yaw=yaw)):
        torch.testing.assert_close(height_scan(base, quat, flat), torch.full((1, 187), 0.1, dtype=torch.float64))


def test_a_step_ahead_and_to_the_right():
    """Ground 0.2 m higher for world x > 0.25 m: facing +x the points ahead of it read -0.1, the others 0.1; turned
    left by 90 degrees the step is on the robot's right (its -y side)."""
    base = torch.tensor([[0.0, 0.0, 0.6]], dtype=torch.float64)
    step = lambda x, y: torch.where(x > 0.25, 0.2, 0.0).to(x.dtype)  # noqa: E731
    p = scan_points()
    ahead = height_scan(base, _quat(), step)[0]
    torch.testing.assert_close(ahead, torch.where(p[:, 0] > 0.25, -0.1, 0.1).double())
    # yaw-aligned only: pitching the base does not move the points
    torch.testing.assert_close(height_scan(base, _quat(pitch=0.4), step)[0], ahead)
    left = height_scan(base, _quat(yaw=math.pi / 2), step)[0]
    torch.testing.assert_close(left, torch.where(p[:, 1] < -0.25, -0.1, 0.1).double())


def test_a_slope_under_a_turned_base():
    base = torch.tensor([[2.0, 1.0, 1.0]], dtype=torch.float64)
    slope = lambda x, y: 0.2 * x - 0.1 * y  # noqa: E731
    yaw = 0.6
    p = scan_points()
    wx = 2.0 + math.cos(yaw) * p[:, 0] - math.sin(yaw) * p[:, 1]
    wy = 1.0 + math.sin(yaw) * p[:, 0] + math.cos(yaw) * p[:, 1]
    torch.testing.assert_close(height_scan(base, _quat(yaw=yaw), slope)[0], 1.0 - (0.2 * wx - 0.1 * wy) - 0.5)


def test_height_grid_is_the_generated_terrains_bilinear_surface():
    terrain = tg.generate(tg.rough_terrains_cfg(num_rows=2, num_cols=5, border_width=1.0, seed=3))
    grid = HeightGrid.of(terrain)
    gen = np.random.default_rng(0)
    x = gen.uniform(-9.5, 9.5, 500)
    y = gen.uniform(-21.5, 21.5, 500)
    np.testing.assert_allclose(grid(torch.tensor(x), torch.tensor(y)).numpy(), terrain.height_at(x, y), atol=1e-12)


def test_scan_gradient_in_the_base_pose_matches_finite_differences():
    """float64 finite differences of the scan on the stairs tile w.r.t. the base position and orientation."""
    terrain = tg.generate(tg.rough_terrains_cfg(num_rows=1, num_cols=1, border_width=1.0, seed=0,
                                                difficulty_range=(0.5, 0.5), sub_terrains={
                                                    "slope": tg.PyramidSlopeCfg()}))
    grid = HeightGrid.of(terrain)
    pos = torch.tensor([[1.23, -0.71, 0.9]], dtype=torch.float64, requires_grad=True)
    quat = _quat(roll=0.1, pitch=-0.05, yaw=0.4).requires_grad_(True)
    torch.autograd.gradcheck(lambda p, q: height_scan(p, q, grid), (pos, quat), eps=1e-6, atol=1e-6)


def test_scan_positions_rotate_with_yaw():
    xy = scan_positions(torch.zeros(1, 3, dtype=torch.float64), _quat(yaw=math.pi / 2), scan_points())
    assert xy[0, 186].tolist() == pytest.approx([-0.5, 0.8], abs=1e-6)  # front-left corner, turned left
