"""The identity registry by commitment: roots, enrolments, proofs, and a lying server.

An active client may hold the registry's root only; every key it checks a
signature with must then come with a proof against that root.  These tests
check the tree and the file formats, then play a server that forges, omits
or substitutes keys in a roster part, and the round that holds up.
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest
from secagg_helpers import active_harary_parties, deliver, reveal_committee

from privfed.errors import ParameterError, ParameterTypeError, ProtocolAbort
from privfed.secagg import (
    IdentityEnrolment,
    IdentityKey,
    IdentityRegistry,
    IdentityRoot,
    Roster,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    Stage,
    export_client_state,
    restore_client_state,
    run_in_memory,
)
from privfed.secagg.protocol._roster_check import identity_proofs
from privfed.secagg.protocol.identity_root import proven_keys
from privfed.secagg.protocol.messages.roster import IdentityProof
from privfed.secagg.protocol.roster_tree import ProofError
from privfed.secagg.protocol.state import MemoryRevealJournal, decode_config, encode_config

L = 3


def _registry(n: int, *, seed: int = 0, gaps: bool = True) -> IdentityRegistry:
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(1, 10 * n + 1), n)) if gaps else list(range(1, n + 1))
    return IdentityRegistry.of({cid: IdentityKey.generate() for cid in ids})


# -- the tree and its proofs --------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 33, 100])
def test_every_set_of_enrolled_ids_is_proven_against_the_root(n: int) -> None:
    registry = _registry(n, seed=n)
    root = registry.commitment
    assert root.count == n and root.digest == registry.digest
    ids = list(registry.public_keys)
    rng = random.Random(n)
    sets = [rng.sample(ids, rng.randint(1, n)) for _ in range(12)]
    for wanted, (items, hashes) in zip(sets, registry.key_proofs(sets), strict=True):
        keys = proven_keys(root, n, items, hashes)
        assert keys == {cid: registry.public_keys[cid] for cid in wanted}


def test_a_proof_the_root_does_not_hold_is_refused() -> None:
    registry = _registry(40, seed=1)
    root = registry.commitment
    ids = list(registry.public_keys)
    (items, hashes) = registry.key_proofs([ids[3:9]])[0]
    index, cid, key = items[2]
    cases = {
        "another key for an enrolled id": [*items[:2], (index, cid, bytes(32)), *items[3:]],
        "an id the root does not enrol": [*items[:2], (index, cid + 1, key), *items[3:]],
        "a key moved to another leaf": [*items[:2], (index + 100, cid, key), *items[3:]],
    }
    for bad in cases.values():
        with pytest.raises(ProofError):
            proven_keys(root, 40, bad, hashes)
    with pytest.raises(ProofError, match="another size"):
        proven_keys(root, 41, items, hashes)
    with pytest.raises(ProofError, match="no key"):
        proven_keys(root, 40, [], ())
    with pytest.raises(ProofError, match="increasing"):
        proven_keys(root, 40, [items[1], items[0], *items[2:]], hashes)
    with pytest.raises(ProofError):
        proven_keys(root, 40, items, (bytes(32), *hashes[1:]))
    with pytest.raises(ProofError):
        proven_keys(root, 40, items, (*hashes, bytes(32)))
    # A member of another registry, with that registry's own valid proof.
    other = IdentityRegistry.of({cid: IdentityKey.generate() for cid in ids})
    with pytest.raises(ProofError, match="not the ones"):
        proven_keys(root, 40, *other.key_proofs([ids[3:9]])[0])
    with pytest.raises(ParameterError, match="not enrolled"):
        registry.key_proofs([[ids[0], max(ids) + 1]])


def test_an_empty_registry_is_refused() -> None:
    with pytest.raises(ParameterError, match="at least one"):
        IdentityRegistry({})


# -- files --------------------------------------------------------------------------------


def test_root_and_enrolment_files_round_trip_and_parse_strictly(tmp_path) -> None:
    registry = _registry(9, seed=3)
    root = registry.commitment
    root.save(tmp_path / "root.json")
    assert IdentityRoot.load(tmp_path / "root.json") == root
    assert "count=9" in repr(root) and root.root.hex() not in repr(root)
    for cid in registry.public_keys:
        enrolment = registry.enrolment(cid)
        enrolment.save(tmp_path / "e.json")
        again = IdentityEnrolment.load(tmp_path / "e.json")
        assert again == enrolment and again.root == root and again.digest == registry.digest
    document = json.loads(root.to_json())
    bad_documents = [
        {**document, "format": "privfed-secagg-identities"},
        {**document, "version": 2},
        {**document, "version": True},
        {**document, "algorithm": "rsa"},
        {**document, "count": 0},
        {**document, "root": "00"},
        {**document, "root": "zz" * 32},
        {**document, "extra": 1},
        {k: v for k, v in document.items() if k != "count"},
    ]
    for bad in bad_documents:
        with pytest.raises(ParameterError):
            IdentityRoot.from_json(json.dumps(bad))
    for text in ("[]", "not json"):
        with pytest.raises((ParameterError, ParameterTypeError)):
            IdentityRoot.from_json(text)
    with pytest.raises(ParameterTypeError):
        IdentityRoot.from_json(b"{}")  # type: ignore[arg-type]
    enrolment = json.loads(registry.enrolment(min(registry.public_keys)).to_json())
    other_key = registry.public_keys[max(registry.public_keys)].hex()
    for bad in (
        {**enrolment, "public_key": other_key},
        {**enrolment, "position": enrolment["position"] + 1},
        {**enrolment, "proof": enrolment["proof"][1:]},
        {**enrolment, "proof": "00"},
        {**enrolment, "client_id": 0},
    ):
        with pytest.raises((ParameterError, ParameterTypeError)):
            IdentityEnrolment.from_json(json.dumps(bad))


# -- rounds whose clients hold the root only ----------------------------------------------


@pytest.mark.parametrize(
    "graph", [{"graph": "complete"}, {"graph": "harary", "degree": 8}], ids=["complete", "harary"]
)
def test_a_round_of_clients_holding_the_root_gives_the_exact_sum(graph: dict) -> None:
    rng = np.random.default_rng(4)
    inputs = [rng.integers(0, 2**32, 50, dtype=np.uint64) for _ in range(30)]
    threshold = 6 if graph["graph"] == "harary" else 20
    total = run_in_memory(
        inputs,
        threshold=threshold,
        mode="active",
        corrupted=1,
        dropouts={Stage.MASKED_INPUT: [3, 17]},
        **graph,
    )
    kept = [x for i, x in enumerate(inputs) if i not in (3, 17)]
    expected = np.sum(kept, axis=0, dtype=np.uint64)  # below 2**37: no wrap-around
    np.testing.assert_array_equal(total, expected)


def _active_harary(n: int = 24, degree: int = 6, t: int = 4):
    cfg, keys, _, inputs = active_harary_parties(n, degree, t, 0, L, seed=0)
    registry = cfg.identities
    assert isinstance(registry, IdentityRegistry)
    own = cfg.for_clients()
    assert isinstance(own.identities, IdentityRoot) and own.digest == cfg.digest
    clients = {c: SecAggClient(own, c, inputs[c], identity=keys[c]) for c in keys}
    server = SecAggServer(cfg)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    reveal_committee(server, clients)
    server.roster()
    return cfg, registry, keys, clients, server


def _with_keys(part: Roster, proof: IdentityProof | None) -> Roster:
    return Roster._trusted(
        session_id=part.session_id,
        round_index=part.round_index,
        entries=part.entries,
        proof=part.proof,
        identities=proof,
    )


def _signers(part: Roster) -> list[int]:
    committee = [] if part.proof is None else [c[1] for c in part.proof.committee]
    return [e.client_id for e in part.entries] + committee


def test_the_server_proves_every_signer_of_a_part_and_nothing_more() -> None:
    _, _, _, clients, server = _active_harary()
    for cid in (1, 12, 24):
        part = Roster.from_bytes(server.roster(cid).to_bytes())
        assert part.identities is not None and part.identities.count == 24
        assert {i[1] for i in part.identities.items} == set(_signers(part))
        clients[cid].share_keys(part)
        assert set(clients[cid]._identity_keys) == set(_signers(part))


def test_a_lying_server_cannot_slip_a_key_past_the_root() -> None:
    cfg, registry, keys, clients, server = _active_harary()
    victim = 5
    part = server.roster(victim)
    signers = _signers(part)
    neighbour = next(c for c in signers if c != victim)
    # 1. No identity proof at all.
    with pytest.raises(ProtocolAbort, match="no proof of its signers' identity keys"):
        _copy(clients[victim], cfg).share_keys(_with_keys(part, None))
    # 2. The server's own registry: its key for a neighbour, with that registry's valid proof.
    fake = dict(keys)
    fake[neighbour] = IdentityKey.generate()
    forged = IdentityRegistry.of(fake)
    with pytest.raises(ProtocolAbort, match="identity proof is refused"):
        _copy(clients[victim], cfg).share_keys(
            _with_keys(part, identity_proofs(forged, [signers])[0])
        )
    # 3. A proof for a member the root does not hold (a registry with one more client).
    wider = IdentityRegistry.of({**keys, 99: IdentityKey.generate()})
    with pytest.raises(ProtocolAbort, match="identity proof is refused"):
        _copy(clients[victim], cfg).share_keys(
            _with_keys(part, identity_proofs(wider, [[*signers, 99]])[0])
        )
    # 4. A proof that leaves out a neighbour: its signature cannot be checked.
    fewer = identity_proofs(registry, [[c for c in signers if c != neighbour]])[0]
    with pytest.raises(ProtocolAbort, match=f"client {neighbour} carry no valid signature"):
        _copy(clients[victim], cfg).share_keys(_with_keys(part, fewer))
    # 5. A proof that leaves out the recipient's own key.
    without_me = identity_proofs(registry, [[c for c in signers if c != victim]])[0]
    with pytest.raises(ProtocolAbort, match="does not enrol this client's key"):
        _copy(clients[victim], cfg).share_keys(_with_keys(part, without_me))
    # 6. A neighbour's round keys substituted, signed with a key the root does not hold.
    at = [e.client_id for e in part.entries].index(neighbour)
    entry = part.entries[at]
    swapped = dataclasses.replace(entry, mask_public_key=bytes([9]) * 32)
    entries = (*part.entries[:at], swapped, *part.entries[at + 1 :])
    bad = Roster._trusted(
        session_id=part.session_id,
        round_index=part.round_index,
        entries=entries,
        proof=part.proof,
        identities=part.identities,
    )
    with pytest.raises(ProtocolAbort):
        _copy(clients[victim], cfg).share_keys(bad)
    # Every refusal revealed nothing; the honest part is still accepted.
    clients[victim].share_keys(part)


def _copy(client: SecAggClient, cfg: SecAggConfig) -> SecAggClient:
    """A fresh copy of ``client`` (from its state), so each attack meets an unspent client."""
    return restore_client_state(
        export_client_state(client),
        journal=_journal(cfg, client.client_id),
        identity=client._identity,
    )


def _journal(cfg: SecAggConfig, client_id: int) -> MemoryRevealJournal:
    journal = MemoryRevealJournal()
    journal.start_session(cfg.session_id, cfg.round_index, client_id)
    return journal


def test_a_server_needs_the_registry_and_a_client_state_holds_the_root_only() -> None:
    cfg, registry, keys, clients, server = _active_harary()
    with pytest.raises(ParameterError, match="full IdentityRegistry"):
        SecAggServer(cfg.for_clients())
    part = server.roster(7)
    clients[7].share_keys(part)
    state = export_client_state(clients[7])
    assert registry.to_json().encode() not in state
    assert registry.commitment.root.hex().encode() in state
    # Restored with another key than the one the roster proved: refused.
    with pytest.raises(ParameterError, match="the key the registry holds"):
        restore_client_state(state, journal=_journal(cfg, 7), identity=keys[8])
    restored = restore_client_state(state, journal=_journal(cfg, 7), identity=keys[7])
    assert restored._identity_keys == clients[7]._identity_keys


def test_a_config_sent_by_digest_decodes_against_a_root() -> None:
    cfg, registry, *_ = _active_harary()
    sent = encode_config(cfg, registry_by_digest=True)
    got = decode_config(sent, registry=registry.commitment)
    assert got.identities == registry.commitment and got.digest == cfg.digest
    with pytest.raises(ProtocolAbort):
        decode_config(sent, registry=_registry(24, gaps=False).commitment)
    # A root smaller than the config's ids cannot enrol them all.
    small = IdentityRoot(registry.commitment.root, 10)
    with pytest.raises(ParameterError, match="a root of 10 keys for 24 ids"):
        dataclasses.replace(cfg, identities=small)
