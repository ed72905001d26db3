"""Seeded, private use of torch's global random number generators."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["seeded_global_rng"]


@contextlib.contextmanager
def seeded_global_rng(seed: int, device: torch.device | None = None) -> Iterator[None]:
    """Seed torch's global RNG of the CPU (and of ``device`` if it is a GPU) for a block.

    Module initialisation (and dropout) can only draw from torch's global
    generators.  Inside the block those generators are seeded with ``seed``;
    afterwards every generator the block seeded is back in its previous state,
    so the caller's random stream is neither consumed nor reset.

    Unlike ``torch.manual_seed``, which also re-seeds every CUDA device (and
    would leave them re-seeded, since ``torch.random.fork_rng(devices=[])``
    restores only the CPU), this seeds exactly the generators it restores: the
    CPU's, plus the one of ``device`` when that is a CUDA device.

    Args:
        seed: The seed.
        device: The device the block computes on; ``None`` or a CPU device
            touches the CPU generator only.
    """
    devices: list[int] = []
    if device is not None and device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):
        torch.default_generator.manual_seed(seed)
        for index in devices:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield
