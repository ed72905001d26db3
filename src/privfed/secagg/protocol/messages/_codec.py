"""The wire codec beneath the messages: sizes, field checks, the reader, packed item lists.

See :mod:`privfed.secagg.protocol.messages` for the format.  Nothing here is a
message; every name but the format constants is internal to the messages package.
"""

from __future__ import annotations

import functools
import itertools
import operator
import struct
from collections.abc import Sequence
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from privfed._checks import check_int
from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.config import MAX_CLIENT_ID

__all__ = [
    "COMMITMENT_SIZE",
    "MAX_CIPHERTEXT_SIZE",
    "MAX_NOISE_LAYERS",
    "MAX_SHARE_SIZE",
    "PUBLIC_KEY_SIZE",
    "SIGNATURE_SIZE",
    "WIRE_MAGIC",
    "WIRE_VERSION",
]


#: First four bytes of every message.
WIRE_MAGIC: Final = b"PFSA"
#: Wire-format version written and accepted (3: SecAgg+ roster parts carry a
#: Merkle proof of the roster root instead of the whole member list; 4: the
#: values of a MaskedInput start at a multiple of 8 bytes from the message
#: start, after zero padding).
WIRE_VERSION: Final = 4
#: Size of an X25519 public key.
PUBLIC_KEY_SIZE: Final = 32
#: Size of a self-mask commitment (SHA-256).
COMMITMENT_SIZE: Final = 32
#: Largest accepted ciphertext in :class:`EncryptedShares`.
MAX_CIPHERTEXT_SIZE: Final = 4096
#: Largest accepted serialized share in :class:`UnmaskResponse`.
MAX_SHARE_SIZE: Final = 1024
#: Size of an Ed25519 signature (active mode).
SIGNATURE_SIZE: Final = 64
#: Largest number of noise layers a message may name.
MAX_NOISE_LAYERS: Final = 2**16 - 1

_U32 = struct.Struct(">I")
_MEMBER_DTYPE = np.dtype([("id", ">u4"), ("hash", "V32")])
_ID_U32 = struct.Struct(">II")
_ID_U16 = struct.Struct(">IH")
_MAX_U32 = 2**32 - 1


# -- validation helpers ------------------------------------------------------------


def _check_id(name: str, value: object) -> int:
    if type(value) is int and 1 <= value <= MAX_CLIENT_ID:
        return value  # the common case, without building the error's wording
    return check_int(
        name, value, minimum=1, maximum=MAX_CLIENT_ID, domain=f"a client id in [1, {MAX_CLIENT_ID}]"
    )


def _check_bytes(name: str, value: object, *, size: int | None = None, max_size: int = 0) -> None:
    if not isinstance(value, bytes):
        raise ParameterTypeError(name, "bytes", value)
    if size is not None and len(value) != size:
        raise ParameterError(name, f"bytes of length {size}", f"{len(value)} bytes")
    if size is None and not 1 <= len(value) <= max_size:
        raise ParameterError(name, f"bytes of length 1 to {max_size}", f"{len(value)} bytes")


def _check_increasing_ids(name: str, values: object) -> tuple[int, ...]:
    if not isinstance(values, tuple):
        raise ParameterTypeError(name, "a tuple of client ids", values)
    ids = tuple(_check_id(name, v) for v in values)
    if any(a >= b for a, b in itertools.pairwise(ids)):
        raise ParameterError(name, "strictly increasing client ids", "an unsorted tuple")
    return ids


class _Reader:
    """Strict cursor over a byte string; every read is bounds-checked."""

    __slots__ = ("_data", "_end", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        self._end = len(data)

    def take(self, n: int) -> bytes:
        pos = self._pos
        stop = pos + n
        if n < 0 or stop > self._end:
            raise MessageFormatError("message truncated")
        self._pos = stop
        return self._data[pos:stop]

    def u8(self) -> int:
        pos = self._pos
        if pos >= self._end:
            raise MessageFormatError("message truncated")
        self._pos = pos + 1
        return self._data[pos]

    def u16(self) -> int:
        return int.from_bytes(self.take(2), "big")

    def u32(self) -> int:
        pos = self._pos
        if pos + 4 > self._end:
            raise MessageFormatError("message truncated")
        self._pos = pos + 4
        return int(_U32.unpack_from(self._data, pos)[0])

    def client_id(self) -> int:
        value = self.u32()
        if value == 0:
            raise MessageFormatError("client id 0 is not allowed")
        return value

    def flags(self, allowed: int) -> int:
        """The flags byte that says which optional sections follow (only ``allowed`` bits).

        An absent section is announced by a clear bit, never by an empty one, so
        every message has exactly one encoding and no truncation parses.
        """
        flags = self.u8()
        if flags & ~allowed:
            raise MessageFormatError(f"invalid section flags {flags:#04x}")
        return flags

    def count(self, item_size: int) -> int:
        """A u32 count whose items (of at least ``item_size`` bytes) fit in what is left."""
        n = self.u32()
        if n * item_size > self._end - self._pos:
            raise MessageFormatError("count exceeds the message length")
        return n

    def records(self, layout: struct.Struct, n: int) -> list[tuple[Any, ...]]:
        """The next ``n`` fixed-size records of ``layout``, unpacked in one C call."""
        return list(layout.iter_unpack(self.take(layout.size * n))) if n else []

    def hashes(self, n: int, size: int) -> tuple[bytes, ...]:
        """The next ``n`` byte strings of ``size`` bytes each, split in one C call.

        A struct of ``n`` ``{size}s`` fields, built for this call (not the
        module's format cache: a proof's ``n`` varies, and a large one should
        not stay cached).
        """
        raw = self.take(n * size)
        out: tuple[bytes, ...] = struct.Struct(f"{size}s" * n).unpack(raw)
        return out

    def zero_padding(self, alignment: int) -> None:
        """Skip the zero bytes that bring the cursor to a multiple of ``alignment``.

        The cursor counts from the message start; padding bytes other than
        zero are refused, so every message keeps exactly one encoding.
        """
        size = -self._pos % alignment
        if size and self.take(size) != bytes(size):
            raise MessageFormatError("padding bytes are not zero")

    def increasing_ids(self) -> tuple[int, ...]:
        n = self.count(4)
        ids: tuple[int, ...] = struct.unpack(f">{n}I", self.take(4 * n))
        if 0 in ids:
            raise MessageFormatError("client id 0 is not allowed")
        if any(a >= b for a, b in itertools.pairwise(ids)):
            raise MessageFormatError("client ids are not strictly increasing")
        return ids

    def array(self, dtype: np.dtype[Any], n: int) -> npt.NDArray[Any]:
        """The next ``n`` items of ``dtype``: a read-only view of the (immutable) message bytes."""
        nbytes = n * dtype.itemsize
        if self._pos + nbytes > self._end:
            raise MessageFormatError("message truncated")
        view = np.frombuffer(self._data, dtype=dtype, count=n, offset=self._pos)
        self._pos += nbytes
        return view

    def id_blobs(self, n: int, *, wide: bool, max_size: int) -> list[tuple[int, bytes]]:
        """``n`` items of ``id u32 | length (u32 if wide else u16) | bytes``.

        Ids must be strictly increasing and non-zero, lengths in
        ``[1, max_size]``.  One loop with no per-field method calls: this
        parses the thousands of ciphertexts and shares of a round.
        """
        head = _ID_U32 if wide else _ID_U16
        step = head.size
        data, pos, end = self._data, self._pos, self._end
        out: list[tuple[int, bytes]] = []
        previous = 0
        for _ in range(n):
            if pos + step > end:
                raise MessageFormatError("message truncated")
            ident, size = head.unpack_from(data, pos)
            pos += step
            if ident <= previous:
                if ident == 0:
                    raise MessageFormatError("client id 0 is not allowed")
                raise MessageFormatError("client ids are not strictly increasing")
            if not 1 <= size <= max_size:
                raise MessageFormatError(f"item length {size} outside [1, {max_size}]")
            if pos + size > end:
                raise MessageFormatError("message truncated")
            out.append((ident, data[pos : pos + size]))
            pos += size
            previous = ident
        self._pos = pos
        return out

    def uniform_id_blobs(self, n: int, *, wide: bool, max_size: int) -> _PackedBlobs | None:
        """:meth:`id_blobs` for ``n >= 1`` items that all have one length, without a loop.

        Returns the ids and a view of the blobs (no copy), or ``None`` -- and
        consumes nothing -- if the items are not all of the first item's
        length or break any rule of :meth:`id_blobs`; the caller then runs
        :meth:`id_blobs`, which raises the precise error.  A server parses the
        thousands of equal-sized ciphertexts and shares of a round this way.
        """
        head = _ID_U32 if wide else _ID_U16
        data, pos = self._data, self._pos
        step = head.size
        if n < 1 or pos + step > self._end:
            return None
        size = int(head.unpack_from(data, pos)[1])
        step += size
        stop = pos + n * step
        if not 1 <= size <= max_size or stop > self._end:
            return None
        # Every length field equals the first: each of its bytes compared across
        # the items at once (a strided slice, C-level), not unpacked per item.
        for at in range(pos + 4, pos + head.size):
            if data[at:stop:step] != bytes((data[at],)) * n:
                return None
        # One C-level unpack of every id, skipping the lengths and the blobs.
        ids: tuple[int, ...] = _uniform_layout(wide, size, n).unpack_from(data, pos)
        if ids[0] == 0:
            return None
        if n > 1 and not all(map(operator.lt, ids, ids[1:])):
            return None
        self._pos = stop
        return _PackedBlobs(ids, size, data=data, offset=pos, wide=wide)

    @property
    def remaining(self) -> int:
        return self._end - self._pos

    def finish(self) -> None:
        if self._pos != self._end:
            raise MessageFormatError(f"{self._end - self._pos} trailing bytes")


@functools.lru_cache(maxsize=64)
def _blob_dtype(wide: bool, size: int) -> np.dtype[Any]:
    """``id u32 | length (u32 if wide else u16) | size bytes``, packed, big-endian."""
    return np.dtype(
        [("id", ">u4"), ("size", ">u4" if wide else ">u2"), ("blob", np.uint8, (size,))]
    )


def _uniform_layout(wide: bool, size: int, n: int) -> struct.Struct:
    """``n`` items ``id | length | size bytes``: the ids only (lengths and blobs skipped).

    A layout takes tens of bytes per item; only those of up to
    :data:`_LAYOUT_CACHE_ITEMS` items are kept, so that a peer sending large
    messages with ever different counts cannot make a parser hold on to
    many times their size.
    """
    if n <= _LAYOUT_CACHE_ITEMS:
        return _cached_layout(wide, size, n)
    return _build_layout(wide, size, n)


def _build_layout(wide: bool, size: int, n: int) -> struct.Struct:
    item = f"I{(4 if wide else 2) + size}x"
    return struct.Struct(">" + item * n)


# Largest item count whose layout is cached (about 70 bytes per item; at most
# 64 layouts, under 20 MiB in all -- a round has a few distinct counts).
_LAYOUT_CACHE_ITEMS: Final = 1 << 12
_cached_layout = functools.lru_cache(maxsize=64)(_build_layout)


class _PackedBlobs:
    """Parsed ``id | length | blob`` items of one length, kept in the message bytes.

    Internal to the protocol package: a parser hands these to the server so
    that it can check and route thousands of items with array operations
    instead of one Python object per item.  ``ids`` are the (validated,
    strictly increasing, non-zero) ids, ``width`` the length of every blob;
    :attr:`blobs` and :attr:`records` are read-only array views of the bytes,
    made on first use.
    """

    __slots__ = ("_arrays", "_data", "_offset", "_records", "_wide", "ids", "width")

    def __init__(
        self,
        ids: tuple[int, ...],
        width: int,
        *,
        data: bytes = b"",
        offset: int = 0,
        wide: bool = True,
        records: npt.NDArray[Any] | None = None,
    ) -> None:
        self.ids = ids
        self.width = width
        self._data = data
        self._offset = offset
        self._wide = wide
        self._arrays: tuple[npt.NDArray[Any], npt.NDArray[np.uint8]] | None = None
        # Records given (routed by the server): the blob view is made on first use.
        self._records = records

    def __len__(self) -> int:
        return len(self.ids)

    def _views(self) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]:
        if self._arrays is None:
            if self._records is not None:
                records = self._records
                self._arrays = (records, records.view(_blob_dtype(self._wide, self.width))["blob"])
            elif not self.ids:
                empty = np.empty(0, dtype=np.dtype((np.void, 8)))
                self._arrays = (empty, np.empty((0, self.width), dtype=np.uint8))
            else:
                dtype = _blob_dtype(self._wide, self.width)
                parsed = np.frombuffer(
                    self._data, dtype=dtype, count=len(self.ids), offset=self._offset
                )
                opaque = parsed.view(np.dtype((np.void, dtype.itemsize)))
                self._arrays = (opaque, parsed["blob"])
        return self._arrays

    @property
    def records(self) -> npt.NDArray[Any]:
        """The items as opaque records of ``id | length | blob`` (one void per item)."""
        return self._views()[0]

    @property
    def blobs(self) -> npt.NDArray[np.uint8]:
        """An ``(n, width)`` ``uint8`` view of the blobs."""
        if self._arrays is None and self._data and self.ids:
            # A plain strided byte view of the items' blobs, no structured
            # array (cheaper when the records are not needed: shares checked,
            # not routed), made in one constructor call.
            width = self.width
            step = (8 if self._wide else 6) + width
            return np.ndarray(
                (len(self.ids), width), np.uint8, self._data, self._offset + step - width, (step, 1)
            )
        return self._views()[1]

    def items(self) -> list[tuple[int, bytes]]:
        """``(id, blob bytes)`` per item, as :meth:`_Reader.id_blobs` returns them."""
        if self._arrays is not None or not self._data:
            flat = self.blobs.tobytes()
            width = self.width
            return [(ident, flat[i * width : (i + 1) * width]) for i, ident in enumerate(self.ids)]
        step = (8 if self._wide else 6) + self.width
        first = self._offset + step - self.width
        data, width = self._data, self.width
        return [
            (ident, data[first + i * step : first + i * step + width])
            for i, ident in enumerate(self.ids)
        ]


def _check_signature(name: str, value: object) -> None:
    _check_bytes(name, value, size=SIGNATURE_SIZE)


@functools.lru_cache(maxsize=256)
def _u32_run(count: int) -> struct.Struct:
    return struct.Struct(f">{count}I")


def _ids(ids: Sequence[int]) -> bytes:
    """``count u32 | count x id u32`` in one pack (ids already checked to fit in u32)."""
    n = len(ids)
    return _u32_run(n + 1).pack(n, *ids)


_LAST_IDS: list[Any] = [None, b""]
# Key, in a parsed message's __dict__, of the item lists it keeps packed.
_PACKED: Final = "_packed"
# Key of a server-built message's encoded body, kept from when it was assembled.
_WIRE_BODY: Final = "_wire_body"


def _ids_shared(ids: tuple[int, ...]) -> bytes:
    """:func:`_ids` of a tuple that many messages share (the global survivor set).

    The server sends one survivor tuple object to every client; its encoding is
    kept for as long as the same (immutable) object comes back.
    """
    if _LAST_IDS[0] is not ids:
        _LAST_IDS[:] = [ids, _ids(ids)]
    encoded: bytes = _LAST_IDS[1]
    return encoded


_T = TypeVar("_T")


def _unchecked(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of the frozen dataclass ``cls`` built without ``__init__`` checks.

    Only for fields already validated with the rules of ``cls.__post_init__``.
    """
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def _backed_by_bytes(array: npt.NDArray[Any]) -> bool:
    """Whether ``array``'s memory belongs to an immutable ``bytes`` object."""
    base: object = array
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return isinstance(base, bytes)
