"""Warp initialisation and the per-precision types the simulator's kernels are built with.

Every kernel of the simulator is made by a factory keyed by the scalar type (``wp.float32`` or
``wp.float64``), so one source serves both precisions: float32 for training, float64 for verification
against finite differences and MuJoCo.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import warp as wp

_initialised = False


def init_warp() -> None:
    """Initialise Warp once, quietly. Safe to call repeatedly."""
    global _initialised
    if _initialised:
        return
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    _initialised = True


DTYPES = {"float32": wp.float32, "float64": wp.float64}
NUMPY_DTYPES = {wp.float32: np.float32, wp.float64: np.float64}


def resolve_dtype(dtype) -> type:
    """``"float32"``/``"float64"``/``torch.float32``/``wp.float32``/... to the Warp scalar type."""
    if dtype in (wp.float32, wp.float64):
        return dtype
    name = str(dtype).replace("torch.", "")
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype '{dtype}': use 'float32' or 'float64'")
    return DTYPES[name]


def resolve_device(device) -> str:
    """Check a device string against what Warp sees; a clear error for a missing GPU."""
    init_warp()
    device = str(device)
    if device.startswith("cuda"):
        device = "cuda:0" if device == "cuda" else device
        if not wp.is_cuda_available():
            raise RuntimeError(f"device '{device}' requested but Warp finds no CUDA device on this machine")
    elif device != "cpu":
        raise ValueError(f"unknown device '{device}': use 'cpu' or 'cuda[:N]'")
    wp.get_device(device)  # raises for an out-of-range cuda index
    return device


@dataclass(frozen=True)
class WarpTypes:
    """Vector/matrix/quaternion types for one scalar type."""

    scalar: type
    vec3: type
    mat33: type
    quat: type


@functools.cache
def warp_types(dtype) -> WarpTypes:
    return WarpTypes(
        scalar=dtype,
        vec3=wp.types.vector(3, dtype),
        mat33=wp.types.matrix((3, 3), dtype),
        quat=wp.types.quaternion(dtype),
    )
