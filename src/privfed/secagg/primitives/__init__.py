"""Low-level cryptographic building blocks of secure aggregation ("hazmat").

.. warning::
   This is the hazardous-materials layer.  These primitives are easy to misuse:
   reusing a PRG seed across rounds, skipping the authentication of public keys,
   combining shares without redundancy, or choosing a fixed-point configuration
   by hand can each break secrecy or correctness without any error being
   raised.  Use :mod:`privfed.secagg.protocol`, which puts them together safely,
   unless you are building a protocol yourself and know why you need them.

Contents (one concept per module):

* :mod:`~privfed.secagg.primitives.shamir` -- Shamir secret sharing of 32-byte
  secrets over GF(2**521 - 1), with redundancy checks on reconstruction.
* :mod:`~privfed.secagg.primitives.keys` -- X25519 key agreement and HKDF-SHA256
  derivation bound to (purpose, session, round, client pair).
* :mod:`~privfed.secagg.primitives.aead` -- ChaCha20-Poly1305 encryption of
  shares relayed by the server.
* :mod:`~privfed.secagg.primitives.prg` -- the AES-256-CTR mask PRG.
* :mod:`~privfed.secagg.primitives.fixedpoint` -- fixed-point encoding into
  ``Z_{2**k}`` with a construction-time guarantee against wrap-around.

Every function validates its arguments first and raises the typed errors of
:mod:`privfed.errors`; no message, ``repr`` or log line contains a key, share,
seed or unmasked value.

Names load on first use (PEP 562): importing this package runs none of the
modules above; :data:`_EXPORTS` maps each public name to its defining module
(checked against :data:`__all__` and the ``TYPE_CHECKING`` imports by
``tests/test_public_api.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privfed._lazy import lazy_exports

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "KEY_SIZE": "privfed.secagg.primitives.aead",
    "NONCE_SIZE": "privfed.secagg.primitives.aead",
    "OVERHEAD": "privfed.secagg.primitives.aead",
    "TAG_SIZE": "privfed.secagg.primitives.aead",
    "seal": "privfed.secagg.primitives.aead",
    "share_associated_data": "privfed.secagg.primitives.aead",
    "unseal": "privfed.secagg.primitives.aead",
    "FixedPointConfig": "privfed.secagg.primitives.fixedpoint",
    "check_no_wraparound": "privfed.secagg.primitives.fixedpoint",
    "ring_add": "privfed.secagg.primitives.fixedpoint",
    "ring_sub": "privfed.secagg.primitives.fixedpoint",
    "ring_sum": "privfed.secagg.primitives.fixedpoint",
    "PRIVATE_KEY_SIZE": "privfed.secagg.primitives.keys",
    "PUBLIC_KEY_SIZE": "privfed.secagg.primitives.keys",
    "KeyPair": "privfed.secagg.primitives.keys",
    "Purpose": "privfed.secagg.primitives.keys",
    "agree": "privfed.secagg.primitives.keys",
    "derive_key": "privfed.secagg.primitives.keys",
    "derive_self_mask_seed": "privfed.secagg.primitives.keys",
    "pairwise_key": "privfed.secagg.primitives.keys",
    "SEED_SIZE": "privfed.secagg.primitives.prg",
    "expand": "privfed.secagg.primitives.prg",
    "expand_mod": "privfed.secagg.primitives.prg",
    "PRIME": "privfed.secagg.primitives.shamir",
    "SECRET_SIZE": "privfed.secagg.primitives.shamir",
    "SHARE_SIZE": "privfed.secagg.primitives.shamir",
    "Share": "privfed.secagg.primitives.shamir",
    "combine": "privfed.secagg.primitives.shamir",
    "split": "privfed.secagg.primitives.shamir",
}

__all__ = [
    "KEY_SIZE",
    "NONCE_SIZE",
    "OVERHEAD",
    "PRIME",
    "PRIVATE_KEY_SIZE",
    "PUBLIC_KEY_SIZE",
    "SECRET_SIZE",
    "SEED_SIZE",
    "SHARE_SIZE",
    "TAG_SIZE",
    "FixedPointConfig",
    "KeyPair",
    "Purpose",
    "Share",
    "agree",
    "check_no_wraparound",
    "combine",
    "derive_key",
    "derive_self_mask_seed",
    "expand",
    "expand_mod",
    "pairwise_key",
    "ring_add",
    "ring_sub",
    "ring_sum",
    "seal",
    "share_associated_data",
    "split",
    "unseal",
]

if TYPE_CHECKING:  # pragma: no cover - the static view of the lazy names
    from privfed.secagg.primitives.aead import (
        KEY_SIZE,
        NONCE_SIZE,
        OVERHEAD,
        TAG_SIZE,
        seal,
        share_associated_data,
        unseal,
    )
    from privfed.secagg.primitives.fixedpoint import (
        FixedPointConfig,
        check_no_wraparound,
        ring_add,
        ring_sub,
        ring_sum,
    )
    from privfed.secagg.primitives.keys import (
        PRIVATE_KEY_SIZE,
        PUBLIC_KEY_SIZE,
        KeyPair,
        Purpose,
        agree,
        derive_key,
        derive_self_mask_seed,
        pairwise_key,
    )
    from privfed.secagg.primitives.prg import SEED_SIZE, expand, expand_mod
    from privfed.secagg.primitives.shamir import (
        PRIME,
        SECRET_SIZE,
        SHARE_SIZE,
        Share,
        combine,
        split,
    )
else:
    # Hidden from type checkers, so that a name missing from the imports above is
    # an error for them rather than an ``Any`` from a module ``__getattr__``.
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
