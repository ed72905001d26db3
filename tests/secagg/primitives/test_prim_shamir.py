"""Tests of privfed.secagg.primitives.shamir."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import ParameterError, ParameterTypeError, ReconstructionError
from privfed.secagg.primitives import shamir
from privfed.secagg.primitives.shamir import (
    FIELD_BYTES,
    PRIME,
    SECRET_SIZE,
    SHARE_SIZE,
    Share,
    combine,
    split,
)

SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


def _lucas_lehmer(exponent: int) -> bool:
    """Lucas-Lehmer test: 2**exponent - 1 is prime iff s_{exponent-2} == 0 (exponent odd prime)."""
    m = (1 << exponent) - 1
    s = 4
    for _ in range(exponent - 2):
        s = (s * s - 2) % m
    return s == 0


def _miller_rabin(n: int, bases: list[int]) -> bool:
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def test_prime_is_the_mersenne_prime_m521() -> None:
    assert PRIME == 2**521 - 1
    assert PRIME > 2**256
    # Two independent checks: Lucas-Lehmer proves primality of a Mersenne number;
    # Miller-Rabin with the first 20 prime bases would catch a typo in the constant.
    assert _lucas_lehmer(521)
    assert _miller_rabin(PRIME, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59])
    # The checkers themselves reject composites.
    assert not _lucas_lehmer(11)  # 2**11 - 1 = 23 * 89
    assert not _miller_rabin(2**521 + 1, [2, 3, 5])
    assert FIELD_BYTES == 66
    assert SHARE_SIZE == 132


def _secret(seed: int) -> bytes:
    return random.Random(seed).randbytes(SECRET_SIZE)


def _distinct(rng: random.Random, n: int, upper: int) -> list[int]:
    out: list[int] = []
    while len(out) < n:
        x = rng.randrange(1, upper)
        if x not in out:
            out.append(x)
    return out


def _lagrange_at_zero(points: list[tuple[int, int]]) -> int:
    """Slow reference interpolation with exact rationals, reduced mod PRIME at the end."""
    total = Fraction(0)
    for i, (xi, yi) in enumerate(points):
        term = Fraction(yi)
        for m, (xm, _) in enumerate(points):
            if m != i:
                term *= Fraction(-xm, xi - xm)
        total += term
    return total.numerator * pow(total.denominator, -1, PRIME) % PRIME


@given(
    seed=SEEDS,
    threshold=st.integers(min_value=2, max_value=8),
    extra=st.integers(min_value=0, max_value=6),
    use_indices=st.booleans(),
)
def test_any_threshold_subset_reconstructs(
    seed: int, threshold: int, extra: int, use_indices: bool
) -> None:
    rng = random.Random(seed)
    n = threshold + extra
    secret = _secret(seed)
    # Small indices take the lazily reduced interpolation path, huge ones the
    # path that reduces at every step.
    upper = rng.choice([2**40, PRIME])
    indices = _distinct(rng, n, upper) if use_indices else None
    shares = split(secret, threshold=threshold, num_shares=n, indices=indices)
    assert [s.index for s in shares] == (indices or list(range(1, n + 1)))
    for size in range(threshold, n + 1):
        subset = rng.sample(shares, size)
        assert combine(subset, threshold=threshold) == secret
    # An independent (slow, rational) interpolation agrees.
    subset = rng.sample(shares, threshold)
    expected = _lagrange_at_zero([(s.index, s.value) for s in subset])
    assert expected == int.from_bytes(secret, "big")


def test_known_answer_degree_one() -> None:
    # f(x) = 5 + 7x over GF(p): points (1, 12), (2, 19), (3, 26).
    shares = [Share(1, 12), Share(2, 19), Share(3, 26)]
    assert combine(shares, threshold=2) == (5).to_bytes(32, "big")
    assert combine(shares[1:], threshold=2) == (5).to_bytes(32, "big")
    # Negative coefficient wraps: f(x) = 9 - 4x -> f(1) = 5, f(3) = p - 3.
    assert combine([Share(1, 5), Share(3, PRIME - 3)], threshold=2) == (9).to_bytes(32, "big")


@given(seed=SEEDS, threshold=st.integers(min_value=2, max_value=6))
def test_fewer_than_threshold_shares_refused(seed: int, threshold: int) -> None:
    shares = split(_secret(seed), threshold=threshold, num_shares=threshold + 2)
    with pytest.raises(ParameterError, match="at least threshold"):
        combine(shares[: threshold - 1], threshold=threshold)


@given(
    seed=SEEDS,
    threshold=st.integers(min_value=2, max_value=6),
    extra=st.integers(min_value=1, max_value=4),
    data=st.data(),
)
def test_tampering_one_share_is_detected(
    seed: int, threshold: int, extra: int, data: st.DataObject
) -> None:
    n = threshold + extra
    shares = split(_secret(seed), threshold=threshold, num_shares=n)
    victim = data.draw(st.integers(min_value=0, max_value=n - 1), label="victim")
    delta = data.draw(st.integers(min_value=1, max_value=PRIME - 1), label="delta")
    tampered = list(shares)
    old = tampered[victim]
    tampered[victim] = Share(old.index, (old.value + delta) % PRIME)
    with pytest.raises(ReconstructionError):
        combine(tampered, threshold=threshold)


@given(seed=SEEDS, threshold=st.integers(min_value=2, max_value=5))
def test_mixing_shares_of_two_secrets_is_detected(seed: int, threshold: int) -> None:
    a = split(_secret(seed), threshold=threshold, num_shares=threshold + 1)
    b = split(_secret(seed + 1), threshold=threshold, num_shares=threshold + 1)
    with pytest.raises(ReconstructionError):
        combine(a[:-1] + b[-1:], threshold=threshold)


def test_wrong_threshold_detected_with_redundancy() -> None:
    shares = split(bytes(range(32)), threshold=4, num_shares=6)
    # Claiming threshold 3 with 6 shares: a degree-3 polynomial is not degree 2.
    with pytest.raises(ReconstructionError):
        combine(shares, threshold=3)


def test_oversized_result_raises() -> None:
    # Two points on f(x) = 2**300 + x: the constant term does not fit in 32 bytes.
    big = 2**300
    with pytest.raises(ReconstructionError, match="does not fit"):
        combine([Share(1, big + 1), Share(2, big + 2)], threshold=2)


def test_duplicate_indices_refused_with_own_message() -> None:
    shares = split(bytes(32), threshold=2, num_shares=3)
    with pytest.raises(ParameterError, match="distinct indices"):
        combine([shares[0], shares[0], shares[1]], threshold=2)


@given(seed=SEEDS)
def test_share_bytes_round_trip(seed: int) -> None:
    rng = random.Random(seed)
    share = Share(rng.randrange(1, PRIME), rng.randrange(0, PRIME))
    raw = share.to_bytes()
    assert len(raw) == SHARE_SIZE
    assert Share.from_bytes(raw) == share
    assert Share.from_bytes(bytearray(raw)) == share


@pytest.mark.parametrize(
    ("index", "value"),
    [(0, 1), (PRIME, 1), (1, PRIME), (2**528 - 1, 0), (1, 2**528 - 1)],
)
def test_share_from_bytes_rejects_out_of_range(index: int, value: int) -> None:
    raw = index.to_bytes(FIELD_BYTES, "big") + value.to_bytes(FIELD_BYTES, "big")
    with pytest.raises(ParameterError):
        Share.from_bytes(raw)


@pytest.mark.parametrize("size", [0, SHARE_SIZE - 1, SHARE_SIZE + 1])
def test_share_from_bytes_rejects_wrong_length(size: int) -> None:
    with pytest.raises(ParameterError, match="length"):
        Share.from_bytes(bytes(size))


def test_share_from_bytes_rejects_wrong_type() -> None:
    with pytest.raises(ParameterTypeError):
        Share.from_bytes("00" * SHARE_SIZE)  # type: ignore[arg-type]


def test_share_repr_and_errors_hide_value() -> None:
    secret_value = 123456789123456789
    share = Share(7, secret_value)
    assert str(secret_value) not in repr(share)
    assert "7" in repr(share)
    with pytest.raises(ParameterError) as info:
        Share(1, PRIME + secret_value)
    assert str(PRIME + secret_value) not in str(info.value)


@pytest.mark.parametrize(
    ("index", "value", "error"),
    [
        (0, 1, ParameterError),
        (PRIME, 1, ParameterError),
        (1, -1, ParameterError),
        (True, 1, ParameterTypeError),
        (1.0, 1, ParameterTypeError),
        (1, "1", ParameterTypeError),
    ],
)
def test_share_validation(index: object, value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        Share(index, value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"threshold": 1, "num_shares": 3}, ParameterError, "threshold"),
        ({"threshold": 0, "num_shares": 3}, ParameterError, "threshold"),
        ({"threshold": 4, "num_shares": 3}, ParameterError, "threshold"),
        ({"threshold": 2, "num_shares": 1}, ParameterError, "num_shares"),
        ({"threshold": 2.0, "num_shares": 3}, ParameterTypeError, "threshold"),
        ({"threshold": 2, "num_shares": 3, "indices": [1, 2]}, ParameterError, "indices"),
        ({"threshold": 2, "num_shares": 3, "indices": [1, 2, 2]}, ParameterError, "indices"),
        ({"threshold": 2, "num_shares": 3, "indices": [0, 1, 2]}, ParameterError, "indices"),
        ({"threshold": 2, "num_shares": 3, "indices": [1, 2, PRIME]}, ParameterError, "indices"),
        ({"threshold": 2, "num_shares": 3, "indices": [1, 2, "3"]}, ParameterTypeError, "indices"),
        ({"threshold": 2, "num_shares": 3, "indices": {1, 2, 3}}, ParameterTypeError, "indices"),
    ],
)
def test_split_validation(kwargs: dict[str, object], error: type[Exception], name: str) -> None:
    with pytest.raises(error) as info:
        split(bytes(32), **kwargs)  # type: ignore[arg-type]
    assert getattr(info.value, "parameter", None) == name


@pytest.mark.parametrize("secret", [bytes(31), bytes(33), b""])
def test_split_rejects_wrong_secret_length(secret: bytes) -> None:
    with pytest.raises(ParameterError, match="secret"):
        split(secret, threshold=2, num_shares=3)


def test_split_rejects_wrong_secret_type() -> None:
    with pytest.raises(ParameterTypeError):
        split("x" * 32, threshold=2, num_shares=3)  # type: ignore[arg-type]


def test_combine_validation() -> None:
    shares = split(bytes(32), threshold=2, num_shares=3)
    with pytest.raises(ParameterError, match="threshold"):
        combine(shares, threshold=1)
    with pytest.raises(ParameterTypeError):
        combine([*shares[:2], b"x"], threshold=2)  # type: ignore[list-item]
    with pytest.raises(ParameterTypeError):
        combine(iter(shares), threshold=2)  # type: ignore[arg-type]


def test_split_is_randomized() -> None:
    a = split(bytes(32), threshold=3, num_shares=4)
    b = split(bytes(32), threshold=3, num_shares=4)
    # Equal share values would mean the coefficients were not drawn afresh
    # (false-failure probability about 4 / PRIME).
    assert [s.value for s in a] != [s.value for s in b]


@given(seed=SEEDS, threshold=st.integers(min_value=2, max_value=6))
def test_tampering_detected_with_huge_indices(seed: int, threshold: int) -> None:
    rng = random.Random(seed)
    n = threshold + 2
    indices = rng.sample(range(PRIME - 2**20, PRIME), n)
    shares = split(_secret(seed), threshold=threshold, num_shares=n, indices=indices)
    assert combine(shares, threshold=threshold) == _secret(seed)
    victim = rng.randrange(n)
    bad = list(shares)
    bad[victim] = Share(bad[victim].index, (bad[victim].value + 1) % PRIME)
    with pytest.raises(ReconstructionError):
        combine(bad, threshold=threshold)


def test_protocol_sized_combine() -> None:
    secret = bytes(range(32))
    shares = split(secret, threshold=51, num_shares=100)
    assert combine(shares[:90], threshold=51) == secret
    assert combine(shares[49:], threshold=51) == secret
    tampered = list(shares[:90])
    tampered[80] = Share(tampered[80].index, tampered[80].value ^ 1)
    with pytest.raises(ReconstructionError):
        combine(tampered, threshold=51)


@given(
    seed=st.integers(0, 2**32 - 1),
    threshold=st.integers(2, 6),
    groups=st.integers(0, 6),
    big_indices=st.booleans(),
)
def test_combine_many_equals_combine_per_group(
    seed: int, threshold: int, groups: int, big_indices: bool
) -> None:
    rng = random.Random(seed)
    batch, secrets_in = [], []
    for _ in range(groups):
        n = threshold + rng.randrange(4)
        top = shamir.PRIME - 1 if big_indices else 200
        indices = (
            rng.sample(range(1, top), n)
            if not big_indices
            else [rng.randrange(1, top) for _ in range(n)]
        )
        if len(set(indices)) != n:
            continue
        secret = rng.randbytes(32)
        shares = shamir.split(secret, threshold=threshold, num_shares=n, indices=indices)
        rng.shuffle(shares)
        # Some groups repeat an x-set already seen in the batch.
        if batch and rng.random() < 0.3:
            shares = shamir.split(
                secret,
                threshold=threshold,
                num_shares=len(batch[0]),
                indices=[s.index for s in batch[0]],
            )
        batch.append(shares)
        secrets_in.append(secret)
    out = shamir.combine_many(batch, threshold=threshold)
    assert out == [shamir.combine(g, threshold=threshold) for g in batch] == secrets_in


def test_combine_many_names_the_failing_group() -> None:
    good = shamir.split(b"a" * 32, threshold=3, num_shares=5)
    bad = list(shamir.split(b"b" * 32, threshold=3, num_shares=5))
    bad[4] = shamir.Share(bad[4].index, (bad[4].value + 1) % shamir.PRIME)
    with pytest.raises(ReconstructionError, match=r"^groups\[1\]: shares are inconsistent"):
        shamir.combine_many([good, bad, good], threshold=3)
    with pytest.raises(ParameterError, match=r"groups\[2\]"):
        shamir.combine_many([good, good, good[:2]], threshold=3)
    with pytest.raises(ParameterError, match=r"groups\[0\]"):
        shamir.combine_many([[good[0], good[0], good[1]]], threshold=3)
    with pytest.raises(ParameterTypeError, match="'groups'"):
        shamir.combine_many(b"shares", threshold=3)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match=r"groups\[0\]"):
        shamir.combine_many([[b"x"] * 3], threshold=3)  # type: ignore[list-item]
    assert shamir.combine_many([], threshold=3) == []


@pytest.mark.parametrize("top", [7, 1000, 2**20, 2**31 - 1, 2**31, 2**40, PRIME - 1])
def test_zero_denominators_are_the_exact_products(top: int) -> None:
    # The int64 chunked products (indices below 2**31) and the big-int loop
    # (larger indices) both give prod_{m != i} (x_i - x_m) mod PRIME.
    rng = random.Random(top)
    for threshold in (t for t in (2, 3, 5, 37) if t <= top):
        span = max(threshold, min(top, 10**6)) if top < 2**31 else top
        low = max(1, top - span + 1)
        tuples = [
            tuple(sorted(rng.sample(range(low, top + 1), threshold)))
            if span < 10**7
            else tuple(sorted({rng.randrange(low, top + 1) for _ in range(threshold)}))
            for _ in range(300 + threshold)  # more than one block of tuples
        ]
        tuples = [xs for xs in tuples if len(xs) == threshold]
        expected = [
            _product_mod([xi - xm for m, xm in enumerate(xs) if m != i])
            for xs in tuples
            for i, xi in enumerate(xs)
        ]
        assert shamir._zero_denominators(tuples, threshold) == expected


def _product_mod(values: list[int]) -> int:
    # Reduced at every step (the code under test forms the exact product, then
    # reduces): the same residue by another route, without 18,000-bit products.
    out = 1
    for v in values:
        out = out * v % PRIME
    return out
