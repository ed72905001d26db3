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

import math
from pathlib import Path
from typing import Any

import numpy as np

from privfed.audit import SyntheticReleaseAudit
from privfed.dp import Adjacency, gdp_epsilon
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "AUDIT_INPUTS_FILENAME",
    "AUDIT_INPUT_ARRAYS",
    "audit_skip_reason",
    "audit_summary",
    "save_audit_inputs",
]

#: File name of the audit inputs in a run directory; equal to
#: ``privfed.cli.audit.AUDIT_INPUTS_FILENAME`` (a test checks it), repeated here
#: so the pipeline does not import the command-line layer.
AUDIT_INPUTS_FILENAME = "audit_inputs.npz"

#: Arrays of ``audit_inputs.npz`` (the format ``privfed audit --run-dir`` reads).
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
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParameterError(name, "an int >= 0", value)
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


def audit_summary(
    audit: SyntheticReleaseAudit,
    *,
    claimed_epsilon: float,
    claimed_delta: float,
    claimed_mu: float,
    adjacency: Adjacency,
) -> dict[str, Any]:
    """Compact JSON-ready view of an audit next to the ledger's claim.

    Args:
        audit: The result of :func:`privfed.audit.audit_synthetic_release`
            (with ``delta`` given, so every attack carries a held-out bound).
        claimed_epsilon: ε of the release, finite ``> 0``.
        claimed_delta: δ of the release, in ``(0, 1)``; also the δ of the bounds.
        claimed_mu: μ-GDP of the release under ``adjacency``, finite ``> 0``.
        adjacency: Neighbouring relation of the claim.

    Returns:
        ``{"claimed": {...}, "attacks": {name: {...}}, ...}``: per attack the
        AUC with its interval, the TPR with Clopper–Pearson interval at each
        FPR the non-member count supports, and the ε/μ lower bounds (holding
        with confidence ``1 - significance``) with ``exceeds_claim``: whether a
        bound is above what the claim allows for the membership game (see the
        module docstring).  ``"best"`` names the attack with the highest AUC
        lower confidence limit.  ``exceeds_claim`` true is evidence of a bug or of a
        broken assumption, at false-alarm rate at most ``significance`` per
        attack.
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
    attacks: dict[str, Any] = {}
    for item in audit.results:
        m = item.metrics
        entry: dict[str, Any] = {
            "auc": {"estimate": m.auc.estimate, "lower": m.auc.lower, "upper": m.auc.upper},
            "tpr_at_fpr": [
                {
                    "fpr": t.target_fpr,
                    "tpr": t.tpr.estimate,
                    "lower": t.tpr.lower,
                    "upper": t.tpr.upper,
                }
                for t in m.tpr_at_fpr
                if t.supported
            ],
        }
        if item.bound is not None:
            b = item.bound
            entry.update(
                epsilon_lower_bound=b.epsilon_lower_bound,
                mu_lower_bound=b.mu_lower_bound,
                significance=b.significance,
                exceeds_claim=bool(
                    b.epsilon_lower_bound > game_epsilon or b.mu_lower_bound > game_mu
                ),
            )
        attacks[item.attack.value] = entry
    return {
        "members": audit.num_members,
        "nonmembers": audit.num_nonmembers,
        "reference": audit.num_reference,
        "confidence": audit.confidence,
        "data": {
            "members": "clipped latents of the records in the secure-aggregation total",
            "nonmembers": "test split (never used by the release)",
            "reference": "public split (codec fit; attacker's population knowledge)",
        },
        "claimed": {
            "epsilon": claimed_epsilon,
            "delta": claimed_delta,
            "mu": claimed_mu,
            "adjacency": adjacency.value,
            "game_epsilon": game_epsilon,
            "game_mu": game_mu,
        },
        "best": audit.best().attack.value,
        "attacks": attacks,
    }


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
