"""Fixed-point encoding of real vectors into the ring ``Z_{2**k}`` that secure aggregation sums.

A real value ``v`` becomes the integer ``q = round(v * 2**f)`` (``f`` fractional
bits), stored as ``q mod 2**k`` in a ``uint64``.  Sums of such integers are exact
in the ring; decoding reads the total back as a signed (two's-complement)
integer and scales it by ``2**-f``.

No silent wrap-around: a :class:`FixedPointConfig` is refused at construction
unless

    ``max_summands * (ceil(max_abs_value * 2**f) + 1) < 2**(k - 1)``,

which guarantees that any total of at most ``max_summands`` encoded values, each
of magnitude at most ``max_abs_value``, lies strictly inside the signed range
``(-2**(k-1), 2**(k-1))`` and therefore decodes to itself.  (Rounding to nearest
gives ``|q| <= ceil(max_abs_value * 2**f)``; the ``+ 1`` is a deliberate margin.)

Numerical error, all in the direction of "as close as the grid allows":

* one value: ``|decode(encode(v)) - v| <= 2**-f / 2`` (rounding is to the
  nearest grid point, ties to even; scaling by a power of two is exact);
* a total of ``n`` encoded values: the ring sum is exact, so the decoded total
  differs from the real sum by at most ``n * 2**-f / 2``, plus a float64
  rounding of relative size ``<= 2**-53`` when the integer total exceeds
  ``2**53`` grid units.

Ring helpers (:func:`ring_add`, :func:`ring_sub`, :func:`ring_sum`) work on
``uint64`` arrays for any ring size ``2 <= k <= 64``; since ``2**k`` divides
``2**64``, ``uint64`` wrap-around followed by a mask is exact.

This module is part of the hazardous-materials layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from privfed._checks import check_float, check_int
from privfed.errors import (
    NonFiniteInputError,
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)

__all__ = [
    "MAX_FRACTIONAL_BITS",
    "FixedPointConfig",
    "check_no_wraparound",
    "ring_add",
    "ring_sub",
    "ring_sum",
]

#: Largest number of fractional bits accepted (beyond it ``2**f`` leaves float64's range).
MAX_FRACTIONAL_BITS: Final[int] = 1023


def _check_ring_bits(ring_bits: object) -> int:
    return check_int("ring_bits", ring_bits, minimum=2, maximum=64)


def _ring_mask(ring_bits: int) -> np.uint64:
    return np.uint64((1 << ring_bits) - 1)


def _as_ring(name: str, values: Any, ring_bits: int) -> npt.NDArray[np.uint64]:
    """Check ring elements (integer dtype, values in ``[0, 2**k)``); return a fresh uint64 copy."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise ParameterTypeError(name, "an array of integers (ring elements)", values)
    if arr.size:
        if arr.dtype.kind == "i" and int(arr.min()) < 0:
            raise ParameterError(name, f"ring elements in [0, 2**{ring_bits})", None, secret=True)
        if int(arr.max()) >> ring_bits:
            raise ParameterError(name, f"ring elements in [0, 2**{ring_bits})", None, secret=True)
    return np.array(arr, dtype=np.uint64, copy=True)


def _encoded_bound(max_abs_value: float, fractional_bits: int) -> int | None:
    """``ceil(max_abs_value * 2**f)`` computed exactly, or ``None`` if it overflows float64."""
    scaled = math.ldexp(max_abs_value, fractional_bits)
    if math.isinf(scaled):
        return None
    return math.ceil(scaled)


def _fits(bound: int | None, max_summands: int, ring_bits: int, headroom_bits: int = 0) -> bool:
    if bound is None:
        return False
    return ((max_summands * (bound + 1)) << headroom_bits) < (1 << (ring_bits - 1))


def check_no_wraparound(
    fractional_bits: object, max_abs_value: object, max_summands: object, ring_bits: object = 64
) -> float:
    """Check that a fixed-point encoding with these bounds can never wrap around the ring.

    The check :class:`FixedPointConfig` runs at construction, for callers that
    need the guarantee (and its errors) without building an encoder: it
    validates the four arguments and then requires

        ``max_summands * (ceil(max_abs_value * 2**fractional_bits) + 1)
        < 2**(ring_bits - 1)``,

    so that any total of at most ``max_summands`` values of magnitude at most
    ``max_abs_value``, encoded with ``fractional_bits`` fractional bits, decodes
    to itself in ``Z_{2**ring_bits}``.

    Args:
        fractional_bits: ``f``, an ``int`` in ``[0, 1023]``.
        max_abs_value: Largest magnitude of one summand, a finite number ``> 0``.
        max_summands: Largest number of summands in any total, an ``int >= 1``.
        ring_bits: ``k``, an ``int`` in ``[2, 64]``.

    Returns:
        ``max_abs_value`` as a ``float``.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain.
        RingOverflowError: A total could wrap around the ring.
    """
    f = check_int("fractional_bits", fractional_bits, minimum=0, maximum=MAX_FRACTIONAL_BITS)
    a = _check_max_abs(max_abs_value)
    n = check_int("max_summands", max_summands, minimum=1)
    k = _check_ring_bits(ring_bits)
    if not _fits(_encoded_bound(a, f), n, k):
        raise RingOverflowError(
            "(fractional_bits, max_abs_value, max_summands, ring_bits)",
            "values with max_summands * (ceil(max_abs_value * 2**fractional_bits) + 1)"
            " < 2**(ring_bits - 1)",
            (f, a, n, k),
            detail="a total could wrap around the ring; lower fractional_bits or raise ring_bits",
        )
    return a


@dataclass(frozen=True)
class FixedPointConfig:
    """A fixed-point encoding into ``Z_{2**ring_bits}`` proven free of wrap-around.

    Attributes:
        fractional_bits: ``f``, an ``int`` in ``[0, 1023]``; the grid step is ``2**-f``.
        max_abs_value: Largest magnitude of ONE summand, a finite ``float > 0``
            (same unit as the values encoded).
        max_summands: Largest number of encoded values added into any one
            total (e.g. records times clients), an ``int >= 1``.
        ring_bits: ``k``, an ``int`` in ``[2, 64]``; the ring is ``Z_{2**k}``.

    Raises:
        ParameterTypeError: An attribute has the wrong type.
        ParameterError: An attribute is outside its domain.
        RingOverflowError: ``max_summands * (ceil(max_abs_value * 2**f) + 1)
            >= 2**(k - 1)``, i.e. a total could wrap around the ring (the check
            of :func:`check_no_wraparound`).
    """

    fractional_bits: int
    max_abs_value: float
    max_summands: int
    ring_bits: int = 64

    def __post_init__(self) -> None:
        a = check_no_wraparound(
            self.fractional_bits, self.max_abs_value, self.max_summands, self.ring_bits
        )
        object.__setattr__(self, "max_abs_value", a)

    @classmethod
    def for_bounds(
        cls,
        max_abs_value: float,
        max_summands: int,
        *,
        ring_bits: int = 64,
        headroom_bits: int = 0,
    ) -> FixedPointConfig:
        """The configuration with the most fractional bits that cannot wrap.

        Picks the largest ``f`` with
        ``max_summands * (ceil(max_abs_value * 2**f) + 1) * 2**headroom_bits
        < 2**(ring_bits - 1)``.

        Args:
            max_abs_value: Largest magnitude of one summand, finite ``> 0``.
            max_summands: Largest number of summands in any total, ``>= 1``.
            ring_bits: ``k`` in ``[2, 64]``.
            headroom_bits: Extra factor ``2**headroom_bits`` of room kept free
                (e.g. for noise added in the ring later), ``>= 0``.

        Returns:
            The configuration (with ``fractional_bits`` as large as possible).

        Raises:
            ParameterTypeError: An argument has the wrong type.
            ParameterError: An argument is outside its domain.
            RingOverflowError: Even ``f = 0`` could wrap.
        """
        a = _check_max_abs(max_abs_value)
        n = check_int("max_summands", max_summands, minimum=1)
        k = _check_ring_bits(ring_bits)
        h = check_int("headroom_bits", headroom_bits, minimum=0, maximum=k - 2)

        def ok(f: int) -> bool:
            return _fits(_encoded_bound(a, f), n, k, h)

        if not ok(0):
            raise RingOverflowError(
                "(max_abs_value, max_summands, ring_bits, headroom_bits)",
                "values with max_summands * (ceil(max_abs_value) + 1) * 2**headroom_bits"
                " < 2**(ring_bits - 1)",
                (a, n, k, h),
                detail="no number of fractional bits avoids wrap-around",
            )
        lo, hi = 0, MAX_FRACTIONAL_BITS  # ok(lo) holds; the predicate is monotone in f
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid - 1
        return cls(lo, a, n, k)

    @property
    def modulus(self) -> int:
        """The ring size ``2**ring_bits``."""
        return 1 << self.ring_bits

    @property
    def resolution(self) -> float:
        """The grid step ``2**-fractional_bits`` (same unit as the values)."""
        return math.ldexp(1.0, -self.fractional_bits)

    @property
    def max_encoded_magnitude(self) -> int:
        """``ceil(max_abs_value * 2**fractional_bits)``: the largest ``|q|`` of one summand."""
        bound = _encoded_bound(self.max_abs_value, self.fractional_bits)
        if bound is None:  # pragma: no cover - refused in __post_init__
            raise AssertionError("unreachable")
        return bound

    def encode(self, values: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        """Encode real values as ring elements: ``round(v * 2**f) mod 2**k``.

        Args:
            values: Real numbers of any shape (``float`` or ``int`` dtype), each
                with ``|v| <= max_abs_value``.

        Returns:
            A fresh ``uint64`` array of the same shape, values in ``[0, 2**k)``.
            Error: ``|decode(encode(v)) - v| <= resolution / 2``.

        Raises:
            ParameterTypeError: ``values`` is not a real numeric array.
            NonFiniteInputError: Some value is NaN or infinite.
            ParameterError: Some ``|v| > max_abs_value`` (the values themselves
                are not shown in the message).
        """
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf":
            raise ParameterTypeError("values", "an array of real numbers", values)
        x = arr.astype(np.float64)
        finite = np.isfinite(x)
        if not finite.all():
            raise NonFiniteInputError("values", count=int(x.size - np.count_nonzero(finite)))
        too_big = np.count_nonzero(np.abs(x) > self.max_abs_value)
        if too_big:
            raise ParameterError(
                "values",
                f"values with |v| <= max_abs_value={self.max_abs_value!r}",
                None,
                secret=True,
                detail=f"{too_big} values out of range",
            )
        # ldexp by a power of two is exact; rint rounds half to even.
        q = np.rint(np.ldexp(x, self.fractional_bits)).astype(np.int64)
        return self._wrap(q)

    def decode(self, ring: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Decode ring elements (e.g. an aggregated total) to real values.

        Args:
            ring: Integers in ``[0, 2**k)`` of any shape.

        Returns:
            A ``float64`` array of the same shape: ``from_ring(ring) * 2**-f``.

        Raises:
            ParameterTypeError: ``ring`` is not an integer array.
            ParameterError: Some element lies outside ``[0, 2**k)``.
        """
        signed = self.from_ring(ring)
        return np.ldexp(signed.astype(np.float64), -self.fractional_bits)

    def to_ring(self, integers: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        """Map signed integers to ring elements (two's complement modulo ``2**k``).

        Args:
            integers: Integers in ``[-2**(k-1), 2**(k-1))`` of any shape and any
                integer dtype.

        Returns:
            A fresh ``uint64`` array of the same shape, values in ``[0, 2**k)``.

        Raises:
            ParameterTypeError: ``integers`` is not an integer array.
            ParameterError: Some value lies outside the signed range.
        """
        arr = np.asarray(integers)
        if arr.dtype.kind not in "iu":
            raise ParameterTypeError("integers", "an array of integers", integers)
        half = 1 << (self.ring_bits - 1)
        if arr.size and (int(arr.max()) >= half or int(arr.min()) < -half):
            raise ParameterError(
                "integers",
                f"integers in [-2**{self.ring_bits - 1}, 2**{self.ring_bits - 1})",
                None,
                secret=True,
            )
        return self._wrap(arr.astype(np.int64))

    def from_ring(self, ring: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Read ring elements as signed integers in ``[-2**(k-1), 2**(k-1))``.

        Args:
            ring: Integers in ``[0, 2**k)`` of any shape.

        Returns:
            A fresh ``int64`` array of the same shape.

        Raises:
            ParameterTypeError: ``ring`` is not an integer array.
            ParameterError: Some element lies outside ``[0, 2**k)``.
        """
        u = _as_ring("ring", ring, self.ring_bits)
        if self.ring_bits < 64:
            # Sign extension: (u XOR s) - s with s = 2**(k-1), in wrapping uint64.
            sign = np.uint64(1 << (self.ring_bits - 1))
            np.bitwise_xor(u, sign, out=u)
            np.subtract(u, sign, out=u)
        return u.view(np.int64)

    def _wrap(self, q: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
        out = np.array(q, dtype=np.int64, order="C", copy=True).view(np.uint64)
        if self.ring_bits < 64:
            np.bitwise_and(out, _ring_mask(self.ring_bits), out=out)
        return out


def _check_max_abs(value: object) -> float:
    return check_float("max_abs_value", value, low=0, open_low=True, domain="a finite number > 0")


def ring_add(a: npt.ArrayLike, b: npt.ArrayLike, *, ring_bits: int = 64) -> npt.NDArray[np.uint64]:
    """Elementwise ``(a + b) mod 2**ring_bits``.

    Args:
        a: Ring elements in ``[0, 2**ring_bits)``, any integer dtype.
        b: Ring elements of the same shape as ``a``.
        ring_bits: ``k`` in ``[2, 64]``.

    Returns:
        A fresh ``uint64`` array of the common shape.

    Raises:
        ParameterTypeError: An input is not an integer array.
        ParameterError: Shapes differ or an element is outside ``[0, 2**k)``.
    """
    return _ring_binary(np.add, a, b, ring_bits)


def ring_sub(a: npt.ArrayLike, b: npt.ArrayLike, *, ring_bits: int = 64) -> npt.NDArray[np.uint64]:
    """Elementwise ``(a - b) mod 2**ring_bits``; arguments, result, errors: :func:`ring_add`."""
    return _ring_binary(np.subtract, a, b, ring_bits)


def _ring_binary(
    op: np.ufunc, a: npt.ArrayLike, b: npt.ArrayLike, ring_bits: int
) -> npt.NDArray[np.uint64]:
    """Validate two ring operands, apply ``op`` wrapping in uint64, reduce to ``2**k``."""
    k = _check_ring_bits(ring_bits)
    x, y = _as_ring("a", a, k), _as_ring("b", b, k)
    _check_same_shape(x, y)
    op(x, y, out=x)
    if k < 64:
        np.bitwise_and(x, _ring_mask(k), out=x)
    return x


def ring_sum(
    vectors: Sequence[npt.ArrayLike] | npt.NDArray[Any], *, ring_bits: int = 64
) -> npt.NDArray[np.uint64]:
    """Sum ring vectors modulo ``2**ring_bits``.

    Args:
        vectors: A non-empty sequence of ring-element arrays of one shape, or an
            array whose first axis indexes the summands.
        ring_bits: ``k`` in ``[2, 64]``.

    Returns:
        A fresh ``uint64`` array of the summands' shape.

    Raises:
        ParameterTypeError: The input is not integer-valued.
        ParameterError: No summands, ragged shapes, or an element outside
            ``[0, 2**k)``.
    """
    k = _check_ring_bits(ring_bits)
    if isinstance(vectors, np.ndarray):
        stacked = vectors
    else:
        if isinstance(vectors, str | bytes) or not isinstance(vectors, Sequence):
            raise ParameterTypeError("vectors", "a sequence of integer arrays", vectors)
        parts = [np.asarray(v) for v in vectors]
        if parts and any(p.shape != parts[0].shape for p in parts):
            raise ParameterError(
                "vectors", "arrays of one shape", sorted({str(p.shape) for p in parts})
            )
        stacked = np.stack(parts) if parts else np.empty((0,), dtype=np.uint64)
    if stacked.ndim == 0 or stacked.shape[0] == 0:
        raise ParameterError("vectors", "at least one summand", 0)
    x = _as_ring("vectors", stacked, k)
    total = np.sum(x, axis=0, dtype=np.uint64)
    out = np.asarray(total, dtype=np.uint64).copy()
    if k < 64:
        np.bitwise_and(out, _ring_mask(k), out=out)
    return out


def _check_same_shape(x: npt.NDArray[np.uint64], y: npt.NDArray[np.uint64]) -> None:
    if x.shape != y.shape:
        raise ParameterError("b", f"an array of shape {x.shape} (the shape of a)", y.shape)
