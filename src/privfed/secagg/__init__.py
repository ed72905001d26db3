"""Secure aggregation: the server learns the sum of the clients' vectors, nothing else.

Double masking after Bonawitz et al., "Practical Secure Aggregation for
Privacy-Preserving Machine Learning" (CCS'17, arXiv:1611.04482), with the
sparse-graph variant SecAgg+ of Bell et al. (CCS'20, arXiv:2009.01867).

Layers:

* :mod:`privfed.secagg.primitives` -- hazardous materials: X25519/HKDF, AEAD,
  the mask PRG, prime-field Shamir sharing, fixed-point ring encoding.
* :mod:`privfed.secagg.protocol` -- config, stages, wire messages, graphs and
  the client and server state machines (re-exported here).
* :mod:`privfed.secagg.parameters` -- choosing SecAgg+ degree and threshold.
* :func:`run_in_memory` / :func:`run_protocol` -- a whole round in one process,
  through serialized messages, with scripted dropouts.

Quick start::

    import numpy as np
    from privfed.secagg import run_in_memory

    inputs = [np.arange(5, dtype=np.uint64) * (i + 1) for i in range(4)]
    total = run_in_memory(inputs, threshold=3)   # == sum(inputs) mod 2**64

Two security modes: semi-honest (the default; a server that follows the
protocol) and active (``mode="active"``: a malicious server colluding with up
to ``corrupted`` clients -- Ed25519-signed round keys against an
:class:`IdentityRegistry` the integrator supplies, the ConsistencyCheck round,
and ``2t > s + n_C`` enforced by every client)::

    total = run_in_memory(inputs, threshold=3, mode="active", corrupted=1)

In both, a canonical digest of the configuration is bound into every message,
key derivation, ciphertext and signature, and the SecAgg+ graph is seeded by
the roster's advertisements rather than a server-chosen value.  The threat
model of each mode is in SECURITY.md.  This package is pure: it
imports numpy and cryptography, never torch.
"""

from __future__ import annotations

from privfed.secagg.parameters import (
    SecAggPlusBounds,
    SecAggPlusParameters,
    find_secagg_plus_parameters,
    secagg_plus_bounds,
)
from privfed.secagg.protocol import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    EncryptedSharesBundle,
    FileRevealJournal,
    GraphMode,
    IdentityKey,
    IdentityRegistry,
    MaskedInput,
    MemoryRevealJournal,
    Message,
    MessageType,
    RevealedNoiseShare,
    RevealedShare,
    RevealJournal,
    Roster,
    RosterEntry,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    SecurityMode,
    Stage,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    export_client_state,
    harary_neighbourhoods,
    new_session_id,
    noise_layers_to_reveal,
    restore_client_state,
    self_mask_commitment,
)
from privfed.secagg.runner import ClientRecord, RunReport, run_in_memory, run_protocol

__all__ = [
    "AdvertiseKeys",
    "ClientRecord",
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
    "RunReport",
    "SecAggClient",
    "SecAggConfig",
    "SecAggPlusBounds",
    "SecAggPlusParameters",
    "SecAggServer",
    "SecurityMode",
    "Stage",
    "SurvivorSignature",
    "UnmaskRequest",
    "UnmaskResponse",
    "decode_message",
    "export_client_state",
    "find_secagg_plus_parameters",
    "harary_neighbourhoods",
    "new_session_id",
    "noise_layers_to_reveal",
    "restore_client_state",
    "run_in_memory",
    "run_protocol",
    "secagg_plus_bounds",
    "self_mask_commitment",
]
