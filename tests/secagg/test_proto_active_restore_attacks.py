"""The active mode against a lying server: padded signed sets and restored-state replays.

Every test drives real :class:`SecAggClient` objects with a server that lies
and checks that nothing beyond the protocol's allowance is revealed.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from pathlib import Path

import numpy as np
import pytest
from secagg_helpers import deliver

from privfed.errors import ProtocolAbort
from privfed.secagg import (
    IdentityKey,
    IdentityRegistry,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    SecurityMode,
)
from privfed.secagg.protocol.messages import (
    EncryptedSharesBundle,
    SurvivorSignature,
    UnmaskRequest,
)
from privfed.secagg.protocol.state import (
    FileRevealJournal,
    JournalEntry,
    MemoryRevealJournal,
    RevealJournal,
    export_client_state,
    record_answer,
    restore_client_state,
)

L = 8


def _active(
    n: int, t: int, corrupted: int, layers: int = 0
) -> tuple[SecAggConfig, dict[int, SecAggClient], SecAggServer]:
    ids = {c: IdentityKey.generate() for c in range(1, n + 1)}
    cfg = SecAggConfig(
        client_ids=tuple(ids),
        threshold=t,
        vector_length=L,
        mode=SecurityMode.ACTIVE,
        corrupted=corrupted,
        identities=IdentityRegistry.of(ids, assumed_corrupted=corrupted),
        noise_layers=layers,
    )
    seeds = {c: [secrets.token_bytes(32) for _ in range(layers)] for c in ids}
    clients = {
        c: SecAggClient(cfg, c, np.full(L, c, np.uint64), identity=ids[c], noise_seeds=seeds[c])
        for c in ids
    }
    return cfg, clients, SecAggServer(cfg)


def test_signed_set_padded_with_clients_outside_the_view_reveals_no_extra_noise_layer() -> None:
    """A lying server keeps client 7 out of every view, then lists it as a survivor.

    Client 7 advertised and shared keys (so it is a roster member) but the server
    routes its ciphertexts to nobody: no survivor masked with it and it adds no
    noise to the sum.  Listing it in the survivor set to be signed inflates the
    survivor count from 6 to 7; the reveal rule for the 6 clients that actually
    contribute allows layer 2 only, never layer 1.
    """
    n, t, layers = 7, 5, 2
    cfg, clients, server = _active(n, t, corrupted=2, layers=layers)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    roster = server.roster()
    for c in clients.values():
        deliver(server, EncryptedSharesBundle.from_shares(c.share_keys(roster)))
    routed = server.routed_shares()
    padded = tuple(range(1, n + 1))
    signatures = {}
    for cid in range(1, n):
        honest = routed[cid]
        cut = dataclasses.replace(honest, shares=tuple(s for s in honest.shares if s.sender != n))
        deliver(server, clients[cid].masked_input(cut))
    consistency = server.consistency_requests()
    for cid in range(1, n):
        liar = dataclasses.replace(consistency[cid], survivors=padded)
        try:
            signatures[cid] = clients[cid].consistency_check(liar)
        except ProtocolAbort:
            continue  # refusing to sign the padded set is a sound defence too
    if len(signatures) < t:
        return  # too few signatures on the padded set: nobody can be asked to unmask
    signed = tuple(
        SurvivorSignature(signer=cid, signature=s.signature) for cid, s in signatures.items()
    )[:t]
    revealed_layers: set[int] = set()
    for cid in signatures:
        request = UnmaskRequest(
            session_id=cfg.bound_session_id,
            round_index=cfg.round_index,
            recipient=cid,
            survivors=tuple(range(1, n)),
            dropped=(),
            signatures=signed,
            noise_layers=(1, 2),  # what u = 7 would allow
        )
        with pytest.raises(ProtocolAbort, match="reveal rule"):
            revealed_layers |= {s.layer for s in clients[cid].unmask(request).noise_shares}
    # Six contributors of n = 7: only layers j > 1 may ever be revealed.
    assert 1 not in revealed_layers


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_two_restores_of_one_state_cannot_sign_two_survivor_sets(kind: str, tmp_path: Path) -> None:
    """A transport that restores one exported state twice must not answer twice differently.

    The journal refuses an older step, but two copies restored before either
    answer is journaled sit at the same step.  Were both answers accepted, one
    honest client would sign two different survivor sets -- the very thing the
    ConsistencyCheck's ``2t > s + n_C`` argument rules out.
    """
    n, t = 7, 5
    _, clients, server = _active(n, t, corrupted=2)
    journal: RevealJournal = (
        MemoryRevealJournal() if kind == "memory" else FileRevealJournal(tmp_path / "j.jsonl")
    )
    for c in clients.values():
        advert = c.advertise_keys()
        if c.client_id == 1:
            record_answer(journal, c, advert)
        deliver(server, advert)
    roster = server.roster()
    for c in clients.values():
        shares = c.share_keys(roster)
        if c.client_id == 1:
            record_answer(journal, c, shares)
        deliver(server, EncryptedSharesBundle.from_shares(shares))
    routed = server.routed_shares()
    for cid, c in clients.items():
        masked = c.masked_input(routed[cid])
        if cid == 1:
            record_answer(journal, c, masked)
        deliver(server, masked)
    request = server.consistency_requests()[1]
    assert request.survivors == tuple(range(1, n + 1))
    state = export_client_state(clients[1])
    first = restore_client_state(state, journal=journal, identity=clients[1]._identity)
    second = restore_client_state(state, journal=journal, identity=clients[1]._identity)
    record_answer(journal, first, first.consistency_check(request))
    other = dataclasses.replace(request, survivors=tuple(range(1, n)))
    answer = second.consistency_check(other)  # the copy cannot know; the journal must
    with pytest.raises(ProtocolAbort, match="differ"):
        record_answer(journal, second, answer)
    # The very same answer again (a lost reply re-sent) is still accepted ...
    record_answer(journal, first, first.consistency_check(request))
    # ... and the old state can no longer be restored at all.
    with pytest.raises(ProtocolAbort, match="rolled-back"):
        restore_client_state(state, journal=journal, identity=clients[1]._identity)
    if kind == "file":  # a second process reading the file enforces the same
        reopened = FileRevealJournal(tmp_path / "j.jsonl")
        with pytest.raises(ProtocolAbort, match="differ"):
            record_answer(reopened, second, answer)
        record_answer(reopened, first, first.consistency_check(request))


def test_a_journal_line_without_an_answer_digest_still_parses() -> None:
    entry = JournalEntry(b"s" * 32, 0, 1, 2)
    record = json.loads(entry.to_json())
    del record["answer"]  # a line written before answers were journaled
    assert JournalEntry.from_json(json.dumps(record)) == entry


def test_two_restores_cannot_send_two_masked_inputs_over_different_views() -> None:
    """Two copies of one MASKED_INPUT-stage state, each routed a different view.

    Both masked inputs carry the same self mask; the second one's pairwise
    masks are with the colluders and the clients the server will declare
    dropped in the main round, whose mask keys it gets there.  So the second
    masked input, once sent, is the victim's input in the clear to the server:
    the journal must stop it.
    """
    n, t = 7, 5
    _, clients, server = _active(n, t, corrupted=2)
    journal = MemoryRevealJournal()
    for c in clients.values():
        deliver(server, c.advertise_keys())
    roster = server.roster()
    for c in clients.values():
        shares = c.share_keys(roster)
        if c.client_id == 1:
            record_answer(journal, c, shares)
        deliver(server, EncryptedSharesBundle.from_shares(shares))
    routed = server.routed_shares()[1]
    state = export_client_state(clients[1])
    first = restore_client_state(state, journal=journal, identity=clients[1]._identity)
    second = restore_client_state(state, journal=journal, identity=clients[1]._identity)
    record_answer(journal, first, first.masked_input(routed))
    narrow = dataclasses.replace(routed, shares=tuple(s for s in routed.shares if s.sender != 7))
    masked = second.masked_input(narrow)
    with pytest.raises(ProtocolAbort, match="differ"):
        record_answer(journal, second, masked)
