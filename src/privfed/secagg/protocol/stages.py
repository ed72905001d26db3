"""The stages of a secure-aggregation round.

The numbering leaves room for an active-security stage: Bonawitz et al.
(arXiv:1611.04482, §4, "ConsistencyCheck") insert a signature round between
masked-input collection and unmasking.  Its value (3) is reserved, so stages keep
their order when it is added.
"""

from __future__ import annotations

import enum

__all__ = ["Stage"]


class Stage(enum.IntEnum):
    """A stage of one secure-aggregation round, in protocol order.

    Members compare by protocol order (``Stage.SHARE_KEYS < Stage.UNMASKING``).

    Attributes:
        ADVERTISE_KEYS: Each client publishes two X25519 public keys (share
            encryption and masking) and a commitment to its self-mask seed.
        SHARE_KEYS: Each client Shamir-shares its mask private key and its
            self-mask seed among its neighbours, encrypted to each of them.
        MASKED_INPUT: Each client sends its input plus a self mask plus pairwise
            masks with every neighbour that shared keys.
        UNMASKING: Each surviving client reveals, per neighbour, either a
            self-mask share (neighbour survived) or a key share (neighbour
            dropped) -- never both.
    """

    ADVERTISE_KEYS = 0
    SHARE_KEYS = 1
    MASKED_INPUT = 2
    # 3 is reserved for CONSISTENCY_CHECK (active security).
    UNMASKING = 4
