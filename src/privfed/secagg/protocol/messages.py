"""Wire messages of the secure-aggregation protocol.

Every message is a frozen, validated value with :meth:`Message.to_bytes` and
``from_bytes``, so any transport (Flower messages, gRPC, files) can carry it.

Wire format (all integers big-endian unless stated otherwise)::

    magic     4 bytes   b"PFSA"
    version   1 byte    WIRE_VERSION (2; version 2 added the optional sections
                        of the active mode and the noise layers)
    type      1 byte    MessageType
    sid_len   1 byte    16..64
    session   sid_len bytes
    round     4 bytes   unsigned
    body      type-specific, see each class

Parsing is strict: an unknown magic, version or type, any length that does not
match, a count that would read past the end, a non-canonical ordering (id lists
must be strictly increasing) and trailing bytes all raise
:class:`~privfed.errors.MessageFormatError`.  Parsing checks structure only; the
session, round, sender and content are checked by the party that consumes the
message.

Parsing keeps the thousands of equal-sized items of a round (ciphertexts in
bundles and routed shares, revealed shares) packed in the message bytes, after
checking them exactly as the item-by-item parse would; the fields holding them
are built on first access and read the same as those of a message built by
hand.  The server checks and routes the packed form with array operations.

Nothing secret appears in a message's ``repr``: ciphertexts, shares and
masked values are left out of it.  Note that shares *are* carried in
:class:`UnmaskResponse` -- that is the point of the unmasking stage -- so the
transport from client to server must be authenticated and confidential (see
SECURITY.md).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import itertools
import operator
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final, TypeVar

import numpy as np
import numpy.typing as npt

from privfed._checks import check_int
from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.config import MAX_CLIENT_ID, MAX_VECTOR_LENGTH, SESSION_ID_LENGTHS

__all__ = [
    "COMMITMENT_SIZE",
    "MAX_CIPHERTEXT_SIZE",
    "MAX_SHARE_SIZE",
    "PUBLIC_KEY_SIZE",
    "SIGNATURE_SIZE",
    "WIRE_MAGIC",
    "WIRE_VERSION",
    "AdvertiseKeys",
    "ConsistencyRequest",
    "ConsistencySignature",
    "EncryptedShares",
    "EncryptedSharesBundle",
    "MaskedInput",
    "Message",
    "MessageType",
    "RevealedNoiseShare",
    "RevealedShare",
    "Roster",
    "RosterEntry",
    "RoutedShares",
    "SurvivorSignature",
    "UnmaskRequest",
    "UnmaskResponse",
    "decode_message",
]

#: First four bytes of every message.
WIRE_MAGIC: Final = b"PFSA"
#: Wire-format version written and accepted.
WIRE_VERSION: Final = 2
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


class MessageType(enum.IntEnum):
    """The type byte of each message."""

    ADVERTISE_KEYS = 1
    ROSTER = 2
    ENCRYPTED_SHARES = 3
    ROUTED_SHARES = 4
    MASKED_INPUT = 5
    UNMASK_REQUEST = 6
    UNMASK_RESPONSE = 7
    ENCRYPTED_SHARES_BUNDLE = 8
    CONSISTENCY_REQUEST = 9
    CONSISTENCY_SIGNATURE = 10


# -- validation helpers ------------------------------------------------------------


def _check_id(name: str, value: object) -> int:
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

    def count(self, item_size: int) -> int:
        """A u32 count whose items (of at least ``item_size`` bytes) fit in what is left."""
        n = self.u32()
        if n * item_size > self._end - self._pos:
            raise MessageFormatError("count exceeds the message length")
        return n

    def increasing_ids(self) -> tuple[int, ...]:
        n = self.count(4)
        ids = tuple(self.client_id() for _ in range(n))
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
        pos = self._pos
        if n < 1 or pos + head.size > self._end:
            return None
        size = int(head.unpack_from(self._data, pos)[1])
        stop = pos + n * (head.size + size)
        if not 1 <= size <= max_size or stop > self._end:
            return None
        # One C-level unpack of every (id, length) pair, skipping the blobs.
        fields = _uniform_layout(wide, size, n).unpack_from(self._data, pos)
        ids: tuple[int, ...] = fields[0::2]
        if fields[1::2].count(size) != n or ids[0] == 0:
            return None
        if n > 1 and not all(map(operator.lt, ids, ids[1:])):
            return None
        self._pos = stop
        return _PackedBlobs(ids, size, data=self._data, offset=pos, wide=wide)

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
    """``n`` items ``id | length | size bytes``: the ids and lengths, blobs skipped.

    A layout takes tens of bytes per item; only those of up to
    :data:`_LAYOUT_CACHE_ITEMS` items are kept, so that a peer sending large
    messages with ever different counts cannot make a parser hold on to
    many times their size.
    """
    if n <= _LAYOUT_CACHE_ITEMS:
        return _cached_layout(wide, size, n)
    return _build_layout(wide, size, n)


def _build_layout(wide: bool, size: int, n: int) -> struct.Struct:
    item = ("II" if wide else "IH") + f"{size}x"
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

    __slots__ = ("_arrays", "_data", "_offset", "_wide", "ids", "width")

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
        if records is not None:
            self._arrays = (records, records.view(_blob_dtype(wide, width))["blob"])

    def __len__(self) -> int:
        return len(self.ids)

    def _views(self) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]:
        if self._arrays is None:
            if not self.ids:
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


def _flags(reader: _Reader, allowed: int) -> int:
    """The flags byte that says which optional sections follow (only ``allowed`` bits).

    An absent section is announced by a clear bit, never by an empty one, so
    every message has exactly one encoding and no truncation parses.
    """
    flags = reader.u8()
    if flags & ~allowed:
        raise MessageFormatError(f"invalid section flags {flags:#04x}")
    return flags


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


# -- base class --------------------------------------------------------------------

_M = TypeVar("_M", bound="Message")


@dataclasses.dataclass(frozen=True)
class Message:
    """Base of all protocol messages: the session and round they belong to.

    Attributes:
        session_id: Public session id (16 to 64 bytes).
        round_index: Public round index, an int in ``[0, 2**32 - 1]``.
    """

    MESSAGE_TYPE: ClassVar[MessageType]

    session_id: bytes
    round_index: int

    def __post_init__(self) -> None:
        if not isinstance(self.session_id, bytes):
            raise ParameterTypeError("session_id", "bytes", self.session_id)
        low, high = SESSION_ID_LENGTHS
        if not low <= len(self.session_id) <= high:
            raise ParameterError(
                "session_id", f"bytes of length {low} to {high}", f"{len(self.session_id)} bytes"
            )
        check_int("round_index", self.round_index, minimum=0, maximum=_MAX_U32)

    @classmethod
    def _trusted(cls: type[_M], **fields: Any) -> _M:
        """Build a message from fields that were validated already, skipping the checks.

        For internal hot paths only (a parser that has checked every field with
        the same rules, or a server re-packaging messages it validated on
        receipt); every public construction goes through ``__post_init__``.
        """
        return _unchecked(cls, fields)

    def _body(self) -> bytes:  # pragma: no cover -- every subclass overrides
        raise NotImplementedError

    @classmethod
    def _parse_body(cls: type[_M], header: dict[str, Any], reader: _Reader) -> _M:
        raise NotImplementedError  # pragma: no cover -- every subclass overrides

    def to_bytes(self) -> bytes:
        """Serialize to the versioned wire format (see the module docstring)."""
        head = (
            WIRE_MAGIC
            + bytes((WIRE_VERSION, int(self.MESSAGE_TYPE), len(self.session_id)))
            + self.session_id
            + _U32.pack(self.round_index)
        )
        return b"".join((head, *self._body_parts()))

    def _body_parts(self) -> tuple[bytes | memoryview, ...]:
        """The body in pieces, joined into the message with one copy (large bodies)."""
        return (self._body(),)

    @classmethod
    def from_bytes(cls: type[_M], data: bytes) -> _M:
        """Parse one message of this class, strictly.

        Args:
            data: The serialized message (``bytes``, ``bytearray`` or
                ``memoryview``).

        Raises:
            ParameterTypeError: ``data`` is not bytes-like.
            MessageFormatError: The bytes are not a well-formed message of this
                class (bad magic, version, type, lengths, ordering, values or
                trailing bytes).
        """
        message = decode_message(data)
        if not isinstance(message, cls):
            raise MessageFormatError(
                f"expected a {cls.__name__} message, got {type(message).__name__}"
            )
        return message


def decode_message(data: bytes | bytearray | memoryview) -> Message:
    """Parse any protocol message, dispatching on its type byte.

    Raises:
        ParameterTypeError: ``data`` is not bytes-like.
        MessageFormatError: The bytes are not a well-formed message.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ParameterTypeError("data", "bytes", data)
    raw = bytes(data)
    if len(raw) >= _HEAD.size:
        # Fast path: the fixed header in one unpack; anything unusual goes
        # through the field-by-field parse below, which names the error.
        magic, version, type_byte, sid_len = _HEAD.unpack_from(raw)
        cls = _BY_TYPE_BYTE.get(type_byte)
        body = _HEAD.size + sid_len + 4
        low, high = SESSION_ID_LENGTHS
        if (
            cls is not None
            and magic == WIRE_MAGIC
            and version == WIRE_VERSION
            and low <= sid_len <= high
            and len(raw) >= body
        ):
            header = {
                "session_id": raw[_HEAD.size : body - 4],
                "round_index": _U32.unpack_from(raw, body - 4)[0],
            }
            reader = _Reader(raw)
            reader._pos = body
            return _parse_message(cls, header, reader)
    reader = _Reader(raw)
    if reader.take(4) != WIRE_MAGIC:
        raise MessageFormatError("not a privfed secure-aggregation message (bad magic)")
    version = reader.u8()
    if version != WIRE_VERSION:
        raise MessageFormatError(f"unsupported wire version {version}")
    type_byte = reader.u8()
    try:
        message_type = MessageType(type_byte)
    except ValueError:
        raise MessageFormatError(f"unknown message type {type_byte}") from None
    sid_len = reader.u8()
    low, high = SESSION_ID_LENGTHS
    if not low <= sid_len <= high:
        raise MessageFormatError(f"session id length {sid_len} outside [{low}, {high}]")
    header = {"session_id": reader.take(sid_len), "round_index": reader.u32()}
    return _parse_message(_CLASSES[message_type], header, reader)


def _parse_message(cls: type[Message], header: dict[str, Any], reader: _Reader) -> Message:
    try:
        message = cls._parse_body(header, reader)
    except (ParameterError, ParameterTypeError) as exc:
        raise MessageFormatError(f"invalid {cls.__name__} content: {exc}") from None
    reader.finish()
    return message


# magic, version, type, session-id length: the fixed start of every message.
_HEAD: Final = struct.Struct(">4sBBB")


# -- AdvertiseKeys -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AdvertiseKeys(Message):
    """Stage ADVERTISE_KEYS, client to server: the client's public keys.

    Body: ``sender u32 | encryption_public_key 32 | mask_public_key 32 |
    self_mask_commitment 32 | flags u8``, then the sections the flags announce
    (bit 0: ``signature 64``; bit 1:
    ``count u16 | count x commitment 32``), in that order.

    Attributes:
        sender: The client's id.
        encryption_public_key: X25519 public key for share encryption.
        mask_public_key: X25519 public key for pairwise masks; the server
            checks a reconstructed mask private key against it.
        self_mask_commitment: SHA-256 commitment to the client's self-mask seed;
            the server checks a reconstructed seed against it.  It is a hash of
            a 32-byte uniform secret and reveals nothing about it.
        signature: Active mode: the client's Ed25519 signature, by its
            registered identity key, over (bound session, config digest,
            client id, both public keys); ``None`` in semi-honest mode.
        noise_commitments: One SHA-256 commitment per noise-layer seed (layer
            1 first; empty without noise layers), checked by the server
            against a rebuilt seed.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.ADVERTISE_KEYS

    sender: int
    encryption_public_key: bytes
    mask_public_key: bytes
    self_mask_commitment: bytes
    signature: bytes | None = dataclasses.field(default=None, repr=False)
    noise_commitments: tuple[bytes, ...] = dataclasses.field(default=(), repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("sender", self.sender)
        _check_bytes("encryption_public_key", self.encryption_public_key, size=PUBLIC_KEY_SIZE)
        _check_bytes("mask_public_key", self.mask_public_key, size=PUBLIC_KEY_SIZE)
        _check_bytes("self_mask_commitment", self.self_mask_commitment, size=COMMITMENT_SIZE)
        if self.signature is not None:
            _check_signature("signature", self.signature)
        if not isinstance(self.noise_commitments, tuple):
            raise ParameterTypeError(
                "noise_commitments", "a tuple of bytes", self.noise_commitments
            )
        if len(self.noise_commitments) > MAX_NOISE_LAYERS:
            raise ParameterError(
                "noise_commitments", f"at most {MAX_NOISE_LAYERS}", len(self.noise_commitments)
            )
        for item in self.noise_commitments:
            _check_bytes("noise_commitments", item, size=COMMITMENT_SIZE)

    def _body(self) -> bytes:
        body = (
            _U32.pack(self.sender)
            + self.encryption_public_key
            + self.mask_public_key
            + self.self_mask_commitment
        )
        flags = (self.signature is not None) | (bool(self.noise_commitments) << 1)
        body += bytes((flags,))
        if self.signature is not None:
            body += self.signature
        if self.noise_commitments:
            body += len(self.noise_commitments).to_bytes(2, "big")
            body += b"".join(self.noise_commitments)
        return body

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> AdvertiseKeys:
        sender = reader.client_id()
        encryption = reader.take(PUBLIC_KEY_SIZE)
        mask = reader.take(PUBLIC_KEY_SIZE)
        commitment = reader.take(COMMITMENT_SIZE)
        flags = _flags(reader, 0b11)
        signature = reader.take(SIGNATURE_SIZE) if flags & 1 else None
        noise: tuple[bytes, ...] = ()
        if flags & 2:
            count = reader.u16()
            if not count:
                raise MessageFormatError("an empty noise-commitment list must be left out")
            noise = tuple(reader.take(COMMITMENT_SIZE) for _ in range(count))
        # Every field was checked above exactly as __post_init__ would (non-zero
        # u32 sender, exact sizes, at most MAX_NOISE_LAYERS commitments).
        return cls._trusted(
            **header,
            sender=sender,
            encryption_public_key=encryption,
            mask_public_key=mask,
            self_mask_commitment=commitment,
            signature=signature,
            noise_commitments=noise,
        )


# -- Roster ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RosterEntry:
    """One client's advertised public keys, as relayed by the server.

    Attributes:
        client_id: The client's id.
        encryption_public_key: X25519 public key for share encryption.
        mask_public_key: X25519 public key for pairwise masks.
        signature: Active mode: the client's signature over its advertised
            keys (see :class:`AdvertiseKeys`); ``None`` in semi-honest mode.
    """

    client_id: int
    encryption_public_key: bytes
    mask_public_key: bytes
    signature: bytes | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_id("client_id", self.client_id)
        _check_bytes("encryption_public_key", self.encryption_public_key, size=PUBLIC_KEY_SIZE)
        _check_bytes("mask_public_key", self.mask_public_key, size=PUBLIC_KEY_SIZE)
        if self.signature is not None:
            _check_signature("signature", self.signature)

    def _wire(self) -> bytes:
        """``client_id u32 | encryption key | mask key``, kept once made (a server
        puts each entry in up to ``k + 1`` roster parts)."""
        cached: bytes | None = self.__dict__.get("_wire_keys")
        if cached is None:
            cached = _U32.pack(self.client_id) + self.encryption_public_key + self.mask_public_key
            self.__dict__["_wire_keys"] = cached
        return cached


@dataclasses.dataclass(frozen=True)
class Roster(Message):
    """End of stage ADVERTISE_KEYS, server to every client: who advertised keys.

    Body: ``count u32 | count x (client_id u32 | encryption_public_key 32 |
    mask_public_key 32)`` with strictly increasing ids, ``flags u8``, then the
    sections the flags announce (bit 0: ``count x
    signature 64``, one per entry in order; bit 1: ``m u32 | m x (client_id
    u32 | advertisement hash 32)``, ids strictly increasing), in that order.

    Attributes:
        entries: One :class:`RosterEntry` per client that advertised keys,
            strictly increasing by id (in SecAgg+, a client's part holds its
            neighbourhood only).  Either every entry is signed or none is.
        members: SecAgg+ parts only: ``(client_id, advertisement hash)`` of
            *every* roster member, from which the recipient computes the graph
            seed (:func:`~privfed.secagg.protocol.graph.graph_seed`); empty
            when ``entries`` is the whole roster.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.ROSTER

    entries: tuple[RosterEntry, ...]
    members: tuple[tuple[int, bytes], ...] = dataclasses.field(default=(), repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.entries, tuple) or not all(
            isinstance(e, RosterEntry) for e in self.entries
        ):
            raise ParameterTypeError("entries", "a tuple of RosterEntry", self.entries)
        _check_increasing_ids("entries", tuple(e.client_id for e in self.entries))
        if len({e.signature is None for e in self.entries}) > 1:
            raise ParameterError("entries", "all signed or none signed", "a mix")
        if not isinstance(self.members, tuple) or not all(
            isinstance(m, tuple) and len(m) == 2 for m in self.members
        ):
            raise ParameterTypeError("members", "a tuple of (id, hash) pairs", self.members)
        _check_increasing_ids("members", tuple(m[0] for m in self.members))
        for _, digest in self.members:
            _check_bytes("members", digest, size=COMMITMENT_SIZE)

    @property
    def client_ids(self) -> tuple[int, ...]:
        """Ids of the listed clients, increasing."""
        return tuple(e.client_id for e in self.entries)

    def _body_parts(self) -> tuple[bytes | memoryview, ...]:
        parts: list[bytes | memoryview] = [_U32.pack(len(self.entries))]
        parts += [e._wire() for e in self.entries]
        signed = bool(self.entries) and self.entries[0].signature is not None
        flags = signed | (bool(self.members) << 1)
        parts.append(bytes((flags,)))
        if signed:
            parts += [e.signature or b"" for e in self.entries]
        if self.members:
            parts.append(self.members_section())
        return tuple(parts)

    def _body(self) -> bytes:
        return b"".join(self._body_parts())

    def members_section(self) -> bytes:
        """The member list as on the wire: ``m u32 | m x (client_id u32 | hash 32)``.

        Computed once per object (a server sends one member list in every
        client's part) and hashed as is into the graph seed.
        """
        cached = self.__dict__.get("_members_wire")
        if cached is None:
            pack = _U32.pack
            cached = pack(len(self.members)) + b"".join(
                pack(cid) + digest for cid, digest in self.members
            )
            self.__dict__["_members_wire"] = cached
        return cached

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> Roster:
        size = 4 + 2 * PUBLIC_KEY_SIZE
        n = reader.count(size)
        raw = reader.take(n * size)  # the count check guarantees this is whole
        entries = []
        previous = 0
        for start in range(0, n * size, size):
            (client_id,) = _U32.unpack_from(raw, start)
            if client_id <= previous:
                if client_id == 0:
                    raise MessageFormatError("client id 0 is not allowed")
                raise MessageFormatError("client ids are not strictly increasing")
            previous = client_id
            keys_at = start + 4
            # Fixed-size fields, non-zero increasing ids: RosterEntry's and
            # Roster's checks hold by construction.
            entries.append(
                _unchecked(
                    RosterEntry,
                    {
                        "client_id": client_id,
                        "encryption_public_key": raw[keys_at : keys_at + PUBLIC_KEY_SIZE],
                        "mask_public_key": raw[keys_at + PUBLIC_KEY_SIZE : keys_at + size - 4],
                    },
                )
            )
        flags = _flags(reader, 0b11)
        if flags & 1:
            if not entries:
                raise MessageFormatError("signatures of an empty roster")
            for entry in entries:
                entry.__dict__["signature"] = reader.take(SIGNATURE_SIZE)
        members: tuple[tuple[int, bytes], ...] = ()
        section = b""
        if flags & 2:
            item = 4 + COMMITMENT_SIZE
            count = reader.count(item)
            if not count:
                raise MessageFormatError("an empty member list must be left out")
            raw = reader.take(count * item)
            table = np.frombuffer(raw, dtype=_MEMBER_DTYPE)
            ids = table["id"].astype(np.int64)
            if ids[0] == 0:
                raise MessageFormatError("client id 0 is not allowed")
            if count > 1 and not bool(np.all(ids[1:] > ids[:-1])):
                raise MessageFormatError("client ids are not strictly increasing")
            # Fixed-size fields: ``tolist`` of the void column yields the 32-byte hashes.
            members = tuple(zip(ids.tolist(), table["hash"].tolist(), strict=True))
            section = _U32.pack(count) + raw
        roster = cls._trusted(**header, entries=tuple(entries), members=members)
        if section:
            roster.__dict__["_members_wire"] = section
        return roster


# -- EncryptedShares / RoutedShares -----------------------------------------------


@dataclasses.dataclass(frozen=True)
class EncryptedShares(Message):
    """Stage SHARE_KEYS, from ``sender`` to ``recipient`` via the server.

    The ciphertext is an AEAD encryption, under a key only ``sender`` and
    ``recipient`` can derive, of the recipient's shares of the sender's mask
    private key and self-mask seed; the session, round, sender and recipient are
    bound as associated data, so the server can neither read, alter nor
    re-route it.

    Body: ``sender u32 | recipient u32 | length u32 | ciphertext``.

    Attributes:
        sender: The client that made the shares.
        recipient: The client that holds them.
        ciphertext: 1 to :data:`MAX_CIPHERTEXT_SIZE` bytes (left out of repr).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.ENCRYPTED_SHARES

    sender: int
    recipient: int
    ciphertext: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("sender", self.sender)
        _check_id("recipient", self.recipient)
        if self.sender == self.recipient:
            raise ParameterError("recipient", "a client other than the sender", self.recipient)
        _check_bytes("ciphertext", self.ciphertext, max_size=MAX_CIPHERTEXT_SIZE)

    def _body(self) -> bytes:
        return (
            _U32.pack(self.sender)
            + _U32.pack(self.recipient)
            + _U32.pack(len(self.ciphertext))
            + self.ciphertext
        )

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> EncryptedShares:
        sender = reader.client_id()
        recipient = reader.client_id()
        size = reader.u32()
        return cls(**header, sender=sender, recipient=recipient, ciphertext=reader.take(size))


class _ShareGroup(Message):
    """Base of the messages carrying ciphertexts with one end in common.

    ``_FIXED`` names that end (``"recipient"`` or ``"sender"``), a field of the
    message as of each of its :class:`EncryptedShares`; the body is
    :func:`_encode_group`'s.  ``_EMPTY`` is the parse error of a group without
    ciphertexts, ``None`` where a group may be empty.  (Not a dataclass: the
    subclasses declare the fields.)
    """

    _FIXED: ClassVar[str]
    _EMPTY: ClassVar[str | None] = None
    shares: tuple[EncryptedShares, ...]

    def _body(self) -> bytes:
        wire: bytes | None = self.__dict__.get(_WIRE_BODY)
        if wire is not None:
            return wire
        return _encode_group(getattr(self, self._FIXED), self.shares, fixed=self._FIXED)

    @classmethod
    def _parse_body(cls: type[_G], header: dict[str, Any], reader: _Reader) -> _G:
        fixed_id = reader.client_id()
        n = reader.count(9)
        packed = reader.uniform_id_blobs(n, wide=True, max_size=MAX_CIPHERTEXT_SIZE)
        if packed is not None:
            # Equal-sized ciphertexts (the usual case): kept packed, checked
            # as the constructors would, turned into objects only when read.
            if fixed_id in packed.ids:
                raise MessageFormatError("a ciphertext between a client and itself")
            return cls._of_packed(header, fixed_id, packed)
        shares = _parse_group(header, reader, fixed_id, n, fixed=cls._FIXED)
        if not shares and cls._EMPTY is not None:
            raise MessageFormatError(cls._EMPTY)
        return cls._trusted(**header, **{cls._FIXED: fixed_id}, shares=shares)

    @classmethod
    def _of_packed(
        cls: type[_G],
        header: dict[str, Any],
        fixed_id: int,
        packed: _PackedBlobs,
        body: bytes | None = None,
    ) -> _G:
        """A group whose ciphertexts stay packed (ids: the other end), optionally its body.

        Only for validated content: ids strictly increasing, non-zero and not
        ``fixed_id``, blobs of 1 to ``MAX_CIPHERTEXT_SIZE`` bytes, at least one
        for a bundle; ``body`` exactly :func:`_encode_group`'s encoding.
        """
        group = cls._trusted(**header, **{cls._FIXED: fixed_id})
        group.__dict__[_PACKED] = packed
        if body is not None:
            group.__dict__[_WIRE_BODY] = body
        return group

    def _packed_shares(self) -> _PackedBlobs | None:
        """The ciphertexts as parsed or routed, if they were left packed."""
        packed: _PackedBlobs | None = self.__dict__.get(_PACKED)
        return packed

    def __getattr__(self, name: str) -> tuple[EncryptedShares, ...]:
        # Only called for attributes not found normally: ciphertexts left packed.
        packed: _PackedBlobs | None = self.__dict__.get(_PACKED)
        if packed is None or name != "shares":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        fixed_id = getattr(self, self._FIXED)
        to_fixed = self._FIXED == "recipient"
        value = tuple(
            EncryptedShares._trusted(
                session_id=self.session_id,
                round_index=self.round_index,
                sender=other if to_fixed else fixed_id,
                recipient=fixed_id if to_fixed else other,
                ciphertext=ciphertext,
            )
            for other, ciphertext in packed.items()
        )
        object.__setattr__(self, "shares", value)
        return value


_G = TypeVar("_G", bound=_ShareGroup)


@dataclasses.dataclass(frozen=True)
class RoutedShares(_ShareGroup):
    """End of stage SHARE_KEYS, server to one client: the ciphertexts addressed to it.

    The set of senders is the recipient's view of who shared keys (``U2`` in
    Bonawitz et al.): the recipient masks pairwise with exactly these clients.

    Body: ``recipient u32 | count u32 | count x (sender u32 | length u32 |
    ciphertext)`` with strictly increasing senders.

    Attributes:
        recipient: The client the ciphertexts are addressed to.
        shares: :class:`EncryptedShares` addressed to ``recipient``, of this
            session and round, strictly increasing by sender.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.ROUTED_SHARES
    _FIXED: ClassVar[str] = "recipient"

    recipient: int
    shares: tuple[EncryptedShares, ...] = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("recipient", self.recipient)
        _check_group(self, self.shares, fixed="recipient")

    @property
    def senders(self) -> tuple[int, ...]:
        """Ids of the clients whose ciphertexts are included, increasing."""
        return tuple(s.sender for s in self.shares)


@dataclasses.dataclass(frozen=True)
class EncryptedSharesBundle(_ShareGroup):
    """Stage SHARE_KEYS, client to server: all of one sender's ciphertexts in one message.

    The same content as the :class:`EncryptedShares` messages it bundles, for
    transports that prefer one message per client and stage (one request to
    the server instead of one per neighbour, and a cheaper parse there).  The
    server takes a bundle whole or not at all: if any of its ciphertexts would
    be refused on its own (a recipient that is not a roster neighbour, one
    already received), the whole bundle is refused and nothing of it is kept.
    A sender may mix bundles and single ciphertexts.

    Body: ``sender u32 | count u32 | count x (recipient u32 | length u32 |
    ciphertext)`` with strictly increasing recipients.

    Attributes:
        sender: The client that made the shares.
        shares: Its :class:`EncryptedShares`, of this session, round and
            sender, strictly increasing by recipient (at least one).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.ENCRYPTED_SHARES_BUNDLE
    _FIXED: ClassVar[str] = "sender"
    _EMPTY: ClassVar[str | None] = "an empty bundle"

    sender: int
    shares: tuple[EncryptedShares, ...] = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("sender", self.sender)
        if isinstance(self.shares, tuple) and not self.shares:
            raise ParameterError("shares", "at least one ciphertext", 0)
        _check_group(self, self.shares, fixed="sender")

    @classmethod
    def from_shares(
        cls, shares: Mapping[int, EncryptedShares] | Iterable[EncryptedShares]
    ) -> EncryptedSharesBundle:
        """Bundle a sender's ciphertexts, e.g. the result of ``SecAggClient.share_keys``.

        Args:
            shares: :class:`EncryptedShares` of one session, round and sender
                (a mapping's values are used), in any order.

        Raises:
            ParameterTypeError: An item is not an :class:`EncryptedShares`.
            ParameterError: No ciphertext, ciphertexts of different sessions,
                rounds or senders, or two for one recipient.
        """
        items = list(shares.values()) if isinstance(shares, Mapping) else list(shares)
        if not items:
            raise ParameterError("shares", "at least one ciphertext", 0)
        for item in items:
            if not isinstance(item, EncryptedShares):
                raise ParameterTypeError("shares", "EncryptedShares", item)
        items.sort(key=lambda s: s.recipient)
        first = items[0]
        return cls(
            session_id=first.session_id,
            round_index=first.round_index,
            sender=first.sender,
            shares=tuple(items),
        )

    @property
    def recipients(self) -> tuple[int, ...]:
        """Ids of the clients the ciphertexts are addressed to, increasing."""
        return tuple(s.recipient for s in self.shares)


def _check_group(message: Message, shares: object, *, fixed: str) -> None:
    """Checks of a group of ciphertexts that share one end (``fixed``) and ``message``'s context."""
    if not isinstance(shares, tuple) or not all(isinstance(s, EncryptedShares) for s in shares):
        raise ParameterTypeError("shares", "a tuple of EncryptedShares", shares)
    context = (message.session_id, message.round_index, getattr(message, fixed))
    for s in shares:
        if (s.session_id, s.round_index, getattr(s, fixed)) != context:
            raise ParameterError(
                "shares", f"ciphertexts of this session and round with this {fixed}", s
            )
    other = "sender" if fixed == "recipient" else "recipient"
    _check_increasing_ids("shares", tuple(getattr(s, other) for s in shares))


def _encode_group(fixed_id: int, shares: tuple[EncryptedShares, ...], *, fixed: str) -> bytes:
    """``fixed_id u32 | count u32 | count x (other id u32 | length u32 | ciphertext)``."""
    pack = _ID_U32.pack
    if fixed == "recipient":
        items = [pack(s.sender, len(s.ciphertext)) + s.ciphertext for s in shares]
    else:
        items = [pack(s.recipient, len(s.ciphertext)) + s.ciphertext for s in shares]
    return _ID_U32.pack(fixed_id, len(shares)) + b"".join(items)


def _parse_group(
    header: dict[str, Any], reader: _Reader, fixed_id: int, n: int, *, fixed: str
) -> tuple[EncryptedShares, ...]:
    """Parse ``n`` items of :func:`_encode_group`, every field checked as the constructors would."""
    items = reader.id_blobs(n, wide=True, max_size=MAX_CIPHERTEXT_SIZE)
    session_id, round_index = header["session_id"], header["round_index"]
    to_fixed = fixed == "recipient"
    shares = []
    for other_id, ciphertext in items:
        if other_id == fixed_id:
            raise MessageFormatError("a ciphertext between a client and itself")
        # Ids non-zero u32, strictly increasing; ciphertext of 1 to
        # MAX_CIPHERTEXT_SIZE bytes; the header checked by decode_message: the
        # checks of EncryptedShares and of the group hold by construction.
        shares.append(
            EncryptedShares._trusted(
                session_id=session_id,
                round_index=round_index,
                sender=other_id if to_fixed else fixed_id,
                recipient=fixed_id if to_fixed else other_id,
                ciphertext=ciphertext,
            )
        )
    return tuple(shares)


# -- MaskedInput -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class MaskedInput(Message):
    """Stage MASKED_INPUT, client to server: the masked input vector.

    ``values = x + PRG(b_u) + sum_v ±PRG(s_uv)  (mod 2**ring_bits)``; to anyone
    who lacks the self-mask seed ``b_u`` it is uniform on the ring and says
    nothing about the input ``x``.

    Body: ``sender u32 | ring_bits u8 | length u32 | values``, each value
    little-endian in the smallest of 1, 2, 4 or 8 bytes that holds
    ``ring_bits`` bits.

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

    sender: int
    ring_bits: int
    values: npt.NDArray[np.uint64] = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("sender", self.sender)
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
        return (fixed, payload.data.cast("B"))

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> MaskedInput:
        sender = reader.client_id()
        bits = reader.u8()
        if not 8 <= bits <= 64:
            raise MessageFormatError(f"ring_bits {bits} outside [8, 64]")
        dtype = cls._wire_dtype(bits)
        n = reader.count(dtype.itemsize)
        if not 1 <= n <= MAX_VECTOR_LENGTH:
            raise ParameterError("values", f"a 1-D array of length 1 to {MAX_VECTOR_LENGTH}", (n,))
        raw = reader.array(dtype, n)
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


def _wire_dtype_of(ring_bits: int) -> np.dtype[Any]:
    width = (ring_bits + 7) // 8
    size = next(s for s in (1, 2, 4, 8) if width <= s)
    return np.dtype(f"<u{size}")


# MaskedInput's wire dtype per ring width (8 to 64 bits: the widths it accepts).
_WIRE_DTYPES: Final = {bits: _wire_dtype_of(bits) for bits in range(8, 65)}


# -- Unmasking ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class UnmaskRequest(Message):
    """Stage UNMASKING, server to one client: who survived and who dropped.

    The server restricts both lists to the recipient's neighbourhood.  The
    recipient answers only if ``survivors`` and ``dropped`` are disjoint,
    together equal exactly the clients it masked with plus itself, include
    itself among the survivors, and hold at least ``threshold`` survivors; and
    only ever for one such view.  Otherwise it aborts.

    Body: ``recipient u32 | n u32 | n x survivor u32 | m u32 | m x dropped
    u32``, both lists strictly increasing, ``flags u8``, then the sections the
    flags announce (bit 0: ``k u32 | k x (signer u32 |
    signature 64)``, signers strictly increasing; bit 1: ``j u16 | j x layer
    u16``, strictly increasing), in that order.

    Attributes:
        recipient: The client asked.
        survivors: Clients that delivered masked input (strictly increasing).
        dropped: Clients that shared keys but did not deliver masked input
            (strictly increasing).
        signatures: Active mode: the ConsistencyCheck signatures the server
            forwards, each over the survivor set the recipient signed (at
            least ``threshold`` for the recipient to answer).
        noise_layers: The noise layers ``j`` whose seed shares the server asks
            for (the recipient checks them against the reveal rule).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.UNMASK_REQUEST

    recipient: int
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    signatures: tuple[SurvivorSignature, ...] = dataclasses.field(default=(), repr=False)
    noise_layers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("recipient", self.recipient)
        _check_increasing_ids("survivors", self.survivors)
        _check_increasing_ids("dropped", self.dropped)
        if not isinstance(self.signatures, tuple) or not all(
            isinstance(v, SurvivorSignature) for v in self.signatures
        ):
            raise ParameterTypeError("signatures", "a tuple of SurvivorSignature", self.signatures)
        _check_increasing_ids("signatures", tuple(v.signer for v in self.signatures))
        _check_layers("noise_layers", self.noise_layers)

    def _body(self) -> bytes:
        body = _U32.pack(self.recipient) + _ids(self.survivors) + _ids(self.dropped)
        flags = bool(self.signatures) | (bool(self.noise_layers) << 1)
        parts = [body, bytes((flags,))]
        if self.signatures:
            parts.append(_U32.pack(len(self.signatures)))
            parts += [_U32.pack(v.signer) + v.signature for v in self.signatures]
        if self.noise_layers:
            parts.append(len(self.noise_layers).to_bytes(2, "big"))
            parts += [j.to_bytes(2, "big") for j in self.noise_layers]
        return b"".join(parts)

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> UnmaskRequest:
        recipient = reader.client_id()
        survivors = reader.increasing_ids()
        dropped = reader.increasing_ids()
        flags = _flags(reader, 0b11)
        signatures: list[SurvivorSignature] = []
        if flags & 1:
            count = reader.count(4 + SIGNATURE_SIZE)
            if not count:
                raise MessageFormatError("an empty signature list must be left out")
            for _ in range(count):
                signer = reader.client_id()
                signatures.append(SurvivorSignature(signer, reader.take(SIGNATURE_SIZE)))
        layers: tuple[int, ...] = ()
        if flags & 2:
            count = reader.u16()
            if not count:
                raise MessageFormatError("an empty layer list must be left out")
            layers = tuple(reader.u16() for _ in range(count))
        return cls(
            **header,
            recipient=recipient,
            survivors=survivors,
            dropped=dropped,
            signatures=tuple(signatures),
            noise_layers=layers,
        )


@dataclasses.dataclass(frozen=True)
class SurvivorSignature:
    """One client's ConsistencyCheck signature, as the server forwards it.

    Attributes:
        signer: The signing client.
        signature: Its Ed25519 signature over (bound session, config digest,
            survivor set).
    """

    signer: int
    signature: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        _check_id("signer", self.signer)
        _check_signature("signature", self.signature)


def _check_layers(name: str, values: object) -> tuple[int, ...]:
    if not isinstance(values, tuple):
        raise ParameterTypeError(name, "a tuple of layer numbers", values)
    layers = tuple(
        check_int(name, v, minimum=1, maximum=MAX_NOISE_LAYERS, domain="a layer in [1, 65535]")
        for v in values
    )
    if any(a >= b for a, b in itertools.pairwise(layers)):
        raise ParameterError(name, "strictly increasing layers", "an unsorted tuple")
    return layers


@dataclasses.dataclass(frozen=True)
class RevealedShare:
    """One Shamir share revealed to the server at unmasking.

    Attributes:
        owner: The client whose secret the share belongs to.
        share: The serialized :class:`~privfed.secagg.primitives.shamir.Share`
            (secret until the round ends; left out of repr).
    """

    owner: int
    share: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        _check_id("owner", self.owner)
        _check_bytes("share", self.share, max_size=MAX_SHARE_SIZE)


def _check_revealed(name: str, values: object) -> None:
    if not isinstance(values, tuple) or not all(isinstance(v, RevealedShare) for v in values):
        raise ParameterTypeError(name, "a tuple of RevealedShare", values)
    _check_increasing_ids(name, tuple(v.owner for v in values))


def _encode_revealed(values: tuple[RevealedShare, ...]) -> bytes:
    parts = [_U32.pack(len(values))]
    for v in values:
        parts += [_U32.pack(v.owner), len(v.share).to_bytes(2, "big"), v.share]
    return b"".join(parts)


def _revealed_of(items: Iterable[tuple[int, bytes]]) -> tuple[RevealedShare, ...]:
    # Owners non-zero and strictly increasing, shares of 1 to MAX_SHARE_SIZE
    # bytes: exactly the checks of RevealedShare and _check_revealed.
    return tuple(_unchecked(RevealedShare, {"owner": o, "share": b}) for o, b in items)


def _parse_revealed(reader: _Reader) -> tuple[RevealedShare, ...] | _PackedBlobs:
    """The shares of one list: packed when all have one length (the usual case)."""
    n = reader.count(7)
    if n == 0:
        return _PackedBlobs((), 0)
    packed = reader.uniform_id_blobs(n, wide=False, max_size=MAX_SHARE_SIZE)
    if packed is not None:
        return packed
    return _revealed_of(reader.id_blobs(n, wide=False, max_size=MAX_SHARE_SIZE))


def _owners(values: tuple[RevealedShare, ...] | _PackedBlobs) -> list[int]:
    if isinstance(values, _PackedBlobs):
        return list(values.ids)
    return [v.owner for v in values]


@dataclasses.dataclass(frozen=True)
class RevealedNoiseShare:
    """One share of a survivor's noise-layer seed revealed to the server at unmasking.

    Attributes:
        owner: The client whose seed the share belongs to.
        layer: The noise layer ``j`` (1-based).
        share: The serialized Shamir share (left out of repr).
    """

    owner: int
    layer: int
    share: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        _check_id("owner", self.owner)
        check_int("layer", self.layer, minimum=1, maximum=MAX_NOISE_LAYERS)
        _check_bytes("share", self.share, max_size=MAX_SHARE_SIZE)


@dataclasses.dataclass(frozen=True)
class UnmaskResponse(Message):
    """Stage UNMASKING, client to server: the shares the request called for.

    For each survivor in the request, the sender's share of that survivor's
    self-mask seed; for each dropped client, the sender's share of that client's
    mask private key.  Never both for one client.

    Body: ``sender u32 | n u32 | n x (owner u32 | length u16 | share) | m u32 |
    m x (owner u32 | length u16 | share) | j u32 | j x (owner u32 | layer u16 |
    length u16 | share)``, owners strictly increasing, the noise shares
    strictly increasing by (owner, layer).

    Attributes:
        sender: The responding client.
        self_mask_shares: Shares of survivors' self-mask seeds (left out of repr).
        key_shares: Shares of dropped clients' mask private keys (left out of repr).
        noise_shares: Shares of survivors' noise-layer seeds, for the layers
            the reveal rule allows (left out of repr; empty without layers).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.UNMASK_RESPONSE

    sender: int
    self_mask_shares: tuple[RevealedShare, ...] = dataclasses.field(repr=False)
    key_shares: tuple[RevealedShare, ...] = dataclasses.field(repr=False)
    noise_shares: tuple[RevealedNoiseShare, ...] = dataclasses.field(default=(), repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("sender", self.sender)
        _check_revealed("self_mask_shares", self.self_mask_shares)
        _check_revealed("key_shares", self.key_shares)
        both = {v.owner for v in self.self_mask_shares} & {v.owner for v in self.key_shares}
        if both:
            raise ParameterError(
                "key_shares", "owners disjoint from self_mask_shares", sorted(both)
            )
        noise = self.noise_shares
        if not isinstance(noise, tuple) or not all(
            isinstance(v, RevealedNoiseShare) for v in noise
        ):
            raise ParameterTypeError("noise_shares", "a tuple of RevealedNoiseShare", noise)
        order = [(v.owner, v.layer) for v in noise]
        if any(a >= b for a, b in itertools.pairwise(order)):
            raise ParameterError("noise_shares", "strictly increasing (owner, layer)", "unsorted")

    def _body(self) -> bytes:
        body = (
            _U32.pack(self.sender)
            + _encode_revealed(self.self_mask_shares)
            + _encode_revealed(self.key_shares)
        )
        parts = [body, _U32.pack(len(self.noise_shares))]
        for v in self.noise_shares:
            parts += [
                _U32.pack(v.owner),
                v.layer.to_bytes(2, "big"),
                len(v.share).to_bytes(2, "big"),
                v.share,
            ]
        return b"".join(parts)

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> UnmaskResponse:
        sender = reader.client_id()
        self_mask = _parse_revealed(reader)
        key = _parse_revealed(reader)
        if not set(_owners(self_mask)).isdisjoint(_owners(key)):
            raise MessageFormatError("a client has both a self-mask share and a key share")
        noise: list[RevealedNoiseShare] = []
        count = reader.count(9)
        if count:
            previous = (0, 0)
            for _ in range(count):
                owner = reader.client_id()
                layer = reader.u16()
                size = reader.u16()
                if not 1 <= size <= MAX_SHARE_SIZE:
                    raise MessageFormatError(f"item length {size} outside [1, {MAX_SHARE_SIZE}]")
                if (owner, layer) <= previous:
                    raise MessageFormatError("noise shares are not strictly increasing")
                previous = (owner, layer)
                noise.append(RevealedNoiseShare(owner, layer, reader.take(size)))
        fields: dict[str, Any] = {**header, "sender": sender, "noise_shares": tuple(noise)}
        packed: dict[str, _PackedBlobs] = {}
        for name, values in (("self_mask_shares", self_mask), ("key_shares", key)):
            if isinstance(values, _PackedBlobs):
                packed[name] = values
            else:
                fields[name] = values
        response = cls._trusted(**fields)
        if packed:
            # Materialized on first access (see __getattr__); the server reads
            # the packed form directly.
            response.__dict__[_PACKED] = packed
        return response

    def __getattr__(self, name: str) -> tuple[RevealedShare, ...]:
        # Only called for attributes not found normally: a share list that a
        # parser left packed.  Built once, then stored like any field.
        packed: dict[str, _PackedBlobs] | None = self.__dict__.get(_PACKED)
        if packed is None or name not in packed:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = _revealed_of(packed[name].items())
        object.__setattr__(self, name, value)
        return value

    def _packed_shares(self) -> tuple[_PackedBlobs, _PackedBlobs] | None:
        """The self-mask and key shares as parsed, if both lists were left packed."""
        packed: dict[str, _PackedBlobs] | None = self.__dict__.get(_PACKED)
        if packed is None or len(packed) != 2:
            return None
        return packed["self_mask_shares"], packed["key_shares"]


# -- ConsistencyCheck (active mode) --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConsistencyRequest(Message):
    """Stage CONSISTENCY_CHECK, server to one client: the survivor set to sign.

    Active mode only (Bonawitz et al., arXiv:1611.04482, ConsistencyCheck
    round).  The set is global: every client whose masked input the server
    accepted.

    Body: ``recipient u32 | n u32 | n x survivor u32`` (strictly increasing).

    Attributes:
        recipient: The client asked.
        survivors: The survivor set ``U3`` (strictly increasing).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.CONSISTENCY_REQUEST

    recipient: int
    survivors: tuple[int, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("recipient", self.recipient)
        _check_increasing_ids("survivors", self.survivors)

    def _body(self) -> bytes:
        return _U32.pack(self.recipient) + _ids_shared(self.survivors)

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> ConsistencyRequest:
        recipient = reader.client_id()
        return cls(**header, recipient=recipient, survivors=reader.increasing_ids())


@dataclasses.dataclass(frozen=True)
class ConsistencySignature(Message):
    """Stage CONSISTENCY_CHECK, client to server: its signature on the survivor set.

    Body: ``sender u32 | signature 64``.

    Attributes:
        sender: The signing client.
        signature: Ed25519 signature over (bound session, config digest,
            survivor set) by the client's identity key.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.CONSISTENCY_SIGNATURE

    sender: int
    signature: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("sender", self.sender)
        _check_signature("signature", self.signature)

    def _body(self) -> bytes:
        return _U32.pack(self.sender) + self.signature

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> ConsistencySignature:
        sender = reader.client_id()
        return cls(**header, sender=sender, signature=reader.take(SIGNATURE_SIZE))


_CLASSES: dict[MessageType, type[Message]] = {
    MessageType.ADVERTISE_KEYS: AdvertiseKeys,
    MessageType.ROSTER: Roster,
    MessageType.ENCRYPTED_SHARES: EncryptedShares,
    MessageType.ROUTED_SHARES: RoutedShares,
    MessageType.ENCRYPTED_SHARES_BUNDLE: EncryptedSharesBundle,
    MessageType.MASKED_INPUT: MaskedInput,
    MessageType.UNMASK_REQUEST: UnmaskRequest,
    MessageType.UNMASK_RESPONSE: UnmaskResponse,
    MessageType.CONSISTENCY_REQUEST: ConsistencyRequest,
    MessageType.CONSISTENCY_SIGNATURE: ConsistencySignature,
}
_BY_TYPE_BYTE: dict[int, type[Message]] = {int(t): c for t, c in _CLASSES.items()}
