"""The power of a membership-inference bound: the most ε a perfect attack could show.

Oracle: on perfectly separated scores every bound rule reaches exactly
``largest_possible_epsilon``, and on any scores no bound exceeds it.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfed.audit import BoundSpec, lower_bound_held_out
from privfed.audit.bounds import lower_bound_at_threshold, lower_bound_bonferroni
from privfed.engines.model_card.build import _factory_audit_power


@pytest.mark.parametrize(("n1", "n0"), [(8, 8), (20, 50), (200, 120)])
def test_a_perfect_attack_reaches_the_largest_possible_epsilon(n1: int, n0: int) -> None:
    members = np.linspace(10.0, 11.0, n1)
    nonmembers = np.linspace(0.0, 1.0, n0)
    at = lower_bound_at_threshold(members, nonmembers, 5.0, spec=BoundSpec(1e-5, 0.05))
    assert at.false_positives == 0 and at.false_negatives == 0
    assert at.epsilon_lower_bound == pytest.approx(at.largest_possible_epsilon, rel=1e-12)
    many = lower_bound_bonferroni(members, nonmembers, [2.0, 5.0, 8.0], spec=BoundSpec(1e-5, 0.05))
    assert many.epsilon_lower_bound == pytest.approx(many.largest_possible_epsilon, rel=1e-12)
    held = lower_bound_held_out(members, nonmembers, members, nonmembers, spec=BoundSpec(1e-5))
    assert held.epsilon_lower_bound == pytest.approx(held.largest_possible_epsilon, rel=1e-12)
    # More records, more power.
    bigger = lower_bound_at_threshold(
        np.concatenate([members, members]), np.concatenate([nonmembers, nonmembers]), 5.0,
        spec=BoundSpec(1e-5),
    )
    assert bigger.largest_possible_epsilon > at.largest_possible_epsilon


def test_no_bound_exceeds_the_largest_possible_epsilon() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        n1, n0 = (int(v) for v in rng.integers(4, 80, size=2))
        members = rng.normal(rng.uniform(0, 4), 1.0, n1)
        nonmembers = rng.normal(0.0, 1.0, n0)
        bound = lower_bound_at_threshold(
            members, nonmembers, float(rng.uniform(-1, 4)), spec=BoundSpec(1e-5)
        )
        assert bound.epsilon_lower_bound <= bound.largest_possible_epsilon + 1e-12


def test_the_factory_card_says_when_the_audit_has_too_little_power() -> None:
    summary = {"loss": {"largest_possible_epsilon_lower_bound": 1.7}}
    weak = _factory_audit_power(summary, 10.0)
    assert weak["largest_possible_epsilon_lower_bound"] == 1.7
    assert "too little power" in weak["verdict"]
    strong = _factory_audit_power(summary, 1.0)
    assert "could show" in strong["verdict"]
    assert "no claim" in _factory_audit_power(summary, None)["verdict"]
    assert _factory_audit_power({"loss": {}}, 10.0) is None
