"""Tests of privfed.secagg.primitives.aead."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import AuthenticationError, ParameterError, ParameterTypeError
from privfed.secagg.primitives.aead import (
    KEY_SIZE,
    NONCE_SIZE,
    OVERHEAD,
    TAG_SIZE,
    seal,
    share_associated_data,
    unseal,
)

SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


def _flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def test_sizes() -> None:
    assert (KEY_SIZE, NONCE_SIZE, TAG_SIZE, OVERHEAD) == (32, 12, 16, 28)


@given(seed=SEEDS, size=st.integers(min_value=0, max_value=300))
def test_round_trip(seed: int, size: int) -> None:
    rng = random.Random(seed)
    key, msg, ad = rng.randbytes(32), rng.randbytes(size), rng.randbytes(rng.randint(0, 40))
    sealed = seal(key, msg, associated_data=ad)
    assert len(sealed) == size + OVERHEAD
    assert unseal(key, sealed, associated_data=ad) == msg
    assert unseal(bytearray(key), bytearray(sealed), associated_data=bytearray(ad)) == msg


@pytest.mark.slow
@given(seed=SEEDS, size=st.integers(min_value=0, max_value=24))
def test_every_single_bit_flip_is_rejected(seed: int, size: int) -> None:
    rng = random.Random(seed)
    key, msg = rng.randbytes(32), rng.randbytes(size)
    ad = share_associated_data(session_id=b"sid", round_index=1, sender=2, recipient=3)
    sealed = seal(key, msg, associated_data=ad)
    for bit in range(8 * len(sealed)):
        with pytest.raises(AuthenticationError):
            unseal(key, _flip(sealed, bit), associated_data=ad)
    for bit in range(8 * len(ad)):
        with pytest.raises(AuthenticationError):
            unseal(key, sealed, associated_data=_flip(ad, bit))


@given(seed=SEEDS)
def test_wrong_key_truncation_and_extension_rejected(seed: int) -> None:
    rng = random.Random(seed)
    key, msg = rng.randbytes(32), rng.randbytes(rng.randint(0, 64))
    sealed = seal(key, msg, associated_data=b"ad")
    with pytest.raises(AuthenticationError):
        unseal(_flip(key, rng.randrange(256)), sealed, associated_data=b"ad")
    for cut in (0, 1, NONCE_SIZE, OVERHEAD - 1, len(sealed) - 1):
        with pytest.raises(AuthenticationError):
            unseal(key, sealed[:cut], associated_data=b"ad")
    with pytest.raises(AuthenticationError):
        unseal(key, sealed + b"\x00", associated_data=b"ad")
    with pytest.raises(AuthenticationError):
        unseal(key, sealed, associated_data=b"ad\x00")


def test_authentication_error_is_detail_free() -> None:
    key = bytes(32)
    sealed = seal(key, b"secret share", associated_data=b"ad")
    failures = [
        (key, sealed[:5], b"ad"),  # too short
        (key, _flip(sealed, 100), b"ad"),  # altered ciphertext
        (key, sealed, b"da"),  # wrong associated data
        (bytes([1]) + key[1:], sealed, b"ad"),  # wrong key
    ]
    messages = set()
    for k, ct, ad in failures:
        with pytest.raises(AuthenticationError) as info:
            unseal(k, ct, associated_data=ad)
        assert info.value.__cause__ is None
        messages.add(str(info.value))
    assert messages == {"authentication failed"}


def test_nonces_are_fresh() -> None:
    # 64 equal seals: a repeated 96-bit nonce would have probability ~2**-85.
    nonces = {seal(bytes(32), b"", associated_data=b"")[:NONCE_SIZE] for _ in range(64)}
    assert len(nonces) == 64


def test_share_associated_data_is_ordered_and_unambiguous() -> None:
    def ad(sid: bytes, rnd: int, src: int, dst: int) -> bytes:
        return share_associated_data(session_id=sid, round_index=rnd, sender=src, recipient=dst)

    base = ad(b"ab", 1, 2, 3)
    assert base[0] == 1  # version byte
    variants = [
        ad(b"ab", 1, 3, 2),
        ad(b"ab\x00", 1, 2, 3),
        ad(b"a", 1, 2, 3),
        ad(b"ab", 2, 2, 3),
        ad(b"ab", 1, 2, 4),
        ad(b"ab", 1, 4, 3),
    ]
    assert len({base, *variants}) == len(variants) + 1
    # Length prefix: moving a byte between session id and round cannot collide.
    assert ad(b"a\x00", 0, 0, 0) != ad(b"a", 0, 0, 0)


@given(
    sid=st.binary(min_size=1, max_size=64),
    rnd=st.integers(min_value=0, max_value=2**64 - 1),
    src=st.integers(min_value=0, max_value=2**32 - 1),
    dst=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_share_associated_data_layout(sid: bytes, rnd: int, src: int, dst: int) -> None:
    out = share_associated_data(session_id=sid, round_index=rnd, sender=src, recipient=dst)
    label = b"privfed.secagg.share"
    expected = (
        b"\x01"
        + len(label).to_bytes(2, "big")
        + label
        + len(sid).to_bytes(2, "big")
        + sid
        + rnd.to_bytes(8, "big")
        + src.to_bytes(4, "big")
        + dst.to_bytes(4, "big")
    )
    assert out == expected


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"session_id": b""}, ParameterError),
        ({"session_id": bytes(65)}, ParameterError),
        ({"session_id": "s"}, ParameterTypeError),
        ({"round_index": -1}, ParameterError),
        ({"sender": 2**32}, ParameterError),
        ({"recipient": -1}, ParameterError),
        ({"recipient": 1.0}, ParameterTypeError),
    ],
)
def test_share_associated_data_validation(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    args: dict[str, object] = {"session_id": b"s", "round_index": 0, "sender": 0, "recipient": 1}
    args.update(kwargs)
    with pytest.raises(error):
        share_associated_data(**args)  # type: ignore[arg-type]


def test_seal_unseal_argument_errors() -> None:
    with pytest.raises(ParameterError) as info:
        seal(bytes(range(31)), b"m", associated_data=b"")
    assert bytes(range(31)).hex() not in str(info.value)
    with pytest.raises(ParameterTypeError):
        seal(bytes(32), "m", associated_data=b"")  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        seal(bytes(32), b"m", associated_data=None)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        unseal(bytes(16), bytes(40), associated_data=b"")
    with pytest.raises(ParameterTypeError):
        unseal(bytes(32), "x" * 40, associated_data=b"")  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        unseal(bytes(32), bytes(40), associated_data="")  # type: ignore[arg-type]
