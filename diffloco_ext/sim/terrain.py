"""The ground the contact code queries: a flat plane (default) or a height field shared by all environments.

A terrain answers one question for a world point ``x`` (m): the local tangent plane of the ground below it,
as a unit normal ``n`` and an offset ``d`` (m) with the plane ``{p : n . p = d}``. The signed gap of a sphere of
radius ``r`` centred at ``c`` is then ``n . c - d - r`` (m, negative in penetration), exact for any plane.

* **Flat** (``Model.terrain is None``): the plane ``z = ground_height[e]`` of environment ``e`` (per env,
  :func:`~.model.build_model`'s ``ground_height``); ``n = (0, 0, 1)``, ``d = ground_height[e]``. No height-field
  lookup at all: the kernels take the terrain kind as a runtime switch (one integer test per query) and on flat
  ground run the same arithmetic as before height fields existed.
* **Height field** (:class:`HeightField`): heights ``heights[i, j]`` (m) on a regular grid in the world's xy
  plane, node ``(i, j)`` at ``(x, y) = (origin_x + i dx, origin_y + j dy)`` (row index along x, column index
  along y), shared by all environments (place each environment's robot on its own patch, as Isaac Lab's terrain
  origins do); the per-env ``ground_height[e]`` is added (0 by default). Between nodes the surface is the
  bilinear interpolation ``h(x, y)``; its normal is ``(-dh/dx, -dh/dy, 1)`` normalised, taken from the cell's
  bilinear patch (continuous within a cell; it jumps across cell edges where the slopes differ). The tangent
  plane is taken at the point ``(x, y, h(x, y))`` directly below ``x``: ``d = n . (x, y, h)``.
  **Outside the field** the point is clamped to the field's edge: ``h(x, y) = h(clamp x, clamp y)``, so the
  ground continues horizontally from the edge heights (the slope across the edge is zero).

Gradients: the query is a small ``wp.func`` differentiated by Warp's automatic adjoint inside the kernels that
call it (foot contact geometry, body gaps), w.r.t. the point (the heights themselves are constants).
"""


import functools
from dataclasses import dataclass

import numpy as np
import warp as wp

from .warp_setup import NUMPY_DTYPES, warp_types

TERRAIN_KINDS = ("flat", "heightfield")


@dataclass(frozen=True)
class HeightField:
    """A height field on a regular grid (see the module docstring for the layout).

    Attributes:
        heights: ``[rows, cols]`` heights (m), ``rows >= 2`` along x, ``cols >= 2`` along y.
        spacing: Grid spacing (m): one number, or ``(dx, dy)``.
        origin: World ``(x, y)`` of node ``[0, 0]`` (m); a third number, if given, is added to every height.
    """

    heights: np.ndarray
    spacing: float | tuple[float, float] = 0.1
    origin: tuple[float, ...] = (0.0, 0.0)

    def __post_init__(self) -> None:
        h = np.asarray(self.heights, dtype=np.float64)
        if h.ndim != 2 or h.shape[0] < 2 or h.shape[1] < 2:
            raise ValueError(f"HeightField: heights must be [rows >= 2, cols >= 2], got shape {h.shape}")
        if not np.isfinite(h).all():
            raise ValueError("HeightField: heights must be finite")
        dx, dy = self.step
        if not (np.isfinite(dx) and np.isfinite(dy) and dx > 0 and dy > 0):
            raise ValueError(f"HeightField: spacing must be positive, got {self.spacing}")
        if len(self.origin) not in (2, 3) or not np.isfinite(self.origin).all():
            raise ValueError(f"HeightField: origin must be 2 or 3 finite numbers, got {self.origin}")

    @property
    def step(self) -> tuple[float, float]:
        s = np.atleast_1d(np.asarray(self.spacing, dtype=np.float64))
        return (float(s[0]), float(s[-1])) if s.size in (1, 2) else (float("nan"), float("nan"))

    @property
    def grid(self) -> tuple[float, float, float, float]:
        """``(origin_x, origin_y, dx, dy)`` (m)."""
        return (float(self.origin[0]), float(self.origin[1]), *self.step)

    def node_heights(self) -> np.ndarray:
        """``[rows, cols]`` heights (m) with the origin's z offset applied."""
        z = float(self.origin[2]) if len(self.origin) == 3 else 0.0
        return np.asarray(self.heights, dtype=np.float64) + z

    def height_at(self, x, y) -> np.ndarray:
        """The surface's height (m) at world points ``x``, ``y`` (numpy, m): bilinear within a cell, clamped to the
        field's edge outside it (the kernels' lookup, in numpy)."""
        dx, dy = self.step
        h = np.asarray(self.heights, dtype=np.float64)  # no copy of a float64 field: this runs every policy step
        z = float(self.origin[2]) if len(self.origin) == 3 else 0.0
        nx, ny = h.shape
        s = np.clip((np.asarray(x, dtype=np.float64) - self.origin[0]) / dx, 0.0, nx - 1)
        t = np.clip((np.asarray(y, dtype=np.float64) - self.origin[1]) / dy, 0.0, ny - 1)
        i, j = np.minimum(np.floor(s).astype(int), nx - 2), np.minimum(np.floor(t).astype(int), ny - 2)
        fs, ft = s - i, t - j
        return ((1 - fs) * (1 - ft) * h[i, j] + fs * (1 - ft) * h[i + 1, j] + (1 - fs) * ft * h[i, j + 1]
                + fs * ft * h[i + 1, j + 1]) + z

    @staticmethod
    def from_function(fn, x_range: tuple[float, float], y_range: tuple[float, float], spacing: float):
        """Sample ``fn(x, y)`` (numpy, m) on nodes covering ``x_range`` x ``y_range`` (m) every ``spacing``."""
        nx = int(np.ceil((x_range[1] - x_range[0]) / spacing - 1e-9)) + 1
        ny = int(np.ceil((y_range[1] - y_range[0]) / spacing - 1e-9)) + 1
        xs = x_range[0] + spacing * np.arange(nx)
        ys = y_range[0] + spacing * np.arange(ny)
        X, Y = np.meshgrid(xs, ys, indexing="ij")
        return HeightField(np.asarray(fn(X, Y), dtype=np.float64), spacing, (x_range[0], y_range[0]))


@dataclass
class TerrainData:
    """A terrain on the device: its kind, and for a height field the heights ``[rows, cols]`` and grid."""

    kind: str
    heights: wp.array  # [rows, cols] scalar (m); a 2x2 zero stand-in for flat ground (never read)
    grid: object  # vec4 (origin_x, origin_y, dx, dy) (m)
    field: HeightField | None = None


def terrain_data(field: HeightField | None, dtype, device: str) -> TerrainData:
    """Put ``field`` (None: flat ground) on ``device`` in precision ``dtype``."""
    npd = NUMPY_DTYPES[dtype]
    vec4 = wp.types.vector(4, dtype)
    if field is None:
        return TerrainData("flat", wp.zeros((2, 2), dtype=dtype, device=device), vec4(0.0, 0.0, 1.0, 1.0))
    return TerrainData("heightfield", wp.array(field.node_heights().astype(npd), dtype=dtype, device=device),
                       vec4(*field.grid), field)


def terrain_inputs(model) -> list:
    """The terrain arguments of the kernels that query the ground, after ``ground_height``: the kind (0 flat,
    1 height field), the heights and the grid. A model without terrain data is flat."""
    terrain = getattr(model, "terrain", None)
    if terrain is None:
        terrain = _flat_stand_in(model.dtype, model.device)
    return [TERRAIN_KINDS.index(terrain.kind), terrain.heights, terrain.grid]


@functools.cache
def _flat_stand_in(dtype, device: str) -> TerrainData:
    return terrain_data(None, dtype, device)


@functools.cache
def terrain_funcs(dtype):
    """``terrain_query(kind, ground_height, heights, grid, x) -> (d, n)`` (see the module docstring): ``kind`` 0
    is flat ground (``heights`` and ``grid`` are not read), 1 the height field."""
    t = warp_types(dtype)
    vec3 = t.vec3
    vec4 = wp.types.vector(4, dtype)
    zero = dtype(0.0)
    one = dtype(1.0)

    @wp.func
    def _grid_axis(coord: dtype, origin: dtype, spacing: dtype, nodes: int):
        """Cell index, fraction in the cell (clamped to the field) and 1 inside / 0 outside, along one axis."""
        s = (coord - origin) / spacing
        sc = wp.clamp(s, zero, dtype(nodes - 1))
        inside = one
        if sc != s:
            inside = zero
        i = wp.min(int(wp.floor(sc)), nodes - 2)
        return i, sc - dtype(i), inside

    @wp.func
    def heightfield_query(ground_height: dtype, heights: wp.array2d(dtype=dtype), grid: vec4, x: vec3):
        """Tangent plane of the bilinear height field below ``x``: offset ``d`` (m) and unit normal."""
        i, a, in_x = _grid_axis(x[0], grid[0], grid[2], heights.shape[0])
        j, b, in_y = _grid_axis(x[1], grid[1], grid[3], heights.shape[1])
        h00 = heights[i, j]
        h10 = heights[i + 1, j]
        h01 = heights[i, j + 1]
        h11 = heights[i + 1, j + 1]
        h = (one - a) * (one - b) * h00 + a * (one - b) * h10 + (one - a) * b * h01 + a * b * h11 + ground_height
        hx = in_x * ((one - b) * (h10 - h00) + b * (h11 - h01)) / grid[2]
        hy = in_y * ((one - a) * (h01 - h00) + a * (h11 - h10)) / grid[3]
        n = wp.normalize(vec3(-hx, -hy, one))
        return wp.dot(n, vec3(x[0], x[1], h)), n

    @wp.func
    def terrain_query(kind: int, ground_height: dtype, heights: wp.array2d(dtype=dtype), grid: vec4, x: vec3):
        """The ground's tangent plane below ``x``: offset ``d`` (m) and unit normal ``n``, plane ``n . p = d``."""
        d = ground_height
        n = vec3(zero, zero, one)
        if kind != 0:
            d, n = heightfield_query(ground_height, heights, grid, x)
        return d, n

    return terrain_query


@functools.cache
def _query_kernel(dtype):
    vec3 = warp_types(dtype).vec3
    vec4 = wp.types.vector(4, dtype)
    query = terrain_funcs(dtype)

    @wp.kernel
    def terrain_points(
        # Model:
        ground_height: wp.array(dtype=dtype),
        terrain_kind: int,
        heights: wp.array2d(dtype=dtype),
        grid: vec4,
        # In:
        points_in: wp.array2d(dtype=vec3),
        # Out:
        height_out: wp.array2d(dtype=dtype),
        normal_out: wp.array2d(dtype=vec3),
        gap_out: wp.array2d(dtype=dtype),
    ):
        e, k = wp.tid()
        x = points_in[e, k]
        d, n = query(terrain_kind, ground_height[e], heights, grid, x)
        # ground height below x: the tangent plane n . p = d at p = (x, y, z), solved for z
        height_out[e, k] = (d - n[0] * x[0] - n[1] * x[1]) / n[2]
        normal_out[e, k] = n
        gap_out[e, k] = wp.dot(n, x) - d

    return terrain_points


def query_terrain(model, points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ground height (m) below, unit normal at, and signed distance (m, along the normal, of the local tangent
    plane) of world ``points`` ``[N, P, 3]`` (m, env ``e``'s points on env ``e``'s ground) of ``model``'s terrain.
    Returns numpy ``height [N, P]``, ``normal [N, P, 3]``, ``gap [N, P]``. For tests, tools and task code."""
    npd = NUMPY_DTYPES[model.dtype]
    pts = np.asarray(points, dtype=npd)
    if pts.ndim != 3 or pts.shape[0] != model.num_envs or pts.shape[2] != 3:
        raise ValueError(f"points must be [num_envs={model.num_envs}, P, 3], got {pts.shape}")
    N, P = pts.shape[:2]
    t = warp_types(model.dtype)
    kw = dict(device=model.device)
    height = wp.empty((N, P), dtype=model.dtype, **kw)
    normal = wp.empty((N, P), dtype=t.vec3, **kw)
    gap = wp.empty((N, P), dtype=model.dtype, **kw)
    wp.launch(_query_kernel(model.dtype), dim=(N, P), inputs=[
        model.ground_height, *terrain_inputs(model), wp.array(pts, dtype=t.vec3, **kw), height, normal, gap], **kw)
    return height.numpy(), normal.numpy(), gap.numpy()
