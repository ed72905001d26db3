"""The client-state codec (interface I2): round trips, completeness, rollback refusal."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privfed.errors import MessageFormatError, ParameterTypeError, ProtocolAbort
from privfed.secagg import (
    EncryptedSharesBundle,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    UnmaskRequest,
)
from privfed.secagg.protocol.state import (
    STATE_MAGIC,
    STATE_VERSION,
    FileRevealJournal,
    JournalEntry,
    MemoryRevealJournal,
    RevealJournal,
    RevealKind,
    client_step,
    export_client_state,
    record_answer,
    restore_client_state,
)

IDS = (1, 2, 3, 4)
LENGTH = 6


def _inputs() -> dict[int, np.ndarray]:
    rng = np.random.default_rng(7)
    return {i: rng.integers(0, 2**63, size=LENGTH, dtype=np.uint64) for i in IDS}


def _started(config: SecAggConfig, cid: int) -> MemoryRevealJournal:
    """A journal that knows the client's session (as the node's own does from its start)."""
    journal = MemoryRevealJournal()
    journal.start_session(config.session_id, config.round_index, cid)
    return journal


class _Node:
    """A client that lives only as exported bytes between steps (like a Flower node)."""

    def __init__(self, config: SecAggConfig, cid: int, journal: RevealJournal) -> None:
        self.journal = journal
        self.cid = cid
        self.blob = export_client_state(SecAggClient(config, cid))
        self.history: list[bytes] = [self.blob]

    def step(self, act: Callable[[SecAggClient], Any]) -> Any:
        client = restore_client_state(self.blob, journal=self.journal)
        answer = act(client)
        record_answer(self.journal, client, answer)
        self.blob = export_client_state(client)
        self.history.append(self.blob)
        return answer


def _play(
    nodes: dict[int, _Node], server: SecAggServer, inputs: dict[int, np.ndarray]
) -> tuple[np.ndarray, dict[int, UnmaskRequest]]:
    for cid, node in nodes.items():
        server.receive(node.step(lambda c: c.advertise_keys()), sender=cid)
    roster = server.roster()
    for cid, node in nodes.items():
        out = node.step(lambda c: c.share_keys(roster))
        bundle = EncryptedSharesBundle.from_shares([out[r] for r in sorted(out)])
        server.receive(bundle, sender=cid)
    routed = server.routed_shares()
    for cid, node in nodes.items():
        server.receive(
            node.step(lambda c, cid=cid: c.masked_input(routed[cid], inputs[cid])), sender=cid
        )
    requests = server.unmask_requests()
    for cid, node in nodes.items():
        server.receive(node.step(lambda c, cid=cid: c.unmask(requests[cid])), sender=cid)
    return server.finalize(), requests


def test_a_round_through_exported_state_gives_the_exact_sum() -> None:
    config = SecAggConfig(client_ids=IDS, threshold=3, vector_length=LENGTH)
    nodes = {cid: _Node(config, cid, MemoryRevealJournal()) for cid in IDS}
    inputs = _inputs()
    total, _ = _play(nodes, SecAggServer(config), inputs)
    expected = np.zeros(LENGTH, dtype=np.uint64)
    for values in inputs.values():
        expected += values
    np.testing.assert_array_equal(total, expected)
    # Encoding is canonical: restore then export gives the same bytes.
    for node in nodes.values():
        for blob in node.history:
            again = restore_client_state(blob, journal=_started(config, node.cid))
            assert export_client_state(again) == blob
            assert blob[:5] == STATE_MAGIC + bytes([STATE_VERSION])


def test_every_attribute_at_every_stage_is_encodable() -> None:
    """Completeness: exporting names any attribute whose type the codec does not handle.

    The round above touches every phase; here we also cover the aborted phase and
    show that an unknown attribute type is refused with its name.
    """
    config = SecAggConfig(client_ids=IDS, threshold=3, vector_length=LENGTH)
    nodes = {cid: _Node(config, cid, MemoryRevealJournal()) for cid in IDS}
    _play(nodes, SecAggServer(config), _inputs())
    seen: set[str] = set()
    for node in nodes.values():
        for blob in node.history:
            client = restore_client_state(blob, journal=_started(config, node.cid))
            seen |= set(vars(client))
            export_client_state(client)
    fresh = SecAggClient(config, 1)
    assert seen == set(vars(fresh))
    aborted = SecAggClient(config, 1)
    aborted.advertise_keys()
    server = SecAggServer(config)
    for cid in (2, 3, 4):  # a roster without client 1's own keys makes it abort
        server.receive(SecAggClient(config, cid).advertise_keys(), sender=cid)
    with pytest.raises(ProtocolAbort):
        aborted.share_keys(server.roster())
    restored = restore_client_state(export_client_state(aborted), journal=_started(config, 1))
    assert restored.aborted
    fresh._new_secret = object()  # type: ignore[attr-defined]
    with pytest.raises(ParameterTypeError, match=r"client\._new_secret"):
        export_client_state(fresh)


def test_a_rolled_back_state_refuses_to_answer() -> None:
    config = SecAggConfig(client_ids=IDS, threshold=3, vector_length=LENGTH)
    journals = {cid: MemoryRevealJournal() for cid in IDS}
    nodes = {cid: _Node(config, cid, journals[cid]) for cid in IDS}
    _play(nodes, SecAggServer(config), _inputs())
    for cid, node in nodes.items():
        # Every state before the last answer is older than the journal: refused.
        for old in node.history[:-1]:
            with pytest.raises(ProtocolAbort, match="rolled-back"):
                restore_client_state(old, journal=journals[cid])
        # The latest state is fine (a lost unmasking reply may be re-sent).
        assert restore_client_state(node.history[-1], journal=journals[cid]).done


def test_the_journal_refuses_a_second_share_kind_and_going_back() -> None:
    journal = MemoryRevealJournal()
    sid = bytes(32)
    journal.record(JournalEntry(sid, 0, 1, 4, {2: RevealKind.SELF_MASK_SEED}))
    with pytest.raises(ProtocolAbort, match="second kind"):
        journal.record(JournalEntry(sid, 0, 1, 4, {2: RevealKind.MASK_KEY}))
    with pytest.raises(ProtocolAbort, match="rolled-back"):
        journal.record(JournalEntry(sid, 0, 1, 3))
    # The same reveal again (a re-sent reply) and other clients or rounds are fine.
    journal.record(JournalEntry(sid, 0, 1, 4, {2: RevealKind.SELF_MASK_SEED}))
    journal.record(JournalEntry(sid, 1, 1, 0, {2: RevealKind.MASK_KEY}))
    journal.record(JournalEntry(sid, 0, 2, 0))
    assert journal.latest_step(sid, 0, 1) == 4
    assert len(journal.entries) == 4


def test_a_lying_server_cannot_rewind_a_client_to_get_both_shares() -> None:
    """The attack the journal exists for: unmask, roll back, ask with another view."""
    config = SecAggConfig(client_ids=IDS, threshold=3, vector_length=LENGTH)
    journals = {cid: MemoryRevealJournal() for cid in IDS}
    nodes = {cid: _Node(config, cid, journals[cid]) for cid in IDS}
    _, requests = _play(nodes, SecAggServer(config), _inputs())
    before_unmask = nodes[1].history[-2]
    other_view = UnmaskRequest(
        session_id=config.bound_session_id,
        round_index=0,
        recipient=1,
        survivors=(1, 2, 3),
        dropped=(4,),
    )
    assert other_view != requests[1]
    # Restore refuses outright ...
    with pytest.raises(ProtocolAbort):
        restore_client_state(before_unmask, journal=journals[1])
    # ... and even a client rebuilt without the step check (a journal that lost
    # its step records but kept the reveals) cannot journal the other kind.
    forgetful = MemoryRevealJournal()
    for entry in journals[1].entries:
        if entry.reveals:
            forgetful.record(dataclass_replace_step(entry, 0))
    client = restore_client_state(before_unmask, journal=forgetful)
    answer = client.unmask(other_view)
    with pytest.raises(ProtocolAbort, match="second kind"):
        record_answer(forgetful, client, answer)


def dataclass_replace_step(entry: JournalEntry, step: int) -> JournalEntry:
    return JournalEntry(entry.session_id, entry.round_index, entry.client_id, step, entry.reveals)


def test_the_file_journal_survives_the_process(tmp_path: Path) -> None:
    config = SecAggConfig(client_ids=IDS, threshold=3, vector_length=LENGTH)
    path = tmp_path / "journal" / "node-1.jsonl"
    nodes = {
        cid: _Node(
            config,
            cid,
            FileRevealJournal(path) if cid == 1 else MemoryRevealJournal(),
        )
        for cid in IDS
    }
    _play(nodes, SecAggServer(config), _inputs())
    assert path.stat().st_mode & 0o777 == 0o600
    reopened = FileRevealJournal(path)
    assert reopened.latest_step(config.session_id, 0, 1) == client_step(
        restore_client_state(nodes[1].history[-1], journal=reopened)
    )
    with pytest.raises(ProtocolAbort, match="rolled-back"):
        restore_client_state(nodes[1].history[2], journal=reopened)
    # A second instance on the same file sees entries the first one appends.
    sid = bytes(range(32))
    FileRevealJournal(path).record(JournalEntry(sid, 0, 9, 2))
    assert reopened.latest_step(sid, 0, 9) == 2
    path.write_text(path.read_text() + "not json\n")
    with pytest.raises(MessageFormatError):
        FileRevealJournal(path).latest_step(sid, 0, 9)


def _active(n: int, *, threshold: int) -> tuple[dict[int, Any], SecAggConfig]:
    """Identity keys of clients 1..n and an active config over their registry (n_C = 1)."""
    from privfed.secagg.protocol.identity import IdentityKey, IdentityRegistry

    keys = {cid: IdentityKey.generate() for cid in range(1, n + 1)}
    config = SecAggConfig(
        client_ids=tuple(keys),
        threshold=threshold,
        vector_length=LENGTH,
        mode="active",  # type: ignore[arg-type]
        corrupted=1,
        identities=IdentityRegistry.of(keys, assumed_corrupted=1),
    )
    return keys, config


def _state() -> bytes:
    config = SecAggConfig(client_ids=IDS, threshold=3, vector_length=LENGTH)
    return export_client_state(SecAggClient(config, 2))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b"XXXX" + b[4:],
        lambda b: b[:4] + bytes([STATE_VERSION + 1]) + b[5:],
        lambda b: b[:-3],
        lambda b: b + b"\x00",
        lambda b: b[:5] + struct.pack(">I", 1) + struct.pack(">I", 6) + b"_phase" + b"\x63",
    ],
    ids=["magic", "version", "truncated", "trailing", "unknown-tag"],
)
def test_malformed_states_are_refused(mutate: Callable[[bytes], bytes]) -> None:
    with pytest.raises(MessageFormatError):
        restore_client_state(mutate(_state()), journal=MemoryRevealJournal())


def test_only_whitelisted_types_are_built() -> None:
    """An extension tag or enum naming something outside the whitelist is refused."""
    blob = _state()
    for forged_type in (b"builtins.eval", b"os.system"):
        for tag in (10, 15):  # enum, extension
            body = struct.pack(">I", len(forged_type)) + forged_type + struct.pack(">I", 1) + b"x"
            one = STATE_MAGIC + bytes([STATE_VERSION]) + struct.pack(">I", 1)
            one += struct.pack(">I", 6) + b"_phase" + bytes([tag]) + body
            with pytest.raises(MessageFormatError):
                restore_client_state(one, journal=MemoryRevealJournal())
    assert restore_client_state(blob, journal=MemoryRevealJournal()).client_id == 2


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(ParameterTypeError, match="client"):
        export_client_state(object())  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="journal"):
        restore_client_state(_state(), journal=None)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="data"):
        restore_client_state("text", journal=MemoryRevealJournal())  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="entry"):
        MemoryRevealJournal().record("entry")  # type: ignore[arg-type]


def test_an_active_mode_client_round_trips_with_its_identity_key_supplied_at_restore() -> None:
    """Active mode: the registry travels in the state, the identity key never does."""
    from privfed.errors import ParameterError

    keys, config = _active(8, threshold=6)
    journal = MemoryRevealJournal()
    client = SecAggClient(config, 3, identity=keys[3])
    answer = client.advertise_keys()
    record_answer(journal, client, answer)
    blob = export_client_state(client)
    assert keys[3].private_bytes() not in blob
    assert b"IdentityKey" not in blob
    restored = restore_client_state(blob, journal=journal, identity=keys[3])
    assert restored.config == config
    assert export_client_state(restored) == blob
    assert restored._identity is keys[3]
    with pytest.raises(ParameterTypeError, match="identity"):
        restore_client_state(blob, journal=journal)
    with pytest.raises(ParameterError, match="registry"):
        restore_client_state(blob, journal=journal, identity=keys[4])
    # The restored client signs with the supplied key: its round goes on.
    roster = SecAggServer(config)
    roster.receive(answer, sender=3)
    assert roster.advertised == {3}


def test_a_version_1_state_is_refused_by_version() -> None:
    """Version 1 held the identity key, version 2 no signed survivor root, version 3 no
    committed graph value, version 4 an unprefixed config, version 5 its ids one by one;
    this build reads 6."""
    blob = _state()
    assert STATE_VERSION == 6
    for version in (1, 2, 3, 4, 5):
        old = blob[:4] + bytes([version]) + blob[5:]
        with pytest.raises(MessageFormatError, match=f"version {version}"):
            restore_client_state(old, journal=MemoryRevealJournal())


def test_a_state_naming_the_identity_attribute_is_refused() -> None:
    """Crafted bytes cannot smuggle an ``_identity`` into a restored client."""
    blob = _state()
    (count,) = struct.unpack(">I", blob[5:9])
    forged = (
        blob[:5]
        + struct.pack(">I", count + 1)
        + blob[9:]
        + struct.pack(">I", 9)
        + b"_identity"
        + bytes([0])
    )
    with pytest.raises(MessageFormatError, match="attribute name"):
        restore_client_state(forged, journal=MemoryRevealJournal())


@pytest.mark.parametrize(
    "body",
    [
        bytes([9]) + struct.pack(">I", 1) + bytes([7]) + struct.pack(">I", 0) + bytes([0]),
        bytes([8]) + struct.pack(">I", 1) + bytes([7]) + struct.pack(">I", 0),
        bytes([9]) + struct.pack(">I", 1) + bytes([9]) + struct.pack(">I", 0) + bytes([0]),
    ],
    ids=["dict-with-a-list-key", "frozenset-of-a-list", "dict-with-a-dict-key"],
)
def test_crafted_unhashable_keys_are_format_errors(body: bytes) -> None:
    """A server can send a node any config bytes: unhashable keys are refused, not TypeError."""
    from privfed.secagg.protocol.state import CONFIG_VERSION, decode_config

    config_blob = STATE_MAGIC + bytes([CONFIG_VERSION]) + body
    with pytest.raises(MessageFormatError, match="unhashable"):
        decode_config(config_blob)
    blob = STATE_MAGIC + bytes([STATE_VERSION]) + body
    with pytest.raises(MessageFormatError):
        restore_client_state(blob, journal=MemoryRevealJournal())


def test_a_state_whose_journal_was_lost_refuses_at_every_stage(tmp_path: Path) -> None:
    """The journal lost (or swapped for an empty one) while the state survived: refused.

    Without this an attacker who deletes the journal file and replays an older state
    gets the other kind of share of a peer (that peer's input) at UNMASKING.
    """
    config = SecAggConfig(client_ids=IDS, threshold=3, vector_length=LENGTH)
    path = tmp_path / "node-1.jsonl"
    nodes = {
        cid: _Node(config, cid, FileRevealJournal(path) if cid == 1 else MemoryRevealJournal())
        for cid in IDS
    }
    _play(nodes, SecAggServer(config), _inputs())
    history = nodes[1].history
    # The normal restart: the node's own journal file, reopened, accepts its latest state.
    assert restore_client_state(history[-1], journal=FileRevealJournal(path)).done
    path.unlink()  # the journal is lost; the states survive
    refused = 0
    for blob in history[1:]:  # after ADVERTISE, SHARE, MASKED_INPUT, UNMASKING
        for journal in (FileRevealJournal(path), MemoryRevealJournal()):
            with pytest.raises(ProtocolAbort, match="journal does not know"):
                restore_client_state(blob, journal=journal)
            refused += 1
    assert refused == 2 * 4
    # A state that answered nothing (step 0) reveals nothing by being restored.
    assert client_step(restore_client_state(history[0], journal=MemoryRevealJournal())) == 0


def test_a_config_is_encoded_and_parsed_once_and_only_for_the_very_same_object_or_bytes() -> None:
    """The config body caches (state version 5) change no byte and serve nothing else.

    Every state of a round holds the same O(N) config: its body is encoded once per
    config object and parsed once per body.  A hit must give exactly what encoding or
    parsing would; an equal but distinct config is encoded afresh to the same bytes,
    and a changed or malformed body is parsed (and refused) every time.
    """
    from privfed.secagg.protocol import state

    config = SecAggConfig(client_ids=tuple(range(1, 41)), threshold=21, vector_length=LENGTH)
    journal = _started(config, 3)
    client = SecAggClient(config, 3)
    first = export_client_state(client)
    state._config_bodies.clear()
    state._configs_by_body.clear()
    assert export_client_state(client) == first  # uncached: the same bytes
    assert export_client_state(client) == first  # cached: the same bytes
    twin = SecAggConfig(
        client_ids=tuple(range(1, 41)),
        threshold=21,
        vector_length=LENGTH,
        session_id=config.session_id,
    )
    assert twin is not config and twin == config
    assert state.encode_config(twin) == state.encode_config(config)
    # Two states of the same config share one parsed config; it equals the original.
    one = restore_client_state(first, journal=journal)
    two = restore_client_state(first, journal=_started(config, 3))
    assert one.config is two.config and one.config == config
    # Another threshold is another body: parsed afresh, never the cached config.
    other = SecAggConfig(
        client_ids=tuple(range(1, 41)),
        threshold=22,
        vector_length=LENGTH,
        session_id=config.session_id,
    )
    restored = restore_client_state(
        export_client_state(SecAggClient(other, 3)), journal=_started(other, 3)
    )
    assert restored.config.threshold == 22 and restored.config is not one.config
    # A malformed body is refused at every try, never remembered.
    from privfed.secagg.protocol.state import CONFIG_VERSION, decode_config

    bad = STATE_MAGIC + bytes([CONFIG_VERSION, 13]) + struct.pack(">I", 1) + bytes([0])
    for _ in range(2):
        with pytest.raises(MessageFormatError, match="malformed config"):
            decode_config(bad)
    # Both caches stay bounded.
    for threshold in range(21, 41):
        cfg = SecAggConfig(client_ids=tuple(range(1, 41)), threshold=threshold, vector_length=2)
        decode_config(state.encode_config(cfg))
    assert len(state._config_bodies) <= 8 and len(state._configs_by_body) <= 8


def test_a_config_sent_with_its_registry_by_digest_stands_for_that_registry_only() -> None:
    """``registry_by_digest``: 32 bytes instead of every key; decoded only against that registry."""
    from privfed.secagg.protocol.identity import IdentityKey, IdentityRegistry
    from privfed.secagg.protocol.state import decode_config, encode_config

    keys, config = _active(200, threshold=120)
    ids, registry = config.client_ids, config.identities
    assert registry is not None
    full, short = encode_config(config), encode_config(config, registry_by_digest=True)
    assert decode_config(full) == config  # the registry in full needs none supplied
    assert decode_config(full, registry=registry) == config
    # Every key is left out: what remains is the ids and the other fields.
    assert not any(key.public_key in short or key.public_key.hex().encode() in short
                   for key in keys.values())  # fmt: skip
    assert len(short) < len(full) - len(ids) * 32
    got = decode_config(short, registry=IdentityRegistry.from_json(registry.to_json()))
    assert got == config and got.session_id == config.session_id
    assert decode_config(short, registry=registry) is got  # the same bytes: parsed once
    # The bytes are the same for any equal config; the semi-honest config is unchanged.
    plain = SecAggConfig(client_ids=ids, threshold=120, vector_length=LENGTH)
    assert encode_config(plain, registry_by_digest=True) == encode_config(plain)
    # Another registry (one key or only n_C changed), or none, is refused.
    other_key = dict(registry.public_keys) | {7: IdentityKey.generate().public_key}
    for wrong in (IdentityRegistry(other_key, 1), IdentityRegistry(registry.public_keys, 0), None):
        with pytest.raises(ProtocolAbort, match="not the registry this client holds"):
            decode_config(short, registry=wrong)
    with pytest.raises(ParameterTypeError, match="registry"):
        decode_config(short, registry=registry.digest)  # type: ignore[arg-type]
    # A digest of another type, or cut short, is not a config at all.
    from privfed.secagg.protocol import state

    fields = state._config_fields(config)
    fields.pop("identities")
    fields[state._REGISTRY_DIGEST] = 7
    out = bytearray(state.STATE_MAGIC)
    out.append(state.CONFIG_VERSION)
    state._encode(fields, out)
    with pytest.raises(MessageFormatError, match="not a privfed config"):
        decode_config(bytes(out), registry=registry)
    with pytest.raises(MessageFormatError):
        decode_config(short.replace(registry.digest, b""), registry=registry)
