"""The one validation layer, :mod:`privfed._checks`: types, domains and exact messages.

Messages are compared in full: call sites all over the library rely on them
staying the same when a check moves here.
"""

from __future__ import annotations

import enum
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from privfed import _checks as c
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError


def _message(fn: Any, *args: Any, **kwargs: Any) -> tuple[type[Exception], str]:
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        fn(*args, **kwargs)
    return type(info.value), str(info.value)


def _type_msg(name: str, expected: str, value: object) -> str:
    return f"parameter {name!r} must be {expected}; got an object of type {type(value).__name__}"


def _value_msg(name: str, domain: str, shown: str) -> str:
    return f"parameter {name!r} must be {domain}; got {shown}"


# -- bool, str, choices, enums --------------------------------------------------------


def test_check_bool() -> None:
    assert c.check_bool("flag", True) is True
    assert c.check_bool("flag", False) is False
    for bad in (0, 1, np.bool_(True), None, "True"):
        assert _message(c.check_bool, "flag", bad) == (
            ParameterTypeError,
            _type_msg("flag", "a bool", bad),
        )


def test_check_str() -> None:
    assert c.check_str("name", "x") == "x"
    assert _message(c.check_str, "name", 3) == (
        ParameterTypeError,
        _type_msg("name", "a non-empty str", 3),
    )
    assert _message(c.check_str, "name", "") == (
        ParameterError,
        _value_msg("name", "a non-empty str", "''"),
    )
    # type_error=False: one error class for both, as some call sites always raised.
    assert _message(c.check_str, "name", None, type_error=False) == (
        ParameterError,
        _value_msg("name", "a non-empty str", "None"),
    )


def test_check_choice() -> None:
    assert c.check_choice("kind", "b", ("a", "b")) == "b"
    assert _message(c.check_choice, "kind", "z", ("a", "b", "c")) == (
        ParameterError,
        _value_msg("kind", "'a', 'b' or 'c'", "'z'"),
    )
    assert _message(c.check_choice, "kind", "z", ("a", "b")) == (
        ParameterError,
        _value_msg("kind", "'a' or 'b'", "'z'"),
    )
    assert _message(c.check_choice, "kind", "z", ("a", "b"), domain="one of ('a', 'b')") == (
        ParameterError,
        _value_msg("kind", "one of ('a', 'b')", "'z'"),
    )
    # With expected=, a non-str is a type error before any comparison.
    assert _message(c.check_choice, "kind", 1, ("a",), expected="a str") == (
        ParameterTypeError,
        _type_msg("kind", "a str", 1),
    )
    # Unhashable values are compared, not looked up.
    assert _message(c.check_choice, "kind", ["a"], ("a",)) == (
        ParameterError,
        _value_msg("kind", "'a'", "['a']"),
    )


class _Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


def test_check_enum() -> None:
    assert c.check_enum("colour", "red", _Colour) is _Colour.RED
    assert c.check_enum("colour", _Colour.BLUE, _Colour) is _Colour.BLUE
    for bad in ("green", 3, None, ["red"]):
        assert _message(c.check_enum, "colour", bad, _Colour) == (
            ParameterError,
            _value_msg("colour", "one of ['red', 'blue']", repr(bad)),
        )
    assert _message(c.check_enum, "colour", "x", _Colour, domain="a colour") == (
        ParameterError,
        _value_msg("colour", "a colour", "'x'"),
    )


# -- ints -----------------------------------------------------------------------------


def test_check_int_default_domains() -> None:
    assert c.check_int("n", 5) == 5
    assert c.check_int("n", 5, minimum=5, maximum=5) == 5
    cases = [
        ({"minimum": 1}, 0, "an int >= 1"),
        ({"maximum": 3}, 4, "an int <= 3"),
        ({"minimum": 2, "maximum": 64}, 65, "an int in [2, 64]"),
        ({"minimum": 2, "maximum": 64}, 1, "an int in [2, 64]"),
    ]
    for kwargs, value, domain in cases:
        assert _message(c.check_int, "n", value, **kwargs) == (
            ParameterError,
            _value_msg("n", domain, repr(value)),
        )


def test_check_int_types() -> None:
    for bad in (True, False, 1.0, "1", None, np.int64(3), Fraction(1)):
        assert _message(c.check_int, "n", bad, minimum=0) == (
            ParameterTypeError,
            _type_msg("n", "an int", bad),
        )
    # numpy=True: numpy integers pass and come back as builtin ints, bools still refused.
    result = c.check_int("n", np.int64(3), minimum=0, numpy=True)
    assert result == 3 and type(result) is int
    assert _message(c.check_int, "n", np.bool_(True), numpy=True) == (
        ParameterTypeError,
        _type_msg("n", "an int", np.bool_(True)),
    )
    assert _message(c.check_int, "n", True, numpy=True) == (
        ParameterTypeError,
        _type_msg("n", "an int", True),
    )
    # The value is shown as received.
    assert _message(c.check_int, "n", np.int64(-1), minimum=0, numpy=True) == (
        ParameterError,
        _value_msg("n", "an int >= 0", "np.int64(-1)"),
    )


def test_check_int_wording_overrides() -> None:
    # expected=None: the type error repeats the domain.
    assert _message(c.check_int, "steps", 1.5, minimum=1, expected=None) == (
        ParameterTypeError,
        _type_msg("steps", "an int >= 1", 1.5),
    )
    assert _message(c.check_int, "id", 0, minimum=1, maximum=9, domain="a client id in [1, 9]") == (
        ParameterError,
        _value_msg("id", "a client id in [1, 9]", "0"),
    )
    # type_error=False: a wrong type raises ParameterError with the domain.
    assert _message(c.check_int, "steps", "x", minimum=1, type_error=False) == (
        ParameterError,
        _value_msg("steps", "an int >= 1", "'x'"),
    )
    # secret=True keeps the value out of the message.
    assert _message(c.check_int, "seed", -5, minimum=0, secret=True) == (
        ParameterError,
        _value_msg("seed", "an int >= 0", "<redacted>"),
    )


def test_check_optional_int_and_seed() -> None:
    assert c.check_optional_int("n", None, minimum=1) is None
    assert c.check_optional_int("n", 2, minimum=1) == 2
    assert _message(c.check_optional_int, "n", 0, minimum=1) == (
        ParameterError,
        _value_msg("n", "an int >= 1", "0"),
    )
    assert c.check_seed("seed", None) is None
    assert c.check_seed("seed", np.int64(7)) == 7
    assert _message(c.check_seed, "seed", -3) == (
        ParameterError,
        _value_msg("seed", "an int >= 0 or None", "<redacted>"),
    )
    assert _message(c.check_seed, "seed", 1.0) == (
        ParameterTypeError,
        _type_msg("seed", "an int >= 0 or None", 1.0),
    )


def test_check_count() -> None:
    assert c.check_count("dim", np.int32(4), minimum=1) == 4
    assert _message(c.check_count, "dim", True, minimum=1) == (
        ParameterTypeError,
        _type_msg("dim", "an int (not bool)", True),
    )
    assert _message(c.check_count, "dim", 0, minimum=1) == (
        ParameterError,
        _value_msg("dim", "an int >= 1", "0"),
    )


# -- floats ---------------------------------------------------------------------------


def test_check_float_default_domains() -> None:
    cases = [
        ({}, math.inf, "a finite float"),
        ({"finite": False, "low": 0}, -1.0, "a float >= 0"),
        ({"low": 0, "open_low": True}, 0.0, "a finite float > 0"),
        ({"low": 0}, -0.5, "a finite float >= 0"),
        ({"low": 0.0, "open_low": True}, math.inf, "a finite float > 0.0"),
        ({"high": 1, "open_high": True}, 1, "a finite float < 1"),
        ({"high": 1}, 2.0, "a finite float <= 1"),
        ({"low": 0, "high": 0.9, "open_low": True, "open_high": True}, 0.9, "a float in (0, 0.9)"),
        ({"low": 1, "high": 2}, 0.5, "a float in [1, 2]"),
    ]
    for kwargs, value, domain in cases:
        assert _message(c.check_float, "x", value, **kwargs) == (
            ParameterError,
            _value_msg("x", domain, repr(value)),
        ), kwargs
    assert c.check_float("x", 1, low=1, high=2) == 1.0
    assert type(c.check_float("x", np.float32(0.5))) is float
    assert math.isinf(c.check_float("x", math.inf, finite=False))


def test_check_float_types() -> None:
    for bad in (True, "1.0", None, complex(1, 0), [1.0]):
        assert _message(c.check_float, "x", bad) == (
            ParameterTypeError,
            _type_msg("x", "a real number", bad),
        )
    # numpy=True (default) takes any real number; numpy=False only int and float
    # (numpy.float64 is a float subclass and passes).
    assert c.check_float("x", np.int64(2)) == 2.0
    assert c.check_float("x", Fraction(1, 4)) == 0.25
    assert c.check_float("x", np.float64(0.5), numpy=False) == 0.5
    for bad in (np.float32(0.5), np.int64(1), Fraction(1, 2)):
        assert _message(c.check_float, "x", bad, numpy=False, expected="a float") == (
            ParameterTypeError,
            _type_msg("x", "a float", bad),
        )


def test_check_float_nan_and_overflow() -> None:
    assert _message(c.check_float, "x", math.nan, low=0) == (
        ParameterError,
        _value_msg("x", "a finite float >= 0", "nan"),
    )
    assert _message(c.check_float, "x", math.nan, low=0, nan="a number (not NaN)") == (
        ParameterError,
        _value_msg("x", "a number (not NaN)", "nan"),
    )
    # An int too large for a float is out of every finite domain, not an OverflowError.
    kind, message = _message(c.check_float, "x", 10**400, low=0)
    assert kind is ParameterError and message.startswith("parameter 'x' must be a finite float")


def test_check_float_wording_overrides() -> None:
    assert _message(c.check_float, "r", "x", low=0, open_low=True, type_error=False) == (
        ParameterError,
        _value_msg("r", "a finite float > 0", "'x'"),
    )
    assert _message(c.check_float, "s", True, low=0, open_low=True, expected=None) == (
        ParameterTypeError,
        _type_msg("s", "a finite float > 0", True),
    )
    assert _message(c.check_float, "a", -1, low=0, open_low=True, domain="a finite number > 0") == (
        ParameterError,
        _value_msg("a", "a finite number > 0", "-1"),
    )


@pytest.mark.parametrize(
    ("open_low", "open_high", "interval"),
    [
        (True, True, "(0, 1)"),
        (True, False, "(0, 1]"),
        (False, True, "[0, 1)"),
        (False, False, "[0, 1]"),
    ],
)
def test_check_probability(open_low: bool, open_high: bool, interval: str) -> None:
    kwargs = {"open_low": open_low, "open_high": open_high}
    assert c.check_probability("p", 0.5, **kwargs) == 0.5
    for end, is_open in ((0, open_low), (1, open_high)):
        if is_open:
            assert _message(c.check_probability, "p", end, **kwargs) == (
                ParameterError,
                _value_msg("p", f"a float in {interval}", repr(end)),
            )
        else:
            assert c.check_probability("p", end, **kwargs) == float(end)
    for bad in (-0.1, 1.1, math.nan, math.inf):
        assert _message(c.check_probability, "p", bad, **kwargs)[0] is ParameterError


# -- the privacy-parameter wording ----------------------------------------------------


def test_privacy_parameter_wording() -> None:
    assert c.to_float("epsilon", math.inf) == math.inf
    assert c.to_float("epsilon", Fraction(1, 2)) == 0.5
    assert _message(c.to_float, "epsilon", True) == (
        ParameterTypeError,
        _type_msg("epsilon", "a real number (not bool)", True),
    )
    for fn in (c.to_float, c.check_finite_positive, c.check_finite_nonnegative):
        assert _message(fn, "epsilon", math.nan) == (
            ParameterError,
            _value_msg("epsilon", "a number (not NaN)", "nan"),
        )
    assert _message(c.check_finite_positive, "sigma", 0.0) == (
        ParameterError,
        _value_msg("sigma", "a finite float > 0", "0.0"),
    )
    assert _message(c.check_finite_nonnegative, "mu", math.inf) == (
        ParameterError,
        _value_msg("mu", "a finite float >= 0", "inf"),
    )
    assert c.check_finite_nonnegative("mu", 0) == 0.0
    assert c.check_delta(1e-5) == 1e-5
    for bad in (0.0, 1.0, -1.0):
        assert _message(c.check_delta, bad) == (
            ParameterError,
            _value_msg("delta", "a float in the open interval (0, 1)", repr(bad)),
        )
    assert _message(c.check_delta, math.nan, "budget_delta") == (
        ParameterError,
        _value_msg("budget_delta", "a number (not NaN)", "nan"),
    )
    assert _message(c.check_delta, "0.1") == (
        ParameterTypeError,
        _type_msg("delta", "a real number (not bool)", "0.1"),
    )


# -- bytes and arrays -----------------------------------------------------------------


def test_check_bytes() -> None:
    buffer = bytearray(b"abc")
    out = c.check_bytes("key", buffer, size=3)
    buffer[0] = 0
    assert out == b"abc" and type(out) is bytes
    assert c.check_bytes("key", memoryview(b"ab"), min_size=1, max_size=2) == b"ab"
    assert _message(c.check_bytes, "key", "abc") == (
        ParameterTypeError,
        _type_msg("key", "bytes", "abc"),
    )
    assert _message(c.check_bytes, "key", b"secret", size=32) == (
        ParameterError,
        _value_msg("key", "bytes of length 32", "6") + " (the length in bytes)",
    )
    assert _message(c.check_bytes, "sid", b"", min_size=1, max_size=64) == (
        ParameterError,
        _value_msg("sid", "bytes of length at least 1 and at most 64", "0")
        + " (the length in bytes)",
    )
    assert _message(c.check_bytes, "pt", b"", min_size=1) == (
        ParameterError,
        _value_msg("pt", "bytes of length at least 1", "0") + " (the length in bytes)",
    )


def test_check_vector() -> None:
    out = c.check_vector("scores", [1, 2, 3])
    assert out.dtype == np.float64 and out.shape == (3,)
    for bad in ("abc", b"ab", None, [[1.0], "x"]):
        assert _message(c.check_vector, "scores", bad)[0] is ParameterTypeError
    assert _message(c.check_vector, "scores", [[1.0]]) == (
        ParameterError,
        _value_msg("scores", "a 1-D array", "'array of shape (1, 1)'"),
    )
    assert _message(c.check_vector, "scores", [1.0], min_size=2) == (
        ParameterError,
        _value_msg("scores", "an array with at least 2 entries", "1"),
    )
    with pytest.raises(NonFiniteInputError, match="2 non-finite values"):
        c.check_vector("scores", [math.nan, 1.0, math.inf])


def test_check_matrix() -> None:
    out = c.check_matrix("x", [[1, 2], [3, 4]], min_rows=2)
    assert out.dtype == np.float64 and out.shape == (2, 2)
    assert _message(c.check_matrix, "x", None) == (
        ParameterTypeError,
        _type_msg("x", "a 2-D array of real numbers", None),
    )
    assert _message(c.check_matrix, "x", [1.0]) == (
        ParameterError,
        _value_msg("x", "a 2-D array (records × features)", "'shape (1,)'"),
    )
    assert _message(c.check_matrix, "x", [[1.0]], min_rows=2) == (
        ParameterError,
        _value_msg("x", "an array with at least 2 rows", "1"),
    )
    assert _message(c.check_matrix, "x", np.zeros((2, 0))) == (
        ParameterError,
        _value_msg("x", "an array with at least one column", "0"),
    )
    with pytest.raises(NonFiniteInputError):
        c.check_matrix("x", [[math.nan]])


def test_check_instance() -> None:
    class Apple:
        pass

    class Pear:
        pass

    apple, pear = Apple(), Pear()
    assert c.check_instance("fruit", apple, Apple) is apple
    with pytest.raises(ParameterTypeError, match="fruit") as wrong:
        c.check_instance("fruit", pear, Apple)
    assert "an Apple" in str(wrong.value)
    with pytest.raises(ParameterTypeError, match="a Pear"):
        c.check_instance("fruit", apple, Pear)
