"""Tests of privfed.audit.bounds: ε/μ lower bounds and the one-run bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from privfed.audit import (
    HALF_SPLIT,
    BoundSpec,
    HeldOutSplit,
    ThresholdSelection,
    empirical_privacy_lower_bound,
    epsilon_lower_bound_from_rates,
    lower_bound_at_threshold,
    lower_bound_bonferroni,
    lower_bound_held_out,
    lower_bound_random_split,
    mu_lower_bound_from_rates,
    one_run_audit,
    one_run_audit_selected,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)
from privfed.dp import gdp_epsilon
from privfed.errors import ParameterError, ParameterTypeError

# -- one-run auditing (Steinke, Nasr & Jagielski 2023, arXiv:2305.08846) ----------------
# Known answers at 95 % confidence, from REFERENCE.md §3 (two independent computations).


@pytest.mark.parametrize(
    ("m", "r", "v", "delta", "expected"),
    [
        (1000, 100, 90, 0.0, 1.6308),
        (1000, 100, 100, 1e-5, 3.4654),
        (10_000, 1000, 900, 1e-5, 2.0152),
    ],
)
def test_one_run_known_answers(m: int, r: int, v: int, delta: float, expected: float) -> None:
    eps = one_run_epsilon_lower_bound(m, r, v, delta=delta, significance=0.05)
    assert eps == pytest.approx(expected, abs=1e-3)
    # The bound sits where the p-value crosses α, approached from below.
    assert one_run_p_value(m, r, v, epsilon=eps, delta=delta) <= 0.05
    assert one_run_p_value(m, r, v, epsilon=eps + 1e-3, delta=delta) > 0.05


def test_one_run_chance_level_gives_zero() -> None:
    assert one_run_epsilon_lower_bound(1000, 100, 50, delta=0.0) == 0.0
    assert one_run_epsilon_lower_bound(1000, 0, 0, delta=0.0) == 0.0


def test_one_run_monotone_in_correct_guesses() -> None:
    values = [one_run_epsilon_lower_bound(1000, 200, v, delta=1e-6) for v in range(120, 201, 20)]
    assert values == sorted(values)
    assert values[0] > 0


def test_one_run_validity_on_randomized_response() -> None:
    # An ε-DP randomized response per canary: guess right with probability e^ε/(1+e^ε).
    # The bound exceeds ε in at most α = 5 % of runs; with 200 runs, > 20 exceedances has
    # probability ≈ 1.2e-3 (the test's false-failure rate).
    rng = np.random.default_rng(8)
    eps, exceed = 1.0, 0
    q = math.exp(eps) / (1 + math.exp(eps))
    for _ in range(200):
        v = int(rng.binomial(300, q))
        exceed += one_run_epsilon_lower_bound(1000, 300, v, delta=0.0) > eps
    assert exceed <= 20


def test_one_run_rejects_bad_counts() -> None:
    with pytest.raises(ParameterError, match="num_guesses"):
        one_run_epsilon_lower_bound(10, 11, 0, delta=0.0)
    with pytest.raises(ParameterError, match="num_correct"):
        one_run_epsilon_lower_bound(10, 5, 6, delta=0.0)
    with pytest.raises(ParameterError, match="delta"):
        one_run_epsilon_lower_bound(10, 5, 5, delta=1.0)


def test_one_run_audit_perfect_guesses_hit_the_known_answer() -> None:
    included = np.arange(1000) % 2 == 0
    result = one_run_audit(included.astype(float), included, num_guesses=100, spec=BoundSpec(1e-5))
    assert (result.num_correct, result.num_guesses) == (100, 100)
    assert result.epsilon_lower_bound == pytest.approx(3.4654, abs=1e-3)
    assert result.to_dict()["num_canaries"] == 1000


def test_one_run_audit_on_gaussian_canaries() -> None:
    # Each canary's score is its own μ-GDP release: N(μ·included, 1).  For μ = 1 the bound
    # must stay below ε(μ, δ) except with probability α = 5 % per run; over 50 runs,
    # > 7 exceedances has probability ≈ 0.3 % (this test's false-failure rate).  For μ = 4 the
    # same audit must find a clearly positive ε.
    delta = 1e-5
    rng = np.random.default_rng(21)
    exceed = 0
    for _ in range(50):
        included = rng.uniform(size=2000) < 0.5
        scores = rng.normal(1.0 * included, 1.0)
        exceed += one_run_audit(
            scores, included, num_guesses=200, spec=BoundSpec(delta)
        ).epsilon_lower_bound > gdp_epsilon(1.0, delta)
    assert exceed <= 7
    included = rng.uniform(size=2000) < 0.5
    strong = one_run_audit(
        rng.normal(4.0 * included, 1.0), included, num_guesses=200, spec=BoundSpec(delta)
    )
    assert 1.0 < strong.epsilon_lower_bound <= gdp_epsilon(4.0, delta)
    with pytest.raises(ParameterError, match="canary_included"):
        one_run_audit([0.1, 0.2], [1, 0], num_guesses=2, spec=BoundSpec(0.0))


# -- rate formulas --------------------------------------------------------------------


def test_rate_formulas_known_values() -> None:
    assert epsilon_lower_bound_from_rates(0.01, 0.5, delta=0.0) == pytest.approx(math.log(50))
    assert epsilon_lower_bound_from_rates(0.01, 0.5, delta=0.1) == pytest.approx(math.log(40))
    assert epsilon_lower_bound_from_rates(0.5, 0.5, delta=0.0) == 0.0
    # μ-GDP trade-off at μ = 1: FNR = Φ(Φ⁻¹(1 − FPR) − 1) gives μ_lb = 1 exactly.
    fpr = 0.05
    fnr = stats.norm.cdf(stats.norm.isf(fpr) - 1.0)
    assert mu_lower_bound_from_rates(fpr, fnr) == pytest.approx(1.0, abs=1e-9)
    assert mu_lower_bound_from_rates(0.6, 0.6) == 0.0


# -- threshold rules ------------------------------------------------------------------


def _gauss(mu: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(mu, 1, n), rng.normal(0, 1, n)


def test_fixed_threshold_uses_clopper_pearson_upper_bounds() -> None:
    members, nonmembers = _gauss(2.0, 1000, 0)
    bound = lower_bound_at_threshold(members, nonmembers, 1.0, spec=BoundSpec(1e-5, 0.05))
    fp = int(np.sum(nonmembers >= 1.0))
    fn = int(np.sum(members < 1.0))
    assert (bound.false_positives, bound.false_negatives) == (fp, fn)
    assert bound.fpr_upper == pytest.approx(stats.beta.isf(0.025, fp + 1, 1000 - fp))
    assert bound.fnr_upper == pytest.approx(stats.beta.isf(0.025, fn + 1, 1000 - fn))
    assert bound.fpr_upper > fp / 1000 and bound.fnr_upper > fn / 1000
    assert bound.selection is ThresholdSelection.FIXED
    assert 1.5 < bound.mu_lower_bound < 2.0


def test_bonferroni_pays_for_extra_thresholds() -> None:
    members, nonmembers = _gauss(2.0, 1000, 1)
    grid = np.linspace(-1, 3, 9)
    bonf = lower_bound_bonferroni(members, nonmembers, grid, spec=BoundSpec(1e-5), objective="mu")
    fixed = lower_bound_at_threshold(members, nonmembers, bonf.threshold, spec=BoundSpec(1e-5))
    assert bonf.num_thresholds == 9
    assert bonf.mu_lower_bound < fixed.mu_lower_bound


@given(seed=st.integers(0, 2**32 - 1))
def test_bound_never_exceeds_truth_by_much(seed: int) -> None:
    # Sanity on single draws: a held-out bound for N(1,1) vs N(0,1) stays near or below μ = 1
    # (per-draw exceedance ≤ α; 1.3 is far beyond what 2000 samples allow).
    cal_m, cal_n = _gauss(1.0, 1000, seed)
    ev_m, ev_n = _gauss(1.0, 2000, seed + 1)
    bound = lower_bound_held_out(cal_m, cal_n, ev_m, ev_n, spec=BoundSpec(1e-5), objective="mu")
    assert bound.mu_lower_bound < 1.3


@pytest.mark.slow
def test_held_out_bound_validity_rate() -> None:
    # 200 independent held-out audits of a 1-GDP Gaussian test at α = 0.05; exceedances
    # are ≤ Bin(200, 0.05), and P[> 20] ≈ 1.2e-3 (this test's false-failure rate).
    rng = np.random.default_rng(12)
    exceed = 0
    for _ in range(200):
        cal_m, cal_n = rng.normal(1, 1, 500), rng.normal(0, 1, 500)
        ev_m, ev_n = rng.normal(1, 1, 2000), rng.normal(0, 1, 2000)
        bound = lower_bound_held_out(cal_m, cal_n, ev_m, ev_n, spec=BoundSpec(1e-5), objective="mu")
        exceed += bound.mu_lower_bound > 1.0
    assert exceed <= 20


def test_dispatcher_enforces_rule() -> None:
    members, nonmembers = _gauss(1.0, 100, 2)
    with pytest.raises(ParameterError, match="threshold"):
        empirical_privacy_lower_bound(
            members, nonmembers, selection=ThresholdSelection.FIXED, spec=BoundSpec(1e-5)
        )
    with pytest.raises(ParameterError, match="thresholds"):
        empirical_privacy_lower_bound(
            members,
            nonmembers,
            selection=ThresholdSelection.FIXED,
            spec=BoundSpec(1e-5),
            threshold=0.5,
            thresholds=[0.1, 0.2],
        )
    with pytest.raises(ParameterError, match="calibration"):
        empirical_privacy_lower_bound(
            members,
            nonmembers,
            selection=ThresholdSelection.HELD_OUT,
            spec=BoundSpec(1e-5),
            calibration_member_scores=members,
        )
    held = empirical_privacy_lower_bound(
        members,
        nonmembers,
        selection=ThresholdSelection.HELD_OUT,
        spec=BoundSpec(1e-5),
        calibration_member_scores=members[:50],
        calibration_nonmember_scores=nonmembers[:50],
    )
    assert held.selection is ThresholdSelection.HELD_OUT
    assert held.to_dict()["selection"] == "held-out"


def test_bounds_reject_bad_parameters() -> None:
    members, nonmembers = _gauss(1.0, 10, 3)
    with pytest.raises(ParameterError, match="delta"):
        lower_bound_at_threshold(members, nonmembers, 0.0, spec=BoundSpec(1.0))
    with pytest.raises(ParameterError, match="significance"):
        lower_bound_at_threshold(members, nonmembers, 0.0, spec=BoundSpec(0.0, 0.0))
    with pytest.raises(ParameterError, match="threshold"):
        lower_bound_at_threshold(members, nonmembers, float("nan"), spec=BoundSpec(0.0))
    with pytest.raises(ParameterError, match="objective"):
        lower_bound_bonferroni(members, nonmembers, [0.0], spec=BoundSpec(0.0), objective="auc")  # type: ignore[arg-type]


def test_bound_spec_and_held_out_split_check_their_fields() -> None:
    spec = BoundSpec(np.float64(1e-5))
    assert (spec.delta, spec.significance) == (1e-5, 0.05) and type(spec.delta) is float
    assert (HALF_SPLIT.calibration_fraction, HALF_SPLIT.seed) == (0.5, 0)
    for bad_delta in (1.0, -0.1, float("nan")):
        with pytest.raises(ParameterError, match="delta"):
            BoundSpec(bad_delta)
    for bad_alpha in (0.0, 1.0):
        with pytest.raises(ParameterError, match="significance"):
            BoundSpec(1e-5, bad_alpha)
    with pytest.raises(ParameterTypeError, match="delta"):
        BoundSpec("1e-5")  # type: ignore[arg-type]
    for bad_fraction in (0.0, 1.0, 1.5):
        with pytest.raises(ParameterError, match="calibration_fraction"):
            HeldOutSplit(bad_fraction)
    with pytest.raises(ParameterError, match="seed"):
        HeldOutSplit(seed=-1)
    with pytest.raises(ParameterTypeError, match="seed"):
        HeldOutSplit(seed=1.5)  # type: ignore[arg-type]
    members, nonmembers = _gauss(1.0, 10, 3)
    with pytest.raises(ParameterTypeError, match="spec"):
        lower_bound_at_threshold(members, nonmembers, 0.0, spec=1e-5)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="spec"):
        one_run_audit(members, members > 1.0, num_guesses=2, spec=(1e-5, 0.05))  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="split"):
        lower_bound_random_split(members, nonmembers, spec=spec, split=0.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="split"):
        one_run_audit_selected(members, members > 1.0, spec=spec, split=(0.5, 0))  # type: ignore[arg-type]
