"""``KeyPair.pairwise_keys``'s fast path for exact ints and bytes accepts and refuses as before."""

from __future__ import annotations

import numpy as np
import pytest

from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.primitives.keys import KeyPair, Purpose

CTX = {"purpose": Purpose.MASK, "session_id": b"session", "round_index": 3}


def test_bytes_like_public_keys_give_the_same_keys_as_bytes() -> None:
    me, peer = KeyPair.generate(), KeyPair.generate()
    expected = me.pairwise_keys({9: peer.public_key}, client_id=1, **CTX)
    for public in (bytearray(peer.public_key), memoryview(peer.public_key)):
        got = me.pairwise_keys({9: public}, client_id=1, **CTX)  # type: ignore[dict-item]
        assert got == expected
    # And the key is the one the peer derives from its side.
    assert peer.pairwise_keys({1: me.public_key}, client_id=9, **CTX)[1] == expected[9]


@pytest.mark.parametrize(
    ("peer_id", "error"),
    [
        (True, ParameterTypeError),  # bool is an int subclass
        (np.int64(9), ParameterTypeError),  # numpy ints are refused, as by check_int
        (2**32, ParameterError),
        (-1, ParameterError),
        (1, ParameterError),  # the client itself
    ],
)
def test_peer_ids_off_the_domain_are_refused(peer_id: object, error: type[Exception]) -> None:
    me, peer = KeyPair.generate(), KeyPair.generate()
    with pytest.raises(error, match="'peer_id'"):
        me.pairwise_keys({peer_id: peer.public_key}, client_id=1, **CTX)  # type: ignore[dict-item]


def test_edge_peer_ids_are_accepted() -> None:
    me, peer = KeyPair.generate(), KeyPair.generate()
    got = me.pairwise_keys({0: peer.public_key, 2**32 - 1: peer.public_key}, client_id=1, **CTX)
    assert set(got) == {0, 2**32 - 1} and got[0] != got[2**32 - 1]


@pytest.mark.parametrize("public", [bytes(31), bytes(33), "x" * 32])
def test_malformed_public_keys_are_refused(public: object) -> None:
    me = KeyPair.generate()
    error = ParameterTypeError if isinstance(public, str) else ParameterError
    with pytest.raises(error, match="'peer_public_key'"):
        me.pairwise_keys({2: public}, client_id=1, **CTX)  # type: ignore[dict-item]
