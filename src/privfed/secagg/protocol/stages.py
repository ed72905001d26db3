"""The stages of a secure-aggregation round.

Bonawitz et al. (arXiv:1611.04482, §4, "ConsistencyCheck") insert a signature
round between masked-input collection and unmasking in their actively secure
protocol; it is :attr:`Stage.CONSISTENCY_CHECK` (value 3), played in the active
security mode only.
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
        CONSISTENCY_CHECK: Active mode only: each survivor signs the survivor
            set; the server forwards at least ``threshold`` signatures on one
            set to every client before it unmasks.
        UNMASKING: Each surviving client reveals, per neighbour, either a
            self-mask share (neighbour survived) or a key share (neighbour
            dropped) -- never both.
    """

    ADVERTISE_KEYS = 0
    SHARE_KEYS = 1
    MASKED_INPUT = 2
    CONSISTENCY_CHECK = 3
    UNMASKING = 4
