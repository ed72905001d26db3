"""Unlearning verified by membership inference: the empirical check beside the proof.

:meth:`FactoryMatrix.remove_client <privfed.engines.factory.FactoryMatrix.remove_client>`
unlearns *exactly*: the certificate names every removed factory and sample, and
the buffer afterwards is bit-identical to that of a matrix that never held the
client.  Regulators and ethics boards still ask for the check the literature
uses (attack the original model with the forgotten records as members, attack
the unlearned one, attack one retrained without them, and compare):

1. the same membership-inference adversary scores the removed client's records
   (*members*) and held-out records of the same classes (*non-members*)
   against three synthetic outputs: the original matrix's, the unlearned
   matrix's and that of a matrix retrained from scratch without the client;
2. each attack's AUC comes with a DeLong confidence interval
   (:func:`privfed.audit.auc_with_interval`), and the difference
   ``AUC_unlearned − AUC_retrained`` with a *paired* DeLong interval (the two
   AUCs score the same records, so their errors are correlated);
3. unlearning is accepted when ``|AUC_unlearned − AUC_retrained| <=
   tolerance`` (0.05 by default).

The adversary is black-box on the synthetic data, as a recipient of the release
would be: the class-conditional distance to the closest synthetic record
(a record's score is minus its Euclidean pixel distance to the nearest
synthetic sample of its own class; of any class when the unlearned output has
none of that class), the attack that catches memorising factories.

Reading the result:

* With exact unlearning and deterministic factories (fixed training seeds),
  the unlearned and retrained outputs are identical, the difference is exactly
  0 and the check cannot fail; with factories retrained with fresh randomness
  (unseeded DP-SGD), the two AUCs differ by sampling error, and
  :attr:`MembershipUnlearningCheck.false_failure_rate` estimates the chance
  that a *correct* unlearning fails the tolerance (normal approximation,
  ``2·(1 − Φ(tolerance / se))`` with ``se`` the paired standard error).
* The check has power only when the adversary detects the client in the
  original matrix (:attr:`MembershipUnlearningCheck.detects_original`: the
  original AUC's interval lies above the retrained one's).  A pass without
  that says only that no leak was visible to this adversary, never that the
  data was forgotten: exactness rests on the certificate, not on this test.
* The members are private records and the check is evaluation, not part of
  any release; its result holds AUCs only (no record, no score).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import torch

from privfed._checks import check_float, check_instance, check_probability
from privfed._records import set_fields
from privfed.audit.metrics import ConfidenceInterval, auc_with_interval
from privfed.audit.synthetic import distance_to_closest_record_scores
from privfed.engines.factory.base import ClientId
from privfed.engines.factory.matrix import FactoryMatrix, SyntheticDataset, UnlearningCertificate
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "DEFAULT_TOLERANCE",
    "MIA_ATTACK",
    "MembershipProbe",
    "MembershipUnlearningCheck",
    "class_conditional_dcr_scores",
    "membership_unlearning_check",
    "remove_client_verified",
]

#: Largest accepted ``|AUC_unlearned − AUC_retrained|`` by default.
DEFAULT_TOLERANCE: Final = 0.05

#: The adversary's name as results record it.
MIA_ATTACK: Final = "class-conditional distance to closest synthetic record (pixels)"


@dataclass(frozen=True)
class MembershipUnlearningCheck:
    """Outcome of :func:`membership_unlearning_check` (evaluation; AUCs only).

    Attributes:
        attack: The adversary (:data:`MIA_ATTACK`).
        auc_original: AUC against the original matrix's synthetic output.
        auc_unlearned: AUC against the unlearned matrix's output.
        auc_retrained: AUC against the output of a matrix retrained without
            the client.
        difference: ``AUC_unlearned − AUC_retrained`` with a paired DeLong
            interval at the same confidence.
        tolerance: The acceptance tolerance on ``|difference.estimate|``.
        accepted: ``|difference.estimate| <= tolerance``.
        detects_original: Whether the adversary detects the client in the
            original matrix (``auc_original.lower > auc_retrained.upper``);
            without it the check has no power (see the module notes).
        false_failure_rate: Estimated probability that a correct unlearning
            (true difference 0) fails the tolerance: ``2·(1 − Φ(tolerance /
            se))`` with the paired standard error ``se``; 0 when ``se == 0``
            (identical outputs).
        num_members: Members scored (the removed client's records).
        num_nonmembers: Non-members scored (held-out records).
    """

    attack: str
    auc_original: ConfidenceInterval
    auc_unlearned: ConfidenceInterval
    auc_retrained: ConfidenceInterval
    difference: ConfidenceInterval
    tolerance: float
    accepted: bool
    detects_original: bool
    false_failure_rate: float
    num_members: int
    num_nonmembers: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (as the unlearning certificate embeds it)."""
        return {
            "attack": self.attack,
            "auc_original": self.auc_original.to_dict(),
            "auc_unlearned": self.auc_unlearned.to_dict(),
            "auc_retrained": self.auc_retrained.to_dict(),
            "difference": self.difference.to_dict(),
            "tolerance": self.tolerance,
            "accepted": self.accepted,
            "detects_original": self.detects_original,
            "false_failure_rate": self.false_failure_rate,
            "num_members": self.num_members,
            "num_nonmembers": self.num_nonmembers,
            "note": (
                "evaluation on private records, not part of any release; exact unlearning "
                "is proved by the certificate's provenance, this is the empirical check"
            ),
        }


def _flat(name: str, images: object) -> npt.NDArray[np.float64]:
    if isinstance(images, torch.Tensor):
        array = images.detach().cpu().to(torch.float64).numpy()
    else:
        array = np.asarray(images, dtype=np.float64)
    if array.ndim < 2 or array.shape[0] < 1:
        raise ParameterError(name, "an array of >= 1 records, (N, ...)", tuple(array.shape))
    if not np.all(np.isfinite(array)):
        raise ParameterError(name, "finite values", "non-finite entries")
    return array.reshape(array.shape[0], -1)


def _labels(name: str, labels: object, count: int) -> npt.NDArray[np.int64]:
    if isinstance(labels, torch.Tensor):
        array = labels.detach().cpu().numpy()
    else:
        array = np.asarray(labels)
    if array.shape != (count,) or not np.issubdtype(array.dtype, np.integer):
        raise ParameterError(name, f"{count} integer labels, shape ({count},)", array.shape)
    return array.astype(np.int64)


@dataclass(frozen=True, eq=False)
class MembershipProbe:
    """The records the unlearning check attacks with, and how strict its verdict is.

    Taken as one argument (``probe=``) by :func:`membership_unlearning_check`
    and :func:`remove_client_verified`.  Checked here, once: the records are
    stored as float64 ``(N, features)`` arrays and the labels as int64.

    Attributes:
        members: The removed client's records ``(m, ...)``, m >= 2, in the
            synthetic data's pixel units (numpy or torch).
        member_labels: Their classes ``(m,)``.
        nonmembers: Held-out records no factory saw, ``(n, ...)``, n >= 2,
            of the same classes as the members.
        nonmember_labels: Their classes ``(n,)``.
        tolerance: Largest accepted ``|AUC_unlearned − AUC_retrained|``, in (0, 1).
        confidence: Coverage of every interval, in (0, 1).

    Raises:
        ParameterError: Fewer than 2 members or non-members, bad shapes,
            labels, tolerance or confidence.
    """

    members: Any
    member_labels: Any
    nonmembers: Any
    nonmember_labels: Any
    tolerance: float = DEFAULT_TOLERANCE
    confidence: float = 0.95

    def __post_init__(self) -> None:
        tol = check_float(
            "tolerance", self.tolerance, low=0, high=1, open_low=True, open_high=True, numpy=False
        )
        level = check_probability("confidence", self.confidence)
        m = _flat("members", self.members)
        n = _flat("nonmembers", self.nonmembers)
        if m.shape[0] < 2 or n.shape[0] < 2:
            raise ParameterError(
                "members/nonmembers", "at least 2 records each", (m.shape[0], n.shape[0])
            )
        set_fields(
            self,
            members=m,
            member_labels=_labels("member_labels", self.member_labels, m.shape[0]),
            nonmembers=n,
            nonmember_labels=_labels("nonmember_labels", self.nonmember_labels, n.shape[0]),
            tolerance=tol,
            confidence=level,
        )


def class_conditional_dcr_scores(
    records: object, labels: object, synthetic: SyntheticDataset
) -> npt.NDArray[np.float64]:
    """The adversary's scores: minus the distance to the nearest synthetic sample of the class.

    Args:
        records: Images ``(N, ...)`` to score, in the synthetic data's pixel units.
        labels: Their classes ``(N,)``.
        synthetic: The synthetic output attacked (at least one sample).  A
            record whose class has no synthetic sample is scored against all
            samples.

    Returns:
        float64 ``(N,)``, ``<= 0``; higher is more member-like.

    Raises:
        ParameterError: Empty or non-finite inputs, mismatched shapes.
    """
    if not isinstance(synthetic, SyntheticDataset):
        raise ParameterTypeError("synthetic", "a SyntheticDataset", synthetic)
    x = _flat("records", records)
    y = _labels("labels", labels, x.shape[0])
    if len(synthetic) == 0:
        raise ParameterError("synthetic", "a synthetic dataset with >= 1 sample", "empty")
    s = _flat("synthetic.images", synthetic.images)
    if s.shape[1] != x.shape[1]:
        raise ParameterError("records", f"records of {s.shape[1]} pixels", x.shape[1])
    s_labels = synthetic.labels.detach().cpu().numpy().astype(np.int64)
    out = np.empty(x.shape[0])
    for c in np.unique(y):
        rows = y == c
        pool = s[s_labels == c]
        out[rows] = distance_to_closest_record_scores(x[rows], pool if pool.shape[0] else s)
    return out


def _placements(
    members: npt.NDArray[np.float64], nonmembers: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """DeLong placement values: per member, per non-member (ties count one half)."""
    greater = members[:, None] > nonmembers[None, :]
    ties = members[:, None] == nonmembers[None, :]
    kernel = greater + 0.5 * ties
    return kernel.mean(axis=1), kernel.mean(axis=0)


def _paired_difference(
    unlearned: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    retrained: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    confidence: float,
) -> tuple[ConfidenceInterval, float]:
    """``AUC_u − AUC_r`` with the paired DeLong interval, and its standard error."""
    from scipy import stats

    u10, u01 = _placements(*unlearned)
    r10, r01 = _placements(*retrained)
    d10, d01 = u10 - r10, u01 - r01
    estimate = float(d10.mean())
    variance = float(np.var(d10, ddof=1) / d10.size + np.var(d01, ddof=1) / d01.size)
    se = math.sqrt(max(variance, 0.0))
    half = float(stats.norm.isf((1.0 - confidence) / 2.0)) * se
    lower, upper = max(-1.0, estimate - half), min(1.0, estimate + half)
    return ConfidenceInterval(estimate, lower, upper, confidence, "paired-delong"), se


def membership_unlearning_check(
    original: SyntheticDataset,
    unlearned: SyntheticDataset,
    retrained: SyntheticDataset,
    probe: MembershipProbe,
) -> MembershipUnlearningCheck:
    """Run the MIA unlearning check on three synthetic outputs.

    Args:
        original: Synthetic output of the matrix that held the client.
        unlearned: Synthetic output of the same matrix after the removal.
        retrained: Synthetic output of a matrix retrained from scratch without
            the client (same synthesis runs as ``unlearned``, so that only the
            removal differs).
        probe: The attack's members and non-members with their labels, the
            tolerance and the confidence (:class:`MembershipProbe`).

    Returns:
        The AUCs with intervals, the verdict and its false-failure rate.

    Raises:
        ParameterTypeError: An output is not a :class:`SyntheticDataset`, or
            ``probe`` is not a :class:`MembershipProbe`.
    """
    checked = check_instance("probe", probe, MembershipProbe)
    tol, level = checked.tolerance, checked.confidence
    m, my, n, ny = (
        checked.members,
        checked.member_labels,
        checked.nonmembers,
        checked.nonmember_labels,
    )
    scores: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
    for name, output in (
        ("original", original),
        ("unlearned", unlearned),
        ("retrained", retrained),
    ):
        if not isinstance(output, SyntheticDataset):
            raise ParameterTypeError(name, "a SyntheticDataset", output)
        scores[name] = (
            class_conditional_dcr_scores(m, my, output),
            class_conditional_dcr_scores(n, ny, output),
        )
    aucs = {name: auc_with_interval(*pair, confidence=level) for name, pair in scores.items()}
    difference, se = _paired_difference(scores["unlearned"], scores["retrained"], level)
    if se > 0.0:
        from scipy import stats

        false_failure = float(2.0 * stats.norm.sf(tol / se))
    else:
        false_failure = 0.0
    return MembershipUnlearningCheck(
        attack=MIA_ATTACK,
        auc_original=aucs["original"],
        auc_unlearned=aucs["unlearned"],
        auc_retrained=aucs["retrained"],
        difference=difference,
        tolerance=tol,
        accepted=abs(difference.estimate) <= tol,
        detects_original=aucs["original"].lower > aucs["retrained"].upper,
        false_failure_rate=false_failure,
        num_members=int(m.shape[0]),
        num_nonmembers=int(n.shape[0]),
    )


def remove_client_verified(
    matrix: FactoryMatrix,
    client_id: ClientId,
    *,
    retrain: Callable[[], FactoryMatrix],
    probe: MembershipProbe,
) -> tuple[UnlearningCertificate, MembershipUnlearningCheck]:
    """Remove a client exactly, then verify the removal by membership inference.

    The original output is the matrix's buffer before the removal (it must
    hold samples: synthesize first); the unlearned output is its buffer after
    :meth:`FactoryMatrix.remove_client`; ``retrain()`` builds a fresh matrix
    from scratch without the client, which replays the original matrix's
    synthesis runs (same seeds and sizes) to give the retrained output.  It
    costs a full retrain of the remaining factories: the check is optional.

    Args:
        matrix: The matrix to unlearn from (mutated: the client is removed).
        client_id: The client to remove.
        retrain: Builds and returns a matrix trained without the client (an
            empty buffer; this function synthesizes on it).
        probe: The check's records and settings (:class:`MembershipProbe`).

    Returns:
        The unlearning certificate with the check in its
        ``membership_check`` field, and the check.

    Raises:
        ParameterError: The matrix's buffer is empty, the client holds no
            factory, or the retrained matrix still holds the client (the matrix
            is then unchanged: everything is validated before the removal).
        ParameterTypeError: ``retrain`` does not return a :class:`FactoryMatrix`,
            or ``probe`` is not a :class:`MembershipProbe`.
    """
    if not isinstance(matrix, FactoryMatrix):
        raise ParameterTypeError("matrix", "a FactoryMatrix", matrix)
    check_instance("probe", probe, MembershipProbe)
    if not callable(retrain):
        raise ParameterTypeError("retrain", "a callable returning a FactoryMatrix", retrain)
    original = matrix.buffer
    if len(original) == 0:
        raise ParameterError("matrix", "a matrix with synthesized samples (its buffer)", "empty")
    if client_id not in matrix.clients:
        raise ParameterError("client_id", f"a client in {list(matrix.clients)}", client_id)
    if set(matrix.clients) == {client_id}:
        raise ParameterError(
            "client_id",
            "a client other than the matrix's only one (nothing would be left)",
            client_id,
        )
    runs = matrix.synthesis_runs
    fresh = retrain()
    if not isinstance(fresh, FactoryMatrix):
        raise ParameterTypeError("retrain", "a callable returning a FactoryMatrix", fresh)
    if client_id in fresh.clients:
        raise ParameterError("retrain", "a matrix without the removed client", client_id)
    for seed, n_per_class in runs:
        fresh.synthesize(n_per_class, seed=seed)

    def check_against(unlearned: SyntheticDataset) -> MembershipUnlearningCheck:
        return membership_unlearning_check(original, unlearned, fresh.buffer, probe)

    # Validates every input before anything is removed (same inputs, original twice).
    check_against(original)
    certificate = matrix.remove_client(client_id)
    check = check_against(matrix.buffer)
    return replace(certificate, membership_check=check.to_dict()), check
