"""The graph seed nobody controls: commit, fix the roster root, a committee reveals.

Active SecAgg+ only (:attr:`~privfed.secagg.SecAggConfig.committee`).  Without
this stage the Harary graph's seed is a hash of the roster's Merkle root, and
the server chooses the root: every choice of which advertisers to leave out
(they look like early dropouts) is another graph, which it can evaluate
offline until some honest client is surrounded by colluders.

With it:

1. *Commit.*  Each client draws a fresh 32-byte value ``r`` and puts
   ``graph_commitment(r)`` in its advertisement, so in its leaf of the roster
   tree.  The root therefore commits to every member's value before anybody
   has revealed one.
2. *Draw.*  Once the server has fixed the root, a committee of ``kappa``
   leaves is drawn from it (:func:`committee_positions`: a uniform subset of
   the leaf positions, drawn by a stream keyed by the root).
3. *Reveal.*  Each committee member checks its own leaf against the root (one
   inclusion proof), checks that the root draws it, and returns ``r`` signed
   with its identity key over the root (:func:`reveal_payload`).  It reveals
   for one root per session only (the state codec keeps the root it revealed
   for), so an honest member's value cannot be reused under another root.
4. *Seed.*  ``seed = H(root || (position, r) of each revealer)``
   (:func:`committee_seed`).  Every client receives the reveals with its
   roster part, checks each value against the commitment in its leaf, each
   signature against the registry, and that the revealers are the root's
   committee (all of them, or all but ``committee_dropouts``).

What a malicious server can still do (SECURITY.md states the figures): retry
with another root, which costs it the honest members of every committee it
asked (they refuse any other root and become dropouts); grind roots offline
until every committee seat is a colluder, which succeeds with probability at
most ``gamma ** kappa`` per root for a colluding fraction ``gamma`` of the
leaves, so ``kappa`` is sized for :data:`GRINDING_BITS` of offline work
(:func:`default_committee_size`); and, with ``committee_dropouts = D > 0``,
choose which of up to ``D`` reveals to leave out: at most
``sum_{j <= D} C(kappa, j)`` seeds per root.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import secrets
from collections.abc import Iterator, Sequence
from typing import Final

__all__ = [
    "GRAPH_VALUE_SIZE",
    "GRINDING_BITS",
    "SECURITY_BITS",
    "committed_digest",
    "committee_positions",
    "committee_seats",
    "committee_seed",
    "default_committee_size",
    "graph_commitment",
    "new_graph_value",
    "reveal_payload",
    "seeds_per_root",
]

#: Bytes of each client's committed graph value.
GRAPH_VALUE_SIZE: Final = 32
#: Offline work (``log2`` of the roots a server can evaluate) the default
#: committee size is chosen to withstand.
GRINDING_BITS: Final = 64
#: The failure probability ``2**-SECURITY_BITS`` aimed for on top of it.
SECURITY_BITS: Final = 40

_COMMIT_DOMAIN: Final = b"privfed/secagg/graph-commitment/v1"
_MEMBER_DOMAIN: Final = b"privfed/secagg/committed-advertisement/v1"
_DRAW_DOMAIN: Final = b"privfed/secagg/committee-draw/v1"
_REVEAL_DOMAIN: Final = b"privfed/secagg/committee-reveal/v1"
_SEED_DOMAIN: Final = b"privfed/secagg/committee-seed/v1"


def _framed(session: bytes) -> bytes:
    return bytes((len(session),)) + session


def graph_commitment(session: bytes, client_id: int, value: bytes) -> bytes:
    """``SHA-256(domain || session || id || r)``: what a leaf carries of a member's value."""
    return hashlib.sha256(
        _COMMIT_DOMAIN + _framed(session) + client_id.to_bytes(4, "big") + value
    ).digest()


def new_graph_value(
    session: bytes, client_id: int, *, committee: bool
) -> tuple[bytes | None, bytes | None]:
    """A client's fresh ``(graph value, commitment)``; ``(None, None)`` without a committee."""
    if not committee:
        return None, None
    value = secrets.token_bytes(GRAPH_VALUE_SIZE)
    return value, graph_commitment(session, client_id, value)


def committed_digest(advertisement: bytes, commitment: bytes) -> bytes:
    """The leaf digest of a member in committee mode: its advertisement hash and commitment."""
    return hashlib.sha256(_MEMBER_DOMAIN + advertisement + commitment).digest()


def committee_positions(session: bytes, root: bytes, count: int, size: int) -> tuple[int, ...]:
    """The leaf positions a root draws for its committee, increasing.

    A uniform ``min(size, count)``-subset of ``[0, count)``, fixed by the root
    alone, so every client computes the same committee: a partial Fisher--Yates
    shuffle whose ``i``-th swap partner is drawn uniformly from ``[i, count)``
    by rejection from a SHA-256 counter stream keyed by the root.  ``O(size)``
    time and memory, whatever ``count`` (a million leaves cost what thirty do).
    """
    seats = min(size, count)
    key = hashlib.sha256(_DRAW_DOMAIN + _framed(session) + root + count.to_bytes(4, "big")).digest()
    words = _words(key)
    moved: dict[int, int] = {}  # the positions the swaps so far put elsewhere
    chosen = []
    for i in range(seats):
        span = count - i
        limit = (1 << 64) - (1 << 64) % span  # below it, x % span is exactly uniform
        x = next(words)
        while x >= limit:
            x = next(words)
        j = i + x % span
        chosen.append(moved.get(j, j))
        moved[j] = moved.get(i, i)
    return tuple(sorted(chosen))


def _words(key: bytes) -> Iterator[int]:
    """64-bit words of ``SHA-256(key || counter)``, counter = 0, 1, 2, ..."""
    for counter in itertools.count():
        block = hashlib.sha256(key + counter.to_bytes(8, "big")).digest()
        for at in range(0, 32, 8):
            yield int.from_bytes(block[at : at + 8], "big")


def reveal_payload(
    *, session: bytes, config_digest: bytes, root: bytes, client_id: int, value: bytes
) -> bytes:
    """What a committee member signs: its value, for this one root of this session."""
    return b"".join(
        [_REVEAL_DOMAIN, _framed(session), config_digest, root, client_id.to_bytes(4, "big"), value]
    )


def committee_seed(session: bytes, root: bytes, reveals: Sequence[tuple[int, bytes]]) -> bytes:
    """The graph seed: ``SHA-256(domain || session || root || (position u32 || r)*)``.

    Args:
        session: The bound session id.
        root: The roster root.
        reveals: ``(leaf position, value)`` of each revealer, positions increasing.
    """
    parts = [_SEED_DOMAIN, _framed(session), root, len(reveals).to_bytes(4, "big")]
    parts += [position.to_bytes(4, "big") + value for position, value in reveals]
    return hashlib.sha256(b"".join(parts)).digest()


def default_committee_size(num_clients: int, neighbourhood_size: int, corrupted: int) -> int:
    """The committee size ``kappa`` a config gets unless it names one.

    ``kappa = ceil((GRINDING_BITS + SECURITY_BITS) / log2(1 / gamma))``, at most
    ``num_clients``, with ``gamma = max(corrupted, 1) / neighbourhood_size``:
    the colluding fraction the threshold already assumes of a neighbourhood
    (a random sample of the roster), so the fraction of colluding leaves a
    committee seat is drawn from.  At most ``gamma ** kappa <= 2**-104`` of
    the roots a server tries give it a committee of colluders only.
    """
    gamma = max(corrupted, 1) / neighbourhood_size
    if gamma >= 1:  # pragma: no cover -- the config keeps corrupted <= s - 2
        return num_clients
    bits = GRINDING_BITS + SECURITY_BITS
    return min(num_clients, math.ceil(bits / -math.log2(gamma)))


def committee_seats(
    size: int, num_clients: int, neighbourhood_size: int, corrupted: int, count: int
) -> int:
    """The seats a root of ``count`` leaves draws, for a config committee of ``size``.

    The server chooses the leaves: leaving honest advertisers out raises the
    colluding fraction among them from ``gamma = max(corrupted, 1) /
    neighbourhood_size`` (of all ``num_clients``) to at most ``gamma_count =
    gamma * num_clients / count``.  So a smaller roster draws more seats: the
    fewest ``m >= size`` with ``gamma_count ** m <= gamma ** size`` (the same
    bound as ``size`` seats of a full roster), or every leaf once
    ``gamma_count >= 1``.  Exact integer arithmetic, so every party draws the
    same number.
    """
    if size <= 0:
        return 0
    colluders = max(corrupted, 1)
    top, bottom = colluders * num_clients, neighbourhood_size * count  # gamma_count = top / bottom
    if top >= bottom:
        return count
    # gamma ** size = colluders ** size / neighbourhood_size ** size.
    bound_top, bound_bottom = colluders**size, neighbourhood_size**size
    seats = size
    power_top, power_bottom = top**size, bottom**size
    while seats < count and power_top * bound_bottom > bound_top * power_bottom:
        seats += 1
        power_top *= top
        power_bottom *= bottom
    return min(seats, count)


def seeds_per_root(size: int, dropouts: int) -> int:
    """Seeds a server may choose between for one root: ``sum_{j <= D} C(kappa, j)``."""
    return sum(math.comb(size, j) for j in range(dropouts + 1))
