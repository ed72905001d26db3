"""Stage ADVERTISE_KEYS: a client's keys (:class:`AdvertiseKeys`), the server's :class:`Roster`."""

from __future__ import annotations

import dataclasses
import itertools
import operator
import struct
from typing import Any, ClassVar

from privfed._checks import check_int
from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.messages._codec import (
    _MAX_U32,
    _U32,
    COMMITMENT_SIZE,
    MAX_NOISE_LAYERS,
    PUBLIC_KEY_SIZE,
    SIGNATURE_SIZE,
    _check_bytes,
    _check_id,
    _check_increasing_ids,
    _check_signature,
    _Reader,
    _unchecked,
)
from privfed.secagg.protocol.messages.base import Message, MessageType, _ClientMessage

__all__ = [
    "AdvertiseKeys",
    "CommitteeRequest",
    "CommitteeReveal",
    "IdentityProof",
    "Roster",
    "RosterEntry",
    "RosterProof",
]


# -- AdvertiseKeys -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AdvertiseKeys(_ClientMessage):
    """Stage ADVERTISE_KEYS, client to server: the client's public keys.

    Body: ``sender u32 | encryption_public_key 32 | mask_public_key 32 |
    self_mask_commitment 32 | flags u8``, then the sections the flags announce
    (bit 0: ``signature 64``; bit 1:
    ``count u16 | count x commitment 32``; bit 2: ``graph_commitment 32``), in
    that order.

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
        graph_commitment: Active SecAgg+: the commitment to the client's
            graph value (:func:`~privfed.secagg.protocol.committee.graph_commitment`),
            which goes into its roster leaf; ``None`` otherwise.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.ADVERTISE_KEYS

    encryption_public_key: bytes
    mask_public_key: bytes
    self_mask_commitment: bytes
    signature: bytes | None = dataclasses.field(default=None, repr=False)
    noise_commitments: tuple[bytes, ...] = dataclasses.field(default=(), repr=False)
    graph_commitment: bytes | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.graph_commitment is not None:
            _check_bytes("graph_commitment", self.graph_commitment, size=COMMITMENT_SIZE)
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
        flags = (
            (self.signature is not None)
            | (bool(self.noise_commitments) << 1)
            | ((self.graph_commitment is not None) << 2)
        )
        body += bytes((flags,))
        if self.signature is not None:
            body += self.signature
        if self.noise_commitments:
            body += len(self.noise_commitments).to_bytes(2, "big")
            body += b"".join(self.noise_commitments)
        if self.graph_commitment is not None:
            body += self.graph_commitment
        return body

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> AdvertiseKeys:
        sender = reader.client_id()
        encryption = reader.take(PUBLIC_KEY_SIZE)
        mask = reader.take(PUBLIC_KEY_SIZE)
        commitment = reader.take(COMMITMENT_SIZE)
        flags = reader.flags(0b111)
        signature = reader.take(SIGNATURE_SIZE) if flags & 1 else None
        noise: tuple[bytes, ...] = ()
        if flags & 2:
            count = reader.u16()
            if not count:
                raise MessageFormatError("an empty noise-commitment list must be left out")
            noise = tuple(reader.take(COMMITMENT_SIZE) for _ in range(count))
        graph = reader.take(COMMITMENT_SIZE) if flags & 4 else None
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
            graph_commitment=graph,
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
        graph_commitment: Active SecAgg+: the client's commitment to its
            graph value (part of its roster leaf); ``None`` otherwise.
    """

    client_id: int
    encryption_public_key: bytes
    mask_public_key: bytes
    signature: bytes | None = dataclasses.field(default=None, repr=False)
    graph_commitment: bytes | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_id("client_id", self.client_id)
        _check_bytes("encryption_public_key", self.encryption_public_key, size=PUBLIC_KEY_SIZE)
        _check_bytes("mask_public_key", self.mask_public_key, size=PUBLIC_KEY_SIZE)
        if self.signature is not None:
            _check_signature("signature", self.signature)
        if self.graph_commitment is not None:
            _check_bytes("graph_commitment", self.graph_commitment, size=COMMITMENT_SIZE)

    def _wire(self) -> bytes:
        """``client_id u32 | encryption key | mask key``, kept once made (a server
        puts each entry in up to ``k + 1`` roster parts)."""
        cached: bytes | None = self.__dict__.get("_wire_keys")
        if cached is None:
            cached = _U32.pack(self.client_id) + self.encryption_public_key + self.mask_public_key
            self.__dict__["_wire_keys"] = cached
        return cached


#: A bracket leaf on the wire: ``index u32 | client_id u32 | hash 32``.
_BRACKET = struct.Struct(f">II{COMMITMENT_SIZE}s")
_HASH_OF = operator.itemgetter(2)
#: An identity key on the wire: ``index u32 | client_id u32 | public key 32``.
_IDENTITY_ITEM = struct.Struct(f">II{PUBLIC_KEY_SIZE}s")
#: A committee member: ``index u32 | client_id u32 | commitment | value | signature``.
_COMMITTEE_ITEM = struct.Struct(f">II{COMMITMENT_SIZE}s{COMMITMENT_SIZE}s{SIGNATURE_SIZE}s")


def _leaf_records(
    reader: _Reader, layout: struct.Struct, count: int, section: str
) -> list[tuple[Any, ...]]:
    """A proof section's ``index | client id | ...`` records, read in one call and checked.

    Leaf indices increase inside a tree of ``count`` leaves, no client id is 0,
    and the section is not empty -- checked record by record, field by field,
    so the first fault named is the one a read per field would meet.
    """
    items = reader.records(layout, reader.count(layout.size))
    previous = -1
    for index, client_id, *_ in items:
        if index >= count or index <= previous:
            raise MessageFormatError(f"{section} leaves out of the tree or out of order")
        previous = index
        if client_id == 0:
            raise MessageFormatError("client id 0 is not allowed")
    if not items:
        raise MessageFormatError(f"an empty {section} section must be left out")
    return items


#: The last committee section encoded: ``(committee tuple, its wire bytes)``.
_COMMITTEE_WIRE: tuple[object, bytes] = (None, b"")


@dataclasses.dataclass(frozen=True)
class RosterProof:
    """SecAgg+: what ties a roster part's entries to the roster's Merkle root.

    See :mod:`~privfed.secagg.protocol.roster_tree`.  The recipient rebuilds
    the root from the entries' leaves, the bracket leaves and the sibling
    hashes; the root fixes the graph seed.

    Attributes:
        count: Leaves in the tree (roster members), ``>= 1``.
        positions: The leaf index of each entry of the part, in entry order.
        brackets: ``(index, client_id, advertisement hash)`` of each revealed
            leaf that is not an entry (the windows around the neighbourhood).
        hashes: The multiproof's sibling hashes, in walk order (over the
            entries', the brackets' and the committee's leaves).
        committee: Active SecAgg+: ``(index, client_id, advertisement hash,
            graph value, signature)`` of each committee member that revealed,
            indices increasing (see :mod:`~privfed.secagg.protocol.committee`);
            empty otherwise.
    """

    count: int
    positions: tuple[int, ...]
    brackets: tuple[tuple[int, int, bytes], ...] = ()
    hashes: tuple[bytes, ...] = dataclasses.field(default=(), repr=False)
    committee: tuple[tuple[int, int, bytes, bytes, bytes], ...] = dataclasses.field(
        default=(), repr=False
    )

    def __post_init__(self) -> None:
        check_int("count", self.count, minimum=1, maximum=_MAX_U32)
        for name, values in (("positions", self.positions), ("hashes", self.hashes)):
            if not isinstance(values, tuple):
                raise ParameterTypeError(name, "a tuple", values)
        for index in self.positions:
            check_int("positions", index, minimum=0, maximum=self.count - 1)
        if not isinstance(self.brackets, tuple) or not all(
            isinstance(b, tuple) and len(b) == 3 for b in self.brackets
        ):
            raise ParameterTypeError("brackets", "a tuple of (index, id, hash)", self.brackets)
        for index, client_id, digest in self.brackets:
            check_int("brackets", index, minimum=0, maximum=self.count - 1)
            _check_id("brackets", client_id)
            _check_bytes("brackets", digest, size=COMMITMENT_SIZE)
        for digest in self.hashes:
            _check_bytes("hashes", digest, size=COMMITMENT_SIZE)
        if not isinstance(self.committee, tuple) or not all(
            isinstance(c, tuple) and len(c) == 5 for c in self.committee
        ):
            raise ParameterTypeError(
                "committee", "a tuple of (index, id, hash, value, signature)", self.committee
            )
        for index, client_id, digest, value, signature in self.committee:
            check_int("committee", index, minimum=0, maximum=self.count - 1)
            _check_id("committee", client_id)
            _check_bytes("committee", digest, size=COMMITMENT_SIZE)
            _check_bytes("committee", value, size=COMMITMENT_SIZE)
            _check_signature("committee", signature)
        indices = [c[0] for c in self.committee]
        if any(b <= a for a, b in itertools.pairwise(indices)):
            raise ParameterError("committee", "indices strictly increasing", indices)

    def _committee_wire(self) -> bytes:
        # A server puts one committee section, the same tuple, into every roster
        # part: its encoding is kept for that tuple (held, so never another's id).
        global _COMMITTEE_WIRE
        held, wire = _COMMITTEE_WIRE  # one tuple, read and replaced whole (thread-safe)
        if held is self.committee:
            return wire
        pack = _U32.pack
        wire = pack(len(self.committee)) + b"".join(
            pack(i) + pack(cid) + digest + value + signature
            for i, cid, digest, value, signature in self.committee
        )
        _COMMITTEE_WIRE = (self.committee, wire)
        return wire

    @staticmethod
    def _parse_committee(
        reader: _Reader, count: int
    ) -> tuple[tuple[int, int, bytes, bytes, bytes], ...]:
        return tuple(_leaf_records(reader, _COMMITTEE_ITEM, count, "committee"))

    def _wire(self) -> bytes:
        pack = _U32.pack
        brackets = self.brackets
        if set(map(len, map(_HASH_OF, brackets))) <= {COMMITMENT_SIZE}:
            # One C call per bracket (the same bytes: ids u32 big-endian, the hash).
            items = b"".join(itertools.starmap(_BRACKET.pack, brackets))
        else:  # pragma: no cover -- every bracket hash is checked to be 32 bytes
            items = b"".join(pack(i) + pack(cid) + digest for i, cid, digest in brackets)
        return b"".join(
            [
                pack(self.count),
                struct.pack(f">{len(self.positions)}I", *self.positions),
                pack(len(brackets)),
                items,
                pack(len(self.hashes)),
                *self.hashes,
            ]
        )

    @classmethod
    def _parse(cls, reader: _Reader, entries: int) -> RosterProof:
        count = reader.u32()
        if count == 0:
            raise MessageFormatError("a roster tree without leaves")
        positions = struct.unpack(f">{entries}I", reader.take(4 * entries))
        brackets = reader.records(_BRACKET, reader.count(_BRACKET.size))
        if any(b[1] == 0 for b in brackets):
            raise MessageFormatError("client id 0 is not allowed")
        hashes = reader.hashes(reader.count(COMMITMENT_SIZE), COMMITMENT_SIZE)
        if any(i >= count for i in positions) or any(b[0] >= count for b in brackets):
            raise MessageFormatError("a leaf index outside the roster tree")
        return _unchecked(
            cls,
            {"count": count, "positions": positions, "brackets": tuple(brackets), "hashes": hashes},
        )


def _check_hashes(hashes: object, domain: str) -> None:
    """A proof's sibling hashes: a tuple (``domain`` says so in the error) of 32-byte hashes."""
    if not isinstance(hashes, tuple):
        raise ParameterTypeError("hashes", domain, hashes)
    for digest in hashes:
        _check_bytes("hashes", digest, size=COMMITMENT_SIZE)


@dataclasses.dataclass(frozen=True)
class IdentityProof:
    """Active mode: the identity keys a roster part's signers enrolled, and their proof.

    The recipient checks them against the identity root it pins (see
    :mod:`~privfed.secagg.protocol.identity_root`) before it checks any
    signature with them, so it needs neither the whole registry nor the
    server's word for a key.

    Attributes:
        count: Leaves of the identity tree (enrolled clients), ``>= 1``.
        items: ``(leaf index, client_id, public key)`` of each key, indices
            strictly increasing (in SecAgg+: the part's entries and the
            committee; in a complete graph: every entry).
        hashes: The multiproof's sibling hashes, in walk order.
    """

    count: int
    items: tuple[tuple[int, int, bytes], ...]
    hashes: tuple[bytes, ...] = dataclasses.field(default=(), repr=False)

    def __post_init__(self) -> None:
        check_int("count", self.count, minimum=1, maximum=_MAX_U32)
        if not isinstance(self.items, tuple) or not all(
            isinstance(item, tuple) and len(item) == 3 for item in self.items
        ):
            raise ParameterTypeError("items", "a tuple of (index, id, public key)", self.items)
        if not self.items:
            raise ParameterError("items", "at least one key", "none")
        for index, client_id, key in self.items:
            check_int("items", index, minimum=0, maximum=self.count - 1)
            _check_id("items", client_id)
            _check_bytes("items", key, size=PUBLIC_KEY_SIZE)
        if any(b[0] <= a[0] for a, b in itertools.pairwise(self.items)):
            raise ParameterError("items", "indices strictly increasing", [i[0] for i in self.items])
        _check_hashes(self.hashes, "a tuple")

    def _wire(self) -> bytes:
        pack = _U32.pack
        return b"".join(
            [
                pack(self.count),
                pack(len(self.items)),
                *itertools.starmap(_BRACKET.pack, self.items),
                pack(len(self.hashes)),
                *self.hashes,
            ]
        )

    @classmethod
    def _parse(cls, reader: _Reader) -> IdentityProof:
        count = reader.u32()
        if count == 0:
            raise MessageFormatError("an identity tree without leaves")
        items = _leaf_records(reader, _IDENTITY_ITEM, count, "identity")
        hashes = reader.hashes(reader.count(COMMITMENT_SIZE), COMMITMENT_SIZE)
        return _unchecked(cls, {"count": count, "items": tuple(items), "hashes": hashes})


@dataclasses.dataclass(frozen=True)
class Roster(Message):
    """End of stage ADVERTISE_KEYS, server to every client: who advertised keys.

    Body: ``count u32 | count x (client_id u32 | encryption_public_key 32 |
    mask_public_key 32)`` with strictly increasing ids, ``flags u8``, then the
    sections the flags announce (bit 0: ``count x signature 64``, one per
    entry in order; bit 1, the :class:`RosterProof`: ``leaves u32 | count x
    position u32 | b u32 | b x (index u32 | client_id u32 | hash 32) | h u32 |
    h x hash 32``; bit 2: ``count x graph_commitment 32``, one per entry;
    bit 3, with bit 1 only, the proof's committee: ``c u32 | c x (index u32 |
    client_id u32 | hash 32 | value 32 | signature 64)``; bit 4, active mode,
    the :class:`IdentityProof`: ``leaves u32 | m u32 | m x (index u32 |
    client_id u32 | public_key 32) | h u32 | h x hash 32``), in that order.

    Attributes:
        entries: One :class:`RosterEntry` per client that advertised keys,
            strictly increasing by id (in SecAgg+, a client's part holds its
            neighbourhood only).  Either every entry is signed or none is;
            either every entry carries a graph commitment or none does.
        proof: SecAgg+ parts only: the :class:`RosterProof` that ties the
            entries to the roster's Merkle root, from which the recipient
            computes the graph seed; ``None`` when ``entries`` is the whole
            roster.
        identities: Active mode: the :class:`IdentityProof` of the keys the
            recipient checks signatures with; ``None`` in semi-honest mode.
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.ROSTER

    entries: tuple[RosterEntry, ...]
    proof: RosterProof | None = dataclasses.field(default=None, repr=False)
    identities: IdentityProof | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.identities is not None and not isinstance(self.identities, IdentityProof):
            raise ParameterTypeError("identities", "an IdentityProof or None", self.identities)
        if not isinstance(self.entries, tuple) or not all(
            isinstance(e, RosterEntry) for e in self.entries
        ):
            raise ParameterTypeError("entries", "a tuple of RosterEntry", self.entries)
        _check_increasing_ids("entries", tuple(e.client_id for e in self.entries))
        if len({e.signature is None for e in self.entries}) > 1:
            raise ParameterError("entries", "all signed or none signed", "a mix")
        if len({e.graph_commitment is None for e in self.entries}) > 1:
            raise ParameterError("entries", "all with a graph commitment or none", "a mix")
        if self.proof is not None:
            if not isinstance(self.proof, RosterProof):
                raise ParameterTypeError("proof", "a RosterProof or None", self.proof)
            if len(self.proof.positions) != len(self.entries):
                raise ParameterError("proof", "one position per entry", len(self.proof.positions))

    @property
    def client_ids(self) -> tuple[int, ...]:
        """Ids of the listed clients, increasing."""
        return tuple(e.client_id for e in self.entries)

    def _body_parts(self) -> tuple[bytes | memoryview, ...]:
        parts: list[bytes | memoryview] = [_U32.pack(len(self.entries))]
        parts += [e._wire() for e in self.entries]
        signed = bool(self.entries) and self.entries[0].signature is not None
        committed = bool(self.entries) and self.entries[0].graph_commitment is not None
        revealed = self.proof is not None and bool(self.proof.committee)
        flags = signed | ((self.proof is not None) << 1) | (committed << 2) | (revealed << 3)
        flags |= (self.identities is not None) << 4
        parts.append(bytes((flags,)))
        if signed:
            parts += [e.signature or b"" for e in self.entries]
        if self.proof is not None:
            parts.append(self.proof._wire())
        if committed:
            parts += [e.graph_commitment or b"" for e in self.entries]
        if revealed and self.proof is not None:
            parts.append(self.proof._committee_wire())
        if self.identities is not None:
            parts.append(self.identities._wire())
        return tuple(parts)

    def _body(self) -> bytes:
        return b"".join(self._body_parts())

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
        flags = reader.flags(0b11111)
        if flags & 1:
            if not entries:
                raise MessageFormatError("signatures of an empty roster")
            for entry in entries:
                entry.__dict__["signature"] = reader.take(SIGNATURE_SIZE)
        proof = RosterProof._parse(reader, len(entries)) if flags & 2 else None
        if flags & 4:
            if not entries:
                raise MessageFormatError("graph commitments of an empty roster")
            for entry in entries:
                entry.__dict__["graph_commitment"] = reader.take(COMMITMENT_SIZE)
        if flags & 8:
            if proof is None:
                raise MessageFormatError("a committee section without a roster proof")
            proof.__dict__["committee"] = RosterProof._parse_committee(reader, proof.count)
        identities = IdentityProof._parse(reader) if flags & 16 else None
        return cls._trusted(**header, entries=tuple(entries), proof=proof, identities=identities)


# -- the committee (active SecAgg+) ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CommitteeRequest(Message):
    """End of stage ADVERTISE_KEYS, server to each committee member: reveal for this root.

    Active SecAgg+ only (:mod:`~privfed.secagg.protocol.committee`).  The
    member rebuilds the root from its own leaf and the proof, and reveals only
    if that root draws it.

    Body: ``count u32 | position u32 | h u32 | h x hash 32``.

    Attributes:
        count: Leaves in the roster tree, ``>= 1``.
        position: The member's leaf index, in ``[0, count)``.
        hashes: The inclusion proof of that leaf (sibling hashes, bottom up).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.COMMITTEE_REQUEST

    count: int
    position: int
    hashes: tuple[bytes, ...] = dataclasses.field(default=(), repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("count", self.count, minimum=1, maximum=_MAX_U32)
        check_int("position", self.position, minimum=0, maximum=self.count - 1)
        _check_hashes(self.hashes, "a tuple of bytes")

    def _body(self) -> bytes:
        pack = _U32.pack
        return b"".join(
            [pack(self.count), pack(self.position), pack(len(self.hashes)), *self.hashes]
        )

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> CommitteeRequest:
        count, position = reader.u32(), reader.u32()
        hashes = tuple(reader.take(COMMITMENT_SIZE) for _ in range(reader.count(COMMITMENT_SIZE)))
        try:
            return cls(**header, count=count, position=position, hashes=hashes)
        except ParameterError as exc:
            raise MessageFormatError(str(exc)) from None


@dataclasses.dataclass(frozen=True)
class CommitteeReveal(_ClientMessage):
    """Stage ADVERTISE_KEYS, committee member to server: its graph value, signed for one root.

    Body: ``sender u32 | value 32 | signature 64``.

    Attributes:
        sender: The member's id.
        value: The graph value its roster leaf commits to.
        signature: Ed25519 signature by the member's identity key over
            (bound session, config digest, root, id, value)
            (:func:`~privfed.secagg.protocol.committee.reveal_payload`).
    """

    MESSAGE_TYPE: ClassVar[MessageType] = MessageType.COMMITTEE_REVEAL

    value: bytes = dataclasses.field(repr=False)
    signature: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bytes("value", self.value, size=COMMITMENT_SIZE)
        _check_signature("signature", self.signature)

    def _body(self) -> bytes:
        return _U32.pack(self.sender) + self.value + self.signature

    @classmethod
    def _parse_body(cls, header: dict[str, Any], reader: _Reader) -> CommitteeReveal:
        sender = reader.client_id()
        value = reader.take(COMMITMENT_SIZE)
        return cls(**header, sender=sender, value=value, signature=reader.take(SIGNATURE_SIZE))
