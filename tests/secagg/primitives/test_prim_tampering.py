"""Tampering with the primitives: altered Shamir shares are detected, PRG seed bits all matter."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import ReconstructionError
from privfed.secagg.primitives.prg import expand
from privfed.secagg.primitives.shamir import PRIME, Share, combine, split


@given(
    seed=st.integers(0, 2**32 - 1),
    threshold=st.integers(2, 6),
    extra=st.integers(1, 5),
)
def test_any_set_of_up_to_k_minus_t_altered_shares_is_detected(
    seed: int, threshold: int, extra: int
) -> None:
    rng = random.Random(seed)
    total = threshold + extra
    secret = rng.randbytes(32)
    shares = split(secret, threshold=threshold, num_shares=total)
    rng.shuffle(shares)
    # Alter 1..extra shares at random positions, the interpolation set included.
    altered = rng.sample(range(total), rng.randint(1, extra))
    for position in altered:
        old = shares[position]
        shares[position] = Share(old.index, (old.value + rng.randrange(1, PRIME)) % PRIME)
    with pytest.raises(ReconstructionError):
        combine(shares, threshold=threshold)


def test_prg_output_depends_on_every_seed_bit() -> None:
    seed = bytes(range(32))
    base = expand(seed, 4)
    for bit in range(256):
        flipped = bytearray(seed)
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert not np.array_equal(expand(bytes(flipped), 4), base), bit
