"""The graph seed nobody controls (issue 25, step 2): commit, fix the root, a committee reveals.

In active SecAgg+ each client commits to a fresh value in its roster leaf; the
root draws a committee whose members reveal their values signed for that one
root, and the graph seed hashes the root with the reveals.  Each attack below
is refused: reveals collected under another root, a member asked twice, a
forged or unsigned reveal, a part that leaves out a reveal, a rolled-back
member state.
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest
from secagg_helpers import active_harary_parties, deliver, reveal_committee

from privfed.errors import MessageFormatError, ParameterError, ProtocolAbort
from privfed.secagg import (
    AdvertiseKeys,
    CommitteeRequest,
    CommitteeReveal,
    EncryptedSharesBundle,
    MemoryRevealJournal,
    Roster,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    Stage,
    decode_message,
    export_client_state,
    restore_client_state,
)
from privfed.secagg.protocol.committee import (
    GRINDING_BITS,
    SECURITY_BITS,
    committee_positions,
    committee_seats,
    committee_seed,
    default_committee_size,
    graph_commitment,
    seeds_per_root,
)
from privfed.secagg.protocol.graph import graph_seed_of_root
from privfed.secagg.protocol.state import record_answer
from privfed.secagg.runner import run_protocol

L = 4


def _round(
    n: int = 30,
    degree: int = 8,
    t: int = 6,
    corrupted: int = 1,
    advertise: range | tuple[int, ...] | None = None,
    **extra: object,
):
    cfg, keys, clients, inputs = active_harary_parties(n, degree, t, corrupted, L, seed=1, **extra)
    ids = cfg.client_ids
    server = SecAggServer(cfg)
    for cid in ids if advertise is None else advertise:
        deliver(server, clients[cid].advertise_keys())
    return cfg, keys, clients, server, inputs


def _finish(clients, server, inputs, absent=frozenset()):
    for cid, c in clients.items():
        if cid in absent:
            continue
        deliver(server, EncryptedSharesBundle.from_shares(c.share_keys(server.roster(cid))))
    for cid, routed in server.routed_shares().items():
        deliver(server, clients[cid].masked_input(routed))
    for cid, request in server.consistency_requests().items():
        deliver(server, clients[cid].consistency_check(request))
    for cid, request in server.unmask_requests().items():
        deliver(server, clients[cid].unmask(request))
    return server.finalize()


# -- the config ---------------------------------------------------------------------------


def test_the_default_committee_withstands_the_stated_grinding_budget() -> None:
    for n, s, corrupted in [(30, 7, 1), (1000, 53, 2), (10_000, 63, 3), (100, 11, 4)]:
        kappa = default_committee_size(n, s, corrupted)
        gamma = max(corrupted, 1) / s
        assert kappa == min(n, math.ceil((GRINDING_BITS + SECURITY_BITS) / -math.log2(gamma)))
        if kappa < n:
            # A colluders-only committee: at most gamma**kappa per root tried.
            assert kappa * -math.log2(gamma) >= GRINDING_BITS + SECURITY_BITS
    assert seeds_per_root(20, 0) == 1
    assert seeds_per_root(20, 2) == 1 + 20 + 190


def test_only_active_secagg_plus_has_a_committee_and_its_fields_are_checked() -> None:
    cfg, *_ = _round()
    assert cfg.committee and cfg.committee_size == default_committee_size(30, 9, 1)
    semi = SecAggConfig(client_ids=tuple(range(1, 11)), threshold=4, vector_length=1,
                        graph="harary", degree=4)  # fmt: skip
    assert not semi.committee and semi.committee_size == 0
    with pytest.raises(ParameterError, match="committee_size"):
        dataclasses.replace(semi, committee_size=3)
    with pytest.raises(ParameterError, match="committee_dropouts"):
        dataclasses.replace(semi, committee_dropouts=1)
    with pytest.raises(ParameterError, match="committee_size"):
        dataclasses.replace(cfg, committee_size=31)
    with pytest.raises(ParameterError, match="committee_dropouts"):
        dataclasses.replace(cfg, committee_size=4, committee_dropouts=4)
    # The committee is part of the digest: parties that disagree share no session.
    assert dataclasses.replace(cfg, committee_size=5).digest != cfg.digest
    assert dataclasses.replace(cfg, committee_dropouts=1).digest != cfg.digest


def test_the_committee_is_distinct_in_range_and_fixed_by_the_root() -> None:
    rng = random.Random(3)
    for count in (1, 2, 5, 31, 200):
        for size in (1, 3, 40):
            root = rng.randbytes(32)
            seats = committee_positions(b"s" * 32, root, count, size)
            assert len(seats) == min(size, count) == len(set(seats))
            assert list(seats) == sorted(seats) and all(0 <= p < count for p in seats)
            assert seats == committee_positions(b"s" * 32, root, count, size)
    # Another root draws another committee (200 leaves, 5 seats: collisions are rare).
    draws = {committee_positions(b"s" * 32, rng.randbytes(32), 200, 5) for _ in range(50)}
    assert len(draws) == 50


def test_every_seat_is_drawn_about_equally_often() -> None:
    """Chi-square over 2,000 draws of 4 seats among 20 leaves (19 df); the bound 43.8 is the
    0.999 quantile, so a correct draw fails this test with probability 0.1 % (fixed seed)."""
    rng = random.Random(11)
    counts = [0] * 20
    for _ in range(2000):
        for p in committee_positions(b"s" * 32, rng.randbytes(32), 20, 4):
            counts[p] += 1
    expected = 2000 * 4 / 20
    assert sum((c - expected) ** 2 / expected for c in counts) < 43.8


# -- an honest round ----------------------------------------------------------------------


def test_an_honest_round_sums_exactly_and_the_seed_comes_from_the_reveals() -> None:
    cfg, _, clients, server, inputs = _round(committee_size=5)
    requests = server.committee_requests()
    assert set(requests) == server.committee and len(requests) == 5
    assert server.committee_requests() == requests  # the same on a second call
    reveals = {cid: clients[cid].reveal(r) for cid, r in requests.items()}
    # Asked again for the same root, a member answers the same (a lost reply).
    assert clients[min(reveals)].reveal(requests[min(reveals)]) == reveals[min(reveals)]
    for reveal in reveals.values():
        deliver(server, decode_message(reveal.to_bytes()))
    total = _finish(clients, server, inputs)
    np.testing.assert_array_equal(total, sum(inputs.values(), np.zeros(L, np.uint64)))
    tree = server._tree
    assert tree is not None
    seats = committee_positions(cfg.bound_session_id, tree.root, tree.count, 5)
    ordered = sorted(reveals.items(), key=lambda kv: server._leaf_of[kv[0]])
    expected = committee_seed(
        cfg.bound_session_id,
        tree.root,
        [(p, r.value) for p, (_, r) in zip(seats, ordered, strict=True)],
    )
    assert server.graph_seed == expected != graph_seed_of_root(cfg.bound_session_id, tree.root)


@pytest.mark.parametrize("graph", ["harary", "complete"])
def test_the_in_process_runner_plays_the_committee(graph: str) -> None:
    n = 24
    rng = np.random.default_rng(2)
    inputs = [rng.integers(0, 2**32, 3, dtype=np.uint64) for _ in range(n)]
    kwargs = {"graph": "harary", "degree": 8} if graph == "harary" else {}
    report = run_protocol(
        inputs, threshold=7 if graph == "harary" else 14, mode="active", corrupted=1,
        dropouts={Stage.SHARE_KEYS: [0]}, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    np.testing.assert_array_equal(report.total, sum(inputs[1:], np.zeros(3, np.uint64)))
    assert len(report.committee) == (report.config.committee_size if graph == "harary" else 0)


# -- the server's checks ------------------------------------------------------------------


def test_the_server_refuses_bad_reveals_and_closes_only_when_asked() -> None:
    cfg, keys, clients, server, _ = _round(committee_size=4)
    with pytest.raises(ProtocolAbort, match="committee_requests"):
        server.roster(1)
    early = CommitteeReveal(
        session_id=cfg.bound_session_id, round_index=0, sender=1, value=bytes(32),
        signature=bytes(64),
    )  # fmt: skip
    with pytest.raises(ProtocolAbort, match="early"):
        server.receive(early, sender=1)
    requests = server.committee_requests()
    member, request = next(iter(requests.items()))
    outsider = next(c for c in clients if c not in requests)
    # A late advertisement does not change the fixed root.
    late = SecAggClient(cfg, outsider, np.zeros(L, np.uint64), identity=keys[outsider])
    with pytest.raises(ProtocolAbort):
        deliver(server, late.advertise_keys())
    good = clients[member].reveal(request)
    forged = [
        dataclasses.replace(good, value=bytes(32)),  # does not open the commitment
        dataclasses.replace(good, signature=bytes(64)),  # unsigned
        dataclasses.replace(good, signature=keys[outsider].sign(b"x")),  # another key
        dataclasses.replace(good, sender=outsider),  # not on the committee
    ]
    for bad in forged:
        with pytest.raises(ProtocolAbort):
            server.receive(bad, sender=bad.sender)
    deliver(server, good)
    with pytest.raises(ProtocolAbort, match="second reveal"):
        deliver(server, good)
    # Three members never reveal: with no dropouts allowed the round aborts.
    with pytest.raises(ProtocolAbort, match="did not reveal"):
        server.roster(member)
    assert server.aborted


def test_allowed_committee_dropouts_let_the_round_go_on() -> None:
    _, _, clients, server, inputs = _round(committee_size=4, committee_dropouts=1)
    requests = server.committee_requests()
    silent = max(requests)
    for cid, request in requests.items():
        if cid != silent:
            deliver(server, clients[cid].reveal(request))
    present = {c: v for c, v in clients.items() if c != silent}
    total = _finish(present, server, inputs)
    np.testing.assert_array_equal(total, sum((inputs[c] for c in present), np.zeros(L, np.uint64)))


# -- the member's and the client's checks -------------------------------------------------


def test_a_member_reveals_for_one_root_only_and_only_if_drawn() -> None:
    cfg, _, clients, server, _ = _round(committee_size=4)
    requests = server.committee_requests()
    member, request = next(iter(requests.items()))
    outsider = next(c for c in clients if c not in requests)
    # A true proof of the outsider's own leaf: the real root, which does not draw it.
    tree = server._tree
    assert tree is not None
    position = server._leaf_of[outsider]
    own = dataclasses.replace(request, position=position, hashes=tree.prove([position]))
    with pytest.raises(ProtocolAbort, match="does not draw"):
        clients[outsider].reveal(own)
    assert clients[outsider].aborted
    clients[member].reveal(request)
    other = dataclasses.replace(request, hashes=(bytes(32), *request.hashes[1:]))
    with pytest.raises(ProtocolAbort):
        clients[member].reveal(other)  # another root (or none): refused, and it aborts
    assert clients[member].aborted
    with pytest.raises(ProtocolAbort):
        clients[member].share_keys(Roster(session_id=cfg.bound_session_id, round_index=0,
                                          entries=()))  # fmt: skip


def test_a_part_with_a_tampered_or_missing_reveal_is_refused() -> None:
    cfg, _, clients, server, _ = _round(committee_size=4)
    reveal_committee(server, clients)
    victim = next(c for c in clients if c not in server.committee)
    part = server.roster(victim)
    assert part.proof is not None and len(part.proof.committee) == 4
    item = part.proof.committee[0]
    cases = {
        "did not draw|does not match": (item[0], item[1], item[2], bytes(32), item[4]),
        "is not signed": (*item[:4], bytes(64)),
    }
    for reason, bad_item in cases.items():
        proof = dataclasses.replace(part.proof, committee=(bad_item, *part.proof.committee[1:]))
        bad = Roster._trusted(session_id=part.session_id, round_index=0, entries=part.entries,
                              proof=proof, identities=part.identities)  # fmt: skip
        with pytest.raises(ProtocolAbort, match=reason):
            _clone(cfg, clients, victim).share_keys(bad)
    # The honest part is accepted.
    clients[victim].share_keys(part)


def _clone(cfg, clients, cid):
    """A copy of client ``cid`` in its current state (a fresh object from its state bytes)."""
    journal = MemoryRevealJournal()
    journal.start_session(cfg.session_id, cfg.round_index, cid)
    state = export_client_state(clients[cid])
    return restore_client_state(state, journal=journal, identity=clients[cid]._identity)


def test_a_member_state_keeps_its_root_and_a_rollback_is_refused() -> None:
    cfg, keys, clients, server, _ = _round(committee_size=4)
    requests = server.committee_requests()
    member, request = next(iter(requests.items()))
    journal = MemoryRevealJournal()
    client = clients[member]
    journal.start_session(cfg.session_id, cfg.round_index, member)
    before = export_client_state(client)
    reveal = client.reveal(request)
    record_answer(journal, client, reveal)
    after = export_client_state(client)
    restored = restore_client_state(after, journal=journal, identity=keys[member])
    assert restored.reveal(request) == reveal  # the same root: the same answer
    other = dataclasses.replace(request, hashes=(bytes(32), *request.hashes[1:]))
    with pytest.raises(ProtocolAbort):
        restore_client_state(after, journal=journal, identity=keys[member]).reveal(other)
    # The state from before the reveal would let it reveal again: refused as a rollback.
    with pytest.raises(ProtocolAbort, match="rolled-back"):
        restore_client_state(before, journal=journal, identity=keys[member])


# -- the wire -----------------------------------------------------------------------------


def test_committee_messages_and_sections_round_trip_and_parse_strictly() -> None:
    cfg, _, clients, server, _ = _round(committee_size=3)
    requests = server.committee_requests()
    for cid, request in requests.items():
        assert CommitteeRequest.from_bytes(request.to_bytes()) == request
        reveal = clients[cid].reveal(request)
        assert decode_message(reveal.to_bytes()) == reveal
        deliver(server, reveal)
    part = server.roster(1)
    again = Roster.from_bytes(part.to_bytes())
    assert again == part and again.proof is not None and again.proof.committee
    assert all(e.graph_commitment is not None for e in again.entries)
    ad = SecAggClient(cfg, 1, identity=clients[1]._identity).advertise_keys()
    assert AdvertiseKeys.from_bytes(ad.to_bytes()).graph_commitment == ad.graph_commitment
    assert ad.graph_commitment is not None and len(ad.graph_commitment) == 32
    # A committee section without a proof is refused by the parser.
    without = dataclasses.replace(part, proof=None, identities=None)
    body = bytearray(without.to_bytes())
    flags_at = len(body) - (64 + 32) * len(part.entries) - 1  # signatures, commitments
    assert body[flags_at] & 4
    body[flags_at] |= 8
    with pytest.raises(MessageFormatError):
        Roster.from_bytes(bytes(body))


def test_a_semi_honest_server_refuses_a_graph_commitment() -> None:
    ids = tuple(range(1, 11))
    cfg = SecAggConfig(client_ids=ids, threshold=4, vector_length=1, graph="harary", degree=4)
    server = SecAggServer(cfg)
    assert server.committee_requests() == {}
    ad = SecAggClient(cfg, 1).advertise_keys()
    assert ad.graph_commitment is None
    forged = dataclasses.replace(
        ad, graph_commitment=graph_commitment(cfg.bound_session_id, 1, bytes(32))
    )
    with pytest.raises(ProtocolAbort, match="graph commitment"):
        deliver(server, forged)


# -- found in review: a roster the server shrank, a state copy, a semi-honest part ---------


@pytest.mark.parametrize(("n", "s", "corrupted", "size"), [(10_000, 63, 3, 24), (30, 7, 2, 3)])
def test_a_smaller_roster_draws_more_seats_with_the_same_bound(
    n: int, s: int, corrupted: int, size: int
) -> None:
    """The server picks the leaves, so it can raise their colluding fraction to gamma * n /
    count; the root of a smaller roster draws enough seats to keep gamma ** size."""
    gamma = max(corrupted, 1) / s
    previous = size
    for count in sorted({n, n - 1, (3 * n) // 4, n // 2, n // 4, max(2, n // 10)}, reverse=True):
        seats = committee_seats(size, n, s, corrupted, count)
        assert seats >= min(previous, count)  # monotone as the roster shrinks (up to count)
        previous = seats
        leaves = gamma * n / count
        if leaves >= 1:
            assert seats == count
            continue
        assert seats == size if count == n else seats >= size
        assert seats == count or leaves**seats <= gamma**size * (1 + 1e-9)
        if seats > size:
            assert leaves ** (seats - 1) > gamma**size * (1 - 1e-9)


@pytest.mark.slow
def test_a_round_whose_server_left_clients_out_draws_a_larger_committee() -> None:
    # Only 36 of 40 advertise (4 "dropped" before the roster): a 36-leaf root.
    cfg, _, clients, _, inputs = _round(n=40, degree=12, t=8, corrupted=1, committee_size=4,
                                        advertise=())  # fmt: skip
    server = SecAggServer(cfg)
    present = {c: clients[c] for c in range(1, 37)}
    for c in present.values():
        deliver(server, c.advertise_keys())
    reveal_committee(server, present)
    assert len(server.committee) == cfg.committee_seats(36) > cfg.committee_size
    total = _finish(present, server, inputs)
    np.testing.assert_array_equal(total, sum((inputs[c] for c in present), np.zeros(L, np.uint64)))


def test_a_state_copy_that_never_revealed_refuses_its_own_seat() -> None:
    """Two copies of one member: copy A reveals; copy B (never revealed) is handed a part
    whose committee shows A's reveal in its seat. B refuses: only its own reveal for that
    very root may fill its seat."""
    cfg, _, clients, server, _ = _round(committee_size=4)
    requests = server.committee_requests()
    member = min(requests)
    copy_b = _clone(cfg, clients, member)
    for cid, request in requests.items():
        deliver(server, clients[cid].reveal(request))
    part = server.roster(member)
    with pytest.raises(ProtocolAbort, match="own reveal for this root is missing"):
        copy_b.share_keys(part)
    clients[member].share_keys(part)  # the copy that revealed goes on


def test_a_semi_honest_client_refuses_a_committee_section() -> None:
    _, _, active_clients, active, _ = _round(committee_size=3)
    reveal_committee(active, active_clients)
    shown = active.roster(1).proof
    assert shown is not None
    ids = tuple(range(1, 11))
    cfg = SecAggConfig(client_ids=ids, threshold=4, vector_length=L, graph="harary", degree=4)
    clients = {c: SecAggClient(cfg, c, np.zeros(L, np.uint64)) for c in ids}
    server = SecAggServer(cfg)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    part = server.roster(1)
    assert part.proof is not None
    # A reveal from the active round, put at leaf 0 of this 10-leaf tree.
    proof = dataclasses.replace(part.proof, committee=((0, *shown.committee[0][1:]),))
    bad = Roster._trusted(session_id=part.session_id, round_index=0, entries=part.entries,
                          proof=proof)  # fmt: skip
    with pytest.raises(ProtocolAbort, match="outside active SecAgg"):
        clients[1].share_keys(bad)
