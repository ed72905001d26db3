"""A SecAgg+ client's check of its roster part: the root, the graph, the neighbourhood.

The client rebuilds the roster's Merkle root from the entries of its part, the
bracket leaves and the multiproof
(:func:`~privfed.secagg.protocol.roster_tree.root_of_proof`), derives the graph
seed from the root, and then requires the revealed leaves to show, for every
client of its neighbourhood, whether that client is a member
(:func:`~privfed.secagg.protocol.roster_tree.check_coverage`): a part that
leaves out a member of the neighbourhood, lists a client twice or lists a
client outside the neighbourhood is refused.  Its work and download are
``O(k log n)``.

What a single client cannot see is whether *other* clients were shown the same
root.  That is caught later: the graph seed (so the root) is bound into every
pairwise key, share ciphertext and survivor-set signature
(:func:`~privfed.secagg.protocol.graph.graph_session`), so a client shown
another root can neither open its neighbours' shares nor count their
signatures.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.graph import advertisement_hash, graph_seed_of_root
from privfed.secagg.protocol.messages._codec import _unchecked
from privfed.secagg.protocol.messages.roster import Roster, RosterProof
from privfed.secagg.protocol.messages.unmasking import ConsistencyRequest
from privfed.secagg.protocol.roster_tree import (
    ProofError,
    RosterTree,
    check_coverage,
    root_of_proof,
)

__all__ = [
    "SURVIVOR_LEAF",
    "RosterRefusedError",
    "neighbourhood_proof",
    "roster_graph",
    "survivor_root",
    "survivor_root_payload",
    "survivor_tree",
]


class RosterRefusedError(Exception):
    """A roster part the client must refuse (the message names the reason, no secret)."""


def roster_graph(
    config: SecAggConfig,
    client_id: int,
    roster: Roster,
    entries: dict[int, tuple[bytes, bytes]],
) -> tuple[bytes, frozenset[int], frozenset[int]]:
    """``(graph seed, neighbours, members of the neighbourhood)`` of a SecAgg+ roster part.

    Args:
        config: The round's config (a Harary graph).
        client_id: The recipient.
        roster: The part; without a proof it must be the whole roster (the
            client then builds the tree itself, ``O(n)``).
        entries: ``{id: (encryption key, mask key)}`` of ``roster``'s entries,
            already checked by the client.

    Raises:
        RosterRefusedError: The proof does not rebuild a root, or the part does not
            show the whole neighbourhood (see the module docstring).
    """
    session = config.bound_session_id
    if roster.proof is None:
        root = RosterTree(
            session,
            [
                (cid, advertisement_hash(session, cid, *pair))
                for cid, pair in sorted(entries.items())
            ],
        ).root
        seed = graph_seed_of_root(session, root)
        neighbours = config.neighbours(client_id, seed)
        members = set(entries)
    else:
        seed, neighbours, members = _checked_proof(config, client_id, roster, entries)
    hood = neighbours | {client_id}
    if members & hood != set(entries) & hood:
        raise RosterRefusedError("the roster leaves out part of this client's neighbourhood")
    return seed, neighbours, frozenset(members & hood)


def _checked_proof(
    config: SecAggConfig,
    client_id: int,
    roster: Roster,
    entries: dict[int, tuple[bytes, bytes]],
) -> tuple[bytes, frozenset[int], set[int]]:
    proof = roster.proof
    if proof is None:  # pragma: no cover -- the caller checked
        raise RosterRefusedError("the roster part carries no proof of the roster root")
    session = config.bound_session_id
    leaves = {
        index: (e.client_id, advertisement_hash(session, e.client_id, *entries[e.client_id]))
        for index, e in zip(proof.positions, roster.entries, strict=True)
    }
    for index, member, digest in proof.brackets:
        if index in leaves or member not in config.client_id_set:
            raise RosterRefusedError("the roster's proof is malformed")
        leaves[index] = (member, digest)
    try:
        root = root_of_proof(session, proof.count, leaves, proof.hashes)
        seed = graph_seed_of_root(session, root)
        neighbours = config.neighbours(client_id, seed)
        members = check_coverage(
            proof.count, {i: cid for i, (cid, _) in leaves.items()}, neighbours | {client_id}
        )
    except ProofError as exc:
        raise RosterRefusedError(f"the roster's proof is refused: {exc}") from None
    if not set(entries) <= neighbours | {client_id}:
        raise RosterRefusedError("the roster part lists a client outside the neighbourhood")
    return seed, neighbours, members


# -- the survivor set by commitment (SecAgg+ ConsistencyCheck) ---------------------------

#: The digest every leaf of a survivor tree carries (the tree commits to ids only).
SURVIVOR_LEAF: Final = hashlib.sha256(b"privfed/secagg/survivor-leaf/v1").digest()
_SURVIVOR_ROOT_DOMAIN: Final = b"privfed/secagg/survivor-root/v1"


def survivor_tree(session: bytes, survivors: Sequence[int]) -> RosterTree:
    """The Merkle tree over the survivor set (ids increasing), bound to ``session``."""
    return RosterTree(session, [(c, SURVIVOR_LEAF) for c in survivors])


def survivor_root_payload(*, session: bytes, config_digest: bytes, root: bytes) -> bytes:
    """What a SecAgg+ client signs in the ConsistencyCheck round: the survivor tree's root.

    ``domain || len(session) || session || config digest || root``, with the
    graph session, so a signature counts only in the graph it was made in.
    Signing the root of the whole set binds the signer to the whole set, as
    signing the set itself would (collision resistance of SHA-256).
    """
    return b"".join([_SURVIVOR_ROOT_DOMAIN, bytes((len(session),)), session, config_digest, root])


def survivor_root(
    session: bytes, request: ConsistencyRequest, hood: frozenset[int]
) -> tuple[bytes, frozenset[int]]:
    """``(root, survivors of the neighbourhood)`` a ConsistencyRequest commits to.

    Without a proof, ``request.survivors`` is the whole set and the client
    builds the tree itself (``O(n)``); with one, the listed survivors, the
    bracket leaves and the multiproof rebuild the root, and the windows must
    show every survivor of ``hood`` (the listed ones, and no other).

    Raises:
        RosterRefusedError: The proof does not rebuild a root, or does not show
            the neighbourhood's survivors exactly.
    """
    proof = request.proof
    if proof is None:
        if not request.survivors:
            raise RosterRefusedError("an empty survivor set")
        return survivor_tree(session, request.survivors).root, frozenset(request.survivors) & hood
    leaves = {
        i: (c, SURVIVOR_LEAF) for i, c in zip(proof.positions, request.survivors, strict=True)
    }
    for index, client, digest in proof.brackets:
        if index in leaves or digest != SURVIVOR_LEAF:
            raise RosterRefusedError("the survivor set's proof is malformed")
        leaves[index] = (client, digest)
    try:
        root = root_of_proof(session, proof.count, leaves, proof.hashes)
        members = check_coverage(proof.count, {i: c for i, (c, _) in leaves.items()}, hood)
    except ProofError as exc:
        raise RosterRefusedError(f"the survivor set's proof is refused: {exc}") from None
    if members != set(request.survivors):
        raise RosterRefusedError(
            "the survivor set's proof lists clients outside the neighbourhood or leaves one out"
        )
    return root, frozenset(members)


def neighbourhood_proof(
    tree: RosterTree, index_of: dict[int, int], hood: frozenset[int]
) -> tuple[tuple[int, ...], RosterProof]:
    """The server's side: the leaf positions of ``hood``'s members and their multiproof."""
    windows = tree.windows(hood)
    positions = tuple(index_of[c] for c in sorted(hood) if c in index_of)
    proof = _unchecked(
        RosterProof,
        {
            "count": tree.count,
            "positions": positions,
            "brackets": tuple((i, *tree.member(i)) for i in sorted(windows.difference(positions))),
            "hashes": tree.prove(windows),
        },
    )
    return positions, proof
