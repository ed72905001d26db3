"""Tests of privfed.audit.metrics: intervals, ROC/AUC, TPR at fixed FPR."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import roc_auc_score

from privfed.audit import (
    AucInterval,
    AucIntervalMethod,
    ConfidenceInterval,
    auc_score,
    auc_with_interval,
    clopper_pearson,
    membership_metrics,
    roc_curve,
    tpr_at_fpr,
)
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

# -- Clopper–Pearson -----------------------------------------------------------------


def test_clopper_pearson_closed_forms() -> None:
    # k = 0: upper end solves (1 − p)^n = α/2; k = n: lower end solves p^n = α/2.
    n = 10
    ci = clopper_pearson(0, n, confidence=0.95)
    assert ci.lower == 0.0
    assert ci.upper == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-10)
    ci = clopper_pearson(n, n, confidence=0.95)
    assert ci.upper == 1.0
    assert ci.lower == pytest.approx(0.025 ** (1 / n), rel=1e-10)
    one_sided = clopper_pearson(0, n, confidence=0.95, sided="upper")
    assert one_sided.upper == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-10)


@pytest.mark.parametrize("n", [5, 40, 200])
def test_clopper_pearson_exact_coverage(n: int) -> None:
    # Exact coverage computed by summing the binomial pmf: never below the nominal level.
    intervals = [clopper_pearson(k, n, confidence=0.9) for k in range(n + 1)]
    for p in np.linspace(0.001, 0.999, 97):
        pmf = stats.binom.pmf(np.arange(n + 1), n, p)
        covered = sum(w for w, ci in zip(pmf, intervals, strict=True) if ci.lower <= p <= ci.upper)
        assert covered >= 0.9 - 1e-9


def test_clopper_pearson_rejects_bad_input() -> None:
    with pytest.raises(ParameterError, match="successes"):
        clopper_pearson(11, 10)
    with pytest.raises(ParameterError, match="trials"):
        clopper_pearson(0, 0)
    with pytest.raises(ParameterError, match="confidence"):
        clopper_pearson(1, 10, confidence=1.0)
    with pytest.raises(ParameterTypeError):
        clopper_pearson(1.5, 10)  # type: ignore[arg-type]


def test_confidence_interval_validates_order() -> None:
    with pytest.raises(ParameterError):
        ConfidenceInterval(0.5, 0.6, 0.7, 0.95, "x")


# -- ROC / AUC ------------------------------------------------------------------------


def test_auc_matches_sklearn_with_ties() -> None:
    rng = np.random.default_rng(0)
    members = rng.integers(0, 20, 300).astype(float)
    nonmembers = rng.integers(0, 18, 250).astype(float)
    labels = np.r_[np.ones(300), np.zeros(250)]
    expected = roc_auc_score(labels, np.r_[members, nonmembers])
    assert auc_score(members, nonmembers) == pytest.approx(expected, abs=1e-12)
    roc = roc_curve(members, nonmembers)
    assert float(np.trapezoid(roc.tpr, roc.fpr)) == pytest.approx(expected, abs=1e-12)


@given(seed=st.integers(0, 2**32 - 1), n1=st.integers(2, 60), n0=st.integers(2, 60))
def test_roc_properties(seed: int, n1: int, n0: int) -> None:
    rng = np.random.default_rng(seed)
    members = rng.normal(0.5, 1.0, n1).round(1)
    nonmembers = rng.normal(0.0, 1.0, n0).round(1)
    roc = roc_curve(members, nonmembers)
    assert roc.fpr[0] == 0.0 and roc.tpr[0] == 0.0
    assert roc.fpr[-1] == 1.0 and roc.tpr[-1] == 1.0
    assert np.all(np.diff(roc.fpr) >= 0) and np.all(np.diff(roc.tpr) >= 0)
    # Swapping the roles mirrors the AUC.
    assert auc_score(members, nonmembers) + auc_score(nonmembers, members) == pytest.approx(1.0)


def test_auc_interval_width_for_random_guessing() -> None:
    # REFERENCE fact: an AUC near 0.5 on 1000 + 1000 records has a ±0.025 95 % interval.
    rng = np.random.default_rng(1)
    ci = auc_with_interval(rng.normal(size=1000), rng.normal(size=1000))
    half = (ci.upper - ci.lower) / 2
    assert 0.0235 < half < 0.0270
    boot = auc_with_interval(
        rng.normal(size=1000),
        rng.normal(size=1000),
        interval=AucInterval(AucIntervalMethod.BOOTSTRAP, num_bootstrap=400, seed=3),
    )
    assert 0.021 < (boot.upper - boot.lower) / 2 < 0.029


def test_bootstrap_is_seeded() -> None:
    rng = np.random.default_rng(2)
    m, n = rng.normal(1, 1, 200), rng.normal(0, 1, 200)
    seeded = AucInterval(AucIntervalMethod.BOOTSTRAP, num_bootstrap=200, seed=7)
    a = auc_with_interval(m, n, interval=seeded)
    b = auc_with_interval(m, n, interval=AucInterval(AucIntervalMethod.BOOTSTRAP, 200, 7))
    assert a == b


def test_auc_interval_checks_its_fields() -> None:
    with pytest.raises(ParameterError, match="method"):
        AucInterval("bootstrap")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="num_bootstrap"):
        AucInterval(AucIntervalMethod.BOOTSTRAP, num_bootstrap=99)
    with pytest.raises(ParameterTypeError, match="num_bootstrap"):
        AucInterval(num_bootstrap=1000.0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="seed"):
        AucInterval(seed=-1)
    assert AucInterval(num_bootstrap=np.int64(200)).num_bootstrap == 200
    with pytest.raises(ParameterTypeError, match="interval"):
        auc_with_interval([0.1, 0.9], [0.2, 0.3], interval=AucIntervalMethod.DELONG)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="interval"):
        membership_metrics([0.1, 0.9], [0.2, 0.3], auc_interval=None)  # type: ignore[arg-type]


def test_delong_coverage() -> None:
    # 300 independent experiments at a true AUC of Φ(1/√2) ≈ 0.760 (N(1,1) vs N(0,1)).
    # Misses ~ Bin(300, 0.05): P[misses > 27] ≈ 1.3e-3, so α ≈ 1.3e-3 for this test;
    # it catches an interval whose real coverage is below ~88 %.
    rng = np.random.default_rng(11)
    true_auc = stats.norm.cdf(1 / math.sqrt(2))
    misses = 0
    for _ in range(300):
        ci = auc_with_interval(rng.normal(1, 1, 150), rng.normal(0, 1, 150))
        misses += not (ci.lower <= true_auc <= ci.upper)
    assert misses <= 27


# -- TPR at FPR -----------------------------------------------------------------------


def test_tpr_at_fpr_brute_force() -> None:
    rng = np.random.default_rng(4)
    members = rng.normal(2, 1, 500)
    nonmembers = rng.normal(0, 1, 4000)
    row = tpr_at_fpr(members, nonmembers, 1e-2)
    assert row.supported
    assert row.achieved_fpr <= 1e-2
    # Best TPR among all thresholds with FPR ≤ 1 %.
    best = max(
        np.mean(members >= t)
        for t in np.r_[members, nonmembers, np.inf]
        if np.mean(nonmembers >= t) <= 1e-2
    )
    assert row.tpr.estimate == pytest.approx(best)
    assert row.tpr.lower <= row.tpr.estimate <= row.tpr.upper


def test_tpr_at_fpr_flags_unsupported() -> None:
    rng = np.random.default_rng(5)
    row = tpr_at_fpr(rng.normal(size=100), rng.normal(size=2999), 1e-3)
    assert not row.supported
    assert "3000" in row.note
    assert tpr_at_fpr(rng.normal(size=100), rng.normal(size=3000), 1e-3).supported


def test_membership_metrics_json_roundtrip() -> None:
    rng = np.random.default_rng(6)
    metrics = membership_metrics(rng.normal(1, 1, 3000), rng.normal(0, 1, 3000))
    document = json.loads(json.dumps(metrics.to_dict(), allow_nan=False))
    assert document["num_members"] == 3000
    assert [row["target_fpr"] for row in document["tpr_at_fpr"]] == [1e-1, 1e-2, 1e-3, 1e-4, 1e-5]
    assert [row["supported"] for row in document["tpr_at_fpr"]] == [True, True, True, False, False]
    assert len(document["roc"]["fpr"]) <= 2000


def test_metrics_reject_bad_scores() -> None:
    with pytest.raises(NonFiniteInputError):
        membership_metrics([0.1, np.nan, 0.2], [0.0, 0.1])
    with pytest.raises(ParameterError, match="1-D"):
        roc_curve(np.zeros((2, 2)), [0.0, 1.0])
    with pytest.raises(ParameterTypeError):
        auc_score("abc", [0.0])  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="fprs"):
        membership_metrics([0.0, 1.0], [0.0, 1.0], fprs=(0.0,))
