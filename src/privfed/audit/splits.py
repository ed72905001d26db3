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

from privfed._checks import check_instance, check_int, check_vector
from privfed.audit.bounds import (
    HALF_SPLIT,
    BoundObjective,
    BoundSpec,
    HeldOutSplit,
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
    spec: BoundSpec,
    split: HeldOutSplit = HALF_SPLIT,
    objective: BoundObjective = "epsilon",
    trials: TrialModel = TrialModel.INDEPENDENT,
) -> PrivacyLowerBound:
    """Held-out bound on a seeded random split of one set of scores.

    ``split.calibration_fraction`` of the members and of the non-members
    (permuted by ``numpy.random.default_rng(split.seed)``, members first) choose
    the threshold; the rest are evaluated.

    Args:
        member_scores: Shape (n1,).
        nonmember_scores: Shape (n0,).
        spec: δ and α (:class:`~privfed.audit.bounds.BoundSpec`).
        split: The calibration share and the seed of the split
            (:class:`~privfed.audit.bounds.HeldOutSplit`).
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
    share = check_instance("split", split, HeldOutSplit).calibration_fraction
    if not isinstance(trials, TrialModel):
        raise ParameterError("trials", "a TrialModel", trials)
    rng = np.random.default_rng(split.seed)
    cm, cn = int(members.size * share), int(nonmembers.size * share)
    if min(cm, cn, members.size - cm, nonmembers.size - cn) < 1:
        raise ParameterError(
            "member_scores/nonmember_scores", "enough scores for a held-out split", "too few"
        )
    return split_bound(members, nonmembers, rng, share, spec, objective=objective, trials=trials)


def split_bound(
    members: NDArray[np.float64],
    nonmembers: NDArray[np.float64],
    rng: np.random.Generator,
    share: float,
    spec: BoundSpec,
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
        spec=spec,
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
    spec: BoundSpec,
    split: HeldOutSplit = HALF_SPLIT,
    trials: TrialModel = TrialModel.INDEPENDENT,
) -> SplitBounds:
    """:func:`lower_bound_random_split` at seeds ``split.seed .. split.seed + num_splits − 1``.

    Args:
        member_scores: Shape (n1,).
        nonmember_scores: Shape (n0,).
        num_splits: K >= 1.
        spec: δ and the α of each bound (:class:`~privfed.audit.bounds.BoundSpec`).
        split: The calibration share and the first split seed
            (:class:`~privfed.audit.bounds.HeldOutSplit`).
        trials: The statistical model to state.

    Returns:
        The :class:`SplitBounds`.
    """
    k = check_int("num_splits", num_splits, minimum=1, numpy=True)
    first = check_instance("split", split, HeldOutSplit).seed or 0
    return SplitBounds(
        bounds=tuple(
            lower_bound_random_split(
                member_scores,
                nonmember_scores,
                spec=spec,
                split=replace(split, seed=first + i),
                trials=trials,
            )
            for i in range(k)
        ),
        seed=first,
    )
