"""Fast paths (memoized and inlined hashing, batched parsing) give what the plain code gave."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import pytest

from privfed.errors import MessageFormatError
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
        # The batched preimages, on a cold memo and on a warm one.
        assert _Permutation(key, n).inverse_many(expected.values()) == list(expected)
        assert perm.inverse_many(expected.values()) == list(expected)
        assert perm.forward_all()[:: max(1, n // 97)] == [expected[x] for x in picks]


def test_walk_matches_the_node_hash() -> None:
    session = b"s" * 32
    members = [(i, hashlib.sha256(bytes((i,))).digest()) for i in range(1, 12)]
    tree = roster_tree.RosterTree(session, members)
    level = [roster_tree.leaf_hash(cid, d) for cid, d in members]
    while len(level) > 1:
        pairs = [roster_tree._node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    every = dict(enumerate(members))
    assert roster_tree.root_of_proof(session, len(members), every, ()) == tree.root
    assert tree.root == roster_tree._root(session, len(members), level[0])


def _reference_root_of_proof(
    session: bytes, count: int, leaves: dict[int, tuple[int, bytes]], proof: Sequence[bytes]
) -> bytes:
    """root_of_proof as it was before the list walk: a dict per level, a sibling callback."""
    if count < 1 or not leaves or not all(0 <= i < count for i in leaves):
        raise roster_tree.ProofError("a leaf index outside the tree")
    supplied = iter(proof)

    def sibling() -> bytes:
        try:
            return next(supplied)
        except StopIteration:
            raise roster_tree.ProofError("the proof is too short") from None

    level = {i: roster_tree.leaf_hash(cid, d) for i, (cid, d) in leaves.items()}
    size = count
    while size > 1:
        upper: dict[int, bytes] = {}
        for index in sorted(level):
            parent = index >> 1
            if parent in upper:
                continue
            other = index ^ 1
            if other >= size:
                upper[parent] = level[index]
                continue
            peer = level[other] if other in level else sibling()
            pair = (level[index], peer) if index < other else (peer, level[index])
            upper[parent] = roster_tree._node(*pair)
        level = upper
        size = (size + 1) // 2
    if next(supplied, None) is not None:
        raise roster_tree.ProofError("the proof is too long")
    return roster_tree._root(session, count, level[0])


def _outcome(
    session: bytes, count: int, leaves: dict[int, tuple[int, bytes]], proof: Sequence[bytes]
) -> tuple[bytes | None, str | None]:
    try:
        return roster_tree.root_of_proof(session, count, leaves, proof), None
    except roster_tree.ProofError as exc:
        return None, str(exc)


def _reference_outcome(
    session: bytes, count: int, leaves: dict[int, tuple[int, bytes]], proof: Sequence[bytes]
) -> tuple[bytes | None, str | None]:
    try:
        return _reference_root_of_proof(session, count, leaves, proof), None
    except roster_tree.ProofError as exc:
        return None, str(exc)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 100, 257])
def test_root_of_proof_matches_the_dict_walk(n: int) -> None:
    """Valid, tampered, truncated, extended and out-of-range proofs: the same root or error."""
    rng = random.Random(n)
    session = b"s" * 32
    ids = sorted(rng.sample(range(1, 10 * n + 1), n))
    members = [(cid, rng.randbytes(32)) for cid in ids]
    tree = roster_tree.RosterTree(session, members)
    for _ in range(25):
        indices = set(rng.sample(range(n), rng.randint(1, n)))
        proof = tree.prove(indices)
        leaves = {i: members[i] for i in indices}
        assert _outcome(session, n, leaves, proof) == (tree.root, None)
        cases: list[tuple[int, dict[int, tuple[int, bytes]], tuple[bytes, ...]]] = [
            (n, leaves, proof[:-1]),
            (n, leaves, (*proof, bytes(32))),
            (n + 1, leaves, proof),
            (max(1, n - 1), leaves, proof),
            (n, {**leaves, n: members[0]}, proof),
            (n, {**leaves, -1: members[0]}, proof),
            (n, {i: leaves[i] for i in sorted(leaves)[1:]}, proof),
        ]
        if proof:
            at = rng.randrange(len(proof))
            cases.append((n, leaves, (*proof[:at], rng.randbytes(32), *proof[at + 1 :])))
            cases.append((n, leaves, proof[::-1]))
        for count, case, hashes in cases:
            if case:
                expected = _reference_outcome(session, count, case, hashes)
                assert _outcome(session, count, case, hashes) == expected
    with pytest.raises(roster_tree.ProofError):
        roster_tree.root_of_proof(session, n, {}, ())
    with pytest.raises(roster_tree.ProofError):
        roster_tree.root_of_proof(session, 0, {0: members[0]}, ())


def _key(i: int) -> bytes:
    return bytes((i,)) * 32


def _roster_bytes() -> bytes:
    from privfed.secagg import Roster, RosterEntry
    from privfed.secagg.protocol.messages.roster import IdentityProof, RosterProof

    roster = Roster(
        session_id=b"q" * 16,
        round_index=0,
        entries=(
            RosterEntry(1, _key(1), _key(2), b"a" * 64, graph_commitment=_key(20)),
            RosterEntry(5, _key(3), _key(4), b"b" * 64, graph_commitment=_key(21)),
        ),
        proof=RosterProof(
            count=6,
            positions=(0, 2),
            brackets=((1, 2, _key(8)),),
            hashes=(_key(9), _key(10)),
            committee=((3, 7, _key(11), _key(12), b"c" * 64),),
        ),
        identities=IdentityProof(count=4, items=((0, 1, _key(13)), (2, 5, _key(14))), hashes=()),
    )
    data = roster.to_bytes()
    assert Roster.from_bytes(data) == roster
    return data


@pytest.mark.parametrize(
    ("record", "field", "value", "message"),
    [
        (_key(8), 4, 0, "client id 0 is not allowed"),  # a bracket's id
        (_key(8), 0, 6, "a leaf index outside the roster tree"),  # a bracket's index
        (_key(11), 4, 0, "client id 0 is not allowed"),  # a committee member's id
        (_key(11), 0, 6, "committee leaves out of the tree or out of order"),
        (_key(13), 4, 0, "client id 0 is not allowed"),  # an identity key's id
        (_key(14), 0, 0, "identity leaves out of the tree or out of order"),
        (_key(14), 0, 4, "identity leaves out of the tree or out of order"),
    ],
)
def test_batched_section_parse_refuses_as_before(
    record: bytes, field: int, value: int, message: str
) -> None:
    from privfed.secagg import Roster

    data = bytearray(_roster_bytes())
    at = data.index(record) - 8 + field  # index u32 | client_id u32 | the record's bytes
    data[at : at + 4] = value.to_bytes(4, "big")
    with pytest.raises(MessageFormatError, match=message):
        Roster.from_bytes(bytes(data))


def test_batched_section_parse_refuses_truncation() -> None:
    from privfed.secagg import Roster

    data = _roster_bytes()
    for cut in range(1, len(data)):
        with pytest.raises(MessageFormatError):
            Roster.from_bytes(data[:cut])


@pytest.mark.parametrize("n", [0, 1, 2, 7, 300])
def test_reader_hashes_split_as_slices(n: int) -> None:
    from privfed.secagg.protocol.messages._codec import _Reader

    raw = random.Random(n).randbytes(32 * n + 5)
    reader = _Reader(raw)
    assert reader.hashes(n, 32) == tuple(raw[i : i + 32] for i in range(0, 32 * n, 32))
    assert reader.take(5) == raw[-5:]
    if n:
        with pytest.raises(MessageFormatError):
            _Reader(raw[: 32 * n - 1]).hashes(n, 32)
