"""The two keystream engines of ``prg`` (plain CTR, and CTR head + GCM bulk) agree bit for bit.

Long streams are computed from OpenSSL's GCM encryptor (counter blocks 2, 3,
...) after two blocks of CTR; these tests pin that both engines, read in any
chunking, give exactly the AES-256-CTR keystream: against the independent
pure-Python AES for short streams, and against OpenSSL's plain CTR mode (a
different code path from the GCM one) for long ones.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from prim_reference import aes256_ctr_keystream, word_at

from privfed.secagg.primitives import prg

ENGINES = pytest.mark.parametrize("gcm", [False, True], ids=["ctr", "gcm"])


def _ctr_words(seed: bytes, count: int) -> np.ndarray:
    """The oracle: OpenSSL's plain CTR mode from the all-zero counter block."""
    encryptor = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor()
    return np.frombuffer(encryptor.update(bytes(8 * count)), dtype="<u8").astype(np.uint64)


def _read(stream: prg._Keystream, sizes: list[int]) -> np.ndarray:
    parts = [stream.words(size) for size in sizes]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


@ENGINES
def test_each_engine_matches_the_independent_aes_around_the_head(gcm: bool) -> None:
    # Words 0-3 come from the CTR head in the GCM engine, word 4 on from GCM:
    # every length up to 12 words, read whole and one word at a time.
    seed = random.Random(7).randbytes(32)
    reference = aes256_ctr_keystream(seed, 8 * 12)
    expected = np.frombuffer(reference, dtype="<u8").astype(np.uint64)
    for length in range(13):
        whole = prg._Keystream(seed, 0, gcm=gcm).words(length)
        assert np.array_equal(whole, expected[:length])
        single = _read(prg._Keystream(seed, 0, gcm=gcm), [1] * length)
        assert np.array_equal(single, expected[:length])


@ENGINES
@settings(max_examples=40, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    sizes=st.lists(st.integers(min_value=0, max_value=900), max_size=8),
)
def test_each_engine_in_any_chunking_is_the_ctr_stream(
    gcm: bool, seed: bytes, sizes: list[int]
) -> None:
    got = _read(prg._Keystream(seed, 0, gcm=gcm), sizes)
    assert np.array_equal(got, _ctr_words(seed, sum(sizes)))


@pytest.mark.parametrize(
    "length",
    [
        prg._GCM_MIN_BYTES // 8 - 1,
        prg._GCM_MIN_BYTES // 8,  # the last length on the plain CTR engine
        prg._GCM_MIN_BYTES // 8 + 1,  # the first on the GCM engine
        83_850,
        (1 << 18) + 5,
    ],
)
def test_expand_on_both_sides_of_the_engine_switch_is_the_ctr_stream(length: int) -> None:
    seed = random.Random(length).randbytes(32)
    got = prg.expand(seed, length)
    assert np.array_equal(got, _ctr_words(seed, length))
    # Spot checks against the independent AES, including the last word.
    for index in (0, 3, 4, 5, length // 2, length - 1):
        assert int(got[index]) == word_at(seed, index)
    masked = prg.expand(seed, length, modulus_bits=13)
    assert np.array_equal(masked, got & np.uint64(2**13 - 1))


def test_expand_mod_reads_the_same_stream_on_the_gcm_engine() -> None:
    # A non-power-of-two modulus takes the rejection sampler over _Keystream;
    # with a modulus just above 2**63 about half the words are rejected, so
    # the sampler reads far past the head.
    seed = random.Random(3).randbytes(32)
    modulus = 2**63 + 12_345
    limit = (2**64 // modulus) * modulus
    words = _ctr_words(seed, 20_000)
    accepted = [int(w) % modulus for w in words.tolist() if int(w) < limit]
    got = prg.expand_mod(seed, 6_000, modulus=modulus)
    assert got.tolist() == accepted[:6_000]


@pytest.mark.parametrize("block", [3, 1000, 1 << 15])
def test_fused_accumulation_on_long_vectors_equals_the_ctr_masks(block: int) -> None:
    # Against the plain-CTR oracle (not against expand, which shares the engine):
    # + and - masks, a vector longer than several blocks, small odd blocks too.
    length = 70_001 if block > 3 else 2_000
    rng = np.random.default_rng(block)
    start = rng.integers(0, 2**64, length, dtype=np.uint64)
    seeds = [random.Random(block * 10 + i).randbytes(32) for i in range(5)]
    signs = [False, True, True, False, True]
    out = start.copy()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prg, "_MANY_BLOCK_WORDS", block)
        prg.add_expanded_many(out, list(zip(seeds, signs, strict=True)))
    expected = start.copy()
    for seed, subtract in zip(seeds, signs, strict=True):
        mask = _ctr_words(seed, length)
        expected = expected - mask if subtract else expected + mask
    assert np.array_equal(out, expected)
    single = start.copy()
    prg.add_expanded(single, seeds[0])
    assert np.array_equal(single, start + _ctr_words(seeds[0], length))


def test_engine_choice_does_not_depend_on_the_announced_total() -> None:
    # ``total_bytes`` only picks the engine; the bytes are the same either way.
    seed = bytes(range(32))
    small = prg._Keystream(seed, 8).words(700)
    large = prg._Keystream(seed, 10**9).words(700)
    assert np.array_equal(small, large)


def test_expanded_masks_cannot_be_made_writeable() -> None:
    # The array and its buffer are read-only: no view of a mask can be written.
    for length in (5, 100_000):
        mask = prg.expand(bytes(32), length)
        with pytest.raises(ValueError, match="WRITEABLE"):
            mask.flags.writeable = True
