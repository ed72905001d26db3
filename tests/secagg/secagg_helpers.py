"""Shared helpers of the secure-aggregation protocol tests."""

from __future__ import annotations

from collections.abc import Mapping

from privfed.secagg import Message, SecAggClient, SecAggServer


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
