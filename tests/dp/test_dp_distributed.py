"""Distributed DP under secure aggregation: accounting, calibration, ring.

The exact samplers are tested in ``test_dp_samplers.py``.  The
accounting is checked against independent computations: exact Rényi divergences
of the noisy sums (log-space pmfs, small d), an independent re-implementation of
the published bounds, and dp-accounting's RDP conversion and accountant.
"""

from __future__ import annotations

import dataclasses
import math

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from exact_pmfs import log_dg_sum, log_skellam
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from scipy.special import logsumexp

from privfed.dp import Adjacency, GaussianRelease, PrivacyLedger
from privfed.dp.distributed import (
    calibrate_distributed_discrete_gaussian,
    calibrate_distributed_skellam,
    check_ring,
    ddg_rdp,
    ddg_tau,
    ddg_zcdp,
    effective_sensitivities,
    min_honest_contributors,
    skellam_rdp,
    skellam_zcdp,
    wrap_probability,
)
from privfed.dp.noise import DISCRETE_GAUSSIAN_SAMPLER, GAUSSIAN_SAMPLER
from privfed.dp.rdp import RDP_ORDERS, rdp_epsilon
from privfed.dp.releases.distributed_gaussian import DistributedDiscreteGaussianRelease
from privfed.dp.releases.distributed_skellam import DistributedSkellamRelease
from privfed.dp.samplers import EXACT_DISCRETE_GAUSSIAN_SAMPLER, SKELLAM_SAMPLER
from privfed.errors import (
    BudgetExceededError,
    LedgerError,
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)

ORDERS = np.asarray(RDP_ORDERS)


# -- helpers --------------------------------------------------------------------------------


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
    log_p = log_dg_sum(sigma, n)
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
    log_p = log_skellam(mu / 2)
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    log_p = log_dg_sum(1.5, 3, half=60)
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
