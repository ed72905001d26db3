"""The default membership-inference audit stage of the latent-statistic job.

Who is what (the choice, and why it is honest):

* **Members** are the records whose statistics reached the release: the
  private records of every client that survived secure aggregation (clients
  that dropped out after sending their masked input are included, those that
  dropped before are not).  Each is taken as the clipped, grid-quantized latent
  that entered the sums (exactly ``q / 2**f`` of
  :mod:`privfed.engines.latent.statistics`), which the noisy-sum likelihood-ratio
  attack needs.
* **Non-members** are the whole held-out test split.  Its records never touch
  the release or the synthetic data; the downstream classifier is only
  *evaluated* on them, which influences nothing the audit reads, so using them
  as non-members costs the classifier evaluation nothing and gives the audit
  the largest non-member set available.
* **Reference** (the attacker's population knowledge, used to fit population
  densities and per-class moments) is the public split, which the codec was
  fitted on and which is public by construction.  It is disjoint from members
  and non-members, so no record is both fitted and scored.

All three go through the same clipping and quantization, so an attack cannot
tell members from non-members by an artefact of clipping alone.  Records of
clients that dropped out before masking are in neither group.

The membership game is "a member versus a fresh population record in its
place, class counts fixed", i.e. a randomised replace-one neighbour.  A
replace-one claim therefore bounds the game directly; an add/remove claim of
μ-GDP bounds it by 2μ-GDP (group privacy), and the ε the game is compared with
is then the ε of 2μ-GDP at the same δ.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from privfed._checks import check_int
from privfed._records import field_dict
from privfed.audit import SyntheticReleaseAudit
from privfed.dp import Adjacency, gdp_epsilon
from privfed.engines.artifacts import (
    AUDIT_INPUT_ARRAYS,
    AUDIT_INPUTS_FILENAME,
    AuditInputs,
    save_audit_inputs,
)
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "AUDIT_INPUTS_FILENAME",
    "AUDIT_INPUT_ARRAYS",
    "AttackSummary",
    "AuditClaim",
    "AuditInputs",
    "AuditSkipped",
    "AuditSummary",
    "Interval",
    "TprAtFpr",
    "audit_skip_reason",
    "audit_summary",
    "save_audit_inputs",
]

def audit_skip_reason(*, members: int, nonmembers: int, reference: int) -> str | None:
    """Why the default audit cannot run on this many records, or ``None`` if it can.

    The attacks need at least 4 members and 4 non-members; the held-out bound
    splits each group in half, and the per-class reference fits need 2 rows.

    Args:
        members: Member records (``>= 0``).
        nonmembers: Non-member records (``>= 0``).
        reference: Reference records (``>= 0``).

    Returns:
        A short plain-language reason, or ``None``.
    """
    for name, value in (("members", members), ("nonmembers", nonmembers), ("reference", reference)):
        check_int(name, value, minimum=0, type_error=False)
    if members < 4 or nonmembers < 4:
        return f"needs >= 4 members and non-members, has {members} and {nonmembers}"
    if reference < 2:
        return f"needs >= 2 reference records, has {reference}"
    return None


def _game_claim(
    epsilon: float, delta: float, mu: float, adjacency: Adjacency
) -> tuple[float, float]:
    """The (ε, μ) the replace-one membership game is bounded by under the claim."""
    if adjacency is Adjacency.REPLACE_ONE:
        return epsilon, mu
    return gdp_epsilon(2.0 * mu, delta), 2.0 * mu


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval (all in the same units)."""

    estimate: float
    lower: float
    upper: float


@dataclass(frozen=True)
class TprAtFpr:
    """True-positive rate with its Clopper–Pearson interval at one target FPR."""

    fpr: float
    tpr: float
    lower: float
    upper: float


@dataclass(frozen=True)
class AttackSummary:
    """One attack's figures next to the claim.

    Attributes:
        auc: AUC with its interval.
        tpr_at_fpr: TPR at every target FPR the non-member count supports.
        epsilon_lower_bound: Held-out ε lower bound (``None`` without a bound).
        mu_lower_bound: Held-out μ lower bound (``None`` without a bound).
        significance: α of both bounds (``None`` without a bound).
        exceeds_claim: Whether a bound is above what the claim allows for the
            membership game (``None`` without a bound).
    """

    auc: Interval
    tpr_at_fpr: tuple[TprAtFpr, ...]
    epsilon_lower_bound: float | None = None
    mu_lower_bound: float | None = None
    significance: float | None = None
    exceeds_claim: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON view (the bound's keys only when a bound was computed)."""
        out: dict[str, Any] = {
            "auc": dataclasses.asdict(self.auc),
            "tpr_at_fpr": [dataclasses.asdict(t) for t in self.tpr_at_fpr],
        }
        if self.epsilon_lower_bound is not None:
            out.update(
                epsilon_lower_bound=self.epsilon_lower_bound,
                mu_lower_bound=self.mu_lower_bound,
                significance=self.significance,
                exceeds_claim=self.exceeds_claim,
            )
        return out


@dataclass(frozen=True)
class AuditClaim:
    """The ledger's claim, and what it allows for the replace-one membership game."""

    epsilon: float
    delta: float
    mu: float
    adjacency: str
    game_epsilon: float
    game_mu: float


#: Who plays which role in the default audit (stated in every summary).
AUDIT_ROLES: Mapping[str, str] = MappingProxyType(
    {
        "members": "clipped latents of the records in the secure-aggregation total",
        "nonmembers": "test split (never used by the release)",
        "reference": "public split (codec fit; attacker's population knowledge)",
    }
)


@dataclass(frozen=True)
class AuditSummary:
    """Compact view of the default audit next to the ledger's claim.

    Attributes:
        members: Member records audited.
        nonmembers: Non-member records audited.
        reference: Reference (population) records.
        confidence: Level of the intervals.
        claim: The claim the bounds are compared with.
        best: Attack with the highest AUC lower confidence limit.
        attacks: Per-attack figures, in the order the attacks ran.
    """

    members: int
    nonmembers: int
    reference: int
    confidence: float
    claim: AuditClaim
    best: str
    attacks: Mapping[str, AttackSummary] = field(default_factory=dict)

    @property
    def exceeds_claim(self) -> bool:
        """Whether any attack's bound exceeds what the claim allows."""
        return any(bool(a.exceeds_claim) for a in self.attacks.values())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written into ``report.json``."""
        return {
            **field_dict(self, "members", "nonmembers", "reference", "confidence"),
            "data": dict(AUDIT_ROLES),
            "claimed": dataclasses.asdict(self.claim),
            "best": self.best,
            "attacks": {name: a.to_dict() for name, a in self.attacks.items()},
        }


@dataclass(frozen=True)
class AuditSkipped:
    """The audit stage did not run on this data, and why."""

    reason: str

    def to_dict(self) -> dict[str, Any]:
        """``{"skipped": reason}``."""
        return {"skipped": self.reason}


def audit_summary(
    audit: SyntheticReleaseAudit,
    *,
    claimed_epsilon: float,
    claimed_delta: float,
    claimed_mu: float,
    adjacency: Adjacency,
) -> AuditSummary:
    """Compact view of an audit next to the ledger's claim.

    Args:
        audit: The result of :func:`privfed.audit.audit_synthetic_release`
            (with ``delta`` given, so every attack carries a held-out bound).
        claimed_epsilon: ε of the release, finite ``> 0``.
        claimed_delta: δ of the release, in ``(0, 1)``; also the δ of the bounds.
        claimed_mu: μ-GDP of the release under ``adjacency``, finite ``> 0``.
        adjacency: Neighbouring relation of the claim.

    Returns:
        An :class:`AuditSummary`: per attack the AUC with its interval, the
        TPR with Clopper–Pearson interval at each FPR the non-member count
        supports, and the ε/μ lower bounds (holding with confidence
        ``1 - significance``) with ``exceeds_claim``: whether a bound is above
        what the claim allows for the membership game (see the module
        docstring).  ``best`` names the attack with the highest AUC lower
        confidence limit.  ``exceeds_claim`` true is evidence of a bug or of a
        broken assumption, at false-alarm rate at most ``significance`` per
        attack.  ``to_dict()`` is the JSON form of ``report.json``.
    """
    if not isinstance(audit, SyntheticReleaseAudit):
        raise ParameterTypeError("audit", "a SyntheticReleaseAudit", audit)
    if not isinstance(adjacency, Adjacency):
        raise ParameterTypeError("adjacency", "an Adjacency", adjacency)
    for name, value in (("claimed_epsilon", claimed_epsilon), ("claimed_mu", claimed_mu)):
        if not math.isfinite(value) or value <= 0:
            raise ParameterError(name, "a finite float > 0", value)
    if not 0.0 < claimed_delta < 1.0:
        raise ParameterError("claimed_delta", "a float in (0, 1)", claimed_delta)
    game_epsilon, game_mu = _game_claim(claimed_epsilon, claimed_delta, claimed_mu, adjacency)
    attacks: dict[str, AttackSummary] = {}
    for item in audit.results:
        m = item.metrics
        bound: dict[str, Any] = {}
        if item.bound is not None:
            b = item.bound
            bound = {
                "epsilon_lower_bound": b.epsilon_lower_bound,
                "mu_lower_bound": b.mu_lower_bound,
                "significance": b.significance,
                "exceeds_claim": bool(
                    b.epsilon_lower_bound > game_epsilon or b.mu_lower_bound > game_mu
                ),
            }
        attacks[item.attack.value] = AttackSummary(
            auc=Interval(m.auc.estimate, m.auc.lower, m.auc.upper),
            tpr_at_fpr=tuple(
                TprAtFpr(t.target_fpr, t.tpr.estimate, t.tpr.lower, t.tpr.upper)
                for t in m.tpr_at_fpr
                if t.supported
            ),
            **bound,
        )
    return AuditSummary(
        members=audit.num_members,
        nonmembers=audit.num_nonmembers,
        reference=audit.num_reference,
        confidence=audit.confidence,
        claim=AuditClaim(
            epsilon=claimed_epsilon,
            delta=claimed_delta,
            mu=claimed_mu,
            adjacency=adjacency.value,
            game_epsilon=game_epsilon,
            game_mu=game_mu,
        ),
        best=audit.best().attack.value,
        attacks=attacks,
    )
