"""The batched multiproof walk and window search against the implementations they replaced.

:meth:`RosterTree.proof_nodes` picks, for many leaf sets at once, the stored
nodes of each set's multiproof.  Its level walk was rewritten (keys that keep
their node index shifted up by the depth, ``np.compress`` for the selections,
each level's nodes written straight to their output place instead of one
stable argsort); :meth:`RosterTree.windows_many` ranks ids by a table where
they are dense, and :func:`without` looks the dropped keys up instead of
sorting them.  Here each must give the reference's output exactly (values,
order, counts, dtypes) on random trees and sets, and the roster parts and
ConsistencyRequests written from them must be the same bytes.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import numpy.typing as npt
import pytest
from secagg_helpers import random_entries

from privfed.secagg import IdentityKey, IdentityRegistry
from privfed.secagg.protocol import _roster_wire, roster_tree
from privfed.secagg.protocol._roster_check import roster_parts
from privfed.secagg.protocol._roster_check import roster_tree as make_roster_tree
from privfed.secagg.protocol._roster_wire import PartWriter, consistency_request_wires
from privfed.secagg.protocol.messages import Roster
from privfed.secagg.protocol.messages.roster import IdentityProof
from privfed.secagg.protocol.roster_tree import RosterTree, _keyed, sorted_unique, without

SESSION = b"d" * 32
_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 100, 127, 128, 129, 255]
_SIZES += [257, 333, 511, 512, 513, 1000, 1023, 1025, 1999, 2000]


def reference_proof_nodes(
    tree: RosterTree, keys: npt.NDArray[np.int64], sets: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``RosterTree.proof_nodes`` as it was before the rewrite (main f67b889)."""
    keys = sorted_unique(keys)
    low = np.int64(0xFFFFFFFF)
    rows_out: list[npt.NDArray[np.int64]] = []
    nodes_out: list[npt.NDArray[np.int64]] = []
    size = tree.count
    for depth in range(len(tree._levels) - 1):
        leaf = keys & low
        sibling = leaf ^ 1
        pair = (keys[1:] == keys[:-1] + 1) & ((keys[:-1] & 1) == 0)
        known = np.zeros(keys.size, dtype=bool)
        known[1:] = pair
        known[:-1] |= pair
        need = ~known & (sibling < size)
        rows_out.append(keys[need] >> 32)
        nodes_out.append(sibling[need] + tree._offsets[depth])
        parents = (keys & ~low) | (leaf >> 1)
        keep = np.ones(parents.size, dtype=bool)
        keep[1:] = parents[1:] != parents[:-1]
        keys = parents[keep]
        size = (size + 1) // 2
    if not rows_out:
        return np.empty(0, dtype=np.int64), np.zeros(sets, dtype=np.int64)
    rows = np.concatenate(rows_out)
    order = np.argsort(rows, kind="stable")
    counts = np.bincount(rows, minlength=sets).astype(np.int64)
    return np.concatenate(nodes_out)[order], counts


def reference_windows_many(
    tree: RosterTree, sets: list[frozenset[int]]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``RosterTree.windows_many`` as it was before the rewrite (main f67b889)."""
    row_of, wanted = _keyed(sets)
    ids, count = tree._id_array, tree.count
    at = np.searchsorted(ids, wanted)
    member = ids[np.minimum(at, count - 1)] == wanted
    member &= at < count
    leaves = np.concatenate([at - 1, at, np.where(member, at + 1, count)])
    rows = np.concatenate([row_of, row_of, row_of])
    inside = (leaves >= 0) & (leaves < count)
    windows = sorted_unique((rows[inside] << 32) | leaves[inside])
    return windows, (row_of[member] << 32) | at[member]


def reference_without(
    values: npt.NDArray[np.int64], drop: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """``without`` as it was before the rewrite (main f67b889)."""
    if drop.size == 0 or values.size == 0:
        return values
    other = np.sort(drop)
    at = np.minimum(np.searchsorted(other, values), other.size - 1)
    kept: npt.NDArray[np.int64] = values[other[at] != values]
    return kept


def _tree(n: int, seed: int = 0, *, spread: int = 20) -> RosterTree:
    """A tree of ``n`` ids drawn from ``1..spread*n+1`` (spread 1: every id; large: sparse)."""
    rng = random.Random(seed * 7919 + n)
    ids = sorted(rng.sample(range(1, spread * n + 2), n))
    return RosterTree(
        SESSION, [(cid, hashlib.sha256(cid.to_bytes(4, "big")).digest()) for cid in ids]
    )


def _leaf_set(rng: random.Random, n: int) -> list[int]:
    """One set of leaves: empty, ends, adjacent runs, everything, or random."""
    kind = rng.randrange(8)
    if kind == 0:
        return []
    if kind == 1:
        return [0, n - 1]
    if kind == 2:
        start = rng.randrange(n)
        return list(range(start, min(n, start + rng.randint(1, 6))))
    if kind == 3:
        return list(range(n))
    if kind == 4:  # windows of three around random leaves, clipped at the ends
        out: list[int] = []
        for at in rng.sample(range(n), min(n, rng.randint(1, 20))):
            out += [i for i in (at - 1, at, at + 1) if 0 <= i < n]
        return out
    return rng.sample(range(n), rng.randint(1, min(n, 80)))


def _keys(sets: list[list[int]], rng: random.Random) -> npt.NDArray[np.int64]:
    """The keys ``set << 32 | leaf`` of ``sets``, shuffled and with repeats (as callers may)."""
    keys = [(row << 32) | leaf for row, leaves in enumerate(sets) for leaf in leaves]
    keys += rng.sample(keys, min(len(keys), 5))
    rng.shuffle(keys)
    return np.asarray(keys, dtype=np.int64)


def _same(tree: RosterTree, keys: npt.NDArray[np.int64], sets: int) -> None:
    nodes, counts = tree.proof_nodes(keys, sets)
    want_nodes, want_counts = reference_proof_nodes(tree, keys, sets)
    assert nodes.dtype == want_nodes.dtype and counts.dtype == want_counts.dtype
    assert np.array_equal(nodes, want_nodes)
    assert np.array_equal(counts, want_counts)


@pytest.mark.parametrize("n", _SIZES)
def test_proof_nodes_are_the_reference_walk(n: int) -> None:
    tree = _tree(n)
    rng = random.Random(n)
    for trial in range(6):
        sets = [_leaf_set(rng, n) for _ in range(rng.randint(1, 40))]
        keys = _keys(sets, rng)
        _same(tree, keys, len(sets))
        if trial == 0:  # more sets than have keys: the last ones count zero
            _same(tree, keys, len(sets) + 3)
    # No key at all, and keys of sets past ``sets`` (counted, as bincount does).
    _same(tree, np.empty(0, dtype=np.int64), 4)
    _same(tree, np.asarray([(5 << 32) | (n - 1), (2 << 32)], dtype=np.int64), 2)
    _same(tree, np.asarray([3 << 32], dtype=np.int64), 1)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 129, 1000])
def test_prove_many_is_prove(n: int) -> None:
    tree = _tree(n, seed=1)
    rng = random.Random(n + 1)
    sets = [_leaf_set(rng, n) for _ in range(30)]
    proofs = tree.prove_many(_keys(sets, rng), len(sets))
    assert proofs == [tree.prove(leaves) for leaves in sets]


@pytest.mark.parametrize("spread", [1, 3, 20, 5000])
@pytest.mark.parametrize("n", [1, 2, 3, 9, 100, 1000])
def test_windows_and_brackets_are_the_reference(n: int, spread: int) -> None:
    # spread 1 and 3: dense ids (the rank table); 5000: the search.  The sets hold
    # members, non-members, ids past either end, 0 and the largest id.
    tree = _tree(n, spread=spread)
    ids = tree._ids
    rng = random.Random(n * 31 + spread)
    top = spread * n + 2
    for _ in range(4):
        sets = [
            frozenset(rng.sample(ids, rng.randint(0, min(n, 40))))
            | frozenset(rng.sample(range(0, top + 50), rng.randint(0, 6)))
            | frozenset(rng.choice([(), (0,), (ids[0],), (ids[-1],), (ids[-1] + 1, 2**32 - 1)]))
            for _ in range(rng.randint(1, 60))
        ]
        windows, members = tree.windows_many(sets)
        want_windows, want_members = reference_windows_many(tree, sets)
        assert windows.dtype == want_windows.dtype and members.dtype == want_members.dtype
        assert np.array_equal(windows, want_windows)
        assert np.array_equal(members, want_members)
        row_keys = np.arange(len(sets), dtype=np.int64)[:, None] << 32
        seats = np.asarray(sorted(rng.sample(range(n), min(n, 3))), dtype=np.int64)
        for drop in (
            np.concatenate([members, (row_keys | seats).ravel()]),
            np.empty(0, dtype=np.int64),
            np.asarray(rng.sample(windows.tolist(), windows.size // 2) * 2, dtype=np.int64),
            np.asarray([-1, 2**40, (len(sets) + 1) << 32], dtype=np.int64),
        ):
            kept, want = without(windows, drop), reference_without(windows, drop)
            assert kept.dtype == want.dtype and np.array_equal(kept, want)
    # Generators as sets (not collections): the same keys.
    sets = [frozenset(rng.sample(ids, min(n, 5))) for _ in range(5)]
    by_gen = tree.windows_many([iter(sorted(s)) for s in sets])
    assert all(np.array_equal(a, b) for a, b in zip(by_gen, tree.windows_many(sets), strict=True))


def _roster(
    n: int, rng: random.Random, *, active: bool
) -> tuple[Roster, RosterTree, IdentityRegistry | None]:
    ids = sorted(rng.sample(range(2, 10 * n + 2), n))
    keys = {cid: IdentityKey.generate() for cid in ids} if active else {}
    entries = random_entries(ids, rng, signed=active)
    registry = IdentityRegistry.of(keys) if active else None
    identities = None
    if active:
        identities = IdentityProof(count=n, items=((0, ids[0], keys[ids[0]].public_key),))
    roster = Roster(session_id=SESSION, round_index=2, entries=entries, identities=identities)
    return roster, make_roster_tree(SESSION, entries), registry


@pytest.mark.parametrize(
    ("n", "active"),
    [(n, False) for n in (1, 2, 5, 64, 333, 1500)] + [(n, True) for n in (1, 2, 7, 64, 333)],
)
def test_written_parts_and_requests_are_the_reference_bytes(
    monkeypatch: pytest.MonkeyPatch, n: int, active: bool
) -> None:
    rng = random.Random(n + 2)
    roster, tree, registry = _roster(n, rng, active=active)
    ids = [e.client_id for e in roster.entries]
    seats = sorted(rng.sample(range(n), min(n, 3)))
    committee = tuple(
        (i, ids[i], tree.member(i)[1], rng.randbytes(32), rng.randbytes(64)) for i in seats
    )
    # Members and non-members (none in active mode: every id must be enrolled),
    # one end leaf in each; more than one batch.
    strangers = 0 if active else 3
    hoods = [
        frozenset(rng.sample(ids, rng.randint(0, min(n, 30))))
        | frozenset(rng.sample(range(1, 10 * n + 5), rng.randint(0, strangers)))
        | {ids[0] if i % 3 == 0 else ids[-1]}
        for i in range(300)
    ]
    recipients = list(range(1, len(hoods) + 1))
    parts = PartWriter(roster, tree, committee, registry).parts(hoods)
    requests = consistency_request_wires(tree, recipients, hoods, SESSION, 2)
    with monkeypatch.context() as patch:
        patch.setattr(RosterTree, "proof_nodes", reference_proof_nodes)
        patch.setattr(RosterTree, "windows_many", reference_windows_many)
        patch.setattr(_roster_wire, "without", reference_without)
        patch.setattr(roster_tree, "without", reference_without)
        assert PartWriter(roster, tree, committee, registry).parts(hoods) == parts
        assert consistency_request_wires(tree, recipients, hoods, SESSION, 2) == requests
    # And the parts are the message objects' own bytes.
    built = roster_parts(roster, tree, hoods, committee, registry)
    assert parts == [part.to_bytes() for part in built]
