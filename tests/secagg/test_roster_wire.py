"""SecAgg+ roster parts written straight to bytes are the parts' own serialization.

The server writes each client's roster part with array gathers
(:class:`~privfed.secagg.protocol._roster_wire.PartWriter`) instead of building
a :class:`~privfed.secagg.Roster` and serializing it; the runner streams those
bytes.  Every test here requires them to equal ``roster(cid).to_bytes()`` byte
for byte, and the call to refuse what :meth:`SecAggServer.roster` refuses.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from secagg_helpers import random_entries

from privfed.errors import ParameterError, ProtocolAbort
from privfed.secagg import (
    IdentityKey,
    IdentityRegistry,
    Roster,
    RosterEntry,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    Stage,
    decode_message,
    run_protocol,
    runner,
)
from privfed.secagg.protocol import server as server_module
from privfed.secagg.protocol._roster_check import roster_parts, roster_tree
from privfed.secagg.protocol._roster_wire import PartWriter
from privfed.secagg.protocol.identity_root import identity_tree
from privfed.secagg.protocol.messages.roster import IdentityProof

SESSION = b"w" * 32


def _captured_round(monkeypatch: pytest.MonkeyPatch, **options: Any) -> SecAggServer:
    """Play one round through the runner and return its server."""
    made: list[SecAggServer] = []
    original = runner.SecAggServer

    def make(*args: Any, **kwargs: Any) -> SecAggServer:
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(runner, "SecAggServer", make)
    n = options.pop("n")
    rng = np.random.default_rng(n)
    inputs = [rng.integers(0, 2**64 - 1, size=4, dtype=np.uint64) for _ in range(n)]
    report = run_protocol(inputs, graph="harary", **options)
    expected = np.zeros(4, dtype=np.uint64)
    for cid in report.survivors:
        np.add(expected, inputs[cid - 1], out=expected)
    assert np.array_equal(report.total, expected)
    return made[0]


@pytest.mark.parametrize(
    ("mode", "n", "degree", "t", "corrupted"),
    [("active", 40, 12, 9, 2), ("semi-honest", 40, 12, 8, 0), ("active", 300, 20, 14, 2)],
)
def test_written_parts_are_the_serialized_parts(
    monkeypatch: pytest.MonkeyPatch, mode: str, n: int, degree: int, t: int, corrupted: int
) -> None:
    # Clients missing from the roster (ADVERTISE_KEYS dropouts) give parts with
    # bracket leaves for non-members; 300 clients span more than one batch.
    server = _captured_round(
        monkeypatch,
        n=n,
        threshold=t,
        degree=degree,
        mode=mode,
        corrupted=corrupted,
        dropouts={Stage.ADVERTISE_KEYS: [3, 17], Stage.SHARE_KEYS: [5], Stage.MASKED_INPUT: [8]},
    )
    ids = sorted(server.advertised)
    in_order = [server.roster_bytes(cid) for cid in ids]
    shuffled = ids[:]
    random.Random(n).shuffle(shuffled)
    out_of_order = {cid: server.roster_bytes(cid) for cid in shuffled}
    for cid, data in zip(ids, in_order, strict=True):
        expected = server.roster(cid).to_bytes()
        assert data == expected
        assert out_of_order[cid] == expected
        assert decode_message(data) == server.roster(cid)
    # A client that never advertised still gets the part of its neighbourhood.
    assert server.roster_bytes(3) == server.roster(3).to_bytes()


def test_writer_equals_roster_parts_for_any_client_sets() -> None:
    # Random sets (members, non-members, ids past either end), committees and
    # registries, small trees included: the bytes of roster_parts every time.
    for n in (1, 2, 3, 7, 64, 333):
        rng = random.Random(n)
        ids = sorted(rng.sample(range(2, 10 * n + 2), n))
        signed = n % 2 == 1
        keys = {cid: IdentityKey.generate() for cid in ids} if signed else {}
        entries = random_entries(ids, rng, signed=signed)
        registry = IdentityRegistry.of(keys) if signed else None
        identities = None
        if registry is not None:
            identities = IdentityProof(count=n, items=((0, ids[0], keys[ids[0]].public_key),))
        roster = Roster(session_id=SESSION, round_index=3, entries=entries, identities=identities)
        tree = roster_tree(SESSION, entries)
        seats = sorted(rng.sample(range(n), min(n, 3))) if signed else []
        committee = tuple(
            (i, ids[i], tree.member(i)[1], rng.randbytes(32), rng.randbytes(64)) for i in seats
        )
        hoods = [
            frozenset(rng.sample(ids, rng.randint(1, min(n, 30))))
            | frozenset(rng.sample(range(1, 10 * n + 5), 3))
            for _ in range(300)  # more than one batch
        ]
        if registry is not None:  # every id of a signed part is enrolled
            hoods = [frozenset(h & set(ids)) or frozenset(ids[:1]) for h in hoods]
        built = roster_parts(roster, tree, hoods, committee, registry)
        written = PartWriter(roster, tree, committee, registry).parts(hoods)
        assert written == [part.to_bytes() for part in built]


def test_writer_refuses_an_id_the_registry_does_not_enrol() -> None:
    keys = {cid: IdentityKey.generate() for cid in (1, 2, 4)}
    entries = tuple(
        RosterEntry(
            client_id=cid,
            encryption_public_key=bytes([cid]) * 32,
            mask_public_key=bytes([cid + 100]) * 32,
            signature=b"s" * 64,
        )
        for cid in (1, 2, 3)
    )
    roster = Roster(session_id=SESSION, round_index=0, entries=entries)
    tree = roster_tree(SESSION, entries)
    registry = IdentityRegistry.of(keys)
    assert identity_tree(registry.public_keys).root == registry.tree.root
    with pytest.raises(ParameterError, match=r"not enrolled: \[3\]") as built:
        roster_parts(roster, tree, [frozenset({1, 3})], (), registry)
    with pytest.raises(ParameterError, match=r"not enrolled: \[3\]") as written:
        PartWriter(roster, tree, (), registry).parts([frozenset({1, 3})])
    assert str(written.value) == str(built.value)


def _advertised_server(n: int, graph: str, degree: int | None) -> SecAggServer:
    config = SecAggConfig(
        client_ids=tuple(range(1, n + 1)), threshold=3, vector_length=2, graph=graph, degree=degree
    )
    server = SecAggServer(config)
    for cid in config.client_ids:
        server.receive(SecAggClient(config, cid).advertise_keys(), sender=cid)
    return server


def test_roster_bytes_refuses_what_roster_refuses() -> None:
    server = _advertised_server(6, "harary", 4)
    for bad in (0, 7, True):
        with pytest.raises(ParameterError, match="one of the config's client ids"):
            server.roster_bytes(bad)  # type: ignore[arg-type]
    assert server.stage is Stage.ADVERTISE_KEYS  # nothing closed by a refused call
    data = server.roster_bytes(2)  # closes the stage, as roster(2) does
    assert server.stage is Stage.SHARE_KEYS
    assert data == server.roster(2).to_bytes()
    complete = _advertised_server(5, "complete", None)
    assert complete.roster_bytes(1) == complete.roster().to_bytes()


@pytest.mark.parametrize("graph, degree", [("harary", 4), ("complete", None)])
def test_roster_bytes_without_an_id_is_the_full_roster(graph: str, degree: int | None) -> None:
    server = _advertised_server(6, graph, degree)
    data = server.roster_bytes()  # closes the stage, as roster() does
    assert server.stage is Stage.SHARE_KEYS
    assert data == server.roster().to_bytes()
    assert len(decode_message(data).entries) == 6


def test_roster_bytes_of_an_aborted_round_refuse() -> None:
    server = _advertised_server(6, "harary", 4)
    server.roster_bytes(1)
    with pytest.raises(ProtocolAbort):
        server.routed_shares()  # nobody shared keys: fewer than threshold, aborts
    with pytest.raises(ProtocolAbort, match="the round has been aborted") as written:
        server.roster_bytes(1)
    with pytest.raises(ProtocolAbort, match="the round has been aborted") as built:
        server.roster(1)
    assert str(written.value) == str(built.value)


@pytest.mark.parametrize(("graph", "n", "degree"), [("harary", 300, 20), ("complete", 12, None)])
def test_written_consistency_requests_are_the_serialized_requests(
    monkeypatch: pytest.MonkeyPatch, graph: str, n: int, degree: int | None
) -> None:
    # Each round's requests are built both ways on the same state: the message
    # objects first, then (the stage reopened) the bytes the runner sends.
    original = SecAggServer.consistency_request_bytes
    compared: list[int] = []

    def both(server: SecAggServer) -> dict[int, bytes]:
        built = {c: m.to_bytes() for c, m in server.consistency_requests().items()}
        server._phase = server_module._Phase.MASK  # reopen: the same close again
        written = original(server)
        assert written == built
        compared.append(len(written))
        return written

    monkeypatch.setattr(SecAggServer, "consistency_request_bytes", both)
    rng = np.random.default_rng(n)
    inputs = [rng.integers(0, 2**64 - 1, size=4, dtype=np.uint64) for _ in range(n)]
    report = run_protocol(
        inputs,
        threshold=n // 2 + 2 if degree is None else 14,
        graph=graph,
        degree=degree,
        mode="active",
        corrupted=2,
        dropouts={Stage.ADVERTISE_KEYS: [3], Stage.MASKED_INPUT: [8, 9]},
    )
    assert compared == [len(report.survivors)]
    expected = np.zeros(4, dtype=np.uint64)
    for cid in report.survivors:
        np.add(expected, inputs[cid - 1], out=expected)
    assert np.array_equal(report.total, expected)


def test_consistency_request_bytes_refuses_what_consistency_requests_refuses() -> None:
    server = _advertised_server(6, "harary", 4)
    with pytest.raises(ProtocolAbort, match="no ConsistencyCheck round in semi-honest mode"):
        server.consistency_request_bytes()
    with pytest.raises(ProtocolAbort, match="no ConsistencyCheck round in semi-honest mode"):
        server.consistency_requests()
