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

import bisect
import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from privfed.secagg.protocol.roster_tree import RosterTree

__all__ = [
    "GraphMode",
    "advertisement_hash",
    "build_neighbourhoods",
    "graph_seed",
    "graph_seed_of_root",
    "graph_session",
    "harary_neighbourhoods",
    "harary_neighbours",
]

_PERMUTATION_DOMAIN = b"privfed/secagg/harary-permutation/v2"
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


class _Permutation:
    """A keyed pseudo-random permutation of ``[0, n)``: a Feistel network with cycle walking.

    Eight rounds of a balanced Feistel network on ``2 * half`` bits (the
    smallest even width that holds ``n - 1``), each round function the first 8
    bytes of SHA-256 of (key, round, right half); values ``>= n`` are walked
    (permuted again) until they fall in ``[0, n)``, which keeps the map a
    bijection of ``[0, n)``.  Forward and inverse cost ``O(1)`` hashes each
    (about 8 times the expected walk of at most 4 steps), so one client's
    neighbourhood costs ``O(k)``, not ``O(n)``.
    """

    _ROUNDS = 8

    def __init__(self, key: bytes, n: int) -> None:
        self._key = key
        self._n = n
        bits = max(2, (n - 1).bit_length())
        self._half = (bits + 1) // 2
        self._mask = (1 << self._half) - 1
        # Round values met so far, keyed ``(r << half) | value``: a half takes
        # only ``2**half`` (``O(sqrt(n))``) values, so the ``O(degree)``
        # forward and inverse steps of one neighbourhood hash each pair once.
        self._memo: dict[int, int] = {}
        # Round ``r`` hashes ``key || r || value u64``: the first part, once per round.
        self._prefixes = tuple(key + bytes((r,)) for r in range(self._ROUNDS))
        # The inverse's rounds, last first, each with its memo key's high bits.
        self._down = tuple((r, r << self._half) for r in reversed(range(self._ROUNDS)))

    def _round(self, r: int, value: int) -> int:
        out = self._memo.get((r << self._half) | value)
        return self._hash_round(r, value) if out is None else out

    def _hash_round(self, r: int, value: int) -> int:
        digest = hashlib.sha256(self._prefixes[r] + value.to_bytes(8, "big")).digest()
        out = self._memo[(r << self._half) | value] = int.from_bytes(digest[:8], "big") & self._mask
        return out

    def _forward_once(self, x: int) -> int:
        half, memo = self._half, self._memo
        left, right = x >> half, x & self._mask
        for r in range(self._ROUNDS):
            f = memo.get((r << half) | right)
            left, right = right, left ^ (self._hash_round(r, right) if f is None else f)
        return (left << half) | right

    def forward(self, x: int) -> int:
        """The image of ``x`` in ``[0, n)``."""
        y = self._forward_once(x)
        while y >= self._n:
            y = self._forward_once(y)
        return y

    def inverse(self, y: int) -> int:
        """The preimage of ``y`` in ``[0, n)``."""
        return self.inverse_many((y,))[0]

    def inverse_many(self, ys: Iterable[int]) -> list[int]:
        """``[inverse(y) for y in ys]``: one loop, the round function inlined.

        A neighbourhood's ``degree`` preimages are the bulk of a client's
        graph work; each (round, half value) is still hashed once (the memo).
        """
        half, mask, memo, n = self._half, self._mask, self._memo, self._n
        prefixes, down, sha256 = self._prefixes, self._down, hashlib.sha256
        out: list[int] = []
        for y in ys:
            while True:  # walk until the preimage falls in [0, n)
                left, right = y >> half, y & mask
                for r, base in down:
                    f = memo.get(base | left)
                    if f is None:
                        digest = sha256(prefixes[r] + left.to_bytes(8, "big")).digest()
                        f = memo[base | left] = int.from_bytes(digest[:8], "big") & mask
                    left, right = right ^ f, left
                y = (left << half) | right
                if y < n:
                    break
            out.append(y)
        return out

    def forward_all(self) -> list[int]:
        """``[forward(x) for x in range(n)]``, with one hash per (round, half value).

        A round function takes a half of ``half`` bits, so its ``2**half``
        values (``O(sqrt(n))``) are hashed once each into a table, and the
        network runs on every ``x`` at once as array lookups -- the same
        values as :meth:`forward`, without ``8 n`` hashes.
        """
        half, mask, n = self._half, self._mask, self._n
        table = np.array(
            [[self._round(r, v) for v in range(mask + 1)] for r in range(self._ROUNDS)],
            dtype=np.int64,
        )
        out = np.empty(n, dtype=np.int64)
        pending = np.arange(n, dtype=np.int64)  # the x still walking
        values = pending  # their current values (x itself, then each walk step)
        while pending.size:
            left, right = values >> half, values & mask
            for r in range(self._ROUNDS):
                left, right = right, left ^ table[r][right]
            values = (left << half) | right
            done = values < n
            out[pending[done]] = values[done]
            pending, values = pending[~done], values[~done]
        result: list[int] = out.tolist()
        return result


def _ring(n: int, *, session_id: bytes, round_index: int) -> _Permutation:
    """The permutation placing the ``i``-th smallest id at ring position ``forward(i)``."""
    key = hashlib.sha256(
        _PERMUTATION_DOMAIN
        + len(session_id).to_bytes(2, "big")
        + session_id
        + round_index.to_bytes(8, "big")
        + n.to_bytes(8, "big")
    ).digest()
    return _Permutation(key, n)


def _offsets(n: int, degree: int) -> list[int]:
    half = degree // 2
    offsets = [o for d in range(1, half + 1) for o in (d, -d)]
    if degree % 2 == 1:
        offsets.append(n // 2)
    return offsets


def harary_neighbourhoods(
    client_ids: Sequence[int], *, degree: int, session_id: bytes, round_index: int
) -> dict[int, frozenset[int]]:
    """Neighbours of every client in a random Harary graph ``H(degree, n)``.

    The clients are placed on a ring by a keyed pseudo-random permutation
    derived from the public ``session_id`` and ``round_index`` (the ``i``-th
    smallest id goes to position ``pi(i)``); each is connected to its
    ``degree // 2`` nearest positions on either side and, when ``degree`` is
    odd, to the diametrically opposite position (``n`` must then be even).  The
    graph is ``degree``-regular and ``degree``-connected.
    :func:`harary_neighbours` gives one client's neighbours in ``O(degree)``.

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
    ids = sorted(client_ids)
    n = len(ids)
    ring = _ring(n, session_id=session_id, round_index=round_index)
    order = [0] * n
    for index, position in enumerate(ring.forward_all()):
        order[position] = ids[index]
    offsets = _offsets(n, degree)
    return {
        client: frozenset(order[(position + o) % n] for o in offsets)
        for position, client in enumerate(order)
    }


def harary_neighbours(
    sorted_ids: Sequence[int], client: int, *, degree: int, session_id: bytes, round_index: int
) -> frozenset[int]:
    """One client's neighbours in :func:`harary_neighbourhoods`'s graph, in ``O(degree)`` hashes.

    Args:
        sorted_ids: The client ids, strictly increasing.
        client: One of them.
        degree: As for :func:`harary_neighbourhoods`.
        session_id: As for :func:`harary_neighbourhoods`.
        round_index: As for :func:`harary_neighbourhoods`.

    Raises:
        KeyError: ``client`` is not in ``sorted_ids``.
    """
    n = len(sorted_ids)
    index = bisect.bisect_left(sorted_ids, client)
    if index == n or sorted_ids[index] != client:
        raise KeyError(client)
    ring = _ring(n, session_id=session_id, round_index=round_index)
    position = ring.forward(index)
    at = ring.inverse_many([(position + o) % n for o in _offsets(n, degree)])
    return frozenset(sorted_ids[i] for i in at)


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
