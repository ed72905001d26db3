"""Secure-aggregation protocol layer: config, stages, messages, graphs, state machines.

See :mod:`privfed.secagg` for the overview; everything public here is
re-exported there.

Names load on first use (PEP 562): ``import privfed.secagg.protocol`` runs no
submodule, and ``from privfed.secagg.protocol import SecAggConfig`` imports only
the module that defines it (and what that module needs); the three views of the
names are described in :mod:`privfed._lazy`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privfed._lazy import lazy_exports

#: Public name -> the submodule that defines it.
_EXPORTS: dict[str, str] = {
    "SecAggClient": "privfed.secagg.protocol.client",
    "noise_layers_to_reveal": "privfed.secagg.protocol.commitment",
    "self_mask_commitment": "privfed.secagg.protocol.commitment",
    "SecAggConfig": "privfed.secagg.protocol.config",
    "SecurityMode": "privfed.secagg.protocol.config",
    "new_session_id": "privfed.secagg.protocol.config",
    "GraphMode": "privfed.secagg.protocol.graph",
    "harary_neighbourhoods": "privfed.secagg.protocol.graph",
    "IdentityKey": "privfed.secagg.protocol.identity",
    "IdentityRegistry": "privfed.secagg.protocol.identity",
    "AdvertiseKeys": "privfed.secagg.protocol.messages",
    "CommitteeRequest": "privfed.secagg.protocol.messages",
    "CommitteeReveal": "privfed.secagg.protocol.messages",
    "ConsistencyRequest": "privfed.secagg.protocol.messages",
    "ConsistencySignature": "privfed.secagg.protocol.messages",
    "EncryptedShares": "privfed.secagg.protocol.messages",
    "EncryptedSharesBundle": "privfed.secagg.protocol.messages",
    "MaskedInput": "privfed.secagg.protocol.messages",
    "Message": "privfed.secagg.protocol.messages",
    "MessageType": "privfed.secagg.protocol.messages",
    "RevealedNoiseShare": "privfed.secagg.protocol.messages",
    "RevealedShare": "privfed.secagg.protocol.messages",
    "Roster": "privfed.secagg.protocol.messages",
    "RosterEntry": "privfed.secagg.protocol.messages",
    "RoutedShares": "privfed.secagg.protocol.messages",
    "SurvivorSignature": "privfed.secagg.protocol.messages",
    "UnmaskRequest": "privfed.secagg.protocol.messages",
    "UnmaskResponse": "privfed.secagg.protocol.messages",
    "decode_message": "privfed.secagg.protocol.messages",
    "SecAggServer": "privfed.secagg.protocol.server",
    "Stage": "privfed.secagg.protocol.stages",
    "FileRevealJournal": "privfed.secagg.protocol.state",
    "MemoryRevealJournal": "privfed.secagg.protocol.state",
    "RevealJournal": "privfed.secagg.protocol.state",
    "export_client_state": "privfed.secagg.protocol.state",
    "restore_client_state": "privfed.secagg.protocol.state",
}

__all__ = [
    "AdvertiseKeys",
    "CommitteeRequest",
    "CommitteeReveal",
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

if TYPE_CHECKING:  # pragma: no cover - the static view of the lazy names
    from privfed.secagg.protocol.client import SecAggClient
    from privfed.secagg.protocol.commitment import noise_layers_to_reveal, self_mask_commitment
    from privfed.secagg.protocol.config import SecAggConfig, SecurityMode, new_session_id
    from privfed.secagg.protocol.graph import GraphMode, harary_neighbourhoods
    from privfed.secagg.protocol.identity import IdentityKey, IdentityRegistry
    from privfed.secagg.protocol.messages import (
        AdvertiseKeys,
        CommitteeRequest,
        CommitteeReveal,
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
else:
    # Hidden from type checkers, so that a name missing from the imports above is
    # an error for them rather than an ``Any`` from a module ``__getattr__``.
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
