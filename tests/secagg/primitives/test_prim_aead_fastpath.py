"""``aead``'s fast path for plain bytes and ints accepts and refuses as the full checks do."""

from __future__ import annotations

import numpy as np
import pytest

from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.primitives.aead import seal, share_associated_data, unseal


def _ad(**kwargs: object) -> bytes:
    args: dict[str, object] = {"session_id": b"sid", "round_index": 5, "sender": 1, "recipient": 2}
    args.update(kwargs)
    return share_associated_data(**args)  # type: ignore[arg-type]


def test_other_bytes_like_session_ids_give_the_same_bytes() -> None:
    # bytearray and memoryview take the checked path; the result is identical.
    assert _ad(session_id=bytearray(b"sid")) == _ad()
    assert _ad(session_id=memoryview(b"sid")) == _ad()


@pytest.mark.parametrize(
    ("field", "edge"), [("round_index", 2**64 - 1), ("sender", 2**32 - 1), ("recipient", 2**32 - 1)]
)
def test_range_edges_are_accepted_and_one_past_them_refused(field: str, edge: int) -> None:
    assert _ad(**{field: edge}) != _ad(**{field: edge - 1})
    with pytest.raises(ParameterError, match=f"'{field}'"):
        _ad(**{field: edge + 1})
    with pytest.raises(ParameterError, match=f"'{field}'"):
        _ad(**{field: -1})


@pytest.mark.parametrize("value", [True, np.int64(3), 3.0])
def test_int_lookalikes_are_refused_as_before(value: object) -> None:
    # bool is an int subclass and numpy integers compare like ints: neither
    # may slip through the fast path.
    with pytest.raises(ParameterTypeError, match="'sender'"):
        _ad(sender=value)


def test_seal_accepts_bytes_like_inputs_and_round_trips() -> None:
    key = bytes(range(32))
    ad = _ad()
    for k, pt, a in [
        (key, b"plain", ad),
        (bytearray(key), bytearray(b"plain"), bytearray(ad)),
        (memoryview(key), memoryview(b"plain"), memoryview(ad)),
    ]:
        box = seal(k, pt, associated_data=a)  # type: ignore[arg-type]
        assert unseal(key, box, associated_data=ad) == b"plain"
    with pytest.raises(ParameterError, match="'key'"):
        seal(key[:31], b"plain", associated_data=ad)
    with pytest.raises(ParameterTypeError, match="'plaintext'"):
        seal(key, "plain", associated_data=ad)  # type: ignore[arg-type]
