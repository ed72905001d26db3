"""Shared helpers of the secure-aggregation protocol tests."""

from __future__ import annotations

from privfed.secagg import Message, SecAggServer


def deliver(server: SecAggServer, message: Message) -> None:
    """Hand ``message`` to ``server`` from the client it names, as an honest transport would.

    The transport authenticates who delivered the bytes; in these tests the
    client that made a message delivers it, so its ``sender`` field is the
    authenticated sender.  (Tests of a lying sender call ``receive`` directly.)
    """
    server.receive(message, sender=getattr(message, "sender", 1))
