"""privfed.audit._distributions against the scipy.stats calls it replaced.

The audit used ``scipy.stats`` for mid-ranks, normal quantiles and beta
quantiles; loading it cost about a second of every ``privfed run``.  The
replacements must return the *same floats* (compared with ``==`` and the sign
of zero, not with a tolerance), over ties, tiny and huge sample sizes, k = 0
and k = n, and extreme confidence levels.  Inputs are drawn from fixed seeds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from typing import Literal

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import special, stats

from privfed.audit import (
    AucInterval,
    AucIntervalMethod,
    BoundSpec,
    auc_score,
    auc_with_interval,
    clopper_pearson,
    lower_bound_at_threshold,
    mu_lower_bound_from_rates,
)
from privfed.audit._distributions import (
    beta_isf,
    beta_ppf,
    logsumexp_rows,
    midranks,
    normal_isf,
    normal_logpdf,
    normal_ppf,
)

# Sizes from 1 to 10¹²: tiny samples, the run's ~450-1000, and far beyond.
_SIDES: tuple[Literal["two-sided", "upper", "lower"], ...] = ("two-sided", "upper", "lower")
_SIZES = np.array([1, 2, 3, 5, 10, 37, 100, 450, 1024, 10**4, 10**6, 10**9, 10**12])


def _same(actual: NDArray[np.float64], expected: NDArray[np.float64]) -> None:
    """Equal bit for bit: same shape, dtype, values, NaNs and signs of zero."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype == np.float64
    np.testing.assert_array_equal(actual, expected, strict=True)
    assert np.array_equal(np.signbit(actual), np.signbit(expected))


def _binomial_cases(seed: int, size: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(k, n) pairs: n log-uniform in [1, 1e12] or small, k uniform, 0, 1, n − 1 or n."""
    rng = np.random.default_rng(seed)
    n = np.exp(rng.uniform(0.0, np.log(1e12), size)).astype(np.int64)
    n = np.where(rng.random(size) < 0.4, rng.integers(1, 60, size), n)
    n[: _SIZES.size] = _SIZES
    k = np.minimum((rng.random(size) * (n + 1)).astype(np.int64), n)
    pick = rng.random(size)
    k = np.where(pick < 0.1, 0, np.where(pick < 0.2, n, k))
    k = np.where((pick >= 0.2) & (pick < 0.25), 1, k)
    k = np.where((pick >= 0.25) & (pick < 0.3), n - 1, k)
    return np.clip(k, 0, n), n


def _tails(seed: int, size: int, smallest: float) -> NDArray[np.float64]:
    """Tail probabilities log-uniform in [smallest, 1), with the usual levels mixed in."""
    rng = np.random.default_rng(seed)
    q = np.exp(rng.uniform(np.log(smallest), 0.0, size))
    common = np.array([0.5, 0.25, 0.05, 0.025, 0.005, 2.0**-54, 1e-12, 0.999999, 1 - 2.0**-53])
    return np.where(rng.random(size) < 0.2, rng.choice(common, size), q)


# -- mid-ranks -------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 17, 1000, 100_000])
@pytest.mark.parametrize("values", ["floats", "few-distinct", "all-equal", "signed-zeros"])
def test_midranks_equal_rankdata(size: int, values: str) -> None:
    rng = np.random.default_rng(size)
    if values == "floats":
        x = rng.standard_normal(size)
    elif values == "few-distinct":
        x = rng.integers(-3, 4, size).astype(np.float64)
    elif values == "all-equal":
        x = np.full(size, 2.5)
    else:
        # -0.0 == 0.0, so they tie; infinities rank at the ends.
        x = rng.choice(np.array([-0.0, 0.0, 1.0, -np.inf, np.inf]), size)
    _same(midranks(x), stats.rankdata(x))


def test_midranks_of_integers_and_empty() -> None:
    x = np.random.default_rng(1).integers(0, 5, 999)
    _same(midranks(x), stats.rankdata(x))
    _same(midranks(np.array([], dtype=np.float64)), stats.rankdata(np.array([])))


def test_midranks_known_values() -> None:
    assert midranks([3.0, 1.0, 3.0, 2.0, 3.0]).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]


# -- normal quantiles ----------------------------------------------------------------


def test_normal_quantiles_equal_scipy() -> None:
    rng = np.random.default_rng(2)
    q = np.concatenate(
        [
            [0.0, 1.0, 0.5, 5e-324, 2.2250738585072014e-308, 1e-300, 1 - 2.0**-53, 2.0**-53],
            np.exp(rng.uniform(np.log(1e-300), 0.0, 20_000)),
            rng.random(20_000),
        ]
    )
    _same(normal_isf(q), stats.norm.isf(q))
    _same(normal_ppf(q), stats.norm.ppf(q))
    # Scalars, as the DeLong interval and the μ bound pass them.
    for value in (0.5, 0.025, 1e-300, 1 - 2.0**-53):
        assert float(normal_isf(value)) == float(stats.norm.isf(value))
        assert float(normal_ppf(value)) == float(stats.norm.ppf(value))
    # loc = 0 turns the −0.0 of −ndtri(0.5) into 0.0, as in scipy.stats.
    assert not np.signbit(normal_isf(0.5))


def test_normal_logpdf_equals_scipy() -> None:
    # LiRA's per-record Gaussians: sds from the 1e-6 floor upwards, z up to ~1e8.
    rng = np.random.default_rng(11)
    x = rng.normal(0.0, 5.0, 20_000)
    loc = rng.normal(0.0, 5.0, 20_000)
    scale = np.exp(rng.uniform(np.log(1e-6), np.log(1e3), 20_000))
    _same(normal_logpdf(x, loc, scale), stats.norm.logpdf(x, loc, scale))
    # Broadcast: one location and scale per column, as in the online attack.
    grid = rng.normal(size=(7, 300))
    means, sds = rng.normal(size=300), rng.exponential(size=300) + 1e-6
    _same(normal_logpdf(grid, means, sds), stats.norm.logpdf(grid, means, sds))
    assert float(normal_logpdf(0.0, 0.0, 1.0)) == float(stats.norm.logpdf(0.0))


# -- beta quantiles (Clopper–Pearson) ------------------------------------------------


@pytest.mark.slow
def test_beta_isf_equals_scipy_everywhere() -> None:
    # The upper Clopper–Pearson end Beta⁻¹(1 − q; k + 1, n − k), k < n, down to
    # tails of 1e-300 (bounds.py splits a significance over many thresholds).
    k, n = _binomial_cases(3, 50_000)
    inner = k < n
    k, n = k[inner], n[inner]
    q = _tails(4, k.size, 1e-300)
    with warnings.catch_warnings():
        # At the most extreme tails both sides warn (boost gives up) and agree on NaN.
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = stats.beta.isf(q, k + 1, n - k)
        actual = beta_isf(q, k + 1, n - k)
    _same(actual, expected)
    assert np.isfinite(expected).mean() > 0.95  # mostly numbers, not NaN against NaN


@pytest.mark.slow
def test_beta_ppf_equals_scipy_for_tails_a_confidence_can_give() -> None:
    # The lower Clopper–Pearson end Beta⁻¹(q; k, n − k + 1), k > 0.  A confidence
    # level in (0, 1) gives tails >= 2⁻⁵⁴; agreement is checked down to 1e-60.
    k, n = _binomial_cases(5, 50_000)
    positive = k > 0
    k, n = k[positive], n[positive]
    q = _tails(6, k.size, 1e-60)
    expected = stats.beta.ppf(q, k, n - k + 1)
    assert np.isfinite(expected).all()
    _same(beta_ppf(q, k, n - k + 1), expected)


def test_beta_quantiles_at_the_ends_of_the_unit_interval() -> None:
    a = np.array([1.0, 2.0, 3.0, 1e6])
    b = np.array([1.0, 7.0, 1.0, 2.0])
    for q in (0.0, 1.0):
        _same(beta_ppf(q, a, b), stats.beta.ppf(q, a, b))
        _same(beta_isf(q, a, b), stats.beta.isf(q, a, b))


def _scipy_clopper_pearson(k: int, n: int, level: float, sided: str) -> tuple[float, float]:
    """The implementation the audit had before (scipy.stats), kept as the oracle."""
    alpha = 1.0 - level
    tail = alpha / 2.0 if sided == "two-sided" else alpha
    lower = 0.0 if k == 0 or sided == "upper" else float(stats.beta.ppf(tail, k, n - k + 1))
    upper = 1.0 if k == n or sided == "lower" else float(stats.beta.isf(tail, k + 1, n - k))
    return min(lower, k / n), max(upper, k / n)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 450, 1024, 10**6, 10**12])
def test_clopper_pearson_equals_its_scipy_stats_version(n: int) -> None:
    ks = sorted(k for k in {0, 1, 2, n // 3, n // 2, n - 2, n - 1, n} if 0 <= k <= n)
    levels = (1e-300, 1e-6, 0.5, 0.9, 0.95, 0.99, 1 - 1e-9, 1 - 2.0**-53)
    for k in ks:
        for level in levels:
            for sided in _SIDES:
                ci = clopper_pearson(k, n, confidence=level, sided=sided)
                assert (ci.lower, ci.upper) == _scipy_clopper_pearson(k, n, level, sided)


# -- log-sum-exp (the KDE attack) -------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (4, 1), (1, 9), (37, 5), (500, 3000)])
def test_logsumexp_rows_equals_scipy(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[0] * 31 + shape[1])
    # KDE log-kernels: -0.5·distance²/h², from near 0 to far below exp's range.
    a = -rng.exponential(300.0, shape) * rng.random(shape)
    a[: shape[0] // 2, 0] = a[: shape[0] // 2].max(axis=1)  # tied maxima in half the rows
    _same(logsumexp_rows(a), special.logsumexp(a, axis=1))


def test_logsumexp_rows_equals_scipy_on_edge_rows() -> None:
    inf, nan = np.inf, np.nan
    a = np.array(
        [
            [-inf, -inf, -inf],
            [0.0, -inf, -inf],
            [inf, 1.0, 2.0],
            [nan, 1.0, 2.0],
            [-inf, inf, 0.0],
            [1e308, 1e308, 1e308],
            [-1e308, -1e308, 0.0],
            [-800.0, -801.0, -1e4],
            [-0.0, 0.0, -40.0],
        ]
    )
    _same(logsumexp_rows(a), special.logsumexp(a, axis=1))


# -- what the replacements feed ------------------------------------------------------


def _scipy_delong(
    members: NDArray[np.float64], nonmembers: NDArray[np.float64], level: float
) -> tuple[float, float, float]:
    """AUC and DeLong interval as computed before, with scipy.stats."""
    n1, n0 = members.size, nonmembers.size
    combined = stats.rankdata(np.concatenate([members, nonmembers]))
    v10 = (combined[:n1] - stats.rankdata(members)) / n0
    v01 = 1.0 - (combined[n1:] - stats.rankdata(nonmembers)) / n1
    estimate = float(np.mean(v10))
    variance = float(np.var(v10, ddof=1) / n1 + np.var(v01, ddof=1) / n0)
    half = float(stats.norm.isf((1.0 - level) / 2.0)) * np.sqrt(max(variance, 0.0))
    return estimate, max(0.0, estimate - half), min(1.0, estimate + half)


@pytest.mark.parametrize(
    ("n1", "n0", "distinct"), [(2, 2, 3), (5, 3, 2), (1024, 450, 40), (3000, 7, 10**9)]
)
@pytest.mark.parametrize("level", [1e-6, 0.5, 0.95, 1 - 1e-12])
def test_auc_and_delong_interval_equal_their_scipy_stats_version(
    n1: int, n0: int, distinct: int, level: float
) -> None:
    rng = np.random.default_rng(n1 * 7 + n0)
    # Integer scores from a small range tie across and within groups (10⁹: hardly ever).
    members = rng.integers(0, distinct, n1).astype(np.float64)
    nonmembers = rng.integers(0, distinct, n0).astype(np.float64)
    estimate, lower, upper = _scipy_delong(members, nonmembers, level)
    ci = auc_with_interval(members, nonmembers, confidence=level)
    assert (ci.estimate, ci.lower, ci.upper) == (estimate, lower, upper)
    assert auc_score(members, nonmembers) == estimate


def test_bootstrap_auc_replicates_equal_their_scipy_stats_version() -> None:
    rng = np.random.default_rng(8)
    members = rng.integers(0, 6, 60).astype(np.float64)
    nonmembers = rng.integers(0, 5, 40).astype(np.float64)
    ci = auc_with_interval(
        members, nonmembers, interval=AucInterval(AucIntervalMethod.BOOTSTRAP, 200, seed=9)
    )
    # Replay the resampler with the same seed and rank with scipy.stats.
    replay = np.random.default_rng(9)
    values = []
    for _ in range(200):
        m = members[replay.integers(0, 60, 60)]
        n = nonmembers[replay.integers(0, 40, 40)]
        ranks = stats.rankdata(np.concatenate([m, n]))
        values.append(float((ranks[:60].sum() - 60 * 61 / 2.0) / (60 * 40)))
    estimate = _scipy_delong(members, nonmembers, 0.95)[0]
    assert ci.lower == min(float(np.quantile(values, 0.025)), estimate)
    assert ci.upper == max(float(np.quantile(values, 0.975)), estimate)


def test_privacy_bounds_equal_their_scipy_stats_version() -> None:
    rng = np.random.default_rng(10)
    members = rng.normal(1.0, 1.0, 500)
    nonmembers = rng.normal(0.0, 1.0, 400)
    for threshold in (-10.0, 0.0, 0.7, 1.5, 10.0):
        for significance in (1e-300, 1e-9, 0.05, 0.5):
            bound = lower_bound_at_threshold(
                members, nonmembers, threshold, spec=BoundSpec(1e-5, significance)
            )
            alpha = significance / 2.0
            fp = int(np.sum(nonmembers >= threshold))
            fn = int(np.sum(members < threshold))
            fpr_ub = 1.0 if fp == 400 else float(stats.beta.isf(alpha, fp + 1, 400 - fp))
            fnr_ub = 1.0 if fn == 500 else float(stats.beta.isf(alpha, fn + 1, 500 - fn))
            mu = float(stats.norm.isf(fpr_ub) - stats.norm.ppf(fnr_ub))
            assert (bound.fpr_upper, bound.fnr_upper) == (fpr_ub, fnr_ub)
            assert bound.mu_lower_bound == max(np.nan_to_num(mu, nan=0.0, neginf=0.0), 0.0)
    for fpr, fnr in ((1e-300, 0.5), (0.01, 0.02), (1.0, 1.0), (0.3, 1e-12)):
        expected = float(stats.norm.isf(fpr) - stats.norm.ppf(fnr))
        assert mu_lower_bound_from_rates(fpr, fnr) == max(
            np.nan_to_num(expected, nan=0.0, neginf=0.0), 0.0
        )


# -- the point of it: no scipy.stats on the default path -----------------------------


@pytest.mark.slow
def test_default_audit_and_plan_load_neither_scipy_stats_nor_optimize() -> None:
    # A fresh interpreter: this test process has imported scipy.stats itself.
    script = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        from privfed.audit import audit_synthetic_release
        from privfed.dp import Adjacency
        from privfed.engines.moments.planning import plan_latent_release

        plan = plan_latent_release(
            10.0, 1e-5, clip_norm=1.8, dim=8, adjacency=Adjacency.REPLACE_ONE
        )
        rng = np.random.default_rng(0)
        members, nonmembers, synthetic, reference = (
            rng.standard_normal((n, 4)) for n in (60, 50, 80, 40)
        )
        labels = [rng.integers(0, 2, n) for n in (60, 50, 80, 40)]
        sums = np.stack([members[labels[0] == c].sum(0) for c in (0, 1)])
        audit = audit_synthetic_release(
            members, nonmembers, synthetic,
            member_labels=labels[0], nonmember_labels=labels[1],
            synthetic_labels=labels[2], reference_latents=reference,
            reference_labels=labels[3], noisy_sums=sums,
            counts=np.bincount(labels[0], minlength=2).astype(float),
            noise_std_sum=plan.noise_std_sum, delta=1e-5, seed=0,
        )
        loaded = [m for m in ("scipy.stats", "scipy.optimize") if m in sys.modules]
        print(json.dumps({"attacks": len(audit.results), "loaded": loaded}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["attacks"] == 5
    assert report["loaded"] == []
