"""Test helpers of the factory-matrix tests: a transparent stub factory.

(A module with a unique name rather than conftest.py, so that importing it
cannot collide with other test folders' conftest modules.)
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch

import privfed
from privfed.engines.factory import FactoryManifest, tensors_sha256


class StubFactory:
    """A factory whose samples reveal who made them.

    Every pixel of a sample equals ``tag`` except pixel (0, 0, 0), which holds
    a uniform draw from the generator, so tests can tell both which cell made a
    sample and whether the generator seed was honoured.
    """

    factory_type: ClassVar[str] = "stub"

    def __init__(self, tag: float, shape: tuple[int, int, int] = (1, 4, 4)) -> None:
        self.tag = tag
        self.shape = shape
        self.calls = 0

    def fit(self, images: torch.Tensor) -> StubFactory:
        return self

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        self.calls += 1
        out = torch.full((n, *self.shape), self.tag)
        out[:, 0, 0, 0] = torch.rand(n, generator=generator)
        return out

    @property
    def num_parameters(self) -> int:
        return 1

    @property
    def is_fitted(self) -> bool:
        return True

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"tag": torch.tensor([self.tag])}

    def manifest(self) -> FactoryManifest:
        return FactoryManifest(
            factory_type=self.factory_type,
            class_id=None,
            client_id=None,
            sample_count=1,
            image_shape=self.shape,
            architecture={},
            training={},
            release=None,
            library_version=privfed.__version__,
            weights_sha256=tensors_sha256(self.state_tensors()),
        )

    def save(self, directory: str | Path) -> Path:  # pragma: no cover - not used
        raise NotImplementedError


def tag_of(class_id: int, client_id: int | str) -> float:
    """A distinct pixel value in (0, 1) per cell (classes < 10, clients < 10 or short str)."""
    client_num = client_id if isinstance(client_id, int) else 10 + sum(map(ord, client_id)) % 80
    return (1 + class_id * 97 + client_num) / 1024.0
