"""The fused mask accumulation ``prg.add_expanded`` agrees with ``expand``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.primitives import prg


@given(
    seed=st.binary(min_size=32, max_size=32),
    start_seed=st.integers(0, 2**32 - 1),
    length=st.integers(0, 3000),
    subtract=st.booleans(),
)
def test_add_expanded_equals_expand_then_add(
    seed: bytes, start_seed: int, length: int, subtract: bool
) -> None:
    start = np.random.default_rng(start_seed).integers(0, 2**64, length, dtype=np.uint64)
    out = start.copy()
    prg.add_expanded(out, seed, subtract=subtract)
    mask = prg.expand(seed, length)
    expected = start - mask if subtract else start + mask
    assert np.array_equal(out, expected)


def test_add_then_subtract_is_identity_and_scratch_reuse_is_clean() -> None:
    start = np.arange(100_000, dtype=np.uint64)
    out = start.copy()
    seeds = [bytes([i]) * 32 for i in range(4)]
    for s in seeds:
        prg.add_expanded(out, s)
    assert not np.array_equal(out, start)
    # A shorter call in between must not disturb later longer ones.
    small = np.zeros(7, dtype=np.uint64)
    prg.add_expanded(small, seeds[0])
    assert np.array_equal(small, prg.expand(seeds[0], 7))
    for s in reversed(seeds):
        prg.add_expanded(out, s, subtract=True)
    assert np.array_equal(out, start)


def test_add_expanded_rejects_bad_buffers_without_touching_them() -> None:
    seed = bytes(32)
    with pytest.raises(ParameterTypeError, match="'out'"):
        prg.add_expanded(np.zeros(4, dtype=np.int64), seed)  # type: ignore[arg-type]
    read_only = np.zeros(4, dtype=np.uint64)
    read_only.flags.writeable = False
    with pytest.raises(ParameterError, match="'out'"):
        prg.add_expanded(read_only, seed)
    two_d = np.zeros((2, 2), dtype=np.uint64)
    with pytest.raises(ParameterError, match="'out'"):
        prg.add_expanded(two_d, seed)
    out = np.ones(4, dtype=np.uint64)
    with pytest.raises(ParameterError, match="'seed'"):
        prg.add_expanded(out, bytes(31))
    assert np.array_equal(out, np.ones(4, dtype=np.uint64))
