"""The secure-aggregation client's fast paths at their edges (GCM counter, buffers, holders).

* The GCM keystream engine ends where GCM's 32-bit counter would wrap (stream
  byte ``2**36``; cryptography refuses to encrypt further).  ``expand_mod`` may
  read up to about twice ``8 * length`` bytes, so for lengths near
  ``MAX_LENGTH`` and a modulus just above ``2**63`` it used to raise a bare
  ``ValueError`` there; the stream now continues on a CTR context.
* ``_zero_plaintext`` read its global twice, so a thread replacing the buffer
  in between could hand back fewer zero bytes than asked for.
* The client's packed Shamir sharing (now ``shamir.split_many``) accepted
  holders that ``shamir.split`` refuses (``bool``, x-coordinates ``>= PRIME``).
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.primitives import prg, shamir

_SEED = bytes(range(32))


def _ctr(seed: bytes, nbytes: int, *, block: int = 0) -> bytes:
    iv = block.to_bytes(16, "big")
    return Cipher(algorithms.AES(seed), modes.CTR(iv)).encryptor().update(bytes(nbytes))


def _read(stream: prg._Keystream, sizes: list[int]) -> bytes:
    out = bytearray()
    for size in sizes:
        buf = bytearray(size + 16)
        stream.into(buf, size)
        out += buf[:size]
    return bytes(out)


def test_gcm_stream_bytes_is_gcm_counter_range() -> None:
    # Blocks 2 .. 2**32 - 1; cryptography's own GCM limit must not be lower.
    assert prg._GCM_STREAM_BYTES == 16 * (2**32 - 2)
    assert modes.GCM._MAX_ENCRYPTED_BYTES >= prg._GCM_STREAM_BYTES


def test_gcm_engine_continues_at_ctr_block_2_pow_32() -> None:
    # The real constants, without streaming 64 GiB: a GCM engine whose counter
    # range is used up (as after 2**36 - 32 bytes) must go on with CTR blocks
    # 2**32, 2**32 + 1, ... -- what the plain CTR mode yields there.
    stream = prg._Keystream(_SEED, 0, gcm=True)
    stream._position = 32
    stream._left = 0
    got = _read(stream, [8, 24, 40])
    assert got == _ctr(_SEED, 72, block=2**32)


@pytest.mark.parametrize("trial", range(8))
def test_gcm_engine_switch_matches_ctr_for_any_chunking(
    monkeypatch: pytest.MonkeyPatch, trial: int
) -> None:
    # A small counter range puts the switch inside reads of every alignment.
    monkeypatch.setattr(prg, "_GCM_STREAM_BYTES", 16 * (3 + trial))
    rng = random.Random(trial)
    seed = os.urandom(32)
    sizes = [rng.choice([1, 7, 8, 15, 16, 17, 33, 64, 200]) for _ in range(30)]
    got = _read(prg._Keystream(seed, 0, gcm=True), sizes)
    assert got == _ctr(seed, sum(sizes))


def test_gcm_engine_switch_at_a_read_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prg, "_GCM_STREAM_BYTES", 64)
    # 32 head bytes + 64 GCM bytes end exactly at the first read; then CTR.
    got = _read(prg._Keystream(_SEED, 0, gcm=True), [96, 8, 100])
    assert got == _ctr(_SEED, 204)


def test_expand_mod_reads_past_gcm_counter_range(monkeypatch: pytest.MonkeyPatch) -> None:
    # A modulus just above 2**63 rejects about half of the words, so the
    # sampler reads about 2 * 8 * length bytes: past a small counter range here,
    # as it does past the real one for lengths near MAX_LENGTH.
    monkeypatch.setattr(prg, "_GCM_STREAM_BYTES", 16 * 700)
    modulus, length = 2**63 + 1, 1000
    got = prg.expand_mod(_SEED, length, modulus=modulus)
    words = np.frombuffer(_ctr(_SEED, 8 * 4 * length), dtype="<u8").tolist()
    expected = [w % modulus for w in words if w < modulus][:length]
    assert len(expected) == length
    assert got.tolist() == expected


def test_zero_plaintext_reads_its_buffer_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulates another thread storing a shorter buffer (it had read the old
    # length) right after this call's length check.
    class Racing(bytes):
        def __len__(self) -> int:
            prg._zeros = bytes(16)
            return super().__len__()

    monkeypatch.setattr(prg, "_zeros", Racing(1 << 12))
    view = prg._zero_plaintext(1000)
    assert len(view) == 1000
    assert not any(view)


@pytest.mark.parametrize(
    ("holders", "error"),
    [
        ([True, 2, 3], ParameterTypeError),
        ([1, 2, np.int64(3)], ParameterTypeError),
        ([1, 2, shamir.PRIME], ParameterError),
        ([1, 2, 2**527], ParameterError),
    ],
    ids=["bool", "numpy", "prime", "above-prime"],
)
def test_share_secrets_refuses_what_split_refuses(holders: list[int], error: type) -> None:
    with pytest.raises(error):
        shamir.split(bytes(32), threshold=2, num_shares=len(holders), indices=holders)
    with pytest.raises(error):
        shamir.split_many([bytes(32), bytes(range(32))], threshold=2, holders=holders)


def test_share_secrets_refuses_a_numpy_threshold() -> None:
    with pytest.raises(ParameterTypeError):
        shamir.split_many([bytes(32)], threshold=np.int64(2), holders=[1, 2])  # type: ignore[arg-type]
