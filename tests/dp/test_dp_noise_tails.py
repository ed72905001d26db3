"""Review tests: the samplers' tails must reach as far as the accounting assumes.

A Gaussian sampler whose support stops at ``z_max·σ`` is not the Gaussian
mechanism: for neighbours whose means differ by ``μσ``, the event
``{y > x + z_max·σ}`` has probability 0 under one and ``Φ(μ − z_max)`` under
the other, an additive δ that no ε absorbs.  Inverting a 53-bit uniform gives
``z_max ≈ 8.3``; at ``(ε, δ) = (50, 1e-9)`` (μ ≈ 5.7) that is δ ≈ 5e-3.  The
tests drive the stream with the rare all-zero words (probability 2^-64 each)
and check the magnitude keeps growing instead of saturating.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from privfed.dp import discrete_gaussian, gaussian_noise, rounded_gaussian
from privfed.dp.noise import _Stream


def _rigged_words(zero_calls: int) -> object:
    """A ``words`` replacement: ``zero_calls`` all-zero blocks, then all-ones words."""
    state = {"calls": 0}

    def words(self: _Stream, count: int) -> npt.NDArray[np.uint64]:
        state["calls"] += count > 0
        if 0 < state["calls"] <= zero_calls:
            return np.zeros(count, dtype=np.uint64)
        return np.full(count, np.iinfo(np.uint64).max, dtype=np.uint64)

    return words


@pytest.mark.parametrize("zero_calls", [1, 4, 40])
def test_normal_tail_is_not_truncated(monkeypatch: pytest.MonkeyPatch, zero_calls: int) -> None:
    monkeypatch.setattr(_Stream, "words", _rigged_words(zero_calls))
    z = np.abs(gaussian_noise(3, 1.0, seed=0))
    # k leading zero words mean U < 2^(-53k): |z| >= -ndtri(2^(-53k-1)) ~ sqrt(2·53k·ln 2).
    bound = np.sqrt(2 * 53 * zero_calls * np.log(2.0)) * 0.95
    assert np.all(z > max(bound, 8.0))


def test_normal_tail_reaches_far_enough_for_huge_epsilon(monkeypatch: pytest.MonkeyPatch) -> None:
    # At (ε, δ) = (1000, 1e-5), μ ≈ 40.7: the sampler must reach well past 40σ.
    monkeypatch.setattr(_Stream, "words", _rigged_words(60))
    assert abs(float(gaussian_noise(1, 1.0, seed=0)[0])) > 60.0
    monkeypatch.setattr(_Stream, "words", _rigged_words(60))
    assert abs(int(rounded_gaussian(1, 1000.0, seed=0)[0])) > 60_000


def test_discrete_gaussian_proposal_is_not_truncated(monkeypatch: pytest.MonkeyPatch) -> None:
    # The discrete Laplace proposal drawn as floor(-t·ln U) stopped at ~37t.
    monkeypatch.setattr(_Stream, "words", _rigged_words(60))
    stream = _Stream(b"test", 0)
    e = stream.exponential(4)
    assert np.all(e > 53 * 59 * np.log(2.0))


def test_exponential_and_normal_are_still_correct() -> None:
    from scipy import stats

    stream = _Stream(b"test", 11)
    # Kolmogorov–Smirnov, α = 1e-6 each (fixed seed, deterministic).
    assert stats.kstest(stream.exponential(200_000), "expon").pvalue > 1e-6
    assert stats.kstest(stream.normal(200_000), "norm").pvalue > 1e-6
    assert discrete_gaussian(10, 2.0, seed=1).dtype == np.int64


@pytest.mark.parametrize("sampler", [gaussian_noise, rounded_gaussian, discrete_gaussian])
def test_unseeded_noise_keys_come_from_the_os_csprng(
    monkeypatch: pytest.MonkeyPatch, sampler: object
) -> None:
    import os

    import privfed.dp.noise as noise_module

    calls: list[int] = []
    real = os.urandom

    def spy(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(noise_module.os, "urandom", spy)
    sampler(8, 3.0)  # type: ignore[operator]
    assert calls == [32]  # one fresh 256-bit ChaCha20 key per call
    sampler(8, 3.0, seed=5)  # type: ignore[operator]
    assert calls == [32]  # a seeded call never touches (or mixes in) the OS key
