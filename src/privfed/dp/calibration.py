"""Exact calibration of the Gaussian mechanism and μ-GDP helpers.

The Gaussian mechanism ``M(D) = q(D) + N(0, σ² I)`` with L2 sensitivity ``Δ``
(the largest ``‖q(D) − q(D′)‖₂`` over adjacent datasets, for whatever adjacency
the caller uses) is exactly ``μ``-GDP with ``μ = Δ/σ`` (Dong, Roth & Su 2019,
arXiv:1905.02383, §2), and (ε, δ)-DP exactly when (Balle & Wang 2018,
arXiv:1805.06530, Theorem 8)::

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε · Φ(−ε/μ − μ/2).

Every function here evaluates that curve in log space with
:func:`scipy.special.log_ndtr`, so nothing overflows (ε ≥ 710 included) and
δ down to 1e-300 keeps its relative precision.  Solvers (the noise std one is
:func:`privfed.dp.calibrator.calibrate`) bisect with a *relative*
tolerance and return the end of the bracket that is safe for privacy: the
larger noise std, the smaller μ, the larger ε.  Every result is then re-checked
against the exact curve, so numerical error only ever makes a guarantee look
worse than it is, never better.

The adjacency is not fixed here: pass the ``l2_sensitivity`` that matches the
adjacency of your release (see :mod:`privfed.dp.sensitivity`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any

from privfed._checks import (
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    to_float,
)
from privfed.dp.calibrator import Bisection, Bracket, Nudge, calibrate, raise_until
from privfed.errors import ParameterError

__all__ = [
    "calibrate_analytic_gaussian",
    "compose_gdp",
    "gaussian_delta",
    "gaussian_epsilon",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "mu_for_epsilon_delta",
]

# Relative width at which bisections stop.  The bracket end returned is the safe
# one, so the result is within this factor of the exact solution, on the safe side.
_RTOL = 1e-13
_MAX_ITER = 4000
_LN2 = math.log(2.0)
_ULP = 2.0**-52


@functools.cache
def _log_ndtr() -> Any:
    """Return :func:`scipy.special.log_ndtr`, importing scipy.special on first use.

    scipy.special takes ~0.4 s to import, so ``import privfed.dp`` leaves it
    out; the cache keeps the bisection loops free of repeated import lookups.
    """
    from scipy.special import log_ndtr

    return log_ndtr


def _log1mexp(x: float) -> float:
    """Return ``log(1 − e^x)`` for ``x ≤ 0`` without cancellation (−inf at x ≥ 0)."""
    if x >= 0.0:
        return -math.inf
    if x > -_LN2:
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


def _log_delta(mu: float, epsilon: float) -> float:
    """Natural log of the exact δ(ε) of a μ-GDP Gaussian mechanism, rounded *up*.

    Returns −inf when δ = 0.  ``δ = Φ(a)·(1 − e^x)`` with ``a = −ε/μ + μ/2``,
    ``b = −ε/μ − μ/2`` and ``x = ε + log Φ(b) − log Φ(a)``; for small ε the
    two logs nearly cancel, and ``1 − e^x`` magnifies their rounding errors by
    up to ~1e10.  So a generous bound on the floating-point error of ``log Φ(a)``
    and of ``x`` (evaluation of ``log_ndtr`` taken to within 8 ulp, rounding of
    the arguments propagated through ``d log Φ(t)/dt <= |t| + 1``, rounding of
    the sums) is applied in the unsafe direction of each, and the result is a
    certified upper bound on log δ rather than an estimate that may fall short.
    """
    if mu == 0.0:
        return -math.inf
    if math.isinf(mu):
        return 0.0
    log_ndtr = _log_ndtr()
    shift = epsilon / mu
    arg_a = -shift + mu / 2.0
    arg_b = -shift - mu / 2.0
    log_a = float(log_ndtr(arg_a))
    log_nb = float(log_ndtr(arg_b))
    if log_a == -math.inf:
        return -math.inf
    log_b = epsilon + log_nb
    x = log_b - log_a
    arg_error = 2.0 * _ULP * (shift + mu)
    err_a = _ULP * (8.0 * abs(log_a) + 1.0) + arg_error * (abs(arg_a) + 1.0)
    err_x = _ULP * (
        8.0 * (abs(log_a) + abs(log_nb)) + 2.0 * (abs(log_b) + abs(x)) + 2.0
    ) + arg_error * (abs(arg_a) + abs(arg_b) + 2.0)
    log_one_minus = _log1mexp(min(x - err_x, 0.0))
    if log_one_minus == -math.inf:
        return -math.inf
    # A few more ulp for the final sum and for exp() applied by the callers.
    return log_a + err_a + log_one_minus + 8.0 * _ULP * (1.0 + abs(log_a + log_one_minus))


def _check_epsilon_nonnegative(value: object) -> float:
    eps = to_float("epsilon", value)
    if not (math.isfinite(eps) and eps >= 0.0):
        raise ParameterError("epsilon", "a finite float >= 0", value)
    return eps


def gdp_mu(noise_std: float, l2_sensitivity: float) -> float:
    """Return the μ of a Gaussian release in Gaussian differential privacy.

    Args:
        noise_std: Standard deviation σ of the isotropic Gaussian noise, in the
            units of the query; finite, > 0.
        l2_sensitivity: L2 sensitivity Δ of the query under the chosen adjacency,
            same units; finite, >= 0.

    Returns:
        ``μ = Δ/σ`` (dimensionless, >= 0).  The release is exactly μ-GDP under
        the adjacency for which ``l2_sensitivity`` was computed.
    """
    sigma = check_finite_positive("noise_std", noise_std)
    sens = check_finite_nonnegative("l2_sensitivity", l2_sensitivity)
    return sens / sigma


def compose_gdp(mus: Iterable[float]) -> float:
    """Compose μ-GDP mechanisms applied to the same records (adaptive composition).

    Args:
        mus: The μ of each mechanism; each finite and >= 0.  May be empty.

    Returns:
        ``sqrt(Σ μ_i²)``, exact for Gaussian mechanisms (Dong, Roth & Su 2019,
        arXiv:1905.02383, Corollary 2).  Computed with scaling so that it does
        not overflow or underflow.  Releases on *disjoint* records compose in
        parallel instead: take the maximum.
    """
    values: list[float] = []
    for index, mu in enumerate(mus):
        values.append(check_finite_nonnegative(f"mus[{index}]", mu))
    if not values:
        return 0.0
    return float(math.hypot(*values))


def gdp_delta(mu: float, epsilon: float) -> float:
    """Return the exact δ(ε) of a μ-GDP mechanism.

    Args:
        mu: GDP parameter; finite, >= 0.
        epsilon: Privacy-loss level; finite, >= 0.

    Returns:
        The smallest δ in [0, 1] such that the mechanism is (ε, δ)-DP (Dong,
        Roth & Su 2019, Corollary 1; identical to Balle & Wang's δ(ε)),
        rounded up: evaluated in log space with a bound on the floating-point
        error added, so it is never below the exact value.  The excess is
        ~1e-14 relative for moderate ε and μ, and grows to ~1e-7 when ε
        and μ are both tiny (1e-3 and 1e-4), where the exact formula cancels.
    """
    m = check_finite_nonnegative("mu", mu)
    eps = _check_epsilon_nonnegative(epsilon)
    return math.exp(_log_delta(m, eps))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Return the smallest ε for which a μ-GDP mechanism is (ε, δ)-DP.

    Args:
        mu: GDP parameter; finite, >= 0.
        delta: Target δ; in (0, 1).

    Returns:
        ε >= 0, solved by bisection with relative tolerance 1e-13 and rounded
        *up*: the returned ε is never smaller than the exact one, and satisfies
        ``gdp_delta(mu, ε) <= delta`` as evaluated.  ``math.inf`` only when μ is
        so large that no double ε suffices.
    """
    m = check_finite_nonnegative("mu", mu)
    return _solve_epsilon(m, check_delta(delta))


def _certified(mu: float, epsilon: float, delta: float) -> bool:
    """The final safety test, in the same linear form the public δ functions return."""
    return math.exp(_log_delta(mu, epsilon)) <= delta


def _solve_epsilon(mu: float, delta: float) -> float:
    log_target = math.log(delta)
    if _certified(mu, 0.0, delta):
        return 0.0
    lo, hi = 0.0, 1.0
    while _log_delta(mu, hi) > log_target:
        lo, hi = hi, hi * 2.0
        if hi > 1e300:
            return math.inf
    for _ in range(_MAX_ITER):
        if hi - lo <= _RTOL * hi:
            break
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _log_delta(mu, mid) > log_target:
            lo = mid
        else:
            hi = mid
    # The invariant keeps δ(hi) <= target; re-check anyway and move up if not.
    return raise_until(
        hi,
        lambda eps: _certified(mu, eps, delta),
        _up,
        max_steps=_MAX_ITER,
        failure="could not certify the epsilon of a Gaussian mechanism",
    )


def gaussian_delta(noise_std: float, epsilon: float, *, l2_sensitivity: float = 1.0) -> float:
    """Return the exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    Args:
        noise_std: Noise standard deviation σ, in query units; finite, > 0.
        epsilon: Privacy-loss level; finite, >= 0.
        l2_sensitivity: L2 sensitivity Δ under the adjacency in use; finite, >= 0.

    Returns:
        The smallest δ such that adding ``N(0, σ² I)`` to a query of
        sensitivity Δ is (ε, δ)-DP under that adjacency.
    """
    mu = gdp_mu(noise_std, l2_sensitivity)
    eps = _check_epsilon_nonnegative(epsilon)
    return math.exp(_log_delta(mu, eps))


def gaussian_epsilon(noise_std: float, delta: float, *, l2_sensitivity: float = 1.0) -> float:
    """Return the smallest ε for which the Gaussian mechanism is (ε, δ)-DP.

    Args:
        noise_std: Noise standard deviation σ; finite, > 0.
        delta: Target δ; in (0, 1).
        l2_sensitivity: L2 sensitivity Δ under the adjacency in use; finite, >= 0.

    Returns:
        ε >= 0, conservative: never smaller than the exact value (relative
        excess at most ~1e-13).
    """
    mu = gdp_mu(noise_std, l2_sensitivity)
    return _solve_epsilon(mu, check_delta(delta))


def calibrate_analytic_gaussian(
    epsilon: float, delta: float, *, l2_sensitivity: float = 1.0
) -> float:
    """Return the smallest noise std that makes the Gaussian mechanism (ε, δ)-DP.

    This is the analytic Gaussian mechanism of Balle & Wang (2018,
    arXiv:1805.06530, Algorithm 1), solved on the exact δ(ε) curve rather than
    with the classic ``sqrt(2 ln(1.25/δ))`` bound, which is loose and invalid
    for ε > 1.

    Args:
        epsilon: Target ε; finite, > 0.
        delta: Target δ; in (0, 1).  Values down to 1e-300 are handled with
            full relative precision.
        l2_sensitivity: L2 sensitivity Δ of the query under the adjacency the
            guarantee is meant for (e.g. ``2R`` for a sum of R-clipped vectors
            under replace-one); finite, >= 0.

    Returns:
        σ in query units.  The release ``q(D) + N(0, σ² I)`` is (ε, δ)-DP under
        that adjacency.  σ is the upper end of a bisection bracket of relative
        width 1e-13 and is re-checked to satisfy ``δ(σ) <= delta``: numerical
        error only adds noise.  Returns 0.0 when ``l2_sensitivity == 0``.

    Raises:
        ParameterError: ε <= 0 or not finite, δ outside (0, 1), Δ < 0, NaN.
        ParameterTypeError: a bool or non-number was passed.
        CalibrationError: the solution could not be certified (not expected).
    """
    eps = check_finite_positive("epsilon", epsilon)
    target = check_delta(delta)
    sens = check_finite_nonnegative("l2_sensitivity", l2_sensitivity)
    if sens == 0.0:
        return 0.0
    unit = _calibrate_unit(eps, target)
    # Scaling by Δ rounds; re-check on the exact curve and nudge up until safe.
    return raise_until(
        unit * sens,
        lambda sigma: math.isfinite(sigma) and _certified(sens / sigma, eps, target),
        _up,
        max_steps=_MAX_ITER,
        failure="could not certify the calibrated noise std",
    )


def _up(value: float) -> float:
    """The next candidate above ``value`` when nudging a result to the safe side."""
    return math.nextafter(value * (1.0 + 1e-15), math.inf)


def _calibrate_unit(epsilon: float, delta: float) -> float:
    """Noise std for Δ = 1: bisection on log σ; returns the safe (high) end."""
    log_target = math.log(delta)

    def meets(mu: float) -> bool:
        return _log_delta(mu, epsilon) <= log_target

    guess = math.sqrt(2.0 * max(-log_target, 1.0)) / epsilon
    return calibrate(
        lambda sigma: 1.0 / sigma,  # the μ of the release at Δ = 1
        meets,
        Bracket(
            guess,
            1e-300,
            1e300,
            restart="guess",
            below="noise std bracket underflowed",
            above="noise std bracket overflowed",
        ),
        bisection=Bisection(_RTOL, "log-span"),
        nudge=Nudge(_up, _MAX_ITER, "could not certify the calibrated noise std"),
    )


def mu_for_epsilon_delta(epsilon: float, delta: float) -> float:
    """Return the largest μ whose Gaussian mechanism is (ε, δ)-DP.

    Args:
        epsilon: Target ε; finite, > 0.
        delta: Target δ; in (0, 1).

    Returns:
        ``μ = 1/σ*`` with σ* from :func:`calibrate_analytic_gaussian` at Δ = 1;
        conservative: never larger than the exact value, and
        ``gdp_delta(μ, ε) <= delta`` holds as evaluated.
    """
    sigma = calibrate_analytic_gaussian(epsilon, delta, l2_sensitivity=1.0)
    eps = float(epsilon)
    return raise_until(
        1.0 / sigma,
        lambda mu: _certified(mu, eps, float(delta)),
        lambda mu: math.nextafter(mu * (1.0 - 1e-15), 0.0),
        max_steps=_MAX_ITER,
        failure="could not certify mu",
    )
