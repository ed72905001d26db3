"""Fault injection for privfed's Flower handlers: rehearse dropouts before a deployment.

:func:`fault_mod` is a Flower ``Mod`` that makes chosen nodes misbehave at
chosen stages of chosen rounds, so a consortium can watch the server tolerate
dropouts down to the threshold (and abort below it) in the simulation engine
before any real site goes offline.  Nodes are named by their ``partition-id``
(node config), rounds by the message's group id (the workflow's round index).

Kinds of fault:

* ``"raise"`` -- the node's ClientApp raises: Flower sends an error reply;
* ``"silent"`` -- the node answers only after ``delay`` seconds (longer than
  the workflow's stage timeout), i.e. it stops replying in time;
* ``"forge"`` -- the node's reply claims another client's id as its sender
  (the server must refuse it);
* ``"rollback"`` -- before the step, the node's stored protocol state is
  replaced by the one it held before its previous answer (the journal must
  make the node refuse).  Only a node with a rollback fault in some round
  keeps that earlier state in its ``Context.state``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any, Final

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp.typing import ClientAppCallable, Mod

from privfed.errors import ParameterError
from privfed.flower import _wire
from privfed.flower.client import STATE_KEY
from privfed.secagg import Stage, decode_message

__all__ = ["FAULT_KINDS", "Fault", "fault_mod"]

#: The fault kinds :func:`fault_mod` knows.
FAULT_KINDS: Final = ("raise", "silent", "forge", "rollback")
#: ``(round index, partition id) -> (stage, kind)``.
Fault = tuple[Stage, str]

_PREVIOUS = "privfed_faults_previous"


class InjectedFaultError(RuntimeError):
    """What a node raises for a ``"raise"`` fault."""


def fault_mod(faults: Mapping[tuple[int, int], Fault], *, delay: float = 5.0) -> Mod:
    """A Mod that injects ``faults`` (see the module docstring).

    Args:
        faults: ``{(round_index, partition_id): (stage, kind)}``.
        delay: Seconds a ``"silent"`` node waits before answering.

    Raises:
        ParameterError: An unknown fault kind.
    """
    table = dict(faults)
    for _, kind in table.values():
        if kind not in FAULT_KINDS:
            raise ParameterError("faults", f"kinds among {FAULT_KINDS}", kind)
    # Only these nodes need their previous state; kept by every node, it would double
    # every Context that Flower's engine ships to a ClientApp and back.
    rolling_back = frozenset(p for (_, p), (_, kind) in table.items() if kind == "rollback")

    def mod(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        stage = _wire.STAGE_OF_TYPE.get(message.metadata.message_type)
        if stage is None:
            return call_next(message, context)
        try:
            round_index = int(message.metadata.group_id)
        except ValueError:
            return call_next(message, context)
        partition = int(context.node_config.get("partition-id", -1))
        fault = table.get((round_index, partition))
        kind = fault[1] if fault is not None and fault[0] is stage else None
        if kind == "raise":
            raise InjectedFaultError(f"injected fault at {stage.name}")
        if kind == "rollback" and _PREVIOUS in context.state.config_records:
            context.state[STATE_KEY] = context.state.config_records[_PREVIOUS]
        before = context.state.config_records.get(STATE_KEY) if partition in rolling_back else None
        reply = call_next(message, context)
        if before is not None:
            context.state[_PREVIOUS] = ConfigRecord(dict(before))
        if kind == "silent":
            time.sleep(delay)
        if kind == "forge" and not reply.has_error():
            reply = _forged(reply, message)
        return reply

    return mod


def _forged(reply: Message, request: Message) -> Message:
    """The same reply, re-signed in the name of client ``sender + 1``."""
    content = reply.content
    record = _wire.config_record(content)
    if "sender" in record:  # a masked input: the header names the sender
        fields = dict(record)
        fields["sender"] = _wire.get_int(record, "sender") % 2**31 + 1
        forged = RecordDict({**dict(content), _wire.RECORD: ConfigRecord(fields)})
        return Message(forged, reply_to=request)
    message: Any = decode_message(_wire.get_bytes(record, "message"))
    other = dataclasses.replace(message, sender=message.sender % 2**31 + 1)
    return Message(_wire.bytes_content(other.to_bytes()), reply_to=request)
