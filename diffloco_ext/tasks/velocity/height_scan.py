"""The rough task's height scan: Isaac Lab 3.0's ``height_scan`` observation of its ``height_scanner``, exactly.

Isaac Lab's rough velocity task (``isaaclab_tasks/core/velocity/velocity_env_cfg.py``) casts rays straight down from
a grid attached to the base with its **yaw only** (``RayCasterCfg(ray_alignment="yaw", offset=(0, 0, 20),
pattern_cfg=GridPatternCfg(resolution=0.1, size=(1.6, 1.0)))``) and observes, per ray (``isaaclab/envs/mdp/
observations.py: height_scan``, offset 0.5 m),

    scan_k = z_base - z_hit,k - 0.5      (m; then noise U(-0.1, 0.1) and a clip to [-1, 1] in the training config)

with ``z_base`` the base frame's origin height (not the ray start 20 m above it) and ``z_hit,k`` the terrain's top at
the world point ``p_base,xy + R_yaw (x_k, y_k)``. The grid (:func:`scan_points`): ``x`` from -0.8 to 0.8 m (forward),
``y`` from -0.5 to 0.5 m (left), every 0.1 m, both ends included: 17 x 11 = 187 points, **x fastest**: point
``k = 17 iy + ix`` is at ``(-0.8 + 0.1 ix, -0.5 + 0.1 iy)`` (Isaac Lab's ``ordering="xy"``; the first point is the
rear right corner, the last the front left).

On a height field the first hit of a downward ray is the surface's height at the point, so the scan is a lookup:
:func:`height_scan` takes the terrain as a function of world ``(x, y)`` (:class:`HeightGrid`: bilinear on a grid, as
the simulator's height field) and is differentiable in the base pose (torch autograd).
"""

from __future__ import annotations

import torch

#: Isaac Lab's height scanner of the rough ANYmal-D task.
RESOLUTION = 0.1  # m
SIZE = (1.6, 1.0)  # m: (forward extent, lateral extent)
OFFSET = 0.5  # m: subtracted from every ray's height difference
CLIP = 1.0  # the training config's clip (after the noise)
NOISE = 0.1  # half-width (m) of the training config's uniform noise


def scan_points(resolution: float = RESOLUTION, size: tuple[float, float] = SIZE,
                dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """[P, 2] the grid's points in the base's yaw frame (m), in Isaac Lab's order (x fastest; see the module
    docstring). The coordinates are generated in float32 as Isaac Lab's are (``-0.2`` is ``-0.20000002``)."""
    if not resolution > 0:
        raise ValueError(f"height scan resolution must be > 0 m, got {resolution}")
    xs = torch.arange(-size[0] / 2, size[0] / 2 + 1e-9, resolution, dtype=torch.float32)
    ys = torch.arange(-size[1] / 2, size[1] / 2 + 1e-9, resolution, dtype=torch.float32)
    # row iy of the lateral coordinate, column ix of the forward one; flattened row-major: x varies fastest
    y_grid, x_grid = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([x_grid.reshape(-1), y_grid.reshape(-1)], dim=1).to(dtype)


def yaw_of(quat_wxyz: torch.Tensor) -> torch.Tensor:
    """Yaw (rad) [N] of quaternions (w, x, y, z) [N, 4]: ``atan2(2 (w z + x y), 1 - 2 (y^2 + z^2))``."""
    w, x, y, z = quat_wxyz.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def scan_positions(base_pos: torch.Tensor, base_quat_wxyz: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """[N, P, 2] world ``(x, y)`` of the scan points ``points`` [P, 2] for bases at ``base_pos`` [N, 3] (world, m)
    with orientations ``base_quat_wxyz`` [N, 4]: ``p_base,xy + R_yaw p_k``."""
    yaw = yaw_of(base_quat_wxyz)
    c, s = torch.cos(yaw)[:, None], torch.sin(yaw)[:, None]
    px, py = points[:, 0].to(base_pos.dtype)[None], points[:, 1].to(base_pos.dtype)[None]
    return torch.stack([base_pos[:, 0:1] + c * px - s * py, base_pos[:, 1:2] + s * px + c * py], dim=-1)


def height_scan(base_pos: torch.Tensor, base_quat_wxyz: torch.Tensor, ground, points: torch.Tensor | None = None,
                offset: float = OFFSET) -> torch.Tensor:
    """[N, P] Isaac Lab's ``height_scan`` (no noise, no clip): ``z_base - ground(x_k, y_k) - offset`` (m), ``ground``
    a function of world ``x``, ``y`` tensors (m) giving the terrain's top (m) (e.g. a :class:`HeightGrid`)."""
    points = scan_points(dtype=base_pos.dtype).to(base_pos.device) if points is None else points
    xy = scan_positions(base_pos, base_quat_wxyz, points)
    return base_pos[:, 2:3] - ground(xy[..., 0], xy[..., 1]) - offset


class HeightGrid:
    """A terrain's top as a torch function: heights ``[nx, ny]`` (m) at nodes ``(x0 + i res, y0 + j res)``, bilinear
    in between and clamped to the grid's edge outside it (the simulator's height field,
    :mod:`diffloco_ext.sim.terrain`), differentiable in the query point."""

    def __init__(self, heights: torch.Tensor, origin_xy: tuple[float, float], resolution: float):
        if heights.ndim != 2 or min(heights.shape) < 2:
            raise ValueError(f"HeightGrid needs heights [nx >= 2, ny >= 2], got {tuple(heights.shape)}")
        self.heights, self.origin, self.resolution = heights, (float(origin_xy[0]), float(origin_xy[1])), resolution

    @classmethod
    def of(cls, terrain, dtype: torch.dtype = torch.float64, device: str = "cpu") -> "HeightGrid":
        """The grid of a :class:`~diffloco_ext.sim.terrain_generator.GeneratedTerrain`."""
        return cls(torch.as_tensor(terrain.heights, dtype=dtype, device=device), terrain.origin_xy,
                   terrain.cfg.resolution)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        nx, ny = self.heights.shape
        s = ((x - self.origin[0]) / self.resolution).clamp(0.0, nx - 1)
        t = ((y - self.origin[1]) / self.resolution).clamp(0.0, ny - 1)
        i = s.detach().floor().long().clamp(max=nx - 2)
        j = t.detach().floor().long().clamp(max=ny - 2)
        fs, ft = s - i, t - j
        h = self.heights
        return ((1 - fs) * (1 - ft) * h[i, j] + fs * (1 - ft) * h[i + 1, j] + (1 - fs) * ft * h[i, j + 1]
                + fs * ft * h[i + 1, j + 1])
