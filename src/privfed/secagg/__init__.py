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

The threat model of each mode is in SECURITY.md.  This package is pure: it
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
    EncryptedShares,
    EncryptedSharesBundle,
    GraphMode,
    MaskedInput,
    Message,
    MessageType,
    RevealedShare,
    Roster,
    RosterEntry,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    harary_neighbourhoods,
    new_session_id,
    self_mask_commitment,
)
from privfed.secagg.runner import ClientRecord, RunReport, run_in_memory, run_protocol

__all__ = [
    "AdvertiseKeys",
    "ClientRecord",
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
    "RunReport",
    "SecAggClient",
    "SecAggConfig",
    "SecAggPlusBounds",
    "SecAggPlusParameters",
    "SecAggServer",
    "Stage",
    "UnmaskRequest",
    "UnmaskResponse",
    "decode_message",
    "find_secagg_plus_parameters",
    "harary_neighbourhoods",
    "new_session_id",
    "run_in_memory",
    "run_protocol",
    "secagg_plus_bounds",
    "self_mask_commitment",
]
