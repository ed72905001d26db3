"""The batched Shamir sharing ``shamir.split_many`` equals ``shamir.split``, share for share."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfed.errors import ParameterError
from privfed.secagg.primitives import shamir
from privfed.secagg.primitives.shamir import _random_coefficients, split_many


class _Draws:
    """A deterministic stand-in for the CSPRNG: coefficients from a seeded list."""

    def __init__(self, seed: int, count: int) -> None:
        rng = random.Random(seed)
        self.values = [rng.randrange(shamir.PRIME) for _ in range(count)]
        self._next: Iterator[int] = iter(self.values)

    def randbelow(self, bound: int) -> int:
        assert bound == shamir.PRIME
        return next(self._next)

    def bulk(self, count: int) -> list[int]:
        return [next(self._next) for _ in range(count)]


@settings(max_examples=30, deadline=None)
@given(
    secrets_=st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=4),
    holders=st.lists(st.integers(1, 2**32 - 1), min_size=2, max_size=12, unique=True),
    data=st.data(),
    seed=st.integers(0, 2**32 - 1),
)
def test_packed_sharing_equals_split_for_the_same_coefficients(
    secrets_: list[bytes], holders: list[int], data: st.DataObject, seed: int
) -> None:
    threshold = data.draw(st.integers(2, len(holders)))
    count = (threshold - 1) * len(secrets_)
    ours = _Draws(seed, count)
    theirs = _Draws(seed, count)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shamir, "_random_coefficients", ours.bulk)
        got = split_many(secrets_, threshold=threshold, holders=holders)
    # shamir.split draws the threshold - 1 coefficients of each secret in turn,
    # from secrets.randbelow: feed it the very same sequence.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shamir.secrets, "randbelow", theirs.randbelow)
        expected = [
            [
                s.to_bytes()
                for s in shamir.split(
                    v, threshold=threshold, num_shares=len(holders), indices=holders
                )
            ]
            for v in secrets_
        ]
    assert got == expected


def test_packed_sharing_reconstructs_and_any_threshold_subset_works() -> None:
    values = [bytes([i]) * 32 for i in (1, 2, 255)] + [bytes(32), b"\xff" * 32]
    holders = list(range(1, 101))
    shares = split_many(values, threshold=51, holders=holders)
    rng = random.Random(0)
    for value, serialized in zip(values, shares, strict=True):
        parsed = [shamir.Share.from_bytes(b) for b in serialized]
        assert [p.index for p in parsed] == holders
        assert shamir.combine(parsed, threshold=51) == value  # all 100: consistency-checked
        assert shamir.combine(rng.sample(parsed, 51), threshold=51) == value
    # Independent polynomials: the same secret twice gives different shares.
    twice = split_many([values[0], values[0]], threshold=51, holders=holders)
    assert twice[0] != twice[1]


def test_wide_lanes_fall_back_to_split_and_still_reconstruct() -> None:
    # Ids near 2**32 and a high threshold make a lane wider than the limit.
    holders = [2**32 - 1 - i for i in range(120)]
    values = [b"\x01" * 32, b"\x02" * 32]
    with pytest.MonkeyPatch.context() as patch:
        calls: list[int] = []
        original = shamir.split

        def spy(*args: object, **kwargs: object) -> list[shamir.Share]:
            calls.append(1)
            return original(*args, **kwargs)  # type: ignore[arg-type]

        patch.setattr(shamir, "split", spy)
        shares = split_many(values, threshold=118, holders=holders)
    assert len(calls) == 2
    for value, serialized in zip(values, shares, strict=True):
        parsed = [shamir.Share.from_bytes(b) for b in serialized]
        assert shamir.combine(parsed, threshold=118) == value


def test_random_coefficients_are_below_the_prime_and_redraw_the_one_excluded_value() -> None:
    drawn = _random_coefficients(500)
    assert len(drawn) == 500 and all(0 <= c < shamir.PRIME for c in drawn)
    assert len(set(drawn)) == 500  # a collision has probability < 2**-500
    # All-ones bytes read as 2**521 - 1 = PRIME, the one value outside the field.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shamir.secrets, "token_bytes", lambda n: b"\xff" * n)
        patch.setattr(shamir.secrets, "randbelow", lambda bound: bound - 2)
        assert _random_coefficients(3) == [shamir.PRIME - 2] * 3


def test_random_coefficients_use_every_bit_position() -> None:
    # Each of the 521 bits is set in about half of 400 draws; a bit never or
    # always set (a wrong shift or byte count) has probability 2 * 2**-400 per
    # bit of happening by chance, so this fails falsely with probability
    # below 521 * 2**-399.
    drawn = _random_coefficients(400)
    ored = 0
    anded = shamir.PRIME
    for c in drawn:
        ored |= c
        anded &= c
    assert ored == shamir.PRIME  # every bit seen set (PRIME is 521 ones)
    assert anded == 0  # every bit seen clear


def test_arguments_off_the_domain_get_split_s_typed_errors() -> None:
    with pytest.raises(ParameterError, match="'secret'"):
        split_many([bytes(31)], threshold=2, holders=[1, 2])
    with pytest.raises(ParameterError, match="'threshold'"):
        split_many([bytes(32)], threshold=3, holders=[1, 2])
    with pytest.raises(ParameterError, match="'indices'"):
        split_many([bytes(32)], threshold=2, holders=[1, 1])
    with pytest.raises(ParameterError, match="'indices'"):
        split_many([bytes(32)], threshold=2, holders=[0, 1])
