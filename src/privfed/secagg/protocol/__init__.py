"""Secure-aggregation protocol layer: config, stages, messages, graphs, state machines.

See :mod:`privfed.secagg` for the overview; everything public here is
re-exported there.
"""

from __future__ import annotations

from privfed.secagg.protocol.client import SecAggClient
from privfed.secagg.protocol.commitment import self_mask_commitment
from privfed.secagg.protocol.config import SecAggConfig, new_session_id
from privfed.secagg.protocol.graph import GraphMode, harary_neighbourhoods
from privfed.secagg.protocol.messages import (
    AdvertiseKeys,
    EncryptedShares,
    EncryptedSharesBundle,
    MaskedInput,
    Message,
    MessageType,
    RevealedShare,
    Roster,
    RosterEntry,
    RoutedShares,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
)
from privfed.secagg.protocol.server import SecAggServer
from privfed.secagg.protocol.stages import Stage

__all__ = [
    "AdvertiseKeys",
    "EncryptedShares",
    "EncryptedSharesBundle",
    "GraphMode",
    "MaskedInput",
    "Message",
    "MessageType",
    "RevealedShare",
    "Roster",
    "RosterEntry",
    "RoutedShares",
    "SecAggClient",
    "SecAggConfig",
    "SecAggServer",
    "Stage",
    "UnmaskRequest",
    "UnmaskResponse",
    "decode_message",
    "harary_neighbourhoods",
    "new_session_id",
    "self_mask_commitment",
]
