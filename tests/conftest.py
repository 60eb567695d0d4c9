"""Shared test fixtures: where the public robot descriptions lie (CI has them at ../shared/assets); tests marked
``gpu`` (pytest.ini) skip, with the reason, where Warp sees no CUDA device."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

SHARED_ASSETS = Path(os.environ.get("DIFFLOCO_SHARED_ASSETS",
                                   Path(__file__).resolve().parents[2] / "shared" / "assets"))


@pytest.fixture(scope="session")
def shared_assets() -> Path:
    if not SHARED_ASSETS.is_dir():
        pytest.fail(f"public robot descriptions not found at {SHARED_ASSETS} (set DIFFLOCO_SHARED_ASSETS)")
    return SHARED_ASSETS


@functools.cache
def _cuda_device() -> bool:
    import warp as wp

    return bool(wp.is_cuda_available())


def pytest_runtest_setup(item):
    """A test marked ``gpu`` runs only where Warp sees a CUDA device (checked once, when the first such test runs)."""
    if item.get_closest_marker("gpu") is not None and not _cuda_device():
        pytest.skip("needs a CUDA device, and Warp finds none here (the GPU check runs where one is present)")
