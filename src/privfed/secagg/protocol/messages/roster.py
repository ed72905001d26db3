"""Stage ADVERTISE_KEYS: a client's keys (:class:`AdvertiseKeys`), the server's :class:`Roster`."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg.protocol.messages._codec import (
    _MEMBER_DTYPE,
    _U32,
    COMMITMENT_SIZE,
    MAX_NOISE_LAYERS,
    PUBLIC_KEY_SIZE,
    SIGNATURE_SIZE,
    _check_bytes,
    _check_id,
    _check_increasing_ids,
    _check_signature,
    _flags,
    _Reader,
    _unchecked,
)
from privfed.secagg.protocol.messages.base import Message, MessageType

__all__ = ["AdvertiseKeys", "Roster", "RosterEntry"]


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


