"""Routing at the close of SHARE_KEYS: the packed path against the item-by-item one.

:func:`~privfed.secagg.protocol._routing.route_packed` moves whole records
as rows of bytes; :func:`~privfed.secagg.protocol._routing.route_items` is
the plain reference.  On random graphs, ciphertext widths and sets of
complete senders both must give byte-identical routed messages.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from privfed.secagg import SecAggConfig
from privfed.secagg.protocol._routing import route_items, route_packed
from privfed.secagg.protocol.graph import GraphMode
from privfed.secagg.protocol.messages import (
    EncryptedShares,
    EncryptedSharesBundle,
    decode_message,
)

_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None)


def _round(n: int, degree: int | None, width: int, seed: int, dropped: int) -> tuple:
    rng = random.Random(seed)
    graph = GraphMode.COMPLETE if degree is None else GraphMode.HARARY
    config = SecAggConfig(
        client_ids=tuple(range(1, n + 1)),
        threshold=n // 2 + 1,
        vector_length=4,
        graph=graph,
        **({} if degree is None else {"degree": degree}),
    )
    seed_bytes = bytes(32)
    hoods = config.neighbourhoods(seed_bytes) if degree is not None else None

    def hood(c: int) -> frozenset[int]:
        return hoods[c] if hoods is not None else config.neighbours(c)

    complete = frozenset(rng.sample(config.client_ids, n - dropped))
    bundles: dict[int, EncryptedSharesBundle] = {}
    items: dict[int, dict[int, EncryptedShares]] = {}
    for sender in config.client_ids:
        shares = tuple(
            EncryptedShares(
                session_id=config.bound_session_id,
                round_index=config.round_index,
                sender=sender,
                recipient=r,
                ciphertext=rng.randbytes(width),
            )
            for r in sorted(hood(sender))
        )
        bundle = EncryptedSharesBundle.from_shares(shares)
        parsed = decode_message(bundle.to_bytes())
        assert isinstance(parsed, EncryptedSharesBundle)
        bundles[sender] = parsed
        items[sender] = {s.recipient: s for s in shares}
    return config, complete, bundles, items, hood


@_SETTINGS
@given(
    n=st.integers(3, 24),
    harary=st.booleans(),
    width=st.sampled_from([1, 7, 8, 33, 120, 401]),
    seed=st.integers(0, 2**32),
    dropped=st.integers(0, 2),
)
def test_packed_routing_is_byte_identical_to_item_routing(
    n: int, harary: bool, width: int, seed: int, dropped: int
) -> None:
    degree = None
    if harary:
        degree = max(2, (n // 2) * 2)
        if degree >= n:
            degree = n - 1 if (n - 1) % 2 == 0 else n - 2
        if degree < 2:
            return
    config, complete, bundles, items, hood = _round(n, degree, width, seed, dropped)
    fast = route_packed(config, complete, bundles, hood)
    slow = route_items(config, complete, items, hood)
    assert fast is not None
    assert sorted(fast) == sorted(slow) == sorted(complete)
    for recipient, routed in fast.items():
        assert routed.to_bytes() == slow[recipient].to_bytes()
        assert routed == slow[recipient]
        assert [s.sender for s in routed.shares] == sorted(hood(recipient) & complete)
        again = decode_message(routed.to_bytes())
        assert again == routed


def test_mixed_widths_leave_the_packed_path() -> None:
    config, complete, bundles, _items, hood = _round(6, None, 16, 1, 0)
    _, _, other, _, _ = _round(6, None, 17, 1, 0)
    bundles[1] = other[1]
    assert route_packed(config, complete, bundles, hood) is None
