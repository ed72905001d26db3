"""Communication graphs: who masks with, and shares secrets with, whom.

Two modes:

* :attr:`GraphMode.COMPLETE` -- every client is a neighbour of every other
  client, as in Bonawitz et al. (arXiv:1611.04482).  Client cost grows linearly
  and server cost quadratically in the number of clients.
* :attr:`GraphMode.HARARY` -- SecAgg+ (Bell et al., arXiv:2009.01867, §3): a
  Harary graph ``H(k, n)`` over a random permutation of the clients.  Each
  client masks with, and shares with, only its ``k`` neighbours, so costs grow
  with ``k = O(log n)`` instead of ``n``.

The permutation is derived deterministically with SHAKE-256 from a *graph
seed*, so every party computes the same graph without another message.  The
seed is :func:`graph_seed`: a hash of the roster's Merkle root
(:mod:`~privfed.secagg.protocol.roster_tree`), which commits to every roster
member's fresh advertisement (its id and round public keys), bound to the
session and the configuration digest -- not a value the server picks.  Before the roster
exists nobody can predict the graph, so a server cannot grind session ids
offline until a target's neighbourhood is all colluders; what remains to it is
choosing *which* advertisers make the roster (and, with colluding clients,
their re-drawn keys) -- measured and stated in SECURITY.md.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence

from privfed.secagg.protocol.roster_tree import RosterTree

__all__ = [
    "GraphMode",
    "advertisement_hash",
    "build_neighbourhoods",
    "graph_seed",
    "graph_seed_of_root",
    "graph_session",
    "harary_neighbourhoods",
]

_PERMUTATION_DOMAIN = b"privfed/secagg/harary-permutation/v1"
_ADVERTISEMENT_DOMAIN = b"privfed/secagg/advertisement-hash/v1"
_SEED_DOMAIN = b"privfed/secagg/graph-seed/v2"
_GRAPH_SESSION_DOMAIN = b"privfed/secagg/graph-session/v1"


def graph_session(session: bytes, seed: bytes | None) -> bytes:
    """The session that pairwise keys, share AEADs and survivor-set signatures are bound to.

    The bound session id itself for the complete graph (``seed`` is ``None``);
    for SecAgg+ ``SHA-256(domain || session || graph seed)``, so two clients
    that were shown different rosters (hence different graphs) cannot exchange
    shares, cancel masks or count each other's signatures.
    """
    if seed is None:
        return session
    return hashlib.sha256(_GRAPH_SESSION_DOMAIN + bytes((len(session),)) + session + seed).digest()


def advertisement_hash(
    session: bytes, client_id: int, encryption_public_key: bytes, mask_public_key: bytes
) -> bytes:
    """SHA-256 of one roster member's advertisement (its id and both round public keys)."""
    return hashlib.sha256(
        _ADVERTISEMENT_DOMAIN
        + bytes((len(session),))
        + session
        + client_id.to_bytes(4, "big")
        + encryption_public_key
        + mask_public_key
    ).digest()


def graph_seed(session: bytes, members: Sequence[tuple[int, bytes]]) -> bytes:
    """The 32-byte Harary graph seed of a roster.

    Args:
        session: The bound session id (it carries the configuration digest).
        members: ``(client_id, advertisement_hash)`` of every roster member,
            ids strictly increasing.

    Returns:
        :func:`graph_seed_of_root` of the roster's Merkle root
        (:class:`~privfed.secagg.protocol.roster_tree.RosterTree`).
    """
    return graph_seed_of_root(session, RosterTree(session, members).root)


def graph_seed_of_root(session: bytes, root: bytes) -> bytes:
    """``SHA-256(domain || len(session) || session || roster root)``: the seed a root fixes."""
    return hashlib.sha256(_SEED_DOMAIN + bytes((len(session),)) + session + root).digest()


class GraphMode(enum.Enum):
    """How clients are connected.

    Attributes:
        COMPLETE: Every pair of clients is connected.
        HARARY: SecAgg+ random Harary graph of a chosen degree.
    """

    COMPLETE = "complete"
    HARARY = "harary"


class _ShakeStream:
    """Deterministic bytes from SHAKE-256, read in blocks."""

    def __init__(self, seed: bytes) -> None:
        self._seed = seed
        self._counter = 0
        self._buffer = b""

    def read(self, n: int) -> bytes:
        while len(self._buffer) < n:
            block = hashlib.shake_256(self._seed + self._counter.to_bytes(8, "big")).digest(4096)
            self._counter += 1
            self._buffer += block
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def below(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)`` by rejection sampling (no modulo bias)."""
        nbytes = max(1, (bound.bit_length() + 7) // 8)
        limit = (256**nbytes // bound) * bound
        while True:
            value = int.from_bytes(self.read(nbytes), "big")
            if value < limit:
                return value % bound


def _permutation(client_ids: Sequence[int], *, session_id: bytes, round_index: int) -> list[int]:
    """Fisher-Yates shuffle of the sorted ids, driven by SHAKE-256 of public values."""
    seed = (
        _PERMUTATION_DOMAIN
        + len(session_id).to_bytes(2, "big")
        + session_id
        + round_index.to_bytes(8, "big")
        + len(client_ids).to_bytes(8, "big")
    )
    stream = _ShakeStream(seed)
    order = sorted(client_ids)
    for i in range(len(order) - 1, 0, -1):
        j = stream.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def harary_neighbourhoods(
    client_ids: Sequence[int], *, degree: int, session_id: bytes, round_index: int
) -> dict[int, frozenset[int]]:
    """Neighbours of every client in a random Harary graph ``H(degree, n)``.

    The clients are placed on a ring in a pseudo-random order derived from the
    public ``session_id`` and ``round_index``; each is connected to its
    ``degree // 2`` nearest positions on either side and, when ``degree`` is odd,
    to the diametrically opposite position (``n`` must then be even).  The graph
    is ``degree``-regular and ``degree``-connected.

    Args:
        client_ids: Distinct client ids (any order; the result does not depend
            on it).
        degree: Neighbours per client, an int in ``[2, n - 1]``; if odd, ``n``
            must be even.  Validated by :class:`~privfed.secagg.SecAggConfig`.
        session_id: Public session id (seeds the permutation).
        round_index: Public round index (seeds the permutation).

    Returns:
        A mapping from each client id to the frozenset of its neighbours (never
        containing the client itself).
    """
    order = _permutation(client_ids, session_id=session_id, round_index=round_index)
    n = len(order)
    half = degree // 2
    result: dict[int, frozenset[int]] = {}
    for position, client in enumerate(order):
        peers = set()
        for offset in range(1, half + 1):
            peers.add(order[(position + offset) % n])
            peers.add(order[(position - offset) % n])
        if degree % 2 == 1:
            peers.add(order[(position + n // 2) % n])
        result[client] = frozenset(peers)
    return result


def build_neighbourhoods(
    client_ids: Sequence[int],
    *,
    mode: GraphMode,
    degree: int | None,
    session_id: bytes,
    round_index: int,
) -> Mapping[int, frozenset[int]]:
    """Neighbours of every client for a graph mode (see :class:`GraphMode`)."""
    if mode is GraphMode.COMPLETE:
        everyone = frozenset(client_ids)
        return {client: everyone - {client} for client in client_ids}
    if degree is None:  # pragma: no cover -- SecAggConfig guarantees a degree
        raise TypeError("a Harary graph needs a degree")
    return harary_neighbourhoods(
        client_ids, degree=degree, session_id=session_id, round_index=round_index
    )
