"""Communication graphs: who masks with, and shares secrets with, whom.

Two modes:

* :attr:`GraphMode.COMPLETE` -- every client is a neighbour of every other
  client, as in Bonawitz et al. (arXiv:1611.04482).  Client cost grows linearly
  and server cost quadratically in the number of clients.
* :attr:`GraphMode.HARARY` -- SecAgg+ (Bell et al., arXiv:2009.01867, §3): a
  Harary graph ``H(k, n)`` over a random permutation of the clients.  Each
  client masks with, and shares with, only its ``k`` neighbours, so costs grow
  with ``k = O(log n)`` instead of ``n``.

The permutation is derived deterministically from public session values (the
session id and round index) with SHAKE-256, so every party computes the same
graph without another message.  Its security rests on the permutation being
unpredictable to the parties that chose the session id; see SECURITY.md.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence

__all__ = ["GraphMode", "build_neighbourhoods", "harary_neighbourhoods"]

_PERMUTATION_DOMAIN = b"privfed/secagg/harary-permutation/v1"


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
