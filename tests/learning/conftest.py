"""Shared settings for the learning tests: one CPU thread (the machine is small and shared)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
