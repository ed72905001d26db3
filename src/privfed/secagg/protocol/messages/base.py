"""The base of every message: the common header, the type byte and :func:`decode_message`.

Each message class registers its :class:`MessageType` when it is defined;
importing any module of this package first runs the package ``__init__``,
which imports every message module, so :func:`decode_message` always knows
every type.  ``_ClientMessage`` adds the sender's id, for the messages a
client sends.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from typing import Any, ClassVar, Final, TypeVar

from privfed._checks import check_int
from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.config import SESSION_ID_LENGTHS
from privfed.secagg.protocol.messages._codec import (
    _MAX_U32,
    _U32,
    WIRE_MAGIC,
    WIRE_VERSION,
    _check_id,
    _Reader,
    _unchecked,
)

__all__ = ["Message", "MessageType", "decode_message"]


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
    COMMITTEE_REQUEST = 11
    COMMITTEE_REVEAL = 12


# -- base class --------------------------------------------------------------------

_M = TypeVar("_M", bound="Message")

#: Each message type and the class that carries it (filled as the classes are defined).
_CLASSES: dict[MessageType, type[Message]] = {}
_BY_TYPE_BYTE: dict[int, type[Message]] = {}


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A class that names its own type byte is what decode_message builds for it.
        super().__init_subclass__(**kwargs)
        message_type = cls.__dict__.get("MESSAGE_TYPE")
        if message_type is not None:
            if message_type in _CLASSES:
                raise TypeError(f"{message_type!r} belongs to {_CLASSES[message_type].__name__}")
            _CLASSES[message_type] = cls
            _BY_TYPE_BYTE[int(message_type)] = cls

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


@dataclasses.dataclass(frozen=True, eq=False)
class _ClientMessage(Message):
    """Base of the messages a client sends: the header, then the sender's id.

    Each message class documents ``sender`` and defines its own equality.
    """

    sender: int

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("sender", self.sender)


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
