"""Stage SHARE_KEYS: encrypted shares, one by one, as a client's bundle, or routed.

The two lists of ciphertexts (:class:`EncryptedSharesBundle` from one sender,
:class:`RoutedShares` to one recipient) stay packed in the message bytes after
parsing; their ``shares`` are built on first access.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.messages._codec import (
    _ID_U32,
    _PACKED,
    _U32,
    _WIRE_BODY,
    MAX_CIPHERTEXT_SIZE,
    _check_bytes,
    _check_id,
    _check_increasing_ids,
    _PackedBlobs,
    _Reader,
)
from privfed.secagg.protocol.messages.base import Message, MessageType, _ClientMessage

__all__ = ["EncryptedShares", "EncryptedSharesBundle", "RoutedShares"]


# -- EncryptedShares / RoutedShares -----------------------------------------------


@dataclasses.dataclass(frozen=True)
class EncryptedShares(_ClientMessage):
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

    recipient: int
    ciphertext: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
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
        wire: tuple[bytes | memoryview, ...] | None = self.__dict__.get(_WIRE_BODY)
        if wire is not None:
            return b"".join(wire)
        return _encode_group(getattr(self, self._FIXED), self.shares, fixed=self._FIXED)

    def _body_parts(self) -> tuple[bytes | memoryview, ...]:
        # A routed body assembled by the server goes into the message in one copy.
        wire: tuple[bytes | memoryview, ...] | None = self.__dict__.get(_WIRE_BODY)
        return (self._body(),) if wire is None else wire

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
        body: tuple[bytes | memoryview, ...] | None = None,
    ) -> _G:
        """A group whose ciphertexts stay packed (ids: the other end), optionally its body.

        Only for validated content: ids strictly increasing, non-zero and not
        ``fixed_id``, blobs of 1 to ``MAX_CIPHERTEXT_SIZE`` bytes, at least one
        for a bundle; ``body`` the pieces that, joined, are exactly
        :func:`_encode_group`'s encoding (bytes, or read-only memoryviews of
        memory nobody writes to).
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
class EncryptedSharesBundle(_ShareGroup, _ClientMessage):
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

    shares: tuple[EncryptedShares, ...] = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
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
