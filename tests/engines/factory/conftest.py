"""Shared fixtures of the factory-matrix tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_torch_thread() -> object:
    """Run these tiny models on one intra-op thread, restoring the setting after.

    On a loaded 2-core machine, torch's default of one OpenMP thread per core
    makes a 40k-parameter UNet step ~60x slower (spin-waiting threads).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
