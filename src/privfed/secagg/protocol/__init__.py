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

from privfed._lazy import lazy_exports, public_names

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
    "IdRuns": "privfed.secagg.protocol.id_runs",
    "IdentityKey": "privfed.secagg.protocol.identity",
    "IdentityRegistry": "privfed.secagg.protocol.identity",
    "IdentityEnrolment": "privfed.secagg.protocol.identity_root",
    "IdentityRoot": "privfed.secagg.protocol.identity_root",
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

if TYPE_CHECKING:  # pragma: no cover - the static view of the lazy names
    from privfed.secagg.protocol.client import SecAggClient as SecAggClient
    from privfed.secagg.protocol.commitment import noise_layers_to_reveal as noise_layers_to_reveal
    from privfed.secagg.protocol.commitment import self_mask_commitment as self_mask_commitment
    from privfed.secagg.protocol.config import SecAggConfig as SecAggConfig
    from privfed.secagg.protocol.config import SecurityMode as SecurityMode
    from privfed.secagg.protocol.config import new_session_id as new_session_id
    from privfed.secagg.protocol.graph import GraphMode as GraphMode
    from privfed.secagg.protocol.graph import harary_neighbourhoods as harary_neighbourhoods
    from privfed.secagg.protocol.id_runs import IdRuns as IdRuns
    from privfed.secagg.protocol.identity import IdentityKey as IdentityKey
    from privfed.secagg.protocol.identity import IdentityRegistry as IdentityRegistry
    from privfed.secagg.protocol.identity_root import IdentityEnrolment as IdentityEnrolment
    from privfed.secagg.protocol.identity_root import IdentityRoot as IdentityRoot
    from privfed.secagg.protocol.messages import AdvertiseKeys as AdvertiseKeys
    from privfed.secagg.protocol.messages import CommitteeRequest as CommitteeRequest
    from privfed.secagg.protocol.messages import CommitteeReveal as CommitteeReveal
    from privfed.secagg.protocol.messages import ConsistencyRequest as ConsistencyRequest
    from privfed.secagg.protocol.messages import ConsistencySignature as ConsistencySignature
    from privfed.secagg.protocol.messages import EncryptedShares as EncryptedShares
    from privfed.secagg.protocol.messages import EncryptedSharesBundle as EncryptedSharesBundle
    from privfed.secagg.protocol.messages import MaskedInput as MaskedInput
    from privfed.secagg.protocol.messages import Message as Message
    from privfed.secagg.protocol.messages import MessageType as MessageType
    from privfed.secagg.protocol.messages import RevealedNoiseShare as RevealedNoiseShare
    from privfed.secagg.protocol.messages import RevealedShare as RevealedShare
    from privfed.secagg.protocol.messages import Roster as Roster
    from privfed.secagg.protocol.messages import RosterEntry as RosterEntry
    from privfed.secagg.protocol.messages import RoutedShares as RoutedShares
    from privfed.secagg.protocol.messages import SurvivorSignature as SurvivorSignature
    from privfed.secagg.protocol.messages import UnmaskRequest as UnmaskRequest
    from privfed.secagg.protocol.messages import UnmaskResponse as UnmaskResponse
    from privfed.secagg.protocol.messages import decode_message as decode_message
    from privfed.secagg.protocol.server import SecAggServer as SecAggServer
    from privfed.secagg.protocol.stages import Stage as Stage
    from privfed.secagg.protocol.state import FileRevealJournal as FileRevealJournal
    from privfed.secagg.protocol.state import MemoryRevealJournal as MemoryRevealJournal
    from privfed.secagg.protocol.state import RevealJournal as RevealJournal
    from privfed.secagg.protocol.state import export_client_state as export_client_state
    from privfed.secagg.protocol.state import restore_client_state as restore_client_state
else:
    # Hidden from type checkers, so that a name missing from the imports above is
    # an error for them rather than an ``Any`` from a module ``__getattr__``; the
    # imports' ``X as X`` is what exports each name to them.
    __all__ = public_names(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
