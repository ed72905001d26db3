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
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from privfed._checks import check_int
from privfed._records import field_dict
from privfed.audit import SyntheticReleaseAudit
from privfed.dp import Adjacency, gdp_epsilon
from privfed.engines.job import AUDIT_INPUTS_FILENAME
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

#: Arrays of ``audit_inputs.npz`` (the format ``privfed audit --run-dir`` reads), in
#: the order they are written (kept stable, so equal inputs give equal bytes).
AUDIT_INPUT_ARRAYS: tuple[str, ...] = (
    "member_latents",
    "nonmember_latents",
    "synthetic_latents",
    "member_labels",
    "nonmember_labels",
    "synthetic_labels",
    "reference_latents",
    "reference_labels",
    "noisy_sums",
    "counts",
    "noise_std_sum",
)


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


@dataclass(frozen=True, eq=False)
class AuditInputs:
    """The arrays of ``audit_inputs.npz``: what the default audit reads.

    Attributes:
        member_latents: Float ``(n1, d)``: clipped, grid-quantized latents of
            the records in the release.
        nonmember_latents: Float ``(n0, d)``: the same for held-out records.
        synthetic_latents: Float ``(s, d)``: the released synthetic latents.
        member_labels / nonmember_labels / synthetic_labels: Int labels, or
            ``None`` (one pooled class).
        reference_latents / reference_labels: The attacker's population
            knowledge (public split), or ``None``.
        noisy_sums: Float ``(C, d)``: the released noisy per-class sums, in
            latent units, or ``None``.
        counts: Float ``(C,)``: the counts the attacker sees, or ``None``.
        noise_std_sum: The sums' noise std (latent units), or ``None``.

    Everything in it is either public release output or real records' latents:
    treat it (and the file) as private data.
    """

    member_latents: np.ndarray = field(repr=False)
    nonmember_latents: np.ndarray = field(repr=False)
    synthetic_latents: np.ndarray = field(repr=False)
    member_labels: np.ndarray | None = field(default=None, repr=False)
    nonmember_labels: np.ndarray | None = field(default=None, repr=False)
    synthetic_labels: np.ndarray | None = field(default=None, repr=False)
    reference_latents: np.ndarray | None = field(default=None, repr=False)
    reference_labels: np.ndarray | None = field(default=None, repr=False)
    noisy_sums: np.ndarray | None = field(default=None, repr=False)
    counts: np.ndarray | None = field(default=None, repr=False)
    noise_std_sum: float | None = None

    def __post_init__(self) -> None:
        for name in AUDIT_INPUT_ARRAYS[:3]:
            if getattr(self, name) is None:
                raise ParameterError(name, "an array", None)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays that are present, by their ``.npz`` names."""
        out: dict[str, np.ndarray] = {}
        for name in AUDIT_INPUT_ARRAYS:
            value = getattr(self, name)
            if value is not None:
                scalar = name == "noise_std_sum"
                out[name] = np.asarray(value, dtype=np.float64) if scalar else value
        return out

    def save(self, path: str | Path) -> None:
        """Write them as an uncompressed ``.npz`` without pickled objects."""
        save_audit_inputs(path, self.arrays())

    @classmethod
    def load(cls, path: str | Path) -> AuditInputs:
        """Read ``audit_inputs.npz`` written by :meth:`save`.

        Raises:
            ParameterError: The file is missing, not an ``.npz`` archive, lacks a
                required array or has an unknown one.
        """
        file = Path(path)
        if not file.is_file():
            raise ParameterError("run_dir", f"a directory holding {file.name}", str(file))
        try:
            with np.load(file, allow_pickle=False) as data:
                arrays = {k: np.asarray(data[k]) for k in data.files}
        except (OSError, ValueError) as exc:
            raise ParameterError(
                "run_dir", f"a readable {file.name} (.npz archive)", str(file)
            ) from exc
        missing = [k for k in AUDIT_INPUT_ARRAYS[:3] if k not in arrays]
        if missing:
            raise ParameterError("run_dir", f"a {file.name} with {AUDIT_INPUT_ARRAYS[:3]}", missing)
        unknown = sorted(set(arrays) - set(AUDIT_INPUT_ARRAYS))
        if unknown:
            raise ParameterError(
                "run_dir", f"a {file.name} with arrays among {AUDIT_INPUT_ARRAYS}", unknown
            )
        values: dict[str, Any] = dict(arrays)
        if "noise_std_sum" in values:
            values["noise_std_sum"] = float(values["noise_std_sum"])
        return cls(**values)

    def run(
        self,
        *,
        delta: float,
        seed: int | None,
        significance: float = 0.05,
        confidence: float = 0.95,
        fprs: tuple[float, ...] | None = None,
    ) -> SyntheticReleaseAudit:
        """Run :func:`privfed.audit.audit_synthetic_release` on these inputs."""
        from privfed.audit import audit_synthetic_release

        extra: dict[str, Any] = {} if fprs is None else {"fprs": fprs}
        # The optional inputs are keyword arguments of the same names.
        return audit_synthetic_release(
            self.member_latents,
            self.nonmember_latents,
            self.synthetic_latents,
            **field_dict(self, *AUDIT_INPUT_ARRAYS[3:]),
            delta=delta,
            significance=significance,
            confidence=confidence,
            seed=seed,
            **extra,
        )


def save_audit_inputs(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write the audit's inputs as an uncompressed ``.npz`` without pickled objects.

    Args:
        path: Destination file (conventionally ``AUDIT_INPUTS_FILENAME`` of
            :mod:`privfed.cli.audit` inside a run directory).
        arrays: Keys among :data:`AUDIT_INPUT_ARRAYS`, the first three
            required; latents float ``(n, d)``, labels int ``(n,)``,
            ``noisy_sums`` ``(C, d)``, ``counts`` ``(C,)``, ``noise_std_sum``
            a scalar (latent units).  Everything in it is either public
            release output or real records' latents: treat the file as
            containing private data.

    Raises:
        ParameterError: On a missing required key or an unknown key.
    """
    missing = [k for k in AUDIT_INPUT_ARRAYS[:3] if k not in arrays]
    if missing:
        raise ParameterError("arrays", f"a dict with {AUDIT_INPUT_ARRAYS[:3]}", missing)
    unknown = sorted(set(arrays) - set(AUDIT_INPUT_ARRAYS))
    if unknown:
        raise ParameterError("arrays", f"keys among {AUDIT_INPUT_ARRAYS}", unknown)
    payload: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}
    np.savez(path, allow_pickle=False, **payload)
