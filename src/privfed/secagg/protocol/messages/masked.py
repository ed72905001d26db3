"""Stage MASKED_INPUT: a client's masked input vector (:class:`MaskedInput`)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from privfed._checks import check_int
from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.config import MAX_VECTOR_LENGTH
from privfed.secagg.protocol.messages._codec import (
    _U32,
    _backed_by_bytes,
    _Reader,
)
from privfed.secagg.protocol.messages.base import _HEAD, MessageType, _ClientMessage

__all__ = ["MaskedInput"]


# -- MaskedInput -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class MaskedInput(_ClientMessage):
    """Stage MASKED_INPUT, client to server: the masked input vector.

    ``values = x + PRG(b_u) + sum_v ±PRG(s_uv)  (mod 2**ring_bits)``; to anyone
    who lacks the self-mask seed ``b_u`` it is uniform on the ring and says
    nothing about the input ``x``.

    Body: ``sender u32 | ring_bits u8 | length u32 | padding | values``, each
    value little-endian in the smallest of 1, 2, 4 or 8 bytes that holds
    ``ring_bits`` bits; ``padding`` is the 0 to 7 zero bytes that put the
    values at a multiple of 8 bytes from the message start (so the server
    adds them in place, aligned; other padding bytes are refused).

    Attributes:
        sender: The client's id.
        ring_bits: Ring width in bits, an int in ``[8, 64]``.
        values: Read-only 1-D ``uint64`` array of ring elements
            (``< 2**ring_bits``), of length ``[1, 2**31 - 1]`` (left out of
            repr).  The message keeps a private, read-only copy of the array
            given (no copy is made only of an array whose memory is an
            immutable ``bytes`` object, as after parsing).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.MASKED_INPUT

    ring_bits: int
    values: npt.NDArray[np.uint64] = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        bits = check_int("ring_bits", self.ring_bits, minimum=8, maximum=64)
        values = self.values
        if not isinstance(values, np.ndarray) or values.dtype != np.uint64:
            raise ParameterTypeError("values", "a numpy uint64 array", values)
        if values.ndim != 1 or not 1 <= values.shape[0] <= MAX_VECTOR_LENGTH:
            raise ParameterError(
                "values", f"a 1-D array of length 1 to {MAX_VECTOR_LENGTH}", values.shape
            )
        if bits < 64 and int(values.max()) >> bits:
            raise ParameterError("values", f"ring elements below 2**{bits}", "<redacted>")
        if not (values.flags.c_contiguous and _backed_by_bytes(values)):
            # Copy whatever someone else could still write to (a writeable array,
            # a read-only view of a writeable one, an owner that can be made
            # writeable again), so the message never changes after the fact.
            values = np.array(values, dtype=np.uint64, order="C", copy=True)
            values.flags.writeable = False
            object.__setattr__(self, "values", values)

    @classmethod
    def _trusted(cls, **fields: Any) -> MaskedInput:
        # Skipping __post_init__ would also skip the private copy of ``values``.
        raise TypeError("MaskedInput is always built through its checked constructor")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MaskedInput):
            return NotImplemented
        return (
            self.session_id == other.session_id
            and self.round_index == other.round_index
            and self.sender == other.sender
            and self.ring_bits == other.ring_bits
            and np.array_equal(self.values, other.values)
        )

    __hash__ = None  # type: ignore[assignment]

    @staticmethod
    def _wire_dtype(ring_bits: int) -> np.dtype[Any]:
        return _WIRE_DTYPES[ring_bits]

    def _body(self) -> bytes:
        return b"".join(self._body_parts())

    def _body_parts(self) -> tuple[bytes | memoryview, ...]:
        # The payload goes into the message with a single copy.
        payload = np.ascontiguousarray(
            self.values.astype(self._wire_dtype(self.ring_bits), copy=False)
        )
        fixed = _U32.pack(self.sender) + bytes((self.ring_bits,)) + _U32.pack(self.values.shape[0])
        # Header (magic, version, type, session-id length, session id, round) and
        # the fixed fields before the values; zero bytes up to a multiple of 8.
        start = _HEAD.size + len(self.session_id) + 4 + len(fixed)
        return (fixed + bytes(-start % _VALUE_ALIGNMENT), payload.data.cast("B"))

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> MaskedInput:
        parsed = _well_formed(reader)
        if parsed is None:
            # Something is off: the field-by-field parse names it.
            sender = reader.client_id()
            bits = reader.u8()
            if not 8 <= bits <= 64:
                raise MessageFormatError(f"ring_bits {bits} outside [8, 64]")
            dtype = cls._wire_dtype(bits)
            n = reader.count(dtype.itemsize)
            if not 1 <= n <= MAX_VECTOR_LENGTH:
                raise ParameterError(
                    "values", f"a 1-D array of length 1 to {MAX_VECTOR_LENGTH}", (n,)
                )
            reader.zero_padding(_VALUE_ALIGNMENT)
            raw = reader.array(dtype, n)
        else:
            sender, bits, raw = parsed
        # A 64-bit little-endian payload is used in place (read-only, no copy);
        # a narrower one is widened into an array nobody else holds.
        values = raw if raw.dtype == np.uint64 else raw.astype(np.uint64)
        values.flags.writeable = False
        if bits < 64 and int(values.max()) >> bits:
            raise ParameterError("values", f"ring elements below 2**{bits}", "<redacted>")
        # The checks of __post_init__ hold: a non-zero u32 sender, ring_bits in
        # [8, 64], a read-only 1-D uint64 array of 1 to MAX_VECTOR_LENGTH ring
        # elements that no one can write to.
        message = object.__new__(cls)
        message.__dict__.update(header, sender=sender, ring_bits=bits, values=values)
        return message


def _well_formed(reader: _Reader) -> tuple[int, int, npt.NDArray[Any]] | None:
    """``(sender, ring_bits, values on the wire)`` of a well-formed body, else ``None``.

    One unpack of ``sender | ring_bits | length``, one count of the padding's
    zero bytes and one view of the values, the cursor moved past them;
    ``None``, with nothing consumed, where any check of the field-by-field
    parse would fail (which then raises the precise error).
    """
    data, pos, end = reader._data, reader._pos, reader._end
    if pos + _FIXED.size > end:
        return None
    sender, bits, n = _FIXED.unpack_from(data, pos)
    start = pos + _FIXED.size
    at = start + (-start % _VALUE_ALIGNMENT)
    if not (sender and 8 <= bits <= 64 and 1 <= n <= MAX_VECTOR_LENGTH):
        return None
    dtype = _WIRE_DTYPES[bits]
    stop = at + n * dtype.itemsize
    if stop > end or data.count(0, start, at) != at - start:
        return None
    reader._pos = stop
    return sender, bits, np.frombuffer(data, dtype=dtype, count=n, offset=at)


def _wire_dtype_of(ring_bits: int) -> np.dtype[Any]:
    width = (ring_bits + 7) // 8
    size = next(s for s in (1, 2, 4, 8) if width <= s)
    return np.dtype(f"<u{size}")


# sender u32 | ring_bits u8 | length u32: the fixed start of the body.
_FIXED: Final = struct.Struct(">IBI")
# The values start at a multiple of this many bytes from the message start.
_VALUE_ALIGNMENT: Final = 8

# MaskedInput's wire dtype per ring width (8 to 64 bits: the widths it accepts).
_WIRE_DTYPES: Final = {bits: _wire_dtype_of(bits) for bits in range(8, 65)}
