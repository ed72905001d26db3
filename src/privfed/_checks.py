"""The one argument-validation layer of privfed (private).

Every package validates its arguments through these functions, so a check is
written once and its error reads the same wherever it is used.  Each function
returns the checked value (converted to a builtin ``int``, ``float``, ``bytes``,
enum member or numpy array) or raises a typed error of :mod:`privfed.errors`:

* a value of the wrong type raises :class:`~privfed.errors.ParameterTypeError`
  (``"parameter 'x' must be <expected>; got an object of type T"``);
* a value of the right type outside its domain raises
  :class:`~privfed.errors.ParameterError`
  (``"parameter 'x' must be <domain>; got <value>"``).

``bool`` is refused wherever a number is expected (``True`` silently meaning
``1`` is a bug, not a convenience).  The default wording is built from the
bounds as the caller spells them (``minimum=1`` reads ``"an int >= 1"``,
``low=0.0`` reads ``"> 0.0"``); ``expected=`` and ``domain=`` override it where
a call site has always said something more specific, so that moving a check
here never changes a message.

Most functions take these keywords:

* ``numpy``: also accept numpy scalars -- any :class:`numbers.Integral` for ints,
  any :class:`numbers.Real` for floats.  Without it only ``int`` (and ``int``
  or ``float``, which includes ``numpy.float64``, for floats) passes.
* ``expected``: the type in words for the type error; ``None`` reuses the domain.
* ``domain``: the domain in words for the value error (default: built from the
  bounds).
* ``type_error``: ``False`` makes a wrong type raise ``ParameterError`` with the
  domain, for the call sites that have always raised one error class for both.

This module imports only the standard library, numpy and :mod:`privfed.errors`,
so every layer (the pure cores included) may use it.
"""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Sequence
from typing import Final, TypedDict, TypeVar, Unpack

import numpy as np
from numpy.typing import NDArray

from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

__all__ = [
    "check_bool",
    "check_bytes",
    "check_choice",
    "check_count",
    "check_delta",
    "check_enum",
    "check_finite_nonnegative",
    "check_finite_positive",
    "check_float",
    "check_instance",
    "check_int",
    "check_matrix",
    "check_optional_int",
    "check_probability",
    "check_seed",
    "check_str",
    "check_vector",
    "to_float",
]

_T = TypeVar("_T")
_E = TypeVar("_E", bound=enum.Enum)

# The wording of the privacy-parameter checks (privfed.dp, privfed.testing).
_INT_NOT_BOOL: Final = "an int (not bool)"
_REAL_NOT_BOOL: Final = "a real number (not bool)"
_NOT_NAN: Final = "a number (not NaN)"


class _IntOptions(TypedDict, total=False):
    """The keywords of :func:`check_int` besides the value."""

    minimum: int | None
    maximum: int | None
    numpy: bool
    expected: str | None
    domain: str | None
    type_error: bool
    secret: bool


class _FloatOptions(TypedDict, total=False):
    """The wording keywords of :func:`check_float` (everything but the bounds)."""

    numpy: bool
    expected: str | None
    nan: str | None
    domain: str | None
    type_error: bool


def _wrong_type(name: str, expected: str, value: object, *, type_error: bool) -> Exception:
    if type_error:
        return ParameterTypeError(name, expected, value)
    return ParameterError(name, expected, value)


# -- bools and strings ----------------------------------------------------------------


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool`` (``0``, ``1`` and numpy bools are refused).

    Args:
        name: Parameter name for the error message.
        value: The value to check.

    Raises:
        ParameterTypeError: ``value`` is not a ``bool`` (``"a bool"``).
    """
    if not isinstance(value, bool):
        raise ParameterTypeError(name, "a bool", value)
    return value


def check_str(
    name: str,
    value: object,
    *,
    domain: str = "a non-empty str",
    type_error: bool = True,
) -> str:
    """Return ``value`` if it is a non-empty ``str``.

    Args:
        name: Parameter name for the error message.
        value: The value to check.
        domain: The domain in words, used by both errors.
        type_error: ``False``: a non-``str`` raises ``ParameterError`` too.

    Raises:
        ParameterTypeError: ``value`` is not a ``str``.
        ParameterError: ``value`` is the empty string.
    """
    if not isinstance(value, str):
        raise _wrong_type(name, domain, value, type_error=type_error)
    if not value:
        raise ParameterError(name, domain, value)
    return value


def _spell_choices(choices: Sequence[object]) -> str:
    shown = [repr(c) for c in choices]
    if len(shown) <= 1:
        return "".join(shown)
    return f"{', '.join(shown[:-1])} or {shown[-1]}"


def check_choice(
    name: str,
    value: object,
    choices: Sequence[_T],
    *,
    expected: str | None = None,
    domain: str | None = None,
) -> _T:
    """Return the element of ``choices`` equal to ``value``.

    Args:
        name: Parameter name for the error message.
        value: The value to check (compared with ``==``).
        choices: The allowed values, usually strings (a ``Literal``'s members).
        expected: If given, a ``value`` that is not a ``str`` raises
            ``ParameterTypeError(name, expected)`` before the comparison.
        domain: The domain in words; default ``"'a', 'b' or 'c'"``.

    Raises:
        ParameterTypeError: ``expected`` is given and ``value`` is not a ``str``.
        ParameterError: ``value`` equals none of ``choices``.
    """
    if expected is not None and not isinstance(value, str):
        raise ParameterTypeError(name, expected, value)
    for choice in choices:
        if value == choice:
            return choice
    raise ParameterError(name, _spell_choices(choices) if domain is None else domain, value)


def check_enum(name: str, value: object, enum_type: type[_E], *, domain: str | None = None) -> _E:
    """Return ``enum_type(value)``: a member, or the member whose value is ``value``.

    Args:
        name: Parameter name for the error message.
        value: A member of ``enum_type`` or the value of one.
        enum_type: The enum class.
        domain: The domain in words; default ``"one of [<the members' values>]"``.

    Raises:
        ParameterError: ``value`` is neither a member nor a member's value.
    """
    try:
        return enum_type(value)
    except ValueError:
        if domain is None:
            domain = f"one of {[member.value for member in enum_type]}"
        raise ParameterError(name, domain, value) from None


def check_instance(name: str, value: object, cls: type[_T]) -> _T:
    """``value`` itself when it is an instance of ``cls`` (a parameter object).

    Raises:
        ParameterTypeError: Another type (``"a <class name>"``, ``"an ..."`` before a vowel).
    """
    if not isinstance(value, cls):
        article = "an" if cls.__name__[:1] in "AEIOU" else "a"
        raise ParameterTypeError(name, f"{article} {cls.__name__}", value)
    return value


# -- ints -----------------------------------------------------------------------------


def _int_domain(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an int in [{minimum}, {maximum}]"
    if minimum is not None:
        return f"an int >= {minimum}"
    if maximum is not None:
        return f"an int <= {maximum}"
    return "an int"


def check_int(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    numpy: bool = False,
    expected: str | None = "an int",
    domain: str | None = None,
    type_error: bool = True,
    secret: bool = False,
) -> int:
    """Return ``value`` as an ``int`` after checking it lies in ``[minimum, maximum]``.

    Args:
        name: Parameter name for the error message.
        value: The value to check; ``bool`` is refused.
        minimum: Smallest allowed value (inclusive), or ``None``.
        maximum: Largest allowed value (inclusive), or ``None``.
        numpy: Also accept numpy integers (any :class:`numbers.Integral`).
        expected: The type in words for the type error; ``None`` reuses the domain.
        domain: The domain in words; default ``"an int >= m"``,
            ``"an int <= M"`` or ``"an int in [m, M]"``.
        type_error: ``False``: a wrong type raises ``ParameterError`` with the domain.
        secret: Keep the value out of the message (``<redacted>``).

    Raises:
        ParameterTypeError: ``value`` is not an integer.
        ParameterError: ``value`` lies outside ``[minimum, maximum]``.
    """
    if domain is None:
        domain = _int_domain(minimum, maximum)
    if isinstance(value, bool) or not (
        isinstance(value, int) or (numpy and isinstance(value, numbers.Integral))
    ):
        if not type_error:
            raise ParameterError(name, domain, value, secret=secret)
        raise ParameterTypeError(name, domain if expected is None else expected, value)
    result = int(value)
    if (minimum is not None and result < minimum) or (maximum is not None and result > maximum):
        raise ParameterError(name, domain, value, secret=secret)
    return result


def check_optional_int(name: str, value: object, **options: Unpack[_IntOptions]) -> int | None:
    """``None``, or :func:`check_int` of ``value`` (same keywords)."""
    if value is None:
        return None
    return check_int(name, value, **options)


def check_count(name: str, value: object, *, minimum: int) -> int:
    """An integer ``>= minimum`` with the wording of the privacy parameters.

    :func:`check_int` with numpy integers accepted and the type error
    ``"an int (not bool)"``; used by :mod:`privfed.dp` and :mod:`privfed.testing`.
    """
    return check_int(name, value, minimum=minimum, numpy=True, expected=_INT_NOT_BOOL)


def check_seed(name: str, value: object) -> int | None:
    """``None`` or an int seed ``>= 0`` (numpy ints too); the value never appears in messages.

    Raises:
        ParameterTypeError: ``value`` is neither ``None`` nor an integer.
        ParameterError: ``value`` is negative (shown as ``<redacted>``).
    """
    return check_optional_int(
        name,
        value,
        minimum=0,
        numpy=True,
        expected=None,
        domain="an int >= 0 or None",
        secret=True,
    )


# -- floats ---------------------------------------------------------------------------


def _check_real(
    name: str,
    value: object,
    *,
    numpy: bool = True,
    expected: str = "a real number",
    nan: str | None = None,
    type_error: bool = True,
) -> float:
    """Return ``value`` as a ``float`` after checking its type (``bool`` refused).

    Args:
        name: Parameter name for the error message.
        value: The value to check.
        numpy: Accept any :class:`numbers.Real` (numpy scalars, fractions);
            otherwise only ``int`` and ``float``.
        expected: The type in words for the type error.
        nan: If given, NaN raises ``ParameterError(name, nan)``; otherwise NaN
            passes (and fails any later bound).
        type_error: ``False``: a wrong type raises ``ParameterError``.

    Raises:
        ParameterTypeError: ``value`` is not a real number.
        ParameterError: ``value`` is NaN and ``nan`` is given.
    """
    if isinstance(value, bool) or not (
        isinstance(value, int | float) or (numpy and isinstance(value, numbers.Real))
    ):
        raise _wrong_type(name, expected, value, type_error=type_error)
    result = float(value)
    if nan is not None and math.isnan(result):
        raise ParameterError(name, nan, value)
    return result


def _float_domain(
    low: float | None, high: float | None, open_low: bool, open_high: bool, finite: bool
) -> str:
    if low is not None and high is not None:
        return f"a float in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
    kind = "a finite float" if finite else "a float"
    if low is not None:
        return f"{kind} {'>' if open_low else '>='} {low}"
    if high is not None:
        return f"{kind} {'<' if open_high else '<='} {high}"
    return kind


def check_float(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    open_low: bool = False,
    open_high: bool = False,
    finite: bool = True,
    numpy: bool = True,
    expected: str | None = "a real number",
    nan: str | None = None,
    domain: str | None = None,
    type_error: bool = True,
) -> float:
    """Return ``value`` as a ``float`` after checking it is finite and within its bounds.

    Args:
        name: Parameter name for the error message.
        value: The value to check; ``bool`` is refused.
        low: Lower bound, or ``None``.
        high: Upper bound, or ``None``.
        open_low: Exclude ``low`` itself.
        open_high: Exclude ``high`` itself.
        finite: Refuse infinities (NaN never satisfies a bound either).
        numpy: Accept any :class:`numbers.Real`; otherwise only ``int`` and ``float``.
        expected: The type in words for the type error; ``None`` reuses the domain.
        nan: If given, NaN raises ``ParameterError(name, nan)`` before the bounds.
        domain: The domain in words; default ``"a finite float > 0"``,
            ``"a finite float >= 0"``, ``"a float in (0, 1]"`` and the like.
        type_error: ``False``: a wrong type raises ``ParameterError`` with the domain.

    Raises:
        ParameterTypeError: ``value`` is not a real number.
        ParameterError: ``value`` is NaN, infinite, too large for a float or
            out of bounds.
    """
    if domain is None:
        domain = _float_domain(low, high, open_low, open_high, finite)
    wrong = domain if expected is None or not type_error else expected
    try:
        x = _check_real(name, value, numpy=numpy, expected=wrong, nan=nan, type_error=type_error)
    except OverflowError:  # an int (or fraction) beyond float64: not a finite float in range
        raise ParameterError(name, domain, value) from None
    ok = (
        (not finite or math.isfinite(x))
        and (low is None or (x > low if open_low else x >= low))
        and (high is None or (x < high if open_high else x <= high))
    )
    if not ok:
        raise ParameterError(name, domain, value)
    return x


def check_probability(
    name: str,
    value: object,
    *,
    open_low: bool = True,
    open_high: bool = True,
    **options: Unpack[_FloatOptions],
) -> float:
    """A float in the unit interval, ends open or closed: ``(0, 1)`` by default.

    :func:`check_float` with ``low=0`` and ``high=1`` (and its other keywords);
    the default domain reads ``"a float in (0, 1)"``, ``"a float in [0, 1)"``
    and so on.
    """
    return check_float(
        name, value, low=0, high=1, open_low=open_low, open_high=open_high, **options
    )


# -- the privacy-parameter wording (privfed.dp, privfed.testing) ----------------------


def to_float(name: str, value: object) -> float:
    """A real number (infinities allowed, NaN refused) as a ``float``.

    Raises:
        ParameterTypeError: Not a real number (``"a real number (not bool)"``).
        ParameterError: NaN (``"a number (not NaN)"``).
    """
    return _check_real(name, value, expected=_REAL_NOT_BOOL, nan=_NOT_NAN)


def check_finite_positive(name: str, value: object) -> float:
    """A finite float ``> 0``, with the wording of :func:`to_float` for type and NaN."""
    return check_float(name, value, low=0, open_low=True, expected=_REAL_NOT_BOOL, nan=_NOT_NAN)


def check_finite_nonnegative(name: str, value: object) -> float:
    """A finite float ``>= 0``, with the wording of :func:`to_float` for type and NaN."""
    return check_float(name, value, low=0, expected=_REAL_NOT_BOOL, nan=_NOT_NAN)


def check_delta(value: object, name: str = "delta") -> float:
    """The δ of an (ε, δ) guarantee: a float in the open interval ``(0, 1)``.

    Raises:
        ParameterTypeError: Not a real number (``"a real number (not bool)"``).
        ParameterError: NaN, or outside ``(0, 1)``
            (``"a float in the open interval (0, 1)"``).
    """
    return check_probability(
        name,
        value,
        expected=_REAL_NOT_BOOL,
        nan=_NOT_NAN,
        domain="a float in the open interval (0, 1)",
    )


# -- bytes and arrays -----------------------------------------------------------------


def check_bytes(
    name: str,
    value: object,
    *,
    size: int | None = None,
    min_size: int = 0,
    max_size: int | None = None,
) -> bytes:
    """Return ``value`` as immutable ``bytes`` after checking its type and length.

    ``bytes``, ``bytearray`` and ``memoryview`` are accepted (a copy is taken, so a
    caller mutating its buffer afterwards cannot change what was checked).  Error
    messages show only the length, never the content, so the check is safe for
    keys, seeds and plaintexts.

    Args:
        name: Parameter name for the error message.
        value: The value to check.
        size: Exact required length in bytes, or ``None``.
        min_size: Smallest allowed length when ``size`` is ``None``.
        max_size: Largest allowed length when ``size`` is ``None``.

    Raises:
        ParameterTypeError: ``value`` is not bytes-like.
        ParameterError: The length is wrong.
    """
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ParameterTypeError(name, "bytes", value)
    data = bytes(value)
    n = len(data)
    if size is not None:
        if n != size:
            raise ParameterError(name, f"bytes of length {size}", n, detail="the length in bytes")
    elif n < min_size or (max_size is not None and n > max_size):
        upper = "" if max_size is None else f" and at most {max_size}"
        raise ParameterError(
            name, f"bytes of length at least {min_size}{upper}", n, detail="the length in bytes"
        )
    return data


def _as_float_array(name: str, value: object, expected: str) -> NDArray[np.float64]:
    if isinstance(value, str | bytes) or value is None:
        raise ParameterTypeError(name, expected, value)
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(name, expected, value) from exc


def _check_all_finite(name: str, array: NDArray[np.float64]) -> None:
    bad = int(np.count_nonzero(~np.isfinite(array)))
    if bad:
        raise NonFiniteInputError(name, count=bad)


def check_vector(name: str, value: object, *, min_size: int = 1) -> NDArray[np.float64]:
    """Return ``value`` as a finite 1-D float64 array with at least ``min_size`` entries.

    Raises:
        ParameterTypeError: ``value`` is not array-like (a str, bytes or ``None``
            included).
        ParameterError: ``value`` is not 1-D or has too few entries.
        NonFiniteInputError: An entry is NaN or infinite.
    """
    array = _as_float_array(name, value, "a 1-D array of real numbers")
    if array.ndim != 1:
        raise ParameterError(name, "a 1-D array", f"array of shape {array.shape}")
    if array.size < min_size:
        raise ParameterError(name, f"an array with at least {min_size} entries", array.size)
    _check_all_finite(name, array)
    return array


def check_matrix(name: str, value: object, *, min_rows: int = 1) -> NDArray[np.float64]:
    """Return ``value`` as a finite 2-D float64 array (rows are records, >= 1 column).

    Raises:
        ParameterTypeError: ``value`` is not array-like (a str, bytes or ``None``
            included).
        ParameterError: ``value`` is not 2-D, has fewer than ``min_rows`` rows or
            no column.
        NonFiniteInputError: An entry is NaN or infinite.
    """
    array = _as_float_array(name, value, "a 2-D array of real numbers")
    if array.ndim != 2:
        raise ParameterError(name, "a 2-D array (records × features)", f"shape {array.shape}")
    if array.shape[0] < min_rows:
        raise ParameterError(name, f"an array with at least {min_rows} rows", array.shape[0])
    if array.shape[1] < 1:
        raise ParameterError(name, "an array with at least one column", array.shape[1])
    _check_all_finite(name, array)
    return array
