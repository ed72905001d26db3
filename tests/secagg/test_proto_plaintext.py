"""Layout of the share plaintexts clients encrypt to each other."""

from __future__ import annotations

import pytest

from privfed.errors import ParameterError
from privfed.secagg.primitives import shamir
from privfed.secagg.protocol._plaintext import pack_shares, unpack_shares

FB = shamir.FIELD_BYTES


def _pair(recipient: int) -> tuple[bytes, bytes]:
    key, seed = (
        shamir.split(bytes([b]) * 32, threshold=2, num_shares=3, indices=[recipient, 50, 60])[0]
        for b in (1, 2)
    )
    return key.to_bytes(), seed.to_bytes()


def test_round_trip_returns_canonical_shares() -> None:
    key, seed = _pair(7)
    data = pack_shares(sender=3, recipient=7, key_share=key, seed_share=seed)
    assert unpack_shares(data, sender=3, recipient=7) == (key, seed, ())
    for share in unpack_shares(data, sender=3, recipient=7)[:2]:
        assert shamir.Share.from_bytes(share).index == 7


def test_round_trip_with_noise_layer_shares() -> None:
    key, seed = _pair(7)
    noise = _pair(7)
    data = pack_shares(sender=3, recipient=7, key_share=key, seed_share=seed, noise_shares=noise)
    assert unpack_shares(data, sender=3, recipient=7, noise_layers=2) == (key, seed, noise)
    with pytest.raises(ParameterError):
        unpack_shares(data, sender=3, recipient=7)  # the config's L decides the length


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize(
    ("mangle", "match"),
    [
        (lambda s: (8).to_bytes(FB, "big") + s[FB:], "recipient's id"),
        (lambda s: (7 + shamir.PRIME).to_bytes(FB, "big") + s[FB:], "recipient's id"),
        (lambda s: s[:FB] + shamir.PRIME.to_bytes(FB, "big"), "below the field prime"),
        (lambda s: s[:FB] + b"\xff" * FB, "below the field prime"),
    ],
)
def test_bad_shares_behind_a_valid_layout_are_refused(
    which: int, mangle: object, match: str
) -> None:
    pair = list(_pair(7))
    pair[which] = mangle(pair[which])  # type: ignore[operator]
    data = pack_shares(sender=3, recipient=7, key_share=pair[0], seed_share=pair[1])
    with pytest.raises(ParameterError, match=match) as info:
        unpack_shares(data, sender=3, recipient=7)
    assert pair[which].hex() not in str(info.value)


def test_layout_and_addressing_are_checked() -> None:
    key, seed = _pair(7)
    data = pack_shares(sender=3, recipient=7, key_share=key, seed_share=seed)
    for bad in (data[:-1], data + b"\x00", b"XXXX" + data[4:], data[:4] + b"\x02" + data[5:]):
        with pytest.raises(ParameterError, match="version-1"):
            unpack_shares(bad, sender=3, recipient=7)
    with pytest.raises(ParameterError, match="addressed"):
        unpack_shares(data, sender=4, recipient=7)
    with pytest.raises(ParameterError, match="addressed"):
        unpack_shares(data, sender=3, recipient=8)
