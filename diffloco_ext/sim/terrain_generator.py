"""Isaac Lab's rough terrain as data: tiles of sub-terrains (levels x types) sampled on one height grid.

The generator follows Isaac Lab 3.0's ``TerrainGenerator`` with ``ROUGH_TERRAINS_CFG`` (``isaaclab/terrains``:
``terrain_generator.py``, ``config/rough.py``, ``height_field/hf_terrains.py``, ``trimesh/mesh_terrains.py``), in its
curriculum layout, and returns the terrain's **top surface at the nodes of a regular grid** (m), the form every
consumer takes: our height field (:class:`~.terrain.HeightField`), MuJoCo's ``hfield`` and the Isaac Lab twin's
terrain mesh are all built from the same array, so every simulator stands on the same ground.

Layout (world frame, z up; Isaac Lab's): ``num_rows`` rows of ``size`` tiles along x (the **level**: row ``r`` has
difficulty ``lo + (hi - lo) (r + U(0, 1)) / num_rows``), ``num_cols`` columns along y (the **type**: column ``c`` takes
the first sub-terrain whose cumulative proportion exceeds ``c / num_cols + 0.001``), centred on the world origin, with
a flat ``border_width`` band at z = 0 around them. Tile ``(r, c)`` spans ``x in [r sx - R sx / 2, (r + 1) sx - R sx /
2]`` (likewise y with ``c``); its **origin** (where a robot is placed) is its centre at the height
Isaac Lab gives (the stairs' top, the pit's floor, the platform's).

Sub-terrains at difficulty ``d`` (heights above z = 0 at the tile's edge, which every type keeps at 0):

* :class:`PyramidStairsCfg`: step height ``h = lo + d (hi - lo)``, ``n`` rings of ``step_width`` inside a flat
  ``border_width`` band, the ``k``-th ring's top ``(k + 1) h`` and the centre square's ``(n + 1) h`` (inverted:
  ``-(k + 1) h`` and ``-(n + 1) h``); ``n = floor((size - 2 border - platform) / (2 step)) + 1`` (6 for Isaac Lab's
  values: the centre square is 2.4 m, not ``platform_width``).
* :class:`RandomBoxesCfg`: a grid of ``grid_width`` boxes, each top at ``U(-g, g)``, ``g = lo + d (hi - lo)``, a flat
  band at 0 around them and a ``platform_width`` square at ``g`` in the middle.
* :class:`RandomRoughCfg`: every pixel (``0.1`` m) inside a ``border_width`` band drawn from
  ``{lo, lo + step, ..., hi}`` (the difficulty is not used, as in Isaac Lab).
* :class:`PyramidSlopeCfg`: ``H x(i) y(j)`` for tents ``x, y`` of the pixel index (a product of two tents, Isaac Lab's
  shape), ``H = slope (size - 2 border') / 2``, clipped to the height at the platform's corner, quantised to
  ``vertical_scale``; slope ``lo + d (hi - lo)`` (inverted: negative).

The height-field types are defined on Isaac Lab's 0.1-m pixel grid (``horizontal_scale``); the grid here has the same
spacing (``resolution``), so their nodes are Isaac Lab's vertices. The mesh types (stairs, boxes) are sampled at the
nodes; where a node lies on a riser, it takes the higher side (the top edge a downward ray meets). Between nodes the
consumers interpolate, so a riser becomes a ramp one node spacing wide (Isaac Lab's mesh has a vertical wall).

Randomness: ``seed`` seeds the tile difficulties (numpy), the rough pixels (numpy's legacy ``RandomState``, as Isaac
Lab's ``np.random.choice``) and the box heights (a torch generator, as Isaac Lab's ``uniform_``), one stream per tile,
so a tile is the same whatever the other tiles are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .terrain import HeightField


@dataclass
class SubTerrainCfg:
    """A sub-terrain type: ``proportion`` of the columns (normalised over the generator's types)."""

    proportion: float = 1.0

    def check(self, where: str) -> None:
        if not (isinstance(self.proportion, (int, float)) and math.isfinite(self.proportion) and self.proportion > 0):
            raise ValueError(f"{where}.proportion must be > 0, got {self.proportion!r}")


def _check_range(where: str, pair, low: float = 0.0) -> None:
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2
            and all(isinstance(v, (int, float)) and math.isfinite(v) for v in pair) and low <= pair[0] <= pair[1]):
        raise ValueError(f"{where} must be (low, high) with {low:g} <= low <= high, got {pair!r}")


def _check_positive(where: str, value) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{where} must be > 0, got {value!r}")


@dataclass
class PyramidStairsCfg(SubTerrainCfg):
    """Stairs up a pyramid (``inverted``: down into a pit), lengths in m; Isaac Lab's ``MeshPyramidStairsTerrainCfg``
    (``MeshInvertedPyramidStairsTerrainCfg``)."""

    step_height_range: tuple[float, float] = (0.05, 0.23)
    step_width: float = 0.3
    platform_width: float = 3.0
    border_width: float = 1.0
    inverted: bool = False

    def check(self, where: str) -> None:
        super().check(where)
        _check_range(f"{where}.step_height_range", self.step_height_range)
        for name in ("step_width", "platform_width"):
            _check_positive(f"{where}.{name}", getattr(self, name))
        if not self.border_width >= 0:
            raise ValueError(f"{where}.border_width must be >= 0, got {self.border_width!r}")


@dataclass
class RandomBoxesCfg(SubTerrainCfg):
    """A grid of boxes at random heights around a platform (Isaac Lab's ``MeshRandomGridTerrainCfg``), m."""

    grid_width: float = 0.45
    grid_height_range: tuple[float, float] = (0.05, 0.2)
    platform_width: float = 2.0

    def check(self, where: str) -> None:
        super().check(where)
        _check_range(f"{where}.grid_height_range", self.grid_height_range)
        _check_positive(f"{where}.grid_width", self.grid_width)
        _check_positive(f"{where}.platform_width", self.platform_width)


@dataclass
class RandomRoughCfg(SubTerrainCfg):
    """Independent pixel heights on a grid (Isaac Lab's ``HfRandomUniformTerrainCfg``), m."""

    noise_range: tuple[float, float] = (0.02, 0.10)
    noise_step: float = 0.02
    border_width: float = 0.25

    def check(self, where: str) -> None:
        super().check(where)
        _check_range(f"{where}.noise_range", self.noise_range)
        _check_positive(f"{where}.noise_step", self.noise_step)
        if not self.border_width >= 0:
            raise ValueError(f"{where}.border_width must be >= 0, got {self.border_width!r}")


@dataclass
class PyramidSlopeCfg(SubTerrainCfg):
    """A sloped pyramid with a platform on top (``inverted``: a pit); Isaac Lab's ``HfPyramidSlopedTerrainCfg``.
    ``slope_range`` in m/m, lengths in m."""

    slope_range: tuple[float, float] = (0.0, 0.4)
    platform_width: float = 2.0
    border_width: float = 0.25
    inverted: bool = False

    def check(self, where: str) -> None:
        super().check(where)
        _check_range(f"{where}.slope_range", self.slope_range)
        _check_positive(f"{where}.platform_width", self.platform_width)
        if not self.border_width >= 0:
            raise ValueError(f"{where}.border_width must be >= 0, got {self.border_width!r}")


@dataclass
class TerrainGeneratorCfg:
    """Tiles of sub-terrains (see the module docstring). Lengths in m.

    ``size``: one tile (x, y); ``num_rows`` levels along x, ``num_cols`` types along y; ``border_width``: the flat band
    around the tiles; ``resolution``: the node spacing of the height grid, Isaac Lab's ``horizontal_scale`` (the
    height-field types are defined on it); ``vertical_scale``: the height quantum of those types; ``difficulty_range``:
    the difficulties the rows span; ``seed``: every random draw; ``row_difficulties``: instead of the range, each
    row's difficulty given (one per row; e.g. a validation terrain with rows at the difficulties its scenarios name).
    """

    size: tuple[float, float] = (8.0, 8.0)
    num_rows: int = 10
    num_cols: int = 20
    border_width: float = 20.0
    resolution: float = 0.1
    vertical_scale: float = 0.005
    difficulty_range: tuple[float, float] = (0.0, 1.0)
    seed: int = 0
    row_difficulties: tuple[float, ...] | None = None
    sub_terrains: dict[str, SubTerrainCfg] = field(default_factory=dict)

    def check(self, where: str = "terrain") -> None:
        """One-line ``ValueError`` naming ``where`` and the field for a config the generator cannot build."""
        if not self.sub_terrains:
            raise ValueError(f"{where}.sub_terrains is empty: give at least one sub-terrain type")
        for name, sub in self.sub_terrains.items():
            if not isinstance(sub, SubTerrainCfg):
                raise ValueError(f"{where}.sub_terrains.{name} is a {type(sub).__name__}, not a sub-terrain config")
            sub.check(f"{where}.sub_terrains.{name}")
        for name in ("num_rows", "num_cols"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}.{name} must be an integer >= 1, got {value!r}")
        _check_positive(f"{where}.resolution", self.resolution)
        _check_positive(f"{where}.vertical_scale", self.vertical_scale)
        if not (isinstance(self.size, (tuple, list)) and len(self.size) == 2):
            raise ValueError(f"{where}.size must be (x, y) in m, got {self.size!r}")
        for s in self.size:
            _check_positive(f"{where}.size", s)
            nodes = s / self.resolution
            if abs(nodes - round(nodes)) > 1e-6:
                raise ValueError(f"{where}.size {self.size} must be a whole number of resolution {self.resolution} m")
        if self.size[0] != self.size[1] and any(isinstance(s, RandomBoxesCfg) for s in self.sub_terrains.values()):
            raise ValueError(f"{where}.size must be square for random boxes (Isaac Lab's), got {self.size}")
        if not (self.border_width >= 0 and abs(self.border_width / self.resolution
                                                 - round(self.border_width / self.resolution)) < 1e-6):
            raise ValueError(f"{where}.border_width must be >= 0 and a whole number of resolution "
                             f"{self.resolution} m, got {self.border_width!r}")
        _check_range(f"{where}.difficulty_range", self.difficulty_range)
        if self.difficulty_range[1] > 1.0:
            raise ValueError(f"{where}.difficulty_range must lie in [0, 1], got {self.difficulty_range}")
        if self.row_difficulties is not None:
            rows = list(self.row_difficulties)
            if len(rows) != self.num_rows or not all(
                    isinstance(d, (int, float)) and not isinstance(d, bool) and 0.0 <= d <= 1.0 for d in rows):
                raise ValueError(f"{where}.row_difficulties must give one difficulty in [0, 1] per row "
                                 f"({self.num_rows}), got {self.row_difficulties!r}")


#: Isaac Lab 3.0's ``ROUGH_TERRAINS_CFG`` (``isaaclab/terrains/config/rough.py``), the rough task's terrain.
def rough_terrains_cfg(**overrides) -> TerrainGeneratorCfg:
    """A new config with Isaac Lab's rough-terrain values (``overrides``: fields of :class:`TerrainGeneratorCfg`)."""
    cfg = TerrainGeneratorCfg(sub_terrains={
        "pyramid_stairs": PyramidStairsCfg(proportion=0.2),
        "pyramid_stairs_inv": PyramidStairsCfg(proportion=0.2, inverted=True),
        "boxes": RandomBoxesCfg(proportion=0.2),
        "random_rough": RandomRoughCfg(proportion=0.2),
        "hf_pyramid_slope": PyramidSlopeCfg(proportion=0.1),
        "hf_pyramid_slope_inv": PyramidSlopeCfg(proportion=0.1, inverted=True),
    })
    for key, value in overrides.items():
        if not hasattr(cfg, key):
            raise ValueError(f"terrain has no field '{key}'")
        setattr(cfg, key, value)
    return cfg


@dataclass
class GeneratedTerrain:
    """The generator's output (see the module docstring).

    ``heights`` [nx, ny]: the top surface (m) at node ``(i, j)`` = ``(x0 + i res, y0 + j res)``, ``origin_xy`` =
    ``(x0, y0)``; ``tile_origins`` [num_rows, num_cols, 3]: where a robot is placed on each tile (world, m);
    ``tile_types`` [num_cols]: the sub-terrain name of each column; ``difficulty`` [num_rows, num_cols].
    """

    cfg: TerrainGeneratorCfg
    heights: np.ndarray
    origin_xy: tuple[float, float]
    tile_origins: np.ndarray
    tile_types: list[str]
    difficulty: np.ndarray

    def height_field(self) -> HeightField:
        """The simulator's :class:`~.terrain.HeightField` of these heights (made once: it checks the whole grid)."""
        field = self.__dict__.get("_field")
        if field is None:
            field = self.__dict__["_field"] = HeightField(self.heights, self.cfg.resolution, self.origin_xy)
        return field

    def height_at(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Bilinear height (m) at world points (the simulator's interpolation; clamped to the grid)."""
        return self.height_field().height_at(x, y)


def column_types(cfg: TerrainGeneratorCfg) -> list[str]:
    """The sub-terrain of each column: Isaac Lab's curriculum rule (cumulative proportions over the columns)."""
    names = list(cfg.sub_terrains)
    proportions = np.array([cfg.sub_terrains[n].proportion for n in names], dtype=float)
    cumulative = np.cumsum(proportions / proportions.sum())
    return [names[int(np.min(np.where(c / cfg.num_cols + 0.001 < cumulative)[0]))] for c in range(cfg.num_cols)]


def _tile_nodes(cfg: TerrainGeneratorCfg) -> tuple[np.ndarray, np.ndarray]:
    """Node coordinates (m) of one tile in its own frame, from its corner: [0, size] every resolution."""
    nx = int(round(cfg.size[0] / cfg.resolution)) + 1
    ny = int(round(cfg.size[1] / cfg.resolution)) + 1
    return np.arange(nx) * cfg.resolution, np.arange(ny) * cfg.resolution


def stairs_tile(sub: PyramidStairsCfg, difficulty: float, cfg: TerrainGeneratorCfg) -> tuple[np.ndarray, float]:
    """Heights [nx, ny] (m) at the tile's nodes and the origin's height (m)."""
    h = sub.step_height_range[0] + difficulty * (sub.step_height_range[1] - sub.step_height_range[0])
    sx, sy = cfg.size
    # Isaac Lab's count, evaluated as it is (floats: 3.0 // 0.6 == 5.0)
    n_x = (sx - 2 * sub.border_width - sub.platform_width) // (2 * sub.step_width) + 1
    n_y = (sy - 2 * sub.border_width - sub.platform_width) // (2 * sub.step_width) + 1
    n = int(min(n_x, n_y))
    if n < 1:
        raise ValueError(f"stairs: no step fits a {cfg.size} tile with border {sub.border_width} m and platform "
                         f"{sub.platform_width} m")
    x, y = _tile_nodes(cfg)
    # distance inward from the inner edge of the border band, per axis; a node's ring is the smaller of the two
    inward = np.minimum((x[:, None] - sub.border_width), (sx - sub.border_width - x[:, None]))
    inward = np.minimum(inward, np.minimum(y[None, :] - sub.border_width, sy - sub.border_width - y[None, :]))
    steps = inward / sub.step_width
    if sub.inverted:  # on a riser the higher side: the outer ring
        level = np.clip(np.ceil(steps - 1e-9), 0, n + 1)
        heights = -level * h
    else:  # on a riser the higher side: the inner ring
        level = np.clip(np.floor(steps + 1e-9) + 1, 0, n + 1)
        heights = level * h
    heights[inward < -1e-9] = 0.0  # the border band
    return heights, (-(n + 1) * h if sub.inverted else (n + 1) * h)


def boxes_tile(sub: RandomBoxesCfg, difficulty: float, cfg: TerrainGeneratorCfg, seed: int) -> tuple[np.ndarray, float]:
    """Heights and the origin's height of a random-boxes tile (box heights: Isaac Lab's draw, a torch generator)."""
    import torch

    g = sub.grid_height_range[0] + difficulty * (sub.grid_height_range[1] - sub.grid_height_range[0])
    size = cfg.size[0]
    count = int(size / sub.grid_width)
    band = size - count * sub.grid_width  # the flat band's total width (half on each side)
    if band <= 0:
        raise ValueError(f"boxes: grid_width {sub.grid_width} m leaves no border band on a {size} m tile")
    noise = torch.zeros((count * count, 3))
    noise[:, 2].uniform_(-g, g, generator=torch.Generator().manual_seed(int(seed)))
    tops = noise[:, 2].double().numpy().reshape(count, count)  # box (i, j) at index i * count + j, as Isaac Lab's
    x, y = _tile_nodes(cfg)
    i = np.floor((x - band / 2) / sub.grid_width).astype(int)
    j = np.floor((y - band / 2) / sub.grid_width).astype(int)
    inside = (i[:, None] >= 0) & (i[:, None] < count) & (j[None, :] >= 0) & (j[None, :] < count)
    heights = np.where(inside, tops[np.clip(i, 0, count - 1)[:, None], np.clip(j, 0, count - 1)[None, :]], 0.0)
    half = sub.platform_width / 2
    on_platform = ((np.abs(x - size / 2) <= half + 1e-9)[:, None]) & ((np.abs(y - size / 2) <= half + 1e-9)[None, :])
    heights[on_platform] = g
    return heights, g


def _hf_layout(border_width: float, cfg: TerrainGeneratorCfg) -> tuple[int, int, int]:
    """Isaac Lab's height-field tile: pixels per axis (nodes), border pixels, inner pixels (of the first axis)."""
    width = int(cfg.size[0] / cfg.resolution) + 1
    border = int(border_width / cfg.resolution) + 1
    return width, border, width - 2 * border


def rough_tile(sub: RandomRoughCfg, cfg: TerrainGeneratorCfg, seed: int) -> tuple[np.ndarray, float]:
    """Heights and the origin's height of a random-rough tile (pixels: numpy's legacy ``RandomState.choice``)."""
    width, border, inner = _hf_layout(sub.border_width, cfg)
    length = int(cfg.size[1] / cfg.resolution) + 1
    inner_y = length - 2 * border
    lo = int(sub.noise_range[0] / cfg.vertical_scale)
    hi = int(sub.noise_range[1] / cfg.vertical_scale)
    step = int(sub.noise_step / cfg.vertical_scale)
    if step < 1:
        raise ValueError(f"random rough: noise_step {sub.noise_step} m is below vertical_scale {cfg.vertical_scale} m")
    values = np.arange(lo, hi + step, step)
    pixels = np.random.RandomState(int(seed) % 2**32).choice(values, size=(inner, inner_y)).astype(np.int16)
    units = np.zeros((width, length), dtype=np.int16)
    units[border:-border, border:-border] = pixels
    # Isaac Lab's origin: the highest pixel within 1 m of the centre (of the inner field)
    radius = max(1, int(1.0 / cfg.resolution))
    cx, cy = inner // 2, inner_y // 2
    top = pixels[max(0, cx - radius): cx + radius, max(0, cy - radius): cy + radius].max()
    return units * cfg.vertical_scale, float(top) * cfg.vertical_scale


def slope_tile(sub: PyramidSlopeCfg, difficulty: float, cfg: TerrainGeneratorCfg) -> tuple[np.ndarray, float]:
    """Heights and the origin's height of a pyramid-slope tile (Isaac Lab's pixel formula)."""
    width, border, inner = _hf_layout(sub.border_width, cfg)
    length = int(cfg.size[1] / cfg.resolution) + 1
    inner_y = length - 2 * border
    slope = sub.slope_range[0] + difficulty * (sub.slope_range[1] - sub.slope_range[0])
    if sub.inverted:
        slope = -slope
    inner_size = inner * cfg.resolution  # Isaac Lab's size of the inner field (m)
    height_max = int(slope * inner_size / 2 / cfg.vertical_scale)
    cx, cy = int(inner / 2), int(inner_y / 2)
    xx = ((cx - np.abs(cx - np.arange(inner))) / cx)[:, None]
    yy = ((cy - np.abs(cy - np.arange(inner_y))) / cy)[None, :]
    raw = height_max * xx * yy
    pf = int(sub.platform_width / cfg.resolution / 2)
    z_pf = raw[inner // 2 - pf, inner_y // 2 - pf]
    pixels = np.rint(np.clip(raw, min(0.0, z_pf), max(0.0, z_pf))).astype(np.int16)
    units = np.zeros((width, length), dtype=np.int16)
    units[border:-border, border:-border] = pixels
    return units * cfg.vertical_scale, float(pixels[cx, cy]) * cfg.vertical_scale


def sub_terrain_tile(sub: SubTerrainCfg, difficulty: float, cfg: TerrainGeneratorCfg,
                     seed: int) -> tuple[np.ndarray, float]:
    """One tile's heights [nx, ny] (m, at the tile's nodes from its corner) and its origin's height (m)."""
    if isinstance(sub, PyramidStairsCfg):
        return stairs_tile(sub, difficulty, cfg)
    if isinstance(sub, RandomBoxesCfg):
        return boxes_tile(sub, difficulty, cfg, seed)
    if isinstance(sub, RandomRoughCfg):
        return rough_tile(sub, cfg, seed)
    if isinstance(sub, PyramidSlopeCfg):
        return slope_tile(sub, difficulty, cfg)
    raise ValueError(f"unknown sub-terrain config {type(sub).__name__}")


def generate(cfg: TerrainGeneratorCfg) -> GeneratedTerrain:
    """The terrain of ``cfg`` (see the module docstring)."""
    cfg.check()
    res = cfg.resolution
    sx, sy = cfg.size
    tile_nx, tile_ny = int(round(sx / res)), int(round(sy / res))
    border = int(round(cfg.border_width / res))
    nx = cfg.num_rows * tile_nx + 2 * border + 1
    ny = cfg.num_cols * tile_ny + 2 * border + 1
    heights = np.zeros((nx, ny))
    x0 = -cfg.num_rows * sx / 2 - cfg.border_width
    y0 = -cfg.num_cols * sy / 2 - cfg.border_width
    types = column_types(cfg)
    rng = np.random.default_rng(cfg.seed)
    lo, hi = cfg.difficulty_range
    difficulty = np.zeros((cfg.num_rows, cfg.num_cols))
    origins = np.zeros((cfg.num_rows, cfg.num_cols, 3))
    for c in range(cfg.num_cols):
        for r in range(cfg.num_rows):
            d = lo + (hi - lo) * (r + rng.uniform()) / cfg.num_rows
            if cfg.row_difficulties is not None:
                d = float(cfg.row_difficulties[r])
            tile_seed = (cfg.seed * 1_000_003 + c * cfg.num_rows + r) % 2**31
            tile, z = sub_terrain_tile(cfg.sub_terrains[types[c]], d, cfg, tile_seed)
            i0, j0 = border + r * tile_nx, border + c * tile_ny
            heights[i0:i0 + tile_nx + 1, j0:j0 + tile_ny + 1] = tile  # edges are 0 on both sides
            difficulty[r, c] = d
            origins[r, c] = (x0 + cfg.border_width + (r + 0.5) * sx, y0 + cfg.border_width + (c + 0.5) * sy, z)
    return GeneratedTerrain(cfg=cfg, heights=heights, origin_xy=(x0, y0), tile_origins=origins, tile_types=types,
                            difficulty=difficulty)
