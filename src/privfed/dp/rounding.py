"""Conditional randomized rounding onto the integer grid (pure numpy).

Distributed DP adds integer noise, so a client's rotated, scaled update ``z``
(``‖z‖₂ <= c`` grid units) must become an integer vector first.  Unbiased
randomized rounding (``⌊z_i⌋ + 1`` with probability ``z_i − ⌊z_i⌋``) can grow the
norm by up to ``√d``; Kairouz, Liu & Steinke (2021, §4) bound it with
probability ``1 − β`` by::

    Δ₂² = min( c² + d/4 + √(2 log(1/β))·(c + √d/2),  (c + √d)² ).

*Conditional* rounding redraws until the rounded norm is within ``Δ₂``, so
``‖round(z)‖₂ <= Δ₂`` holds for every output (not only with probability
``1 − β``): ``Δ₂`` is a deterministic L2 sensitivity of one client's
contribution, which the accounting uses.  The test is exact (integer squared
norm against ``⌊Δ₂²⌋``).  Each try succeeds with probability at least
``1 − β``; after ``max_tries`` failures (probability ``β**max_tries``) the
vector is rounded toward zero, whose norm never exceeds ``c`` (biased, but
within the bound): no output ever leaves it.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from privfed._checks import check_count, check_finite_nonnegative, check_float
from privfed.errors import NonFiniteInputError, ParameterError

__all__ = [
    "DEFAULT_BETA",
    "conditional_round",
    "rounded_norm_bound",
]

#: TensorFlow Federated's default ``β = exp(−0.5)`` (each try fails with at most 61 %).
DEFAULT_BETA: Final = math.exp(-0.5)


def rounded_norm_bound(norm_bound: float, dimension: int, beta: float = DEFAULT_BETA) -> float:
    """``Δ₂``: the bound conditional rounding keeps ``‖round(z)‖₂`` within (grid units).

    Args:
        norm_bound: ``c >= 0``, the bound on ``‖z‖₂`` before rounding.
        dimension: ``d >= 1``, the number of coordinates.
        beta: ``β`` in ``(0, 1)``: each try exceeds the first bound with at
            most this probability.

    Returns:
        ``Δ₂ > 0``, rounded up (never below the formula).
    """
    c = check_finite_nonnegative("norm_bound", norm_bound)
    d = check_count("dimension", dimension, minimum=1)
    b = check_float("beta", beta, low=0.0, high=1.0, open_low=True, open_high=True)
    first = c * c + d / 4.0 + math.sqrt(2.0 * math.log(1.0 / b)) * (c + math.sqrt(d) / 2.0)
    second = (c + math.sqrt(d)) ** 2
    return math.nextafter(math.sqrt(min(first, second)) * (1.0 + 1e-12), math.inf)


def conditional_round(
    values: npt.NDArray[np.floating],
    bound: float,
    rng: np.random.Generator,
    *,
    max_tries: int = 1000,
) -> tuple[npt.NDArray[np.int64], int]:
    """Round ``values`` to integers, unbiased per try, redrawn until ``‖·‖₂ <= bound``.

    Args:
        values: The scaled vector ``z`` (finite); its norm must not exceed
            ``bound`` (it is at most the pre-rounding clip ``c <= Δ₂``).
        bound: ``Δ₂`` (:func:`rounded_norm_bound`).
        rng: The rounding's randomness (not privacy-critical: the noise is).
        max_tries: Draws before rounding toward zero (``>= 1``).

    Returns:
        ``(rounded, tries)``: an int64 vector with ``‖rounded‖₂ <= bound``
        exactly, and the number of draws made (``max_tries + 1`` means the
        fallback toward zero was used).

    Raises:
        NonFiniteInputError: ``values`` holds NaN or infinity.
        ParameterError: ``‖values‖₂ > bound`` (the caller did not clip).
    """
    z = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.isfinite(z).all():
        raise NonFiniteInputError("values", count=int(np.count_nonzero(~np.isfinite(z))))
    limit = check_finite_nonnegative("bound", bound)
    tries = check_count("max_tries", max_tries, minimum=1)
    if float(np.linalg.norm(z)) > limit:
        raise ParameterError("values", f"a vector of L2 norm <= bound = {limit:.6g}", "larger")
    cap = math.floor(limit * limit)
    low = np.floor(z)
    frac = z - low
    base = low.astype(np.int64)
    for attempt in range(1, tries + 1):
        rounded = base + (rng.random(z.shape) < frac)
        if int(np.dot(rounded, rounded)) <= cap:
            return rounded, attempt
    return np.trunc(z).astype(np.int64), tries + 1
