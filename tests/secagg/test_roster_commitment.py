"""The SecAgg+ roster by commitment: a Merkle root, neighbourhood parts, and attacks on them.

A client receives its neighbours' entries plus a multiproof of the roster's
Merkle root, ``O(k log n)`` bytes.  The attacks below are each refused with
nothing revealed: a proof for a member that is not in the root, a tampered
proof, a root that lists a client twice, and two roots for one session (a
split view).  What a client cannot see alone (another root than its peers')
is caught at the next stage: the root is bound into every share ciphertext
and survivor-set signature.
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest
from secagg_helpers import deliver, reveal_committee

from privfed.errors import AuthenticationError, ProtocolAbort
from privfed.secagg import (
    CommitteeRequest,
    EncryptedSharesBundle,
    IdentityKey,
    IdentityRegistry,
    Roster,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
)
from privfed.secagg.protocol import roster_tree
from privfed.secagg.protocol._roster_check import (
    entry_digest,
    identity_proofs,
    neighbourhood_proof,
    neighbourhood_proofs,
)
from privfed.secagg.protocol.committee import (
    committed_digest,
    committee_positions,
    committee_seed,
    graph_commitment,
)
from privfed.secagg.protocol.graph import advertisement_hash, graph_seed_of_root
from privfed.secagg.protocol.identity import survivor_set_payload
from privfed.secagg.protocol.messages.roster import RosterEntry, RosterProof
from privfed.secagg.protocol.roster_tree import (
    ProofError,
    RosterTree,
    check_coverage,
    root_of_proof,
)

L = 3
SESSION = b"s" * 32


def _members(n: int, seed: int = 0) -> list[tuple[int, bytes]]:
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(1, 10 * n + 1), n))
    return [(cid, rng.randbytes(32)) for cid in ids]


# -- the tree -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_every_set_of_leaves_proves_the_root(n: int) -> None:
    members = _members(n, seed=n)
    tree = RosterTree(SESSION, members)
    rng = random.Random(n)
    for _ in range(20):
        indices = set(rng.sample(range(n), rng.randint(1, n)))
        proof = tree.prove(indices)
        leaves = {i: members[i] for i in indices}
        assert root_of_proof(SESSION, n, leaves, proof) == tree.root
        # At most one sibling hash per level and leaf; none for the whole tree.
        assert len(proof) <= len(indices) * max(1, math.ceil(math.log2(n)))
    assert tree.prove(range(n)) == ()


def test_the_root_binds_session_count_ids_and_hashes() -> None:
    members = _members(9)
    root = RosterTree(SESSION, members).root
    assert RosterTree(b"t" * 32, members).root != root
    assert RosterTree(SESSION, members[:-1]).root != root
    moved = [(cid + 1 if i == 4 else cid, d) for i, (cid, d) in enumerate(members)]
    assert RosterTree(SESSION, moved).root != root
    flipped = [(cid, bytes(32) if i == 4 else d) for i, (cid, d) in enumerate(members)]
    assert RosterTree(SESSION, flipped).root != root


def test_a_tampered_or_misshapen_proof_gives_no_root() -> None:
    members = _members(20)
    tree = RosterTree(SESSION, members)
    indices = {3, 4, 11}
    proof = tree.prove(indices)
    leaves = {i: members[i] for i in indices}
    for k in range(len(proof)):
        bad = (*proof[:k], bytes([proof[k][0] ^ 1]) + proof[k][1:], *proof[k + 1 :])
        assert root_of_proof(SESSION, 20, leaves, bad) != tree.root
    with pytest.raises(ProofError, match="short"):
        root_of_proof(SESSION, 20, leaves, proof[:-1])
    with pytest.raises(ProofError, match="long"):
        root_of_proof(SESSION, 20, leaves, (*proof, bytes(32)))
    with pytest.raises(ProofError, match="outside"):
        root_of_proof(SESSION, 20, {20: members[0]}, proof)
    # Another leaf count is another tree shape and another root.
    assert root_of_proof(SESSION, 21, leaves, proof) != tree.root


def test_a_tree_with_a_repeated_id_is_refused() -> None:
    members = _members(6)
    with pytest.raises(ValueError, match="strictly increasing"):
        RosterTree(SESSION, [*members[:3], members[2], *members[3:]])
    with pytest.raises(ValueError, match="strictly increasing"):
        RosterTree(SESSION, list(reversed(members)))


def test_coverage_needs_every_window_and_increasing_ids() -> None:
    # Leaves 0..5 hold ids 10, 20, ..., 60.
    leaves = {i: 10 * (i + 1) for i in range(6)}
    assert check_coverage(6, leaves, {20, 25, 5, 65}) == {20}
    # A member needs both of its adjacent leaves; a non-member the two it falls between.
    with pytest.raises(ProofError, match="client 30"):
        check_coverage(6, {i: v for i, v in leaves.items() if i != 3}, {30})
    with pytest.raises(ProofError, match="client 35"):
        check_coverage(6, {i: v for i, v in leaves.items() if i != 3}, {35})
    with pytest.raises(ProofError, match="client 5"):
        check_coverage(6, {i: v for i, v in leaves.items() if i != 0}, {5})
    with pytest.raises(ProofError, match="client 65"):
        check_coverage(6, {i: v for i, v in leaves.items() if i != 5}, {65})
    # An id twice (adjacent in a sorted tree) or out of order.
    with pytest.raises(ProofError, match="twice"):
        check_coverage(6, {**leaves, 2: 20}, {20})
    with pytest.raises(ProofError, match="twice"):
        check_coverage(6, {**leaves, 2: 5}, {20})


def test_the_windows_are_what_coverage_needs() -> None:
    members = _members(50, seed=3)
    ids = [cid for cid, _ in members]
    tree = RosterTree(SESSION, members)
    rng = random.Random(4)
    for _ in range(20):
        clients = set(rng.sample(range(1, 501), 8))
        windows = tree.windows(clients)
        found = check_coverage(50, {i: ids[i] for i in windows}, clients)
        assert found == clients & set(ids)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 333])
def test_batched_parts_are_the_single_parts(n: int) -> None:
    # The server builds its parts in batches (array operations over many
    # neighbourhoods at once); every part must be the one built alone, byte for byte.
    members = _members(n, seed=n + 7)
    ids = [cid for cid, _ in members]
    tree = RosterTree(SESSION, members)
    index_of = {cid: i for i, cid in enumerate(ids)}
    rng = random.Random(n)
    seats = sorted(rng.sample(range(n), min(n, 4)))
    committee = tuple((i, ids[i], members[i][1], b"v" * 32, b"g" * 64) for i in seats)
    hoods = [
        frozenset(rng.sample(range(1, 10 * n + 3), rng.randint(1, min(40, 10 * n))))
        for _ in range(300)  # more than one batch of PROOF_BATCH
    ]
    batched = neighbourhood_proofs(tree, hoods, committee)
    for hood, (positions, proof) in zip(hoods, batched, strict=True):
        alone = neighbourhood_proof(tree, index_of, hood, committee)
        assert (positions, proof) == alone
        assert proof._wire() == alone[1]._wire()
    for size in (1, 5, n):
        wanted = sorted(rng.sample(range(n), min(n, size)))
        keys = np.asarray(wanted, dtype=np.int64)
        assert tree.prove_many(keys, 1) == [tree.prove(wanted)]


# -- the protocol -------------------------------------------------------------------------


def _harary(n: int, degree: int, t: int, *, active: bool = False, committee: int | None = None):
    ids = tuple(range(1, n + 1))
    identity = {c: IdentityKey.generate() for c in ids} if active else {}
    extra: dict[str, object] = {}
    if active:
        extra = {
            "mode": "active",
            "identities": IdentityRegistry.of(identity),
            "committee_size": committee,
        }
    cfg = SecAggConfig(
        client_ids=ids, threshold=t, vector_length=L, graph="harary", degree=degree, **extra
    )
    rng = np.random.default_rng(0)
    inputs = {c: rng.integers(0, 2**32, L, dtype=np.uint64) for c in ids}
    clients = {c: SecAggClient(cfg, c, inputs[c], identity=identity.get(c)) for c in ids}
    return cfg, clients, inputs


def _hdr(part: Roster) -> dict[str, object]:
    return {"session_id": part.session_id, "round_index": part.round_index}


def _advertise(clients: dict[int, SecAggClient], server: SecAggServer) -> None:
    for c in clients.values():
        deliver(server, c.advertise_keys())
    reveal_committee(server, clients)
    server.roster()


def test_a_part_is_the_neighbourhood_and_a_short_proof() -> None:
    cfg, clients, _ = _harary(200, 8, 5)
    server = SecAggServer(cfg)
    _advertise(clients, server)
    full = server.roster()
    for cid in (1, 77, 200):
        part = server.roster(cid)
        assert part.proof is not None and part.proof.count == 200
        assert set(part.client_ids) == server.neighbours(cid) | {cid}
        # O(k log n): at most 3 leaves per client of the neighbourhood, one
        # sibling hash per level for each.
        assert len(part.proof.hashes) <= 3 * 9 * math.ceil(math.log2(200))
        assert len(part.to_bytes()) < len(full.to_bytes()) / 3
        shared = clients[cid].share_keys(Roster.from_bytes(part.to_bytes()))
        assert set(shared) == server.neighbours(cid)


def test_parts_asked_in_any_order_are_the_same_bytes() -> None:
    # Asked in id order the server builds parts ahead in batches; asked out of
    # order, twice, or for a client that did not advertise, each part is the same.
    cfg, clients, _ = _harary(300, 8, 5)
    sent = [c.advertise_keys() for cid, c in clients.items() if cid != 9]
    in_order, shuffled = SecAggServer(cfg), SecAggServer(cfg)
    for server in (in_order, shuffled):
        for message in sent:
            deliver(server, message)
        server.roster()
    wanted = {cid: in_order.roster(cid).to_bytes() for cid in cfg.client_ids}
    order = list(cfg.client_ids)
    random.Random(5).shuffle(order)
    for cid in [*order[:40], 3, 3, 4, *order[40:]]:
        assert shuffled.roster(cid).to_bytes() == wanted[cid]


def test_a_round_with_dropouts_before_the_roster_gives_the_exact_sum() -> None:
    cfg, clients, inputs = _harary(30, 6, 4)
    server = SecAggServer(cfg)
    absent = {3, 17}
    present = {c: v for c, v in clients.items() if c not in absent}
    _advertise(present, server)
    for cid, c in present.items():
        part = server.roster(cid)
        # An absent neighbour is shown absent (between two adjacent leaves), not listed.
        assert not absent & set(part.client_ids)
        deliver(server, EncryptedSharesBundle.from_shares(c.share_keys(part)))
    for cid, routed in server.routed_shares().items():
        deliver(server, clients[cid].masked_input(routed))
    for cid, request in server.unmask_requests().items():
        deliver(server, clients[cid].unmask(request))
    expected = sum((inputs[c] for c in present), np.zeros(L, np.uint64))
    np.testing.assert_array_equal(server.finalize(), expected)


def _rest_of_round(
    clients: dict[int, SecAggClient],
    server: SecAggServer,
    victim: int,
    part: Roster,
    spoiled: frozenset[int] = frozenset(),
) -> tuple[bool, set[int]]:
    """SHARE_KEYS and MASKED_INPUT with ``part`` given to ``victim``, every other part honest.

    ``spoiled``: clients the attack already made refuse the honest part (they
    revealed for the made-up root).  Returns whether the victim produced a
    masked input, and the other clients that accepted a ciphertext of the
    victim (and so masked with it).
    """
    for cid, c in clients.items():
        given = part if cid == victim else server.roster(cid)
        try:
            out = c.share_keys(given)
        except ProtocolAbort:
            assert cid == victim or cid in spoiled
            continue
        for message in out.values():
            try:
                deliver(server, message)
            except ProtocolAbort:
                assert cid == victim  # a ciphertext for a client that is no neighbour
    routed = server.routed_shares()
    victim_masked = False
    accepted: set[int] = set()
    for cid, r in routed.items():
        try:
            clients[cid].masked_input(r)
        except (ProtocolAbort, AuthenticationError):
            continue
        if cid == victim:
            victim_masked = True
        elif victim in r.senders:
            accepted.add(cid)
    return victim_masked, accepted


def _part_of_tree(
    cfg: SecAggConfig,
    honest: Roster,
    tree: RosterTree,
    entries: dict[int, RosterEntry],
    client: int,
    clients: dict[int, SecAggClient] | None = None,
) -> Roster:
    """``client``'s part of a root the server made up: the neighbourhood that root fixes.

    In active SecAgg+ the server also asks the made-up root's committee (in
    ``clients``) to reveal for it; members that already revealed for another
    root refuse (and abort), and their reveals are missing from the part.
    """
    session = cfg.bound_session_id
    ids = [tree.member(i)[0] for i in range(tree.count)]
    committee: list[tuple[int, int, bytes, bytes, bytes]] = []
    if cfg.committee:
        for position in committee_positions(
            session, tree.root, tree.count, cfg.committee_seats(tree.count)
        ):
            member = ids[position]
            request = CommitteeRequest(
                **_hdr(honest), count=tree.count, position=position, hashes=tree.prove([position])
            )
            try:
                reveal = (clients or {})[member].reveal(request)
            except (KeyError, ProtocolAbort):
                continue
            e = entries[member]
            digest = advertisement_hash(session, member, e.encryption_public_key, e.mask_public_key)
            committee.append((position, member, digest, reveal.value, reveal.signature))
        seed = committee_seed(session, tree.root, [(c[0], c[3]) for c in committee])
    else:
        seed = graph_seed_of_root(session, tree.root)
    hood = cfg.neighbourhood(client, seed)
    windows = tree.windows(hood)
    positions = tuple(ids.index(c) for c in sorted(hood) if c in ids)
    seats = {c[0] for c in committee}
    proof = RosterProof(
        count=tree.count,
        positions=positions,
        brackets=tuple(
            (i, *tree.member(i)) for i in sorted(windows.difference(positions).difference(seats))
        ),
        hashes=tree.prove(windows | seats),
        committee=tuple(committee),
    )
    # The server holds the registry: it proves the identity keys of a made-up part too.
    signers = [ids[i] for i in positions] + [c[1] for c in committee]
    registry = cfg.identities
    keys = (
        identity_proofs(registry, [signers])[0] if isinstance(registry, IdentityRegistry) else None
    )
    return Roster._trusted(
        **_hdr(honest),
        entries=tuple(entries[ids[i]] for i in positions),
        proof=proof,
        identities=keys,
    )


def _leaf(cfg: SecAggConfig, entry: RosterEntry) -> tuple[int, bytes]:
    digest = entry_digest(
        cfg.bound_session_id,
        entry.client_id,
        entry.encryption_public_key,
        entry.mask_public_key,
        entry.graph_commitment,
    )
    return entry.client_id, digest


def test_a_proof_for_a_member_not_in_the_root_is_refused_with_nothing_revealed() -> None:
    cfg, clients, _ = _harary(40, 6, 4)
    outsider = clients.pop(40)  # never advertises: not in the round's root
    server = SecAggServer(cfg)
    _advertise(clients, server)
    ad = outsider.advertise_keys()
    entries = {e.client_id: e for e in server.roster().entries}
    entries[40] = RosterEntry(40, ad.encryption_public_key, ad.mask_public_key)
    # The server's best: a consistent tree over the members plus the outsider.
    tree = RosterTree(cfg.bound_session_id, [_leaf(cfg, entries[c]) for c in sorted(entries)])
    part = _part_of_tree(cfg, server.roster(1), tree, entries, 1)
    masked, accepted = _rest_of_round(clients, server, 1, part)
    # Another root, another graph session: the victim never masks, nobody masks with it.
    assert not masked and not accepted


def test_a_tampered_proof_is_refused_with_nothing_revealed() -> None:
    cfg, clients, _ = _harary(40, 6, 4)
    server = SecAggServer(cfg)
    _advertise(clients, server)
    honest = server.roster(1)
    assert honest.proof is not None and honest.proof.hashes
    hashes = list(honest.proof.hashes)
    hashes[0] = bytes([hashes[0][0] ^ 1]) + hashes[0][1:]
    part = dataclasses.replace(
        honest, proof=dataclasses.replace(honest.proof, hashes=tuple(hashes))
    )
    masked, accepted = _rest_of_round(clients, server, 1, part)
    assert not masked and not accepted


def test_a_root_with_a_repeated_id_is_refused() -> None:
    cfg, clients, _ = _harary(20, 4, 3)
    server = SecAggServer(cfg)
    _advertise(clients, server)
    entries = {e.client_id: e for e in server.roster().entries}
    leaves = [_leaf(cfg, entries[c]) for c in sorted(entries)]
    victim = 5
    # Two leaves for the victim's id (the second with keys the server chose):
    # RosterTree refuses to build it, so the server builds it by hand.
    with pytest.raises(ValueError, match="strictly increasing"):
        RosterTree(cfg.bound_session_id, [*leaves[:victim], leaves[victim - 1], *leaves[victim:]])
    twice = [*leaves[:victim], (victim, bytes(32)), *leaves[victim:]]
    tree = _unsorted_tree(cfg.bound_session_id, twice)
    part = _part_of_tree(cfg, server.roster(victim), tree, entries, victim)
    with pytest.raises(ProtocolAbort, match="twice"):
        clients[victim].share_keys(part)
    assert clients[victim].aborted


def _unsorted_tree(session: bytes, members: list[tuple[int, bytes]]) -> RosterTree:
    """A RosterTree over ``members`` without its order check (what a cheating server builds)."""
    distinct = [(i + 1, d) for i, (_, d) in enumerate(members)]
    tree = RosterTree(session, distinct)
    levels = [[roster_tree.leaf_hash(cid, d) for cid, d in members]]
    while len(levels[-1]) > 1:
        below = levels[-1]
        upper = [roster_tree._node(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
        if len(below) % 2:
            upper.append(below[-1])
        levels.append(upper)
    tree._levels = levels
    tree._members = tuple(members)
    tree._ids = [cid for cid, _ in members]
    tree.root = roster_tree._root(session, len(members), levels[-1][0])
    return tree


def _disjoint_root(
    cfg: SecAggConfig, entries: dict[int, RosterEntry], avoid: frozenset[int]
) -> tuple[RosterTree, int]:
    """A second root (one advertiser left out) whose committee avoids ``avoid``."""
    session = cfg.bound_session_id
    for left_out in sorted(entries, reverse=True):
        tree = RosterTree(
            session, [_leaf(cfg, entries[c]) for c in sorted(entries) if c != left_out]
        )
        seats = committee_positions(session, tree.root, tree.count, cfg.committee_seats(tree.count))
        if not {tree.member(i)[0] for i in seats} & (avoid | {left_out}):
            return tree, left_out
    raise AssertionError("no second root with a disjoint committee")  # pragma: no cover


def test_two_roots_for_one_session_are_caught() -> None:
    """A split view: half the clients see root A, half root B (one advertiser left out).

    With a committee of 3 (so that root B's committee can be asked too, and
    reveal for it), group B accepts a consistent part of root B.
    """
    cfg, clients, _ = _harary(24, 6, 4, active=True, committee=3)
    server = SecAggServer(cfg)
    _advertise(clients, server)
    entries = {e.client_id: e for e in server.roster().entries}
    tree_b, left_out = _disjoint_root(cfg, entries, server.committee | {1})
    group_b = set(range(13, 24)) - {left_out}
    for cid in group_b:
        part = _part_of_tree(cfg, server.roster(cid), tree_b, entries, cid, clients)
        try:
            clients[cid].share_keys(part)
        except ProtocolAbort:  # the part is refused outright (e.g. lists the left-out client)
            continue
        # Accepted: bound to root B's graph session, never the round's.
        assert clients[cid]._round_session != server._round_session
    # The survivor-set signature of a client shown root B does not count for
    # one shown root A: the payloads differ.
    a_client, b_client = (
        clients[1],
        next(clients[c] for c in sorted(group_b) if not clients[c].aborted),
    )
    clients[1].share_keys(server.roster(1))
    survivors = tuple(sorted(clients))
    payload_a = survivor_set_payload(
        session=a_client._round_session, config_digest=cfg.digest, survivors=survivors
    )
    payload_b = survivor_set_payload(
        session=b_client._round_session, config_digest=cfg.digest, survivors=survivors
    )
    assert payload_a != payload_b
    assert any(not clients[c].aborted for c in group_b)
    # And a whole round with a client shown root B: it never masks, nobody masks with it.
    cfg, clients, _ = _harary(24, 6, 4, active=True, committee=3)
    server = SecAggServer(cfg)
    _advertise(clients, server)
    entries = {e.client_id: e for e in server.roster().entries}
    tree_b, _ = _disjoint_root(cfg, entries, server.committee | {1})
    part = _part_of_tree(cfg, server.roster(1), tree_b, entries, 1, clients)
    assert part.proof is not None
    # Root B's committee was asked for B: who revealed for it (or refused it) is spoiled.
    spoiled = frozenset(c for c, client in clients.items() if client.aborted) | {
        item[1] for item in part.proof.committee
    }
    masked, accepted = _rest_of_round(clients, server, 1, part, spoiled)
    assert not masked and not accepted


def test_a_second_root_gets_no_reveals_from_members_of_the_first_committee() -> None:
    """With the default committee (here every member), root B gets no reveal at all:
    each member revealed for root A and refuses B, so every client shown B refuses it."""
    cfg, clients, _ = _harary(24, 6, 4, active=True)
    assert cfg.committee_size == 24
    server = SecAggServer(cfg)
    _advertise(clients, server)
    entries = {e.client_id: e for e in server.roster().entries}
    tree_b = RosterTree(
        cfg.bound_session_id, [_leaf(cfg, entries[c]) for c in sorted(entries)[:-1]]
    )
    part = _part_of_tree(cfg, server.roster(5), tree_b, entries, 5, clients)
    assert part.proof is not None and not part.proof.committee
    # Asking for root B made every member of B's committee abort (it had revealed for A).
    assert all(clients[c].aborted for c in range(1, 24))
    fresh_cfg, fresh, _ = _harary(24, 6, 4, active=True, committee=3)
    server = SecAggServer(fresh_cfg)
    _advertise(fresh, server)
    good = server.roster(5)
    assert good.proof is not None and len(good.proof.committee) == 3
    # A part of the real root without one of its committee's reveals is refused.
    # (its leaf moved to the brackets, so the multiproof still rebuilds the root).
    index, member, digest, value, _ = good.proof.committee[0]
    session = fresh_cfg.bound_session_id
    leaf = committed_digest(digest, graph_commitment(session, member, value))
    moved = () if index in good.proof.positions else ((index, member, leaf),)
    proof = dataclasses.replace(
        good.proof,
        committee=good.proof.committee[1:],
        brackets=(*good.proof.brackets, *moved),
    )
    bad = Roster._trusted(
        **_hdr(good), entries=good.entries, proof=proof, identities=good.identities
    )
    with pytest.raises(ProtocolAbort, match=r"committee members revealed|reveal is missing"):
        fresh[5].share_keys(bad)


def test_the_attack_harness_sees_an_honest_part_accepted() -> None:
    """Control: with the honest part the victim masks and its neighbours mask with it."""
    cfg, clients, _ = _harary(40, 6, 4)
    server = SecAggServer(cfg)
    _advertise(clients, server)
    masked, accepted = _rest_of_round(clients, server, 1, server.roster(1))
    assert masked and accepted == server.neighbours(1)
