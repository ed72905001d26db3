"""Exact samplers of distributed DP noise: primitives, reproducibility, arguments, the law.

Statistical tests use fixed seeds, so they are deterministic; the stated α is the
probability that a correct sampler fails that test for a random seed.  The laws are
checked against exact log-pmfs (:mod:`exact_pmfs`) and scipy's distributions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from exact_pmfs import log_dg, log_dg_sum, log_skellam
from scipy import stats

from privfed.dp import samplers
from privfed.dp.samplers import exact_discrete_gaussian, exact_poisson, skellam_noise
from privfed.errors import ParameterError, ParameterTypeError

#: False-failure rate of each statistical test.
ALPHA = 1e-6


# -- helpers --------------------------------------------------------------------------------


def _chi_square_pvalue(sample: np.ndarray, log_pmf: dict[int, float]) -> float:
    """χ² goodness of fit of integer ``sample`` against ``exp(log_pmf)``.

    Cells with expected count >= 5 are kept; every other outcome (including values
    outside ``log_pmf``) is pooled into one remainder cell.
    """
    n = sample.size
    values, counts = np.unique(sample, return_counts=True)
    seen = dict(zip(values.tolist(), counts.tolist(), strict=True))
    observed, expected = [], []
    for k, lp in log_pmf.items():
        e = n * math.exp(lp)
        if e >= 5:
            observed.append(seen.get(k, 0))
            expected.append(e)
    observed.append(n - sum(observed))
    expected.append(max(n - sum(expected), 1e-9))
    return float(stats.chisquare(observed, expected).pvalue)


# -- the exact primitives -------------------------------------------------------------------


def test_exp_bounds_bracket_the_exact_value() -> None:
    mpmath.mp.dps = 120
    for num, den in [(0, 1), (1, 3), (7, 2), (1, 1), (5, 1000), (123456789, 98765), (3, 2**60)]:
        for bits in (8, 64, 200):
            lo, hi = samplers._exp_scaled_bounds(num, den, bits)
            exact = mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** bits
            assert lo <= exact <= hi
            assert hi - lo <= 4


def test_exp_less_is_exact_near_the_boundary() -> None:
    mpmath.mp.dps = 80
    for num, den, bits in [(1, 2, 70), (9, 7, 100), (1, 10**9, 64)]:
        exact = mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** bits
        below = int(mpmath.floor(exact))
        assert samplers._exp_less(num, den, below, bits)
        assert not samplers._exp_less(num, den, below + 1, bits)
    assert samplers._exp_less(0, 1, 2**10 - 1, 10) and not samplers._exp_less(0, 1, 2**10, 10)


def test_bernoulli_primitives_have_the_exact_law() -> None:
    # Each count is Binomial(n, p); two-sided binomial tests, α = 1e-6 each.
    source = samplers._Source(b"test", 11)
    n = 20_000
    cases = [
        (lambda: source.bernoulli_exp(3, 10), math.exp(-0.3)),
        (lambda: source.bernoulli_exp(27, 10), math.exp(-2.7)),
        (lambda: source.bernoulli(2, 7), 2 / 7),
        # offset 2 + U < 4·e^{-1/2} = 2.426...: probability 0.426...
        (lambda: samplers._uniform_below_exp(source, 2, 1, 2, 2), 4 * math.exp(-0.5) - 2),
        (lambda: samplers._uniform_below_fraction(source, 3, Fraction(37, 10)), 0.7),
    ]
    for draw, p in cases:
        hits = sum(bool(draw()) for _ in range(n))
        assert stats.binomtest(hits, n, p).pvalue > ALPHA
    bounds = np.array([1, 3, 2**40 + 7, 2**63], dtype=np.uint64)
    draws = np.stack([source.below(bounds) for _ in range(2000)])
    assert np.all(draws < bounds) and np.all(draws[:, 0] == 0)
    assert stats.chisquare(np.bincount(draws[:, 1].astype(np.int64), minlength=3)).pvalue > ALPHA


def test_tables_bracket_their_exact_weights() -> None:
    # The float-built integer bounds must contain the exact weights (the proved claim).
    poisson = samplers._PoissonTable(7.3)
    for i in range(poisson.hi.size):
        exact = poisson.exact_weight(poisson.start + i)
        assert int(poisson.lower[i + 1]) <= exact <= int(poisson.hi[i])
    mpmath.mp.dps = 60
    gauss = samplers._DiscreteGaussianTable(3.0)
    assert gauss.scale == gauss.mult * 2**gauss.scale_bits and gauss.mult < 2**53
    scale = 2 * mpmath.mpf(gauss.scale)
    for x in range(1, gauss.hi.size):
        exact = scale * mpmath.exp(-mpmath.mpf(x * x) / 18)
        assert int(gauss.lower[x + 1]) <= exact <= int(gauss.hi[x])
    assert gauss.hi[0] == gauss.lower[1] == gauss.scale


def test_exact_window_acceptance_has_the_fractional_probability() -> None:
    # The slow path decides offset + U < y exactly: at offset floor(y) its probability
    # is frac(y).  Binomial tests, α = 1e-6 each.
    source = samplers._Source(b"window", 3)
    poisson = samplers._PoissonTable(7.3)
    index = 4
    y = poisson.exact_weight(poisson.start + index)
    floor_y = math.floor(y)
    mpmath.mp.dps = 60
    gauss = samplers._DiscreteGaussianTable(3.0)
    g = 2 * mpmath.mpf(gauss.scale) * mpmath.exp(-mpmath.mpf(25) / 18)
    n = 4000
    for draw, p in (
        (lambda: poisson.window_exact(source, index, floor_y), float(y - floor_y)),
        (lambda: gauss.window_exact(source, 5, int(mpmath.floor(g))), float(g - mpmath.floor(g))),
    ):
        hits = sum(bool(draw()) for _ in range(n))
        assert stats.binomtest(hits, n, p).pvalue > ALPHA
    assert poisson.window_exact(source, index, floor_y - 1)
    assert not poisson.window_exact(source, index, floor_y + 1)


# -- samplers: reproducibility and arguments ------------------------------------------------

SAMPLERS = [
    (exact_discrete_gaussian, 3.0),
    (exact_poisson, 4.5),
    (skellam_noise, 4.5),
]


@pytest.mark.parametrize(("sampler", "param"), SAMPLERS)
def test_seeded_streams_are_reproducible_and_distinct(sampler, param) -> None:  # type: ignore[no-untyped-def]
    a = sampler((4, 5), param, seed=7)
    assert a.dtype == np.int64 and a.shape == (4, 5)
    assert np.array_equal(a, sampler((4, 5), param, seed=7))
    assert not np.array_equal(a, sampler((4, 5), param, seed=8))
    assert not np.array_equal(sampler(40, param, seed=7), sampler(40, param, seed=b"\x07"))
    # Two 64-value draws from fresh OS keys coincide with negligible probability.
    assert not np.array_equal(sampler(64, param), sampler(64, param))
    assert sampler((0, 3), param, seed=1).shape == (0, 3)


def test_sampler_arguments_are_checked() -> None:
    with pytest.raises(ParameterError):
        exact_discrete_gaussian(3, 2.0**16)
    with pytest.raises(ParameterError):
        exact_discrete_gaussian(3, 0.01)
    with pytest.raises(ParameterTypeError):
        exact_discrete_gaussian(3, True)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        exact_poisson(3, 0.0)
    with pytest.raises(ParameterError):
        skellam_noise(3, 2.0**31)
    with pytest.raises(ParameterError):
        exact_poisson(3, 1.0, seed=-1)
    with pytest.raises(ParameterTypeError):
        exact_poisson(3, 1.0, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        exact_poisson((2, -1), 1.0)


# -- samplers: the law ------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.8, 1.0 / 3.0, 3.0, 17.5])
def test_discrete_gaussian_single_draws(sigma: float) -> None:
    x = exact_discrete_gaussian(100_000, sigma, seed=2024)
    lp = log_dg(sigma, math.ceil(60 * sigma))
    half = (lp.size - 1) // 2
    assert _chi_square_pvalue(x, {k - half: v for k, v in enumerate(lp)}) > ALPHA


def test_discrete_gaussian_tails_are_untruncated() -> None:
    # A window of ±2 forces most of the mass through the exact geometric tail path.
    x = exact_discrete_gaussian(10_000, 3.0, seed=5, _half_width=2)
    lp = log_dg(3.0, 200)
    assert _chi_square_pvalue(x, {k - 200: v for k, v in enumerate(lp)}) > ALPHA
    # In the ordinary sampler: |X| >= 4σ has probability p; Binomial count, α = 1e-6.
    sigma, n = 2.0, 400_000
    y = exact_discrete_gaussian(n, sigma, seed=6)
    lq = log_dg(sigma, 200)
    p = float(np.exp(lq[np.abs(np.arange(-200, 201)) >= 8]).sum())
    assert stats.binomtest(int(np.sum(np.abs(y) >= 8)), n, p).pvalue > ALPHA


def test_sum_of_client_discrete_gaussians_has_the_convolved_law() -> None:
    clients, sigma = 5, 1.3
    total = exact_discrete_gaussian((clients, 60_000), sigma, seed=9).sum(axis=0)
    lp = log_dg_sum(sigma, clients, half=40)
    half = (lp.size - 1) // 2
    assert _chi_square_pvalue(total, {k - half: v for k, v in enumerate(lp)}) > ALPHA


@pytest.mark.parametrize("lam", [0.3, 7.3, 12.0, 250.5])
def test_poisson_single_draws(lam: float) -> None:
    x = exact_poisson(100_000, lam, seed=31)
    ks = np.arange(0, int(lam + 60 * math.sqrt(lam) + 60))
    assert (
        _chi_square_pvalue(x, dict(zip(ks.tolist(), stats.poisson.logpmf(ks, lam), strict=True)))
        > ALPHA
    )


def test_poisson_tails_are_untruncated() -> None:
    # A window of ±2 around the mode forces both geometric tails (left one included).
    x = exact_poisson(8_000, 30.0, seed=17, _half_width=2)
    ks = np.arange(0, 200)
    assert (
        _chi_square_pvalue(x, dict(zip(ks.tolist(), stats.poisson.logpmf(ks, 30.0), strict=True)))
        > ALPHA
    )
    assert x.min() < 28 and x.max() > 32


def test_sum_of_client_skellams_is_skellam() -> None:
    clients, lam = 4, 2.5
    total = skellam_noise((clients, 60_000), lam, seed=3).sum(axis=0)
    lp = log_skellam(clients * lam, half=80)
    assert _chi_square_pvalue(total, {k - 80: v for k, v in enumerate(lp)}) > ALPHA


# -- the table layout: the bins fill 2**62, the guide names the searched bin --------------

TABLES = [
    lambda: samplers._PoissonTable(0.5),
    lambda: samplers._PoissonTable(7.3),
    lambda: samplers._PoissonTable(5e5),
    lambda: samplers._PoissonTable(30.0, 2),
    lambda: samplers._DiscreteGaussianTable(0.3),
    lambda: samplers._DiscreteGaussianTable(3.0),
    lambda: samplers._DiscreteGaussianTable(1000.0),
    lambda: samplers._DiscreteGaussianTable(3.0, 2),
]


@pytest.mark.parametrize("make", TABLES)
def test_bins_fill_the_proposal_space_exactly(make) -> None:  # type: ignore[no-untyped-def]
    table = make()
    space = 2**samplers._K
    weights = [int(w) for w in table.weights]
    assert min(weights) >= 0 and sum(weights) == space == int(table.cum[-1])
    # The last bin rejects; it holds the rest of 2**62 (about 2**-20 of it).
    assert weights[-1] == space - table.total and 0 <= weights[-1] <= space >> 19
    assert np.all(table.lower[1:-2] <= table.hi) and np.all(table.lower[[0, -2, -1]] == 0)
    assert table.mult < 2**53 and table.scale == table.mult << table.scale_bits


@pytest.mark.parametrize("make", TABLES)
def test_guide_table_decides_as_the_search_does(make) -> None:  # type: ignore[no-untyped-def]
    # Where the guide names a value, the binary search finds that bin and the fast test
    # accepts: on random words and on the words at both sides of every bin boundary,
    # every fast-region end and every bucket boundary.
    table = make()
    for bits in (10, table.guide_bits):
        _check_guide(table, bits)


def _check_guide(table, bits: int) -> None:  # type: ignore[no-untyped-def]
    guide = table._build_guide(bits)
    assert guide.size == 2**bits
    shift = 64 - samplers._K
    edges = np.concatenate([table.cum[:-1], table.fast_limit]).astype(np.uint64) << np.uint64(shift)
    buckets = np.arange(guide.size, dtype=np.uint64) << np.uint64(64 - bits)
    rng = np.random.default_rng(0)
    words = np.concatenate(
        [
            rng.integers(0, 2**64, size=50_000, dtype=np.uint64),
            edges,
            edges - np.uint64(1),
            buckets,
            buckets - np.uint64(1),
        ]
    )
    v = (words >> np.uint64(shift)).view(np.int64)
    b = np.searchsorted(table.cum, v, side="right")
    named = guide[words >> np.uint64(64 - bits)].astype(np.int64)
    decided = named >= 0
    assert np.all(v[decided] < table.fast_limit[b[decided]])
    assert np.array_equal(named[decided], b[decided] + table.start - 1)
    if bits == table.guide_bits and table.weights[0] + table.weights[-2] < 2**samplers._K // 100:
        assert decided.mean() > 0.5  # the guide decides most proposals (speed, not law)


@pytest.mark.slow
def test_poisson_bounds_hold_at_a_large_mean() -> None:
    # The M·2**e scale and the long float products: lo <= exact <= hi on every 97th bin.
    table = samplers._PoissonTable(5e5)
    for i in range(0, table.hi.size, 97):
        exact = table.exact_weight(table.start + i)
        assert int(table.lower[i + 1]) <= exact <= int(table.hi[i])


# -- the law at the scales a training round uses -----------------------------------------


@pytest.mark.parametrize("sigma", [10.0, 1000.0])
def test_discrete_gaussian_wide_draws(sigma: float) -> None:
    # 200,000 draws: four passes of the vectorised sampler, searched then guided.
    x = exact_discrete_gaussian(200_000, sigma, seed=77)
    lp = log_dg(sigma, math.ceil(12 * sigma))
    half = (lp.size - 1) // 2
    assert _chi_square_pvalue(x, {k - half: v for k, v in enumerate(lp)}) > ALPHA


@pytest.mark.parametrize("lam", [0.5, 5e5])
def test_poisson_wide_draws(lam: float) -> None:
    x = exact_poisson(200_000, lam, seed=41)
    lo, hi = max(0, int(lam - 12 * math.sqrt(lam))), int(lam + 12 * math.sqrt(lam) + 40)
    ks = np.arange(lo, hi)
    pmf = dict(zip(ks.tolist(), stats.poisson.logpmf(ks, lam), strict=True))
    assert _chi_square_pvalue(x, pmf) > ALPHA


def test_moments_match_the_exact_laws() -> None:
    # Sample mean and variance against the exact ones (z-tests on n = 400,000 draws,
    # normal approximation of the estimators; |z| < 4.89 is two-sided α = 1e-6 each).
    n = 400_000
    sigma = 10.0
    lp = log_dg(sigma, 200)
    k = np.arange(-200, 201, dtype=np.float64)
    p = np.exp(lp)
    var = float(np.sum(p * k * k))
    mu4 = float(np.sum(p * k**4))
    lam = 50.0  # Skellam(λ, λ): mean 0, variance 2λ, fourth central moment 2λ + 3(2λ)²
    cases = [
        (exact_discrete_gaussian(n, sigma, seed=101), var, mu4),
        (skellam_noise(n, lam, seed=102), 2 * lam, 2 * lam + 3 * (2 * lam) ** 2),
    ]
    for sample, v, m4 in cases:
        x = sample.astype(np.float64)
        assert abs(x.mean()) / math.sqrt(v / n) < 4.89
        assert abs(np.mean(x * x) - v) / math.sqrt((m4 - v * v) / n) < 4.89


def test_small_and_large_draws_share_the_law() -> None:
    # Below a table's guide threshold draws use the binary search only; split into
    # many small calls, the pooled draws follow the same law (χ², α = 1e-6).
    sigma = 3.0
    samplers._gaussian_table.cache_clear()
    parts = [exact_discrete_gaussian(64, sigma, seed=i) for i in range(1500)]
    lp = log_dg(sigma, 100)
    assert _chi_square_pvalue(np.concatenate(parts), {k - 100: v for k, v in enumerate(lp)}) > (
        ALPHA
    )


@pytest.mark.parametrize(("sampler", "param"), [*SAMPLERS, (exact_discrete_gaussian, 1000.0)])
def test_draws_do_not_depend_on_the_table_history(sampler, param) -> None:  # type: ignore[no-untyped-def]
    # A server re-derives a client's layer noise from its seed in another process: the
    # values must not depend on which tables (or guide sizes) that process built before.
    samplers._poisson_table.cache_clear()
    samplers._gaussian_table.cache_clear()
    cold = sampler(150_000, param, seed=b"layer")
    for size in (10, 5_000, 300_000):  # grows the table's guide to its full size
        sampler(size, param, seed=size)
    assert np.array_equal(cold, sampler(150_000, param, seed=b"layer"))
    samplers._poisson_table.cache_clear()
    samplers._gaussian_table.cache_clear()
    small = sampler(3_000, param, seed=b"small")  # no guide yet: the search decides alone
    sampler(300_000, param, seed=1)
    assert np.array_equal(small, sampler(3_000, param, seed=b"small"))
