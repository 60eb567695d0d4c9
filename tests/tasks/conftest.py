"""Fixtures for the task tests."""

from __future__ import annotations

import pytest
import torch

from diffloco_ext.sim.warp_setup import init_warp


@pytest.fixture(scope="session", autouse=True)
def _warp():
    init_warp()
    torch.set_num_threads(1)
