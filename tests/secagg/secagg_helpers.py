"""Shared helpers of the secure-aggregation protocol tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from privfed.secagg import (
    IdentityKey,
    IdentityRegistry,
    Message,
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
