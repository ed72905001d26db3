"""Reference-model membership-inference attacks on classifiers: LiRA and RMIA (pure numpy).

These attacks compare the target model's confidence on a record with the
confidences of *reference models* trained with and without it.  Everything
here works on score arrays, so any training pipeline can be audited: the
caller supplies ``train_fn(indices) -> probabilities``, which trains a model
on the population records at ``indices`` and returns, for **every**
population record, the probability that model assigns to the record's true
class (float array of shape (N,), values in [0, 1]).  A torch model is turned
into such an array by :func:`privfed.audit.torch_scoring.true_class_probabilities`.

* LiRA (Carlini et al. 2022, arXiv:2112.03570, §IV): per record, fit Gaussians
  to the logit-scaled confidence φ(p) = log p − log(1 − p) of reference models
  that did ("in") and did not ("out") train on it.  Online: the log-likelihood
  ratio of the two Gaussians; offline: the one-sided out-Gaussian tail.
* RMIA (Zarifzadeh et al. 2024, arXiv:2312.03262, §3): compares the record's
  likelihood ratio Pr(x|θ)/Pr(x) with those of population records z; the score
  is the fraction of z the record dominates by a factor γ.  Works with 1–4
  reference models; offline it approximates Pr(x) from out models only.
* Loss attack (Yeom et al. 2018): the target's own logit-scaled confidence.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import (
    check_float,
    check_int,
    check_probability,
    check_seed,
    check_vector,
)
from privfed.audit._distributions import normal_logpdf
from privfed.audit._progress import progress_ticker
from privfed.audit._results import attack_result_dict
from privfed.audit.bounds import BoundSpec, HeldOutSplit, PrivacyLowerBound, TrialModel
from privfed.audit.metrics import DEFAULT_FPRS, MembershipMetrics, membership_metrics
from privfed.audit.splits import lower_bound_random_split
from privfed.errors import AuditError, ParameterError, ParameterTypeError

__all__ = [
    "ReferenceAttack",
    "ReferenceAttackResult",
    "TrainFn",
    "lira_scores",
    "logit_scaled_confidence",
    "reference_model_attack",
    "rmia_scores",
]

#: ``train_fn(indices) -> probabilities``: trains on population records ``indices``
#: (int64 array) and returns each population record's true-class probability, shape (N,).
TrainFn = Callable[[NDArray[np.int64]], ArrayLike]

_PROB_FLOOR = 1e-30


class ReferenceAttack(enum.Enum):
    """Attacks run by :func:`reference_model_attack`."""

    LOSS = "loss"
    LIRA_ONLINE = "lira-online"
    LIRA_OFFLINE = "lira-offline"
    RMIA_ONLINE = "rmia-online"
    RMIA_OFFLINE = "rmia-offline"


def _as_probabilities(
    name: str, value: Any, shape: tuple[int, ...] | None = None
) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(name, "an array of probabilities", value) from exc
    if shape is not None and arr.shape != shape:
        raise ParameterError(name, f"shape {shape}", f"shape {arr.shape}")
    if arr.size == 0 or not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
        raise ParameterError(name, "a non-empty array of probabilities in [0, 1]", "array")
    return arr


def logit_scaled_confidence(true_class_probabilities: ArrayLike) -> NDArray[np.float64]:
    """φ(p) = log p − log(1 − p), clamped so p ∈ {0, 1} stay finite.

    Args:
        true_class_probabilities: Any shape, values in [0, 1].

    Returns:
        float64 array of the same shape; values within ±69 (p clamped to
        [1e-30, 1 − 1e-30] and then to what float64 can tell from 1).
    """
    p = _as_probabilities("true_class_probabilities", true_class_probabilities)
    p = np.clip(p, _PROB_FLOOR, 1.0 - np.finfo(np.float64).eps / 2)
    return np.asarray(np.log(p) - np.log1p(-p), dtype=np.float64)


def _check_mask(mask: Any, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    arr = np.asarray(mask)
    if arr.shape != shape or arr.dtype != np.bool_:
        raise ParameterError(
            "reference_in_mask", f"a bool array of shape {shape}", f"{arr.dtype} {arr.shape}"
        )
    return arr


def lira_scores(
    target_confidence: ArrayLike,
    reference_confidences: ArrayLike,
    reference_in_mask: ArrayLike | None = None,
    *,
    online: bool = True,
    fixed_variance: bool = True,
) -> NDArray[np.float64]:
    """LiRA scores from logit-scaled confidences (Carlini et al. 2022, arXiv:2112.03570).

    Args:
        target_confidence: φ of the target model on each record, shape (n,).
        reference_confidences: φ of k reference models, shape (k, n).
        reference_in_mask: ``mask[j, i]`` is True when reference model j trained
            on record i; shape (k, n), bool.  Required online; offline, None means
            every reference model is "out" for every record.
        online: Online (in and out Gaussians) or offline (out Gaussian only).
        fixed_variance: Use one pooled variance for all records (recommended
            below ~64 reference models, as in the paper).

    Returns:
        float64 scores of shape (n,); higher ⇒ more member-like.

    Raises:
        AuditError: A record lacks the "in" (online) or "out" reference
            models it needs.
    """
    target = check_vector("target_confidence", target_confidence)
    refs = np.asarray(reference_confidences, dtype=np.float64)
    n = target.size
    if refs.ndim != 2 or refs.shape[1] != n or refs.shape[0] < 1 or not np.all(np.isfinite(refs)):
        raise ParameterError(
            "reference_confidences", f"a finite (k, {n}) array", f"shape {refs.shape}"
        )
    if reference_in_mask is None:
        if online:
            raise ParameterError("reference_in_mask", "a bool array when online=True", None)
        mask = np.zeros(refs.shape, dtype=bool)
    else:
        mask = _check_mask(reference_in_mask, refs.shape)
    out_count = (~mask).sum(axis=0)
    in_count = mask.sum(axis=0)
    if np.any(out_count == 0):
        raise AuditError(f"{int(np.sum(out_count == 0))} records have no 'out' reference model")
    if online and np.any(in_count == 0):
        raise AuditError(f"{int(np.sum(in_count == 0))} records have no 'in' reference model")

    def moments(
        sel: NDArray[np.bool_], count: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        mean = np.where(sel, refs, 0.0).sum(axis=0) / count
        resid2 = np.where(sel, (refs - mean) ** 2, 0.0)
        if fixed_variance:
            dof = max(int(sel.sum()) - n, 1)
            var = np.full(n, resid2.sum() / dof)
        else:
            var = resid2.sum(axis=0) / np.maximum(count - 1, 1)
        return mean, np.sqrt(np.maximum(var, 1e-12))

    from scipy import special  # imported here: loading scipy.special costs ~0.3 s

    mu_out, sd_out = moments(~mask, out_count)
    if not online:
        return np.asarray(special.log_ndtr((target - mu_out) / sd_out), dtype=np.float64)
    mu_in, sd_in = moments(mask, in_count)
    return np.asarray(
        normal_logpdf(target, mu_in, sd_in) - normal_logpdf(target, mu_out, sd_out),
        dtype=np.float64,
    )


def rmia_scores(
    target_probabilities: ArrayLike,
    reference_probabilities: ArrayLike,
    population_target_probabilities: ArrayLike,
    population_reference_probabilities: ArrayLike,
    *,
    reference_in_mask: ArrayLike | None = None,
    gamma: float = 1.0,
    offline_interpolation: float = 0.3,
) -> NDArray[np.float64]:
    """RMIA scores (Zarifzadeh et al. 2024, arXiv:2312.03262, Eq. 4 and §3.2).

    Pr(x) is the mean of the reference models' probabilities.  Offline
    (``reference_in_mask`` None: all reference models are "out"), it is
    corrected as ½((1 + a)·Pr_out(x) + (1 − a)) with a = ``offline_interpolation``.
    The score is the fraction of population records z with
    (Pr(x|θ)/Pr(x)) / (Pr(z|θ)/Pr(z)) ≥ γ.

    Args:
        target_probabilities: Target model's true-class probability on each
            record, shape (n,).
        reference_probabilities: Reference models' on the same records, (k, n).
        population_target_probabilities: Target model on population records z, (m,).
        population_reference_probabilities: Reference models on z, (k, m).
        reference_in_mask: Online: ``mask[j, i]`` True when model j trained on
            record i, shape (k, n).  The population z must be non-members of
            every model (all "out").
        gamma: Dominance factor γ ≥ 1.
        offline_interpolation: a in [0, 1] (offline only).

    Returns:
        float64 scores in [0, 1], shape (n,); higher ⇒ more member-like.
    """
    tx = _as_probabilities("target_probabilities", target_probabilities)
    if tx.ndim != 1:
        raise ParameterError("target_probabilities", "a 1-D array", f"shape {tx.shape}")
    n = tx.size
    rx = np.asarray(reference_probabilities, dtype=np.float64)
    if rx.ndim != 2:
        raise ParameterError("reference_probabilities", f"shape (k, {n})", f"shape {rx.shape}")
    k = rx.shape[0]
    rx = _as_probabilities("reference_probabilities", rx, (k, n))
    tz = _as_probabilities("population_target_probabilities", population_target_probabilities)
    if tz.ndim != 1:
        raise ParameterError("population_target_probabilities", "a 1-D array", f"shape {tz.shape}")
    rz = _as_probabilities(
        "population_reference_probabilities", population_reference_probabilities, (k, tz.size)
    )
    g = check_float("gamma", gamma, low=0, open_low=True)
    if g < 1.0:
        raise ParameterError("gamma", "a float >= 1", gamma)
    a = check_probability(
        "offline_interpolation", offline_interpolation, open_low=False, open_high=False
    )
    if reference_in_mask is None:
        px = 0.5 * ((1.0 + a) * rx.mean(axis=0) + (1.0 - a))
        pz = 0.5 * ((1.0 + a) * rz.mean(axis=0) + (1.0 - a))
    else:
        _check_mask(reference_in_mask, (k, n))
        px = rx.mean(axis=0)
        pz = rz.mean(axis=0)
    log_ratio_x = np.log(np.maximum(tx, _PROB_FLOOR)) - np.log(np.maximum(px, _PROB_FLOOR))
    log_ratio_z = np.sort(np.log(np.maximum(tz, _PROB_FLOOR)) - np.log(np.maximum(pz, _PROB_FLOOR)))
    # ratio_x / ratio_z >= γ  ⇔  log_ratio_z <= log_ratio_x − log γ
    dominated = np.searchsorted(log_ratio_z, log_ratio_x - math.log(g), side="right")
    return np.asarray(dominated / tz.size, dtype=np.float64)


@dataclass(frozen=True)
class ReferenceAttackResult:
    """Outcome of :func:`reference_model_attack`.

    Attributes:
        attack: Which attack.
        metrics: Metrics with intervals (members: the target's training records).
        num_reference_models: Reference models trained.
        member_scores: Scores of members, shape (n1,).
        nonmember_scores: Scores of evaluated non-members, shape (n0,): every
            non-member of the target, except for RMIA, whose population z is
            set aside.
        bound: ε/μ lower bound on a seeded held-out split of these scores
            (stated under :attr:`~privfed.audit.TrialModel.ONE_MODEL`: the records
            share one target model, so they are not independent trials).
    """

    attack: ReferenceAttack
    metrics: MembershipMetrics
    num_reference_models: int
    member_scores: NDArray[np.float64] = field(repr=False)
    nonmember_scores: NDArray[np.float64] = field(repr=False)
    bound: PrivacyLowerBound | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attack, ReferenceAttack):
            raise ParameterError("attack", "a ReferenceAttack", self.attack)
        check_int("num_reference_models", self.num_reference_models, minimum=0, numpy=True)

    def to_dict(self, *, include_scores: bool = True) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return attack_result_dict(
            {
                "attack": self.attack.value,
                "num_reference_models": self.num_reference_models,
            },
            self.metrics,
            self.bound,
            (self.member_scores, self.nonmember_scores) if include_scores else None,
        )


def _train(train_fn: TrainFn, indices: NDArray[np.int64], population: int) -> NDArray[np.float64]:
    out = train_fn(indices)
    return _as_probabilities("train_fn(indices)", out, (population,))


@dataclass(frozen=True)
class _MembershipDesign:
    """Who trains on what in :func:`reference_model_attack` (Carlini et al. 2022, §IV-C)."""

    #: The target's members (a random half of the population), sorted.
    members: NDArray[np.int64]
    #: Every non-member of the target, sorted (scored by the attacks without a z set).
    nonmembers: NDArray[np.int64]
    #: The non-members RMIA scores (those not in :attr:`population`), sorted.
    eval_nonmembers: NDArray[np.int64]
    #: RMIA's population z: non-members set aside, never scored.
    population: NDArray[np.int64]
    #: ``masks[j, i]``: record i is in reference model j's training set, shape (k, N).
    masks: NDArray[np.bool_]

    @classmethod
    def draw(cls, n: int, k: int, z_count: int, rng: np.random.Generator) -> _MembershipDesign:
        """Draw the target's half, the ``k`` reference models' sets (in pairs) and z."""
        target_in = np.zeros(n, dtype=bool)
        target_in[rng.permutation(n)[: n // 2]] = True
        nonmember_idx = np.flatnonzero(~target_in)
        if z_count >= nonmember_idx.size:
            raise ParameterError(
                "num_population_records", f"below the {nonmember_idx.size} non-members", z_count
            )
        masks = np.zeros((k, n), dtype=bool)
        for j in range(0, k, 2):
            # Complementary pairs: every record is "in" for one model of each pair and
            # "out" for the other, so every record has both sides once k >= 2.
            half = rng.permutation(n)[: n // 2]
            masks[j, half] = True
            if j + 1 < k:
                masks[j + 1] = ~masks[j]
        z_idx = rng.choice(nonmember_idx, size=z_count, replace=False)
        return cls(
            members=np.flatnonzero(target_in),
            nonmembers=nonmember_idx,
            eval_nonmembers=np.setdiff1d(nonmember_idx, z_idx),
            population=z_idx,
            masks=masks,
        )


def reference_model_attack(
    train_fn: TrainFn,
    population_size: int,
    *,
    attacks: tuple[ReferenceAttack, ...] = (
        ReferenceAttack.LOSS,
        ReferenceAttack.LIRA_ONLINE,
        ReferenceAttack.LIRA_OFFLINE,
        ReferenceAttack.RMIA_OFFLINE,
    ),
    num_reference_models: int = 4,
    num_population_records: int | None = None,
    fprs: tuple[float, ...] = DEFAULT_FPRS,
    confidence: float = 0.95,
    seed: int | None = None,
    progress: bool = False,
    delta: float = 1e-5,
    significance: float = 0.05,
) -> tuple[ReferenceAttackResult, ...]:
    """Train a target and reference models with ``train_fn`` and run the attacks.

    Protocol (Carlini et al. 2022, §IV-C): the target trains on a random half
    of the population (its members); reference models come in complementary
    pairs (one trains on a random half, the other on the rest), so every record
    is "in" for exactly one model of each pair.
    Offline attacks use only the "out" models of each record.  For RMIA, a
    random subset of the target's non-members serves as the population z and is
    excluded from RMIA's evaluation; the other attacks score every non-member.
    Each result carries an ε/μ bound from a seeded held-out split of its scores
    (:func:`privfed.audit.lower_bound_random_split`), stated as a one-model bound:
    its records share one target, so they are not independent trials; the
    one-run estimator (canaries included at random) is the valid alternative.

    Args:
        train_fn: See :data:`TrainFn`.  Called 1 + ``num_reference_models`` times.
        population_size: N ≥ 8 records, indexed 0..N−1.
        attacks: Attacks to run.
        num_reference_models: k ≥ 2 (the attacks need an "in" and an "out"
            model for every record; an odd k adds one unpaired model).
        num_population_records: Size of RMIA's z set (default N // 4).
        fprs: FPRs for TPR reporting.
        confidence: Coverage of the intervals.
        seed: Seed of the membership draws (not of ``train_fn``'s own randomness).
        progress: Show a progress bar (tqdm if installed, else a counter on stderr).
        delta: δ of each result's ε lower bound, in [0, 1).
        significance: α of each result's bound, in (0, 1).

    Returns:
        One :class:`ReferenceAttackResult` per attack, in order.
    """
    if not callable(train_fn):
        raise ParameterTypeError("train_fn", "a callable", train_fn)
    n = check_int("population_size", population_size, minimum=8, numpy=True)
    k = check_int("num_reference_models", num_reference_models, minimum=2, numpy=True)
    if not attacks or not all(isinstance(a, ReferenceAttack) for a in attacks):
        raise ParameterError("attacks", "a non-empty tuple of ReferenceAttack", attacks)
    z_count = (
        n // 4
        if num_population_records is None
        else check_int("num_population_records", num_population_records, minimum=1, numpy=True)
    )
    level = check_probability("confidence", confidence, open_low=True, open_high=True)
    check_probability("delta", delta, open_low=False, open_high=True)
    check_probability("significance", significance, open_low=True, open_high=True)
    rng = np.random.default_rng(check_seed("seed", seed))
    design = _MembershipDesign.draw(n, k, z_count, rng)
    split_seed = int(rng.integers(2**31))
    target_p, ref_p = _train_models(train_fn, design, n, progress)
    target_phi = logit_scaled_confidence(target_p)
    ref_phi = logit_scaled_confidence(ref_p)

    results = []
    for attack in attacks:
        scores = _attack_scores(attack, (target_p, ref_p), (target_phi, ref_phi), design)
        needs_z = attack in (ReferenceAttack.RMIA_ONLINE, ReferenceAttack.RMIA_OFFLINE)
        members, nonmembers = (
            scores[design.members],
            scores[design.eval_nonmembers if needs_z else design.nonmembers],
        )
        results.append(
            ReferenceAttackResult(
                attack=attack,
                metrics=membership_metrics(members, nonmembers, fprs=fprs, confidence=level),
                num_reference_models=0 if attack is ReferenceAttack.LOSS else k,
                member_scores=members,
                nonmember_scores=nonmembers,
                bound=lower_bound_random_split(
                    members,
                    nonmembers,
                    spec=BoundSpec(delta, significance),
                    split=HeldOutSplit(seed=split_seed),
                    trials=TrialModel.ONE_MODEL,
                ),
            )
        )
    return tuple(results)


def _train_models(
    train_fn: TrainFn, design: _MembershipDesign, n: int, progress: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The target's and the ``k`` reference models' probabilities of every record, (N,), (k, N)."""
    k = design.masks.shape[0]
    tick = progress_ticker(1 + k, progress, "models (target + reference)")
    target_p = _train(train_fn, design.members.astype(np.int64), n)
    tick()
    ref_p = np.empty((k, n))
    for j in range(k):
        ref_p[j] = _train(train_fn, np.flatnonzero(design.masks[j]).astype(np.int64), n)
        tick()
    return target_p, ref_p


def _attack_scores(
    attack: ReferenceAttack,
    probabilities: tuple[NDArray[np.float64], NDArray[np.float64]],
    confidences: tuple[NDArray[np.float64], NDArray[np.float64]],
    design: _MembershipDesign,
) -> NDArray[np.float64]:
    """One attack's scores of every population record (target, then reference models)."""
    target_phi, ref_phi = confidences
    if attack is ReferenceAttack.LOSS:
        return target_phi
    if attack is ReferenceAttack.LIRA_ONLINE:
        return lira_scores(target_phi, ref_phi, design.masks, online=True)
    if attack is ReferenceAttack.LIRA_OFFLINE:
        return lira_scores(target_phi, ref_phi, design.masks, online=False)
    online = attack is ReferenceAttack.RMIA_ONLINE
    return _rmia_all(*probabilities, design.masks, design.population, online=online)


def _rmia_all(
    target_p: NDArray[np.float64],
    ref_p: NDArray[np.float64],
    masks: NDArray[np.bool_],
    z_idx: NDArray[np.int64],
    *,
    online: bool,
) -> NDArray[np.float64]:
    """RMIA over the whole population, with Pr(·) from all models (online) or out models."""
    if online:
        return rmia_scores(
            target_p,
            ref_p,
            target_p[z_idx],
            ref_p[:, z_idx],
            reference_in_mask=masks,
        )
    # Offline: average only the models for which the record is out.
    out = ~masks
    if np.any(out.sum(axis=0) == 0):
        raise AuditError("some records have no 'out' reference model; train more")
    mean_out = np.where(out, ref_p, 0.0).sum(axis=0) / out.sum(axis=0)
    return rmia_scores(target_p, mean_out[None, :], target_p[z_idx], mean_out[None, z_idx])
