"""Plaintext layout of the encrypted shares one client sends another (private).

``b"PFSS" | version u8 | sender u32 | recipient u32 | key share | seed share |
L x noise-layer seed share`` where each share is a serialized
:class:`~privfed.secagg.primitives.shamir.Share` of
:data:`~privfed.secagg.primitives.shamir.SHARE_SIZE` bytes and ``L`` is the
config's ``noise_layers`` (0 by default).  The sender and
recipient are repeated inside the ciphertext (they are also in the AEAD
associated data) so a decrypted plaintext is self-describing.
"""

from __future__ import annotations

import struct
from typing import Final

from privfed.errors import ParameterError
from privfed.secagg.primitives import shamir

__all__ = ["pack_shares", "unpack_shares"]

_MAGIC: Final = b"PFSS"
_VERSION: Final = 1
_SIZE: Final = 4 + 1 + 4 + 4 + 2 * shamir.SHARE_SIZE
_HEADER: Final = struct.Struct(">4sBII")


def pack_shares(
    *,
    sender: int,
    recipient: int,
    key_share: bytes,
    seed_share: bytes,
    noise_shares: tuple[bytes, ...] = (),
) -> bytes:
    """Lay out the recipient's serialized shares of the sender's secrets."""
    header = _HEADER.pack(_MAGIC, _VERSION, sender, recipient)
    return b"".join([header, key_share, seed_share, *noise_shares])


def unpack_shares(
    data: bytes, *, sender: int, recipient: int, noise_layers: int = 0
) -> tuple[bytes, bytes, tuple[bytes, ...]]:
    """Parse and check a decrypted plaintext.

    Returns the serialized ``(key_share, seed_share, noise_shares)`` (the
    last with ``noise_layers`` items).

    Each share is checked to be a canonical serialized
    :class:`~privfed.secagg.primitives.shamir.Share` evaluated at the recipient's
    id (so :meth:`Share.from_bytes <privfed.secagg.primitives.shamir.Share.from_bytes>`
    accepts it), and is returned as those bytes: the holder only ever reveals
    it again, so it is not parsed further.

    Raises:
        ParameterError: Wrong layout, wrong sender/recipient, or a share whose
            index is not the recipient's id or whose value is not below the
            field prime (no secret appears in the message).
    """
    if (
        len(data) != _SIZE + noise_layers * shamir.SHARE_SIZE
        or data[:4] != _MAGIC
        or data[4] != _VERSION
    ):
        raise ParameterError("plaintext", "a version-1 share plaintext", None, secret=True)
    if int.from_bytes(data[5:9], "big") != sender or int.from_bytes(data[9:13], "big") != recipient:
        raise ParameterError("plaintext", "shares addressed from sender to recipient", None)
    index = recipient.to_bytes(shamir.FIELD_BYTES, "big")
    size = shamir.SHARE_SIZE
    shares = tuple(data[13 + i * size : 13 + (i + 1) * size] for i in range(2 + noise_layers))
    for share in shares:
        if share[: shamir.FIELD_BYTES] != index:
            raise ParameterError("plaintext", "shares evaluated at the recipient's id", None)
        if int.from_bytes(share[shamir.FIELD_BYTES :], "big") >= shamir.PRIME:
            raise ParameterError("plaintext", "share values below the field prime", None)
    return shares[0], shares[1], shares[2:]
