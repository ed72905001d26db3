"""Secure-aggregation protocol layer: config, stages, messages, graphs, state machines.

See :mod:`privfed.secagg` for the overview; everything public here is
re-exported there.
"""

from __future__ import annotations

from privfed.secagg.protocol.client import SecAggClient, noise_layers_to_reveal
from privfed.secagg.protocol.commitment import self_mask_commitment
from privfed.secagg.protocol.config import SecAggConfig, SecurityMode, new_session_id
from privfed.secagg.protocol.graph import GraphMode, harary_neighbourhoods
from privfed.secagg.protocol.identity import IdentityKey, IdentityRegistry
from privfed.secagg.protocol.messages import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    EncryptedSharesBundle,
    MaskedInput,
    Message,
    MessageType,
    RevealedNoiseShare,
    RevealedShare,
    Roster,
    RosterEntry,
    RoutedShares,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
)
from privfed.secagg.protocol.server import SecAggServer
from privfed.secagg.protocol.stages import Stage
from privfed.secagg.protocol.state import (
    FileRevealJournal,
    MemoryRevealJournal,
    RevealJournal,
    export_client_state,
    restore_client_state,
)

__all__ = [
    "AdvertiseKeys",
    "ConsistencyRequest",
    "ConsistencySignature",
    "EncryptedShares",
    "EncryptedSharesBundle",
    "FileRevealJournal",
    "GraphMode",
    "IdentityKey",
    "IdentityRegistry",
    "MaskedInput",
    "MemoryRevealJournal",
    "Message",
    "MessageType",
    "RevealJournal",
    "RevealedNoiseShare",
    "RevealedShare",
    "Roster",
    "RosterEntry",
    "RoutedShares",
    "SecAggClient",
    "SecAggConfig",
    "SecAggServer",
    "SecurityMode",
    "Stage",
    "SurvivorSignature",
    "UnmaskRequest",
    "UnmaskResponse",
    "decode_message",
    "export_client_state",
    "harary_neighbourhoods",
    "new_session_id",
    "noise_layers_to_reveal",
    "restore_client_state",
    "self_mask_commitment",
]
