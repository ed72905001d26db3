"""The active mode over Flower, with node-pinned policy (in-process grid double; no Ray).

Each node's policy (mode, minimum threshold, n_C, identity key, registry) is
its own node config, never the server's.  A round over Flower gives the exact
sum with signed keys and the ConsistencyCheck stage; a node refuses every
proposed round weaker than its policy before any key exists; the identity key
is read from its file at each restore and never reaches ``Context.state``; a
server (or anyone on the channel) that substitutes a registry, a key, a
survivor set or signatures is refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp

from privfed.errors import ParameterError, ParameterTypeError, ProtocolAbort
from privfed.flower import SecAggRound, _wire, add_secagg_handlers
from privfed.flower.client import STATE_KEY, JournalIn
from privfed.flower.policy import (
    NodePolicy,
    load_identity_key,
    load_registry,
    write_identity_key,
)
from privfed.secagg import (
    CommitteeRequest,
    IdentityEnrolment,
    IdentityKey,
    IdentityRegistry,
    Roster,
    SecAggConfig,
    SecurityMode,
    Stage,
    UnmaskRequest,
    decode_message,
)
from privfed.secagg.protocol.messages import ConsistencyRequest, SurvivorSignature
from privfed.secagg.protocol.state import encode_config

N = 5
L = 6
FIRST = 1001


@dataclasses.dataclass
class Federation:
    keys: dict[int, IdentityKey]
    registry: IdentityRegistry
    folder: Path

    def node_config(self, cid: int, **policy: object) -> dict[str, object]:
        config: dict[str, object] = {
            "privfed-mode": "active",
            "privfed-min-threshold": 4,
            "privfed-corrupted": 1,
            "privfed-identity-key": str(self.folder / f"node-{cid}.key"),
            "privfed-registry": str(self.folder / "registry.json"),
        }
        config.update({f"privfed-{k.replace('_', '-')}": v for k, v in policy.items()})
        return config


@pytest.fixture
def federation(tmp_path: Path) -> Federation:
    keys = {cid: IdentityKey.generate() for cid in range(1, N + 1)}
    registry = IdentityRegistry.of(keys, assumed_corrupted=1)
    registry.save(tmp_path / "registry.json")
    for cid, key in keys.items():
        write_identity_key(tmp_path / f"node-{cid}.key", key)
    return Federation(keys, registry, tmp_path)


def _values(context: Context, config: Any) -> np.ndarray:
    pid = int(context.node_config["partition-id"])
    return np.arange(config.vector_length, dtype=np.uint64) * 1000 + pid


def _expected(pids: Iterable[int]) -> np.ndarray:
    return sum((np.arange(L, dtype=np.uint64) * 1000 + p for p in pids), np.zeros(L, np.uint64))


def _tamper_grid(base: type[Any]) -> type[Any]:
    """The grid double with a man in the middle: ``tamper[stage](node, message)`` first."""

    class TamperGrid(base):  # type: ignore[misc]
        tamper: ClassVar[dict[Stage, Callable[[int, Message], None]]] = {}

        def send_and_receive(
            self, messages: Iterable[Message], *, timeout: float | None = None
        ) -> Iterable[Message]:
            batch = list(messages)
            for message in batch:
                stage = _wire.STAGE_OF_TYPE.get(message.metadata.message_type)
                if stage in self.tamper:
                    self.tamper[stage](int(message.metadata.dst_node_id), message)
            replies: Iterable[Message] = super().send_and_receive(batch, timeout=timeout)
            return replies

    return TamperGrid


def _snapshot_grid(base: type[Any]) -> type[Any]:
    """The grid double keeping every node's protocol state as it was before UNMASKING."""

    class Snapshots(base):  # type: ignore[misc]
        before_unmask: dict[int, ConfigRecord]

        def send_and_receive(
            self, messages: Iterable[Message], *, timeout: float | None = None
        ) -> Iterable[Message]:
            batch = list(messages)
            if batch and batch[0].metadata.message_type == _wire.MESSAGE_TYPES[Stage.UNMASKING]:
                self.before_unmask = {
                    n: ConfigRecord(dict(c.state.config_records[STATE_KEY]))
                    for n, c in self.contexts.items()
                }
            replies: Iterable[Message] = super().send_and_receive(batch, timeout=timeout)
            return replies

    return Snapshots


def _grid(
    federation: Federation,
    cls: type[Any],
    policies: Mapping[int, Mapping[str, object]] | None = None,
) -> Any:
    app = add_secagg_handlers(ClientApp(), _values, journal=JournalIn(federation.folder / "j"))
    grid = cls(app, N, first_node_id=FIRST)
    for i, context in enumerate(grid.contexts.values()):
        policy = dict((policies or {}).get(i + 1, {}))
        context.node_config.update(federation.node_config(i + 1, **policy))
    return grid


def _round(federation: Federation, threshold: int = 4, **fields: object) -> SecAggRound:
    config_fields: dict[str, object] = {
        "mode": "active",
        "identities": federation.registry,
        "corrupted": 1,
    }
    config_fields.update(fields)
    return SecAggRound(
        threshold=threshold,
        vector_length=L,
        timeout=1.0,
        config_fields={k: v for k, v in config_fields.items() if v is not None},
    )


MAPPING = {FIRST + i: i + 1 for i in range(N)}


def _errors(grid: Any, stage: Stage) -> dict[int, str]:
    kind = _wire.MESSAGE_TYPES[stage]
    return {
        int(reply.metadata.src_node_id): str(reply.error.reason)
        for reply in grid.delivered
        if reply.has_error() and reply.metadata.message_type == kind
    }


# -- the round -------------------------------------------------------------------------------


def test_an_active_round_over_flower_gives_the_exact_sum(
    federation: Federation,
    loopback: Any,
) -> None:
    grid = _grid(federation, loopback)
    result = _round(federation).run(grid, MAPPING)
    assert result.config.active and result.config.identities == federation.registry
    np.testing.assert_array_equal(result.total, _expected(range(N)))
    assert result.survivors == (1, 2, 3, 4, 5)
    assert not result.errors and not result.refused
    # The ConsistencyCheck stage ran over Flower: one signed survivor set per node.
    consist = [r for r in grid.delivered if r.metadata.message_type.endswith("_consist")]
    assert len(consist) == N and not any(r.has_error() for r in consist)


def test_an_active_round_survives_a_dropout_at_the_consistency_check(
    federation: Federation,
    loopback: Any,
) -> None:
    def drop(node: int, message: Message) -> None:
        if node == FIRST + 4:
            message.content.config_records[_wire.RECORD]["message"] = b"garbage"

    grid = _grid(federation, _tamper_grid(loopback))
    grid.tamper = {Stage.CONSISTENCY_CHECK: drop}
    result = _round(federation).run(grid, MAPPING)
    # Client 5 sent its masked input (it is in the sum) but signed nothing.
    np.testing.assert_array_equal(result.total, _expected(range(N)))
    assert result.dropped[Stage.CONSISTENCY_CHECK] == (5,)
    assert result.survivors == (1, 2, 3, 4, 5)


def _state_bytes(context: Context) -> bytes:
    """Every byte a node's ``Context.state`` holds: all records, every field, as stored."""
    out = bytearray()
    for record in context.state.config_records.values():
        for value in record.values():
            for item in value if isinstance(value, list) else [value]:
                out += item if isinstance(item, bytes) else str(item).encode()
    for arrays in context.state.array_records.values():
        for array in arrays.values():
            out += array.data
    for metrics in context.state.metric_records.values():
        out += str(dict(metrics)).encode()
    return bytes(out)


def test_the_identity_key_never_reaches_context_state(
    federation: Federation, loopback: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After every message, no record of any node's stored state holds its private key."""
    grid = _grid(federation, loopback)
    snapshots: list[tuple[int, bytes]] = []
    original = loopback.send_and_receive

    def recording(self: Any, messages: Iterable[Message], **kw: Any) -> Any:
        replies = original(self, messages, **kw)
        for node, context in self.contexts.items():
            if STATE_KEY in context.state.config_records:
                snapshots.append((node, _state_bytes(context)))
        return replies

    monkeypatch.setattr(loopback, "send_and_receive", recording)
    result = _round(federation).run(grid, MAPPING)
    assert result.survivors == (1, 2, 3, 4, 5)
    assert len(snapshots) == 5 * N  # after each of the five stages
    for node, blob in snapshots:
        key = federation.keys[MAPPING[node]]
        pem = (federation.folder / f"node-{MAPPING[node]}.key").read_bytes()
        assert key.private_bytes() not in blob
        assert key.private_bytes().hex().encode() not in blob
        assert pem not in blob and b"PRIVATE KEY" not in blob
        # ... while the registry's root (what the node's client holds in place of the
        # registry) is there, and no key of the registry in full: the state is O(k), not O(n).
        assert federation.registry.commitment.root.hex().encode() in blob
        assert federation.registry.to_json().encode() not in blob


# -- the registry by digest -------------------------------------------------------------------


def _active_config(registry: IdentityRegistry, corrupted: int) -> SecAggConfig:
    return SecAggConfig(
        client_ids=tuple(range(1, N + 1)),
        threshold=4,
        vector_length=L,
        mode=SecurityMode.ACTIVE,
        corrupted=corrupted,
        identities=registry,
    )


def test_the_config_names_the_registry_by_digest_and_the_node_pins_it(
    federation: Federation,
) -> None:
    policy = NodePolicy.from_node_config(federation.node_config(1))
    config = _active_config(federation.registry, corrupted=1)
    sent = encode_config(config, registry_by_digest=True)
    # No one's key travels: 32 bytes stand for the registry.
    assert all(key.public_key.hex().encode() not in sent for key in federation.keys.values())
    assert federation.registry.digest in sent
    assert len(sent) < len(encode_config(config)) - N * 32
    got = policy.proposed_config(sent)
    # The node's client holds the registry's root (the same digest), not the registry.
    assert got == config.for_clients() and got.identities == federation.registry.commitment
    assert got.digest == config.digest and got.bound_session_id == config.bound_session_id
    policy.check(got, 1)  # the proposal the node runs
    # A registry of the server's own (one field changed) is refused by its digest alone ...
    other = IdentityRegistry(federation.registry.public_keys, 0)
    forged = encode_config(_active_config(other, corrupted=0), registry_by_digest=True)
    with pytest.raises(ProtocolAbort, match="identity registry is not this node's own"):
        policy.proposed_config(forged)
    # ... a node without an identity says what it lacks ...
    plain = NodePolicy.from_node_config({"privfed-mode": "semi-honest"})
    with pytest.raises(ProtocolAbort, match="needs this node's identity"):
        plain.proposed_config(sent)
    # ... and sent in full, the same registry is refused by the policy's n_C rule.
    lowered = NodePolicy.from_node_config(federation.node_config(1, corrupted=0))
    inline = lowered.proposed_config(encode_config(_active_config(other, corrupted=0)))
    with pytest.raises(ProtocolAbort, match="n_C"):
        lowered.check(inline, 1)


# -- a node refuses a weaker round -----------------------------------------------------------

#: (case, node policy override, SecAggRound changes, the refusal's words)
WEAKER: list[tuple[str, dict[str, object], dict[str, object], str]] = [
    ("semi-honest mode", {}, {"mode": None, "identities": None, "corrupted": None}, "mode"),
    ("threshold below the minimum", {"min_threshold": 5}, {}, "privfed-min-threshold 5"),
    ("corrupted below the policy", {"corrupted": 2}, {"threshold": 5}, "corrupted 1 is below"),
    # The server can only lower n_C below the registry's with a registry of its own: its
    # digest (all a node is sent) is not the node's; sent in full, see the test below.
    ("corrupted below the registry", {"corrupted": 0}, {"corrupted": 0, "registry_nc": 0},
     "identity registry is not this node's own"),
    ("sparse graph lowers the threshold", {}, {"graph": "harary", "degree": 2, "threshold": 3},
     "per neighbourhood"),
]  # fmt: skip


def _weaker_round(federation: Federation, changes: dict[str, object]) -> SecAggRound:
    changes = dict(changes)
    threshold = int(changes.pop("threshold", 4))  # type: ignore[call-overload]
    if "registry_nc" in changes:
        changes.pop("registry_nc")
        changes["identities"] = IdentityRegistry(federation.registry.public_keys, 0)
    graph = changes.pop("graph", "complete")
    degree = changes.pop("degree", None)
    flow = _round(federation, threshold, **changes)
    flow.graph, flow.degree = graph, degree  # type: ignore[assignment]
    return flow


@pytest.mark.parametrize(
    ("policy", "changes", "words"),
    [case[1:] for case in WEAKER],
    ids=[case[0] for case in WEAKER],
)
def test_every_honest_node_refuses_a_weaker_round(
    federation: Federation,
    loopback: Any,
    policy: dict[str, object],
    changes: dict[str, object],
    words: str,
) -> None:
    grid = _grid(federation, loopback, {cid: policy for cid in range(1, N + 1)})
    with pytest.raises(ProtocolAbort) as info:
        _weaker_round(federation, changes).run(grid, MAPPING)
    del info  # a sparse round notices no roster only when it sends the parts
    errors = _errors(grid, Stage.ADVERTISE_KEYS)
    assert set(errors) == set(MAPPING)
    assert all("policy refuses the round" in e and words in e for e in errors.values()), errors
    # Nobody made a key: no node stored any protocol state.
    assert all(STATE_KEY not in c.state.config_records for c in grid.contexts.values())


def test_the_same_round_is_accepted_by_nodes_whose_policy_it_meets(
    federation: Federation,
    loopback: Any,
) -> None:
    """The control of the table above: a policy the round meets is not refused."""
    grid = _grid(
        federation, loopback, {cid: {"min_threshold": 4, "corrupted": 1} for cid in range(1, 6)}
    )
    assert _round(federation).run(grid, MAPPING).survivors == (1, 2, 3, 4, 5)


def test_a_semi_honest_policy_with_t_not_above_n_c_refuses(
    federation: Federation,
    loopback: Any,
) -> None:
    grid = _grid(federation, loopback)
    for context in grid.contexts.values():
        context.node_config.update(
            {"privfed-mode": "semi-honest", "privfed-corrupted": 2, "privfed-min-threshold": 2}
        )
        for key in ("privfed-identity-key", "privfed-registry"):
            del context.node_config[key]
    flow = SecAggRound(threshold=2, vector_length=L, timeout=1.0, config_fields={"corrupted": 2})
    with pytest.raises(ProtocolAbort):
        flow.run(grid, MAPPING)
    assert all("does not exceed n_C = 2" in e for e in _errors(grid, Stage.ADVERTISE_KEYS).values())
    ok = SecAggRound(threshold=3, vector_length=L, timeout=1.0, config_fields={"corrupted": 2})
    np.testing.assert_array_equal(ok.run(grid, MAPPING).total, _expected(range(N)))


def test_a_node_without_an_identity_refuses_an_active_round(
    federation: Federation,
    loopback: Any,
) -> None:
    grid = _grid(federation, loopback)
    context = grid.contexts[FIRST]
    for key in ("privfed-identity-key", "privfed-registry"):
        del context.node_config[key]
    context.node_config["privfed-mode"] = "semi-honest"
    result = _round(federation).run(grid, MAPPING)
    assert result.survivors == (2, 3, 4, 5)
    assert "needs this node's identity" in _errors(grid, Stage.ADVERTISE_KEYS)[FIRST]


# -- a server that substitutes ---------------------------------------------------------------


def test_a_server_that_substitutes_the_registry_is_refused(
    federation: Federation,
    loopback: Any,
) -> None:
    """The server's own registry (fresh keys it holds for every id): every node refuses."""
    fake = IdentityRegistry.of(
        {c: IdentityKey.generate() for c in range(1, N + 1)}, assumed_corrupted=1
    )
    grid = _grid(federation, loopback)
    with pytest.raises(ProtocolAbort):
        _round(federation, identities=fake).run(grid, MAPPING)
    errors = _errors(grid, Stage.ADVERTISE_KEYS)
    assert set(errors) == set(MAPPING)
    assert all("registry is not this node's own" in e for e in errors.values())


def test_a_server_that_substitutes_one_key_in_the_registry_is_refused(
    federation: Federation,
    loopback: Any,
) -> None:
    """One client's key replaced by the server's (to read the shares sent to it)."""
    keys = dict(federation.registry.public_keys)
    keys[3] = IdentityKey.generate().public_key
    grid = _grid(federation, loopback)
    with pytest.raises(ProtocolAbort):
        _round(federation, identities=IdentityRegistry(keys, 1)).run(grid, MAPPING)
    assert len(_errors(grid, Stage.ADVERTISE_KEYS)) == N


def test_a_server_that_substitutes_a_round_key_in_the_roster_is_refused(
    federation: Federation,
    loopback: Any,
) -> None:
    """The server relays client 3's signature with its own X25519 key: nobody shares keys."""
    substitute = os.urandom(32)

    def swap(node: int, message: Message) -> None:
        record = message.content.config_records[_wire.RECORD]
        roster = decode_message(record["message"])  # type: ignore[arg-type]
        assert isinstance(roster, Roster)
        entries = tuple(
            dataclasses.replace(e, encryption_public_key=substitute) if e.client_id == 3 else e
            for e in roster.entries
        )
        record["message"] = dataclasses.replace(roster, entries=entries).to_bytes()

    from privfed.secagg.primitives import keys as x25519

    substitute = x25519.KeyPair.generate().public_key
    grid = _grid(federation, _tamper_grid(loopback))
    grid.tamper = {Stage.SHARE_KEYS: swap}
    with pytest.raises(ProtocolAbort) as info:
        _round(federation).run(grid, MAPPING)
    assert info.value.stage == "SHARE_KEYS"
    errors = _errors(grid, Stage.SHARE_KEYS)
    assert set(errors) == set(MAPPING)
    others = [e for node, e in errors.items() if node != FIRST + 2]
    assert all("client 3 carry no valid signature" in e for e in others), errors


def test_a_client_id_that_is_not_the_nodes_identity_is_refused(
    federation: Federation,
    loopback: Any,
) -> None:
    """Nodes 1 and 2 swapped: each would sign as the other; both refuse (3 < t are left)."""
    grid = _grid(federation, loopback)
    swapped = {**MAPPING, FIRST: 2, FIRST + 1: 1}
    with pytest.raises(ProtocolAbort, match="only 3 clients advertised"):
        _round(federation).run(grid, swapped)
    errors = _errors(grid, Stage.ADVERTISE_KEYS)
    assert set(errors) == {FIRST, FIRST + 1}
    assert all("not this node's identity" in e for e in errors.values())


# -- attacks of tests/secagg/test_proto_active*.py, over Flower -------------------------------


def test_forged_survivor_set_signatures_make_nodes_reveal_nothing(
    federation: Federation,
    loopback: Any,
) -> None:
    """The unmask requests carry zeroed signatures: every node refuses; no share leaves."""

    def forge(node: int, message: Message) -> None:
        record = message.content.config_records[_wire.RECORD]
        request = decode_message(record["message"])  # type: ignore[arg-type]
        assert isinstance(request, UnmaskRequest)
        fake = tuple(SurvivorSignature(s.signer, bytes(64)) for s in request.signatures)
        record["message"] = dataclasses.replace(request, signatures=fake).to_bytes()

    grid = _grid(federation, _tamper_grid(loopback))
    grid.tamper = {Stage.UNMASKING: forge}
    with pytest.raises(ProtocolAbort):
        _round(federation).run(grid, MAPPING)
    errors = _errors(grid, Stage.UNMASKING)
    assert set(errors) == set(MAPPING)
    unmask = [r for r in grid.delivered if r.metadata.message_type.endswith("_unmask")]
    assert all(r.has_error() for r in unmask)


def test_a_survivor_set_shown_to_one_node_only_gets_no_unmasking_over_it(
    federation: Federation,
    loopback: Any,
) -> None:
    """Equivocation: node 1 is asked to sign a set without client 5; its signature is useless.

    Nobody else signed node 1's set, so no ``t`` signatures on it exist and
    node 1 is never asked to unmask; the server refuses its signature (not on
    the set it holds) and the round completes from the other four signers.
    """

    def narrow(node: int, message: Message) -> None:
        if node != FIRST:
            return
        record = message.content.config_records[_wire.RECORD]
        request = decode_message(record["message"])  # type: ignore[arg-type]
        assert isinstance(request, ConsistencyRequest)
        record["message"] = dataclasses.replace(request, survivors=(1, 2, 3, 4)).to_bytes()

    grid = _grid(federation, _tamper_grid(loopback))
    grid.tamper = {Stage.CONSISTENCY_CHECK: narrow}
    result = _round(federation).run(grid, MAPPING)
    assert 1 in result.refused  # the server checks the signature on its own set
    assert result.dropped[Stage.CONSISTENCY_CHECK] == (1,)
    np.testing.assert_array_equal(result.total, _expected(range(N)))


def test_a_replayed_session_is_refused_in_active_mode(
    federation: Federation,
    loopback: Any,
) -> None:
    grid = _grid(federation, loopback)
    session = os.urandom(32)
    _round(federation).run(grid, MAPPING, session_id=session)
    with pytest.raises(ProtocolAbort):
        _round(federation).run(grid, MAPPING, session_id=session)
    errors = _errors(grid, Stage.ADVERTISE_KEYS)
    assert set(errors) == set(MAPPING)
    assert all("already took part" in e for e in errors.values())


def test_a_rolled_back_state_does_not_answer_again(
    federation: Federation,
    loopback: Any,
) -> None:
    """A node's state wound back to before its reveal (active mode) is refused at restore."""
    from privfed.flower.client import _Handlers

    grid = _grid(federation, _snapshot_grid(loopback))
    assert _round(federation).run(grid, MAPPING).survivors == (1, 2, 3, 4, 5)
    old = grid.before_unmask[FIRST]
    context = grid.contexts[FIRST]
    context.state[STATE_KEY] = old
    handlers = _Handlers(_values, JournalIn(federation.folder / "j"))
    session = old["session"]
    assert isinstance(session, bytes)
    with pytest.raises(ProtocolAbort, match="rolled-back"):
        handlers._restore(context, session)


def _every_stage_grid(base: type[Any]) -> type[Any]:
    """The grid double keeping every node's protocol state as it was before each stage."""

    class Snapshots(base):  # type: ignore[misc]
        before: dict[str, dict[int, ConfigRecord]]

        def send_and_receive(
            self, messages: Iterable[Message], *, timeout: float | None = None
        ) -> Iterable[Message]:
            batch = list(messages)
            if not hasattr(self, "before"):
                self.before = {}
            kind = batch[0].metadata.message_type if batch else None
            if kind is not None and kind != _wire.MESSAGE_TYPES[Stage.ADVERTISE_KEYS]:
                self.before[kind] = {
                    n: ConfigRecord(dict(c.state.config_records[STATE_KEY]))
                    for n, c in self.contexts.items()
                    if STATE_KEY in c.state.config_records
                }
            replies: Iterable[Message] = super().send_and_receive(batch, timeout=timeout)
            return replies

    return Snapshots


def test_a_state_that_outlived_its_journal_does_not_answer(
    federation: Federation,
    loopback: Any,
) -> None:
    """The journal lost while the state survives: refused before every stage that reveals."""
    from privfed.flower.client import _Handlers

    grid = _grid(federation, _every_stage_grid(loopback))
    assert _round(federation).run(grid, MAPPING).survivors == (1, 2, 3, 4, 5)
    context = grid.contexts[FIRST]
    latest = context.state.config_records[STATE_KEY]
    session = latest["session"]
    assert isinstance(session, bytes)
    # The normal restart: a new process, the same journal folder, the state it left.
    handlers = _Handlers(_values, JournalIn(federation.folder / "j"))
    assert handlers._restore(context, session)[0].done
    # Every later stage's state, with an empty journal (the folder lost or replaced).
    empty = _Handlers(_values, JournalIn(federation.folder / "lost"))
    stages = {Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK, Stage.UNMASKING}
    kinds = {_wire.MESSAGE_TYPES[s] for s in stages}
    assert kinds <= set(grid.before)
    for kind in sorted(kinds):
        context.state[STATE_KEY] = grid.before[kind][FIRST]
        with pytest.raises(ProtocolAbort, match="journal does not know"):
            empty._restore(context, session)
    context.state[STATE_KEY] = latest
    with pytest.raises(ProtocolAbort, match="journal does not know"):
        empty._restore(context, session)


# -- the policy and its files ----------------------------------------------------------------


def test_the_policy_file_gives_the_same_policy(
    federation: Federation,
    loopback: Any,
) -> None:
    file = federation.folder / "policy.toml"
    file.write_text(
        'mode = "active"\nmin-threshold = 4\ncorrupted = 1\n'
        'identity-key = "node-2.key"\nregistry = "registry.json"\n'
    )
    policy = NodePolicy.from_node_config({"privfed-policy": str(file)})
    assert policy.mode.value == "active" and policy.min_threshold == 4
    assert policy.client_id == 2 and policy.identity == federation.keys[2]
    assert policy.registry == federation.registry
    # A key given individually overrides the file's.
    stricter = NodePolicy.from_node_config(
        {"privfed-policy": str(file), "privfed-min-threshold": 5}
    )
    assert stricter.min_threshold == 5


@pytest.mark.parametrize(
    ("config", "error", "words"),
    [
        ({"privfed-mode": "paranoid"}, ParameterError, "privfed-mode"),
        ({"privfed-min-threshold": 1}, ParameterError, "privfed-min-threshold"),
        ({"privfed-min-threshold": "four"}, ParameterTypeError, "privfed-min-threshold"),
        ({"privfed-corrupted": -1}, ParameterError, "privfed-corrupted"),
        ({"privfed-mode": "active"}, ParameterError, "privfed-identity-key"),
        ({"privfed-identity-key": "/nonexistent/node.key"}, ParameterError, "identity-key"),
        ({"privfed-registry": "/nonexistent/registry.json"}, ParameterError, "privfed-registry"),
        ({"privfed-policy": "/nonexistent/policy.toml"}, ParameterError, "privfed-policy"),
    ],
)
def test_a_bad_policy_value_is_a_typed_error_naming_its_key(
    config: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        NodePolicy.from_node_config(config)


@pytest.mark.parametrize(
    "text",
    ['mode = "active\n', b"\xff\xfe", "min-threshold = " + "4" * 5_000, "x = " + "[" * 100_000],
    ids=["not-toml", "not-utf8", "past-the-digit-limit", "too-deep"],
)
def test_a_policy_file_toml_cannot_hold_is_a_typed_error(tmp_path: Path, text: str | bytes) -> None:
    file = tmp_path / "policy.toml"
    file.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ParameterError, match="privfed-policy"):
        NodePolicy.from_node_config({"privfed-policy": str(file)})


def test_an_unknown_policy_file_key_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "policy.toml"
    file.write_text('mode = "active"\nmin-treshold = 4\n')
    with pytest.raises(ParameterError, match="min-treshold"):
        NodePolicy.from_node_config({"privfed-policy": str(file)})


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_file_others_can_read_is_refused(
    federation: Federation, loopback: Any, mode: int
) -> None:
    key = federation.folder / "node-1.key"
    assert load_identity_key(key) == federation.keys[1]
    key.chmod(mode)
    with pytest.raises(ParameterError, match="chmod 600") as info:
        load_identity_key(key)
    assert federation.keys[1].private_bytes().hex() not in str(info.value)


def test_key_and_registry_file_formats(
    federation: Federation, loopback: Any, tmp_path: Path
) -> None:
    pem = (federation.folder / "node-1.key").read_text()
    assert pem.startswith("-----BEGIN PRIVATE KEY-----")
    with pytest.raises(FileExistsError):
        write_identity_key(federation.folder / "node-1.key", federation.keys[2])
    bad = tmp_path / "bad.key"
    bad.write_text("not a key")
    bad.chmod(0o600)
    with pytest.raises(ParameterError, match="PKCS#8"):
        load_identity_key(bad)
    assert load_registry(federation.folder / "registry.json") == federation.registry
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ParameterError, match="registry"):
        load_registry(tmp_path / "bad.json")


def test_a_key_the_registry_does_not_enrol_is_refused(
    federation: Federation,
    loopback: Any,
) -> None:
    stranger = federation.folder / "stranger.key"
    write_identity_key(stranger, IdentityKey.generate())
    with pytest.raises(ParameterError, match="enrols"):
        NodePolicy.from_node_config(
            {
                "privfed-identity-key": str(stranger),
                "privfed-registry": str(federation.folder / "registry.json"),
            }
        )


# -- the one-shot sum app ---------------------------------------------------------------------


def test_the_sum_app_runs_the_active_mode_from_its_run_config(
    federation: Federation, loopback: Any
) -> None:
    from flwr.app import RecordDict

    from privfed.flower.secagg_app import expected_sum, sum_client_app, sum_server_app

    run: dict[str, bool | float | int | str] = {
        "num-clients": N, "threshold": 4, "vector-length": L, "rounds": 2, "wait-s": 1.0,
        "secagg-mode": "active", "assumed-corrupted": 1,
        "secagg-registry": str(federation.folder / "registry.json"),
    }  # fmt: skip
    grid = loopback(sum_client_app(journal=JournalIn(federation.folder / "j")), N, run_config=run)
    for i, context in enumerate(grid.contexts.values()):
        context.node_config.update(federation.node_config(i + 1))
    outcomes: list[Any] = []
    app = sum_server_app(on_round=lambda r, outcome, by_client: outcomes.append((r, outcome)))
    app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run))
    assert [r for r, _ in outcomes] == [0, 1]
    for r, outcome in outcomes:
        assert not isinstance(outcome, ProtocolAbort), outcome
        assert outcome.config.active and outcome.survivors == (1, 2, 3, 4, 5)
        np.testing.assert_array_equal(outcome.total, expected_sum(range(N), r, L))
    consist = [r for r in grid.delivered if r.metadata.message_type.endswith("_consist")]
    assert len(consist) == 2 * N


def test_the_one_shot_server_checks_its_mode_and_registry(federation: Federation) -> None:
    from privfed.flower.server import active_mode_fields

    registry = str(federation.folder / "registry.json")
    assert active_mode_fields("semi-honest", None, num_clients=N, corrupted=0) == {}
    with pytest.raises(ParameterError, match="secagg-mode"):
        active_mode_fields("paranoid", registry, num_clients=N, corrupted=1)
    with pytest.raises(ParameterError, match="secagg-registry"):
        active_mode_fields("active", None, num_clients=N, corrupted=1)
    with pytest.raises(ParameterError, match="secagg-registry"):
        active_mode_fields("active", registry, num_clients=N + 1, corrupted=1)
    with pytest.raises(ParameterError, match="assumed-corrupted"):
        active_mode_fields("active", registry, num_clients=N, corrupted=0)
    fields = active_mode_fields("active", registry, num_clients=N, corrupted=1)
    assert fields["identities"] == federation.registry and fields["corrupted"] == 1


def test_a_policy_in_code_for_simulated_nodes(federation: Federation, loopback: Any) -> None:
    """``PolicyFiles`` (picklable): node ``p`` reads its key by partition id; same refusals."""
    import pickle

    from privfed.flower import PolicyFiles

    for cid, key in federation.keys.items():
        write_identity_key(federation.folder / f"pid-{cid - 1}.key", key)
    policy = PolicyFiles(
        federation.folder, min_threshold=4, corrupted=1, key_file="pid-{partition-id}.key"
    )
    policy = pickle.loads(pickle.dumps(policy))  # noqa: S301 -- Ray ships it so
    app = add_secagg_handlers(
        ClientApp(), _values, journal=JournalIn(federation.folder / "j"), policy=policy
    )
    grid = loopback(app, N, first_node_id=FIRST)  # no privfed key in any node config
    np.testing.assert_array_equal(_round(federation).run(grid, MAPPING).total, _expected(range(N)))
    with pytest.raises(ProtocolAbort):
        SecAggRound(threshold=4, vector_length=L, timeout=1.0).run(grid, MAPPING)
    errors = _errors(grid, Stage.ADVERTISE_KEYS)
    assert len(errors) == N and all("mode 'semi-honest' is below" in e for e in errors.values())


def test_an_active_hello_keeps_only_nodes_that_sign_for_their_partition(
    federation: Federation, loopback: Any
) -> None:
    """Node 1002 claims partition 0 (node 1001's): it cannot sign as id 1, so only it is out.

    Without the registry (semi-honest) the same claim pushes both nodes out.
    """
    from privfed.flower import hello

    grid = _grid(federation, loopback)
    grid.contexts[FIRST + 1].node_config["partition-id"] = 0
    nodes = list(grid.contexts)
    assert hello(grid, nodes, registry=federation.registry) == {
        FIRST: 0, FIRST + 2: 2, FIRST + 3: 3, FIRST + 4: 4,
    }  # fmt: skip
    assert hello(grid, nodes) == {FIRST + 2: 2, FIRST + 3: 3, FIRST + 4: 4}
    # A node without an identity is left out of an active hello.
    for key in ("privfed-identity-key", "privfed-registry", "privfed-mode"):
        del grid.contexts[FIRST + 4].node_config[key]
    assert FIRST + 4 not in hello(grid, nodes, registry=federation.registry)


def test_by_default_a_node_takes_only_a_strict_majority_threshold() -> None:
    """A server cannot propose t = 2 of 10, whatever the node's explicit minimum."""
    from privfed.errors import ProtocolAbort
    from privfed.flower import NodePolicy
    from privfed.secagg import SecAggConfig

    def config(t: int, n: int = 10) -> SecAggConfig:
        return SecAggConfig(
            client_ids=tuple(range(1, n + 1)), threshold=t, vector_length=4, session_id=bytes(32)
        )

    default = NodePolicy.from_node_config({})
    default.check(config(6), 1)
    for t in (2, 5):
        with pytest.raises(ProtocolAbort, match="strict majority"):
            default.check(config(t), 1)
    # An explicit minimum adds to the majority floor; it never lowers it.
    explicit = NodePolicy.from_node_config({"privfed-min-threshold": 3})
    with pytest.raises(ProtocolAbort, match="strict majority"):
        explicit.check(config(3), 1)
    with pytest.raises(ProtocolAbort, match="privfed-min-threshold 8"):
        NodePolicy.from_node_config({"privfed-min-threshold": 8}).check(config(7), 1)
    NodePolicy.from_node_config({"privfed-min-threshold": 8}).check(config(8), 1)


# -- active SecAgg+ (a Harary graph) over Flower: roster and survivor-set proofs ---------------


def _harary_round(federation: Federation) -> SecAggRound:
    flow = _round(federation)
    flow.graph, flow.degree = "harary", 4  # type: ignore[assignment]
    return flow


def test_an_active_secagg_plus_round_over_flower_checks_proofs_and_sums_exactly(
    federation: Federation,
    loopback: Any,
) -> None:
    """Each node gets its ConsistencyCheck survivors with a proof of the survivor root."""
    requests: dict[int, ConsistencyRequest] = {}

    def record(node: int, message: Message) -> None:
        raw = message.content.config_records[_wire.RECORD]["message"]
        request = decode_message(raw)  # type: ignore[arg-type]
        assert isinstance(request, ConsistencyRequest)
        requests[node] = request

    grid = _grid(federation, _tamper_grid(loopback))
    grid.tamper = {Stage.CONSISTENCY_CHECK: record}
    result = _harary_round(federation).run(grid, MAPPING)
    assert result.config.active
    np.testing.assert_array_equal(result.total, _expected(range(N)))
    assert result.survivors == (1, 2, 3, 4, 5) and not result.refused
    assert set(requests) == set(MAPPING)
    assert all(r.proof is not None for r in requests.values())


def test_a_survivor_set_narrowed_under_its_proof_is_refused_by_the_node(
    federation: Federation,
    loopback: Any,
) -> None:
    """A survivor left out of node 1's neighbourhood part (proof kept) makes node 1 refuse."""

    def narrow(node: int, message: Message) -> None:
        if node != FIRST:
            return
        record = message.content.config_records[_wire.RECORD]
        request = decode_message(record["message"])  # type: ignore[arg-type]
        assert isinstance(request, ConsistencyRequest) and request.proof is not None
        proof = dataclasses.replace(request.proof, positions=request.proof.positions[:-1])
        narrowed = dataclasses.replace(request, survivors=request.survivors[:-1], proof=proof)
        record["message"] = narrowed.to_bytes()

    grid = _grid(federation, _tamper_grid(loopback))
    grid.tamper = {Stage.CONSISTENCY_CHECK: narrow}
    result = _harary_round(federation).run(grid, MAPPING)
    assert "survivor" in _errors(grid, Stage.CONSISTENCY_CHECK)[FIRST]  # refused, signed nothing
    assert result.dropped[Stage.CONSISTENCY_CHECK] == (1,)
    np.testing.assert_array_equal(result.total, _expected(range(N)))


def test_an_active_secagg_plus_round_over_flower_plays_the_graph_seed_committee(
    federation: Federation,
    loopback: Any,
) -> None:
    """The committee's reveal round trip runs over Flower; each reveal a member sends opens its
    leaf, and a member asked again for another root refuses (it is then a dropout)."""
    asked: dict[int, CommitteeRequest] = {}

    def record(node: int, message: Message) -> None:
        if message.metadata.message_type != _wire.REVEAL_MESSAGE_TYPE:
            return
        raw = message.content.config_records[_wire.RECORD]["message"]
        request = decode_message(raw)  # type: ignore[arg-type]
        assert isinstance(request, CommitteeRequest)
        asked[node] = request

    grid = _grid(federation, _tamper_grid(loopback))
    grid.tamper = {Stage.ADVERTISE_KEYS: record}
    result = _harary_round(federation).run(grid, MAPPING)
    assert result.config.committee and result.config.committee_size == len(asked)
    np.testing.assert_array_equal(result.total, _expected(range(N)))
    assert not result.refused


def test_a_node_refuses_a_weaker_graph_seed_committee(federation: Federation) -> None:
    """A server proposing a smaller committee, or reveals it may leave out, is refused."""
    from privfed.secagg.protocol.committee import default_committee_size

    policy = NodePolicy.from_node_config(federation.node_config(1))
    config = SecAggConfig(
        client_ids=tuple(range(1, N + 1)),
        threshold=4,
        vector_length=4,
        graph="harary",
        degree=4,
        mode="active",
        corrupted=policy.assumed_corrupted,
        identities=federation.registry,
    )
    floor = default_committee_size(N, 5, max(policy.assumed_corrupted, 1))
    assert config.committee_size == floor
    policy.check(config, 1)
    if floor > 1:
        with pytest.raises(ProtocolAbort, match="graph-seed committee"):
            policy.check(dataclasses.replace(config, committee_size=floor - 1), 1)
    with pytest.raises(ProtocolAbort, match="committee_dropouts"):
        policy.check(dataclasses.replace(config, committee_dropouts=1), 1)


# -- the registry by its root: nodes that hold only their enrolment -------------------------


def _enrolments(federation: Federation) -> dict[int, dict[str, object]]:
    """Each node's policy naming its own enrolment file in place of the registry."""
    policies: dict[int, dict[str, object]] = {}
    for cid in federation.keys:
        path = federation.folder / f"enrolment-{cid}.json"
        federation.registry.enrolment(cid).save(path)
        policies[cid] = {"registry": str(path)}
    return policies


@pytest.mark.parametrize("graph", [{}, {"graph": "harary", "degree": 4}])
def test_nodes_holding_only_their_enrolment_run_the_active_round(
    federation: Federation, loopback: Any, graph: dict[str, object]
) -> None:
    grid = _grid(federation, loopback, _enrolments(federation))
    for context in grid.contexts.values():
        policy = NodePolicy.from_node_config(context.node_config)
        assert isinstance(policy.registry, IdentityEnrolment)
    flow = _round(federation)
    for name, value in graph.items():
        setattr(flow, name, value)
    result = flow.run(grid, MAPPING)
    assert result.config.graph.value == graph.get("graph", "complete")
    np.testing.assert_array_equal(result.total, _expected(range(N)))
    assert result.survivors == (1, 2, 3, 4, 5)
    assert not result.errors and not result.refused


def test_an_enrolment_pins_the_node_to_its_own_id_key_and_root(
    federation: Federation, tmp_path: Path
) -> None:
    policies = _enrolments(federation)
    policy = NodePolicy.from_node_config(federation.node_config(2, **policies[2]))
    assert policy.client_id == 2 and policy.assumed_corrupted == 1
    sent = encode_config(_active_config(federation.registry, corrupted=1), registry_by_digest=True)
    got = policy.proposed_config(sent)
    assert got.identities == federation.registry.commitment
    policy.check(got, 2)
    with pytest.raises(ProtocolAbort, match="not this node's identity"):
        policy.check(got, 3)
    # Another node's enrolment with this node's key: the key is not the one it enrols.
    with pytest.raises(ParameterError, match="a key the registry enrols"):
        NodePolicy.from_node_config(federation.node_config(2, **policies[3]))
    # A registry of the server's own (another root) is refused by its digest alone.
    other = IdentityRegistry(federation.registry.public_keys, 0)
    forged = encode_config(_active_config(other, corrupted=0), registry_by_digest=True)
    with pytest.raises(ProtocolAbort, match="identity registry is not this node's own"):
        policy.proposed_config(forged)
    # A tampered enrolment file (its key swapped) fails its own proof when read.
    text = (federation.folder / "enrolment-2.json").read_text()
    # Told apart from a registry by its format field, however the JSON is laid out.
    (tmp_path / "compact.json").write_text(json.dumps(json.loads(text), separators=(",", ":")))
    assert load_registry(tmp_path / "compact.json") == federation.registry.enrolment(2)
    swapped = text.replace(federation.keys[2].public_key.hex(), federation.keys[3].public_key.hex())
    (tmp_path / "swapped.json").write_text(swapped)
    with pytest.raises(ParameterError, match="privfed-registry"):
        NodePolicy.from_node_config(
            federation.node_config(2, registry=str(tmp_path / "swapped.json"))
        )


def test_a_server_refuses_an_enrolment_as_its_registry(federation: Federation) -> None:
    from privfed.flower.server import active_mode_fields

    path = federation.folder / "enrolment-1.json"
    federation.registry.enrolment(1).save(path)
    with pytest.raises(ParameterError, match="secagg-registry"):
        active_mode_fields("active", str(path), num_clients=N, corrupted=1)
    registry_file = str(federation.folder / "registry.json")
    fields = active_mode_fields("active", registry_file, num_clients=N, corrupted=1)
    assert fields["identities"] == federation.registry
