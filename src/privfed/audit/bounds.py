"""Empirical privacy lower bounds from membership-inference outcomes (pure).

An attack that separates members from non-members better than an (ε, δ)-DP
mechanism allows is proof that the mechanism is not (ε, δ)-DP.  These
functions turn attack outcomes into lower bounds on ε (and on the GDP
parameter μ) that hold **with stated confidence** 1 − ``significance``.

Three things rivals get wrong and this module enforces:

* **Confidence.**  FPR and FNR enter as exact one-sided Clopper–Pearson upper
  bounds, each at level α/2 (union bound), so both hold at once with
  probability ≥ 1 − α, and then so does the bound.
* **δ.**  The (ε, δ) hypothesis-testing region is used, not the pure-ε one:
  every (ε, δ)-DP test satisfies FPR + e^ε·FNR ≥ 1 − δ and
  FNR + e^ε·FPR ≥ 1 − δ (Kairouz et al. 2015, arXiv:1311.0776), hence
  ε ≥ max(ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR), 0).
* **Threshold choice.**  A threshold picked as the best one *on the data being
  evaluated* inflates the bound.  The :class:`ThresholdSelection` rule must be
  stated: a threshold fixed in advance, the best of k pre-declared thresholds
  with a Bonferroni correction (α/k each), or a threshold chosen on a held-out
  calibration split and evaluated on a disjoint split.

The GDP bound (Nasr et al. 2023, arXiv:2302.07956, §4): a μ-GDP mechanism's
trade-off curve is FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ), hence
μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR).  It is exact for a single Gaussian release, so
μ_lb can be compared with Δ/σ directly.

The one-run bound (Steinke, Nasr & Jagielski 2023, arXiv:2305.08846, §3 and
Algorithm 2) audits a single training run with many canaries.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import check_instance, check_int, check_probability, check_seed, check_vector
from privfed._records import field_dict, set_fields
from privfed.audit._distributions import beta_isf, normal_isf, normal_ppf
from privfed.errors import AuditError, ParameterError, ParameterTypeError

__all__ = [
    "HALF_SPLIT",
    "BoundObjective",
    "BoundSpec",
    "HeldOutSplit",
    "OneRunAudit",
    "PrivacyLowerBound",
    "ThresholdSelection",
    "TrialModel",
    "empirical_privacy_lower_bound",
    "epsilon_lower_bound_from_rates",
    "lower_bound_at_threshold",
    "lower_bound_bonferroni",
    "lower_bound_held_out",
    "mu_lower_bound_from_rates",
    "one_run_audit",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
]

#: What a held-out threshold search maximises.
BoundObjective = Literal["mu", "epsilon"]

#: Most candidate thresholds a held-out search evaluates (quantiles of the calibration scores).
_MAX_CANDIDATES = 4096


class ThresholdSelection(enum.Enum):
    """How the decision threshold of a lower bound was chosen.

    The choice determines what confidence the bound carries; choosing the
    threshold on the evaluation data itself is deliberately not an option.
    """

    #: One threshold fixed before looking at the scores.
    FIXED = "fixed"
    #: The best of k thresholds declared in advance, each tested at α/k.
    BONFERRONI = "bonferroni"
    #: Chosen on a calibration split, evaluated on a disjoint evaluation split.
    HELD_OUT = "held-out"


class TrialModel(enum.Enum):
    """The statistical model under which a bound's 1 − α statement holds.

    Every bound privfed reports carries one, and reports print its
    :attr:`statement`.
    """

    #: Each score comes from its own, independently randomised run (release or
    #: training): members and non-members are independent trials.
    INDEPENDENT = "independent-trials"
    #: Records scored against ONE trained model.  They are not independent trials
    #: (they share the model), so the 1 − α statement is a heuristic, not a guarantee.
    ONE_MODEL = "one-model"
    #: One run with m canaries, each included independently with probability ½
    #: (Steinke, Nasr & Jagielski 2023): valid for one trained model.
    ONE_RUN = "one-run"

    @property
    def statement(self) -> str:
        """One sentence stating what the bound assumes."""
        return _TRIAL_STATEMENTS[self]


_TRIAL_STATEMENTS: dict[TrialModel, str] = {
    TrialModel.INDEPENDENT: (
        "assumes independent trials: every member and non-member score comes from its "
        "own independently randomised run"
    ),
    TrialModel.ONE_MODEL: (
        "CAVEAT: records scored against one trained model are not independent trials; "
        "the stated confidence assumes they are and is not guaranteed (use the one-run "
        "estimator, with canaries included at random, for a valid bound)"
    ),
    TrialModel.ONE_RUN: (
        "valid for one run: m canaries each included independently with probability 1/2, "
        "guesses a function of the scores only (Steinke, Nasr & Jagielski 2023)"
    ),
}


@dataclass(frozen=True)
class BoundSpec:
    """The δ of the claim a lower bound tests and the α it holds at.

    Taken as one argument (``spec=``) by the threshold bounds
    (:func:`lower_bound_at_threshold`, :func:`lower_bound_bonferroni`,
    :func:`lower_bound_held_out`, :func:`empirical_privacy_lower_bound` and the
    split bounds of :mod:`privfed.audit.splits`) and by the one-run audits
    (:func:`one_run_audit`, :func:`privfed.audit.one_run_audit_selected`).
    Checked here, once.

    Attributes:
        delta: δ of the (ε, δ) claim under test, in [0, 1).
        significance: α in (0, 1); the bound holds with probability ≥ 1 − α.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    delta: float
    significance: float = 0.05

    def __post_init__(self) -> None:
        set_fields(
            self,
            delta=check_probability("delta", self.delta, open_low=False, open_high=True),
            significance=check_probability(
                "significance", self.significance, open_low=True, open_high=True
            ),
        )


@dataclass(frozen=True)
class HeldOutSplit:
    """How one set of scores (or of canaries) is split into calibration and evaluation.

    Taken as one argument (``split=``) by :func:`privfed.audit.lower_bound_random_split`,
    :func:`privfed.audit.repeated_split_bounds` and
    :func:`privfed.audit.one_run_audit_selected`.  Checked here, once.

    Attributes:
        calibration_fraction: The share (of each group, rounded down) that
            chooses the threshold or guess rule, in (0, 1); the rest is evaluated.
        seed: Seed of the split's permutation, an int ≥ 0 (the first of the K
            seeds of :func:`privfed.audit.repeated_split_bounds`).

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    calibration_fraction: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        set_fields(
            self,
            calibration_fraction=check_probability(
                "calibration_fraction", self.calibration_fraction, open_low=True, open_high=True
            ),
            seed=check_seed("seed", self.seed),
        )


#: The default split: half of each group calibrates, seed 0.
HALF_SPLIT = HeldOutSplit()


@dataclass(frozen=True)
class PrivacyLowerBound:
    """A lower bound on ε (at a given δ) and on μ, holding with confidence 1 − significance.

    Decision rule: ``score >= threshold`` ⇒ "member".

    Attributes:
        epsilon_lower_bound: ε_lb ≥ 0 for the stated δ.
        mu_lower_bound: μ_lb ≥ 0 (GDP).
        delta: The δ used for ε_lb, in [0, 1).
        significance: α in (0, 1); the bound fails with probability ≤ α.
        threshold: The decision threshold evaluated.
        false_positives: Non-members flagged at the threshold.
        num_nonmembers: Non-members evaluated.
        false_negatives: Members missed at the threshold.
        num_members: Members evaluated.
        fpr_upper: Clopper–Pearson upper bound on the FPR used in the bound.
        fnr_upper: Clopper–Pearson upper bound on the FNR used in the bound.
        selection: How the threshold was chosen.
        num_thresholds: Thresholds the confidence was split over (1 unless Bonferroni).
        trials: The statistical model the confidence statement assumes
            (:class:`TrialModel`; independent trials unless the caller says otherwise).
    """

    epsilon_lower_bound: float
    mu_lower_bound: float
    delta: float
    significance: float
    threshold: float
    false_positives: int
    num_nonmembers: int
    false_negatives: int
    num_members: int
    fpr_upper: float
    fnr_upper: float
    selection: ThresholdSelection
    num_thresholds: int = 1
    trials: TrialModel = TrialModel.INDEPENDENT

    def __post_init__(self) -> None:
        for name in ("epsilon_lower_bound", "mu_lower_bound"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ParameterError(name, "a finite float >= 0", value)
        check_probability("delta", self.delta, open_low=False, open_high=True)
        check_probability("significance", self.significance, open_low=True, open_high=True)
        check_probability("fpr_upper", self.fpr_upper, open_low=False, open_high=False)
        check_probability("fnr_upper", self.fnr_upper, open_low=False, open_high=False)
        check_int("num_nonmembers", self.num_nonmembers, minimum=1, numpy=True)
        check_int("num_members", self.num_members, minimum=1, numpy=True)
        if not 0 <= self.false_positives <= self.num_nonmembers:
            raise ParameterError(
                "false_positives", "an int in [0, num_nonmembers]", self.false_positives
            )
        if not 0 <= self.false_negatives <= self.num_members:
            raise ParameterError(
                "false_negatives", "an int in [0, num_members]", self.false_negatives
            )
        if not isinstance(self.selection, ThresholdSelection):
            raise ParameterError("selection", "a ThresholdSelection", self.selection)
        check_int("num_thresholds", self.num_thresholds, minimum=1, numpy=True)
        if not isinstance(self.trials, TrialModel):
            raise ParameterError("trials", "a TrialModel", self.trials)

    @property
    def confidence(self) -> float:
        """1 − significance."""
        return 1.0 - self.significance

    @property
    def statistical_model(self) -> str:
        """What the bound assumes, in one sentence (see :class:`TrialModel`)."""
        return self.trials.statement

    @property
    def largest_possible_epsilon(self) -> float:
        """The ε lower bound a perfect attack would reach at these counts: the test's power.

        With no false positive and no false negative, each rate's one-sided
        Clopper–Pearson upper bound (at level ``significance / (2 ·
        num_thresholds)``, as the bound spends it) is ``1 − a^(1/n)``; no
        attack on this many members and non-members can show a larger ε.  A
        claimed ε above it cannot be refuted by this test, so a clean result
        then says nothing about the claim.
        """
        a = self.significance / (2.0 * self.num_thresholds)
        fpr = 1.0 - a ** (1.0 / self.num_nonmembers)
        fnr = 1.0 - a ** (1.0 / self.num_members)
        return epsilon_lower_bound_from_rates(fpr, fnr, delta=self.delta)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            **field_dict(self),
            "threshold": self.threshold if math.isfinite(self.threshold) else None,
            "selection": self.selection.value,
            "trials": self.trials.value,
            "statistical_model": self.statistical_model,
        }


def _eps_from_rates(
    fpr: NDArray[np.float64], fnr: NDArray[np.float64], delta: float
) -> NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where((1 - delta - fnr > 0) & (fpr > 0), np.log((1 - delta - fnr) / fpr), 0.0)
        b = np.where((1 - delta - fpr > 0) & (fnr > 0), np.log((1 - delta - fpr) / fnr), 0.0)
    return np.maximum(np.maximum(a, b), 0.0)


def _mu_from_rates(fpr: NDArray[np.float64], fnr: NDArray[np.float64]) -> NDArray[np.float64]:
    # Rates come from Clopper–Pearson upper bounds, which are > 0, so μ is finite.
    mu = np.asarray(normal_isf(fpr) - normal_ppf(fnr), dtype=np.float64)
    return np.maximum(np.nan_to_num(mu, nan=0.0, neginf=0.0), 0.0)


def epsilon_lower_bound_from_rates(fpr_upper: float, fnr_upper: float, *, delta: float) -> float:
    """ε lower bound implied by upper bounds on a test's FPR and FNR.

    Args:
        fpr_upper: Upper bound on the false-positive rate, in (0, 1].
        fnr_upper: Upper bound on the false-negative rate, in (0, 1].
        delta: δ of the (ε, δ) claim being tested, in [0, 1).

    Returns:
        max(ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR), 0).  Larger rate
        bounds give a smaller ε (the direction is conservative).
    """
    fpr = check_probability("fpr_upper", fpr_upper, open_low=True, open_high=False)
    fnr = check_probability("fnr_upper", fnr_upper, open_low=True, open_high=False)
    d = check_probability("delta", delta, open_low=False, open_high=True)
    return float(_eps_from_rates(np.array([fpr]), np.array([fnr]), d)[0])


def mu_lower_bound_from_rates(fpr_upper: float, fnr_upper: float) -> float:
    """GDP lower bound μ_lb = max(Φ⁻¹(1 − FPR) − Φ⁻¹(FNR), 0).

    Args:
        fpr_upper: Upper bound on the FPR, in (0, 1].
        fnr_upper: Upper bound on the FNR, in (0, 1].

    Returns:
        μ_lb ≥ 0 (Nasr et al. 2023, arXiv:2302.07956).
    """
    fpr = check_probability("fpr_upper", fpr_upper, open_low=True, open_high=False)
    fnr = check_probability("fnr_upper", fnr_upper, open_low=True, open_high=False)
    return float(_mu_from_rates(np.array([fpr]), np.array([fnr]))[0])


def _cp_upper(k: NDArray[np.int64], n: int, alpha: float) -> NDArray[np.float64]:
    """Vectorised one-sided Clopper–Pearson upper bound at level 1 − alpha."""
    k = np.asarray(k)
    out = np.ones(k.shape, dtype=np.float64)
    inner = k < n
    out[inner] = beta_isf(alpha, k[inner] + 1, n - k[inner])
    return out


def _counts(
    members_sorted: NDArray[np.float64],
    nonmembers_sorted: NDArray[np.float64],
    thresholds: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """False positives (non-members ≥ t) and false negatives (members < t)."""
    fp = nonmembers_sorted.size - np.searchsorted(nonmembers_sorted, thresholds, side="left")
    fn = np.searchsorted(members_sorted, thresholds, side="left")
    return fp.astype(np.int64), fn.astype(np.int64)


def _check_scores(
    member_scores: ArrayLike, nonmember_scores: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    return (
        check_vector("member_scores", member_scores),
        check_vector("nonmember_scores", nonmember_scores),
    )


def _check_threshold(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ParameterTypeError(name, "a real number", value)
    t = float(value)
    if math.isnan(t):
        raise ParameterError(name, "a real number, not NaN", value)
    return t


def _bound_many(
    members: NDArray[np.float64],
    nonmembers: NDArray[np.float64],
    thresholds: NDArray[np.float64],
    *,
    delta: float,
    per_rate_alpha: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    fp, fn = _counts(np.sort(members), np.sort(nonmembers), thresholds)
    fpr_ub = _cp_upper(fp, nonmembers.size, per_rate_alpha)
    fnr_ub = _cp_upper(fn, members.size, per_rate_alpha)
    return fp, fn, fpr_ub, fnr_ub


def _make(
    members: NDArray[np.float64],
    nonmembers: NDArray[np.float64],
    threshold: float,
    *,
    delta: float,
    significance: float,
    selection: ThresholdSelection,
    num_thresholds: int,
) -> PrivacyLowerBound:
    per_rate = significance / (2.0 * num_thresholds)
    fp, fn, fpr_ub, fnr_ub = _bound_many(
        members, nonmembers, np.array([threshold]), delta=delta, per_rate_alpha=per_rate
    )
    return PrivacyLowerBound(
        epsilon_lower_bound=float(_eps_from_rates(fpr_ub, fnr_ub, delta)[0]),
        mu_lower_bound=float(_mu_from_rates(fpr_ub, fnr_ub)[0]),
        delta=delta,
        significance=significance,
        threshold=threshold,
        false_positives=int(fp[0]),
        num_nonmembers=nonmembers.size,
        false_negatives=int(fn[0]),
        num_members=members.size,
        fpr_upper=float(fpr_ub[0]),
        fnr_upper=float(fnr_ub[0]),
        selection=selection,
        num_thresholds=num_thresholds,
    )


def lower_bound_at_threshold(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    threshold: float,
    *,
    spec: BoundSpec,
) -> PrivacyLowerBound:
    """ε and μ lower bounds at one threshold fixed before the scores were seen.

    Args:
        member_scores: Scores of members (the canary was included), shape (n1,).
        nonmember_scores: Scores of non-members, shape (n0,).
        threshold: ``score >= threshold`` ⇒ member.  Must not depend on these scores.
        spec: δ of the claim under test and α of the bound (:class:`BoundSpec`).

    Returns:
        A :class:`PrivacyLowerBound` with ``selection=FIXED``.
    """
    members, nonmembers = _check_scores(member_scores, nonmember_scores)
    t = _check_threshold("threshold", threshold)
    level = check_instance("spec", spec, BoundSpec)
    return _make(
        members,
        nonmembers,
        t,
        delta=level.delta,
        significance=level.significance,
        selection=ThresholdSelection.FIXED,
        num_thresholds=1,
    )


def _objective_values(
    objective: str,
    fpr_ub: NDArray[np.float64],
    fnr_ub: NDArray[np.float64],
    delta: float,
) -> NDArray[np.float64]:
    if objective == "mu":
        return _mu_from_rates(fpr_ub, fnr_ub)
    return _eps_from_rates(fpr_ub, fnr_ub, delta)


def _check_objective(objective: Any) -> str:
    if objective not in ("mu", "epsilon"):
        raise ParameterError("objective", "'mu' or 'epsilon'", objective)
    return str(objective)


def _make_best(
    searched: tuple[NDArray[np.float64], NDArray[np.float64]],
    candidates: NDArray[np.float64],
    evaluated: tuple[NDArray[np.float64], NDArray[np.float64]],
    spec: BoundSpec,
    objective: str,
    selection: ThresholdSelection,
    num_thresholds: int,
) -> PrivacyLowerBound:
    """Bound the ``evaluated`` (members, non-members) scores at the candidate that
    maximises the objective's lower bound on the ``searched`` scores."""
    delta, significance = spec.delta, spec.significance
    per_rate = significance / (2.0 * num_thresholds)
    _, _, fpr_ub, fnr_ub = _bound_many(*searched, candidates, delta=delta, per_rate_alpha=per_rate)
    best = int(np.argmax(_objective_values(objective, fpr_ub, fnr_ub, delta)))
    return _make(
        *evaluated,
        float(candidates[best]),
        delta=delta,
        significance=significance,
        selection=selection,
        num_thresholds=num_thresholds,
    )


def lower_bound_bonferroni(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    thresholds: ArrayLike,
    *,
    spec: BoundSpec,
    objective: BoundObjective = "epsilon",
) -> PrivacyLowerBound:
    """Best bound over k thresholds declared in advance, each tested at α/k.

    Args:
        member_scores: Shape (n1,).
        nonmember_scores: Shape (n0,).
        thresholds: k ≥ 1 thresholds fixed before the scores were seen.
        spec: δ and the overall α (:class:`BoundSpec`); every rate bound
            uses α/(2k).
        objective: Which bound picks the reported threshold (``"epsilon"`` or
            ``"mu"``); both bounds are reported at that threshold and both hold.

    Returns:
        A :class:`PrivacyLowerBound` with ``selection=BONFERRONI``.
    """
    scores = _check_scores(member_scores, nonmember_scores)
    grid = check_vector("thresholds", thresholds)
    level = check_instance("spec", spec, BoundSpec)
    obj = _check_objective(objective)
    return _make_best(scores, grid, scores, level, obj, ThresholdSelection.BONFERRONI, grid.size)


def _candidate_thresholds(
    members: NDArray[np.float64], nonmembers: NDArray[np.float64]
) -> NDArray[np.float64]:
    values = np.unique(np.concatenate([members, nonmembers]))
    if values.size > _MAX_CANDIDATES:
        values = np.unique(np.quantile(values, np.linspace(0.0, 1.0, _MAX_CANDIDATES)))
    return values


def lower_bound_held_out(
    calibration_member_scores: ArrayLike,
    calibration_nonmember_scores: ArrayLike,
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    *,
    spec: BoundSpec,
    objective: BoundObjective = "epsilon",
) -> PrivacyLowerBound:
    """Choose the threshold on a calibration split, bound on a disjoint split.

    The threshold maximises the objective's *lower bound* on the calibration
    split (so thresholds whose rates are too small to bound well are avoided),
    then the bound is computed afresh on the evaluation split.  The caller
    guarantees the two splits are independent; the full α is then spent on the
    evaluation split.

    Args:
        calibration_member_scores: Members of the calibration split, shape (c1,).
        calibration_nonmember_scores: Non-members of the calibration split, shape (c0,).
        member_scores: Members of the evaluation split, shape (n1,).
        nonmember_scores: Non-members of the evaluation split, shape (n0,).
        spec: δ and α (:class:`BoundSpec`).
        objective: ``"epsilon"`` or ``"mu"``.

    Returns:
        A :class:`PrivacyLowerBound` with ``selection=HELD_OUT``.
    """
    cal_m = check_vector("calibration_member_scores", calibration_member_scores)
    cal_n = check_vector("calibration_nonmember_scores", calibration_nonmember_scores)
    scores = _check_scores(member_scores, nonmember_scores)
    level = check_instance("spec", spec, BoundSpec)
    obj = _check_objective(objective)
    candidates = _candidate_thresholds(cal_m, cal_n)
    return _make_best(
        (cal_m, cal_n), candidates, scores, level, obj, ThresholdSelection.HELD_OUT, 1
    )


def empirical_privacy_lower_bound(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    *,
    selection: ThresholdSelection,
    spec: BoundSpec,
    threshold: float | None = None,
    thresholds: ArrayLike | None = None,
    calibration_member_scores: ArrayLike | None = None,
    calibration_nonmember_scores: ArrayLike | None = None,
    objective: BoundObjective = "epsilon",
) -> PrivacyLowerBound:
    """Dispatch to the bound matching ``selection``; refuses incomplete inputs.

    Args:
        member_scores: Evaluation members, shape (n1,).
        nonmember_scores: Evaluation non-members, shape (n0,).
        selection: The threshold rule.  ``FIXED`` needs ``threshold``;
            ``BONFERRONI`` needs ``thresholds``; ``HELD_OUT`` needs both
            calibration arrays.  Arguments another rule needs are refused.
        spec: δ and α (:class:`BoundSpec`).
        threshold: See ``selection``.
        thresholds: See ``selection``.
        calibration_member_scores: See ``selection``.
        calibration_nonmember_scores: See ``selection``.
        objective: For ``BONFERRONI`` and ``HELD_OUT``: ``"epsilon"`` or ``"mu"``.

    Returns:
        The :class:`PrivacyLowerBound`.

    Raises:
        ParameterError: The arguments do not match the selection rule.
    """
    if not isinstance(selection, ThresholdSelection):
        raise ParameterError("selection", "a ThresholdSelection", selection)
    given = {
        "threshold": threshold is not None,
        "thresholds": thresholds is not None,
        "calibration": calibration_member_scores is not None
        or calibration_nonmember_scores is not None,
    }
    needed = {
        ThresholdSelection.FIXED: "threshold",
        ThresholdSelection.BONFERRONI: "thresholds",
        ThresholdSelection.HELD_OUT: "calibration",
    }[selection]
    for name, present in given.items():
        if name != needed and present:
            raise ParameterError(name, f"omitted when selection is {selection.value}", "given")
    if selection is ThresholdSelection.FIXED:
        if threshold is None:
            raise ParameterError("threshold", "a real number when selection is fixed", None)
        return lower_bound_at_threshold(member_scores, nonmember_scores, threshold, spec=spec)
    if selection is ThresholdSelection.BONFERRONI:
        if thresholds is None:
            raise ParameterError("thresholds", "an array when selection is bonferroni", None)
        return lower_bound_bonferroni(
            member_scores,
            nonmember_scores,
            thresholds,
            spec=spec,
            objective=objective,
        )
    if calibration_member_scores is None or calibration_nonmember_scores is None:
        raise ParameterError(
            "calibration_member_scores/calibration_nonmember_scores",
            "both given when selection is held-out",
            None,
        )
    return lower_bound_held_out(
        calibration_member_scores,
        calibration_nonmember_scores,
        member_scores,
        nonmember_scores,
        spec=spec,
        objective=objective,
    )


# -- one-run auditing ---------------------------------------------------------------


def _one_run_p(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    from scipy import stats  # imported here: loading scipy.stats costs ~1 s

    q = float(_expit(epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))  # P[Bin(r, q) >= v]
    if delta == 0.0 or v == 0:
        return min(tail, 1.0)
    # max over i in 1..v of P[v - i <= Bin < v] / i
    i = np.arange(1, v + 1)
    pmf = stats.binom.pmf(v - i, r, q)
    worst = float(np.max(np.cumsum(pmf) / i))
    return min(tail + 2.0 * m * delta * worst, 1.0)


def _expit(x: float) -> float:
    """e^x / (1 + e^x), stable for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _check_one_run(
    num_canaries: Any, num_guesses: Any, num_correct: Any, delta: Any
) -> tuple[int, int, int, float]:
    m = check_int("num_canaries", num_canaries, minimum=1, numpy=True)
    r = check_int("num_guesses", num_guesses, minimum=0, numpy=True)
    if r > m:
        raise ParameterError("num_guesses", f"an int in [0, num_canaries={m}]", num_guesses)
    v = check_int("num_correct", num_correct, minimum=0, numpy=True)
    if v > r:
        raise ParameterError("num_correct", f"an int in [0, num_guesses={r}]", num_correct)
    d = check_probability("delta", delta, open_low=False, open_high=True)
    return m, r, v, d


def one_run_p_value(
    num_canaries: int, num_guesses: int, num_correct: int, *, epsilon: float, delta: float
) -> float:
    """p-value of ``num_correct`` correct guesses if the mechanism were (ε, δ)-DP.

    Steinke, Nasr & Jagielski 2023 (arXiv:2305.08846), Theorem 5.2 / Algorithm 2:
    with q = e^ε / (1 + e^ε),
    p = P[Bin(r, q) ≥ v] + 2mδ · max_{i=1..v} P[v − i ≤ Bin(r, q) < v] / i.

    Args:
        num_canaries: m ≥ 1 canaries, each included independently with probability ½.
        num_guesses: r in [0, m] canaries on which the auditor guessed in/out.
        num_correct: v in [0, r] correct guesses.
        epsilon: The ε under test, a finite float ≥ 0.
        delta: The δ under test, in [0, 1).

    Returns:
        The p-value in [0, 1].
    """
    m, r, v, d = _check_one_run(num_canaries, num_guesses, num_correct, delta)
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, (int, float))
        or not (math.isfinite(float(epsilon)) and float(epsilon) >= 0)
    ):
        raise ParameterError("epsilon", "a finite float >= 0", epsilon)
    if r == 0:
        return 1.0
    return _one_run_p(m, r, v, float(epsilon), d)


def one_run_epsilon_lower_bound(
    num_canaries: int,
    num_guesses: int,
    num_correct: int,
    *,
    delta: float,
    significance: float = 0.05,
) -> float:
    """ε lower bound from one training run with m randomly included canaries.

    Steinke, Nasr & Jagielski 2023 (arXiv:2305.08846), §3 and Algorithm 2:
    each of m canaries is included independently with probability ½; the
    auditor guesses in/out for r of them and is right v times.  The result is
    the largest ε whose p-value (:func:`one_run_p_value`) stays ≤ α, so an
    (ε, δ)-DP mechanism produces a bound above its true ε with probability ≤ α.

    Known answers (checked in the tests): (1000, 100, 90, δ=0) → 1.6308;
    (1000, 100, 100, δ=1e-5) → 3.4654; (10⁴, 10³, 900, δ=1e-5) → 2.0152.

    Args:
        num_canaries: m ≥ 1.
        num_guesses: r in [0, m].
        num_correct: v in [0, r].
        delta: δ in [0, 1) of the guarantee being audited.
        significance: α in (0, 1).

    Returns:
        ε_lb ≥ 0, found by bisection to an absolute accuracy of 1e-6 and
        rounded down (the conservative side).  0 when the guesses are no better
        than chance at this significance.

    Raises:
        AuditError: No finite ε satisfies the test (cannot happen for δ < 1/(2m)).
    """
    m, r, v, d = _check_one_run(num_canaries, num_guesses, num_correct, delta)
    alpha = check_probability("significance", significance, open_low=True, open_high=True)
    if r == 0 or _one_run_p(m, r, v, 0.0, d) > alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while _one_run_p(m, r, v, hi, d) <= alpha:
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:  # e^ε overflows the binomial long before this
            raise AuditError("one-run bound did not converge: the p-value never exceeds alpha")
    while hi - lo > 1e-7:
        mid = 0.5 * (lo + hi)
        if _one_run_p(m, r, v, mid, d) <= alpha:
            lo = mid
        else:
            hi = mid
    return math.floor(lo * 1e6) / 1e6


@dataclass(frozen=True)
class OneRunAudit:
    """Outcome of :func:`one_run_audit` (or :func:`privfed.audit.one_run_audit_selected`).

    Attributes:
        epsilon_lower_bound: ε_lb ≥ 0 at ``delta``, holding with probability ≥ 1 − significance.
        num_canaries: m canaries the bound is computed on (the evaluation half when
            the guess rule was chosen on a held-out half).
        num_guesses: r guesses made: the ``num_guesses_in`` highest scores guessed
            "in", the ``r − num_guesses_in`` lowest guessed "out" (ties in the ranking
            broken by canary index).
        num_correct: v correct guesses.
        delta: δ of the bound.
        significance: α of the bound (the whole α, after any correction).
        num_guesses_in: Guesses "in" (None: ⌊r/2⌋, the even split).
        selection: How r and the split were chosen: ``"fixed"`` (given in advance),
            ``"held-out"`` (on a disjoint half of the canaries) or ``"bonferroni"``
            (best of ``num_configurations`` declared rules, each at α/k).
        num_configurations: k, the declared rules the α was split over (1 unless Bonferroni).
        calibration_canaries: Canaries spent choosing the rule (0 unless held-out).
    """

    epsilon_lower_bound: float
    num_canaries: int
    num_guesses: int
    num_correct: int
    delta: float
    significance: float
    num_guesses_in: int | None = None
    selection: str = "fixed"
    num_configurations: int = 1
    calibration_canaries: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.epsilon_lower_bound) or self.epsilon_lower_bound < 0:
            raise ParameterError(
                "epsilon_lower_bound", "a finite float >= 0", self.epsilon_lower_bound
            )
        _check_one_run(self.num_canaries, self.num_guesses, self.num_correct, self.delta)
        check_probability("significance", self.significance, open_low=True, open_high=True)
        if self.num_guesses_in is not None and not 0 <= self.num_guesses_in <= self.num_guesses:
            raise ParameterError(
                "num_guesses_in", "an int in [0, num_guesses]", self.num_guesses_in
            )
        if self.selection not in ("fixed", "held-out", "bonferroni"):
            raise ParameterError("selection", "'fixed', 'held-out' or 'bonferroni'", self.selection)
        check_int("num_configurations", self.num_configurations, minimum=1, numpy=True)
        check_int("calibration_canaries", self.calibration_canaries, minimum=0, numpy=True)

    @property
    def statistical_model(self) -> str:
        """What the bound assumes, in one sentence (:attr:`TrialModel.ONE_RUN`)."""
        return TrialModel.ONE_RUN.statement

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            **field_dict(self),
            "trials": TrialModel.ONE_RUN.value,
            "statistical_model": self.statistical_model,
        }


def _check_canaries(
    canary_scores: ArrayLike, canary_included: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    scores = check_vector("canary_scores", canary_scores)
    included = np.asarray(canary_included)
    if included.shape != scores.shape or included.dtype != np.bool_:
        raise ParameterError(
            "canary_included",
            f"a bool array of shape {scores.shape}",
            f"{included.dtype} {included.shape}",
        )
    return scores, included


def _correct_guesses(
    scores: NDArray[np.float64], included: NDArray[np.bool_], r: int, r_in: int
) -> int:
    """Correct guesses when the ``r_in`` highest are guessed in, the ``r − r_in`` lowest out."""
    m = scores.size
    order = np.argsort(scores, kind="stable")
    guess_in = order[m - r_in :] if r_in else order[:0]
    guess_out = order[: r - r_in]
    return int(included[guess_in].sum() + (~included[guess_out]).sum())


def one_run_audit(
    canary_scores: ArrayLike,
    canary_included: ArrayLike,
    *,
    num_guesses: int,
    spec: BoundSpec,
    guess_in_fraction: float = 0.5,
) -> OneRunAudit:
    """One-run audit from canary scores (Steinke, Nasr & Jagielski 2023, arXiv:2305.08846).

    Protocol: each of m canaries was included in the training run independently
    with probability ½ (the caller's responsibility: the bound is invalid
    otherwise).  After training, each canary gets a score (higher ⇒ "in").
    The auditor guesses "in" for the ⌊f·r⌋ highest scores (f =
    ``guess_in_fraction``), "out" for the r − ⌊f·r⌋ lowest, and abstains on
    the rest; the number of correct guesses enters
    :func:`one_run_epsilon_lower_bound`.  The guess rule depends on the
    scores only, never on the inclusion bits, as the theorem requires.  r and
    f must be fixed in advance: to choose them from the data, use
    :func:`privfed.audit.one_run_audit_selected` (a held-out half, or a
    declared grid with a Bonferroni correction).

    Args:
        canary_scores: Scores of the m canaries, shape (m,), finite.
        canary_included: Whether each canary was included, bool array (m,).
        num_guesses: r in [1, m].
        spec: δ and α (:class:`BoundSpec`).
        guess_in_fraction: f in [0, 1]: the share of the r guesses that are "in"
            (default ½, the even split).

    Returns:
        A :class:`OneRunAudit` with ``selection="fixed"``.
    """
    scores, included = _check_canaries(canary_scores, canary_included)
    m = scores.size
    r = check_int("num_guesses", num_guesses, minimum=1, numpy=True)
    if r > m:
        raise ParameterError("num_guesses", f"an int in [1, {m}]", num_guesses)
    f = check_probability("guess_in_fraction", guess_in_fraction, open_low=False, open_high=False)
    level = check_instance("spec", spec, BoundSpec)
    d, alpha = level.delta, level.significance
    r_in = math.floor(f * r)
    correct = _correct_guesses(scores, included, r, r_in)
    return OneRunAudit(
        epsilon_lower_bound=one_run_epsilon_lower_bound(m, r, correct, delta=d, significance=alpha),
        num_canaries=m,
        num_guesses=r,
        num_correct=correct,
        delta=d,
        significance=alpha,
        num_guesses_in=r_in,
    )
