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


@given(
    seeds=st.lists(st.binary(min_size=32, max_size=32), max_size=6),
    signs=st.lists(st.booleans(), min_size=6, max_size=6),
    start_seed=st.integers(0, 2**32 - 1),
    length=st.integers(0, 700),
    block=st.sampled_from([1, 2, 7, 64, 1 << 15]),
)
def test_add_expanded_many_equals_one_pass_per_mask(
    seeds: list[bytes],
    signs: list[bool],
    start_seed: int,
    length: int,
    block: int,
) -> None:
    start = np.random.default_rng(start_seed).integers(0, 2**64, length, dtype=np.uint64)
    masks = list(zip(seeds, signs, strict=False))
    out = start.copy()
    # Small blocks exercise keystream continuity across block boundaries
    # (including a last, partial block) without megabyte-sized vectors.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prg, "_MANY_BLOCK_WORDS", block)
        prg.add_expanded_many(out, masks)
    expected = start.copy()
    for seed, subtract in masks:
        mask = prg.expand(seed, length)
        expected = expected - mask if subtract else expected + mask
    assert np.array_equal(out, expected)


def test_add_expanded_many_on_a_long_vector_cancels_exactly() -> None:
    # Longer than three default blocks, not a multiple of the block size.
    start = np.arange(3 * (1 << 15) + 123, dtype=np.uint64)
    out = start.copy()
    seeds = [bytes([i + 1]) * 32 for i in range(5)]
    prg.add_expanded_many(out, [(s, False) for s in seeds])
    single = start.copy()
    for s in seeds:
        prg.add_expanded(single, s)
    assert np.array_equal(out, single)
    prg.add_expanded_many(out, [(s, True) for s in reversed(seeds)])
    assert np.array_equal(out, start)


def test_add_expanded_many_validates_everything_before_touching_out() -> None:
    good = (bytes(32), False)
    out = np.ones(5, dtype=np.uint64)
    with pytest.raises(ParameterError, match="'seed'"):
        prg.add_expanded_many(out, [good, (bytes(31), False)])
    with pytest.raises(ParameterTypeError, match="'seed'"):
        prg.add_expanded_many(out, [good, ("x" * 32, False)])  # type: ignore[list-item]
    with pytest.raises(ParameterTypeError, match="'subtract'"):
        prg.add_expanded_many(out, [good, (bytes(32), 1)])  # type: ignore[list-item]
    with pytest.raises(ParameterTypeError, match="'masks'"):
        prg.add_expanded_many(out, [good, bytes(32)])  # type: ignore[list-item]
    assert np.array_equal(out, np.ones(5, dtype=np.uint64))
    with pytest.raises(ParameterTypeError, match="'out'"):
        prg.add_expanded_many(np.zeros(4, dtype=np.int64), [good])  # type: ignore[arg-type]
    read_only = np.zeros(4, dtype=np.uint64)
    read_only.flags.writeable = False
    with pytest.raises(ParameterError, match="'out'"):
        prg.add_expanded_many(read_only, [good])
    prg.add_expanded_many(out, [])
    assert np.array_equal(out, np.ones(5, dtype=np.uint64))
