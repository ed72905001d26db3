"""Membership inference against synthetic data and released latent Gaussians (pure).

Attacks, each returning one score per query record (higher ⇒ "member"):

* :func:`distance_to_closest_record_scores` -- minus the L2 distance to the
  nearest synthetic record (a generator that copies its training data puts
  members at distance ≈ 0).
* :func:`density_ratio_scores` -- DOMIAS (van Breugel et al. 2023,
  arXiv:2302.12580): log p_synth(x) − log p_ref(x), with densities from
  Gaussian fits or a Gaussian KDE in a feature or latent space.  Overfitting
  shows up as local density excess over the population.
* :func:`latent_gaussian_likelihood_ratio_scores` -- for privfed's
  class-conditional latent Gaussians: log N(x; μ̂_c, Σ̂_c) − log N(x; μ_ref,c, Σ_ref,c).
* :func:`noisy_sum_likelihood_ratio_scores` -- the likelihood-ratio test on
  the released noisy per-class sum itself, with the other records modelled as
  draws from the population: the strongest attack on the latent-statistic
  release that does not assume knowledge of the other records.

:func:`audit_synthetic_release` runs them on member / non-member latents and
returns metrics with intervals and, optionally, held-out ε lower bounds; the
``privfed run`` pipeline calls it for the audit section of its report.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import (
    check_float,
    check_int,
    check_matrix,
    check_probability,
    check_seed,
)
from privfed.audit._distributions import logsumexp_rows
from privfed.audit._results import attack_result_dict
from privfed.audit.bounds import BoundSpec, PrivacyLowerBound, TrialModel
from privfed.audit.metrics import DEFAULT_FPRS, MembershipMetrics, membership_metrics
from privfed.audit.splits import split_bound
from privfed.errors import AuditError, ParameterError

__all__ = [
    "DensityModel",
    "SyntheticAttack",
    "SyntheticAttackResult",
    "SyntheticReleaseAudit",
    "audit_synthetic_release",
    "density_ratio_scores",
    "distance_to_closest_record_scores",
    "gaussian_log_density",
    "latent_gaussian_likelihood_ratio_scores",
    "noisy_sum_likelihood_ratio_scores",
]

_BATCH_VALUES = 1 << 22


class DensityModel(enum.Enum):
    """Density estimator of :func:`density_ratio_scores`."""

    #: One Gaussian fit (mean, ridge-regularised covariance).
    GAUSSIAN = "gaussian"
    #: Isotropic Gaussian kernel density on standardised features, Scott's bandwidth.
    KDE = "kde"


class SyntheticAttack(enum.Enum):
    """Attacks :func:`audit_synthetic_release` can run."""

    DISTANCE_TO_CLOSEST_RECORD = "dcr"
    DENSITY_RATIO_GAUSSIAN = "domias-gaussian"
    DENSITY_RATIO_KDE = "domias-kde"
    LATENT_GAUSSIAN_LIKELIHOOD_RATIO = "latent-gaussian-lr"
    #: Needs the released noisy sums (see :func:`noisy_sum_likelihood_ratio_scores`).
    NOISY_SUM_LIKELIHOOD_RATIO = "noisy-sum-lr"


def _check_same_dim(name: str, array: NDArray[np.float64], dim: int) -> None:
    if array.shape[1] != dim:
        raise ParameterError(name, f"an array with {dim} columns", f"{array.shape[1]} columns")


def distance_to_closest_record_scores(
    queries: ArrayLike, synthetic: ArrayLike, *, batch_size: int | None = None
) -> NDArray[np.float64]:
    """Minus the Euclidean distance from each query to its nearest synthetic record.

    Args:
        queries: Records to score, float array of shape (n, d).
        synthetic: Synthetic records, shape (s, d), in the same space/units.
        batch_size: Queries per batch (default: keeps batches near 32 MiB).

    Returns:
        float64 array of shape (n,), values ≤ 0; higher ⇒ closer ⇒ more member-like.
    """
    q = check_matrix("queries", queries)
    s = check_matrix("synthetic", synthetic)
    _check_same_dim("synthetic", s, q.shape[1])
    step = batch_size if batch_size is not None else max(1, _BATCH_VALUES // max(1, s.shape[0]))
    step = check_int("batch_size", step, minimum=1, numpy=True)
    s_sq = np.einsum("ij,ij->i", s, s)
    out = np.empty(q.shape[0])
    for start in range(0, q.shape[0], step):
        block = q[start : start + step]
        d2 = np.einsum("ij,ij->i", block, block)[:, None] - 2.0 * block @ s.T + s_sq[None, :]
        out[start : start + step] = -np.sqrt(np.maximum(d2.min(axis=1), 0.0))
    return out


def gaussian_log_density(
    x: ArrayLike, mean: ArrayLike, covariance: ArrayLike, *, ridge: float = 0.0
) -> NDArray[np.float64]:
    """Log density of N(mean, covariance + ridge·I) at each row of ``x``.

    Args:
        x: Points, shape (n, d).
        mean: Shape (d,).
        covariance: Symmetric positive semi-definite, shape (d, d).
        ridge: Non-negative diagonal loading added before factorising.

    Returns:
        float64 array of shape (n,).

    Raises:
        AuditError: The (regularised) covariance is not positive definite.
    """
    pts = check_matrix("x", x)
    mu = np.asarray(mean, dtype=np.float64)
    cov = np.asarray(covariance, dtype=np.float64)
    d = pts.shape[1]
    if mu.shape != (d,):
        raise ParameterError("mean", f"shape ({d},)", f"shape {mu.shape}")
    if cov.shape != (d, d) or not np.all(np.isfinite(cov)):
        raise ParameterError("covariance", f"a finite ({d}, {d}) matrix", f"shape {cov.shape}")
    load = check_float("ridge", ridge, low=0)
    sym = 0.5 * (cov + cov.T) + load * np.eye(d)
    try:
        chol = np.linalg.cholesky(sym)
    except np.linalg.LinAlgError as exc:
        raise AuditError("covariance is not positive definite; pass a ridge > 0") from exc
    centred = (pts - mu).T
    solved = np.linalg.solve(chol, centred) if d > 0 else centred
    maha = np.einsum("ij,ij->j", solved, solved)
    log_det = 2.0 * np.sum(np.log(np.diag(chol)))
    return np.asarray(-0.5 * (maha + log_det + d * math.log(2.0 * math.pi)), dtype=np.float64)


def _fit_gaussian(
    data: NDArray[np.float64], ridge: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    mean = data.mean(axis=0)
    if data.shape[0] > 1:
        cov = np.atleast_2d(np.cov(data, rowvar=False))
    else:
        cov = np.zeros((data.shape[1], data.shape[1]))
    scale = float(np.trace(cov)) / data.shape[1] if data.shape[1] else 1.0
    return mean, cov + ridge * max(scale, 1e-12) * np.eye(data.shape[1])


def _kde_log_density(
    queries: NDArray[np.float64], data: NDArray[np.float64], bandwidth: float
) -> NDArray[np.float64]:
    n, d = data.shape
    d_sq = np.einsum("ij,ij->i", data, data)
    out = np.empty(queries.shape[0])
    step = max(1, _BATCH_VALUES // max(1, n))
    log_norm = math.log(n) + 0.5 * d * math.log(2.0 * math.pi * bandwidth**2)
    for start in range(0, queries.shape[0], step):
        block = queries[start : start + step]
        dist2 = np.einsum("ij,ij->i", block, block)[:, None] - 2.0 * block @ data.T + d_sq[None, :]
        out[start : start + step] = (
            logsumexp_rows(-0.5 * np.maximum(dist2, 0.0) / bandwidth**2) - log_norm
        )
    return out


def density_ratio_scores(
    queries: ArrayLike,
    synthetic: ArrayLike,
    reference: ArrayLike,
    *,
    density: DensityModel = DensityModel.GAUSSIAN,
    ridge: float = 1e-6,
    bandwidth: float | None = None,
) -> NDArray[np.float64]:
    """DOMIAS score log p_synth(x) − log p_ref(x) (van Breugel et al. 2023, arXiv:2302.12580).

    Args:
        queries: Records to score, shape (n, d).
        synthetic: Synthetic records, shape (s, d), s ≥ 2.
        reference: Population records known not to be members, shape (r, d), r ≥ 2.
        density: :class:`DensityModel`.
        ridge: Relative diagonal loading of Gaussian fits (times the mean variance).
        bandwidth: KDE bandwidth on standardised features; default Scott's rule
            per density (n^(−1/(d+4))).

    Returns:
        float64 array of shape (n,); higher ⇒ more member-like.
    """
    q = check_matrix("queries", queries)
    s = check_matrix("synthetic", synthetic, min_rows=2)
    r = check_matrix("reference", reference, min_rows=2)
    _check_same_dim("synthetic", s, q.shape[1])
    _check_same_dim("reference", r, q.shape[1])
    if not isinstance(density, DensityModel):
        raise ParameterError("density", "a DensityModel", density)
    load = check_float("ridge", ridge, low=0)
    bw = None if bandwidth is None else check_float("bandwidth", bandwidth, low=0, open_low=True)
    if density is DensityModel.GAUSSIAN:
        ms, cs = _fit_gaussian(s, load)
        mr, cr = _fit_gaussian(r, load)
        return gaussian_log_density(q, ms, cs) - gaussian_log_density(q, mr, cr)
    # Standardise with the reference population so both KDEs share one metric.
    centre = r.mean(axis=0)
    spread = r.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    qz, sz, rz = (q - centre) / spread, (s - centre) / spread, (r - centre) / spread
    d = q.shape[1]
    bw_s = bw if bw is not None else s.shape[0] ** (-1.0 / (d + 4))
    bw_r = bw if bw is not None else r.shape[0] ** (-1.0 / (d + 4))
    return _kde_log_density(qz, sz, bw_s) - _kde_log_density(qz, rz, bw_r)


def _check_labels(name: str, labels: Any, n: int) -> NDArray[np.int64]:
    arr = np.asarray(labels)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(name, f"an int array of shape ({n},)", f"{arr.dtype} {arr.shape}")
    if n and arr.min() < 0:
        raise ParameterError(name, "non-negative class indices", int(arr.min()))
    return arr.astype(np.int64)


def _labelled_queries(
    queries: ArrayLike, labels: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    q = check_matrix("queries", queries)
    return q, _check_labels("labels", labels, q.shape[0])


def _float_arrays(*arrays: ArrayLike) -> list[NDArray[np.float64]]:
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def _check_labels_below(labels: NDArray[np.int64], classes: int) -> None:
    if labels.size and labels.max() >= classes:
        raise ParameterError("labels", f"class indices below C={classes}", int(labels.max()))


def latent_gaussian_likelihood_ratio_scores(
    queries: ArrayLike,
    labels: ArrayLike,
    *,
    released_means: ArrayLike,
    released_covariances: ArrayLike,
    reference_means: ArrayLike,
    reference_covariances: ArrayLike,
    ridge: float = 1e-6,
) -> NDArray[np.float64]:
    """Per-class log N(x; μ̂_c, Σ̂_c) − log N(x; μ_ref,c, Σ_ref,c) for labelled latents.

    ``released_*`` are the class Gaussians the latent-statistic engine
    published (or fits to its synthetic latents); ``reference_*`` are fits to
    public population latents of the same class.

    Args:
        queries: Latents, shape (n, d).
        labels: Class of each query, int array of shape (n,), values in [0, C).
        released_means: Shape (C, d).
        released_covariances: Shape (C, d, d), PSD.
        reference_means: Shape (C, d).
        reference_covariances: Shape (C, d, d), PSD.
        ridge: Absolute diagonal loading for both densities, ≥ 0.

    Returns:
        float64 array of shape (n,); higher ⇒ more member-like.
    """
    q, lab = _labelled_queries(queries, labels)
    rm, rc, pm, pc = _float_arrays(
        released_means, released_covariances, reference_means, reference_covariances
    )
    d = q.shape[1]
    classes = rm.shape[0] if rm.ndim == 2 else 0
    for name, arr, shape in (
        ("released_means", rm, (classes, d)),
        ("released_covariances", rc, (classes, d, d)),
        ("reference_means", pm, (classes, d)),
        ("reference_covariances", pc, (classes, d, d)),
    ):
        if classes == 0 or arr.shape != shape:
            raise ParameterError(name, f"shape {shape} with C >= 1", f"shape {arr.shape}")
    _check_labels_below(lab, classes)
    load = check_float("ridge", ridge, low=0)
    out = np.zeros(q.shape[0])
    for c in np.unique(lab):
        idx = lab == c
        out[idx] = gaussian_log_density(q[idx], rm[c], rc[c], ridge=load) - gaussian_log_density(
            q[idx], pm[c], pc[c], ridge=load
        )
    return out


def noisy_sum_likelihood_ratio_scores(
    queries: ArrayLike,
    labels: ArrayLike,
    *,
    noisy_sums: ArrayLike,
    counts: ArrayLike,
    noise_std_sum: float,
    reference_means: ArrayLike,
    reference_covariances: ArrayLike,
) -> NDArray[np.float64]:
    """Likelihood-ratio membership test on the released noisy per-class sums.

    Model: the class-c sum is S_c = Σ_{records} z + N(0, σ_s² I).  If x is a
    member, the other n_c − 1 records are population draws, so
    S_c ~ N((n_c − 1)μ_c + x, (n_c − 1)Σ_c + σ_s² I); if not, all n_c are,
    S_c ~ N(n_c μ_c, n_c Σ_c + σ_s² I), with (μ_c, Σ_c) the population's class
    moments (estimated from reference data).  The score is the log ratio of
    these two densities at the released S_c.

    Args:
        queries: Latents (already clipped as in the release), shape (n, d).
        labels: Class of each query, int array (n,), values in [0, C).
        noisy_sums: Released noisy sums, shape (C, d).
        counts: Class counts n_c ≥ 1 used by the release, shape (C,).
        noise_std_sum: σ_s of the release, > 0, latent units.
        reference_means: Population class means, shape (C, d).
        reference_covariances: Population class covariances, shape (C, d, d).

    Returns:
        float64 array of shape (n,); higher ⇒ more member-like.
    """
    q, lab = _labelled_queries(queries, labels)
    sums, n_c, pm, pc = _float_arrays(noisy_sums, counts, reference_means, reference_covariances)
    sigma = check_float("noise_std_sum", noise_std_sum, low=0, open_low=True)
    d = q.shape[1]
    classes = sums.shape[0] if sums.ndim == 2 else 0
    if classes == 0 or sums.shape != (classes, d) or not np.all(np.isfinite(sums)):
        raise ParameterError("noisy_sums", f"a finite (C, {d}) array", f"shape {sums.shape}")
    if n_c.shape != (classes,) or np.any(n_c < 1) or not np.all(np.isfinite(n_c)):
        raise ParameterError("counts", f"shape ({classes},) with values >= 1", "array")
    if pm.shape != (classes, d) or pc.shape != (classes, d, d):
        raise ParameterError(
            "reference_means/covariances",
            f"shapes ({classes}, {d}) and ({classes}, {d}, {d})",
            f"{pm.shape}, {pc.shape}",
        )
    _check_labels_below(lab, classes)
    out = np.zeros(q.shape[0])
    eye = np.eye(d)
    for c in np.unique(lab):
        idx = lab == c
        n = n_c[c]
        cov_in = (n - 1.0) * pc[c] + sigma**2 * eye
        cov_out = n * pc[c] + sigma**2 * eye
        # log N(S; (n−1)μ + x, C_in) viewed as a density in x: evaluate at S − (n−1)μ − x.
        resid = sums[c][None, :] - (n - 1.0) * pm[c][None, :] - q[idx]
        log_in = gaussian_log_density(resid, np.zeros(d), cov_in)
        log_out = gaussian_log_density(sums[c][None, :], n * pm[c], cov_out)[0]
        out[idx] = log_in - log_out
    return out


@dataclass(frozen=True)
class SyntheticAttackResult:
    """One attack's outcome in :func:`audit_synthetic_release`.

    Attributes:
        attack: Which attack.
        metrics: ROC/AUC/TPR-at-FPR with intervals on the evaluation records.
        bound: Held-out ε/μ lower bound (None when ``delta`` was not given).
        member_scores: Scores of the evaluation members, shape (n1,).
        nonmember_scores: Scores of the evaluation non-members, shape (n0,).
    """

    attack: SyntheticAttack
    metrics: MembershipMetrics
    bound: PrivacyLowerBound | None
    member_scores: NDArray[np.float64] = field(repr=False)
    nonmember_scores: NDArray[np.float64] = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.attack, SyntheticAttack):
            raise ParameterError("attack", "a SyntheticAttack", self.attack)

    def to_dict(self, *, include_scores: bool = True) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return attack_result_dict(
            {
                "attack": self.attack.value,
            },
            self.metrics,
            self.bound,
            (self.member_scores, self.nonmember_scores) if include_scores else None,
        )


@dataclass(frozen=True)
class SyntheticReleaseAudit:
    """Outcome of :func:`audit_synthetic_release`.

    Attributes:
        results: One entry per attack, in the order run.
        num_members: Members evaluated.
        num_nonmembers: Non-members evaluated (after any reference split).
        num_reference: Records used as the population reference.
        confidence: Coverage of every interval.
    """

    results: tuple[SyntheticAttackResult, ...]
    num_members: int
    num_nonmembers: int
    num_reference: int
    confidence: float

    def __post_init__(self) -> None:
        if not self.results:
            raise ParameterError("results", "a non-empty tuple", self.results)

    def best(self) -> SyntheticAttackResult:
        """The attack with the highest AUC lower confidence limit."""
        return max(self.results, key=lambda r: r.metrics.auc.lower)

    def to_dict(self, *, include_scores: bool = True) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            "num_members": self.num_members,
            "num_nonmembers": self.num_nonmembers,
            "num_reference": self.num_reference,
            "confidence": self.confidence,
            "results": [r.to_dict(include_scores=include_scores) for r in self.results],
        }


_DEFAULT_ATTACKS = (
    SyntheticAttack.DISTANCE_TO_CLOSEST_RECORD,
    SyntheticAttack.DENSITY_RATIO_GAUSSIAN,
    SyntheticAttack.DENSITY_RATIO_KDE,
    SyntheticAttack.LATENT_GAUSSIAN_LIKELIHOOD_RATIO,
)


def _class_fits(
    data: NDArray[np.float64], labels: NDArray[np.int64], classes: int, ridge: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    d = data.shape[1]
    pooled_mean, pooled_cov = _fit_gaussian(data, ridge)
    means = np.tile(pooled_mean, (classes, 1))
    covs = np.tile(pooled_cov, (classes, 1, 1))
    for c in range(classes):
        rows = data[labels == c]
        if rows.shape[0] >= d + 2:
            means[c], covs[c] = _fit_gaussian(rows, ridge)
        elif rows.shape[0] >= 1:
            means[c] = rows.mean(axis=0)
    return means, covs


def audit_synthetic_release(
    member_latents: ArrayLike,
    nonmember_latents: ArrayLike,
    synthetic_latents: ArrayLike,
    *,
    member_labels: ArrayLike | None = None,
    nonmember_labels: ArrayLike | None = None,
    synthetic_labels: ArrayLike | None = None,
    reference_latents: ArrayLike | None = None,
    reference_labels: ArrayLike | None = None,
    attacks: tuple[SyntheticAttack, ...] | None = None,
    noisy_sums: ArrayLike | None = None,
    counts: ArrayLike | None = None,
    noise_std_sum: float | None = None,
    delta: float | None = None,
    significance: float = 0.05,
    confidence: float = 0.95,
    fprs: tuple[float, ...] = DEFAULT_FPRS,
    ridge: float = 1e-3,
    seed: int | None = 0,
) -> SyntheticReleaseAudit:
    """Run the synthetic-data attacks on member / non-member latents.

    Members are the records the release was computed from; non-members come
    from the same population but were not used.  When ``reference_latents``
    is None the non-members are split at random (seeded) into a population
    reference for the density attacks and an evaluation half, so no record is
    both fitted and scored.

    When ``delta`` is given, each attack's scores are split again (seeded, half
    and half) into a calibration part that chooses the threshold and an
    evaluation part that yields a held-out ε/μ lower bound at significance α.

    Args:
        member_latents: Shape (n1, d), n1 ≥ 4.
        nonmember_latents: Shape (n0, d), n0 ≥ 4 (≥ 8 without a reference).
        synthetic_latents: Shape (s, d), s ≥ 2.
        member_labels: Int class labels (n1,), or None for a single pooled class.
        nonmember_labels: (n0,), given iff ``member_labels`` is.
        synthetic_labels: (s,), given iff ``member_labels`` is.
        reference_latents: Optional population reference, shape (r, d).
        reference_labels: (r,), given iff labels are used and a reference is given.
        attacks: The attacks to run.  Default: the four that need only latents,
            plus NOISY_SUM_LIKELIHOOD_RATIO when the release statistics are given.
        noisy_sums: Released noisy per-class sums, shape (C, d) (e.g.
            ``NoisyLatentStatistics.sums``); with ``counts`` and
            ``noise_std_sum`` enables the noisy-sum likelihood-ratio attack.  The
            member latents must then be the clipped latents that entered the sums.
        counts: Class counts used by the release, shape (C,).
        noise_std_sum: Noise std on each sum coordinate, > 0 (latent units).
        delta: δ for held-out ε lower bounds, in (0, 1), or None for none.
        significance: α of the bounds.
        confidence: Coverage of the metric intervals.
        fprs: FPRs at which TPR is reported.
        ridge: Relative diagonal loading for Gaussian fits.
        seed: Seed of the splits (default 0: reproducible reports).

    Returns:
        A :class:`SyntheticReleaseAudit`.
    """
    members = check_matrix("member_latents", member_latents, min_rows=4)
    nonmembers = check_matrix("nonmember_latents", nonmember_latents, min_rows=4)
    synthetic = check_matrix("synthetic_latents", synthetic_latents, min_rows=2)
    d = members.shape[1]
    _check_same_dim("nonmember_latents", nonmembers, d)
    _check_same_dim("synthetic_latents", synthetic, d)
    labelled = _check_label_args(member_labels, nonmember_labels, synthetic_labels)
    release = _check_noisy_release(noisy_sums, counts, noise_std_sum)
    attacks = _check_attacks(attacks, release is not None)
    scoring = _Scoring.checked(delta, significance, confidence, ridge, seed, fprs)
    m_lab = _labels_or_zeros("member_labels", member_labels, members.shape[0], labelled)
    n_lab = _labels_or_zeros("nonmember_labels", nonmember_labels, nonmembers.shape[0], labelled)
    s_lab = _labels_or_zeros("synthetic_labels", synthetic_labels, synthetic.shape[0], labelled)
    reference, r_lab, nonmembers, n_lab = _reference_and_evaluation(
        nonmembers, n_lab, reference_latents, reference_labels, labelled, scoring.rng
    )
    data = _AuditRecords.of(members, m_lab, nonmembers, n_lab, synthetic, s_lab, reference, r_lab)
    results = [_attack_result(attack, data, release, scoring) for attack in attacks]
    return SyntheticReleaseAudit(
        results=tuple(results),
        num_members=data.num_members,
        num_nonmembers=nonmembers.shape[0],
        num_reference=reference.shape[0],
        confidence=scoring.confidence,
    )


@dataclass(frozen=True)
class _Scoring:
    """How each attack is scored: the metric settings, the bound's δ and α, the split generator."""

    ridge: float
    fprs: tuple[float, ...]
    confidence: float
    delta: float | None
    significance: float
    rng: np.random.Generator

    @classmethod
    def checked(
        cls,
        delta: float | None,
        significance: float,
        confidence: float,
        ridge: float,
        seed: int | None,
        fprs: tuple[float, ...],
    ) -> _Scoring:
        """Check the scalar settings of :func:`audit_synthetic_release` (in this order)."""
        d_val = (
            None
            if delta is None
            else check_probability("delta", delta, open_low=True, open_high=True)
        )
        alpha = check_probability("significance", significance, open_low=True, open_high=True)
        level = check_probability("confidence", confidence, open_low=True, open_high=True)
        load = check_float("ridge", ridge, low=0)
        rng = np.random.default_rng(check_seed("seed", seed))
        return cls(load, fprs, level, d_val, alpha, rng)


@dataclass(frozen=True)
class _AuditRecords:
    """What one audit scores: the queries (members first), the synthetic data, the reference."""

    queries: NDArray[np.float64]
    query_labels: NDArray[np.int64]
    num_members: int
    synthetic: NDArray[np.float64]
    synthetic_labels: NDArray[np.int64]
    reference: NDArray[np.float64]
    reference_labels: NDArray[np.int64]
    classes: int

    @classmethod
    def of(
        cls,
        members: NDArray[np.float64],
        member_labels: NDArray[np.int64],
        nonmembers: NDArray[np.float64],
        nonmember_labels: NDArray[np.int64],
        synthetic: NDArray[np.float64],
        synthetic_labels: NDArray[np.int64],
        reference: NDArray[np.float64],
        reference_labels: NDArray[np.int64],
    ) -> _AuditRecords:
        """The records with the queries stacked members first; C from the largest label."""
        all_labels = (member_labels, nonmember_labels, synthetic_labels, reference_labels)
        return cls(
            queries=np.concatenate([members, nonmembers]),
            query_labels=np.concatenate([member_labels, nonmember_labels]),
            num_members=members.shape[0],
            synthetic=synthetic,
            synthetic_labels=synthetic_labels,
            reference=reference,
            reference_labels=reference_labels,
            classes=int(max(lab.max() for lab in all_labels)) + 1,
        )


@dataclass(frozen=True)
class _NoisyRelease:
    """The released statistics the noisy-sum attack tests against (as the caller gave them)."""

    noisy_sums: ArrayLike
    counts: ArrayLike
    noise_std_sum: float


def _check_noisy_release(
    noisy_sums: ArrayLike | None, counts: ArrayLike | None, noise_std_sum: float | None
) -> _NoisyRelease | None:
    """The release statistics when all three are given, None when none is."""
    release_given = [x is not None for x in (noisy_sums, counts, noise_std_sum)]
    if any(release_given) and not all(release_given):
        raise ParameterError(
            "noisy_sums/counts/noise_std_sum", "all given or all None", "partly given"
        )
    if not all(release_given):
        return None
    return _NoisyRelease(noisy_sums, counts, noise_std_sum)  # type: ignore[arg-type]


def _check_label_args(*label_args: ArrayLike | None) -> bool:
    """Whether labels are used: the member, non-member and synthetic labels all given or none."""
    labelled = label_args[0] is not None
    if any((x is not None) != labelled for x in label_args):
        raise ParameterError(
            "member_labels/nonmember_labels/synthetic_labels", "all given or all None", "mixed"
        )
    return labelled


def _check_attacks(
    attacks: tuple[SyntheticAttack, ...] | None, release_given: bool
) -> tuple[SyntheticAttack, ...]:
    """The attacks to run: the default set (plus the noisy-sum one with a release) or checked."""
    if attacks is None:
        attacks = _DEFAULT_ATTACKS
        if release_given:
            attacks = (*attacks, SyntheticAttack.NOISY_SUM_LIKELIHOOD_RATIO)
    if not attacks or not all(isinstance(a, SyntheticAttack) for a in attacks):
        raise ParameterError("attacks", "a non-empty tuple of SyntheticAttack", attacks)
    if SyntheticAttack.NOISY_SUM_LIKELIHOOD_RATIO in attacks and not release_given:
        raise ParameterError("noisy_sums", "given when the noisy-sum attack is requested", None)
    return attacks


def _labels_or_zeros(name: str, labels: Any, n: int, labelled: bool) -> NDArray[np.int64]:
    """Checked class labels, or one pooled class (all zeros) when labels are not used."""
    return _check_labels(name, labels, n) if labelled else np.zeros(n, np.int64)


def _reference_and_evaluation(
    nonmembers: NDArray[np.float64],
    labels: NDArray[np.int64],
    reference_latents: ArrayLike | None,
    reference_labels: ArrayLike | None,
    labelled: bool,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """(reference, its labels, evaluation non-members, their labels): given, or split off."""
    if reference_latents is None:
        if reference_labels is not None:
            raise ParameterError("reference_labels", "None when reference_latents is None", "given")
        return _split_reference(nonmembers, labels, rng)
    reference, r_lab = _check_reference(
        reference_latents, reference_labels, nonmembers.shape[1], labelled
    )
    return reference, r_lab, nonmembers, labels


def _split_reference(
    nonmembers: NDArray[np.float64], labels: NDArray[np.int64], rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """Split the non-members at random into (reference, its labels, evaluation, its labels)."""
    if nonmembers.shape[0] < 8:
        raise ParameterError(
            "nonmember_latents",
            "at least 8 rows when no reference is given",
            nonmembers.shape[0],
        )
    perm = rng.permutation(nonmembers.shape[0])
    half = nonmembers.shape[0] // 2
    return (
        nonmembers[perm[:half]],
        labels[perm[:half]],
        nonmembers[perm[half:]],
        labels[perm[half:]],
    )


def _check_reference(
    reference_latents: ArrayLike, reference_labels: ArrayLike | None, d: int, labelled: bool
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The given population reference and its labels (zeros when labels are not used)."""
    reference = check_matrix("reference_latents", reference_latents, min_rows=2)
    _check_same_dim("reference_latents", reference, d)
    if labelled:
        if reference_labels is None:
            raise ParameterError("reference_labels", "given when labels are used", None)
        return reference, _check_labels("reference_labels", reference_labels, reference.shape[0])
    if reference_labels is not None:
        raise ParameterError("reference_labels", "None when no labels are used", "given")
    return reference, np.zeros(reference.shape[0], np.int64)


def _attack_result(
    attack: SyntheticAttack,
    data: _AuditRecords,
    release: _NoisyRelease | None,
    scoring: _Scoring,
) -> SyntheticAttackResult:
    """Run one attack: its scores, metrics and (with a δ) held-out lower bound."""
    scores = _attack_scores(attack, data, release, scoring.ridge)
    member_scores, nonmember_scores = scores[: data.num_members], scores[data.num_members :]
    metrics = membership_metrics(
        member_scores, nonmember_scores, fprs=scoring.fprs, confidence=scoring.confidence
    )
    bound = None
    if scoring.delta is not None:
        bound = _held_out_bound(
            member_scores, nonmember_scores, scoring.delta, scoring.significance, scoring.rng
        )
    return SyntheticAttackResult(attack, metrics, bound, member_scores, nonmember_scores)


def _attack_scores(
    attack: SyntheticAttack,
    data: _AuditRecords,
    release: _NoisyRelease | None,
    load: float,
) -> NDArray[np.float64]:
    """One attack's score for every query (members first, then the evaluation non-members)."""
    queries, synthetic, reference = data.queries, data.synthetic, data.reference
    if attack is SyntheticAttack.DISTANCE_TO_CLOSEST_RECORD:
        return distance_to_closest_record_scores(queries, synthetic)
    if attack is SyntheticAttack.DENSITY_RATIO_GAUSSIAN:
        return density_ratio_scores(queries, synthetic, reference, ridge=load)
    if attack is SyntheticAttack.DENSITY_RATIO_KDE:
        return density_ratio_scores(queries, synthetic, reference, density=DensityModel.KDE)
    if attack is SyntheticAttack.NOISY_SUM_LIKELIHOOD_RATIO:
        if release is None:  # _check_attacks refuses this already
            raise ParameterError("noisy_sums", "given when the noisy-sum attack is requested", None)
        sums = np.asarray(release.noisy_sums, dtype=np.float64)
        n_classes = max(data.classes, sums.shape[0] if sums.ndim == 2 else 0)
        pm, pc = _class_fits(reference, data.reference_labels, n_classes, load)
        return noisy_sum_likelihood_ratio_scores(
            queries,
            data.query_labels,
            noisy_sums=sums,
            counts=np.asarray(release.counts, dtype=np.float64),
            noise_std_sum=float(release.noise_std_sum),
            reference_means=pm,
            reference_covariances=pc,
        )
    sm, sc = _class_fits(synthetic, data.synthetic_labels, data.classes, load)
    pm, pc = _class_fits(reference, data.reference_labels, data.classes, load)
    return latent_gaussian_likelihood_ratio_scores(
        queries,
        data.query_labels,
        released_means=sm,
        released_covariances=sc,
        reference_means=pm,
        reference_covariances=pc,
    )


def _held_out_bound(
    members: NDArray[np.float64],
    nonmembers: NDArray[np.float64],
    delta: float,
    alpha: float,
    rng: np.random.Generator,
) -> PrivacyLowerBound:
    if members.size < 2 or nonmembers.size < 2:
        raise AuditError("need at least 2 members and 2 non-members for a held-out bound")
    # The records are scored against one release: not independent trials (issue #29).
    spec = BoundSpec(delta, alpha)
    return split_bound(members, nonmembers, rng, 0.5, spec, trials=TrialModel.ONE_MODEL)
