"""SecAgg+ neighbour-only consistency: the survivor set by commitment (issue 25, step 3).

In active SecAgg+ the server commits to the survivor set with a Merkle root and
sends each survivor only its neighbourhood's survivors with a multiproof; the
client signs the root.  Signing the root of the whole set binds the signer to
the whole set, so the ConsistencyCheck argument is unchanged, while a client's
download and work are ``O(k log n)``.  Each attack below is refused with
nothing revealed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from secagg_helpers import active_harary_parties, deliver, share_keys_round

from privfed.errors import ProtocolAbort
from privfed.secagg import (
    ConsistencyRequest,
    SecAggConfig,
    SecAggServer,
    SurvivorSignature,
    UnmaskRequest,
)
from privfed.secagg.protocol._roster_check import (
    SURVIVOR_LEAF,
    neighbourhood_proof,
    survivor_tree,
)

L = 3


def _to_consistency(n: int = 40, degree: int = 8, t: int = 6, corrupted: int = 1):
    """An active SecAgg+ round up to the ConsistencyCheck, 2 clients dropped before masking."""
    cfg, _, clients, inputs = active_harary_parties(n, degree, t, corrupted, L, seed=5)
    server = SecAggServer(cfg)
    share_keys_round(server, clients)
    late = {7, 23}
    for cid, routed in server.routed_shares().items():
        masked = clients[cid].masked_input(routed)
        if cid not in late:
            deliver(server, masked)
    return cfg, clients, server, inputs, late


def _hdr(cfg: SecAggConfig) -> dict[str, object]:
    return {"session_id": cfg.bound_session_id, "round_index": cfg.round_index}


@pytest.mark.slow
def test_each_survivor_gets_its_neighbourhood_and_the_round_sums_exactly() -> None:
    _cfg, clients, server, inputs, late = _to_consistency()
    requests = server.consistency_requests()
    for cid, request in requests.items():
        hood = server.neighbours(cid) | {cid}
        assert request.proof is not None
        assert set(request.survivors) == hood - late
        assert len(request.proof.hashes) <= 3 * len(hood) * math.ceil(math.log2(len(requests)))
        again = ConsistencyRequest.from_bytes(request.to_bytes())
        deliver(server, clients[cid].consistency_check(again))
        # The very same request again gives the very same signature.
        assert clients[cid].consistency_check(again) == clients[cid]._consistency
    for cid, request in server.unmask_requests().items():
        deliver(server, clients[cid].unmask(request))
    expected = sum((inputs[c] for c in clients if c not in late), np.zeros(L, np.uint64))
    np.testing.assert_array_equal(server.finalize(), expected)


@pytest.mark.slow
def test_a_request_that_leaves_out_a_survivor_of_the_neighbourhood_is_refused() -> None:
    cfg, clients, server, _, _late = _to_consistency()
    request = server.consistency_requests()[1]
    assert request.proof is not None
    other = next(c for c in request.survivors if c != 1)
    at = request.survivors.index(other)
    # The survivor's leaf moved to the brackets: the proof still rebuilds the root.
    proof = dataclasses.replace(
        request.proof,
        positions=request.proof.positions[:at] + request.proof.positions[at + 1 :],
        brackets=(*request.proof.brackets, (request.proof.positions[at], other, SURVIVOR_LEAF)),
    )
    survivors = tuple(c for c in request.survivors if c != other)
    with pytest.raises(ProtocolAbort, match="leaves one out"):
        clients[1].consistency_check(
            ConsistencyRequest(**_hdr(cfg), recipient=1, survivors=survivors, proof=proof)
        )
    assert clients[1].aborted and clients[1]._own_shares is None


@pytest.mark.slow
def test_a_request_that_lists_a_survivor_outside_the_neighbourhood_is_refused() -> None:
    cfg, clients, server, _, _late = _to_consistency()
    survivors = tuple(sorted(server.survivors))
    tree = survivor_tree(server._round_session, survivors)
    index_of = {c: i for i, c in enumerate(survivors)}
    stranger = next(c for c in survivors if c not in server.neighbours(1) | {1})
    positions, proof = neighbourhood_proof(
        tree, index_of, frozenset(server.neighbours(1) | {1, stranger})
    )
    listed = tuple(survivors[i] for i in positions)
    with pytest.raises(ProtocolAbort, match="outside the neighbourhood"):
        clients[1].consistency_check(
            ConsistencyRequest(**_hdr(cfg), recipient=1, survivors=listed, proof=proof)
        )


@pytest.mark.slow
def test_a_tampered_survivor_proof_signs_another_root_which_nobody_accepts() -> None:
    _cfg, clients, server, _, _ = _to_consistency()
    request = server.consistency_requests()[1]
    assert request.proof is not None and request.proof.hashes
    hashes = list(request.proof.hashes)
    hashes[-1] = bytes([hashes[-1][0] ^ 1]) + hashes[-1][1:]
    bad = dataclasses.replace(
        request, proof=dataclasses.replace(request.proof, hashes=tuple(hashes))
    )
    try:
        signature = clients[1].consistency_check(bad)
    except ProtocolAbort:
        return  # refused outright
    # Signed, but on another root: the server refuses it, so it is never forwarded.
    with pytest.raises(ProtocolAbort, match="invalid"):
        deliver(server, signature)


@pytest.mark.slow
def test_signatures_on_another_survivor_root_do_not_count() -> None:
    """A split view of the survivors: the victim's neighbours were shown another set."""
    cfg, clients, server, _, _late = _to_consistency()
    honest = server.consistency_requests()
    victim = 1
    # Everybody but the victim is shown a set in which client 7 survived (it did not).
    other_set = tuple(sorted(server.survivors | {7}))
    tree = survivor_tree(server._round_session, other_set)
    index_of = {c: i for i, c in enumerate(other_set)}
    signatures = {}
    for cid in honest:
        if cid == victim:
            deliver(server, clients[cid].consistency_check(honest[cid]))
            continue
        positions, proof = neighbourhood_proof(tree, index_of, server.neighbours(cid) | {cid})
        request = ConsistencyRequest(
            **_hdr(cfg),
            recipient=cid,
            survivors=tuple(other_set[i] for i in positions),
            proof=proof,
        )
        signatures[cid] = clients[cid].consistency_check(request).signature
    view = clients[victim]._masked_with | {victim}
    signed = set(clients[victim]._signed_survivors or ())
    cosigners = sorted(server.neighbours(victim) & set(signatures))[: cfg.threshold]
    request = UnmaskRequest(
        **_hdr(cfg),
        recipient=victim,
        survivors=tuple(sorted(signed & view)),
        dropped=tuple(sorted(view - signed)),
        signatures=tuple(SurvivorSignature(c, signatures[c]) for c in cosigners),
    )
    with pytest.raises(ProtocolAbort, match="invalid"):
        clients[victim].unmask(request)
    assert clients[victim].aborted and clients[victim]._own_shares is None
