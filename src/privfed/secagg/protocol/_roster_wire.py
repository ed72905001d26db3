"""SecAgg+ roster parts written straight to their wire bytes, a batch at a time.

A server hands every client its roster part (:func:`~privfed.secagg.protocol.
_roster_check.roster_parts` builds them as :class:`~privfed.secagg.Roster`
messages).  A part is a few fixed-size records picked from the roster, its
Merkle tree and (active mode) the identity registry's tree: entries,
signatures, graph commitments, bracket leaves, sibling hashes, identity keys.
:class:`PartWriter` lays every record out once as a row of a byte array and
writes the parts of a batch of clients with one gather per record kind,
instead of building one message object (and its tuples) per part and
serializing it.  The bytes are the ones ``Roster.to_bytes()`` gives for the
same part (the tests compare them for every client); the leaves and proofs
are chosen by the same array walks
(:meth:`~privfed.secagg.protocol.roster_tree.RosterTree.windows_many`,
:meth:`~privfed.secagg.protocol.roster_tree.RosterTree.proof_nodes`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from privfed.errors import ParameterError
from privfed.secagg.protocol._roster_check import PROOF_BATCH
from privfed.secagg.protocol.identity import IdentityRegistry
from privfed.secagg.protocol.messages import Roster
from privfed.secagg.protocol.messages._codec import _U32, WIRE_MAGIC, WIRE_VERSION
from privfed.secagg.protocol.messages.base import MessageType
from privfed.secagg.protocol.roster_tree import RosterTree, sorted_unique, without

__all__ = ["PartBatches", "PartWriter"]

_P = TypeVar("_P")
_Rows = npt.NDArray[np.uint8]
_BRACKET = struct.Struct(">II32s")  # index u32 | client_id u32 | 32 bytes (bracket, key)
_LOW = np.int64(0xFFFFFFFF)


def _rows(records: Sequence[bytes], width: int) -> _Rows:
    """``records`` (each ``width`` bytes) as the rows of one ``(len, width)`` byte array."""
    data = b"".join(records)
    if len(data) != width * len(records):  # pragma: no cover -- fixed-size fields, checked
        raise ValueError("records of unequal size")
    return np.frombuffer(data, dtype=np.uint8).reshape(len(records), width)


def _counts(keys: npt.NDArray[np.int64], sets: int) -> npt.NDArray[np.int64]:
    """How many of the sorted keys ``set << 32 | value`` each of ``sets`` has."""
    return np.bincount(keys >> 32, minlength=sets).astype(np.int64)


class _Gathered:
    """Rows picked for every part of a batch, back to back; ``part(i)`` is part ``i``'s."""

    def __init__(self, rows: _Rows, picks: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]):
        width = rows.shape[1]
        # np.take along rows: a row copy each (fancy indexing of 2-D bytes is far slower).
        self._data = np.take(rows, picks, axis=0).reshape(-1).data
        self._bounds = (np.concatenate([[0], np.cumsum(counts)]) * width).tolist()
        self.counts: list[int] = counts.tolist()

    def part(self, i: int) -> memoryview:
        return self._data[self._bounds[i] : self._bounds[i + 1]]


class _TreeRows:
    """A tree's records as byte rows: leaf positions, ids, bracket leaves, stored hashes."""

    def __init__(self, tree: RosterTree) -> None:
        self.tree = tree
        self.positions = np.arange(tree.count, dtype=">u4").view(np.uint8).reshape(-1, 4)
        ids = [tree.member(i)[0] for i in range(tree.count)]
        self.ids = np.asarray(ids, dtype=">u4").view(np.uint8).reshape(-1, 4)
        self.brackets = _rows(
            [_BRACKET.pack(i, *tree.member(i)) for i in range(tree.count)], _BRACKET.size
        )
        self.hashes = _rows(tree.nodes, 32)

    def proofs(
        self, hoods: Sequence[frozenset[int]], seats: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], dict[str, _Gathered]]:
        """The member leaves of each of ``hoods`` (keys ``set << 32 | leaf``), their counts, and
        the positions, brackets and hashes of each multiproof (``seats``: leaves every proof
        also covers), as ``_roster_check._proof_batch`` chooses them."""
        tree, sets = self.tree, len(hoods)
        windows, members = tree.windows_many(hoods)
        row_keys = np.arange(sets, dtype=np.int64)[:, None] << 32
        seat_keys = (row_keys | seats).ravel()
        nodes, node_counts = tree.proof_nodes(np.concatenate([windows, seat_keys]), sets)
        brackets = without(windows, np.concatenate([members, seat_keys]))
        at, per_set = members & _LOW, _counts(members, sets)
        gathered = {
            "positions": _Gathered(self.positions, at, per_set),
            "brackets": _Gathered(self.brackets, brackets & _LOW, _counts(brackets, sets)),
            "hashes": _Gathered(self.hashes, nodes, node_counts),
        }
        return members, per_set, gathered

    def proof_wire(self, i: int, picked: dict[str, _Gathered]) -> list[bytes | memoryview]:
        """``RosterProof._wire`` of proof ``i``, in pieces."""
        pack = _U32.pack
        brackets, hashes = picked["brackets"], picked["hashes"]
        return [
            pack(self.tree.count),
            picked["positions"].part(i),
            pack(brackets.counts[i]),
            brackets.part(i),
            pack(hashes.counts[i]),
            hashes.part(i),
        ]


def _head(kind: MessageType, session: bytes, round_index: int) -> bytes:
    """``Message.to_bytes``'s header of a message of type ``kind``."""
    return (
        WIRE_MAGIC
        + bytes((WIRE_VERSION, int(kind), len(session)))
        + session
        + _U32.pack(round_index)
    )


def consistency_request_wires(
    tree: RosterTree,
    recipients: Sequence[int],
    hoods: Sequence[frozenset[int]],
    session: bytes,
    round_index: int,
) -> list[bytes]:
    """SecAgg+: the wire bytes of the ConsistencyRequest to each of ``recipients``
    (``hoods[i]``: its neighbourhood and itself) that the server's
    ``consistency_requests`` builds from the survivor ``tree``."""
    rows = _TreeRows(tree)
    head = _head(MessageType.CONSISTENCY_REQUEST, session, round_index)
    out: list[bytes] = []
    for start in range(0, len(hoods), PROOF_BATCH):
        batch = hoods[start : start + PROOF_BATCH]
        members, per_set, picked = rows.proofs(batch, np.empty(0, dtype=np.int64))
        listed = _Gathered(rows.ids, members & _LOW, per_set)
        for i in range(len(batch)):
            recipient = _U32.pack(recipients[start + i])
            pieces: list[bytes | memoryview] = [head, recipient, _U32.pack(listed.counts[i])]
            pieces += [listed.part(i), b"\x01"]
            out.append(b"".join(pieces + rows.proof_wire(i, picked)))
    return out


class PartWriter:
    """The wire bytes of SecAgg+ roster parts (what ``roster_parts(...)[i].to_bytes()`` gives).

    Args:
        roster: The full roster (its entries in leaf order, as the tree).
        tree: The roster's Merkle tree.
        committee: The committee's reveals every part carries (active SecAgg+).
        registry: Active mode: the registry whose keys each part proves.
    """

    def __init__(
        self,
        roster: Roster,
        tree: RosterTree,
        committee: tuple[tuple[int, int, bytes, bytes, bytes], ...],
        registry: IdentityRegistry | None,
    ) -> None:
        entries = roster.entries
        self._tree = _TreeRows(tree)
        self._ids = np.asarray([e.client_id for e in entries], dtype=np.int64)
        self._entries = _rows([e._wire() for e in entries], len(entries[0]._wire()))
        signed = entries[0].signature is not None
        committed = entries[0].graph_commitment is not None
        self._signatures = _rows([e.signature or b"" for e in entries], 64) if signed else None
        self._commitments = (
            _rows([e.graph_commitment or b"" for e in entries], 32) if committed else None
        )
        self._leaf_seats = np.asarray([item[0] for item in committee], dtype=np.int64)
        self._seat_ids = np.asarray([item[1] for item in committee], dtype=np.int64)
        # RosterProof._committee_wire's bytes: the count, then each reveal's fields.
        self._committee_wire = (
            _U32.pack(len(committee))
            + b"".join(_U32.pack(i) + _U32.pack(c) + d + v + s for i, c, d, v, s in committee)
            if committee
            else b""
        )
        flags = signed | 2 | (committed << 2) | (bool(committee) << 3)
        self._registry = registry
        if registry is not None:
            flags |= 16
            keys = registry.public_keys  # increasing ids: leaf i is the i-th id
            self._enrolled = np.fromiter(keys, dtype=np.int64, count=len(keys))
            self._keys = _rows([_BRACKET.pack(i, *item) for i, item in enumerate(keys.items())], 40)
            self._key_hashes = _rows(registry.tree.nodes, 32)
        self._head = _head(MessageType.ROSTER, roster.session_id, roster.round_index)
        self._flags = bytes((flags,))
        # A part without entries carries neither signatures nor graph commitments,
        # and says so (as Roster._body_parts does: a client refuses the other byte).
        self._empty_flags = bytes((flags & ~0b101,))

    def parts(self, hoods: Sequence[frozenset[int]]) -> list[bytes]:
        """The part of each of ``hoods`` (a client and its neighbours), in order.

        Raises:
            ParameterError: Active mode: a member or committee seat that the
                registry does not enrol (as :meth:`IdentityRegistry.key_proofs`).
        """
        sets = len(hoods)
        members, per_part, picked = self._tree.proofs(hoods, self._leaf_seats)
        at = members & _LOW
        picked["entries"] = _Gathered(self._entries, at, per_part)
        if self._signatures is not None:
            picked["signatures"] = _Gathered(self._signatures, at, per_part)
        if self._commitments is not None:
            picked["commitments"] = _Gathered(self._commitments, at, per_part)
        if self._registry is not None:
            picked.update(self._identities(members, sets))
        return [self._part(i, picked) for i in range(sets)]

    def _identities(self, members: npt.NDArray[np.int64], sets: int) -> dict[str, _Gathered]:
        """The identity items and multiproof of each part: its entries' and the seats' keys."""
        registry = self._registry
        if registry is None:  # pragma: no cover -- called in active mode only
            raise TypeError("no registry")
        rows = members >> 32
        seat_rows = np.repeat(np.arange(sets, dtype=np.int64), self._seat_ids.size)
        # Two runs, each sorted by set then id (the stable sort merges them).
        wanted = sorted_unique(
            np.concatenate(
                [
                    (rows << 32) | self._ids[members & _LOW],
                    (seat_rows << 32) | np.tile(self._seat_ids, sets),
                ]
            ),
            runs=True,
        )
        ids, enrolled = wanted & _LOW, self._enrolled
        at = registry.tree.rank(ids)  # np.searchsorted(enrolled, ids): the tree's leaves
        inside = at < enrolled.size
        if not (inside.all() and (enrolled[at[inside]] == ids).all()):
            missing = sorted(set(ids.tolist()) - set(registry.public_keys))[:5]
            raise ParameterError("sets", "enrolled client ids", f"not enrolled: {missing}")
        keys = (wanted & ~_LOW) | at
        nodes, counts = registry.tree.proof_nodes(keys, sets)
        return {
            "keys": _Gathered(self._keys, at, _counts(keys, sets)),
            "key_hashes": _Gathered(self._key_hashes, nodes, counts),
        }

    def _part(self, i: int, picked: dict[str, _Gathered]) -> bytes:
        """Part ``i``'s bytes: the header, then the fields of ``Roster._body_parts`` in order."""
        pack = _U32.pack
        entries = picked["entries"]
        out: list[bytes | memoryview] = [self._head, pack(entries.counts[i])]
        out += [entries.part(i), self._flags if entries.counts[i] else self._empty_flags]
        if "signatures" in picked:
            out.append(picked["signatures"].part(i))
        out += self._tree.proof_wire(i, picked)
        if "commitments" in picked:
            out.append(picked["commitments"].part(i))
        out.append(self._committee_wire)
        if "keys" in picked and self._registry is not None:
            keys, key_hashes = picked["keys"], picked["key_hashes"]
            out += [
                pack(len(self._registry.public_keys)),
                pack(keys.counts[i]),
                keys.part(i),
                pack(key_hashes.counts[i]),
                key_hashes.part(i),
            ]
        return b"".join(out)


class PartBatches(Generic[_P]):
    """Roster parts built in batches of :data:`PROOF_BATCH` and kept until asked.

    Asked in id order (as a driver sends the parts), the parts of the next
    :data:`PROOF_BATCH` clients are built together; a part asked out of that
    order is built alone.  Each part is handed out once (a second ask builds
    it again).

    Args:
        ids: The config's client ids, increasing.
        build: The parts of a run of ids, in order.
    """

    def __init__(self, ids: Sequence[int], build: Callable[[Sequence[int]], list[_P]]) -> None:
        self._ids = ids
        self._at = {c: i for i, c in enumerate(ids)}
        self._build = build
        self._kept: dict[int, _P] = {}
        self._next = 0

    def get(self, client_id: int) -> _P:
        """The part of ``client_id`` (one of ``ids``)."""
        at = self._at[client_id]
        part = self._kept.pop(client_id, None)
        if part is None:
            batch = self._ids[at : at + PROOF_BATCH] if at == self._next else (client_id,)
            self._kept = dict(zip(batch, self._build(batch), strict=True))
            part = self._kept.pop(client_id)
        self._next = at + 1
        return part
