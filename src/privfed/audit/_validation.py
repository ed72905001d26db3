"""Input checks shared by the audit modules (private)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

__all__: list[str] = []


def as_score_vector(name: str, value: Any, *, min_size: int = 1) -> NDArray[np.float64]:
    """Return ``value`` as a finite 1-D float64 array with at least ``min_size`` entries."""
    if isinstance(value, (str, bytes)) or value is None:
        raise ParameterTypeError(name, "a 1-D array of real numbers", value)
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(name, "a 1-D array of real numbers", value) from exc
    if array.ndim != 1:
        raise ParameterError(name, "a 1-D array", f"array of shape {array.shape}")
    if array.size < min_size:
        raise ParameterError(name, f"an array with at least {min_size} entries", array.size)
    bad = int(np.count_nonzero(~np.isfinite(array)))
    if bad:
        raise NonFiniteInputError(name, count=bad)
    return array


def as_matrix(name: str, value: Any, *, min_rows: int = 1) -> NDArray[np.float64]:
    """Return ``value`` as a finite 2-D float64 array (rows are records)."""
    if isinstance(value, (str, bytes)) or value is None:
        raise ParameterTypeError(name, "a 2-D array of real numbers", value)
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(name, "a 2-D array of real numbers", value) from exc
    if array.ndim != 2:
        raise ParameterError(name, "a 2-D array (records × features)", f"shape {array.shape}")
    if array.shape[0] < min_rows:
        raise ParameterError(name, f"an array with at least {min_rows} rows", array.shape[0])
    if array.shape[1] < 1:
        raise ParameterError(name, "an array with at least one column", array.shape[1])
    bad = int(np.count_nonzero(~np.isfinite(array)))
    if bad:
        raise NonFiniteInputError(name, count=bad)
    return array


def check_probability(name: str, value: Any, *, open_low: bool, open_high: bool) -> float:
    """Check a float in [0, 1] (ends open as requested) and return it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ParameterTypeError(name, "a real number", value)
    x = float(value)
    lo = "(0" if open_low else "[0"
    hi = "1)" if open_high else "1]"
    ok = math.isfinite(x) and (x > 0 if open_low else x >= 0) and (x < 1 if open_high else x <= 1)
    if not ok:
        raise ParameterError(name, f"a float in {lo}, {hi}", value)
    return x


def check_positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """Check an integer ≥ ``minimum`` (bools refused) and return it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterTypeError(name, "an int", value)
    if int(value) < minimum:
        raise ParameterError(name, f"an int >= {minimum}", value)
    return int(value)


def check_positive_float(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """Check a finite float > 0 (or ≥ 0) and return it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ParameterTypeError(name, "a real number", value)
    x = float(value)
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ParameterError(
            name, "a finite float >= 0" if allow_zero else "a finite float > 0", value
        )
    return x


def check_seed(name: str, value: Any) -> int | None:
    """Accept ``None`` or a non-negative int seed (the value never appears in messages)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterTypeError(name, "an int >= 0 or None", value)
    if int(value) < 0:
        raise ParameterError(name, "an int >= 0 or None", value, secret=True)
    return int(value)
