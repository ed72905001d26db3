"""Membership-inference metrics with confidence intervals (pure: numpy + scipy.special).

Every function here takes two 1-D arrays of attack scores: ``member_scores``
(records that were in the training set / the release) and ``nonmember_scores``
(records that were not).  The convention throughout :mod:`privfed.audit` is
that a **higher score means "more likely a member"**; an attack that produces
losses or distances must negate them first.

Each rate comes with an interval, because a point estimate from a few hundred
records says little: an AUC of 0.501 on 1,000 + 1,000 records is compatible
with anything between about 0.476 and 0.526 at 95 % confidence.

* Rates at a fixed threshold (TPR, FPR) get exact Clopper–Pearson intervals
  (Clopper & Pearson 1934), which never under-cover.
* The AUC gets a DeLong interval (DeLong et al. 1988: the Mann–Whitney
  statistic's variance from its placement values) or a seeded percentile
  bootstrap that resamples members and non-members separately.
* TPR at a fixed FPR sets the threshold from the non-member scores only, so the
  Clopper–Pearson interval on the TPR (computed from the members) is exact
  conditional on the threshold.  A target FPR that the number of non-members
  cannot resolve (fewer than ``3 / fpr`` of them) is still reported, marked
  unsupported (``supported=False``, a † in reports), never silently.
* An AUC interval wholly below 0.5 means the score ranks non-members above
  members (most likely a flipped sign): :attr:`MembershipMetrics.warnings`
  says so, and reports print it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import (
    check_instance,
    check_int,
    check_probability,
    check_seed,
    check_vector,
)
from privfed._records import field_dict, set_fields
from privfed.audit._distributions import beta_isf, beta_ppf, midranks, normal_isf
from privfed.errors import ParameterError

__all__ = [
    "DEFAULT_FPRS",
    "DELONG_INTERVAL",
    "AucInterval",
    "AucIntervalMethod",
    "ConfidenceInterval",
    "MembershipMetrics",
    "RocCurve",
    "TprAtFpr",
    "auc_score",
    "auc_with_interval",
    "clopper_pearson",
    "membership_metrics",
    "roc_curve",
    "tpr_at_fpr",
]

#: The false-positive rates at which :func:`membership_metrics` reports the TPR.
DEFAULT_FPRS: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)

#: Non-members needed per unit of 1/FPR before a TPR at that FPR is reported as supported.
MIN_NONMEMBERS_PER_INVERSE_FPR = 3.0


class AucIntervalMethod(enum.Enum):
    """How :func:`auc_with_interval` builds the AUC's confidence interval."""

    #: Normal interval with DeLong's placement-value variance (fast, deterministic).
    DELONG = "delong"
    #: Percentile bootstrap, members and non-members resampled separately (seeded).
    BOOTSTRAP = "bootstrap"


@dataclass(frozen=True)
class AucInterval:
    """How the AUC's confidence interval is built: the method, and the bootstrap's settings.

    Taken as one argument by :func:`auc_with_interval` (``interval=``) and
    :func:`membership_metrics` (``auc_interval=``).  Checked here, once.

    Attributes:
        method: :attr:`AucIntervalMethod.DELONG` (normal approximation; slightly
            anti-conservative for tiny samples or AUC near 0 or 1) or
            :attr:`AucIntervalMethod.BOOTSTRAP` (percentile; seeded).
        num_bootstrap: Bootstrap replicates (≥ 100), bootstrap only.
        seed: Seed of the bootstrap resampler, an int ≥ 0; ``None`` draws fresh
            entropy.  Used only by the bootstrap; never appears in results.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    method: AucIntervalMethod = AucIntervalMethod.DELONG
    num_bootstrap: int = 1000
    seed: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.method, AucIntervalMethod):
            raise ParameterError("method", "an AucIntervalMethod", self.method)
        set_fields(
            self,
            num_bootstrap=check_int("num_bootstrap", self.num_bootstrap, minimum=100, numpy=True),
            seed=check_seed("seed", self.seed),
        )


#: The default AUC interval: DeLong's.
DELONG_INTERVAL = AucInterval()


@dataclass(frozen=True)
class ConfidenceInterval:
    """A point estimate with a two-sided confidence interval.

    Attributes:
        estimate: The point estimate.
        lower: Lower end of the interval (``lower <= estimate``).
        upper: Upper end of the interval (``estimate <= upper``).
        confidence: Nominal coverage in (0, 1), e.g. 0.95.
        method: How the interval was computed (``"clopper-pearson"``, ``"delong"``,
            ``"bootstrap"``...).
    """

    estimate: float
    lower: float
    upper: float
    confidence: float
    method: str

    def __post_init__(self) -> None:
        for name in ("estimate", "lower", "upper"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ParameterError(name, "a finite float", value)
        check_probability("confidence", self.confidence, open_low=True, open_high=True)
        tol = 1e-12
        if not (self.lower - tol <= self.estimate <= self.upper + tol):
            raise ParameterError(
                "lower/estimate/upper",
                "ordered as lower <= estimate <= upper",
                (self.lower, self.estimate, self.upper),
            )
        if not self.method:
            raise ParameterError("method", "a non-empty string", self.method)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return field_dict(self)


def clopper_pearson(
    successes: int,
    trials: int,
    *,
    confidence: float = 0.95,
    sided: Literal["two-sided", "upper", "lower"] = "two-sided",
) -> ConfidenceInterval:
    """Exact Clopper–Pearson interval for a binomial proportion.

    Args:
        successes: Number of successes k, an int in [0, trials].
        trials: Number of trials n, an int ≥ 1.
        confidence: Coverage 1 − α in (0, 1).
        sided: ``"two-sided"`` puts α/2 in each tail; ``"upper"`` gives a
            one-sided upper bound at level 1 − α (lower end 0); ``"lower"`` a
            one-sided lower bound (upper end 1).

    Returns:
        The interval around k / n.  Coverage is at least ``confidence`` for every
        true proportion (the interval is conservative, never anti-conservative).

    Raises:
        ParameterError: ``trials < 1``, ``successes`` outside [0, trials], or
            ``confidence`` outside (0, 1).
    """
    n = check_int("trials", trials, minimum=1, numpy=True)
    k = check_int("successes", successes, minimum=0, numpy=True)
    if k > n:
        raise ParameterError("successes", f"an int in [0, trials={n}]", successes)
    level = check_probability("confidence", confidence, open_low=True, open_high=True)
    if sided not in ("two-sided", "upper", "lower"):
        raise ParameterError("sided", "'two-sided', 'upper' or 'lower'", sided)
    alpha = 1.0 - level
    tail = alpha / 2.0 if sided == "two-sided" else alpha
    lower = 0.0 if k == 0 or sided == "upper" else float(beta_ppf(tail, k, n - k + 1))
    upper = 1.0 if k == n or sided == "lower" else float(beta_isf(tail, k + 1, n - k))
    estimate = k / n
    return ConfidenceInterval(
        estimate=estimate,
        lower=min(lower, estimate),
        upper=max(upper, estimate),
        confidence=level,
        method="clopper-pearson" if sided == "two-sided" else f"clopper-pearson-{sided}",
    )


@dataclass(frozen=True)
class RocCurve:
    """An empirical ROC curve, decision rule ``score >= threshold`` ⇒ "member".

    Attributes:
        fpr: Non-decreasing false-positive rates, float64, shape (k,), from 0 to 1.
        tpr: Matching true-positive rates, float64, shape (k,).
        thresholds: Matching thresholds, float64, shape (k,), decreasing; the
            first is ``+inf`` (nobody flagged).
    """

    fpr: NDArray[np.float64] = field(repr=False)
    tpr: NDArray[np.float64] = field(repr=False)
    thresholds: NDArray[np.float64] = field(repr=False)

    def __post_init__(self) -> None:
        shapes = {np.shape(self.fpr), np.shape(self.tpr), np.shape(self.thresholds)}
        if len(shapes) != 1 or np.ndim(self.fpr) != 1:
            raise ParameterError("fpr/tpr/thresholds", "1-D arrays of equal length", shapes)

    def to_dict(self, *, max_points: int = 2000) -> dict[str, Any]:
        """Return a JSON-serialisable dict, thinned to at most ``max_points`` points.

        Thinning keeps points evenly spaced in log(FPR) so the low-FPR region
        that matters for log–log plots is preserved, plus both end points.
        """
        check_int("max_points", max_points, minimum=2, numpy=True)
        index = np.arange(self.fpr.size)
        if self.fpr.size > max_points:
            positive = np.maximum(self.fpr, 1e-12)
            grid = np.geomspace(positive.min(), 1.0, max_points)
            index = np.unique(
                np.concatenate(
                    [[0, self.fpr.size - 1], np.searchsorted(self.fpr, grid, side="right") - 1]
                ).clip(0, self.fpr.size - 1)
            )
        return {
            "fpr": self.fpr[index].tolist(),
            "tpr": self.tpr[index].tolist(),
            "thresholds": [float(t) if math.isfinite(t) else None for t in self.thresholds[index]],
        }


def roc_curve(member_scores: ArrayLike, nonmember_scores: ArrayLike) -> RocCurve:
    """Empirical ROC curve of a membership-inference attack.

    Args:
        member_scores: Scores of members, shape (n1,), finite; higher ⇒ more member-like.
        nonmember_scores: Scores of non-members, shape (n0,), finite.

    Returns:
        One point per distinct score value (ties form a single step), plus the
        origin.

    Raises:
        ParameterError: An array is empty or not 1-D.
        NonFiniteInputError: An array holds NaN or ±inf.
    """
    members = check_vector("member_scores", member_scores)
    nonmembers = check_vector("nonmember_scores", nonmember_scores)
    return _roc(members, nonmembers)


def _roc(members: NDArray[np.float64], nonmembers: NDArray[np.float64]) -> RocCurve:
    thresholds = np.unique(np.concatenate([members, nonmembers]))[::-1]
    m_sorted = np.sort(members)
    n_sorted = np.sort(nonmembers)
    tp = members.size - np.searchsorted(m_sorted, thresholds, side="left")
    fp = nonmembers.size - np.searchsorted(n_sorted, thresholds, side="left")
    return RocCurve(
        fpr=np.concatenate([[0.0], fp / nonmembers.size]),
        tpr=np.concatenate([[0.0], tp / members.size]),
        thresholds=np.concatenate([[np.inf], thresholds]),
    )


def _placements(
    members: NDArray[np.float64], nonmembers: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """DeLong placement values (ties count one half), via mid-ranks."""
    n1, n0 = members.size, nonmembers.size
    combined = midranks(np.concatenate([members, nonmembers]))
    within_members = midranks(members)
    within_nonmembers = midranks(nonmembers)
    v10 = (combined[:n1] - within_members) / n0
    v01 = 1.0 - (combined[n1:] - within_nonmembers) / n1
    return v10, v01


def auc_score(member_scores: ArrayLike, nonmember_scores: ArrayLike) -> float:
    """Area under the ROC curve: P[member score > non-member score] + ½·P[tie].

    Args:
        member_scores: Shape (n1,), finite.
        nonmember_scores: Shape (n0,), finite.

    Returns:
        The Mann–Whitney estimate in [0, 1]; 0.5 is random guessing.
    """
    members = check_vector("member_scores", member_scores)
    nonmembers = check_vector("nonmember_scores", nonmember_scores)
    v10, _ = _placements(members, nonmembers)
    return float(np.mean(v10))


def _auc_fast(members: NDArray[np.float64], nonmembers: NDArray[np.float64]) -> float:
    n1, n0 = members.size, nonmembers.size
    ranks = midranks(np.concatenate([members, nonmembers]))
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def auc_with_interval(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    *,
    confidence: float = 0.95,
    interval: AucInterval = DELONG_INTERVAL,
) -> ConfidenceInterval:
    """AUC with a two-sided confidence interval.

    Args:
        member_scores: Shape (n1,), finite, n1 ≥ 2.
        nonmember_scores: Shape (n0,), finite, n0 ≥ 2.
        confidence: Coverage in (0, 1).
        interval: The method, and the bootstrap's replicates and seed
            (:class:`AucInterval`; default DeLong's).

    Returns:
        The interval, clipped to [0, 1].
    """
    members = check_vector("member_scores", member_scores, min_size=2)
    nonmembers = check_vector("nonmember_scores", nonmember_scores, min_size=2)
    level = check_probability("confidence", confidence, open_low=True, open_high=True)
    spec = check_instance("interval", interval, AucInterval)
    method, replicates, rng_seed = spec.method, spec.num_bootstrap, spec.seed
    v10, v01 = _placements(members, nonmembers)
    estimate = float(np.mean(v10))
    if method is AucIntervalMethod.DELONG:
        variance = float(np.var(v10, ddof=1) / members.size + np.var(v01, ddof=1) / nonmembers.size)
        half = float(normal_isf((1.0 - level) / 2.0)) * math.sqrt(max(variance, 0.0))
        lower, upper = max(0.0, estimate - half), min(1.0, estimate + half)
    else:
        rng = np.random.default_rng(rng_seed)
        values = np.empty(replicates)
        for b in range(replicates):
            mi = rng.integers(0, members.size, members.size)
            ni = rng.integers(0, nonmembers.size, nonmembers.size)
            values[b] = _auc_fast(members[mi], nonmembers[ni])
        alpha = 1.0 - level
        lower = float(np.quantile(values, alpha / 2.0))
        upper = float(np.quantile(values, 1.0 - alpha / 2.0))
        lower, upper = min(lower, estimate), max(upper, estimate)
    return ConfidenceInterval(estimate, lower, upper, level, method.value)


@dataclass(frozen=True)
class TprAtFpr:
    """True-positive rate of an attack at a target false-positive rate.

    Attributes:
        target_fpr: The FPR requested, in (0, 1).
        threshold: The decision threshold set from the non-member scores
            (``score >= threshold`` ⇒ member); ``inf`` when no non-member may be
            flagged.
        achieved_fpr: Empirical FPR of that threshold on the non-members (≤ target).
        tpr: TPR on the members with an exact Clopper–Pearson interval, valid
            conditional on the threshold (which depends on non-members only).
        num_nonmembers: Non-members available.
        supported: Whether there are at least ``3 / target_fpr`` non-members; when
            ``False`` the number says little about the FPR asked for.
        note: Plain-language caveat ("" when supported).
    """

    target_fpr: float
    threshold: float
    achieved_fpr: float
    tpr: ConfidenceInterval
    num_nonmembers: int
    supported: bool
    note: str = ""

    def __post_init__(self) -> None:
        check_probability("target_fpr", self.target_fpr, open_low=True, open_high=True)
        check_probability("achieved_fpr", self.achieved_fpr, open_low=False, open_high=False)
        check_int("num_nonmembers", self.num_nonmembers, minimum=1, numpy=True)
        if not isinstance(self.tpr, ConfidenceInterval):
            raise ParameterError("tpr", "a ConfidenceInterval", self.tpr)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            **field_dict(self),
            "threshold": self.threshold if math.isfinite(self.threshold) else None,
            "tpr": self.tpr.to_dict(),
        }


def _tpr_at_fpr(
    members: NDArray[np.float64],
    nonmembers_desc: NDArray[np.float64],
    target: float,
    level: float,
) -> TprAtFpr:
    n0 = nonmembers_desc.size
    allowed = math.floor(target * n0 + 1e-9)
    if allowed >= n0:
        threshold = -math.inf
    else:
        # Just above the (allowed+1)-th largest non-member: at most `allowed` flagged.
        threshold = float(np.nextafter(nonmembers_desc[allowed], np.inf))
    flagged_nonmembers = int(np.count_nonzero(nonmembers_desc >= threshold))
    tp = int(np.count_nonzero(members >= threshold))
    supported = n0 >= MIN_NONMEMBERS_PER_INVERSE_FPR / target
    note = ""
    if not supported:
        need = math.ceil(MIN_NONMEMBERS_PER_INVERSE_FPR / target)
        note = (
            f"only {n0} non-members; resolving FPR {target:g} needs at least {need}; "
            "the TPR reported is at the smallest FPR the sample can express"
        )
    return TprAtFpr(
        target_fpr=target,
        threshold=threshold,
        achieved_fpr=flagged_nonmembers / n0,
        tpr=clopper_pearson(tp, members.size, confidence=level),
        num_nonmembers=n0,
        supported=supported,
        note=note,
    )


def tpr_at_fpr(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    target_fpr: float,
    *,
    confidence: float = 0.95,
) -> TprAtFpr:
    """TPR at a target FPR, with the threshold set on the non-members.

    The threshold is the smallest value whose empirical FPR does not exceed
    ``target_fpr``; members are then counted against it, so the TPR's
    Clopper–Pearson interval is exact given the threshold.

    Args:
        member_scores: Shape (n1,), finite; higher ⇒ member.
        nonmember_scores: Shape (n0,), finite.
        target_fpr: In (0, 1).
        confidence: Coverage of the TPR interval, in (0, 1).

    Returns:
        A :class:`TprAtFpr`; ``supported`` is False when n0 < 3 / target_fpr.
    """
    members = check_vector("member_scores", member_scores)
    nonmembers = check_vector("nonmember_scores", nonmember_scores)
    target = check_probability("target_fpr", target_fpr, open_low=True, open_high=True)
    level = check_probability("confidence", confidence, open_low=True, open_high=True)
    return _tpr_at_fpr(members, np.sort(nonmembers)[::-1], target, level)


@dataclass(frozen=True)
class MembershipMetrics:
    """All threshold-free and fixed-FPR metrics of one attack.

    Attributes:
        num_members: Members scored.
        num_nonmembers: Non-members scored.
        auc: AUC with its interval.
        tpr_at_fpr: TPR at each FPR of interest, in the order requested.
        max_advantage: max over thresholds of TPR − FPR (empirical, no interval;
            optimistic because the threshold is chosen on the same data — use
            :mod:`privfed.audit.bounds` for anything that must hold up).
        roc: The empirical ROC curve.
    """

    num_members: int
    num_nonmembers: int
    auc: ConfidenceInterval
    tpr_at_fpr: tuple[TprAtFpr, ...]
    max_advantage: float
    roc: RocCurve = field(repr=False)

    def __post_init__(self) -> None:
        check_int("num_members", self.num_members, minimum=1, numpy=True)
        check_int("num_nonmembers", self.num_nonmembers, minimum=1, numpy=True)
        if not isinstance(self.auc, ConfidenceInterval):
            raise ParameterError("auc", "a ConfidenceInterval", self.auc)
        if not all(isinstance(t, TprAtFpr) for t in self.tpr_at_fpr):
            raise ParameterError("tpr_at_fpr", "a tuple of TprAtFpr", self.tpr_at_fpr)
        if not (-1.0 <= self.max_advantage <= 1.0):
            raise ParameterError("max_advantage", "a float in [-1, 1]", self.max_advantage)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Plain-language warnings about the scores (empty when there are none).

        An AUC interval wholly below 0.5 means non-members score higher than
        members: the score is most likely flipped (lower = member); negate it.
        """
        if self.auc.upper < 0.5:
            return (
                f"AUC interval [{self.auc.lower:.3f}, {self.auc.upper:.3f}] lies wholly below "
                "0.5: the score ranks non-members above members; it is probably flipped "
                "(higher must mean member): negate it",
            )
        return ()

    def to_dict(self, *, include_roc: bool = True) -> dict[str, Any]:
        """Return a JSON-serialisable dict (ROC thinned to ≤ 2000 points)."""
        out: dict[str, Any] = {
            "num_members": self.num_members,
            "num_nonmembers": self.num_nonmembers,
            "auc": self.auc.to_dict(),
            "tpr_at_fpr": [t.to_dict() for t in self.tpr_at_fpr],
            "max_advantage": self.max_advantage,
            "warnings": list(self.warnings),
        }
        if include_roc:
            out["roc"] = self.roc.to_dict()
        return out


def membership_metrics(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    *,
    fprs: tuple[float, ...] = DEFAULT_FPRS,
    confidence: float = 0.95,
    auc_interval: AucInterval = DELONG_INTERVAL,
) -> MembershipMetrics:
    """Compute ROC, AUC (with interval) and TPR at each FPR (with intervals).

    Args:
        member_scores: Shape (n1,), n1 ≥ 2, finite; higher ⇒ member.
        nonmember_scores: Shape (n0,), n0 ≥ 2, finite.
        fprs: Target FPRs, each in (0, 1).  Those the sample cannot resolve are
            still reported, with ``supported=False`` and a note.
        confidence: Coverage of every interval, in (0, 1).
        auc_interval: How the AUC interval is built (:class:`AucInterval`).

    Returns:
        A frozen, JSON-serialisable :class:`MembershipMetrics`.
    """
    members = check_vector("member_scores", member_scores, min_size=2)
    nonmembers = check_vector("nonmember_scores", nonmember_scores, min_size=2)
    level = check_probability("confidence", confidence, open_low=True, open_high=True)
    targets = tuple(
        check_probability(f"fprs[{i}]", f, open_low=True, open_high=True)
        for i, f in enumerate(fprs)
    )
    auc = auc_with_interval(members, nonmembers, confidence=level, interval=auc_interval)
    desc = np.sort(nonmembers)[::-1]
    rows = tuple(_tpr_at_fpr(members, desc, t, level) for t in targets)
    roc = _roc(members, nonmembers)
    return MembershipMetrics(
        num_members=members.size,
        num_nonmembers=nonmembers.size,
        auc=auc,
        tpr_at_fpr=rows,
        max_advantage=float(np.max(roc.tpr - roc.fpr)),
        roc=roc,
    )
