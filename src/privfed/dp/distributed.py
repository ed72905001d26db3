"""Distributed DP under secure aggregation: the accounting of exact integer noise.

Each client adds integer noise to its integer (fixed-point) input *before*
masking, so the server only ever unmasks a noisy total.  The noise is drawn by
the exact samplers of :mod:`privfed.dp.samplers` (discrete Gaussian, Skellam);
this module is the DP core of that setting:

* closed-form Rényi-DP curves of the noisy sum for ``n`` honest contributors
  (:func:`ddg_rdp`, :func:`skellam_rdp`) and the zCDP lines the release kinds
  account and export (:func:`ddg_zcdp`, :func:`skellam_zcdp`);
* calibration of the per-client noise (:func:`calibrate_distributed_discrete_gaussian`,
  :func:`calibrate_distributed_skellam`);
* the number of honest contributors a secure-aggregation threshold guarantees
  (:func:`min_honest_contributors`) and the ring wrap-around bound
  (:func:`wrap_probability`, :func:`check_ring`).

Units and conventions
---------------------

Everything is in *grid units*: the integer lattice the fixed-point encoding of
secure aggregation works on.  ``noise_std`` (σ) is the parameter of each
client's discrete Gaussian ``N_Z(0, σ²)`` (its variance is slightly below σ²),
``poisson_mean`` (λ) the mean of each of the two Poissons of a client's Skellam
noise (variance 2λ).  ``l2_sensitivity`` Δ₂ and ``l1_sensitivity`` Δ₁ bound
``‖Σ(D) − Σ(D′)‖₂`` and ``‖·‖₁`` of the *integer* total over neighbouring
datasets under whatever adjacency the caller uses (replace-one or add/remove;
the formulas do not care, the caller's sensitivity does).  For an integer
vector ``‖v‖₁ ≤ min(√d·‖v‖₂, ‖v‖₂²)`` and ``‖v‖₂ ≤ ‖v‖₁``, so the effective
sensitivities used are ``Δ₁' = min(Δ₁, √d·Δ₂, Δ₂²)`` and ``Δ₂' = min(Δ₂, Δ₁)``
(``Δ₁ = None`` means ``min(√d·Δ₂, Δ₂²)``).  ``dimension`` d is the number of
noised coordinates.

Threat model
------------

Only clients whose masked input is summed contribute noise to the total, and
colluding (corrupted) clients know -- and can subtract -- their own noise.  The
privacy of an honest client's record therefore rests on the noise of the
*honest* clients in the sum only; ``num_clients`` in the accounting is the
minimum number of honest contributors, see :func:`min_honest_contributors`.
More honest noise than that is post-processing (the extra noise is
independent of the data), so every curve here is non-increasing in
``num_clients``.

Numerical direction
-------------------

Every accounting quantity errs on the side of privacy: RDP curves are scaled
up by ``1 + 1e-12`` to cover floating-point rounding; they are converted to
(ε, δ) with the ledger's own conversion (:mod:`privfed.dp.rdp`); calibrated
noise is the safe end of a bisection, rounded *up* to a 17-bit mantissa and
re-checked against both the ledger's reported ε and its budget test.  The samplers are exact (see
:mod:`privfed.dp.samplers`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final, Literal, Required, TypedDict, Unpack

import numpy as np
import numpy.typing as npt

from privfed._checks import (
    check_choice,
    check_count,
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    check_float,
    check_int,
)
from privfed.dp.calibrator import Bisection, Bracket, Nudge, calibrate
from privfed.dp.rdp import RDP_ORDERS, check_orders, meets_rdp_target, rdp_epsilon
from privfed.errors import ParameterError, RingOverflowError

__all__ = [
    "DDG_MIN_NOISE_STD",
    "MAX_CONTRIBUTORS",
    "WRAP_PROBABILITY_LIMIT",
    "DistributedMechanism",
    "calibrate_distributed_discrete_gaussian",
    "calibrate_distributed_skellam",
    "calibrate_noise_parameter",
    "check_ring",
    "ddg_rdp",
    "ddg_tau",
    "ddg_zcdp",
    "effective_sensitivities",
    "log_wrap_probability",
    "min_honest_contributors",
    "skellam_rdp",
    "skellam_zcdp",
    "wrap_probability",
]

#: Smallest per-client σ the distributed discrete Gaussian accounting accepts.
#: Below it the τ term of Kairouz, Liu & Steinke is of order one and the bound
#: is useless anyway; the restriction keeps the analysis in its intended domain.
DDG_MIN_NOISE_STD: Final = 0.5
#: Largest number of contributors the accounting handles (arrays of this length).
MAX_CONTRIBUTORS: Final = 2**20
#: The wrap-around probability :func:`check_ring` accepts by default.
WRAP_PROBABILITY_LIMIT: Final = 2.0**-40

#: ``"discrete-gaussian"`` or ``"skellam"``.
DistributedMechanism = Literal["discrete-gaussian", "skellam"]
_MECHANISMS: Final = ("discrete-gaussian", "skellam")

_SAFE: Final = 1.0 + 1e-12  # relative margin for floating-point accounting
_ABOVE: Final = 1.0 + 2.0**-50  # keeps an exported line above a curve it bounds
_MANTISSA_BITS: Final = 17  # calibrated noise is rounded up to this many bits


# =========================================================================================
# Sensitivities and RDP curves
# =========================================================================================


def effective_sensitivities(
    l2_sensitivity: float, l1_sensitivity: float | None, dimension: int
) -> tuple[float, float]:
    """The (Δ₂, Δ₁) the formulas use for an integer-valued total (grid units).

    For an integer vector v: ``‖v‖₁ ≤ √d·‖v‖₂``, ``‖v‖₁ ≤ ‖v‖₂²`` and
    ``‖v‖₂ ≤ ‖v‖₁``, so the returned pair is ``(min(Δ₂, Δ₁), min(Δ₁, √d·Δ₂,
    Δ₂²))`` -- never larger than what was given, and valid whenever the given
    values are.  ``l1_sensitivity=None`` means "unknown" (``min(√d·Δ₂, Δ₂²)``).

    Args:
        l2_sensitivity: Δ₂ >= 0, finite.
        l1_sensitivity: Δ₁ >= 0, finite, or ``None``.
        dimension: d >= 1.

    Raises:
        ParameterError / ParameterTypeError: A value outside its domain.
    """
    d2 = check_finite_nonnegative("l2_sensitivity", l2_sensitivity)
    d = check_count("dimension", dimension, minimum=1)
    if l1_sensitivity is None:
        return d2, min(math.sqrt(d) * d2, d2 * d2)
    d1 = check_finite_nonnegative("l1_sensitivity", l1_sensitivity)
    d2 = min(d2, d1)
    return d2, min(d1, math.sqrt(d) * d2, d2 * d2)


def _check_clients(num_clients: object) -> int:
    return check_int(
        "num_clients",
        num_clients,
        minimum=1,
        maximum=MAX_CONTRIBUTORS,
        numpy=True,
        expected="an int (not bool)",
    )


def _check_ddg_std(noise_std: object) -> float:
    return check_float(
        "noise_std",
        noise_std,
        low=DDG_MIN_NOISE_STD,
        domain=f"a finite float >= {DDG_MIN_NOISE_STD} (grid units)",
    )


class _Total(TypedDict, total=False):
    """The keywords that describe a noisy total, shared by the accounting and the calibrations.

    Documented at :func:`ddg_rdp` (``l1_sensitivity`` absent: ``None``); the
    signatures of :func:`_check_total` and :func:`_check_calibration` check them
    (an unknown or missing one is a ``TypeError``).
    """

    num_clients: Required[int]
    l2_sensitivity: Required[float]
    dimension: Required[int]
    l1_sensitivity: float | None


def _check_total(
    noise: Callable[[], float],
    /,
    num_clients: object,
    l2_sensitivity: float,
    dimension: object,
    l1_sensitivity: float | None = None,
) -> tuple[int, float, int, float, float]:
    """``(n, noise(), d, Δ₂, Δ₁)`` of a noisy total, checked in this order (Δ₂, Δ₁ effective).

    ``noise`` checks and returns the kind's noise parameter (σ or λ).
    """
    n = _check_clients(num_clients)
    value = noise()
    d = check_count("dimension", dimension, minimum=1)
    d2, d1 = effective_sensitivities(l2_sensitivity, l1_sensitivity, d)
    return n, value, d, d2, d1


def _tau_increments(num_clients: int, noise_std: float) -> npt.NDArray[np.float64]:
    """c_k = 10·exp(−2π²σ²·k/(k+1)) for k = 1..n−1 (so τ_n = Σ c_k)."""
    k = np.arange(1, num_clients, dtype=np.float64)
    return np.asarray(
        10.0 * np.exp(-2.0 * math.pi**2 * noise_std**2 * k / (k + 1.0)), dtype=np.float64
    )


#: Contributor counts n' searched exhaustively by :func:`_min_over_contributors`.
_EXHAUSTIVE_CONTRIBUTORS: Final = 2**12


def _min_over_contributors(
    alpha: npt.NDArray[np.float64], coefficient: float, offsets: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``min over n' of α·coefficient/n' + offsets[n' − 1]`` (a bound valid at every n').

    Each ``n'`` gives a valid RDP bound (more honest noise is post-processing),
    so the minimum over ANY subset of them is valid too.  The offsets' increments
    (the τ terms ``10·exp(−2π²σ²k/(k+1))``) *decrease* in k, so the increments of
    the objective need not change sign once and a bisection on them can miss the
    minimiser; the minimum is taken exhaustively over ``n' <= 2**12`` and over
    ``n' = n``, which is exact for every n up to 2**12 and an upper bound beyond.
    """
    count = offsets.size
    top = min(count, _EXHAUSTIVE_CONTRIBUTORS)
    counts = np.arange(1, top + 1, dtype=np.float64)
    best = np.full(alpha.shape, np.inf, dtype=np.float64)
    for start in range(0, alpha.size, 64):  # bounded memory: 64 orders x 4096 counts
        part = alpha[start : start + 64, None] * coefficient / counts[None, :]
        best[start : start + 64] = np.min(part + offsets[None, :top], axis=1)
    last = alpha * coefficient / float(count) + offsets[-1]
    return np.asarray(np.minimum(best, last), dtype=np.float64)


def ddg_tau(num_clients: int, noise_std: float) -> float:
    """The τ of Kairouz, Liu & Steinke (2021) for n clients of per-client σ.

    ``τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ²·k/(k+1))``; 0 for one client.  It bounds
    how far the sum of n discrete Gaussians is from a discrete Gaussian.
    Rounded up by a relative 1e-12.

    Args:
        num_clients: n, an int in ``[1, 2**20]``.
        noise_std: σ per client in grid units, finite, >= 0.5.
    """
    n = _check_clients(num_clients)
    sigma = _check_ddg_std(noise_std)
    return float(np.sum(_tau_increments(n, sigma))) * _SAFE


def ddg_rdp(
    orders: Sequence[float], *, noise_std: float, **total: Unpack[_Total]
) -> npt.NDArray[np.float64]:
    """RDP of the distributed discrete Gaussian sum, for at least ``num_clients`` honest clients.

    Each of n honest clients adds ``N_Z(0, σ²)^d``; the total is released.  By
    Kairouz, Liu & Steinke (2021, arXiv:2102.06387, Thm 1 / Prop 14, as coded in
    google-research/federated ``distributed_dp``), with
    ``τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ²k/(k+1))``, ``a₂ = Δ₂/(√n σ)``,
    ``a₁ = Δ₁/(√n σ)``, the sum is (α, ε(α))-RDP for every α > 1 with::

        ε(α) = min{ α a₂²/2 + τd,  (α/2)(a₂² + 2a₁τ + τ²d),  (α/2)(a₂ + √d τ)² }.

    Because more honest noise is post-processing, the curve returned is the
    pointwise minimum of that bound over every n' <= n (the bound itself is not
    monotone in n: τ grows with n), so it never increases with ``num_clients``.
    The minimum is exhaustive over n' <= 2**12 and n' = n for the first term
    (exact for n <= 2**12; the minimum over any subset of valid bounds is
    valid), and exact for the other two, which are α times a function of n'.

    Args:
        orders: Rényi orders α, finite floats > 1.
        num_clients: Minimum number n of honest contributors, in ``[1, 2**20]``.
        noise_std: Per-client σ in grid units; finite, >= 0.5.
        l2_sensitivity: Δ₂ of the integer total in grid units (any adjacency).
        dimension: d, the number of noised coordinates.
        l1_sensitivity: Δ₁ in grid units, or ``None`` (see
            :func:`effective_sensitivities`).

    Returns:
        float64 array of ε(α), rounded up by a relative 1e-12 (never under).
    """
    alpha = check_orders(orders)
    n, sigma, d, d2, d1 = _check_total(lambda: _check_ddg_std(noise_std), **total)
    if d2 == 0.0 or d1 == 0.0:
        return np.zeros_like(alpha)
    big_a = d2 * d2 / (sigma * sigma)  # n'·a₂(n')²
    big_b = d1 / sigma  # √n'·a₁(n')
    inc = _tau_increments(n, sigma)
    tau = np.concatenate([np.zeros(1), np.cumsum(inc)])  # τ_{n'} for n' = 1..n
    counts = np.arange(1, n + 1, dtype=np.float64)
    # Terms two and three: α/2 times a function of n' only.
    h2 = big_a / counts + 2.0 * big_b * tau / np.sqrt(counts) + d * tau * tau
    h3 = (np.sqrt(big_a / counts) + math.sqrt(d) * tau) ** 2
    term23 = 0.5 * alpha * min(float(np.min(h2)), float(np.min(h3)))
    # Term one: g(n') = αA/(2n') + dτ_{n'}, valid at every n'.  The increments c_k of τ
    # decrease in k, so the minimiser is not found by bisection: exhaustive search.
    term1 = _min_over_contributors(alpha, 0.5 * big_a, d * tau)
    return np.asarray(np.minimum(term1, term23) * _SAFE, dtype=np.float64)


def ddg_zcdp(*, noise_std: float, **total: Unpack[_Total]) -> tuple[float, float]:
    """The (ρ, ξ)-zCDP line of the distributed discrete Gaussian: ``ε(α) <= ξ + ρα`` for all α.

    The first term of :func:`ddg_rdp` at n: ``ρ = Δ₂²/(2nσ²)``, ``ξ = τd``
    (both rounded up by 1e-12), what dp-accounting's RDP accountant takes as
    ``ZCDpEvent(rho, xi)``.  It is an upper bound on :func:`ddg_rdp` at every
    order, and equals it whenever τ·d is negligible against the Gaussian
    term's decrease with n -- in particular for any σ of a few grid units.

    Args: See :func:`ddg_rdp`.

    Returns:
        ``(rho, xi)``, both >= 0; ``(0, 0)`` when a sensitivity is 0.
    """
    n, sigma, d, d2, d1 = _check_total(lambda: _check_ddg_std(noise_std), **total)
    if d2 == 0.0 or d1 == 0.0:
        return 0.0, 0.0
    big_a = d2 * d2 / (sigma * sigma)
    inc = _tau_increments(n, sigma)
    # The curve's offset at n' = n is d·cumsum(inc)[-1] (sequential), which can exceed
    # the pairwise np.sum in the last bits: take the larger, so the line stays above.
    tau = max(float(np.sum(inc)), float(np.cumsum(inc)[-1])) if inc.size else 0.0
    # 2**-50 more than the curve's margin, so the line stays above ddg_rdp's rounding.
    return big_a / (2.0 * n) * _SAFE * _ABOVE, d * tau * _SAFE * _ABOVE


def _check_skellam_args(poisson_mean: object, total: _Total) -> tuple[float, float, float]:
    """``(μ = 2nλ, Δ₂, Δ₁)`` of a Skellam total, checked as :func:`_check_total` does."""
    n, lam, _, d2, d1 = _check_total(
        lambda: check_finite_positive("poisson_mean", poisson_mean), **total
    )
    return 2.0 * n * lam, d2, d1


def _skellam_integer(
    alpha: npt.NDArray[np.float64], mu: float, d2: float, d1: float
) -> npt.NDArray[np.float64]:
    gauss = alpha * d2 * d2 / (2.0 * mu)
    first = ((2.0 * alpha - 1.0) * d2 * d2 + 6.0 * d1) / (4.0 * mu * mu)
    return np.asarray(gauss + np.minimum(first, 3.0 * d1 / (2.0 * mu)), dtype=np.float64)


def skellam_rdp(
    orders: Sequence[float], *, poisson_mean: float, **total: Unpack[_Total]
) -> npt.NDArray[np.float64]:
    """RDP of the distributed Skellam sum for at least ``num_clients`` honest clients.

    n honest clients each add ``Poisson(λ) − Poisson(λ)`` per coordinate; the
    total carries ``Skellam(nλ, nλ)`` with variance ``μ = 2nλ``.  By Agarwal,
    Kairouz & Liu (2021, "The Skellam Mechanism for Differentially Private
    Federated Learning", Thm 3.5), at every *integer* order α > 1::

        ε(α) = α Δ₂²/(2μ) + min( ((2α−1)Δ₂² + 6Δ₁)/(4μ²),  3Δ₁/(2μ) ).

    Between integers the bound is interpolated with the convexity of
    ``(α−1)·D_α`` in α (a log-moment-generating function), which is valid and
    tighter than rounding α up; on (1, 2) it is ε(2).  Non-increasing in n.

    Args:
        orders: Rényi orders, finite floats > 1.
        num_clients: n, in ``[1, 2**20]``.
        poisson_mean: λ per client (per Poisson), finite, > 0.
        l2_sensitivity: Δ₂ in grid units.
        dimension: d.
        l1_sensitivity: Δ₁ in grid units, or ``None``.

    Returns:
        float64 array of ε(α), rounded up by a relative 1e-12.
    """
    alpha = check_orders(orders)
    mu, d2, d1 = _check_skellam_args(poisson_mean, total)
    if d2 == 0.0 or d1 == 0.0:
        return np.zeros_like(alpha)
    low = np.maximum(np.floor(alpha), 2.0)
    high = np.maximum(np.ceil(alpha), 2.0)
    e_low = _skellam_integer(low, mu, d2, d1)
    e_high = _skellam_integer(high, mu, d2, d1)
    t = np.where(high > low, alpha - low, 0.0)
    chord = (1.0 - t) * (low - 1.0) * e_low + t * (high - 1.0) * e_high
    interpolated = np.where(alpha < 2.0, e_high, chord / (alpha - 1.0))
    return np.asarray(interpolated * _SAFE, dtype=np.float64)


def skellam_zcdp(*, poisson_mean: float, **total: Unpack[_Total]) -> tuple[float, float]:
    """A (ρ, ξ)-zCDP line above :func:`skellam_rdp` at *every* real order α > 1.

    At integers ``ε(α) <= α·ρ + c`` with ``ρ = Δ₂²/(2μ)·(1 + 1/μ)`` and
    ``c = (6Δ₁ − Δ₂²)/(4μ²)`` (the first option of the min); since ``D_α`` is
    non-decreasing in α, ``D_α <= ε(⌈α⌉) < ρα + ρ + c`` everywhere, so
    ``ξ = ρ + c = Δ₂²/(2μ) + (Δ₂² + 6Δ₁)/(4μ²) > 0``.  This line is what the
    Skellam release kind accounts and exports (``ZCDpEvent(rho, xi)``): the
    integer-order restriction of the theorem costs the additive ρ.

    Args: See :func:`skellam_rdp`.

    Returns:
        ``(rho, xi)`` rounded up by 1e-12; ``(0, 0)`` when a sensitivity is 0.
    """
    mu, d2, d1 = _check_skellam_args(poisson_mean, total)
    if d2 == 0.0 or d1 == 0.0:
        return 0.0, 0.0
    rho = d2 * d2 / (2.0 * mu) * (1.0 + 1.0 / mu)
    xi = d2 * d2 / (2.0 * mu) + (d2 * d2 + 6.0 * d1) / (4.0 * mu * mu)
    return rho * _SAFE, xi * _SAFE


# =========================================================================================
# Calibration
# =========================================================================================


def _round_up(value: float) -> float:
    """``value`` rounded up to a 17-bit mantissa (relative increase < 2**-16)."""
    mantissa, exponent = math.frexp(value)
    return math.ldexp(math.ceil(mantissa * 2**_MANTISSA_BITS), exponent - _MANTISSA_BITS)


def calibrate_noise_parameter(
    curve_of: Callable[[float], npt.NDArray[np.float64]],
    epsilon: float,
    delta: float,
    lower: float,
    upper: float,
    guess: float,
    name: str,
) -> float:
    """Smallest parameter p in [lower, upper] whose RDP curve meets (ε, δ); safe end, rounded up.

    The one calibrator (:func:`privfed.dp.calibrator.calibrate`) with the rule
    the distributed calibrations are certified by: ``curve_of(p)`` is the RDP
    curve at :data:`~privfed.dp.rdp.RDP_ORDERS`, the bracket is walked from
    ``guess``, narrowed to a relative span of 1e-10, the safe end rounded up to a
    17-bit mantissa and certified by the ledger's own budget test.  ``name``
    names the parameter in the error when ``upper`` does not suffice.
    """
    return calibrate(
        curve_of,
        lambda curve: rdp_epsilon(curve, delta) <= epsilon,
        Bracket(
            guess,
            lower,
            upper,
            restart="top",
            above=f"no {name} up to {upper:g} meets epsilon={epsilon:g} at delta={delta:g}",
        ),
        bisection=Bisection(1e-10, "span"),
        nudge=Nudge(
            lambda value: _round_up(math.nextafter(value * (1.0 + 2.0**-16), math.inf)),
            10_000,
            f"could not certify the calibrated {name}",
            start=_round_up,
            accepts=lambda value: (
                value <= upper and meets_rdp_target(curve_of(value), epsilon, delta)
            ),
        ),
    )


def _check_calibration(
    epsilon: object,
    delta: object,
    l2_sensitivity: object,
    dimension: object,
    num_clients: object,
    l1_sensitivity: float | None = None,
) -> tuple[float, float, float, int, int, float | None]:
    """``(ε, δ, Δ₂, n, d, Δ₁)`` of a calibration, checked in this order (Δ₁ against them)."""
    eps = check_finite_positive("epsilon", epsilon)
    dlt = check_delta(delta)
    d2 = check_finite_positive("l2_sensitivity", l2_sensitivity)
    n = _check_clients(num_clients)
    d = check_count("dimension", dimension, minimum=1)
    effective_sensitivities(d2, l1_sensitivity, d)
    return eps, dlt, d2, n, d, l1_sensitivity


def calibrate_distributed_discrete_gaussian(
    epsilon: float, delta: float, **total: Unpack[_Total]
) -> float:
    """The smallest per-client σ (grid units) making the distributed discrete Gaussian (ε, δ)-DP.

    Bisection (relative 1e-10, safe end) on the :func:`ddg_rdp` curve converted
    with :func:`~privfed.dp.rdp.rdp_epsilon` on :data:`~privfed.dp.rdp.RDP_ORDERS`,
    then rounded *up* to a 17-bit mantissa and re-checked against the ε
    :class:`privfed.dp.PrivacyLedger` reports and the δ(ε) it tests a budget
    with, nudging up until both hold.  So a
    :class:`~privfed.dp.releases.distributed_gaussian.DistributedDiscreteGaussianRelease`
    with this σ fits in a ledger with budget (ε, δ).

    Args:
        epsilon: Target ε, finite, > 0.
        delta: Target δ, in (0, 1).
        l2_sensitivity: Δ₂ of the integer total in grid units, > 0.
        dimension: d >= 1.
        num_clients: Minimum number of honest contributors n_min (see
            :func:`min_honest_contributors`), in ``[1, 2**20]``.
        l1_sensitivity: Δ₁ in grid units, or ``None``.

    Returns:
        σ >= 0.5, each client's ``N_Z(0, σ²)`` parameter.

    Raises:
        ParameterError: A value outside its domain (Δ₂ must be > 0).
        CalibrationError: No σ up to 2**40 meets the target.
    """
    eps, dlt, d2, n, d, l1 = _check_calibration(epsilon, delta, **total)

    def curve_of(sigma: float) -> npt.NDArray[np.float64]:
        return ddg_rdp(
            RDP_ORDERS,
            num_clients=n,
            noise_std=sigma,
            l2_sensitivity=d2,
            dimension=d,
            l1_sensitivity=l1,
        )

    guess = d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / (eps * math.sqrt(n))
    return calibrate_noise_parameter(
        curve_of, eps, dlt, DDG_MIN_NOISE_STD, 2.0**40, guess, "noise_std"
    )


def calibrate_distributed_skellam(epsilon: float, delta: float, **total: Unpack[_Total]) -> float:
    """The smallest per-client Poisson mean λ making the distributed Skellam (ε, δ)-DP.

    Accounted on the :func:`skellam_zcdp` line (what the Skellam release kind
    records), bisected, rounded up to a 17-bit mantissa and re-checked like
    :func:`calibrate_distributed_discrete_gaussian`.

    Args: As :func:`calibrate_distributed_discrete_gaussian`.

    Returns:
        λ > 0: each client adds ``Poisson(λ) − Poisson(λ)`` (variance 2λ).

    Raises:
        ParameterError: A value outside its domain.
        CalibrationError: No λ up to 2**80 meets the target.
    """
    eps, dlt, d2, n, d, l1 = _check_calibration(epsilon, delta, **total)
    alpha = np.asarray(RDP_ORDERS, dtype=np.float64)

    def curve_of(lam: float) -> npt.NDArray[np.float64]:
        rho, xi = skellam_zcdp(
            num_clients=n,
            poisson_mean=lam,
            l2_sensitivity=d2,
            dimension=d,
            l1_sensitivity=l1,
        )
        return np.asarray(xi + rho * alpha, dtype=np.float64)

    sigma = d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    guess = sigma * sigma / (2.0 * n)
    return calibrate_noise_parameter(
        curve_of, eps, dlt, 2.0**-60, 2.0**80, guess, "poisson_mean"
    )


# =========================================================================================
# Honest contributors and the ring
# =========================================================================================


def min_honest_contributors(
    threshold: int, corrupted: int, *, num_clients: int | None = None
) -> int:
    """The fewest honest clients whose noise a secure-aggregation total is guaranteed to hold.

    Threat model: privfed's secure aggregation (Bonawitz et al. / SecAgg+)
    releases a total only over a set of at least ``threshold`` surviving
    clients (every participating client checks that at least t of its
    neighbourhood survive before it helps unmask, see SECURITY.md), against a
    server that follows the protocol (or lies about dropouts, with ``t`` chosen
    as SECURITY.md says).  Only clients whose masked input is summed add noise
    to the total, and up to ``corrupted`` of those may collude with the server:
    they know (and can subtract) their own noise, or add none.  So at least
    ``t − c`` honest noise shares are in every released total, and the
    distributed accounting must use ``num_clients = t − c``.

    Args:
        threshold: t, the Shamir threshold (an int >= 1).
        corrupted: c, the number of clients assumed corrupted (an int >= 0).
        num_clients: The number of clients in the round, to check ``t`` and
            ``c`` against (optional).

    Returns:
        ``t − c`` (>= 1).

    Raises:
        ParameterError: ``t − c < 1`` (no honest noise is guaranteed: refused),
            or t or c exceeds ``num_clients``.
    """
    t = check_int("threshold", threshold, minimum=1, numpy=True)
    c = check_int("corrupted", corrupted, minimum=0, numpy=True)
    if num_clients is not None:
        total = check_int("num_clients", num_clients, minimum=1, numpy=True)
        if t > total:
            raise ParameterError("threshold", f"an int in [1, num_clients={total}]", t)
        if c > total:
            raise ParameterError("corrupted", f"an int in [0, num_clients={total}]", c)
    if t - c < 1:
        raise ParameterError(
            "corrupted",
            f"an int < threshold={t} (at least one honest noise share must be summed)",
            c,
            detail="the configuration guarantees no honest contributor",
        )
    return t - c


class _RingTotal(TypedDict):
    """The keywords :func:`wrap_probability` and :func:`check_ring` pass on as they are.

    Documented at :func:`wrap_probability`; the signature of
    :func:`log_wrap_probability` checks them (an unknown or missing one is a ``TypeError``).
    """

    ring_bits: int
    mechanism: DistributedMechanism
    noise: float
    num_summands: int
    total_bound: int
    dimension: int


def _log_tail(mechanism: str, noise: float, summands: int, t: float) -> float:
    """log of a bound on P[S >= t] for S the sum of ``summands`` noise draws (t > 0)."""
    if mechanism == "discrete-gaussian":
        # N_Z(0, σ²) is σ²-subgaussian (Canonne, Kamath & Steinke 2020), so S is nσ²-subgaussian.
        return -(t * t) / (2.0 * summands * noise * noise)
    # Skellam(nλ, nλ): E e^{sS} = exp(M(cosh s − 1)), M = 2nλ; Chernoff at s = asinh(t/M).
    big_m = 2.0 * summands * noise
    ratio = t / big_m
    return -(t * math.asinh(ratio) - big_m * (math.hypot(1.0, ratio) - 1.0))


def wrap_probability(**total: Unpack[_RingTotal]) -> float:
    """An upper bound on the probability that a noisy total wraps around ``Z_{2**k}``.

    The total of coordinate j is ``x_j + Σ_i Z_ij`` with ``|x_j| <= B`` (the
    exact integer total, grid units) and ``Z_ij`` the noise of the
    ``num_summands`` clients whose inputs are summed (every summed client, not
    only the honest ones, assumed to follow the protocol).  It decodes
    correctly iff it lies in the signed range ``[−2**(k−1), 2**(k−1))``, so a
    wrap needs ``|Σ_i Z_ij| >= t = 2**(k−1) − B`` for some j.  Union bound over
    the d coordinates and both signs, with the tail of the sum:

    * discrete Gaussian: each draw is σ²-subgaussian, so
      ``P[|S| >= t] <= 2·exp(−t²/(2nσ²))``;
    * Skellam: the exact Chernoff bound of ``Skellam(nλ, nλ)``,
      ``P[S >= t] <= exp(−(t·asinh(t/M) − (√(M² + t²) − M)))`` with ``M = 2nλ``.

    Args:
        ring_bits: k, an int in ``[2, 64]``.
        mechanism: ``"discrete-gaussian"`` (noise = σ) or ``"skellam"`` (noise = λ).
        noise: Per-client σ or λ, finite, > 0.
        num_summands: The most clients whose noisy inputs are summed, >= 1.
        total_bound: B >= 0, the bound on every coordinate of the exact total.
        dimension: d >= 1.

    Returns:
        The bound in [0, 1] (exponent rounded in the safe direction); it
        underflows to 0.0 below about ``exp(-745)``: write
        :func:`log_wrap_probability` instead.
    """
    return math.exp(log_wrap_probability(**total))


def log_wrap_probability(
    *,
    ring_bits: int,
    mechanism: DistributedMechanism,
    noise: float,
    num_summands: int,
    total_bound: int,
    dimension: int,
) -> float:
    """The natural log of the :func:`wrap_probability` bound (<= 0; never underflows).

    Args: As :func:`wrap_probability`.

    Returns:
        ``log p`` in ``[-inf, 0]``: 0 when the bound is 1 (e.g. ``B >= 2**(k−1)``).
    """
    k = check_int("ring_bits", ring_bits, minimum=2, maximum=64, numpy=True)
    kind = check_choice("mechanism", mechanism, _MECHANISMS)
    value = check_finite_positive("noise", noise)
    n = check_count("num_summands", num_summands, minimum=1)
    bound = check_int("total_bound", total_bound, minimum=0, numpy=True)
    d = check_count("dimension", dimension, minimum=1)
    t = (1 << (k - 1)) - bound
    if t <= 0:
        return 0.0
    log_p = math.log(2.0 * d) + _log_tail(kind, value, n, float(t)) * (1.0 - 1e-12)
    return min(log_p, 0.0)


def check_ring(*, limit: float = WRAP_PROBABILITY_LIMIT, **total: Unpack[_RingTotal]) -> float:
    """Refuse a ring too small for a noisy total; return the wrap bound otherwise.

    Args: As :func:`wrap_probability`, plus ``limit``: the largest acceptable
        wrap probability, in (0, 1) (default ``2**-40``).

    Returns:
        The :func:`wrap_probability` bound, <= ``limit``.

    Raises:
        RingOverflowError: The bound exceeds ``limit``: use more ring bits, a
            coarser grid (smaller B and σ in grid units) or less noise.
    """
    cap = _check_wrap_limit(limit)
    p = wrap_probability(**total)
    return _refuse_wrap(total["ring_bits"], p, cap)


def _check_wrap_limit(limit: object) -> float:
    """``limit``: the largest acceptable wrap probability, a float in (0, 1)."""
    return check_float("limit", limit, low=0.0, high=1.0, open_low=True, open_high=True)


def _refuse_wrap(ring_bits: int, p: float, limit: float) -> float:
    """Return the wrap bound ``p``; refuse the ring when it exceeds ``limit``.

    Raises:
        RingOverflowError: ``p > limit``.
    """
    if p > limit:
        raise RingOverflowError(
            "ring_bits",
            f"enough bits for a wrap probability <= {limit:.3g}",
            ring_bits,
            detail=f"the noisy total wraps with probability up to {p:.3g}",
        )
    return p
