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
* :class:`ThresholdPolicy` -- the threshold every job, app and node picks and
  checks (:mod:`privfed.secagg.threshold`); :class:`ClientIds` -- partition
  ``p`` is protocol client id ``p + 1`` (:mod:`privfed.secagg.client_ids`).
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

Names load on first use (PEP 562): ``import privfed.secagg`` runs none of the
modules above, and ``from privfed.secagg import SecAggConfig`` imports only the
modules that name needs.  The table of lazy names is the protocol layer's
(:data:`privfed.secagg.protocol._EXPORTS`) plus the parameter finder and the
runner; ``tests/test_public_api.py`` checks it against :data:`__all__`, the
``TYPE_CHECKING`` imports below and the submodules' own ``__all__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privfed._lazy import lazy_exports, public_names
from privfed.secagg.protocol import _EXPORTS as _PROTOCOL_EXPORTS

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    **_PROTOCOL_EXPORTS,
    "SecAggPlusBounds": "privfed.secagg.parameters",
    "SecAggPlusParameters": "privfed.secagg.parameters",
    "find_secagg_plus_parameters": "privfed.secagg.parameters",
    "secagg_plus_bounds": "privfed.secagg.parameters",
    "ClientRecord": "privfed.secagg.runner",
    "RunReport": "privfed.secagg.runner",
    "run_in_memory": "privfed.secagg.runner",
    "run_protocol": "privfed.secagg.runner",
    "ClientId": "privfed.secagg.client_ids",
    "ClientIds": "privfed.secagg.client_ids",
    "ThresholdPolicy": "privfed.secagg.threshold",
    "majority_threshold": "privfed.secagg.threshold",
}

if TYPE_CHECKING:  # pragma: no cover - the static view of the lazy names
    from privfed.secagg.client_ids import ClientId as ClientId
    from privfed.secagg.client_ids import ClientIds as ClientIds
    from privfed.secagg.parameters import SecAggPlusBounds as SecAggPlusBounds
    from privfed.secagg.parameters import SecAggPlusParameters as SecAggPlusParameters
    from privfed.secagg.parameters import find_secagg_plus_parameters as find_secagg_plus_parameters
    from privfed.secagg.parameters import secagg_plus_bounds as secagg_plus_bounds

    # The protocol layer's names, as its own TYPE_CHECKING imports export them.
    from privfed.secagg.protocol import *  # noqa: F403
    from privfed.secagg.runner import ClientRecord as ClientRecord
    from privfed.secagg.runner import RunReport as RunReport
    from privfed.secagg.runner import run_in_memory as run_in_memory
    from privfed.secagg.runner import run_protocol as run_protocol
    from privfed.secagg.threshold import ThresholdPolicy as ThresholdPolicy
    from privfed.secagg.threshold import majority_threshold as majority_threshold
else:
    # Hidden from type checkers, so that a name missing from the imports above is
    # an error for them rather than an ``Any`` from a module ``__getattr__``; the
    # imports' ``X as X`` (and the star import of the protocol layer's own
    # ``X as X`` imports) is what exports each name to them.
    __all__ = public_names(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
