"""Seeded model code leaves the caller's torch random streams alone."""

from __future__ import annotations

import pytest
import torch

from privfed.engines._rng import seeded_global_rng


def _forbid_cuda_seeding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("a CPU-only block must not (re)seed any CUDA generator")

    monkeypatch.setattr(torch.cuda, "manual_seed", refuse)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", refuse)


def test_seeded_block_is_reproducible_and_restores_the_cpu_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _forbid_cuda_seeding(monkeypatch)
    torch.default_generator.manual_seed(1234)
    expected_next = torch.rand(5)
    torch.default_generator.manual_seed(1234)
    with seeded_global_rng(7):
        first = torch.rand(3)
    with seeded_global_rng(7, torch.device("cpu")):
        second = torch.rand(3)
    # Same seed, same draws; and the caller's stream continues as if untouched.
    assert torch.equal(first, second)
    assert torch.equal(torch.rand(5), expected_next)


def test_model_initialisation_inside_the_block_is_deterministic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _forbid_cuda_seeding(monkeypatch)
    with seeded_global_rng(3):
        a = torch.nn.Linear(4, 2).weight.detach().clone()
    with seeded_global_rng(3):
        b = torch.nn.Linear(4, 2).weight.detach().clone()
    with seeded_global_rng(4):
        c = torch.nn.Linear(4, 2).weight.detach().clone()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_the_state_is_restored_even_when_the_block_raises() -> None:
    torch.manual_seed(99)
    expected_next = torch.rand(4)
    torch.manual_seed(99)
    with pytest.raises(RuntimeError, match="boom"), seeded_global_rng(5):
        torch.rand(10)
        raise RuntimeError("boom")
    assert torch.equal(torch.rand(4), expected_next)
