"""Validation tests run torch on one thread (as scripts/validate.py does): the batches are small, and with two
threads on a shared 2-core machine the policy calls were 5-10x slower."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
