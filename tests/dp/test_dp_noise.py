"""CSPRNG noise samplers.

Statistical tests use fixed seeds, so they are deterministic; the stated α is
the probability that a correct sampler fails the test for a random seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtr

from privfed.dp import discrete_gaussian, gaussian_noise, rounded_gaussian
from privfed.dp.noise import MAX_INTEGER_SCALE
from privfed.errors import ParameterError, ParameterTypeError

SAMPLERS = [gaussian_noise, rounded_gaussian, discrete_gaussian]
ALPHA = 1e-6


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_seeded_streams_are_reproducible_and_distinct(sampler) -> None:  # type: ignore[no-untyped-def]
    a = sampler((4, 5), 3.0, seed=7)
    assert np.array_equal(a, sampler((4, 5), 3.0, seed=7))
    assert not np.array_equal(a, sampler((4, 5), 3.0, seed=8))
    assert np.array_equal(sampler(20, 3.0, seed=b"k"), sampler(20, 3.0, seed=b"k"))
    # int 7 and bytes b"\x07" are different seeds (domain-separated encodings).
    assert not np.array_equal(sampler(20, 3.0, seed=7), sampler(20, 3.0, seed=b"\x07"))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_unseeded_calls_differ(sampler) -> None:  # type: ignore[no-untyped-def]
    # Two 64-value draws from fresh OS keys coincide with negligible probability.
    assert not np.array_equal(sampler(64, 10.0), sampler(64, 10.0))


def test_shapes_and_dtypes() -> None:
    assert gaussian_noise((2, 3), 1.0, seed=0).dtype == np.float64
    assert gaussian_noise((2, 3), 1.0, seed=0).shape == (2, 3)
    assert rounded_gaussian(5, 1.0, seed=0).dtype == np.int64
    assert discrete_gaussian((0, 4), 1.0, seed=0).shape == (0, 4)
    assert discrete_gaussian((3,), 2.0, seed=0).dtype == np.int64
    assert np.array_equal(gaussian_noise(4, 0.0, seed=0), np.zeros(4))


def test_gaussian_noise_distribution() -> None:
    n = 400_000
    x = gaussian_noise(n, 2.5, seed=2024)
    # Variance: (n−1)s²/σ² ~ χ²(n−1); two-sided, α = 1e-6.  Catches a 1 % std error.
    chi = (n - 1) * x.var(ddof=1) / 2.5**2
    lo, hi = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], n - 1)
    assert lo < chi < hi
    # Shape: Kolmogorov–Smirnov against N(0, 2.5²), α = 1e-6.
    assert stats.kstest(x / 2.5, "norm").pvalue > ALPHA
    # Tails: the count beyond 4σ is Binomial(n, 2Φ(−4)); two-sided α = 1e-6.
    p = 2 * ndtr(-4.0)
    beyond = int(np.sum(np.abs(x) > 4 * 2.5))
    assert stats.binomtest(beyond, n, p).pvalue > ALPHA
    assert np.abs(x).max() < 9 * 2.5  # the sampler's support ends near 8.3σ


def _chi_square_pvalue(sample: np.ndarray, pmf: dict[int, float]) -> float:
    """χ² goodness of fit; outcomes with expected count below 5, and any outcome
    outside ``pmf``, are pooled into one cell holding the remaining mass."""
    n = sample.size
    values, counts = np.unique(sample, return_counts=True)
    observed = dict(zip(values.tolist(), counts.tolist(), strict=True))
    cells_obs, cells_exp = [], []
    for k, p in pmf.items():
        if n * p >= 5:
            cells_obs.append(observed.pop(k, 0))
            cells_exp.append(n * p)
    cells_obs.append(n - sum(cells_obs))
    cells_exp.append(max(n - sum(cells_exp), 1e-300))
    return float(stats.chisquare(cells_obs, cells_exp).pvalue)


@pytest.mark.parametrize("scale", [0.4, 1.0, 3.0, 12.5])
def test_discrete_gaussian_matches_its_pmf(scale: float) -> None:
    # χ² goodness of fit on 200,000 draws, α = 1e-6 per scale.
    support = np.arange(-int(12 * scale) - 3, int(12 * scale) + 4)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * scale**2))
    pmf = dict(zip(support.tolist(), (weights / weights.sum()).tolist(), strict=True))
    x = discrete_gaussian(200_000, scale, seed=int(scale * 1000))
    assert _chi_square_pvalue(x, pmf) > ALPHA


@pytest.mark.parametrize("scale", [0.4, 1.0, 7.0])
def test_rounded_gaussian_matches_its_pmf(scale: float) -> None:
    # χ² goodness of fit against Φ((k+½)/σ) − Φ((k−½)/σ), α = 1e-6 per scale.
    support = np.arange(-int(10 * scale) - 3, int(10 * scale) + 4)
    probs = ndtr((support + 0.5) / scale) - ndtr((support - 0.5) / scale)
    pmf = dict(zip(support.tolist(), probs.tolist(), strict=True))
    x = rounded_gaussian(200_000, scale, seed=int(scale * 1000) + 1)
    assert _chi_square_pvalue(x, pmf) > ALPHA


def test_discrete_gaussian_large_scale_variance() -> None:
    # For scale 1000 the variance equals scale² to within 1e-100; χ² test, α = 1e-6.
    n = 200_000
    x = discrete_gaussian(n, 1000.0, seed=5).astype(float)
    chi = (n - 1) * x.var(ddof=1) / 1000.0**2
    lo, hi = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], n - 1)
    assert lo < chi < hi


def test_a_wrong_scale_would_be_caught() -> None:
    # Power check of the pmf test: 3 % too much noise is rejected.
    support = np.arange(-40, 41)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * 3.0**2))
    pmf = dict(zip(support.tolist(), (weights / weights.sum()).tolist(), strict=True))
    x = discrete_gaussian(200_000, 3.09, seed=3000)
    assert _chi_square_pvalue(x, pmf) < ALPHA


def test_bad_arguments_never_show_the_seed() -> None:
    with pytest.raises(ParameterError) as info:
        gaussian_noise(3, 1.0, seed=-123456789)
    assert "123456789" not in str(info.value)
    assert info.value.parameter == "seed"
    with pytest.raises(ParameterTypeError):
        gaussian_noise(3, 1.0, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        gaussian_noise(3, 1.0, seed=True)
    with pytest.raises(ParameterError):
        gaussian_noise(3, -1.0)
    with pytest.raises(ParameterError):
        gaussian_noise((2, -1), 1.0)
    with pytest.raises(ParameterTypeError):
        gaussian_noise((2.0, 1), 1.0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        discrete_gaussian(3, 0.0)
    with pytest.raises(ParameterError):
        rounded_gaussian(3, MAX_INTEGER_SCALE * 2)
    with pytest.raises(ParameterError):
        discrete_gaussian(3, math.nan)
