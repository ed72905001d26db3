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
import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeVar

import numpy as np
import numpy.typing as npt

from privfed.secagg.protocol.committee import (
    committed_digest,
    committee_positions,
    committee_seed,
    graph_commitment,
    reveal_payload,
)
from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.graph import advertisement_hash, graph_seed_of_root
from privfed.secagg.protocol.identity import (
    IdentityRegistry,
    advertisement_payload,
    survivor_set_payload,
)
from privfed.secagg.protocol.identity_root import proven_keys
from privfed.secagg.protocol.messages._codec import _unchecked
from privfed.secagg.protocol.messages.roster import (
    CommitteeRequest,
    CommitteeReveal,
    IdentityProof,
    Roster,
    RosterEntry,
    RosterProof,
)
from privfed.secagg.protocol.messages.unmasking import ConsistencyRequest
from privfed.secagg.protocol.roster_tree import (
    ProofError,
    RosterTree,
    check_coverage,
    root_of_proof,
    without,
)

__all__ = [
    "SURVIVOR_LEAF",
    "RosterRefusedError",
    "entry_digest",
    "identity_proofs",
    "member_root",
    "neighbourhood_proof",
    "neighbourhood_proofs",
    "pick",
    "roster_graph",
    "roster_identities",
    "roster_parts",
    "roster_tree",
    "signed_reveal",
    "survivor_payload",
    "survivor_root",
    "survivor_root_payload",
    "survivor_tree",
    "unsigned_entry",
]


_T = TypeVar("_T")


class RosterRefusedError(Exception):
    """A roster part the client must refuse (the message names the reason, no secret)."""


#: ``verify(signer, payload, signature)``: the client's check against the registry.
Verifier = Callable[[int, bytes, bytes], bool]


def roster_identities(
    config: SecAggConfig, client_id: int, public_key: bytes, roster: Roster
) -> dict[int, bytes]:
    """Active mode: ``{id: identity key}`` a roster part proves against the config's root.

    The keys come from the part's :class:`IdentityProof`, checked against
    the root of the config's registry (the registry itself, or the
    :class:`~privfed.secagg.IdentityRoot` a client pins), so a client checks
    signatures with enrolled keys only, and never needs the whole registry.
    The proof must enrol ``public_key`` as ``client_id``'s own.

    Raises:
        RosterRefusedError: No proof, a proof that does not rebuild the root,
            or one that does not hold this client's own key.
    """
    identities = roster.identities
    registry = config.identities
    if identities is None:
        raise RosterRefusedError("the roster carries no proof of its signers' identity keys")
    root = registry.commitment if isinstance(registry, IdentityRegistry) else registry
    if root is None:  # pragma: no cover -- active configs hold a registry
        raise RosterRefusedError("no identity registry to check the roster against")
    try:
        keys = proven_keys(root, identities.count, identities.items, identities.hashes)
    except ProofError as exc:
        raise RosterRefusedError(f"the roster's identity proof is refused: {exc}") from None
    if keys.get(client_id) != public_key:
        raise RosterRefusedError("the identity root does not enrol this client's key under its id")
    return keys


def roster_tree(session: bytes, entries: Sequence[RosterEntry]) -> RosterTree:
    """The server's Merkle tree over the roster's entries (SecAgg+), sorted by id."""
    return RosterTree(
        session,
        [
            (
                e.client_id,
                entry_digest(
                    session,
                    e.client_id,
                    e.encryption_public_key,
                    e.mask_public_key,
                    e.graph_commitment,
                ),
            )
            for e in entries
        ],
    )


def unsigned_entry(
    config: SecAggConfig, client_id: int, roster: Roster, verify: Verifier
) -> int | None:
    """Active mode: the first entry (other than ``client_id``'s own) whose advertised keys
    carry no valid signature, or ``None`` when every one is signed."""
    for e in roster.entries:
        if e.client_id == client_id:
            continue
        payload = advertisement_payload(
            session=config.bound_session_id,
            config_digest=config.digest,
            client_id=e.client_id,
            encryption_public_key=e.encryption_public_key,
            mask_public_key=e.mask_public_key,
        )
        if e.signature is None or not verify(e.client_id, payload, e.signature):
            return e.client_id
    return None


def entry_digest(
    session: bytes,
    client_id: int,
    encryption_public_key: bytes,
    mask_public_key: bytes,
    graph_commitment: bytes | None,
) -> bytes:
    """The digest a member's leaf carries: its advertisement hash, and in committee mode
    its graph commitment (:func:`~privfed.secagg.protocol.committee.committed_digest`)."""
    digest = advertisement_hash(session, client_id, encryption_public_key, mask_public_key)
    return digest if graph_commitment is None else committed_digest(digest, graph_commitment)


def roster_graph(
    config: SecAggConfig,
    client_id: int,
    roster: Roster,
    entries: dict[int, tuple[bytes, bytes]],
    *,
    verify: Verifier | None = None,
    revealed_root: bytes | None = None,
) -> tuple[bytes, frozenset[int], frozenset[int]]:
    """``(graph seed, neighbours, members of the neighbourhood)`` of a SecAgg+ roster part.

    Args:
        config: The round's config (a Harary graph).
        client_id: The recipient.
        roster: The part; without a proof it must be the whole roster (the
            client then builds the tree itself, ``O(n)``).
        entries: ``{id: (encryption key, mask key)}`` of ``roster``'s entries,
            already checked by the client.
        verify: Committee mode: checks a committee member's signature.
        revealed_root: Committee mode: the root this client revealed its
            graph value for, if it was asked to.

    Raises:
        RosterRefusedError: The proof does not rebuild a root, or the part does not
            show the whole neighbourhood (see the module docstring).
    """
    session = config.bound_session_id
    proof = roster.proof
    if proof is None:
        if config.committee:
            raise RosterRefusedError("a committed roster part must carry its proof")
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
        if config.committee and verify is None:
            raise RosterRefusedError("a committed roster part must carry its proof")
        root, leaves, revealed = _proof_root(config, roster, entries)
        try:
            if config.committee:
                at = next(
                    (
                        i
                        for i, e in zip(proof.positions, roster.entries, strict=True)
                        if e.client_id == client_id
                    ),
                    None,
                )
                _check_committee(config, client_id, at, root, proof, verify, revealed_root)
                seed = committee_seed(session, root, revealed)
            else:
                seed = graph_seed_of_root(session, root)
            neighbours = config.neighbours(client_id, seed)
            members = check_coverage(
                proof.count, {i: cid for i, (cid, _) in leaves.items()}, neighbours | {client_id}
            )
        except ProofError as exc:
            raise RosterRefusedError(f"the roster's proof is refused: {exc}") from None
        if not set(entries) <= neighbours | {client_id}:
            raise RosterRefusedError("the roster part lists a client outside the neighbourhood")
    hood = neighbours | {client_id}
    if members & hood != set(entries) & hood:
        raise RosterRefusedError("the roster leaves out part of this client's neighbourhood")
    return seed, neighbours, frozenset(members & hood)


def _proof_root(
    config: SecAggConfig, roster: Roster, entries: dict[int, tuple[bytes, bytes]]
) -> tuple[bytes, dict[int, tuple[int, bytes]], list[tuple[int, bytes]]]:
    """``(root, {position: (id, leaf digest)}, [(position, revealed value)])`` that a part's
    proof rebuilds from its entries, brackets and committee reveals."""
    proof = roster.proof
    if proof is None:  # pragma: no cover -- the caller checked
        raise RosterRefusedError("the roster part carries no proof of the roster root")
    session = config.bound_session_id
    leaves = {
        index: (
            e.client_id,
            entry_digest(session, e.client_id, *entries[e.client_id], e.graph_commitment),
        )
        for index, e in zip(proof.positions, roster.entries, strict=True)
    }
    for index, member, digest in proof.brackets:
        if index in leaves or member not in config.client_ids:
            raise RosterRefusedError("the roster's proof is malformed")
        leaves[index] = (member, digest)
    if proof.committee and not config.committee:
        raise RosterRefusedError("committee reveals outside active SecAgg+")
    revealed = []
    for index, member, digest, value, _ in proof.committee:
        if member not in config.client_ids:
            raise RosterRefusedError("the roster's committee names a client outside the config")
        leaf = (member, committed_digest(digest, graph_commitment(session, member, value)))
        if leaves.setdefault(index, leaf) != leaf:
            raise RosterRefusedError("a committee reveal does not match its roster leaf")
        revealed.append((index, value))
    try:
        root = root_of_proof(session, proof.count, leaves, proof.hashes)
    except ProofError as exc:
        raise RosterRefusedError(f"the roster's proof is refused: {exc}") from None
    return root, leaves, revealed


def _check_committee(
    config: SecAggConfig,
    client_id: int,
    at: int | None,
    root: bytes,
    proof: RosterProof,
    verify: Verifier | None,
    revealed_root: bytes | None,
) -> None:
    """Refuse a part whose reveals are not the root's committee, signed, for this very root."""
    session = config.bound_session_id
    drawn = committee_positions(session, root, proof.count, config.committee_seats(proof.count))
    shown = [c[0] for c in proof.committee]
    if not set(shown) <= set(drawn):
        raise RosterRefusedError("a reveal comes from a leaf the root did not draw")
    if len(shown) < len(drawn) - config.committee_dropouts:
        raise RosterRefusedError(
            f"{len(shown)} of the {len(drawn)} committee members revealed "
            f"(at most {config.committee_dropouts} may be missing)"
        )
    if revealed_root is not None and revealed_root != root:
        raise RosterRefusedError("this client revealed its graph value for another root")
    if at in drawn and (revealed_root != root or at not in shown):
        # Its own seat: only its own reveal for this very root may fill it (the value
        # shown opens its commitment, checked above), so a state copy that never
        # revealed cannot be carried into a root by a reveal made for another one.
        raise RosterRefusedError(
            "this client was drawn for the committee but its own reveal for this root is missing"
        )
    if verify is None:  # pragma: no cover -- roster_graph requires it
        raise RosterRefusedError("no registry to check the committee against")
    for _index, member, _digest, value, signature in proof.committee:
        payload = reveal_payload(
            session=session, config_digest=config.digest, root=root, client_id=member, value=value
        )
        if member != client_id and not verify(member, payload, signature):
            raise RosterRefusedError(f"the reveal of committee member {member} is not signed")


def member_root(
    config: SecAggConfig,
    request: CommitteeRequest,
    client_id: int,
    keys: tuple[bytes, bytes],
    commitment: bytes | None,
    revealed_root: bytes | None,
) -> bytes:
    """The root a committee request proves, once it holds this member's leaf and draws it.

    Raises:
        RosterRefusedError: Not a committee round, a proof that does not give
            a root, a root that does not draw the member's leaf, or another
            root than the one already revealed for.
    """
    if not config.committee or commitment is None:
        raise RosterRefusedError("a committee request outside active SecAgg+")
    session = config.bound_session_id
    leaf = (client_id, entry_digest(session, client_id, *keys, commitment))
    try:
        root = root_of_proof(session, request.count, {request.position: leaf}, request.hashes)
    except ProofError as exc:
        raise RosterRefusedError(f"the committee request's proof is refused: {exc}") from None
    drawn = committee_positions(session, root, request.count, config.committee_seats(request.count))
    if request.position not in drawn:
        raise RosterRefusedError("the roster root does not draw this client for its committee")
    if revealed_root not in (None, root):
        raise RosterRefusedError("asked to reveal for a second roster root")
    return root


def signed_reveal(
    config: SecAggConfig,
    client_id: int,
    root: bytes,
    value: bytes,
    sign: Callable[[bytes], bytes],
) -> CommitteeReveal:
    """A member's :class:`CommitteeReveal`: ``value`` signed for ``root``."""
    session = config.bound_session_id
    payload = reveal_payload(
        session=session, config_digest=config.digest, root=root, client_id=client_id, value=value
    )
    return CommitteeReveal(
        session_id=session,
        round_index=config.round_index,
        sender=client_id,
        value=value,
        signature=sign(payload),
    )


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


def survivor_payload(
    *, session: bytes, config_digest: bytes, survivors: tuple[int, ...], root: bytes | None
) -> bytes:
    """What a survivor signs: the survivor set (complete graph, ``root`` is ``None``)
    or, in SecAgg+, its tree's root (:func:`survivor_root_payload`)."""
    if root is None:
        return survivor_set_payload(
            session=session, config_digest=config_digest, survivors=survivors
        )
    return survivor_root_payload(session=session, config_digest=config_digest, root=root)


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
    tree: RosterTree,
    index_of: dict[int, int],
    hood: frozenset[int],
    committee: tuple[tuple[int, int, bytes, bytes, bytes], ...] = (),
) -> tuple[tuple[int, ...], RosterProof]:
    """The server's side: the leaf positions of ``hood``'s members and their multiproof.

    One neighbourhood at a time: the plain statement of what
    :func:`neighbourhood_proofs` computes in batches (the server calls that;
    the tests check the two agree byte for byte).

    ``committee`` (active SecAgg+): the reveals every part carries; the
    multiproof covers their leaves too.
    """
    windows = tree.windows(hood)
    positions = tuple(index_of[c] for c in sorted(hood) if c in index_of)
    seats = {item[0] for item in committee}
    brackets = sorted(windows.difference(positions).difference(seats))
    proof = _unchecked(
        RosterProof,
        {
            "count": tree.count,
            "positions": positions,
            "brackets": tuple((i, *tree.member(i)) for i in brackets),
            "hashes": tree.prove(windows | seats),
            "committee": committee,
        },
    )
    return positions, proof


#: The client sets :func:`neighbourhood_proofs` walks together (bounds its arrays).
PROOF_BATCH: Final = 256


def neighbourhood_proofs(
    tree: RosterTree,
    hoods: Sequence[frozenset[int]],
    committee: tuple[tuple[int, int, bytes, bytes, bytes], ...] = (),
) -> list[tuple[tuple[int, ...], RosterProof]]:
    """:func:`neighbourhood_proof` of each of ``hoods`` (the same values), batched.

    The leaf positions are the tree's own (``index_of`` of
    :func:`neighbourhood_proof` is the position of each id in the sorted
    ids the tree was built from).  The windows and the multiproofs of up to
    :data:`PROOF_BATCH` neighbourhoods are found with array operations over
    all of them at once (:meth:`~RosterTree.windows_many`,
    :meth:`~RosterTree.prove_many`): the same leaves and hashes, without a
    Python step per tree node.
    """
    out: list[tuple[tuple[int, ...], RosterProof]] = []
    for start in range(0, len(hoods), PROOF_BATCH):
        out += _proof_batch(tree, hoods[start : start + PROOF_BATCH], committee)
    return out


def _split(keys: npt.NDArray[np.int64], rows: int) -> list[list[int]]:
    """The leaves of sorted keys ``row << 32 | leaf``, one list per row."""
    bounds = np.concatenate([[0], np.cumsum(np.bincount(keys >> 32, minlength=rows))]).tolist()
    leaves = (keys & np.int64(0xFFFFFFFF)).tolist()
    return [leaves[a:b] for a, b in itertools.pairwise(bounds)]


def _proof_batch(
    tree: RosterTree,
    hoods: Sequence[frozenset[int]],
    committee: tuple[tuple[int, int, bytes, bytes, bytes], ...],
) -> list[tuple[tuple[int, ...], RosterProof]]:
    windows, members = tree.windows_many(hoods)
    rows = np.arange(len(hoods), dtype=np.int64)[:, None] << 32
    seats = (rows | np.asarray([item[0] for item in committee], dtype=np.int64)).ravel()
    hashes = tree.prove_many(np.concatenate([windows, seats]), len(hoods))
    # Brackets: the windows' leaves that are neither entries nor committee seats.
    brackets = _split(without(windows, np.concatenate([members, seats])), len(hoods))
    out = []
    for row, positions in enumerate(_split(members, len(hoods))):
        proof = _unchecked(
            RosterProof,
            {
                "count": tree.count,
                "positions": tuple(positions),
                "brackets": tree.leaf_items(brackets[row]),
                "hashes": hashes[row],
                "committee": committee,
            },
        )
        out.append((proof.positions, proof))
    return out


def pick(values: Sequence[_T], positions: Sequence[int]) -> tuple[_T, ...]:
    """``tuple(values[i] for i in positions)``, in one C call."""
    if len(positions) < 2:
        return tuple(values[i] for i in positions)
    return tuple(operator.itemgetter(*positions)(values))


def identity_proofs(
    registry: IdentityRegistry, sets: Sequence[Iterable[int]]
) -> list[IdentityProof]:
    """The server's :class:`IdentityProof` of each of ``sets`` of enrolled ids (batched)."""
    count = len(registry.public_keys)
    return [
        _unchecked(IdentityProof, {"count": count, "items": items, "hashes": hashes})
        for items, hashes in registry.key_proofs(sets)
    ]


def roster_parts(
    roster: Roster,
    tree: RosterTree,
    hoods: Sequence[frozenset[int]],
    committee: tuple[tuple[int, int, bytes, bytes, bytes], ...],
    registry: IdentityRegistry | None = None,
) -> list[Roster]:
    """The server's SecAgg+ roster part for each of ``hoods`` (a client and its neighbours).

    With ``registry`` (active mode) each part carries the identity keys of its
    entries and of the committee, with their proof (:func:`identity_proofs`).
    """
    entries = roster.entries
    proofs = neighbourhood_proofs(tree, hoods, committee)
    signers: list[IdentityProof | None] = [None] * len(proofs)
    if registry is not None:
        seats = [item[1] for item in committee]
        signers = list(
            identity_proofs(
                registry, [[entries[i].client_id for i in at] + seats for at, _ in proofs]
            )
        )
    # A sorted subset of the validated full roster with the proof the recipient
    # needs to rebuild the root: valid by construction.
    return [
        Roster._trusted(
            session_id=roster.session_id,
            round_index=roster.round_index,
            entries=pick(entries, positions),
            proof=proof,
            identities=keys,
        )
        for (positions, proof), keys in zip(proofs, signers, strict=True)
    ]
