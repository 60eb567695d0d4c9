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


#: Element types of the arrays the simulator declares by metadata (stage intermediates, model arrays).
ELEMENTS = ("scalar", "vec3", "mat33", "vec4", "int32")


@functools.cache
def element_type(dtype, element: str) -> type:
    """The Warp type of an array element named ``element`` (:data:`ELEMENTS`) in precision ``dtype``."""
    t = warp_types(dtype)
    types = {"scalar": dtype, "vec3": t.vec3, "mat33": t.mat33, "vec4": wp.types.vector(4, dtype), "int32": wp.int32}
    if element not in types:
        raise ValueError(f"unknown element type '{element}': use one of {ELEMENTS}")
    return types[element]


def warp_struct(name: str, module: str, fields: dict[str, type]) -> type:
    """A ``wp.struct`` named ``name`` (in Python module ``module``) with the given field types, built from a
    declaration instead of written out: the kernels of a stage and of its reverse take one such struct per group of
    arrays, so their argument lists are declared once (by the metadata the struct is built from)."""
    cls = type(name, (), {"__annotations__": dict(fields), "__module__": module, "__qualname__": name,
                          "__doc__": f"Warp struct of {name}: fields {', '.join(fields)}."})
    return wp.struct(cls)


def specialized_kernel_name(base: str, *specialization) -> str:
    """A kernel key unique to one specialisation of a kernel factory (e.g. ``accumulate_float64_vec3d``).

    Warp 1.17's CPU graph capture registers the kernels a graph launches by module and key, and a factory's
    specialisations share both (the key is the function's qualified name): two of them launched in one graph
    would both run the code registered last (seen: the mean over substeps of the scalar joint torques ran the
    vec3 kernel of the contact force, writing past its arrays). A factory whose specialisations can meet in one
    graph names its kernels with this."""
    parts = [getattr(s, "__name__", str(s)) for s in specialization]
    return "_".join([base, *("".join(c if c.isalnum() else "_" for c in p) for p in parts)])
