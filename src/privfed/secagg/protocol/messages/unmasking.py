"""Stages CONSISTENCY_CHECK (active mode) and UNMASKING: survivor sets, signatures, shares."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from privfed._checks import check_int
from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.messages._codec import (
    _PACKED,
    _U32,
    MAX_NOISE_LAYERS,
    MAX_SHARE_SIZE,
    SIGNATURE_SIZE,
    _check_bytes,
    _check_id,
    _check_increasing_ids,
    _check_signature,
    _ids,
    _ids_shared,
    _PackedBlobs,
    _Reader,
    _unchecked,
)
from privfed.secagg.protocol.messages.base import Message, MessageType, _ClientMessage
from privfed.secagg.protocol.messages.roster import RosterProof

__all__ = [
    "ConsistencyRequest",
    "ConsistencySignature",
    "RevealedNoiseShare",
    "RevealedShare",
    "SurvivorSignature",
    "UnmaskRequest",
    "UnmaskResponse",
]


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
            parts += [v._wire() for v in self.signatures]
        if self.noise_layers:
            parts.append(len(self.noise_layers).to_bytes(2, "big"))
            parts += [j.to_bytes(2, "big") for j in self.noise_layers]
        return b"".join(parts)

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> UnmaskRequest:
        recipient = reader.client_id()
        survivors = reader.increasing_ids()
        dropped = reader.increasing_ids()
        flags = reader.flags(0b11)
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

    def _wire(self) -> bytes:
        """``signer u32 | signature``, kept once made (a server forwards each signature
        in up to ``k + 1`` unmasking requests)."""
        cached: bytes | None = self.__dict__.get("_wire_signed")
        if cached is None:
            cached = _U32.pack(self.signer) + self.signature
            self.__dict__["_wire_signed"] = cached
        return cached


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


def _owners(values: tuple[RevealedShare, ...] | _PackedBlobs) -> Sequence[int]:
    if isinstance(values, _PackedBlobs):
        return values.ids
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
class UnmaskResponse(_ClientMessage):
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

    self_mask_shares: tuple[RevealedShare, ...] = dataclasses.field(repr=False)
    key_shares: tuple[RevealedShare, ...] = dataclasses.field(repr=False)
    noise_shares: tuple[RevealedNoiseShare, ...] = dataclasses.field(default=(), repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
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
        # A set of the shorter list (a few dropped clients' keys, as a rule).
        longer, shorter = _owners(self_mask), _owners(key)
        if len(shorter) > len(longer):
            longer, shorter = shorter, longer
        if shorter and not set(shorter).isdisjoint(longer):
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
        if isinstance(self_mask, _PackedBlobs) and isinstance(key, _PackedBlobs):
            # The usual case: both lists left packed (see below), in one step.
            fields[_PACKED] = {"self_mask_shares": self_mask, "key_shares": key}
            return _unchecked(cls, fields)
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
    accepted.  In SecAgg+ the server commits to it with a Merkle root and
    sends each client only the survivors of its neighbourhood with a
    multiproof (``proof``); the client signs the root, ``O(k log n)``.

    Body: ``recipient u32 | n u32 | n x survivor u32`` (strictly increasing),
    ``flags u8``, then (bit 0) the :class:`RosterProof` of the survivor tree
    (as in :class:`Roster`, one position per listed survivor).

    Attributes:
        recipient: The client asked.
        survivors: The survivor set ``U3`` (strictly increasing); with a
            ``proof``, its members in the recipient's neighbourhood.
        proof: SecAgg+: the multiproof that ties ``survivors`` to the survivor
            tree's root; ``None`` when ``survivors`` is the whole set.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.CONSISTENCY_REQUEST

    recipient: int
    survivors: tuple[int, ...]
    proof: RosterProof | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_id("recipient", self.recipient)
        _check_increasing_ids("survivors", self.survivors)
        if self.proof is not None:
            if not isinstance(self.proof, RosterProof):
                raise ParameterTypeError("proof", "a RosterProof or None", self.proof)
            if len(self.proof.positions) != len(self.survivors):
                raise ParameterError(
                    "proof", "one position per listed survivor", len(self.proof.positions)
                )

    def _body(self) -> bytes:
        body = _U32.pack(self.recipient) + _ids_shared(self.survivors)
        if self.proof is None:
            return body + b"\x00"
        return body + b"\x01" + self.proof._wire()

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> ConsistencyRequest:
        recipient = reader.client_id()
        survivors = reader.increasing_ids()
        proof = RosterProof._parse(reader, len(survivors)) if reader.flags(1) else None
        return cls(**header, recipient=recipient, survivors=survivors, proof=proof)


@dataclasses.dataclass(frozen=True)
class ConsistencySignature(_ClientMessage):
    """Stage CONSISTENCY_CHECK, client to server: its signature on the survivor set.

    Body: ``sender u32 | signature 64``.

    Attributes:
        sender: The signing client.
        signature: Ed25519 signature over (bound session, config digest,
            survivor set) by the client's identity key.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.CONSISTENCY_SIGNATURE

    signature: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_signature("signature", self.signature)

    def _body(self) -> bytes:
        return _U32.pack(self.sender) + self.signature

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> ConsistencySignature:
        sender = reader.client_id()
        return cls(**header, sender=sender, signature=reader.take(SIGNATURE_SIZE))
