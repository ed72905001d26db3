"""The server fast paths' caches at their limits: Lagrange weights and packed layouts.

* ``shamir.combine_batches`` with the Lagrange-weight cache at its limit: a
  call mixing a cached index set with new ones cleared the cache and then
  looked the cached set up again (``KeyError`` from ``finalize`` in a long
  SecAgg+ run with many responder sets).
* The packed parse cached one ``struct`` layout per item count (tens of bytes
  per item): large messages with ever different counts made a parser keep many
  times their size.  Only layouts of small counts are cached now; large
  counts parse the same.
"""

from __future__ import annotations

import struct

import pytest

from privfed.secagg import EncryptedShares, EncryptedSharesBundle, decode_message
from privfed.secagg.primitives import shamir
from privfed.secagg.protocol import messages
from privfed.secagg.protocol.messages import _codec


def _line(xs: tuple[int, ...], secret: int, slope: int) -> list[int]:
    """Shares of ``secret`` on the line ``secret + slope * x`` (threshold 2)."""
    return [secret + slope * x for x in xs]


def _expected(xs: tuple[int, ...], row: list[int]) -> bytes:
    return shamir.combine([shamir.Share(x, y) for x, y in zip(xs, row, strict=True)], threshold=2)


def test_weight_cache_at_its_limit_keeps_the_weights_it_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shamir, "_ZERO_WEIGHTS", {})
    monkeypatch.setattr(shamir, "_ZERO_WEIGHTS_LIMIT", 2)
    a, b, c = (1, 2), (1, 3), (2, 3)
    first = [(a, [_line(a, 5, 4)]), (b, [_line(b, 7, 1)])]
    assert shamir.combine_batches(first, threshold=2) == [
        [(5).to_bytes(32, "big")],
        [(7).to_bytes(32, "big")],
    ]
    # (1, 2) is cached, (2, 3) is not and overflows the cache: both are rebuilt right.
    second = [(a, [_line(a, 5, 4), _line(a, 0, 9)]), (c, [_line(c, 2**255, 3)])]
    assert shamir.combine_batches(second, threshold=2) == [
        [_expected(a, _line(a, 5, 4)), (0).to_bytes(32, "big")],
        [(2**255).to_bytes(32, "big")],
    ]
    assert len(shamir._ZERO_WEIGHTS) <= 2


def _bundle_bytes(n: int) -> bytes:
    """A bundle of ``n`` one-byte ciphertexts, encoded by hand (no objects per item)."""
    head = messages.WIRE_MAGIC + bytes(
        (messages.WIRE_VERSION, int(messages.MessageType.ENCRYPTED_SHARES_BUNDLE), 16)
    )
    items = b"".join(struct.pack(">II", i, 1) + bytes((i % 256,)) for i in range(1, n + 1))
    return head + bytes(16) + bytes(4) + struct.pack(">II", 2**32 - 1, n) + items


def test_large_item_counts_parse_without_a_cached_layout() -> None:
    large = _codec._LAYOUT_CACHE_ITEMS + 1
    _codec._cached_layout.cache_clear()
    for n in (large, large + 1, large + 2):
        parsed = decode_message(_bundle_bytes(n))
        assert isinstance(parsed, EncryptedSharesBundle)
        assert parsed._packed_shares() is not None
        assert parsed.recipients == tuple(range(1, n + 1))
        assert parsed.shares[-1].ciphertext == bytes((n % 256,))
    assert _codec._cached_layout.cache_info().currsize == 0
    # Small counts still use (and fill) the cache, with the same result as objects.
    small = decode_message(_bundle_bytes(3))
    built = EncryptedSharesBundle.from_shares(
        EncryptedShares(bytes(16), 0, sender=2**32 - 1, recipient=r, ciphertext=bytes((r,)))
        for r in (1, 2, 3)
    )
    assert small == built and small.to_bytes() == built.to_bytes()
    assert _codec._cached_layout.cache_info().currsize == 1
