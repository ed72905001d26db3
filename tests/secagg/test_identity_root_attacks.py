"""A lying server against clients that pin the identity root only (review regressions).

Every client here holds ``config.for_clients()``: the registry's
:class:`~privfed.secagg.IdentityRoot`, never the registry.  The server
rewrites the identity proof of a roster part (items reordered, repeated,
re-keyed, counts and hashes changed, bytes flipped on the wire), leaves a
graph-seed committee member's key out, forwards survivor-set signatures
under the wrong signer, or meets a client restored under another key.  Each
attack must end in a :class:`~privfed.errors.ProtocolAbort` (or a
:class:`~privfed.errors.MessageFormatError` for bytes that do not parse) with
the client's shares wiped.  Identity JSON that Python's parser cannot hold
(too deep, a number past the digit limit) is a typed error, and a config
decoded against a root never stands in for one decoded against the registry.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
from secagg_helpers import active_harary_parties, deliver, reveal_committee

from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError, ProtocolAbort
from privfed.secagg import (
    EncryptedSharesBundle,
    IdentityEnrolment,
    IdentityKey,
    IdentityRegistry,
    IdentityRoot,
    Roster,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    export_client_state,
    restore_client_state,
)
from privfed.secagg.protocol import state as state_codec
from privfed.secagg.protocol._roster_check import identity_proofs
from privfed.secagg.protocol.messages.base import _unchecked
from privfed.secagg.protocol.messages.roster import IdentityProof
from privfed.secagg.protocol.messages.unmasking import SurvivorSignature
from privfed.secagg.protocol.state import MemoryRevealJournal

L = 3


@dataclasses.dataclass
class _Round:
    config: SecAggConfig
    registry: IdentityRegistry
    keys: dict[int, IdentityKey]
    clients: dict[int, SecAggClient]
    server: SecAggServer


def _root_round(n: int = 30, degree: int = 6, t: int = 4, **extra: object) -> _Round:
    """An active SecAgg+ round past the committee, every client holding the root only."""
    cfg, keys, _, inputs = active_harary_parties(n, degree, t, 0, L, seed=1, **extra)
    registry = cfg.identities
    assert isinstance(registry, IdentityRegistry)
    own = cfg.for_clients()
    assert isinstance(own.identities, IdentityRoot)
    clients = {c: SecAggClient(own, c, inputs[c], identity=keys[c]) for c in keys}
    server = SecAggServer(cfg)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    reveal_committee(server, clients)
    server.roster()
    return _Round(cfg, registry, keys, clients, server)


def _copier(r: _Round, cid: int, identity: IdentityKey | None = None):
    """Fresh copies of client ``cid`` from its state, each with a journal of its own."""
    state = export_client_state(r.clients[cid])
    key = r.keys[cid] if identity is None else identity

    def make() -> SecAggClient:
        journal = MemoryRevealJournal()
        journal.start_session(r.config.session_id, r.config.round_index, cid)
        return restore_client_state(state, journal=journal, identity=key)

    return make


def _with_proof(part: Roster, proof: IdentityProof | None) -> Roster:
    return Roster._trusted(
        session_id=part.session_id,
        round_index=part.round_index,
        entries=part.entries,
        proof=part.proof,
        identities=proof,
    )


def _refused(client: SecAggClient, roster: Roster, match: str | None = None) -> None:
    with pytest.raises(ProtocolAbort, match=match):
        client.share_keys(roster)
    assert client.aborted and client._own_shares is None and not client._share_keys


def test_a_committee_member_outside_the_neighbourhood_needs_a_proven_key_too() -> None:
    # A small committee, so that the part's identity proof needs sibling hashes.
    r = _root_round(committee_size=6)
    victim = 5
    part = r.server.roster(victim)
    assert part.proof is not None and part.identities is not None
    entries = [e.client_id for e in part.entries]
    committee = [c[1] for c in part.proof.committee]
    outside = next(c for c in committee if c not in entries)
    signers = sorted({*entries, *committee} - {outside})
    make = _copier(r, victim)
    _refused(
        make(),
        _with_proof(part, identity_proofs(r.registry, [signers])[0]),
        f"the reveal of committee member {outside} is not signed",
    )
    make().share_keys(part)  # the honest part still passes


def test_reordered_repeated_or_rekeyed_identity_items_are_refused() -> None:
    r = _root_round(committee_size=6)
    victim = 5
    part = r.server.roster(victim)
    proof = part.identities
    assert proof is not None and len(proof.items) >= 3 and proof.hashes
    items, hashes = proof.items, proof.hashes
    (i0, c0, k0), (i1, c1, k1) = items[0], items[1]

    def forged(**fields: object) -> Roster:
        base = {"count": proof.count, "items": items, "hashes": hashes}
        return _with_proof(part, _unchecked(IdentityProof, {**base, **fields}))

    cases = {
        "the proof's leaves are not in increasing order": [
            forged(items=tuple(reversed(items))),
            forged(items=(items[0], *items)),
            # Two ids trade leaves: indices keep increasing, ids do not.
            forged(items=((i0, c1, k1), (i1, c0, k0), *items[2:])),
        ],
        "the keys are not the ones the identity root commits to": [
            forged(items=((i0, c0, k1), (i1, c1, k0), *items[2:])),
            forged(items=((i0, c0, r.keys[c0].public_key[::-1]), *items[1:])),
        ],
        "another size": [forged(count=proof.count + 1), forged(count=proof.count - 1)],
        "too short": [forged(hashes=()), forged(hashes=hashes[:-1])],
        "too long": [forged(hashes=(*hashes, hashes[0]))],
    }
    make = _copier(r, victim)
    for reason, rosters in cases.items():
        for roster in rosters:
            _refused(make(), roster, reason)
    make().share_keys(part)


def test_a_flipped_bit_in_the_identity_section_is_never_accepted() -> None:
    r = _root_round(committee_size=6)
    victim = 9
    part = r.server.roster(victim)
    assert part.identities is not None
    wire = part.to_bytes()
    section = part.identities._wire()
    assert wire.endswith(section)
    start = len(wire) - len(section)
    make = _copier(r, victim)
    parsed = 0
    for at in range(start, len(wire), 3):
        for bit in (0, 5):
            data = bytearray(wire)
            data[at] ^= 1 << bit
            try:
                roster = Roster.from_bytes(bytes(data))
            except MessageFormatError:
                continue
            parsed += 1
            _refused(make(), roster)
    assert parsed > 50  # most flips parse, and every one of those is refused
    make().share_keys(part)


def test_a_signature_forwarded_under_another_signer_reveals_no_share() -> None:
    r = _root_round(n=24)
    for cid, c in r.clients.items():
        deliver(r.server, EncryptedSharesBundle.from_shares(c.share_keys(r.server.roster(cid))))
    routed = r.server.routed_shares()
    for cid, c in r.clients.items():
        deliver(r.server, c.masked_input(routed[cid]))
    consistency = r.server.consistency_requests()
    for cid, c in r.clients.items():
        deliver(r.server, c.consistency_check(consistency[cid]))
    victim = 5
    request = r.server.unmask_requests()[victim]
    first, second, *rest = request.signatures
    stranger = IdentityKey.generate()
    forged = {
        # Two genuine signatures of the signed set, each under the other's id.
        "swapped": (
            SurvivorSignature(first.signer, second.signature),
            SurvivorSignature(second.signer, first.signature),
        ),
        # A key the root does not enrol signs for a neighbour.
        "stranger": (
            SurvivorSignature(first.signer, stranger.sign(b"any payload")),
            second,
        ),
    }
    make = _copier(r, victim)
    for signatures in forged.values():
        client = make()
        with pytest.raises(ProtocolAbort, match="on the survivor set is invalid"):
            client.unmask(dataclasses.replace(request, signatures=(*signatures, *rest)))
        assert client.aborted and client._own_shares is None and not client._held
    assert make().unmask(request).self_mask_shares


def test_a_client_restored_before_its_roster_under_another_key_shares_nothing() -> None:
    r = _root_round(n=24)
    victim = 7
    part = r.server.roster(victim)
    # Before any roster the root proves nothing about the key, so the restore
    # takes it; the first roster part then refuses it before a share exists.
    impostor = _copier(r, victim, identity=r.keys[8])()
    _refused(impostor, part, "does not enrol this client's key under its id")
    _copier(r, victim)().share_keys(part)


# -- open findings --------------------------------------------------------------------------


def _config_whose_root_reads(text: bytes) -> bytes:
    """The bytes of an active config whose embedded IdentityRoot is ``text`` (a lying server)."""
    registry = IdentityRegistry.of({c: IdentityKey.generate() for c in range(1, 6)})
    config = SecAggConfig(
        client_ids=(1, 2, 3, 4, 5),
        threshold=4,
        vector_length=1,
        mode="active",
        identities=registry.commitment,
    )
    name = "identity.IdentityRoot"
    cls, encode, decode = state_codec._EXTENSIONS[name]
    state_codec._EXTENSIONS[name] = (cls, lambda _root: text, decode)
    try:
        return state_codec.encode_config(config)
    finally:
        state_codec._EXTENSIONS[name] = (cls, encode, decode)


def test_a_deeply_nested_root_in_a_proposed_config_is_a_format_error() -> None:
    data = _config_whose_root_reads(b"[" * (sys.getrecursionlimit() * 20))
    with pytest.raises(MessageFormatError):
        state_codec.decode_config(data)


@pytest.mark.parametrize("kind", ["root", "enrolment", "registry"])
@pytest.mark.parametrize("attack", ["huge-int", "deep"])
def test_an_identity_file_that_json_cannot_hold_is_a_parameter_error(
    kind: str, attack: str
) -> None:
    registry = IdentityRegistry.of({c: IdentityKey.generate() for c in range(1, 4)})
    parse = {
        "root": (IdentityRoot.from_json, registry.commitment.to_json()),
        "enrolment": (IdentityEnrolment.from_json, registry.enrolment(1).to_json()),
        "registry": (IdentityRegistry.from_json, registry.to_json()),
    }
    parser, text = parse[kind]
    if attack == "deep":
        text = "[" * (sys.getrecursionlimit() * 20)
    else:
        document = json.loads(text)
        document["assumed_corrupted"] = 0
        text = json.dumps(document).replace(
            '"assumed_corrupted": 0', '"assumed_corrupted": ' + "7" * 5000
        )
    with pytest.raises((ParameterError, ParameterTypeError)):
        parser(text)


def test_the_identity_proof_of_an_honest_part_holds_only_enrolled_keys() -> None:
    # The baseline the attacks above are measured against.
    r = _root_round(n=24)
    for cid in (1, 13, 24):
        client = _copier(r, cid)()
        client.share_keys(r.server.roster(cid))
        assert client._identity_keys == {
            i: r.registry.public_keys[i] for i in client._identity_keys
        }
        assert cid in client._identity_keys


def test_a_registry_holder_refuses_unenrolled_ids_whatever_was_decoded_before() -> None:
    keys = {c: IdentityKey.generate() for c in range(1, 11)}
    registry = IdentityRegistry.of(keys)
    ghosts = (1, 2, 3, 4, 5, 101, 102, 103, 104, 105)  # 101.. are not enrolled
    proposed = SecAggConfig(
        client_ids=ghosts,
        threshold=6,
        vector_length=1,
        mode="active",
        identities=registry.commitment,  # a root holds as many leaves: it cannot tell
    )
    data = state_codec.encode_config(proposed, registry_by_digest=True)
    # A root-holding node (an enrolment) cannot check the ids, and takes the config.
    assert state_codec.decode_config(data, registry=registry.commitment).client_ids == ghosts
    # The full registry can, and must, whatever was decoded before.
    with pytest.raises((MessageFormatError, ParameterError)):
        state_codec.decode_config(data, registry=registry)
