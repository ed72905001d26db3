"""Held-out bounds from one set of scores: one seeded split, or K splits summarised (pure).

:func:`~privfed.audit.lower_bound_held_out` needs a calibration split and a
disjoint evaluation split.  When an attack produced one set of member and
non-member scores, :func:`lower_bound_random_split` draws that split from a
seed; because the bound moves with the split, :func:`repeated_split_bounds`
repeats it over K seeds and reports the median and the spread.  Only each
single bound carries the 1 − α statement; the median of K is a summary of how
much the split matters, not a bound with its own confidence.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import check_int, check_probability, check_seed, check_vector
from privfed.audit.bounds import (
    BoundObjective,
    PrivacyLowerBound,
    TrialModel,
    lower_bound_held_out,
)
from privfed.errors import ParameterError

__all__ = ["SplitBounds", "lower_bound_random_split", "repeated_split_bounds"]


def lower_bound_random_split(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    *,
    delta: float,
    significance: float = 0.05,
    calibration_fraction: float = 0.5,
    seed: int = 0,
    objective: BoundObjective = "epsilon",
    trials: TrialModel = TrialModel.INDEPENDENT,
) -> PrivacyLowerBound:
    """Held-out bound on a seeded random split of one set of scores.

    ``calibration_fraction`` of the members and of the non-members (permuted by
    ``numpy.random.default_rng(seed)``, members first) choose the threshold; the
    rest are evaluated.

    Args:
        member_scores: Shape (n1,).
        nonmember_scores: Shape (n0,).
        delta: δ in [0, 1).
        significance: α in (0, 1).
        calibration_fraction: In (0, 1).
        seed: Seed of the split (>= 0).
        objective: ``"epsilon"`` or ``"mu"``.
        trials: The statistical model to state: :attr:`TrialModel.ONE_MODEL` when
            the records were scored against one trained model.

    Returns:
        The :class:`~privfed.audit.bounds.PrivacyLowerBound` (``selection=HELD_OUT``).

    Raises:
        ParameterError: Bad arguments, or a split leaves a side empty.
    """
    members = check_vector("member_scores", member_scores)
    nonmembers = check_vector("nonmember_scores", nonmember_scores)
    share = check_probability(
        "calibration_fraction", calibration_fraction, open_low=True, open_high=True
    )
    if not isinstance(trials, TrialModel):
        raise ParameterError("trials", "a TrialModel", trials)
    rng = np.random.default_rng(check_seed("seed", seed))
    cm, cn = int(members.size * share), int(nonmembers.size * share)
    if min(cm, cn, members.size - cm, nonmembers.size - cn) < 1:
        raise ParameterError(
            "member_scores/nonmember_scores", "enough scores for a held-out split", "too few"
        )
    return split_bound(
        members, nonmembers, rng, share, delta, significance, objective=objective, trials=trials
    )


def split_bound(
    members: NDArray[np.float64],
    nonmembers: NDArray[np.float64],
    rng: np.random.Generator,
    share: float,
    delta: float,
    significance: float,
    *,
    objective: BoundObjective = "epsilon",
    trials: TrialModel = TrialModel.INDEPENDENT,
) -> PrivacyLowerBound:
    """The held-out bound of a split drawn from ``rng`` (members' permutation first).

    ``share`` of each group (rounded down) chooses the threshold; the caller
    has checked that both sides of both groups are non-empty.
    """
    pm, pn = rng.permutation(members.size), rng.permutation(nonmembers.size)
    cm, cn = int(members.size * share), int(nonmembers.size * share)
    bound = lower_bound_held_out(
        members[pm[:cm]],
        nonmembers[pn[:cn]],
        members[pm[cm:]],
        nonmembers[pn[cn:]],
        delta=delta,
        significance=significance,
        objective=objective,
    )
    return replace(bound, trials=trials)


@dataclass(frozen=True)
class SplitBounds:
    """Held-out bounds over K seeded splits of one set of scores.

    Attributes:
        bounds: The K bounds (split seeds ``seed``, ``seed + 1``, ...); each holds
            with probability ≥ 1 − α under its statistical model.
        seed: The first split seed.
    """

    bounds: tuple[PrivacyLowerBound, ...]
    seed: int

    def __post_init__(self) -> None:
        if not self.bounds:
            raise ParameterError("bounds", "at least one bound", 0)

    @property
    def median_epsilon(self) -> float:
        """Median ε_lb over the splits (a summary, not a bound with its own confidence)."""
        return float(statistics.median(b.epsilon_lower_bound for b in self.bounds))

    @property
    def epsilon_range(self) -> tuple[float, float]:
        """(min, max) of ε_lb over the splits."""
        values = [b.epsilon_lower_bound for b in self.bounds]
        return min(values), max(values)

    @property
    def median_mu(self) -> float:
        """Median μ_lb over the splits."""
        return float(statistics.median(b.mu_lower_bound for b in self.bounds))

    @property
    def median_bound(self) -> PrivacyLowerBound:
        """The split whose ε_lb is the lower median; one real bound to quote."""
        ranked = sorted(self.bounds, key=lambda b: b.epsilon_lower_bound)
        return ranked[(len(ranked) - 1) // 2]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        low, high = self.epsilon_range
        return {
            "num_splits": len(self.bounds),
            "seed": self.seed,
            "median_epsilon_lower_bound": self.median_epsilon,
            "min_epsilon_lower_bound": low,
            "max_epsilon_lower_bound": high,
            "median_mu_lower_bound": self.median_mu,
            "epsilon_lower_bounds": [b.epsilon_lower_bound for b in self.bounds],
        }


def repeated_split_bounds(
    member_scores: ArrayLike,
    nonmember_scores: ArrayLike,
    *,
    num_splits: int,
    delta: float,
    significance: float = 0.05,
    calibration_fraction: float = 0.5,
    seed: int = 0,
    trials: TrialModel = TrialModel.INDEPENDENT,
) -> SplitBounds:
    """:func:`lower_bound_random_split` at seeds ``seed .. seed + num_splits − 1``.

    Args:
        member_scores: Shape (n1,).
        nonmember_scores: Shape (n0,).
        num_splits: K >= 1.
        delta: δ in [0, 1).
        significance: α of each bound.
        calibration_fraction: In (0, 1).
        seed: First split seed (>= 0).
        trials: The statistical model to state.

    Returns:
        The :class:`SplitBounds`.
    """
    k = check_int("num_splits", num_splits, minimum=1, numpy=True)
    first = check_seed("seed", seed) or 0
    return SplitBounds(
        bounds=tuple(
            lower_bound_random_split(
                member_scores,
                nonmember_scores,
                delta=delta,
                significance=significance,
                calibration_fraction=calibration_fraction,
                seed=first + i,
                trials=trials,
            )
            for i in range(k)
        ),
        seed=first,
    )
