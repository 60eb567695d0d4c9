"""The scripts' tests run torch on one thread (as the scripts do: the machine is small and shared, and Warp's CPU
kernels run on one core)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
