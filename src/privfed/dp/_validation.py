"""Argument checks shared by the differential-privacy modules (private).

Every check raises a typed error from :mod:`privfed.errors` that names the
parameter, states its domain and shows the value received.  ``bool`` is refused
wherever a number is expected, because ``True`` silently meaning ``1.0`` in a
privacy parameter is a bug, not a convenience.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "check_delta",
    "check_finite_nonnegative",
    "check_finite_positive",
    "check_int",
    "check_probability_open",
    "to_float",
]


def to_float(name: str, value: Any) -> float:
    """Return ``value`` as a float, refusing bools and non-real objects."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(name, "a real number (not bool)", value)
    result = float(value)
    if math.isnan(result):
        raise ParameterError(name, "a number (not NaN)", value)
    return result


def check_finite_positive(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking it is finite and > 0."""
    result = to_float(name, value)
    if not (math.isfinite(result) and result > 0.0):
        raise ParameterError(name, "a finite float > 0", value)
    return result


def check_finite_nonnegative(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking it is finite and >= 0."""
    result = to_float(name, value)
    if not (math.isfinite(result) and result >= 0.0):
        raise ParameterError(name, "a finite float >= 0", value)
    return result


def check_probability_open(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking it lies in the open interval (0, 1)."""
    result = to_float(name, value)
    if not (0.0 < result < 1.0):
        raise ParameterError(name, "a float in the open interval (0, 1)", value)
    return result


def check_delta(value: Any, name: str = "delta") -> float:
    """Check a δ of an (ε, δ) guarantee: a float in (0, 1)."""
    return check_probability_open(name, value)


def check_int(name: str, value: Any, *, minimum: int) -> int:
    """Return ``value`` as an int after checking it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(name, "an int (not bool)", value)
    result = int(value)
    if result < minimum:
        raise ParameterError(name, f"an int >= {minimum}", value)
    return result
