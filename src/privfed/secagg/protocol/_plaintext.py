"""Plaintext layout of the encrypted shares one client sends another (private).

``b"PFSS" | version u8 | sender u32 | recipient u32 | key share | seed share``
where each share is a serialized :class:`~privfed.secagg.primitives.shamir.Share`
of :data:`~privfed.secagg.primitives.shamir.SHARE_SIZE` bytes.  The sender and
recipient are repeated inside the ciphertext (they are also in the AEAD
associated data) so a decrypted plaintext is self-describing.
"""

from __future__ import annotations

from typing import Final

from privfed.errors import ParameterError
from privfed.secagg.primitives import shamir

__all__ = ["pack_shares", "unpack_shares"]

_MAGIC: Final = b"PFSS"
_VERSION: Final = 1
_SIZE: Final = 4 + 1 + 4 + 4 + 2 * shamir.SHARE_SIZE


def pack_shares(
    *, sender: int, recipient: int, key_share: shamir.Share, seed_share: shamir.Share
) -> bytes:
    """Lay out the recipient's two shares of the sender's secrets."""
    return (
        _MAGIC
        + bytes((_VERSION,))
        + sender.to_bytes(4, "big")
        + recipient.to_bytes(4, "big")
        + key_share.to_bytes()
        + seed_share.to_bytes()
    )


def unpack_shares(data: bytes, *, sender: int, recipient: int) -> tuple[shamir.Share, shamir.Share]:
    """Parse and check a decrypted plaintext; return ``(key_share, seed_share)``.

    Raises:
        ParameterError: Wrong layout, wrong sender/recipient, or a share whose
            index is not the recipient's id (no secret appears in the message).
    """
    if len(data) != _SIZE or data[:4] != _MAGIC or data[4] != _VERSION:
        raise ParameterError("plaintext", "a version-1 share plaintext", None, secret=True)
    if int.from_bytes(data[5:9], "big") != sender or int.from_bytes(data[9:13], "big") != recipient:
        raise ParameterError("plaintext", "shares addressed from sender to recipient", None)
    start = 13
    key_share = shamir.Share.from_bytes(data[start : start + shamir.SHARE_SIZE])
    seed_share = shamir.Share.from_bytes(data[start + shamir.SHARE_SIZE :])
    if key_share.index != recipient or seed_share.index != recipient:
        raise ParameterError("plaintext", "shares evaluated at the recipient's id", None)
    return key_share, seed_share
