"""Authenticated encryption of Shamir shares relayed through the server (ChaCha20-Poly1305).

Cipher choice: ChaCha20-Poly1305 (RFC 8439) rather than AES-256-GCM.  The
payloads here are tiny (a few hundred bytes of shares per peer), so throughput
is irrelevant, and ChaCha20-Poly1305 is constant-time in software on every
platform, whereas AES-GCM is only safe from cache-timing leaks where the CPU
has AES and carry-less-multiply instructions.

Nonces: 96 bits from :func:`os.urandom`, prepended to the ciphertext.  Each key
comes from :func:`privfed.secagg.primitives.keys.derive_key` and is bound to one
session, one round and one pair of clients, so it seals only a handful of
messages; the probability that two random nonces collide under one key is about
``m**2 / 2**97`` for ``m`` messages -- negligible.

Associated data binds a ciphertext to its context (session, round, sender,
recipient); use :func:`share_associated_data` to build it, so a server cannot
replay a ciphertext into another round or redirect it to another client.

Wire format of :func:`seal`: ``nonce (12 bytes) || ciphertext || tag (16 bytes)``.

This module is part of the hazardous-materials layer.
"""

from __future__ import annotations

import functools
import os
import struct
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from privfed._checks import check_bytes, check_int
from privfed.errors import AuthenticationError, ParameterTypeError

__all__ = [
    "AD_VERSION",
    "KEY_SIZE",
    "MAX_PLAINTEXT_SIZE",
    "NONCE_SIZE",
    "OVERHEAD",
    "TAG_SIZE",
    "seal",
    "share_associated_data",
    "unseal",
]

#: Size in bytes of an AEAD key.
KEY_SIZE: Final[int] = 32
#: Size in bytes of the random nonce prepended to every ciphertext.
NONCE_SIZE: Final[int] = 12
#: Size in bytes of the Poly1305 authentication tag.
TAG_SIZE: Final[int] = 16
#: Bytes that :func:`seal` adds to a plaintext.
OVERHEAD: Final[int] = NONCE_SIZE + TAG_SIZE
#: Version byte at the start of :func:`share_associated_data`.
AD_VERSION: Final[int] = 1
#: Largest plaintext (and associated data) accepted, in bytes (OpenSSL's limit is 2**31 - 1).
MAX_PLAINTEXT_SIZE: Final[int] = 2**31 - 1 - OVERHEAD

_AD_LABEL: Final[bytes] = b"privfed.secagg.share"


def share_associated_data(
    *, session_id: bytes, round_index: int, sender: int, recipient: int
) -> bytes:
    """Encode the context of an encrypted share as associated data.

    Layout: ``version (1 byte) || u16 len(label) || label || u16 len(session_id)
    || session_id || u64 round_index || u32 sender || u32 recipient`` (big-endian).
    Every field is fixed-width or length-prefixed, so distinct contexts never
    encode to the same bytes.  The encoding is ordered: ``sender`` and
    ``recipient`` are not interchangeable.

    Args:
        session_id: Identifier of the aggregation session, 1 to 64 bytes.
        round_index: Round number, an ``int`` in ``[0, 2**64)``.
        sender: Client id of the sender, an ``int`` in ``[0, 2**32)``.
        recipient: Client id of the recipient, an ``int`` in ``[0, 2**32)``.

    Returns:
        The associated-data bytes.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain.
    """
    # Fast path for the common, valid case (exact ``bytes``/``int`` in range; a
    # client calls this once per peer and stage); anything else takes the full
    # checks, which accept and refuse exactly as before.
    if (
        type(session_id) is bytes
        and 1 <= len(session_id) <= 64
        and type(round_index) is int
        and 0 <= round_index <= _U64
        and type(sender) is int
        and 0 <= sender <= _U32
        and type(recipient) is int
        and 0 <= recipient <= _U32
    ):
        return _ad_prefix(session_id) + _AD_TAIL.pack(round_index, sender, recipient)
    sid = check_bytes("session_id", session_id, min_size=1, max_size=64)
    rnd = check_int("round_index", round_index, minimum=0, maximum=_U64)
    src = check_int("sender", sender, minimum=0, maximum=_U32)
    dst = check_int("recipient", recipient, minimum=0, maximum=_U32)
    return _ad_prefix(sid) + _AD_TAIL.pack(rnd, src, dst)


_AD_TAIL: Final = struct.Struct(">QII")
_U32: Final[int] = 2**32 - 1
_U64: Final[int] = 2**64 - 1


@functools.lru_cache(maxsize=64)
def _ad_prefix(session_id: bytes) -> bytes:
    # Public values only (the session id), so caching them is harmless.
    return b"".join(
        [
            bytes([AD_VERSION]),
            struct.pack(">H", len(_AD_LABEL)),
            _AD_LABEL,
            struct.pack(">H", len(session_id)),
            session_id,
        ]
    )


def seal(key: bytes, plaintext: bytes, *, associated_data: bytes) -> bytes:
    """Encrypt and authenticate ``plaintext`` under ``key`` with a fresh random nonce.

    Args:
        key: :data:`KEY_SIZE` secret bytes (from ``derive_key(...,
            purpose=Purpose.SHARE_ENCRYPTION)``).
        plaintext: The bytes to protect (may be empty).
        associated_data: Context bytes that are authenticated but not encrypted
            (see :func:`share_associated_data`); the same bytes must be passed to
            :func:`unseal`.

    Returns:
        ``nonce || ciphertext || tag``, ``len(plaintext) + OVERHEAD`` bytes.

    Raises:
        ParameterTypeError: An argument is not bytes.
        ParameterError: ``key`` has the wrong length, or an input exceeds
            :data:`MAX_PLAINTEXT_SIZE`.
    """
    if (
        type(key) is bytes
        and len(key) == KEY_SIZE
        and type(plaintext) is bytes
        and len(plaintext) <= MAX_PLAINTEXT_SIZE
        and type(associated_data) is bytes
        and len(associated_data) <= MAX_PLAINTEXT_SIZE
    ):
        k, pt, ad = key, plaintext, associated_data  # already immutable and valid
    else:
        k = check_bytes("key", key, size=KEY_SIZE)
        pt = check_bytes("plaintext", plaintext, max_size=MAX_PLAINTEXT_SIZE)
        ad = check_bytes("associated_data", associated_data, max_size=MAX_PLAINTEXT_SIZE)
    nonce = os.urandom(NONCE_SIZE)
    return nonce + ChaCha20Poly1305(k).encrypt(nonce, pt, ad)


def unseal(key: bytes, ciphertext: bytes, *, associated_data: bytes) -> bytes:
    """Verify and decrypt the output of :func:`seal`.

    Threat model: ``ciphertext`` and ``associated_data`` may come from an
    adversary (e.g. a malicious server).  Any failure -- input too short,
    altered ciphertext, nonce or tag, wrong associated data, wrong key -- raises
    the same detail-free :class:`~privfed.errors.AuthenticationError`, so the
    error reveals nothing beyond "invalid".

    Args:
        key: The :data:`KEY_SIZE`-byte key used by :func:`seal`.
        ciphertext: ``nonce || ciphertext || tag`` as returned by :func:`seal`.
        associated_data: The associated data given to :func:`seal`.

    Returns:
        The plaintext.

    Raises:
        ParameterTypeError: An argument is not bytes (a programming error, not an
            authentication failure).
        ParameterError: ``key`` does not have :data:`KEY_SIZE` bytes.
        AuthenticationError: Verification failed, for whatever reason.
    """
    k = check_bytes("key", key, size=KEY_SIZE)
    if not isinstance(ciphertext, bytes | bytearray | memoryview):
        raise ParameterTypeError("ciphertext", "bytes", ciphertext)
    if not isinstance(associated_data, bytes | bytearray | memoryview):
        raise ParameterTypeError("associated_data", "bytes", associated_data)
    data = bytes(ciphertext)
    if len(data) < OVERHEAD:
        raise AuthenticationError()
    try:
        return ChaCha20Poly1305(k).decrypt(
            data[:NONCE_SIZE], data[NONCE_SIZE:], bytes(associated_data)
        )
    except (InvalidTag, OverflowError, ValueError):
        raise AuthenticationError() from None
