"""Shared helpers of the secure-aggregation protocol tests."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privfed.secagg import (
    EncryptedSharesBundle,
    IdentityKey,
    IdentityRegistry,
    Message,
    RosterEntry,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
)


def deliver(server: SecAggServer, message: Message) -> None:
    """Hand ``message`` to ``server`` from the client it names, as an honest transport would.

    The transport authenticates who delivered the bytes; in these tests the
    client that made a message delivers it, so its ``sender`` field is the
    authenticated sender.  (Tests of a lying sender call ``receive`` directly.)
    """
    server.receive(message, sender=getattr(message, "sender", 1))


def reveal_committee(server: SecAggServer, clients: Mapping[int, SecAggClient]) -> None:
    """Active SecAgg+: fix the roster root and let its committee reveal (no-op otherwise).

    Members missing from ``clients`` (dropped) do not answer.
    """
    for cid, request in server.committee_requests().items():
        if cid in clients:
            deliver(server, clients[cid].reveal(request))


def share_keys_round(server: SecAggServer, clients: Mapping[int, SecAggClient]) -> None:
    """Every client advertises, the committee reveals, and every client shares its keys
    (one bundle each) on its roster part: the server is left at the close of SHARE_KEYS."""
    for c in clients.values():
        deliver(server, c.advertise_keys())
    reveal_committee(server, clients)
    server.roster()
    for cid, c in clients.items():
        deliver(server, EncryptedSharesBundle.from_shares(c.share_keys(server.roster(cid))))


def random_entries(
    ids: Sequence[int], rng: random.Random, *, signed: bool
) -> tuple[RosterEntry, ...]:
    """Roster entries of ``ids`` with random keys (and, ``signed``, random signatures and
    graph commitments): well-formed bytes for wire and tree tests, no real keys."""
    return tuple(
        RosterEntry(
            client_id=cid,
            encryption_public_key=rng.randbytes(32),
            mask_public_key=rng.randbytes(32),
            signature=rng.randbytes(64) if signed else None,
            graph_commitment=rng.randbytes(32) if signed else None,
        )
        for cid in ids
    )


def active_harary_parties(
    n: int, degree: int, t: int, corrupted: int, length: int, *, seed: int, **extra: object
) -> tuple[SecAggConfig, dict[int, IdentityKey], dict[int, SecAggClient], dict[int, Any]]:
    """An active SecAgg+ config over ids 1..n, fresh identity keys and one client per id.

    Returns ``(config, identity keys, clients, inputs)``; the inputs are uniform
    32-bit vectors of ``length`` from ``numpy.random.default_rng(seed)``.
    """
    ids = tuple(range(1, n + 1))
    keys = {c: IdentityKey.generate() for c in ids}
    cfg = SecAggConfig(
        client_ids=ids,
        threshold=t,
        vector_length=length,
        graph="harary",
        degree=degree,
        mode="active",
        corrupted=corrupted,
        identities=IdentityRegistry.of(keys, assumed_corrupted=corrupted),
        **extra,  # type: ignore[arg-type]
    )
    rng = np.random.default_rng(seed)
    inputs = {c: rng.integers(0, 2**32, length, dtype=np.uint64) for c in ids}
    clients = {c: SecAggClient(cfg, c, inputs[c], identity=keys[c]) for c in ids}
    return cfg, keys, clients, inputs
