"""DP-SGD Poisson sampling: exact integer thresholds, realised rate, CSPRNG, refusals."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy.stats import binomtest

from privfed.engines.factory import dpsgd
from privfed.engines.factory.dpsgd import (
    MIN_SAMPLING_RATE,
    DPSGDConfig,
    GaussianNoiseSource,
    dp_sgd_step,
    inclusion_threshold,
    poisson_inclusion,
    realised_sampling_rate,
)
from privfed.errors import ParameterError, ParameterTypeError

TWO_64 = 2**64


def _log_uniform_rates(count: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [2.0 ** rng.uniform(-64.0, 0.0) for _ in range(count)]


FIXED_RATES = [
    1e-9,
    1e-6,
    1e-3,
    0.01,
    0.1,
    0.25,
    1 / 3,
    0.5,
    1.0,
    MIN_SAMPLING_RATE,
    3 * MIN_SAMPLING_RATE,
    math.nextafter(MIN_SAMPLING_RATE, 1.0),
    2.0**-12,
    math.nextafter(2.0**-12, 0.0),
    math.nextafter(1.0, 0.0),
    2.0**-53,
]


@pytest.mark.parametrize("q", FIXED_RATES + _log_uniform_rates(200, seed=7))
def test_threshold_arithmetic_is_exact(q: float) -> None:
    t = inclusion_threshold(q)
    exact_q = Fraction(q)
    # T = ceil(q · 2^64), computed here independently in rational arithmetic.
    assert t == math.ceil(exact_q * TWO_64)
    assert 1 <= t <= TWO_64
    realised = realised_sampling_rate(q)
    # The realised rate is exactly T / 2^64 (representable in float64) and within
    # [q, q + 2^-64).
    assert Fraction(realised) == Fraction(t, TWO_64)
    assert exact_q <= Fraction(realised) < exact_q + Fraction(1, TWO_64)
    assert realised_sampling_rate(realised) == realised  # idempotent
    assert inclusion_threshold(realised) == t
    if (exact_q * TWO_64).denominator == 1:
        assert realised == q
    if q >= 2.0**-12:
        assert realised == q


@pytest.mark.parametrize("q", [1e-9, 1e-6, 3e-8])
def test_realised_rate_is_not_the_float32_ceiling(q: float) -> None:
    # The float32 sampler `torch.rand(n) < q` includes with probability
    # ceil(q · 2^24) / 2^24: +1.3 % at q = 1e-6, about 60 q at q = 1e-9.
    float32_rate = math.ceil(q * 2**24) / 2**24
    assert float32_rate > q * (1 + 1e-3)
    realised = realised_sampling_rate(q)
    assert 0 <= realised - q < 2.0**-64
    assert realised / q - 1 < 1e-10
    assert DPSGDConfig(noise_multiplier=1.0, sampling_rate=q).realised_sampling_rate == realised


def test_sampler_includes_exactly_the_words_below_the_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for q in (1e-9, 1e-6, 0.5, MIN_SAMPLING_RATE, math.nextafter(1.0, 0.0)):
        t = inclusion_threshold(q)
        words = np.array([0, t - 1, t, min(t + 1, TWO_64 - 1), TWO_64 - 1, t // 2], dtype=np.uint64)
        monkeypatch.setattr(dpsgd, "_csprng_words", lambda count, w=words: w[:count])
        mask = poisson_inclusion(len(words), q)
        expected = [int(w) < t for w in words]
        assert mask.dtype == torch.bool and mask.tolist() == expected, q
    # q = 1: T = 2^64, so every word (even 2^64 - 1) is included.
    words = np.array([0, TWO_64 - 1, 2**63], dtype=np.uint64)
    monkeypatch.setattr(dpsgd, "_csprng_words", lambda count: words[:count])
    assert poisson_inclusion(3, 1.0).tolist() == [True, True, True]


@pytest.mark.parametrize("source", ["seeded", "csprng"])
@pytest.mark.parametrize(("q", "n"), [(0.5, 1_000_000), (0.01, 2_000_000), (1e-3, 4_000_000)])
def test_inclusion_rate_passes_a_binomial_test(source: str, q: float, n: int) -> None:
    # Two-sided exact binomial test at α = 1e-6 per case.  The seeded cases are
    # deterministic (fixed seed); the CSPRNG cases fail falsely with probability 1e-6.
    generator = torch.Generator().manual_seed(11) if source == "seeded" else None
    mask = poisson_inclusion(n, q, generator=generator)
    assert mask.shape == (n,) and mask.dtype == torch.bool
    k = int(mask.sum())
    assert binomtest(k, n, realised_sampling_rate(q)).pvalue > 1e-6


@pytest.mark.parametrize("source", ["seeded", "csprng"])
def test_every_bit_of_the_words_is_uniform(source: str) -> None:
    # 2^16 words: each bit's frequency has standard error 1/512; the band
    # ±0.0125 is 6.4 standard errors (two-sided 1.6e-10 per bit), so the
    # false-failure rate over 64 bits is below 1e-8 (the seeded case is
    # deterministic).  Small thresholds test the top bits, so a word built
    # from fewer than 64 random bits would fail here.
    count = 1 << 16
    words = (
        dpsgd._csprng_words(count)
        if source == "csprng"
        else dpsgd._generator_words(count, torch.Generator().manual_seed(5))
    )
    assert words.dtype == np.uint64 and words.shape == (count,)
    bits = (words[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    freq = bits.mean(axis=0)
    assert np.all(np.abs(freq - 0.5) < 0.0125), freq


def test_seeded_sampling_is_reproducible_and_unseeded_is_fresh() -> None:
    def seeded(seed: int) -> torch.Tensor:
        return poisson_inclusion(512, 0.5, generator=torch.Generator().manual_seed(seed))

    assert torch.equal(seeded(3), seeded(3))
    # Two different seeds (or two CSPRNG draws) agree with probability 2^-512.
    assert not torch.equal(seeded(3), seeded(4))
    assert not torch.equal(poisson_inclusion(512, 0.5), poisson_inclusion(512, 0.5))
    assert poisson_inclusion(0, 0.5).shape == (0,)


class _Linear(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim))


def _linear_loss(
    params: dict[str, torch.Tensor], x: torch.Tensor, aux: torch.Tensor
) -> torch.Tensor:
    return -(params["w"] @ x) + 0 * aux.sum()


def _run_step(
    data: torch.Tensor, noise: GaussianNoiseSource, batch_generator: torch.Generator
) -> tuple[torch.Tensor, int]:
    model = _Linear(data.shape[1])
    count = dp_sgd_step(
        model,
        _linear_loss,
        data,
        DPSGDConfig(noise_multiplier=1.0, sampling_rate=0.5),
        torch.optim.SGD(model.parameters(), lr=1.0),
        batch_generator=batch_generator,
        noise=noise,
        draw_aux=lambda k: torch.zeros(k, 1),
    )
    return model.w.detach().clone(), count


def test_unseeded_steps_draw_batches_from_the_csprng_not_the_generator() -> None:
    data = torch.randn(64, 3, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(0)
    before = gen.get_state()
    _run_step(data, GaussianNoiseSource(), gen)
    assert torch.equal(gen.get_state(), before)


def test_seeded_steps_draw_batches_from_the_generator_reproducibly() -> None:
    data = torch.randn(64, 3, generator=torch.Generator().manual_seed(0))

    def run(seed: int) -> tuple[torch.Tensor, int, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        w, count = _run_step(data, GaussianNoiseSource(torch.Generator().manual_seed(1)), gen)
        return w, count, gen.get_state()

    w1, c1, state1 = run(0)
    w2, c2, state2 = run(0)
    assert torch.equal(w1, w2) and c1 == c2 and torch.equal(state1, state2)
    assert not torch.equal(state1, torch.Generator().manual_seed(0).get_state())
    # A different batch seed gives a different batch (64 records at q = 1/2:
    # equal masks have probability 2^-64).
    mask0 = poisson_inclusion(64, 0.5, generator=torch.Generator().manual_seed(0))
    mask1 = poisson_inclusion(64, 0.5, generator=torch.Generator().manual_seed(1))
    assert not torch.equal(mask0, mask1)


@pytest.mark.parametrize("q", [2.0**-65, 1e-30, 5e-324, 0.0, -0.1, 1.5, float("nan")])
def test_rates_the_sampler_cannot_represent_are_refused(q: float) -> None:
    for call in (
        lambda: DPSGDConfig(noise_multiplier=1.0, sampling_rate=q),
        lambda: inclusion_threshold(q),
        lambda: realised_sampling_rate(q),
        lambda: poisson_inclusion(4, q),
    ):
        with pytest.raises(ParameterError) as info:
            call()
        assert info.value.parameter == "sampling_rate"
        if 0.0 < q < MIN_SAMPLING_RATE:
            assert "2**-64" in str(info.value)


def test_smallest_representable_rate_is_accepted() -> None:
    assert MIN_SAMPLING_RATE == 2.0**-64
    assert inclusion_threshold(MIN_SAMPLING_RATE) == 1
    cfg = DPSGDConfig(noise_multiplier=1.0, sampling_rate=MIN_SAMPLING_RATE)
    assert cfg.realised_sampling_rate == MIN_SAMPLING_RATE
    # Only the word 0 is below T = 1: 10,000 CSPRNG words all exceed it except with
    # probability 10,000 · 2^-64.
    assert not bool(poisson_inclusion(10_000, MIN_SAMPLING_RATE).any())


def test_sampler_arguments_are_validated() -> None:
    with pytest.raises(ParameterError):
        poisson_inclusion(-1, 0.5)
    with pytest.raises(ParameterTypeError):
        poisson_inclusion(2.0, 0.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        poisson_inclusion(2, 0.5, generator=7)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        inclusion_threshold("0.5")  # type: ignore[arg-type]
