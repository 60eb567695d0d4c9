"""Shared test fixtures: where the public robot descriptions lie (CI has them at ../shared/assets)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_ASSETS = Path(os.environ.get("DIFFLOCO_SHARED_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


@pytest.fixture(scope="session")
def shared_assets() -> Path:
    if not SHARED_ASSETS.is_dir():
        pytest.fail(f"public robot descriptions not found at {SHARED_ASSETS} (set DIFFLOCO_SHARED_ASSETS)")
    return SHARED_ASSETS
