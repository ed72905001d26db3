"""The Poisson inclusion rate that the factory's 64-bit sampler realises.

Record ``i`` is included iff ``u_i < T``, an exact integer comparison of a
uniform 64-bit word ``u_i`` with ``T = ceil(q * 2**64)``
(:func:`inclusion_threshold`), so the inclusion probability is exactly
``q' = T / 2**64`` (:func:`realised_sampling_rate`).  This is the rate that
DP-SGD divides by and that the ledger accounts; the privacy records and the
sampler (:mod:`privfed.engines.factory.dpsgd`) both read it from here.
"""

from __future__ import annotations

import math
from typing import Final

from privfed._checks import check_float

__all__ = ["MIN_SAMPLING_RATE", "inclusion_threshold", "realised_sampling_rate"]

#: Smallest Poisson inclusion probability the 64-bit sampler realises (T = 1).
MIN_SAMPLING_RATE: Final = 2.0**-64

_WORD_BITS: Final = 64
_TWO_POW_64: Final = 1 << _WORD_BITS
_RATE_DOMAIN: Final = (
    "a float in [2**-64, 1] (2**-64 ≈ 5.42e-20 is the smallest rate the sampler realises)"
)


def _check_sampling_rate(rate: object, name: str = "sampling_rate") -> float:
    return check_float(
        name,
        rate,
        low=MIN_SAMPLING_RATE,
        high=1.0,
        numpy=False,
        expected="a float",
        domain=_RATE_DOMAIN,
    )


def inclusion_threshold(sampling_rate: float) -> int:
    """The integer threshold ``T = ceil(sampling_rate * 2**64)`` of the sampler.

    A record is included iff its uniform 64-bit word ``u`` satisfies ``u < T``,
    which happens with probability exactly ``T / 2**64``.

    Args:
        sampling_rate: The requested inclusion probability q, a float in
            ``[2**-64, 1]``.

    Returns:
        ``T``, an int in ``[1, 2**64]`` (``2**64``: every record is included).

    Raises:
        ParameterError: ``sampling_rate`` is outside ``[2**-64, 1]``.
    """
    q = _check_sampling_rate(sampling_rate)
    # q >= 2**-64 is a normal float and q * 2**64 <= 2**64, so scaling by a
    # power of two is exact; math.ceil of a float is exact.
    return math.ceil(math.ldexp(q, _WORD_BITS))


def realised_sampling_rate(sampling_rate: float) -> float:
    """The inclusion probability ``q' = T / 2**64`` the sampler realises for q.

    ``q <= q' < q + 2**-64``, with ``q' == q`` whenever ``q * 2**64`` is an
    integer (every float ``q >= 2**-12``).  ``q'`` is exactly representable:
    ``T < 2**53`` fits a float64 mantissa, and ``T >= 2**53`` only happens
    when ``q * 2**64`` is already an integer.  The function is idempotent.

    Args:
        sampling_rate: The requested q, a float in ``[2**-64, 1]``.

    Raises:
        ParameterError: ``sampling_rate`` is outside ``[2**-64, 1]``.
    """
    return math.ldexp(float(inclusion_threshold(sampling_rate)), -_WORD_BITS)
