"""Fixtures shared by the agent tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The tiny model's matrices are so small that a second torch thread only adds
    overhead, many times over when the other core is busy."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
