"""Tests of privfed.secagg.primitives.fixedpoint."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import (
    NonFiniteInputError,
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)
from privfed.secagg.primitives.fixedpoint import FixedPointConfig, ring_add, ring_sub, ring_sum

SEEDS = st.integers(min_value=0, max_value=2**64 - 1)
RING_BITS = st.integers(min_value=2, max_value=64)
MAX_ABS = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


def _would_wrap(f: int, a: float, n: int, k: int) -> bool:
    """The documented refusal rule, recomputed with exact rationals."""
    bound = math.ceil(Fraction(a) * 2**f)
    return n * (bound + 1) >= 2 ** (k - 1)


@given(
    f=st.integers(min_value=0, max_value=80),
    a=MAX_ABS,
    n=st.integers(min_value=1, max_value=2**40),
    k=RING_BITS,
)
def test_refused_exactly_when_a_total_could_wrap(f: int, a: float, n: int, k: int) -> None:
    if _would_wrap(f, a, n, k):
        with pytest.raises(RingOverflowError) as info:
            FixedPointConfig(f, a, n, ring_bits=k)
        assert "max_summands" in str(info.value)
        assert "fractional_bits" in str(info.value)
    else:
        cfg = FixedPointConfig(f, a, n, ring_bits=k)
        assert cfg.max_summands * (cfg.max_encoded_magnitude + 1) < cfg.modulus // 2


@given(
    a=MAX_ABS,
    n=st.integers(min_value=1, max_value=2**30),
    k=st.integers(min_value=24, max_value=64),
    headroom=st.integers(min_value=0, max_value=8),
)
def test_for_bounds_picks_the_largest_safe_f(a: float, n: int, k: int, headroom: int) -> None:
    def fits(f: int) -> bool:
        return n * (math.ceil(Fraction(a) * 2**f) + 1) * 2**headroom < 2 ** (k - 1)

    if not fits(0):
        with pytest.raises(RingOverflowError):
            FixedPointConfig.for_bounds(a, n, ring_bits=k, headroom_bits=headroom)
        return
    cfg = FixedPointConfig.for_bounds(a, n, ring_bits=k, headroom_bits=headroom)
    assert (cfg.max_abs_value, cfg.max_summands, cfg.ring_bits) == (a, n, k)
    assert fits(cfg.fractional_bits)
    assert not fits(cfg.fractional_bits + 1)


def test_for_bounds_refuses_impossible_bounds() -> None:
    with pytest.raises(RingOverflowError):
        FixedPointConfig.for_bounds(1e30, 10)
    with pytest.raises(RingOverflowError):
        FixedPointConfig.for_bounds(1.0, 2**10, ring_bits=8)


def _config(rng: random.Random) -> FixedPointConfig:
    a = rng.choice([1.0, 3.0, 0.1, 1e3, rng.uniform(1e-3, 1e4)])
    n = rng.choice([1, 2, 10, 1000, rng.randint(1, 10**6)])
    k = rng.choice([64, 64, 48, 32, rng.randint(24, 64)])
    headroom = rng.randint(0, 3)
    try:
        return FixedPointConfig.for_bounds(a, n, ring_bits=k, headroom_bits=headroom)
    except RingOverflowError:  # e.g. a = 1e3, n = 10**6 in 32 bits: use the full ring
        return FixedPointConfig.for_bounds(a, n)


@given(seed=SEEDS)
def test_encode_decode_error_at_most_half_resolution(seed: int) -> None:
    rng = random.Random(seed)
    cfg = _config(rng)
    a = cfg.max_abs_value
    values = np.array([rng.uniform(-a, a) for _ in range(50)] + [a, -a, 0.0, a / 3])
    ring = cfg.encode(values)
    assert ring.dtype == np.uint64
    assert ring.shape == values.shape
    assert int(ring.max()) < cfg.modulus
    back = cfg.decode(ring)
    assert back.dtype == np.float64
    # Exact check with rationals: |q * 2**-f - v| <= 2**-f / 2.
    for v, q in zip(values.tolist(), cfg.from_ring(ring).tolist(), strict=True):
        assert abs(Fraction(q, 2**cfg.fractional_bits) - Fraction(v)) <= Fraction(
            1, 2 ** (cfg.fractional_bits + 1)
        )
    assert np.all(np.abs(back - values) <= cfg.resolution / 2)


@given(seed=SEEDS)
def test_sums_decode_within_bound_and_never_wrap(seed: int) -> None:
    rng = random.Random(seed)
    a = rng.choice([1.0, 2.5, rng.uniform(0.01, 100.0)])
    n = rng.randint(1, 60)
    k = rng.choice([64, 40, 20, rng.randint(12, 64)])
    try:
        cfg = FixedPointConfig.for_bounds(a, n, ring_bits=k)
    except RingOverflowError:
        # Refused only when even f = 0 could wrap (e.g. a = 39.7, n = 58 in 12 bits).
        assert n * (math.ceil(a) + 1) >= 2 ** (k - 1)
        return
    # Adversarial summands: mostly at +-max_abs_value, where wrapping would start.
    sign = rng.choice([-1.0, 1.0])
    rows = [
        [sign * a if rng.random() < 0.7 else rng.uniform(-a, a) for _ in range(5)] for _ in range(n)
    ]
    encoded = [cfg.encode(r) for r in rows]
    total = ring_sum(encoded, ring_bits=k)
    exact_ints = [
        sum(int(q) for q in col)
        for col in zip(*(cfg.from_ring(e).tolist() for e in encoded), strict=True)
    ]
    # No wrap: the signed reading of the ring total is the exact integer total.
    assert cfg.from_ring(total).tolist() == exact_ints
    real_sums = [math.fsum(col) for col in zip(*rows, strict=True)]
    decoded = cfg.decode(total)
    for got, want, q in zip(decoded.tolist(), real_sums, exact_ints, strict=True):
        slack = n * cfg.resolution / 2 + abs(q) * cfg.resolution * 2.0**-52
        assert abs(got - want) <= slack


def test_extreme_totals_at_the_limit() -> None:
    for k in (8, 16, 33, 64):
        cfg = FixedPointConfig.for_bounds(1.0, 5, ring_bits=k)
        for sign in (1.0, -1.0):
            enc = cfg.encode(np.full(3, sign))
            total = ring_sum([enc] * 5, ring_bits=k)
            assert cfg.decode(total).tolist() == [5 * sign] * 3


def test_partition_invariance() -> None:
    rng = random.Random(7)
    cfg = FixedPointConfig.for_bounds(1.0, 1000)
    records = np.array([[rng.uniform(-1, 1) for _ in range(4)] for _ in range(1000)])
    encoded = cfg.encode(records)
    whole = ring_sum(encoded)
    cut = sorted(rng.sample(range(1, 1000), 9))
    parts = [ring_sum(chunk) for chunk in np.split(encoded, cut)]
    assert np.array_equal(ring_sum(parts), whole)


@given(k=st.integers(min_value=3, max_value=64), seed=SEEDS)
def test_to_ring_from_ring_round_trip(k: int, seed: int) -> None:
    # (k = 2 admits no configuration: 1 * (ceil(a) + 1) >= 2 for every a > 0.)
    rng = random.Random(seed)
    cfg = FixedPointConfig(0, 0.5, 1, ring_bits=k)
    half = 2 ** (k - 1)
    ints = [-half, half - 1, 0, -1, 1] + [rng.randrange(-half, half) for _ in range(20)]
    ring = cfg.to_ring(np.array(ints, dtype=np.int64))
    assert ring.tolist() == [i % 2**k for i in ints]
    assert cfg.from_ring(ring).tolist() == ints
    assert cfg.from_ring(ring).dtype == np.int64


@given(k=RING_BITS, seed=SEEDS)
def test_ring_arithmetic_matches_python_ints(k: int, seed: int) -> None:
    rng = random.Random(seed)
    m = 2**k
    xs = [[rng.randrange(m) for _ in range(6)] for _ in range(rng.randint(1, 5))]
    xs[0][0] = m - 1
    arrays = [np.array(x, dtype=np.uint64) for x in xs]
    assert ring_sum(arrays, ring_bits=k).tolist() == [sum(c) % m for c in zip(*xs, strict=True)]
    assert (
        ring_sum(np.stack(arrays), ring_bits=k).tolist() == ring_sum(arrays, ring_bits=k).tolist()
    )
    a, b = arrays[0], arrays[-1]
    assert ring_add(a, b, ring_bits=k).tolist() == [
        (x + y) % m for x, y in zip(xs[0], xs[-1], strict=True)
    ]
    assert ring_sub(a, b, ring_bits=k).tolist() == [
        (x - y) % m for x, y in zip(xs[0], xs[-1], strict=True)
    ]
    # Inputs are not modified.
    assert a.tolist() == xs[0]


def test_scalars_and_zero_dim() -> None:
    cfg = FixedPointConfig(4, 2.0, 3, ring_bits=16)
    assert cfg.encode(1.5).shape == ()
    assert int(cfg.encode(-1.0)) == 2**16 - 16
    assert float(cfg.decode(cfg.encode(-1.0))) == -1.0
    assert int(ring_sub(np.uint64(0), np.uint64(1), ring_bits=16)) == 2**16 - 1
    assert cfg.encode([]).shape == (0,)
    assert cfg.resolution == 1 / 16
    assert cfg.modulus == 2**16


def test_encode_refuses_non_finite_and_out_of_range() -> None:
    cfg = FixedPointConfig(10, 1.0, 4)
    with pytest.raises(NonFiniteInputError) as info:
        cfg.encode([0.5, float("nan"), float("inf")])
    assert "2 non-finite" in str(info.value)
    secret_value = 1.2345678
    with pytest.raises(ParameterError) as exc:
        cfg.encode([0.0, secret_value])
    assert "1.2345678" not in str(exc.value)
    assert exc.value.parameter == "values"
    with pytest.raises(ParameterTypeError):
        cfg.encode(["a"])
    with pytest.raises(ParameterTypeError):
        cfg.encode([1 + 2j])
    assert cfg.encode(np.array([1, -1], dtype=np.int32)).tolist() == [1024, 2**64 - 1024]


def test_ring_inputs_validated() -> None:
    cfg = FixedPointConfig(0, 0.5, 1, ring_bits=8)
    with pytest.raises(ParameterError):
        cfg.from_ring([256])
    with pytest.raises(ParameterError):
        cfg.from_ring([-1])
    with pytest.raises(ParameterTypeError):
        cfg.from_ring([1.0])
    with pytest.raises(ParameterError):
        cfg.to_ring([128])
    with pytest.raises(ParameterError):
        cfg.to_ring([-129])
    with pytest.raises(ParameterTypeError):
        cfg.to_ring([0.5])
    with pytest.raises(ParameterError):
        ring_add([1, 2], [1], ring_bits=8)
    with pytest.raises(ParameterError):
        ring_add([256], [1], ring_bits=8)
    with pytest.raises(ParameterError):
        ring_sum([], ring_bits=8)
    with pytest.raises(ParameterError):
        ring_sum([[1, 2], [1]], ring_bits=8)
    with pytest.raises(ParameterError):
        ring_sum([[1]], ring_bits=1)
    with pytest.raises(ParameterTypeError):
        ring_sum(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        ((-1, 1.0, 1), ParameterError, "fractional_bits"),
        ((1.0, 1.0, 1), ParameterTypeError, "fractional_bits"),
        ((1, 0.0, 1), ParameterError, "max_abs_value"),
        ((1, -1.0, 1), ParameterError, "max_abs_value"),
        ((1, float("nan"), 1), ParameterError, "max_abs_value"),
        ((1, float("inf"), 1), ParameterError, "max_abs_value"),
        ((1, "1", 1), ParameterTypeError, "max_abs_value"),
        ((1, True, 1), ParameterTypeError, "max_abs_value"),
        ((1, 1.0, 0), ParameterError, "max_summands"),
        ((1, 1.0, 1, 1), ParameterError, "ring_bits"),
        ((1, 1.0, 1, 65), ParameterError, "ring_bits"),
    ],
)
def test_config_validation(args: tuple[object, ...], error: type[Exception], name: str) -> None:
    with pytest.raises(error) as info:
        FixedPointConfig(*args)  # type: ignore[arg-type]
    assert info.value.parameter == name  # type: ignore[attr-defined]


def test_config_is_frozen_and_normalised() -> None:
    cfg = FixedPointConfig(3, 2, 5)
    assert isinstance(cfg.max_abs_value, float)
    with pytest.raises(AttributeError):
        cfg.fractional_bits = 4  # type: ignore[misc]
    with pytest.raises(ParameterError):
        FixedPointConfig.for_bounds(1.0, 1, ring_bits=8, headroom_bits=7)
