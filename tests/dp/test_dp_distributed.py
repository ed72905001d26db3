"""Distributed DP under secure aggregation: exact samplers, accounting, calibration, ring.

Statistical tests use fixed seeds, so they are deterministic; the stated α is the
probability that a correct sampler fails that test for a random seed.  The
accounting is checked against independent computations: exact Rényi divergences
of the noisy sums (log-space pmfs, small d), an independent re-implementation of
the published bounds, and dp-accounting's RDP conversion and accountant.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from scipy.special import gammaln, logsumexp

from privfed.dp import Adjacency, GaussianRelease, PrivacyLedger
from privfed.dp import distributed as dd
from privfed.dp.distributed import (
    EXACT_DISCRETE_GAUSSIAN_SAMPLER,
    RDP_ORDERS,
    SKELLAM_SAMPLER,
    calibrate_distributed_discrete_gaussian,
    calibrate_distributed_skellam,
    check_ring,
    ddg_rdp,
    ddg_tau,
    ddg_zcdp,
    effective_sensitivities,
    exact_discrete_gaussian,
    exact_poisson,
    min_honest_contributors,
    rdp_delta,
    rdp_epsilon,
    skellam_noise,
    skellam_rdp,
    skellam_zcdp,
    wrap_probability,
)
from privfed.dp.noise import DISCRETE_GAUSSIAN_SAMPLER, GAUSSIAN_SAMPLER
from privfed.dp.releases.distributed_gaussian import DistributedDiscreteGaussianRelease
from privfed.dp.releases.distributed_skellam import DistributedSkellamRelease
from privfed.errors import (
    BudgetExceededError,
    LedgerError,
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)

#: False-failure rate of each statistical test.
ALPHA = 1e-6
ORDERS = np.asarray(RDP_ORDERS)


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


def _log_dg(sigma: float, half: int) -> np.ndarray:
    x = np.arange(-half, half + 1, dtype=np.float64)
    lw = -(x * x) / (2.0 * sigma * sigma)
    return np.asarray(lw - logsumexp(lw))


def _log_convolve(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """Log-pmf of the sum of two independent symmetric integer variables (log space)."""
    size = la.size + lb.size - 1
    grid = np.full((la.size, size), -np.inf)
    for i in range(la.size):
        grid[i, i : i + lb.size] = la[i] + lb
    return np.asarray(logsumexp(grid, axis=0))


def _log_dg_sum(sigma: float, n: int, half: int = 80) -> np.ndarray:
    one = _log_dg(sigma, half)
    out = one
    for _ in range(n - 1):
        out = _log_convolve(out, one)
    return out


def _log_skellam(m: float, half: int = 300, terms: int = 900) -> np.ndarray:
    """log P[K = k] for K ~ Skellam(m, m), k in [-half, half] (exact series, log space)."""
    k = np.abs(np.arange(-half, half + 1))[:, None]
    j = np.arange(terms)[None, :]
    log_terms = (2 * j + k) * math.log(m) - 2 * m - gammaln(j + k + 1) - gammaln(j + 1)
    return np.asarray(logsumexp(log_terms, axis=1))


def _renyi_1d(log_p: np.ndarray, shift: int, alpha: float) -> float:
    """D_α(P(· − shift) ‖ P) for a symmetric log-pmf on a window, dropping the window edge.

    Asserts the dropped terms are negligible (the summand at the window edge is far
    below its maximum), so truncation cannot hide divergence.
    """
    s = abs(shift)  # P is symmetric, so the sign of the shift does not matter
    if s == 0:
        return 0.0
    lq = log_p[s:]  # log P(x)
    lp = log_p[: log_p.size - s]  # log P(x − s), same x
    summand = alpha * lp + (1.0 - alpha) * lq
    top = float(np.max(summand))
    assert max(summand[0], summand[-1]) < top - 60.0
    return float(logsumexp(summand) / (alpha - 1.0))


# -- the exact primitives -------------------------------------------------------------------


def test_exp_bounds_bracket_the_exact_value() -> None:
    mpmath.mp.dps = 120
    for num, den in [(0, 1), (1, 3), (7, 2), (1, 1), (5, 1000), (123456789, 98765), (3, 2**60)]:
        for bits in (8, 64, 200):
            lo, hi = dd._exp_scaled_bounds(num, den, bits)
            exact = mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** bits
            assert lo <= exact <= hi
            assert hi - lo <= 4


def test_exp_less_is_exact_near_the_boundary() -> None:
    mpmath.mp.dps = 80
    for num, den, bits in [(1, 2, 70), (9, 7, 100), (1, 10**9, 64)]:
        exact = mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** bits
        below = int(mpmath.floor(exact))
        assert dd._exp_less(num, den, below, bits)
        assert not dd._exp_less(num, den, below + 1, bits)
    assert dd._exp_less(0, 1, 2**10 - 1, 10) and not dd._exp_less(0, 1, 2**10, 10)


def test_bernoulli_primitives_have_the_exact_law() -> None:
    # Each count is Binomial(n, p); two-sided binomial tests, α = 1e-6 each.
    source = dd._Source(b"test", 11)
    n = 20_000
    cases = [
        (lambda: source.bernoulli_exp(3, 10), math.exp(-0.3)),
        (lambda: source.bernoulli_exp(27, 10), math.exp(-2.7)),
        (lambda: source.bernoulli(2, 7), 2 / 7),
        # offset 2 + U < 4·e^{-1/2} = 2.426...: probability 0.426...
        (lambda: dd._uniform_below_exp(source, 2, 1, 2, 2), 4 * math.exp(-0.5) - 2),
        (lambda: dd._uniform_below_fraction(source, 3, Fraction(37, 10)), 0.7),
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
    poisson = dd._PoissonTable(7.3)
    for i in range(poisson.hi.size):
        exact = poisson.exact_weight(poisson.start + i)
        assert int(poisson.lower[i + 1]) <= exact <= int(poisson.hi[i])
    mpmath.mp.dps = 60
    gauss = dd._DiscreteGaussianTable(3.0)
    scale = mpmath.mpf(2) ** (gauss.scale_bits + 1)
    for x in range(1, gauss.hi.size):
        exact = scale * mpmath.exp(-mpmath.mpf(x * x) / 18)
        assert int(gauss.lower[x + 1]) <= exact <= int(gauss.hi[x])
    assert gauss.hi[0] == gauss.lower[1] == 2**gauss.scale_bits


def test_exact_window_acceptance_has_the_fractional_probability() -> None:
    # The slow path decides offset + U < y exactly: at offset floor(y) its probability
    # is frac(y).  Binomial tests, α = 1e-6 each.
    source = dd._Source(b"window", 3)
    poisson = dd._PoissonTable(7.3)
    index = 4
    y = poisson.exact_weight(poisson.start + index)
    floor_y = math.floor(y)
    mpmath.mp.dps = 60
    gauss = dd._DiscreteGaussianTable(3.0)
    g = mpmath.mpf(2) ** (gauss.scale_bits + 1) * mpmath.exp(-mpmath.mpf(25) / 18)
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
    lp = _log_dg(sigma, math.ceil(60 * sigma))
    half = (lp.size - 1) // 2
    assert _chi_square_pvalue(x, {k - half: v for k, v in enumerate(lp)}) > ALPHA


def test_discrete_gaussian_tails_are_untruncated() -> None:
    # A window of ±2 forces most of the mass through the exact geometric tail path.
    x = exact_discrete_gaussian(10_000, 3.0, seed=5, _half_width=2)
    lp = _log_dg(3.0, 200)
    assert _chi_square_pvalue(x, {k - 200: v for k, v in enumerate(lp)}) > ALPHA
    # In the ordinary sampler: |X| >= 4σ has probability p; Binomial count, α = 1e-6.
    sigma, n = 2.0, 400_000
    y = exact_discrete_gaussian(n, sigma, seed=6)
    lq = _log_dg(sigma, 200)
    p = float(np.exp(lq[np.abs(np.arange(-200, 201)) >= 8]).sum())
    assert stats.binomtest(int(np.sum(np.abs(y) >= 8)), n, p).pvalue > ALPHA


def test_sum_of_client_discrete_gaussians_has_the_convolved_law() -> None:
    clients, sigma = 5, 1.3
    total = exact_discrete_gaussian((clients, 60_000), sigma, seed=9).sum(axis=0)
    lp = _log_dg_sum(sigma, clients, half=40)
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
    lp = _log_skellam(clients * lam, half=80)
    assert _chi_square_pvalue(total, {k - 80: v for k, v in enumerate(lp)}) > ALPHA


# -- accounting: conversion -------------------------------------------------------------------


def test_orders_are_the_ledgers() -> None:
    assert tuple(float(a) for a in rdp_lib.DEFAULT_RDP_ORDERS) == RDP_ORDERS


@given(
    rho=st.floats(1e-6, 10.0),
    xi=st.floats(0.0, 1.0),
    delta=st.floats(1e-12, 1e-2),
)
def test_conversion_matches_dp_accounting_and_rounds_up(
    rho: float, xi: float, delta: float
) -> None:
    curve = xi + rho * ORDERS
    eps = rdp_epsilon(curve, delta)
    reference, _ = rdp_lib.compute_epsilon(RDP_ORDERS, list(curve), delta)
    assert reference <= eps <= reference * (1 + 1e-9) + 1e-12
    spent = rdp_delta(curve, eps)
    assert spent <= delta * (1 + 1e-6)
    assert rdp_delta(curve, eps) >= rdp_lib.compute_delta(RDP_ORDERS, list(curve), eps)[0]


def test_conversion_arguments_are_checked() -> None:
    with pytest.raises(ParameterError):
        rdp_epsilon([1.0, 2.0], 1e-5)  # length differs from the orders
    with pytest.raises(ParameterError):
        rdp_epsilon([-1.0], 1e-5, orders=[2.0])
    with pytest.raises(ParameterError):
        rdp_epsilon([1.0], 1e-5, orders=[1.0])
    with pytest.raises(ParameterError):
        rdp_epsilon([1.0], 0.0, orders=[2.0])
    assert rdp_epsilon([math.inf], 1e-5, orders=[2.0]) == math.inf
    assert rdp_epsilon([0.0], 1e-5, orders=[2.0]) == 0.0


# -- accounting: the distributed discrete Gaussian ---------------------------------------------


def _taus(n: int, sigma: float) -> list[float]:
    """τ_m for m = 1..n, summed independently (math.fsum of math.exp terms)."""
    terms = [math.exp(-2 * math.pi**2 * sigma**2 * k / (k + 1)) for k in range(1, n)]
    return [10 * math.fsum(terms[: m - 1]) for m in range(1, n + 1)]


def _prop14_reference(
    alpha: np.ndarray, m: int, tau: float, sigma: float, d2: float, d1: float, d: int
) -> np.ndarray:
    """Kairouz–Liu–Steinke Prop. 14 at exactly m clients, written out independently."""
    a2, a1 = d2 / (math.sqrt(m) * sigma), d1 / (math.sqrt(m) * sigma)
    return np.minimum.reduce(
        [
            alpha * a2**2 / 2 + tau * d,
            alpha / 2 * (a2**2 + 2 * a1 * tau + tau**2 * d),
            alpha / 2 * (a2 + math.sqrt(d) * tau) ** 2,
        ]
    )


def _ddg_reference_curve(n: int, sigma: float, d2: float, d1: float, d: int) -> np.ndarray:
    """Independent brute force: the Prop. 14 bound minimised over every m <= n."""
    taus = _taus(n, sigma)
    return np.minimum.reduce(
        [_prop14_reference(ORDERS, m, taus[m - 1], sigma, d2, d1, d) for m in range(1, n + 1)]
    )


def test_single_client_is_the_discrete_gaussian_zcdp() -> None:
    # Canonne–Kamath–Steinke: N_Z(0, σ²) noise on a Δ-sensitive integer query is
    # (Δ²/(2σ²))-zCDP, i.e. ε(α) = αΔ²/(2σ²); with one client τ = 0.
    curve = ddg_rdp(ORDERS, num_clients=1, noise_std=3.0, l2_sensitivity=2.0, dimension=5)
    assert np.allclose(curve, ORDERS * 4.0 / 18.0, rtol=1e-11)
    assert ddg_tau(1, 3.0) == 0.0


def test_tau_matches_an_independent_sum() -> None:
    for n, sigma in [(2, 0.5), (10, 1.0), (1000, 0.8), (50, 3.0)]:
        reference = 10 * mpmath.fsum(
            mpmath.exp(-2 * mpmath.pi**2 * sigma**2 * k / (k + 1)) for k in range(1, n)
        )
        assert float(reference) <= ddg_tau(n, sigma) <= float(reference) * (1 + 1e-10)


@pytest.mark.parametrize(
    ("n", "sigma", "d", "d2", "d1"),
    [(1, 2.0, 10, 5.0, 5.0), (7, 0.6, 200, 3.0, 9.0), (40, 0.9, 5000, 20.0, 400.0)],
)
def test_ddg_curve_equals_the_independent_minimum(
    n: int, sigma: float, d: int, d2: float, d1: float
) -> None:
    curve = ddg_rdp(
        ORDERS, num_clients=n, noise_std=sigma, l2_sensitivity=d2, l1_sensitivity=d1, dimension=d
    )
    reference = _ddg_reference_curve(n, sigma, d2, d1, d)
    assert np.all(curve >= reference) and np.allclose(curve, reference, rtol=1e-9)
    at_n = _prop14_reference(ORDERS, n, _taus(n, sigma)[-1], sigma, d2, d1, d)
    assert np.all(curve <= at_n * (1 + 1e-9))


@pytest.mark.parametrize(
    ("n", "sigma", "shift"),
    [
        (1, 0.5, [1]),
        (2, 0.5, [1]),
        (3, 1.0, [1]),
        (2, 0.7, [2]),
        (4, 0.6, [1, 1]),
        (3, 1.0, [2, 1]),
    ],
)
def test_ddg_bound_dominates_the_exact_renyi_divergence(
    n: int, sigma: float, shift: list[int]
) -> None:
    # The exact divergence of the sum of n discrete Gaussians (per coordinate, summed
    # over coordinates) between neighbouring totals x and x + shift.
    log_p = _log_dg_sum(sigma, n)
    v = np.asarray(shift)
    d2, d1 = float(np.linalg.norm(v)), float(np.abs(v).sum())
    orders = [1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0]
    bound = ddg_rdp(
        orders,
        num_clients=n,
        noise_std=sigma,
        l2_sensitivity=d2,
        l1_sensitivity=d1,
        dimension=v.size,
    )
    for alpha, b in zip(orders, bound, strict=True):
        exact = sum(_renyi_1d(log_p, int(s), alpha) for s in v)
        assert exact <= b
    # Not vacuous: with three clients of σ = 1 the bound is within 1 % of the truth.
    if (n, sigma, shift) == (3, 1.0, [1]):
        assert _renyi_1d(log_p, 1, 8.0) >= 0.99 * bound[4]


@given(
    n=st.integers(1, 300),
    extra=st.integers(1, 300),
    sigma=st.floats(0.5, 4.0),
    d=st.integers(1, 10**6),
    d2=st.floats(1.0, 1e3),
)
def test_more_contributors_never_lower_privacy(
    n: int, extra: int, sigma: float, d: int, d2: float
) -> None:
    kwargs = {"noise_std": sigma, "l2_sensitivity": d2, "dimension": d}
    few = ddg_rdp(ORDERS, num_clients=n, **kwargs)
    many = ddg_rdp(ORDERS, num_clients=n + extra, **kwargs)
    assert np.all(many <= few)
    assert rdp_epsilon(many, 1e-6) <= rdp_epsilon(few, 1e-6)
    lam = sigma * sigma / 2
    s_few = skellam_zcdp(num_clients=n, poisson_mean=lam, l2_sensitivity=d2, dimension=d)
    s_many = skellam_zcdp(num_clients=n + extra, poisson_mean=lam, l2_sensitivity=d2, dimension=d)
    assert s_many[0] <= s_few[0] and s_many[1] <= s_few[1]


@given(n=st.integers(1, 2000), sigma=st.floats(0.5, 6.0), d=st.integers(1, 10**6))
def test_the_zcdp_export_line_bounds_the_curve(n: int, sigma: float, d: int) -> None:
    kwargs = {"num_clients": n, "noise_std": sigma, "l2_sensitivity": 50.0, "dimension": d}
    curve = ddg_rdp(ORDERS, **kwargs)
    rho, xi = ddg_zcdp(**kwargs)
    assert np.all(curve <= xi + rho * ORDERS)


def test_effective_sensitivities() -> None:
    assert effective_sensitivities(3.0, None, 4) == (3.0, 6.0)  # √d·Δ₂ < Δ₂²
    assert effective_sensitivities(2.0, None, 100) == (2.0, 4.0)  # Δ₂² < √d·Δ₂
    assert effective_sensitivities(5.0, 2.0, 100) == (2.0, 2.0)  # ‖v‖₂ <= ‖v‖₁
    assert effective_sensitivities(2.0, 50.0, 9) == (2.0, 4.0)
    with pytest.raises(ParameterError):
        effective_sensitivities(-1.0, None, 3)
    with pytest.raises(ParameterTypeError):
        effective_sensitivities(1.0, None, True)  # type: ignore[arg-type]


# -- accounting: Skellam ------------------------------------------------------------------------


@pytest.mark.parametrize(("mu", "shift"), [(1.0, [1]), (4.0, [2]), (20.0, [1, 1]), (6.0, [3, 1])])
def test_skellam_bound_dominates_the_exact_renyi_divergence(mu: float, shift: list[int]) -> None:
    n = 2
    lam = mu / (2 * n)
    log_p = _log_skellam(mu / 2)
    v = np.asarray(shift)
    d2, d1 = float(np.linalg.norm(v)), float(np.abs(v).sum())
    orders = [1.5, 2.0, 2.5, 3.0, 4.7, 8.0, 16.0, 32.0]
    kwargs = {"num_clients": n, "poisson_mean": lam, "l2_sensitivity": d2, "dimension": v.size}
    curve = skellam_rdp(orders, l1_sensitivity=d1, **kwargs)
    rho, xi = skellam_zcdp(l1_sensitivity=d1, **kwargs)
    for alpha, b in zip(orders, curve, strict=True):
        exact = sum(_renyi_1d(log_p, int(s), alpha) for s in v)
        assert exact <= b <= xi + rho * alpha


def test_skellam_curve_interpolates_between_integer_orders() -> None:
    kwargs = {"num_clients": 3, "poisson_mean": 10.0, "l2_sensitivity": 4.0, "dimension": 16}
    integers = skellam_rdp([2.0, 3.0, 4.0], **kwargs)
    mu, d2, d1 = 60.0, 4.0, 16.0
    for k, value in zip([2, 3, 4], integers, strict=True):
        expected = k * d2**2 / (2 * mu) + min(
            ((2 * k - 1) * d2**2 + 6 * d1) / (4 * mu**2), 3 * d1 / (2 * mu)
        )
        assert value == pytest.approx(expected, rel=1e-11)
    middle = skellam_rdp([2.5, 1.2], **kwargs)
    assert integers[0] < middle[0] < integers[1]  # tighter than rounding up
    assert middle[1] == integers[0]  # on (1, 2): ε(2)
    # Far from the noise floor Skellam approaches the Gaussian α Δ²/(2μ).
    big = skellam_rdp([8.0], num_clients=1, poisson_mean=1e8, l2_sensitivity=1.0, dimension=1)
    assert big[0] == pytest.approx(8.0 / 4e8, rel=1e-6)


# -- calibration ----------------------------------------------------------------------------------


@given(
    epsilon=st.floats(0.2, 16.0),
    delta=st.floats(1e-10, 1e-3),
    d2=st.floats(1.0, 1e4),
    d=st.integers(1, 10**6),
    n=st.integers(1, 200),
)
def test_calibrated_discrete_gaussian_meets_the_target(
    epsilon: float, delta: float, d2: float, d: int, n: int
) -> None:
    sigma = calibrate_distributed_discrete_gaussian(
        epsilon, delta, l2_sensitivity=d2, dimension=d, num_clients=n
    )
    d1 = min(math.sqrt(d) * d2, d2 * d2)
    reference = _ddg_reference_curve(n, sigma, d2, d1, d)
    spent, _ = rdp_lib.compute_epsilon(RDP_ORDERS, list(reference), delta)
    assert spent <= epsilon * (1 + 1e-9)
    # Minimal up to the 17-bit rounding (relative 2**-16), unless at the domain floor.
    if sigma > 0.5:
        lower = sigma * (1 - 1e-4)
        curve = ddg_rdp(ORDERS, num_clients=n, noise_std=lower, l2_sensitivity=d2, dimension=d)
        assert rdp_epsilon(curve, delta) > epsilon
    release = DistributedDiscreteGaussianRelease(
        name="r", partition=None, num_contributors=n, noise_std=sigma, l2_sensitivity=d2,
        l1_sensitivity=d1, dimension=d, adjacency=Adjacency.REPLACE_ONE,
        sampler=EXACT_DISCRETE_GAUSSIAN_SAMPLER, seeded=False,
    )  # fmt: skip
    PrivacyLedger(budget_epsilon=epsilon, budget_delta=delta).record(release)


@given(
    epsilon=st.floats(0.2, 16.0),
    delta=st.floats(1e-10, 1e-3),
    d2=st.floats(1.0, 1e4),
    d=st.integers(1, 10**6),
    n=st.integers(1, 10**4),
)
def test_calibrated_skellam_meets_the_target(
    epsilon: float, delta: float, d2: float, d: int, n: int
) -> None:
    lam = calibrate_distributed_skellam(
        epsilon, delta, l2_sensitivity=d2, dimension=d, num_clients=n
    )
    # Independent line: μ = 2nλ, ρ = Δ²/(2μ)(1 + 1/μ), ξ = Δ²/(2μ) + (Δ² + 6Δ₁)/(4μ²).
    mu, d1 = 2 * n * lam, min(math.sqrt(d) * d2, d2 * d2)
    rho = d2**2 / (2 * mu) * (1 + 1 / mu)
    xi = d2**2 / (2 * mu) + (d2**2 + 6 * d1) / (4 * mu**2)
    accountant = rdp_lib.RdpAccountant()
    accountant.compose(dp_accounting.ZCDpEvent(rho=rho, xi=xi))
    assert accountant.get_epsilon(delta) <= epsilon * (1 + 1e-9)
    line = skellam_zcdp(
        num_clients=n, poisson_mean=lam * (1 - 1e-4), l2_sensitivity=d2, dimension=d
    )
    assert rdp_epsilon(line[1] + line[0] * ORDERS, delta) > epsilon


def test_calibration_arguments_are_checked() -> None:
    kwargs = {"l2_sensitivity": 1.0, "dimension": 3, "num_clients": 2}
    with pytest.raises(ParameterError):
        calibrate_distributed_discrete_gaussian(0.0, 1e-5, **kwargs)
    with pytest.raises(ParameterError):
        calibrate_distributed_skellam(1.0, 1.0, **kwargs)
    with pytest.raises(ParameterError):
        calibrate_distributed_discrete_gaussian(
            1.0, 1e-5, l2_sensitivity=0.0, dimension=3, num_clients=2
        )
    with pytest.raises(ParameterError):
        calibrate_distributed_skellam(1.0, 1e-5, l2_sensitivity=1.0, dimension=3, num_clients=0)


# -- release kinds and the ledger -----------------------------------------------------------------


def _ddg(**changes: object) -> DistributedDiscreteGaussianRelease:
    return dataclasses.replace(DistributedDiscreteGaussianRelease.examples()[2], **changes)  # type: ignore[arg-type]


def _skellam(**changes: object) -> DistributedSkellamRelease:
    return dataclasses.replace(DistributedSkellamRelease.examples()[0], **changes)  # type: ignore[arg-type]


def test_release_fields_are_validated() -> None:
    for bad in (
        {"num_contributors": 0},
        {"num_contributors": 2**20 + 1},
        {"noise_std": 0.4},
        {"l2_sensitivity": -1.0},
        {"dimension": 0},
        {"sampler": GAUSSIAN_SAMPLER},
        {"sampler": DISCRETE_GAUSSIAN_SAMPLER},
        {"sampler": SKELLAM_SAMPLER},
    ):
        with pytest.raises(ParameterError):
            _ddg(**bad)
    for bad_type in ({"num_contributors": True}, {"noise_std": "2"}, {"seeded": 1}):
        with pytest.raises(ParameterTypeError):
            _ddg(**bad_type)
    for bad in ({"poisson_mean": 0.0}, {"sampler": EXACT_DISCRETE_GAUSSIAN_SAMPLER}):
        with pytest.raises(ParameterError):
            _skellam(**bad)
    assert _ddg(sampler="my-exact-discrete-gaussian").sampler == "my-exact-discrete-gaussian"


def test_exports_are_the_zcdp_lines() -> None:
    ddg = _ddg()
    rho, xi = ddg_zcdp(
        num_clients=100,
        noise_std=12.0,
        l2_sensitivity=300.0,
        l1_sensitivity=30000.0,
        dimension=100_000,
    )
    assert ddg.to_dp_accounting_event() == dp_accounting.ZCDpEvent(rho=rho, xi=xi)
    assert (
        ddg.to_dp_accounting_event(relation="replace-one", accountant="rdp")
        == ddg.to_dp_accounting_event()
    )
    for release in (ddg, _skellam()):
        with pytest.raises(LedgerError):
            release.to_dp_accounting_event(accountant="pld")
        with pytest.raises(LedgerError):
            release.pld(1e-4)
    free = _skellam(l2_sensitivity=0.0)
    assert free.to_dp_accounting_event() == dp_accounting.NoOpDpEvent()
    assert np.all(free.rdp([2.0, 3.0]) == 0.0)


def test_small_noise_export_is_conservative() -> None:
    # σ = 0.8 with d = 10⁵: τd is large, the accounted curve uses the other two terms
    # of Prop. 14 and the zCDP export is an upper bound (never under the ledger).
    release = _ddg(
        noise_std=0.8,
        num_contributors=1000,
        dimension=100_000,
        l2_sensitivity=20.0,
        l1_sensitivity=400.0,
    )
    ledger = PrivacyLedger()
    ledger.record(release)
    accountant = rdp_lib.RdpAccountant()
    accountant.compose(ledger.to_dp_accounting_event(accountant="rdp"))
    assert accountant.get_epsilon(1e-5) > 2 * ledger.epsilon(1e-5)


def test_composition_with_a_gaussian_release_uses_rdp() -> None:
    gaussian = GaussianRelease(
        name="g", partition=None, l2_sensitivity=1.0, noise_std=4.0,
        adjacency=Adjacency.ADD_REMOVE, sampler=GAUSSIAN_SAMPLER, seeded=False,
    )  # fmt: skip
    ddg, skellam = _ddg(), _skellam()
    ledger = PrivacyLedger()
    ledger.record_all([gaussian, ddg, skellam])
    assert ledger.method() == "rdp"
    total = gaussian.rdp(RDP_ORDERS) + ddg.rdp(RDP_ORDERS) + skellam.rdp(RDP_ORDERS)
    expected, _ = rdp_lib.compute_epsilon(RDP_ORDERS, list(total), 1e-6)
    assert ledger.epsilon(1e-6) == pytest.approx(expected, rel=1e-12)
    accountant = rdp_lib.RdpAccountant()
    accountant.compose(ledger.to_dp_accounting_event(accountant="rdp"))
    assert accountant.get_epsilon(1e-6) == pytest.approx(expected, rel=1e-9)


def test_a_budget_overrun_is_refused_atomically() -> None:
    ddg = _ddg()
    single = PrivacyLedger()
    single.record(ddg)
    budget = single.epsilon(1e-6) * 1.01
    ledger = PrivacyLedger(budget_epsilon=budget, budget_delta=1e-6)
    ledger.record(ddg)
    before = (ledger.releases, ledger.to_json())
    gaussian = GaussianRelease(
        name="g", partition=None, l2_sensitivity=1.0, noise_std=0.5,
        adjacency=Adjacency.ADD_REMOVE, sampler=GAUSSIAN_SAMPLER, seeded=False,
    )  # fmt: skip
    with pytest.raises(BudgetExceededError):
        ledger.record(gaussian)
    with pytest.raises(BudgetExceededError):
        ledger.record_all([_skellam(), dataclasses.replace(ddg, name="again")])
    assert (ledger.releases, ledger.to_json()) == before
    assert PrivacyLedger.from_json(ledger.to_json()).releases == ledger.releases


# -- honest contributors and the ring --------------------------------------------------------------


def test_min_honest_contributors() -> None:
    assert min_honest_contributors(17, 5) == 12
    assert min_honest_contributors(3, 0, num_clients=3) == 3
    with pytest.raises(ParameterError):
        min_honest_contributors(5, 5)  # no honest contributor guaranteed: refused
    with pytest.raises(ParameterError):
        min_honest_contributors(11, 2, num_clients=10)
    with pytest.raises(ParameterError):
        min_honest_contributors(3, 11, num_clients=10)
    with pytest.raises(ParameterTypeError):
        min_honest_contributors(3, True)  # type: ignore[arg-type]


def test_wrap_bound_dominates_the_exact_tails() -> None:
    # Discrete Gaussian: the exact tail of the sum of 3 clients (log-space pmf).
    log_p = _log_dg_sum(1.5, 3, half=60)
    half = (log_p.size - 1) // 2
    for t in (5, 10, 20):
        exact = 2 * float(np.exp(logsumexp(log_p[half + t :])))
        bound = wrap_probability(
            ring_bits=8, mechanism="discrete-gaussian", noise=1.5, num_summands=3,
            total_bound=128 - t, dimension=1,
        )  # fmt: skip
        assert exact <= bound
    # Skellam: against scipy's survival function of Skellam(nλ, nλ).
    for t in (10, 40, 80):
        exact = 2 * float(stats.skellam.sf(t - 1, 20.0, 20.0))
        bound = wrap_probability(
            ring_bits=8, mechanism="skellam", noise=5.0, num_summands=4,
            total_bound=128 - t, dimension=1,
        )  # fmt: skip
        assert exact <= bound
    assert (
        wrap_probability(
            ring_bits=8,
            mechanism="skellam",
            noise=5.0,
            num_summands=4,
            total_bound=128,
            dimension=1,
        )
        == 1.0
    )


def test_check_ring_refuses_a_small_ring() -> None:
    # 1000 summands of σ = 40 over 10⁶ coordinates need t ≈ 11.6k grid units of headroom
    # for 2**-40; 21 bits leave 5000 above B, 22 bits about 10⁶.
    kwargs = {"mechanism": "discrete-gaussian", "noise": 40.0, "num_summands": 1000,
              "total_bound": 2**20 - 5000, "dimension": 10**6}  # fmt: skip
    assert check_ring(ring_bits=22, **kwargs) <= 2.0**-40  # type: ignore[arg-type]
    with pytest.raises(RingOverflowError):
        check_ring(ring_bits=21, **kwargs)  # type: ignore[arg-type]
    # 11000 units of headroom: a bound of about 7e-11, over 2**-40 but under 1e-9.
    tight = {**kwargs, "total_bound": 2**20 - 11000}
    with pytest.raises(RingOverflowError):
        check_ring(ring_bits=21, **tight)  # type: ignore[arg-type]
    assert 1e-11 < check_ring(ring_bits=21, limit=1e-9, **tight) < 1e-9  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        check_ring(ring_bits=65, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        wrap_probability(
            ring_bits=32, mechanism="laplace", noise=1.0, num_summands=1, total_bound=0, dimension=1
        )  # type: ignore[arg-type]
