"""Tests of privfed.secagg.primitives.keys: RFC known answers, low-order points, HKDF context."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import pickle
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import KeyAgreementError, ParameterError, ParameterTypeError
from privfed.secagg.primitives import keys
from privfed.secagg.primitives.keys import (
    HKDF_SALT,
    KeyPair,
    Purpose,
    agree,
    derive_key,
    derive_self_mask_seed,
    pairwise_key,
)

KAT = Path(__file__).resolve().parents[2] / "fixtures" / "kat"
SEEDS = st.integers(min_value=0, max_value=2**64 - 1)
CURVE_P = 2**255 - 19


def _load(name: str) -> Any:
    return json.loads((KAT / name).read_text(encoding="utf-8"))


# -- X25519 -----------------------------------------------------------------------


def test_rfc7748_scalar_mult_vectors() -> None:
    data = _load("x25519_rfc7748.json")
    assert "RFC 7748" in data["source"]
    for case in data["scalar_mult"]:
        out = agree(bytes.fromhex(case["scalar"]), bytes.fromhex(case["u"]))
        assert out.hex() == case["output"]


def test_rfc7748_iterated_vector() -> None:
    data = _load("x25519_rfc7748.json")["iterated"]
    k = u = bytes.fromhex(data["start"])
    for i in range(1, 1001):
        k, u = agree(k, u), k
        if i == 1:
            assert k.hex() == data["after_1"]
    assert k.hex() == data["after_1000"]


def test_rfc7748_diffie_hellman() -> None:
    dh = _load("x25519_rfc7748.json")["diffie_hellman"]
    alice = KeyPair.from_private_bytes(bytes.fromhex(dh["alice_private"]))
    bob = KeyPair.from_private_bytes(bytes.fromhex(dh["bob_private"]))
    assert alice.public_key.hex() == dh["alice_public"]
    assert bob.public_key.hex() == dh["bob_public"]
    assert agree(alice.private_key, bob.public_key).hex() == dh["shared"]
    assert agree(bob.private_key, alice.public_key).hex() == dh["shared"]


def _low_order_encodings() -> list[bytes]:
    data = _load("x25519_low_order.json")
    points = [bytes.fromhex(p["u"]) for p in data["points"]]
    # X25519 ignores bit 255 (RFC 7748 §5), so the same points with that bit set
    # are low-order too.
    flipped = [p[:31] + bytes([p[31] | 0x80]) for p in points]
    return points + flipped


def test_low_order_list_matches_literature_decimals() -> None:
    data = _load("x25519_low_order.json")
    decimals = {p["name"]: int(p["decimal"]) for p in data["points"] if "decimal" in p}
    assert len(decimals) == 2
    for p in data["points"]:
        if "decimal" in p:
            assert int.from_bytes(bytes.fromhex(p["u"]), "little") == int(p["decimal"])
    values = [int.from_bytes(bytes.fromhex(p["u"]), "little") for p in data["points"]]
    assert {0, 1, CURVE_P - 1, CURVE_P, CURVE_P + 1} <= set(values)


@pytest.mark.parametrize("point", _low_order_encodings(), ids=lambda b: b.hex()[:8] + b.hex()[-2:])
def test_low_order_points_rejected(point: bytes) -> None:
    rng = random.Random(int.from_bytes(point[:8], "little"))
    for _ in range(3):
        with pytest.raises(KeyAgreementError) as info:
            agree(rng.randbytes(32), point)
        assert point.hex() not in str(info.value)
        assert info.value.__cause__ is None


def test_keypair_generate_and_agree() -> None:
    a, b = KeyPair.generate(), KeyPair.generate()
    assert a.private_key != b.private_key
    assert len(a.public_key) == keys.PUBLIC_KEY_SIZE
    assert agree(a.private_key, b.public_key) == agree(b.private_key, a.public_key)
    assert KeyPair.from_private_bytes(a.private_key) == a


def test_keypair_repr_hides_private_key() -> None:
    pair = KeyPair.from_private_bytes(bytes(range(32)))
    assert bytes(range(32)).hex() not in repr(pair)
    assert repr(bytes(range(32))) not in repr(pair)
    assert "private_key" not in repr(pair)


def test_keypair_validation() -> None:
    pair = KeyPair.from_private_bytes(bytes(range(32)))
    with pytest.raises(ParameterError, match="public_key"):
        KeyPair(pair.private_key, bytes(32))
    with pytest.raises(ParameterError, match="private_key"):
        KeyPair(pair.private_key[:31], pair.public_key)
    with pytest.raises(ParameterTypeError):
        KeyPair.from_private_bytes("k" * 32)  # type: ignore[arg-type]
    with pytest.raises(ParameterError) as info:
        KeyPair.from_private_bytes(bytes(range(33)))
    assert bytes(range(33)).hex() not in str(info.value)
    assert repr(bytes(range(33))) not in str(info.value)


@pytest.mark.parametrize(
    ("private", "public", "error"),
    [
        (bytes(31), bytes(32), ParameterError),
        (bytes(32), bytes(33), ParameterError),
        ("x" * 32, bytes(32), ParameterTypeError),
        (bytes(32), None, ParameterTypeError),
    ],
)
def test_agree_validation(private: object, public: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        agree(private, public)  # type: ignore[arg-type]


# -- HKDF ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case", _load("hkdf_sha256_rfc5869.json")["cases"], ids=lambda c: c["name"][:3]
)
def test_rfc5869_hkdf_sha256(case: dict[str, Any]) -> None:
    ikm, salt, info = (bytes.fromhex(case[k]) for k in ("ikm", "salt", "info"))
    okm = keys._hkdf_sha256(ikm, salt=salt or None, info=info, length=case["length"])
    assert okm.hex() == case["okm"]
    # The extract step, recomputed with the standard library's HMAC (RFC 5869 §2.2:
    # an absent salt is HashLen zero bytes).
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    assert prk.hex() == case["prk"]


def _reference_hkdf(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """Independent HKDF-SHA256 (RFC 5869 §2.2-2.3) from the standard library's HMAC."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def _lp(b: bytes) -> bytes:
    return len(b).to_bytes(2, "big") + b


def _documented_info(purpose: str, session_id: bytes, round_index: int, ids: list[int]) -> bytes:
    return (
        b"\x01"
        + _lp(b"privfed.secagg")
        + _lp(purpose.encode())
        + _lp(session_id)
        + round_index.to_bytes(8, "big")
        + bytes([len(ids)])
        + b"".join(struct.pack(">I", i) for i in ids)
    )


@given(seed=SEEDS)
def test_derive_key_matches_documented_encoding(seed: int) -> None:
    rng = random.Random(seed)
    secret = rng.randbytes(32)
    session = rng.randbytes(rng.randint(1, 64))
    rnd = rng.randrange(2**64)
    a, b = rng.sample(range(2**32), 2)
    purpose = rng.choice([Purpose.MASK, Purpose.SHARE_ENCRYPTION])
    length = rng.randint(16, 100)
    got = derive_key(
        secret,
        purpose=purpose,
        session_id=session,
        round_index=rnd,
        client_id=a,
        peer_id=b,
        length=length,
    )
    info = _documented_info(purpose.value, session, rnd, [min(a, b), max(a, b)])
    assert got == _reference_hkdf(secret, HKDF_SALT, info, length)
    seed_out = derive_self_mask_seed(secret, session_id=session, round_index=rnd, client_id=a)
    info = _documented_info("self-mask", session, rnd, [a])
    assert seed_out == _reference_hkdf(secret, HKDF_SALT, info, 32)


def test_derive_key_frozen_vector() -> None:
    # Guards the wire format: changing the info encoding must bump KDF_VERSION.
    vec = _load("privfed_kdf_vectors.json")
    for case in vec["cases"]:
        got = derive_key(
            bytes.fromhex(case["shared_secret"]),
            purpose=Purpose(case["purpose"]),
            session_id=bytes.fromhex(case["session_id"]),
            round_index=case["round_index"],
            client_id=case["client_id"],
            peer_id=case["peer_id"],
            length=case["length"],
        )
        assert got.hex() == case["key"]


def _context_strategy() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "purpose": st.sampled_from([Purpose.MASK, Purpose.SHARE_ENCRYPTION]),
            "session_id": st.binary(min_size=1, max_size=64),
            "round_index": st.integers(min_value=0, max_value=2**64 - 1),
            "client_id": st.integers(min_value=0, max_value=2**32 - 1),
            "peer_id": st.integers(min_value=0, max_value=2**32 - 1),
        }
    ).filter(lambda c: c["client_id"] != c["peer_id"])


@given(seed=SEEDS, ctx=_context_strategy())
def test_derive_key_symmetric_in_ids(seed: int, ctx: dict[str, Any]) -> None:
    secret = random.Random(seed).randbytes(32)
    swapped = dict(ctx, client_id=ctx["peer_id"], peer_id=ctx["client_id"])
    assert derive_key(secret, **ctx) == derive_key(secret, **swapped)


def _mutations(ctx: dict[str, Any]) -> list[dict[str, Any]]:
    other_purpose = Purpose.SHARE_ENCRYPTION if ctx["purpose"] is Purpose.MASK else Purpose.MASK
    sid = ctx["session_id"]
    longer_sid = sid + b"\x00" if len(sid) < 64 else sid[:-1]
    changed_sid = bytes([sid[0] ^ 1]) + sid[1:]
    lo, hi = sorted((ctx["client_id"], ctx["peer_id"]))
    new_id = (hi + 1) % 2**32
    if new_id == lo:
        new_id = (hi + 2) % 2**32
    return [
        dict(ctx, purpose=other_purpose),
        dict(ctx, session_id=longer_sid),
        dict(ctx, session_id=changed_sid),
        dict(ctx, round_index=(ctx["round_index"] + 1) % 2**64),
        dict(ctx, client_id=lo, peer_id=new_id),
        dict(ctx, client_id=new_id, peer_id=hi),
    ]


@given(seed=SEEDS, ctx=_context_strategy())
def test_derive_key_differs_for_every_context_change(seed: int, ctx: dict[str, Any]) -> None:
    secret = random.Random(seed).randbytes(32)
    base = derive_key(secret, **ctx)
    outputs = [base] + [derive_key(secret, **changed) for changed in _mutations(ctx)]
    # Every mutated context is distinct from the others, so all keys must differ.
    assert len(set(outputs)) == len(outputs)
    # The shared secret matters too, and the self-mask seed is separated.
    assert derive_key(bytes(a ^ 1 for a in secret), **ctx) != base
    self_seed = derive_self_mask_seed(
        secret,
        session_id=ctx["session_id"],
        round_index=ctx["round_index"],
        client_id=ctx["client_id"],
    )
    assert self_seed != base


@given(seed=SEEDS)
def test_self_mask_seed_context(seed: int) -> None:
    rng = random.Random(seed)
    b_u = rng.randbytes(32)
    ctx = {"session_id": rng.randbytes(8), "round_index": rng.randrange(100), "client_id": 5}
    base = derive_self_mask_seed(b_u, **ctx)
    assert len(base) == 32
    assert derive_self_mask_seed(b_u, **ctx) == base
    assert derive_self_mask_seed(b_u, **dict(ctx, client_id=6)) != base
    assert derive_self_mask_seed(b_u, **dict(ctx, round_index=ctx["round_index"] + 1)) != base
    assert derive_self_mask_seed(b_u, **dict(ctx, session_id=ctx["session_id"] + b"x")) != base
    assert derive_self_mask_seed(rng.randbytes(32), **ctx) != base


def test_pairwise_key_both_ends_agree() -> None:
    a, b = KeyPair.generate(), KeyPair.generate()
    ctx: dict[str, Any] = {
        "purpose": Purpose.MASK,
        "session_id": b"session",
        "round_index": 3,
    }
    k_ab = pairwise_key(a.private_key, b.public_key, client_id=1, peer_id=2, **ctx)
    k_ba = pairwise_key(b.private_key, a.public_key, client_id=2, peer_id=1, **ctx)
    assert k_ab == k_ba
    assert k_ab == derive_key(agree(a.private_key, b.public_key), client_id=1, peer_id=2, **ctx)
    enc = pairwise_key(
        a.private_key,
        b.public_key,
        client_id=1,
        peer_id=2,
        **dict(ctx, purpose=Purpose.SHARE_ENCRYPTION),
    )
    assert enc != k_ab


def test_pairwise_key_low_order_peer() -> None:
    with pytest.raises(KeyAgreementError):
        pairwise_key(
            bytes(range(32)),
            bytes(32),
            purpose=Purpose.MASK,
            session_id=b"s",
            round_index=0,
            client_id=0,
            peer_id=1,
        )


_GOOD: dict[str, Any] = {
    "purpose": Purpose.MASK,
    "session_id": b"s",
    "round_index": 0,
    "client_id": 0,
    "peer_id": 1,
}


@pytest.mark.parametrize(
    ("override", "error", "name"),
    [
        ({"purpose": "mask"}, ParameterTypeError, "purpose"),
        ({"purpose": Purpose.SELF_MASK}, ParameterError, "purpose"),
        ({"session_id": b""}, ParameterError, "session_id"),
        ({"session_id": bytes(65)}, ParameterError, "session_id"),
        ({"session_id": "s"}, ParameterTypeError, "session_id"),
        ({"round_index": -1}, ParameterError, "round_index"),
        ({"round_index": 2**64}, ParameterError, "round_index"),
        ({"client_id": -1}, ParameterError, "client_id"),
        ({"client_id": 2**32}, ParameterError, "client_id"),
        ({"peer_id": 2**32}, ParameterError, "peer_id"),
        ({"peer_id": 0}, ParameterError, "peer_id"),
        ({"peer_id": True}, ParameterTypeError, "peer_id"),
        ({"length": 15}, ParameterError, "length"),
        ({"length": 8161}, ParameterError, "length"),
    ],
)
def test_derive_key_validation(override: dict[str, Any], error: type[Exception], name: str) -> None:
    with pytest.raises(error) as info:
        derive_key(bytes(32), **dict(_GOOD, **override))
    assert info.value.parameter == name  # type: ignore[attr-defined]
    # pairwise_key validates the context before touching the keys.
    with pytest.raises(error):
        pairwise_key(bytes(32), bytes(32), **dict(_GOOD, **override))


def test_derive_key_secret_checks() -> None:
    with pytest.raises(ParameterError) as info:
        derive_key(bytes(range(31)), **_GOOD)
    assert bytes(range(31)).hex() not in str(info.value)
    with pytest.raises(ParameterError, match="seed"):
        derive_self_mask_seed(bytes(16), session_id=b"s", round_index=0, client_id=0)


def test_keypair_methods_match_module_functions() -> None:
    dh = _load("x25519_rfc7748.json")["diffie_hellman"]
    alice = KeyPair.from_private_bytes(bytes.fromhex(dh["alice_private"]))
    bob = KeyPair.from_private_bytes(bytes.fromhex(dh["bob_private"]))
    assert alice.agree(bob.public_key).hex() == dh["shared"]
    assert bob.agree(alice.public_key) == agree(bob.private_key, alice.public_key)
    ctx: dict[str, Any] = {"purpose": Purpose.MASK, "session_id": b"s", "round_index": 9}
    assert alice.pairwise_key(bob.public_key, client_id=4, peer_id=7, **ctx) == pairwise_key(
        bob.private_key, alice.public_key, client_id=7, peer_id=4, **ctx
    )
    with pytest.raises(KeyAgreementError):
        alice.agree(bytes(32))
    with pytest.raises(ParameterError):
        alice.agree(bytes(31))
    with pytest.raises(ParameterError):
        alice.pairwise_key(bob.public_key, client_id=4, peer_id=4, **ctx)


def test_keypair_copy_and_pickle() -> None:
    pair = KeyPair.generate()
    # Round trip of bytes we produced ourselves, so unpickling is safe here.
    restored = pickle.loads(pickle.dumps(pair))  # noqa: S301
    for clone in (copy.copy(pair), copy.deepcopy(pair), restored):
        assert clone == pair
        assert clone.agree(KeyPair.generate().public_key)
    assert hash(pair) == hash(KeyPair.from_private_bytes(pair.private_key))
    assert repr(pair) == f"KeyPair(public_key={pair.public_key!r})"


@given(
    me=st.integers(0, 2**32 - 1),
    peers=st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=5, unique=True),
    purpose=st.sampled_from([Purpose.MASK, Purpose.SHARE_ENCRYPTION]),
    length=st.sampled_from([16, 32, 64]),
)
def test_pairwise_keys_equals_pairwise_key_per_peer(
    me: int, peers: list[int], purpose: Purpose, length: int
) -> None:
    peers = [p for p in peers if p != me]
    pair = KeyPair.from_private_bytes(hashlib.sha256(b"me%d" % me).digest())
    publics = {
        p: KeyPair.from_private_bytes(hashlib.sha256(b"peer%d" % p).digest()).public_key
        for p in peers
    }
    ctx: dict[str, Any] = {"purpose": purpose, "session_id": b"sess", "round_index": 3}
    batch = pair.pairwise_keys(publics, client_id=me, length=length, **ctx)
    assert list(batch) == peers
    for p in peers:
        assert batch[p] == pair.pairwise_key(
            publics[p], client_id=me, peer_id=p, length=length, **ctx
        )


def test_pairwise_keys_names_the_low_order_peer_and_validates_first() -> None:
    pair = KeyPair.generate()
    good = KeyPair.generate().public_key
    ctx: dict[str, Any] = {"purpose": Purpose.MASK, "session_id": b"s", "round_index": 0}
    low = _low_order_encodings()[0]
    with pytest.raises(KeyAgreementError) as info:
        pair.pairwise_keys({2: good, 5: low, 7: good}, client_id=1, **ctx)
    assert info.value.peer_id == 5
    assert low.hex() not in str(info.value)
    assert info.value.__cause__ is None
    # A malformed entry anywhere is reported before any key agreement runs.
    with pytest.raises(ParameterError, match="'peer_public_key'"):
        pair.pairwise_keys({2: low, 3: bytes(31)}, client_id=1, **ctx)
    with pytest.raises(ParameterError, match="'peer_id'"):
        pair.pairwise_keys({2: good, 1: good}, client_id=1, **ctx)
    with pytest.raises(ParameterTypeError, match="'peer_public_keys'"):
        pair.pairwise_keys([(2, good)], client_id=1, **ctx)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="'purpose'"):
        pair.pairwise_keys(
            {2: good}, client_id=1, purpose=Purpose.SELF_MASK, session_id=b"s", round_index=0
        )
    assert pair.pairwise_keys({}, client_id=1, **ctx) == {}


@pytest.mark.parametrize("point", _low_order_encodings(), ids=lambda b: b.hex()[:8] + b.hex()[-2:])
def test_is_low_order_flags_every_listed_point(point: bytes) -> None:
    assert keys.is_low_order(point)


@given(point=st.binary(min_size=32, max_size=32), private=st.binary(min_size=32, max_size=32))
def test_is_low_order_agrees_with_key_agreement(point: bytes, private: bytes) -> None:
    # The table must flag exactly the keys X25519 itself refuses.  Random
    # strings are almost never low-order, so the listed points (with bit 255
    # toggled and with their non-canonical u + p forms where those fit in 255
    # bits) are also fed in via the explicit examples below.
    try:
        agree(private, point)
        refused = False
    except KeyAgreementError:
        refused = True
    assert keys.is_low_order(point) == refused


def test_is_low_order_on_non_canonical_and_near_miss_encodings() -> None:
    rng = random.Random(7)
    candidates = []
    for u in (0, 1, 2, 18, CURVE_P - 2, CURVE_P - 1, CURVE_P, CURVE_P + 1, CURVE_P + 2):
        candidates += [u, u | (1 << 255)]
    listed = [int.from_bytes(p, "little") for p in _low_order_encodings()]
    candidates += listed + [u + 1 for u in listed] + [u - 1 for u in listed if u]
    for u in candidates:
        point = (u % 2**256).to_bytes(32, "little")
        try:
            agree(rng.randbytes(32), point)
            refused = False
        except KeyAgreementError:
            refused = True
        assert keys.is_low_order(point) == refused, hex(u)
    with pytest.raises(ParameterError, match="'public_key'"):
        keys.is_low_order(bytes(31))
    with pytest.raises(ParameterTypeError, match="'public_key'"):
        keys.is_low_order("x" * 32)  # type: ignore[arg-type]
