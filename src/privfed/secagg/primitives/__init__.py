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
"""

from __future__ import annotations

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
