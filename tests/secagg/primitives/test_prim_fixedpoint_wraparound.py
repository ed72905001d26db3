"""``check_no_wraparound``: the construction-time check of ``FixedPointConfig``, on its own.

Deterministic (fixed seed), so no false failures.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from privfed.errors import ParameterError, ParameterTypeError, RingOverflowError
from privfed.secagg.primitives import check_no_wraparound
from privfed.secagg.primitives.fixedpoint import FixedPointConfig


def _outcome(fn: Callable[..., object], *args: object) -> tuple[str, str]:
    try:
        fn(*args)
    except (ParameterError, ParameterTypeError) as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


def test_agrees_with_fixed_point_config_on_every_case() -> None:
    rng = random.Random(20240611)
    cases: list[tuple[object, ...]] = [
        (0, 1.0, 1, 64),
        (60, 1.0, 2**3, 64),
        (61, 1.0, 1, 64),  # 2**61 + 1 < 2**63: fits
        (63, 1.0, 1, 64),  # 2**63 + 1 >= 2**63: wraps
        (1023, 1.0, 1, 64),
        (1024, 1.0, 1, 64),
        (-1, 1.0, 1, 64),
        (True, 1.0, 1, 64),
        (8, 0.0, 1, 64),
        (8, math.inf, 1, 64),
        (8, "1.0", 1, 64),
        (8, np.float32(0.5), 1, 64),
        (8, 1.0, 0, 64),
        (8, 1.0, 1, 65),
        (8, 1.0, 1, 1),
        (8, 1.0, 1.0, 64),
    ]
    for _ in range(300):
        cases.append(
            (
                rng.randint(0, 70),
                rng.choice([1.0, 3.5, 1e-3, 1e6, rng.uniform(1e-6, 1e6)]),
                rng.choice([1, 10, 2**20, rng.randint(1, 2**40)]),
                rng.randint(2, 64),
            )
        )
    refused = accepted = 0
    for case in cases:
        expected = _outcome(FixedPointConfig, *case)
        got = _outcome(check_no_wraparound, *case)
        assert got == expected, case
        if got[0] == "RingOverflowError":
            refused += 1
        elif got[0] == "ok":
            accepted += 1
    assert refused > 10 and accepted > 10  # both branches were exercised


def test_refusal_rule_and_return_value() -> None:
    # max_summands * (ceil(a * 2**f) + 1) < 2**(k - 1), checked exactly.
    a, n, k = 0.75, 1000, 32
    for f in range(0, 40):
        fits = n * (math.ceil(Fraction(a) * 2**f) + 1) < 2 ** (k - 1)
        if fits:
            assert check_no_wraparound(f, a, n, k) == a
        else:
            with pytest.raises(RingOverflowError, match="wrap around the ring"):
                check_no_wraparound(f, a, n, k)
    assert type(check_no_wraparound(4, 3, 2)) is float
