"""Differential tests of the server's wire fast paths against the message objects.

:meth:`SecAggServer.roster_bytes` and :meth:`SecAggServer.consistency_request_bytes`
write SecAgg+ roster parts and ConsistencyRequests straight to bytes; they must
give ``roster(cid).to_bytes()`` and ``consistency_requests()[c].to_bytes()``
byte for byte, with the same checks, errors and stage transitions.  Here real
rounds are played through the runner with every fast-path call compared, as it
happens, against the object path on the same state (or on a deep copy of the
server taken just before, where the call closes a stage), over many drawn
configurations; and the routing gather is compared with the structured-dtype
take it replaced.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secagg_helpers import active_harary_parties, deliver, reveal_committee

from privfed.errors import ProtocolAbort
from privfed.secagg import (
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    Stage,
    decode_message,
    run_protocol,
)
from privfed.secagg.protocol import _routing
from privfed.secagg.protocol._roster_check import neighbourhood_proofs, pick, survivor_tree
from privfed.secagg.protocol._roster_wire import consistency_request_wires
from privfed.secagg.protocol.config import MAX_CLIENT_ID
from privfed.secagg.protocol.messages import ConsistencyRequest, SurvivorSignature, UnmaskRequest
from privfed.secagg.protocol.messages._codec import _blob_dtype, _PackedBlobs

#: The server state a stage close sets: both paths must leave these equal.
_STATE = (
    "_phase",
    "_graph_seed",
    "_round_session",
    "_committee_items",
    "_roster",
    "_leaf_of",
    "_survivor_set",
    "_survivor_root",
)


def _state(server: SecAggServer) -> dict[str, Any]:
    return {name: getattr(server, name) for name in _STATE}


class _Outcome:
    """What a call gives: its value, or the exception it raises (compared by type and text)."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: Exception | None = None
        try:
            self.value = call()
        except Exception as exc:
            self.error = exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Outcome):
            return NotImplemented
        if self.error is None or other.error is None:
            return self.error is other.error and self.value == other.value
        return (type(self.error), str(self.error)) == (type(other.error), str(other.error))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.error) if self.error is not None else f"{self.value!r:.200}"

    def result(self) -> Any:
        """The value, or the exception raised again."""
        if self.error is not None:
            raise self.error
        return self.value


class _Checker:
    """Wraps the server's fast paths so that each call is compared as the round runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, rng: random.Random) -> None:
        self.rng = rng
        self.parts = 0
        self.requests = 0
        self.servers: list[SecAggServer] = []
        self.roster_bytes = SecAggServer.roster_bytes
        self.request_bytes = SecAggServer.consistency_request_bytes
        routed = SecAggServer.routed_shares
        checker = self

        def roster_bytes(server: SecAggServer, cid: int) -> bytes:
            if server not in checker.servers:
                checker.servers.append(server)
            if server.stage is Stage.ADVERTISE_KEYS:  # this call closes the stage
                twin = copy.deepcopy(server)
                built = _Outcome(lambda: twin.roster(cid).to_bytes())
                written = _Outcome(lambda: checker.roster_bytes(server, cid))
                assert written == built
                assert _state(server) == _state(twin)
                return bytes(written.result())
            return bytes(checker.compare_part(server, cid).result())

        def routed_shares(server: SecAggServer) -> Any:
            out = routed(server)
            checker.compare_all(server)  # the part caches were reset
            return out

        def request_bytes(server: SecAggServer) -> dict[int, bytes]:
            twin = copy.deepcopy(server)
            built = _Outcome(
                lambda: {c: m.to_bytes() for c, m in twin.consistency_requests().items()}
            )
            written = _Outcome(lambda: checker.request_bytes(server))
            assert written == built
            assert _state(server) == _state(twin)
            assert server.stage == twin.stage and server.aborted == twin.aborted
            # A second call is refused alike.
            again = _Outcome(lambda: checker.request_bytes(server))
            assert again.error is not None
            assert again == _Outcome(twin.consistency_requests)
            requests: dict[int, bytes] = written.result()
            checker.requests += len(requests)
            return requests

        monkeypatch.setattr(SecAggServer, "roster_bytes", roster_bytes)
        monkeypatch.setattr(SecAggServer, "routed_shares", routed_shares)
        monkeypatch.setattr(SecAggServer, "consistency_request_bytes", request_bytes)

    def compare_part(self, server: SecAggServer, cid: int) -> _Outcome:
        """Both paths for ``cid``, in a drawn order (an object part first, or the bytes)."""
        if self.rng.random() < 0.5:
            built = _Outcome(lambda: server.roster(cid).to_bytes())
            written = _Outcome(lambda: self.roster_bytes(server, cid))
        else:
            written = _Outcome(lambda: self.roster_bytes(server, cid))
            built = _Outcome(lambda: server.roster(cid).to_bytes())
        assert written == built
        self.parts += written.error is None
        return written

    def compare_all(self, server: SecAggServer) -> None:
        """Every config client's part (advertised or not), out of order, some twice."""
        ids = list(server.config.client_ids)
        asked = ids + self.rng.sample(ids, min(3, len(ids)))
        self.rng.shuffle(asked)
        for cid in asked:
            self.compare_part(server, cid)


@st.composite
def _rounds(draw: st.DrawFn) -> dict[str, Any]:
    mode = draw(st.sampled_from(["active", "semi-honest"]))
    n = draw(st.integers(3, 28))
    degree = draw(st.integers(2, n - 1).filter(lambda k: n % 2 == 0 or k % 2 == 0))
    size = degree + 1
    corrupted = draw(st.integers(0, min(2, size - 2))) if mode == "active" else 0
    low = (size + corrupted) // 2 + 1 if mode == "active" else 2
    threshold = draw(st.integers(max(2, low), size))
    ids = list(range(n))  # the runner's dropouts are client indices
    # Up to n - t clients missing from the roster: parts for non-members, brackets,
    # parts without entries; later dropouts give dropped survivors in the trees.
    missing = draw(st.lists(st.sampled_from(ids), max_size=n - threshold, unique=True))
    rest = [i for i in ids if i not in missing]
    later = draw(st.lists(st.sampled_from(rest), max_size=2, unique=True))
    dropouts = {Stage.ADVERTISE_KEYS: missing, Stage.MASKED_INPUT: later}
    return {
        "n": n,
        "mode": mode,
        "degree": degree,
        "threshold": threshold,
        "corrupted": corrupted,
        "dropouts": dropouts,
        "committee_dropouts": draw(st.integers(0, 1)) if mode == "active" else 0,
        "round_index": draw(st.integers(0, 2**32 - 1)),
    }


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_rounds())
def test_every_fast_path_call_of_a_round_is_the_object_path(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    options = dict(options)
    n = options.pop("n")
    with monkeypatch.context() as patch:
        checker = _Checker(patch, random.Random(n))
        rng = np.random.default_rng(n)
        inputs = [rng.integers(0, 2**32, size=3, dtype=np.uint64) for _ in range(n)]
        try:
            report = run_protocol(inputs, graph="harary", **options)
        except ProtocolAbort:
            report = None  # too few left somewhere: every call before was still compared
        for server in checker.servers:  # finished or aborted: the same answers still
            checker.compare_all(server)
    if report is not None:
        expected = np.zeros(3, dtype=np.uint64)
        for cid in report.survivors:
            np.add(expected, inputs[cid - 1], out=expected)
        assert np.array_equal(report.total, expected)
        assert checker.parts > len(report.survivors)
        assert (checker.requests > 0) == (options["mode"] == "active")


def test_the_checker_catches_a_one_byte_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    # The comparison can fail: a fast path off by one byte is caught, in both calls.
    def flipped(call: Callable[..., Any]) -> Callable[..., Any]:
        def wrong(server: SecAggServer, *args: Any) -> Any:
            out = call(server, *args)
            if isinstance(out, dict):
                first = min(out)
                return {**out, first: out[first][:-1] + bytes([out[first][-1] ^ 1])}
            return out[:-1] + bytes([out[-1] ^ 1])

        return wrong

    for name in ("roster_bytes", "consistency_request_bytes"):
        with monkeypatch.context() as patch:
            patch.setattr(SecAggServer, name, flipped(getattr(SecAggServer, name)))
            _Checker(patch, random.Random(0))
            rng = np.random.default_rng(0)
            inputs = [rng.integers(0, 2**32, size=3, dtype=np.uint64) for _ in range(10)]
            with pytest.raises(AssertionError):
                run_protocol(
                    inputs, graph="harary", degree=4, threshold=4, mode="active", corrupted=1
                )


@pytest.mark.parametrize("mode", ["semi-honest", "active"])
def test_an_empty_part_is_written_as_its_roster(mode: str) -> None:
    # 12 clients, degree 2, 2 advertise: each advertiser is in 3 neighbourhoods, so at
    # least 6 clients' parts hold no entry at all.
    if mode == "active":
        cfg, _keys, clients, _inputs = active_harary_parties(12, 2, 2, 0, 2, seed=1)
    else:
        cfg = SecAggConfig(
            client_ids=tuple(range(1, 13)), threshold=2, vector_length=2, graph="harary", degree=2
        )
        clients = {cid: SecAggClient(cfg, cid) for cid in cfg.client_ids}
    server = SecAggServer(cfg)
    for cid in (1, 2):
        deliver(server, clients[cid].advertise_keys())
    reveal_committee(server, {cid: clients[cid] for cid in (1, 2)})
    empty = [cid for cid in cfg.client_ids if not server.roster(cid).entries]
    assert len(empty) >= 6
    for cid in empty:
        data = server.roster_bytes(cid)
        assert data == server.roster(cid).to_bytes()
        assert decode_message(data) == server.roster(cid)


def test_a_refused_committee_aborts_both_paths_alike() -> None:
    # No committee member reveals: the close aborts, with the same error and state.
    cfg, _keys, clients, _inputs = active_harary_parties(10, 4, 4, 1, 2, seed=3)
    server = SecAggServer(cfg)
    for client in clients.values():
        deliver(server, client.advertise_keys())
    reveal_committee(server, {})
    twin = copy.deepcopy(server)
    written = _Outcome(lambda: server.roster_bytes(2))
    built = _Outcome(lambda: twin.roster(2))
    assert isinstance(written.error, ProtocolAbort)
    assert written == built
    assert server.aborted and twin.aborted
    assert _state(server) == _state(twin)
    assert _Outcome(lambda: server.roster_bytes(3)) == _Outcome(lambda: twin.roster(3))


def _old_assemble(
    records: Any, order: Any, recipients: list[int], starts: list[int], stops: list[int]
) -> list[bytes]:
    """``_routing._assemble`` as it was: a take of the records' own dtype."""
    step = records.dtype.itemsize
    size = _routing._GROUP_HEAD.size
    buffer = np.zeros(size * len(recipients) + step * len(order), dtype=np.uint8)
    spans, at = [], 0
    for recipient, start, stop in zip(recipients, starts, stops, strict=True):
        end = at + size + step * (stop - start)
        head = _routing._GROUP_HEAD.pack(recipient, stop - start)
        buffer[at : at + size] = np.frombuffer(head, np.uint8)
        target = buffer[at + size : end].view(records.dtype)
        np.take(records, order[start:stop], out=target, mode="clip")
        spans.append((at, end))
        at = end
    return [buffer[a:b].tobytes() for a, b in spans]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    wide=st.booleans(),
    width=st.integers(0, 40),
    count=st.integers(0, 12),
    groups=st.integers(1, 5),
    data=st.data(),
)
def test_routing_gather_is_the_structured_take(
    wide: bool, width: int, count: int, groups: int, data: st.DataObject
) -> None:
    """The routed bodies (a head and a view of the records gathered bundle by bundle) are
    the bytes of the structured take of the joined records, in ``order``."""
    dtype = _blob_dtype(wide, width)
    raw = data.draw(st.binary(min_size=count * dtype.itemsize, max_size=count * dtype.itemsize))
    records = np.frombuffer(raw, dtype=np.uint8).view(dtype).copy()
    # The records, cut into bundles (packs) back to back, some of them empty.
    cuts_at = sorted(data.draw(st.lists(st.integers(0, count), max_size=4)))
    bounds = [0, *cuts_at, count]
    packs = [
        _PackedBlobs(tuple(range(1, b - a + 1)), width, wide=wide, records=records[a:b].copy())
        for a, b in itertools.pairwise(bounds)
    ]
    packs = [p for p in packs if len(p)]
    # A kept subset of the records, each used once, in any order.
    keep = np.asarray(data.draw(st.lists(st.booleans(), min_size=count, max_size=count)), bool)
    kept = np.flatnonzero(keep).tolist()
    order = np.asarray(data.draw(st.permutations(kept)) if kept else [], dtype=np.intp)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(order)), min_size=groups - 1)))
    starts, stops = [0, *cuts], [*cuts, len(order)]
    recipients = list(range(1, len(starts) + 1))
    if count:
        gathered = _routing._gathered(packs, order, keep)
        step = gathered.dtype.itemsize
        flat = gathered.view(np.uint8).reshape(-1).tobytes()
    else:
        step, flat = dtype.itemsize, b""
    new = [
        _routing._GROUP_HEAD.pack(r, b - a) + flat[a * step : b * step]
        for r, a, b in zip(recipients, starts, stops, strict=True)
    ]
    assert new == _old_assemble(records, order, recipients, starts, stops)


def test_survivor_signature_wire_cache_follows_its_fields() -> None:
    one = SurvivorSignature(signer=7, signature=b"a" * 64)
    two = SurvivorSignature(signer=7, signature=b"b" * 64)
    request = UnmaskRequest(
        session_id=b"s" * 32,
        round_index=1,
        recipient=7,
        survivors=(7,),
        dropped=(),
        signatures=(one,),
    )
    first = request.to_bytes()
    assert one._wire() == (7).to_bytes(4, "big") + b"a" * 64
    assert two._wire() == (7).to_bytes(4, "big") + b"b" * 64  # no cache shared
    replaced = dataclasses.replace(one, signer=9)
    assert replaced._wire() == (9).to_bytes(4, "big") + b"a" * 64
    assert one == SurvivorSignature(signer=7, signature=b"a" * 64)  # the cache is no field
    assert hash(one) == hash(SurvivorSignature(signer=7, signature=b"a" * 64))
    assert copy.deepcopy(one)._wire() == one._wire() == copy.copy(one)._wire()
    assert dataclasses.replace(request, signatures=(two,)).to_bytes() != first
    assert UnmaskRequest.from_bytes(first) == request


def _ask_patterns(ids: list[int], rng: random.Random) -> list[int]:
    """Ids in the orders a driver may ask them: in order, from the middle on, twice in a
    row, backwards, at random."""
    middle = len(ids) // 2
    again = [c for c in ids[:6] for _ in (0, 1)]
    return [
        *ids,
        *ids[middle:],
        *again,
        *reversed(ids[-30:]),
        *rng.sample(ids, 60),
    ]


@pytest.mark.parametrize("mode", ["semi-honest", "active"])
def test_parts_past_several_batches_in_any_order(mode: str) -> None:
    # More than PROOF_BATCH (256) clients, not a multiple of it, a run of them missing
    # from the roster; the object path and the written path asked in turn.
    n = 601 if mode == "semi-honest" else 281
    if mode == "active":
        cfg, _keys, clients, _inputs = active_harary_parties(n, 10, 7, 1, 2, seed=n)
    else:
        cfg = SecAggConfig(
            client_ids=tuple(range(1, n + 1)),
            threshold=3,
            vector_length=2,
            graph="harary",
            degree=4,
        )
        clients = {cid: SecAggClient(cfg, cid) for cid in cfg.client_ids}
    ids = list(cfg.client_ids)
    advertised = {c: clients[c] for c in ids if c % 7 and not 300 <= c < 320}
    server = SecAggServer(cfg)
    for client in advertised.values():
        deliver(server, client.advertise_keys())
    reveal_committee(server, advertised)
    rng = random.Random(n)
    expected = {c: server.roster(c).to_bytes() for c in ids}
    compared = 0
    for step, cid in enumerate(_ask_patterns(ids, rng)):
        if step % 3 == 0:  # an object part in between: the other cache moves on
            assert server.roster(cid).to_bytes() == expected[cid]
        assert server.roster_bytes(cid) == expected[cid], cid
        compared += 1
    assert compared > n + n // 2


def test_consistency_request_wires_past_several_batches() -> None:
    # Tiny survivor trees and one of three batches; neighbourhoods with survivors,
    # clients that dropped and ids past either end.
    session = b"c" * 32
    rng = random.Random(7)
    for count in (2, 3, 5, 700):
        survivors = tuple(sorted(rng.sample(range(1, 3 * count + 2), count)))
        tree = survivor_tree(session, survivors)
        hoods = [
            frozenset(rng.sample(survivors, rng.randint(1, min(count, 12))))
            | {recipient}
            | frozenset(rng.sample(range(1, 3 * count + 5), 3))
            for recipient in survivors
        ]
        built = [
            ConsistencyRequest._trusted(
                session_id=session,
                round_index=5,
                recipient=recipient,
                survivors=pick(survivors, positions),
                proof=proof,
            ).to_bytes()
            for recipient, (positions, proof) in zip(
                survivors, neighbourhood_proofs(tree, hoods), strict=True
            )
        ]
        assert consistency_request_wires(tree, survivors, hoods, session, 5) == built


def test_parts_of_sparse_ids_up_to_the_largest() -> None:
    # Ids spread over the whole u32 range, the largest id included.
    rng = random.Random(3)
    ids = sorted({*rng.sample(range(1, MAX_CLIENT_ID), 299), MAX_CLIENT_ID})
    cfg = SecAggConfig(
        client_ids=tuple(ids), threshold=3, vector_length=2, graph="harary", degree=4
    )
    server = SecAggServer(cfg)
    for cid in ids:
        if rng.random() < 0.8 or cid == MAX_CLIENT_ID:
            deliver(server, SecAggClient(cfg, cid).advertise_keys())
    asked = rng.sample(ids, len(ids))
    written = {cid: server.roster_bytes(cid) for cid in ids[:100] + asked}
    for cid in ids:
        assert written[cid] == server.roster(cid).to_bytes()
