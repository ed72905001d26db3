"""The memoized and inlined hashing paths give the same values as the plain definitions."""

from __future__ import annotations

import hashlib

from privfed.secagg.protocol import roster_tree
from privfed.secagg.protocol.graph import _Permutation


def _plain_round(key: bytes, mask: int, r: int, value: int) -> int:
    digest = hashlib.sha256(key + bytes((r,)) + value.to_bytes(8, "big")).digest()
    return int.from_bytes(digest[:8], "big") & mask


def _plain_forward(perm: _Permutation, key: bytes, n: int, x: int) -> int:
    half = perm._half
    mask = (1 << half) - 1
    while True:
        left, right = x >> half, x & mask
        for r in range(8):
            left, right = right, left ^ _plain_round(key, mask, r, right)
        x = (left << half) | right
        if x < n:
            return x


def test_memoized_permutation_matches_the_plain_feistel_network() -> None:
    for n in (5, 300, 1000, 10_000):
        key = hashlib.sha256(n.to_bytes(4, "big")).digest()
        perm = _Permutation(key, n)
        picks = range(0, n, max(1, n // 97))
        expected = {x: _plain_forward(_Permutation(key, n), key, n, x) for x in picks}
        assert {x: perm.forward(x) for x in picks} == expected
        assert all(perm.inverse(y) == x for x, y in expected.items())
        assert perm.forward_all()[:: max(1, n // 97)] == [expected[x] for x in picks]


def test_walk_matches_the_node_hash() -> None:
    session = b"s" * 32
    members = [(i, hashlib.sha256(bytes((i,))).digest()) for i in range(1, 12)]
    tree = roster_tree.RosterTree(session, members)
    leaves = {i: roster_tree.leaf_hash(cid, d) for i, (cid, d) in enumerate(members)}
    level = [leaves[i] for i in range(len(members))]
    while len(level) > 1:
        pairs = [roster_tree._node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    assert roster_tree._walk(len(members), leaves, lambda d, i: b"") == level[0]
    assert tree.root == roster_tree._root(session, len(members), level[0])
