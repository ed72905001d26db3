"""Wire messages of the secure-aggregation protocol.

Every message is a frozen, validated value with :meth:`Message.to_bytes` and
``from_bytes``, so any transport (Flower messages, gRPC, files) can carry it.

Wire format (all integers big-endian unless stated otherwise)::

    magic     4 bytes   b"PFSA"
    version   1 byte    WIRE_VERSION (4; version 2 added the optional sections
                        of the active mode and the noise layers, version 3
                        the SecAgg+ Merkle proofs of the roster and of the
                        survivor set, version 4 the masked values on an
                        8-byte boundary and the roster's identity proof)
    type      1 byte    MessageType
    sid_len   1 byte    16..64
    session   sid_len bytes
    round     4 bytes   unsigned
    body      type-specific, see each class

Parsing is strict: an unknown magic, version or type, any length that does not
match, a count that would read past the end, a non-canonical ordering (id lists
must be strictly increasing) and trailing bytes all raise
:class:`~privfed.errors.MessageFormatError`.  Parsing checks structure only; the
session, round, sender and content are checked by the party that consumes the
message.

Parsing keeps the thousands of equal-sized items of a round (ciphertexts in
bundles and routed shares, revealed shares) packed in the message bytes, after
checking them exactly as the item-by-item parse would; the fields holding them
are built on first access and read the same as those of a message built by
hand.  The server checks and routes the packed form with array operations.

Nothing secret appears in a message's ``repr``: ciphertexts, shares and
masked values are left out of it.  Note that shares *are* carried in
:class:`UnmaskResponse` -- that is the point of the unmasking stage -- so the
transport from client to server must be authenticated and confidential (see
SECURITY.md).

Modules, by stage: :mod:`~.base` (the header, :class:`MessageType`,
:func:`decode_message`), :mod:`~.roster` (ADVERTISE_KEYS), :mod:`~.shares`
(SHARE_KEYS), :mod:`~.masked` (MASKED_INPUT), :mod:`~.unmasking`
(CONSISTENCY_CHECK and UNMASKING); ``_codec`` holds the field checks, the
reader and the packed item lists beneath them.  Every public name is this
package's (its ``__module__`` says so: the home ``privfed.secagg.protocol``'s
lazy table and the state codec's enum names refer to).
"""

from __future__ import annotations

from privfed.secagg.protocol.messages._codec import (
    COMMITMENT_SIZE,
    MAX_CIPHERTEXT_SIZE,
    MAX_SHARE_SIZE,
    PUBLIC_KEY_SIZE,
    SIGNATURE_SIZE,
    WIRE_MAGIC,
    WIRE_VERSION,
)
from privfed.secagg.protocol.messages.base import Message, MessageType, decode_message
from privfed.secagg.protocol.messages.masked import MaskedInput
from privfed.secagg.protocol.messages.roster import (
    AdvertiseKeys,
    CommitteeRequest,
    CommitteeReveal,
    Roster,
    RosterEntry,
)
from privfed.secagg.protocol.messages.shares import (
    EncryptedShares,
    EncryptedSharesBundle,
    RoutedShares,
)
from privfed.secagg.protocol.messages.unmasking import (
    ConsistencyRequest,
    ConsistencySignature,
    RevealedNoiseShare,
    RevealedShare,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskResponse,
)

__all__ = [
    "COMMITMENT_SIZE",
    "MAX_CIPHERTEXT_SIZE",
    "MAX_SHARE_SIZE",
    "PUBLIC_KEY_SIZE",
    "SIGNATURE_SIZE",
    "WIRE_MAGIC",
    "WIRE_VERSION",
    "AdvertiseKeys",
    "CommitteeRequest",
    "CommitteeReveal",
    "ConsistencyRequest",
    "ConsistencySignature",
    "EncryptedShares",
    "EncryptedSharesBundle",
    "MaskedInput",
    "Message",
    "MessageType",
    "RevealedNoiseShare",
    "RevealedShare",
    "Roster",
    "RosterEntry",
    "RoutedShares",
    "SurvivorSignature",
    "UnmaskRequest",
    "UnmaskResponse",
    "decode_message",
]

# Public names live here, whichever submodule holds their code.
for _name in __all__:
    _value = globals()[_name]
    if hasattr(_value, "__module__") and callable(_value):
        _value.__module__ = __name__
del _name, _value
