"""The roster by commitment: a Merkle tree over the advertisements (SecAgg+).

In SecAgg+ a client needs the keys of its ``k`` neighbours only, not the whole
roster.  The server commits to the roster with a Merkle root and sends each
client its neighbours' entries plus one *multiproof* that ties them to the
root, so a client downloads and checks ``O(k log n)`` bytes instead of ``O(n)``.

Tree: one leaf per roster member, sorted by client id (strictly increasing:
a repeated id is refused),
``leaf = SHA-256(LEAF || client_id u32 || advertisement hash)``; an inner node
is ``SHA-256(NODE || left || right)``; on a level of odd size the last node is
carried up unchanged.  The root binds the session and the leaf count:
``root = SHA-256(ROOT || len(session) || session || count u32 || top)``.  Leaf,
node and root hashes carry distinct domains, so no leaf can pass for a node.

Coverage: besides the entries it uses, a client must see that the root holds
no other entry for a client of its neighbourhood.  A multiproof reveals, for
every neighbour, a *window* of adjacent leaves: a member with the leaves on
either side, a non-member between two adjacent leaves (or past an end).  The
revealed leaves must have strictly increasing ids along their positions, so
a root that lists a neighbour twice, or hides a neighbour between two of its
leaves, is refused (:func:`check_coverage`).

The root is what the graph seed is computed from
(:func:`~privfed.secagg.protocol.graph.graph_seed_of_root`), and the graph seed
is bound into every pairwise key, share ciphertext and survivor-set signature
(:func:`~privfed.secagg.protocol.graph.graph_session`): two clients shown two
roots cannot exchange a share or count each other's signature.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "ProofError",
    "RosterTree",
    "check_coverage",
    "leaf_hash",
    "root_of_proof",
    "window_indices",
]

_LEAF_DOMAIN = b"privfed/secagg/roster-leaf/v1"
_NODE_DOMAIN = b"privfed/secagg/roster-node/v1"
_ROOT_DOMAIN = b"privfed/secagg/roster-root/v1"


class ProofError(ValueError):
    """A roster proof that does not fit its tree (internal; callers turn it into an abort)."""


def leaf_hash(client_id: int, digest: bytes) -> bytes:
    """The leaf of one member: ``SHA-256(LEAF || client_id u32 || advertisement hash)``."""
    return hashlib.sha256(_LEAF_DOMAIN + client_id.to_bytes(4, "big") + digest).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE_DOMAIN + left + right).digest()


def _root(session: bytes, count: int, top: bytes) -> bytes:
    return hashlib.sha256(
        _ROOT_DOMAIN + bytes((len(session),)) + session + count.to_bytes(4, "big") + top
    ).digest()


class RosterTree:
    """The server's Merkle tree over the roster members, sorted by id.

    Args:
        session: The bound session id.
        members: ``(client_id, advertisement hash)`` per member, ids strictly
            increasing.

    Raises:
        ValueError: No member, or ids not strictly increasing (a repeated id).
    """

    def __init__(self, session: bytes, members: Sequence[tuple[int, bytes]]) -> None:
        ids = [cid for cid, _ in members]
        if not ids:
            raise ValueError("a roster tree needs at least one member")
        if any(b <= a for a, b in itertools.pairwise(ids)):
            raise ValueError("roster ids must be strictly increasing (no id twice)")
        self._ids = ids
        self._members = tuple(members)
        levels = [[leaf_hash(cid, digest) for cid, digest in members]]
        while len(levels[-1]) > 1:
            below = levels[-1]
            upper = [_node(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
            if len(below) % 2:
                upper.append(below[-1])
            levels.append(upper)
        self._levels = levels
        self.root = _root(session, len(ids), levels[-1][0])
        self._id_array = np.asarray(ids, dtype=np.int64)
        # Every stored node in one list (level by level), for the batched proofs.
        self._flat = [node for level in levels for node in level]
        self._offsets = list(itertools.accumulate((len(level) for level in levels), initial=0))
        self._items: list[tuple[int, int, bytes]] | None = None
        self._ranks: npt.NDArray[np.int64] | None = None

    @property
    def count(self) -> int:
        """Number of leaves."""
        return len(self._ids)

    def member(self, index: int) -> tuple[int, bytes]:
        """``(client_id, advertisement hash)`` of leaf ``index``."""
        return self._members[index]

    def windows(self, clients: Iterable[int]) -> set[int]:
        """The leaf indices that prove, for each of ``clients``, whether it is a member."""
        return window_indices(self._ids, clients)

    def prove(self, indices: Iterable[int]) -> tuple[bytes, ...]:
        """The multiproof (sibling hashes in walk order) for the leaves ``indices``.

        Walks the indices level by level exactly as :func:`root_of_proof`
        does, reading the stored levels instead of hashing.
        """
        level = sorted(set(indices))
        out: list[bytes] = []
        size = self.count
        for stored in self._levels[:-1]:
            present = set(level)
            upper: list[int] = []
            for index in level:
                parent = index >> 1
                if upper and upper[-1] == parent:
                    continue
                other = index ^ 1
                if other < size and other not in present:
                    out.append(stored[other])
                upper.append(parent)
            level = upper
            size = (size + 1) // 2
        return tuple(out)

    def leaf_items(self, indices: Sequence[int]) -> tuple[tuple[int, int, bytes], ...]:
        """``(index, client_id, advertisement hash)`` of each leaf of ``indices``, in order."""
        items = self._items
        if items is None:
            items = self._items = [(i, *member) for i, member in enumerate(self._members)]
        if len(indices) < 2:
            return tuple(items[i] for i in indices)
        return tuple(operator.itemgetter(*indices)(items))

    def windows_many(
        self, sets: Sequence[Iterable[int]]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """:meth:`windows` of every client set, and its members' leaves, for all sets at once.

        Returns ``(windows, members)`` as sorted *keys* ``set << 32 | leaf``
        (``set``: the position in ``sets``), one ``searchsorted`` for all.
        """
        row_of, wanted = _keyed(sets)
        ids, count = self._id_array, self.count
        at = self.rank(wanted)
        member = ids[np.minimum(at, count - 1)] == wanted
        member &= at < count
        # A member: leaves at-1, at, at+1; a non-member: at-1 and at (between them).
        leaves = np.concatenate([at - 1, at, np.where(member, at + 1, count)])
        rows = np.concatenate([row_of, row_of, row_of])
        inside = (leaves >= 0) & (leaves < count)
        # Three runs, each sorted (by set, then leaf): the stable sort (a merge of
        # runs) is several times faster here than the default.
        windows = sorted_unique(np.compress(inside, (rows << 32) | leaves), runs=True)
        return windows, np.compress(member, (row_of << 32) | at)

    def rank(self, wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``np.searchsorted(ids, wanted)``: by a table of every id up to the largest
        where the ids are dense (as config ids are), else by the search."""
        ids = self._id_array
        top = int(ids[-1])
        if top > 4 * ids.size + 1024:
            return np.searchsorted(ids, wanted)
        ranks = self._ranks
        if ranks is None:
            ranks = self._ranks = np.searchsorted(ids, np.arange(top + 2, dtype=np.int64))
        return ranks.take(np.clip(wanted, 0, top + 1))

    def prove_many(self, keys: npt.NDArray[np.int64], sets: int) -> list[tuple[bytes, ...]]:
        """:meth:`prove` of ``sets`` leaf sets given as keys ``set << 32 | leaf``.

        The same walk as :meth:`prove` (hence the same hashes, in the same
        order), done level by level on the keys of all sets together: a
        sibling is known iff it is the key next to its own (keys sorted,
        unique, the set in the high bits).
        """
        nodes, counts = self.proof_nodes(keys, sets)
        flat = self._flat
        picked: tuple[bytes, ...] = (
            operator.itemgetter(*nodes.tolist())(flat)
            if nodes.size > 1
            else tuple(flat[i] for i in nodes.tolist())
        )
        bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        return [picked[a:b] for a, b in itertools.pairwise(bounds)]

    def proof_nodes(
        self, keys: npt.NDArray[np.int64], sets: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """What :meth:`prove_many` returns, as positions in :attr:`nodes` and counts per set.

        ``nodes[i]`` indexes the stored nodes level by level (the order of
        :attr:`nodes`); the first ``counts[0]`` are the first set's proof,
        and so on.
        """
        keys = sorted_unique(keys)
        low = np.int64(0xFFFFFFFF)
        depths = len(self._levels) - 1
        if depths == 0:
            return np.empty(0, dtype=np.int64), np.zeros(sets, dtype=np.int64)
        # Every set of the keys (a key of a set >= ``sets`` counts, as bincount would).
        rows = max(sets, int(keys[-1] >> 32) + 1) if keys.size else sets
        row_bounds = np.arange(rows + 1, dtype=np.int64) << 32
        # starts[d, r]: where set r's proof nodes of depth d begin in nodes_out[d].
        starts = np.empty((depths, rows + 1), dtype=np.int64)
        nodes_out: list[npt.NDArray[np.int64]] = []
        size = self.count
        for depth in range(depths):
            # A node of depth d is the key ``set << 32 | index << d``: its parent
            # clears bit d, its sibling flips it, so two keys are siblings iff
            # they share a parent (keys sorted, unique: then they are adjacent).
            parents = keys & ~np.int64(1 << depth)
            count = keys.size
            first = np.empty(count + 1, dtype=bool)  # first[i]: key i starts a new parent
            first[0] = first[count] = True
            np.not_equal(parents[1:], parents[:-1], out=first[1:count])
            # np.compress, not a boolean index: several times faster on a mixed mask.
            alone = np.compress(first[:count] & first[1:], keys)  # its sibling is not known
            if size & 1:  # the last node of a level of odd size has no sibling
                alone = np.compress((alone & low) != (size - 1) << depth, alone)
            starts[depth] = np.searchsorted(alone, row_bounds)
            node = alone & low
            node >>= depth
            node ^= 1
            node += self._offsets[depth]
            nodes_out.append(node)
            keys = np.compress(first[:count], parents)
            size = (size + 1) // 2
        # Per set: level by level, in walk order.  Each level's nodes go straight to
        # their place (per set: the nodes of lower levels before them).
        per_level = np.diff(starts, axis=1)
        counts = per_level.sum(axis=0)
        set_start = np.cumsum(counts) - counts
        shift = set_start + (np.cumsum(per_level, axis=0) - per_level) - starts[:, :-1]
        out = np.empty(int(counts.sum()), dtype=np.int64)
        for depth, node in enumerate(nodes_out):
            at = np.repeat(shift[depth], per_level[depth])
            at += np.arange(node.size, dtype=np.int64)
            out[at] = node
        if rows > sets:  # as bincount: up to the last set with a proof node
            counts = counts[: max(sets, int(np.flatnonzero(counts)[-1]) + 1 if out.size else 0)]
        return out, counts

    @property
    def nodes(self) -> list[bytes]:
        """Every stored node hash, level by level from the leaves (what :meth:`proof_nodes`
        indexes)."""
        return self._flat


def sorted_unique(values: npt.NDArray[np.int64], *, runs: bool = False) -> npt.NDArray[np.int64]:
    """The distinct values, increasing (a sort, not ``np.unique``'s hashing: faster here).

    ``runs``: ``values`` are a few sorted runs back to back; the stable sort (timsort)
    merges them several times faster than the default sort, but is far slower on
    values in no order.
    """
    ordered = np.sort(values, kind="stable" if runs else None)
    keep = np.ones(ordered.size, dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def without(values: npt.NDArray[np.int64], drop: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The sorted unique ``values`` that are not in ``drop`` (any order, repeats allowed)."""
    if drop.size == 0 or values.size == 0:
        return values
    # Each of drop looked up in values (no sort of drop); the hits are struck out.
    at = np.minimum(np.searchsorted(values, drop), values.size - 1)
    keep = np.ones(values.size, dtype=bool)
    keep[np.compress(values.take(at) == drop, at)] = False
    kept: npt.NDArray[np.int64] = np.compress(keep, values)
    return kept


def _keyed(sets: Sequence[Iterable[int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(set position, value)`` of every value of ``sets``, sorted by set then value, unique."""
    lists = [s if isinstance(s, Collection) else list(s) for s in sets]
    rows = np.repeat(np.arange(len(lists), dtype=np.int64), [len(v) for v in lists])
    values = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=rows.size)
    keys = sorted_unique((rows << 32) | values)
    return keys >> 32, keys & np.int64(0xFFFFFFFF)


def window_indices(ids: Sequence[int], clients: Iterable[int]) -> set[int]:
    """Indices of the leaves (of sorted ``ids``) around each of ``clients``.

    A member: its own leaf and those on either side; a non-member: the two
    adjacent leaves it falls between (one at an end).
    """
    count = len(ids)
    out: set[int] = set()
    for client in clients:
        position = bisect.bisect_left(ids, client)
        member = position < count and ids[position] == client
        low, high = position - 1, position + (2 if member else 1)
        out.update(i for i in range(low, high) if 0 <= i < count)
    return out


def root_of_proof(
    session: bytes, count: int, leaves: Mapping[int, tuple[int, bytes]], proof: Sequence[bytes]
) -> bytes:
    """The root that ``leaves`` (``{index: (id, advertisement hash)}``) and ``proof`` give.

    The walk of :meth:`RosterTree.prove`, level by level from the leaves: the
    known nodes of a level, by increasing index, are paired with their
    sibling -- the next known node, else the next hash of ``proof`` -- or
    carried up unchanged (the last node of a level of odd size).  A level is
    two parallel lists, so a node costs one hash and a few list operations.

    Raises:
        ProofError: An index outside the tree, a proof too short or too long.
    """
    if count < 1 or not leaves:
        raise ProofError("a leaf index outside the tree")
    indices = sorted(leaves)
    if indices[0] < 0 or indices[-1] >= count:
        raise ProofError("a leaf index outside the tree")
    sha256 = hashlib.sha256  # leaf_hash and _node, inlined: once per tree node
    hashes = [
        sha256(_LEAF_DOMAIN + cid.to_bytes(4, "big") + digest).digest()
        for cid, digest in map(leaves.__getitem__, indices)
    ]
    take = iter(proof).__next__
    node = _NODE_DOMAIN
    size = count
    try:
        while size > 1:
            upper_indices: list[int] = []
            upper_hashes: list[bytes] = []
            at, known = 0, len(indices)
            while at < known:
                index, value = indices[at], hashes[at]
                at += 1
                if index & 1:  # a right child whose left sibling is not known
                    value = sha256(node + take() + value).digest()
                elif at < known and indices[at] == index + 1:  # both children known
                    value = sha256(node + value + hashes[at]).digest()
                    at += 1
                elif index + 1 < size:  # a left child whose right sibling is not known
                    value = sha256(node + value + take()).digest()
                # else: the last node of a level of odd size, carried up unchanged
                upper_indices.append(index >> 1)
                upper_hashes.append(value)
            indices, hashes = upper_indices, upper_hashes
            size = (size + 1) >> 1
        take()
    except StopIteration:
        if size > 1:
            raise ProofError("the proof is too short") from None
        return _root(session, count, hashes[0])
    raise ProofError("the proof is too long")


def check_coverage(count: int, leaves: Mapping[int, int], clients: Iterable[int]) -> set[int]:
    """The members among ``clients``, once the revealed leaves prove who is one.

    Args:
        count: Leaves in the tree.
        leaves: ``{index: client_id}`` of every revealed leaf.
        clients: The clients whose membership must be decided (a neighbourhood).

    Raises:
        ProofError: The revealed ids do not strictly increase along their
            positions (an id twice, or out of order), or a client's window is
            not revealed in full.
    """
    order = sorted(leaves)
    ids = [leaves[i] for i in order]
    if any(b <= a for a, b in itertools.pairwise(ids)):
        raise ProofError("the roster commits to a client twice or out of order")
    members: set[int] = set()
    for client in clients:
        at = bisect.bisect_left(ids, client)
        if at < len(ids) and ids[at] == client:
            index = order[at]
            needed = (index - 1, index + 1)
            members.add(client)
        else:
            # The leaf just past the client and the one just before it must be adjacent.
            below = order[at - 1] if at else -1
            needed = (below, below + 1)
        for i in needed:
            if 0 <= i < count and i not in leaves:
                raise ProofError(f"the proof does not show whether client {client} is a member")
    return members
