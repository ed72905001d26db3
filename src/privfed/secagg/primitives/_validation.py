"""Argument checks shared by the primitive modules (private helpers).

Each helper raises the library's typed errors with the parameter's name, its
domain and -- unless the value is secret -- the value received.
"""

from __future__ import annotations

from typing import Any

from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["check_bytes", "check_int"]


def check_int(name: str, value: Any, *, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) in ``[low, high]``.

    Args:
        name: Parameter name for the error message.
        value: The value to check.
        low: Smallest allowed value (inclusive).
        high: Largest allowed value (inclusive), or ``None`` for no upper bound.

    Raises:
        ParameterTypeError: ``value`` is not an ``int`` (``bool`` is refused).
        ParameterError: ``value`` lies outside ``[low, high]``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterTypeError(name, "an int", value)
    if value < low or (high is not None and value > high):
        domain = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"
        raise ParameterError(name, domain, value)
    return value


def check_bytes(
    name: str,
    value: Any,
    *,
    size: int | None = None,
    min_size: int = 0,
    max_size: int | None = None,
) -> bytes:
    """Return ``value`` as immutable ``bytes`` after checking its type and length.

    ``bytes``, ``bytearray`` and ``memoryview`` are accepted (a copy is taken, so a
    caller mutating its buffer afterwards cannot change what was checked).  Error
    messages show only the length, never the content, so the helper is safe for
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
