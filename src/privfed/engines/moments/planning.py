"""Noise plans for the latent-statistic release (per-class sums, second moments, counts).

A plan turns a target (ε, δ), a clipping radius R and a latent dimension d into
the three noise standard deviations of the release

    m̃_c = Σ z + N(0, σ_s² I_d),
    M̃_c = Σ z zᵀ + N(0, σ_m² I_{d²}),
    ñ_c = n_c + N(0, σ_c²)          (only when counts are private),

for every class c.  The second-moment noise is isotropic on the ``d × d``
matrix viewed as a vector in ``R^{d²}`` (every entry, both triangles, gets its
own independent draw); symmetrising the noisy matrix afterwards, e.g.
averaging it with its transpose, is post-processing and costs no privacy.

The budget is split in μ² (Gaussian differential privacy), not in ε and δ:
the target (ε, δ) is converted once into the largest μ whose Gaussian mechanism
is (ε, δ)-DP, and the three standard deviations are chosen so that the exact
joint μ of :func:`privfed.dp.sensitivity.joint_mu_squared` equals it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from privfed._checks import (
    check_bool,
    check_count,
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    to_float,
)
from privfed.dp import GaussianRelease, PartitionKey, PrivacyLedger
from privfed.dp.calibration import (
    calibrate_analytic_gaussian,
    gdp_delta,
    mu_for_epsilon_delta,
)
from privfed.dp.calibrator import raise_until
from privfed.dp.sensitivity import (
    Adjacency,
    count_sensitivity,
    joint_mu_squared,
    second_moment_sensitivity,
    sum_sensitivity,
)
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "LatentReleasePlan",
    "SplitName",
    "paper_baseline_noise_stds",
    "plan_latent_release",
    "release_error_objective",
]

#: Named budget splits accepted by :func:`plan_latent_release`.
SplitName = Literal["balanced", "optimal"]

_MAX_NUDGES = 10_000
_MIN_NORMAL = sys.float_info.min


def _counts_noised(adjacency: Adjacency, private_labels: bool) -> bool:
    return adjacency is Adjacency.ADD_REMOVE or private_labels


@dataclass(frozen=True)
class LatentReleasePlan:
    """Noise standard deviations and guarantee of one latent-statistic release.

    All standard deviations are in latent units (those of z for the sum, of
    z² for the second moment, records for the count) and apply to every class.

    Attributes:
        epsilon: The ε of the guarantee (as requested).
        delta: The δ actually achieved at ``epsilon``; <= the requested δ
            (conservative rounding).
        mu: Exact μ-GDP of the joint release under ``adjacency``; disjoint
            classes compose in parallel, so this is also the μ of the release
            of all classes.
        noise_std_sum: σ_s added to each of the d coordinates of ``Σ z``.
        noise_std_second_moment: σ_m added to each of the d² entries of
            ``Σ z zᵀ`` (isotropic on the matrix as a vector).
        noise_std_count: σ_c added to each class count; 0.0 means the counts
            are public and released exactly (REPLACE_ONE with public labels).
        adjacency: The neighbouring relation of the guarantee.
        clip_norm: Clipping radius R of every latent, L2 norm.
        dim: Latent dimension d (>= 1).
        split: How the budget was split: ``"balanced"``, ``"optimal"`` or the
            float weight passed by the caller.
        private_labels: Whether a replaced record may change class.
        sum_sensitivity: L2 sensitivity of ``Σ z`` alone under ``adjacency``.
        second_moment_sensitivity: Frobenius sensitivity of ``Σ z zᵀ`` alone.
        count_sensitivity: L2 sensitivity of the count vector alone.
        target_delta: The δ the plan was made for (the budget of the ledger
            its release enters, :meth:`ledger`); ``None`` for a plan built by
            hand.
    """

    epsilon: float
    delta: float
    mu: float
    noise_std_sum: float
    noise_std_second_moment: float
    noise_std_count: float
    adjacency: Adjacency
    clip_norm: float
    dim: int
    split: str | float
    private_labels: bool
    sum_sensitivity: float
    second_moment_sensitivity: float
    count_sensitivity: float
    target_delta: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.adjacency, Adjacency):
            raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", self.adjacency)
        check_bool("private_labels", self.private_labels)
        check_finite_positive("epsilon", self.epsilon)
        check_delta(self.delta)
        check_finite_nonnegative("mu", self.mu)
        check_finite_positive("noise_std_sum", self.noise_std_sum)
        check_finite_positive("noise_std_second_moment", self.noise_std_second_moment)
        check_finite_nonnegative("noise_std_count", self.noise_std_count)
        check_finite_positive("clip_norm", self.clip_norm)
        check_count("dim", self.dim, minimum=1)
        _check_split(self.split)
        noised = _counts_noised(self.adjacency, self.private_labels)
        if noised and self.noise_std_count == 0.0:
            raise ParameterError(
                "noise_std_count", "> 0 when counts are private", self.noise_std_count
            )
        expected = (
            sum_sensitivity(self.clip_norm, self.adjacency),
            second_moment_sensitivity(self.clip_norm, self.adjacency),
            count_sensitivity(self.adjacency, private_labels=self.private_labels),
        )
        given = (self.sum_sensitivity, self.second_moment_sensitivity, self.count_sensitivity)
        for name, want, got in zip(
            ("sum_sensitivity", "second_moment_sensitivity", "count_sensitivity"),
            expected,
            given,
            strict=True,
        ):
            if to_float(name, got) != want:
                raise ParameterError(name, f"{want!r} for this adjacency and clip_norm", got)
        exact = math.sqrt(
            joint_mu_squared(
                self.clip_norm,
                self.noise_std_sum,
                self.noise_std_second_moment,
                self.adjacency,
                noise_std_count=self.noise_std_count if noised else None,
                private_labels=self.private_labels,
            )
        )
        # No tolerance: a plan is the record the ledger trusts, and the planner's
        # own output meets both checks exactly (same formulas, same rounding).
        if self.mu < exact:
            raise ParameterError(
                "mu", f">= the exact joint mu {exact!r} of these noise stds", self.mu
            )
        if gdp_delta(self.mu, self.epsilon) > self.delta:
            raise ParameterError("delta", "at least the exact delta of (mu, epsilon)", self.delta)
        if self.target_delta is not None:
            check_delta(self.target_delta, name="target_delta")

    def ledger(self) -> PrivacyLedger:
        """A fresh ledger whose budget is the target this plan was made for.

        The one lane of ε: the job that releases with this plan budgets its
        ledger here, never from its configuration again.

        Raises:
            ParameterError: The plan was built by hand (no ``target_delta``).
        """
        if self.target_delta is None:
            raise ParameterError("target_delta", "the delta the plan was made for", None)
        return PrivacyLedger(budget_epsilon=self.epsilon, budget_delta=self.target_delta)

    def events(
        self,
        partitions: Sequence[int | str],
        *,
        scheme: str,
        sampler: str,
        seeded: bool,
        name: str = "latent-statistics",
    ) -> tuple[GaussianRelease, ...]:
        """The ledger events this plan's release spends, one per partition.

        Each partition's (sum, second moment[, count]) release is an event in
        whitened form (``noise_std = 1``, ``l2_sensitivity = mu``) on
        ``PartitionKey(scheme, label)``.  With ``private_labels`` a record
        may change partition, so the partitions are not disjoint: a single
        event on ``None`` (all records) is returned instead, whose μ already
        covers both partitions a replacement touches.

        Args:
            partitions: The labels released (at least one, no repeats; ints or strs).
            scheme: The partition scheme of the labels.
            sampler: Noise sampler name.
            seeded: Whether the noise was seeded.
            name: Release name.

        Raises:
            ParameterTypeError: A label that is not an int or a str.
            ParameterError: No labels, or repeated ones.
        """
        labels = list(partitions)
        if not labels:
            raise ParameterError("partitions", "a non-empty sequence of class ids", labels)
        if len(set(labels)) != len(labels):
            raise ParameterError("partitions", "class ids without repeats", labels)
        for label in labels:
            if label is None:
                raise ParameterTypeError("partitions", "a sequence of ints or strs", label)
            if not isinstance(label, str) and (
                isinstance(label, bool) or not isinstance(label, int)
            ):
                raise ParameterTypeError("partition", "an int, a str or None", label)
        d = self.dim
        dimension = d + d * d + (1 if self.noise_std_count > 0 else 0)
        targets: list[PartitionKey | None] = (
            [None] if self.private_labels else [PartitionKey(scheme, c) for c in labels]
        )
        return tuple(
            GaussianRelease(
                name=name,
                partition=target,
                l2_sensitivity=self.mu,
                noise_std=1.0,
                adjacency=self.adjacency,
                sampler=sampler,
                seeded=seeded,
                dimension=dimension,
            )
            for target in targets
        )


def _check_split(split: object) -> str | float:
    if isinstance(split, str):
        if split in ("balanced", "optimal"):
            return split
    else:
        weight = to_float("split", split)
        if 0.0 < weight < 1.0:
            return weight
    raise ParameterError("split", "'balanced', 'optimal' or a float in (0, 1)", split)


def release_error_objective(
    noise_std_sum: float,
    noise_std_second_moment: float,
    noise_std_count: float,
    *,
    clip_norm: float,
    dim: int,
) -> float:
    """The error that ``split="optimal"`` minimises (smaller is better).

    It is a first-order, worst-case bound on ``n² · (E‖m̂ − m‖²/R² +
    E‖Ĉ − C‖_F²/R⁴)``, the expected squared errors of the recovered class mean
    ``m̂ = m̃/ñ`` and covariance ``Ĉ = sym(M̃)/ñ − m̂ m̂ᵀ``, normalised by R² and
    R⁴ so the two terms are dimensionless, with the true mean at its largest
    norm R:

        (3d + 2)·(σ_s/R)² + (d(d+1)/2)·(σ_m/R²)² + 2·σ_c².

    The factor n² (the class count) multiplies every term alike, so the
    minimiser does not depend on n; second-order terms (σ⁴/n⁴) are dropped.

    Args:
        noise_std_sum: σ_s; finite, > 0.
        noise_std_second_moment: σ_m; finite, > 0.
        noise_std_count: σ_c; finite, >= 0 (0 when counts are public).
        clip_norm: R; finite, > 0.
        dim: d; int >= 1.

    Returns:
        The objective value (dimensionless, >= 0).
    """
    s = check_finite_positive("noise_std_sum", noise_std_sum)
    m = check_finite_positive("noise_std_second_moment", noise_std_second_moment)
    c = check_finite_nonnegative("noise_std_count", noise_std_count)
    r = check_finite_positive("clip_norm", clip_norm)
    d = check_count("dim", dim, minimum=1)
    return (3 * d + 2) * (s / r) ** 2 + (d * (d + 1) / 2) * (m / (r * r)) ** 2 + 2.0 * c * c


def _constraint(x: float, y: float, v: float, adjacency: Adjacency, private_labels: bool) -> float:
    """μ² for normalised precisions x = (R/σ_s)², y = (R²/σ_m)², v = 1/σ_c² (homogeneous)."""
    if adjacency is Adjacency.ADD_REMOVE:
        return x + y + v
    same = 2.0 * x + 2.0 * y + x * x / (2.0 * y) if x <= 2.0 * y else 4.0 * x
    if not private_labels:
        return same
    return max(same, 2.0 * x + 2.0 * y + 2.0 * v)


def _public_counts_direction(alpha: float, beta: float) -> float:
    """The y minimising (α + β/y)·μ²(1, y) under REPLACE_ONE with public counts.

    For y >= 1/2 the constraint is 2 + 2y + 1/(2y) and the derivative of the
    product is g(y)/y³ with g(y) = 2αy³ − (α/2 + 2β)y − β.  g is convex on
    y > 0 with g(0) = −β < 0 and g(1/2) = −2β < 0, so it has exactly one
    positive root y*, above 1/2, and the product falls before y* and rises
    after it.  Below 1/2 the constraint is the constant 4 and the product falls
    towards y = 1/2, so y* is the global minimiser.  Bisection on g finds it to
    the last bit (Nelder–Mead, used before, stopped within ~2e-8 of it).
    """

    def g(y: float) -> float:
        return (2.0 * alpha * y * y - (alpha / 2.0 + 2.0 * beta)) * y - beta

    lo, hi = 0.5, 1.0
    while g(hi) <= 0.0:
        lo, hi = hi, 2.0 * hi
    while True:
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if g(mid) > 0.0:
            hi = mid
        else:
            lo = mid
    return lo if abs(g(lo)) <= abs(g(hi)) else hi


def _optimal_direction(
    dim: int, adjacency: Adjacency, private_labels: bool
) -> tuple[float, float, float]:
    """Minimise objective × constraint over directions (both homogeneous, so scale-free)."""
    alpha = 3.0 * dim + 2.0
    beta = dim * (dim + 1) / 2.0
    gamma = 2.0
    if adjacency is Adjacency.ADD_REMOVE:
        # Lagrange: minimise Σ w_i / x_i subject to Σ x_i = const gives x_i ∝ sqrt(w_i).
        return math.sqrt(alpha), math.sqrt(beta), math.sqrt(gamma)
    if not _counts_noised(adjacency, private_labels):
        # One free ratio and a closed-form stationarity condition: no search needed.
        return 1.0, _public_counts_direction(alpha, beta), 0.0

    def score(params: np.ndarray) -> float:
        y = math.exp(float(np.clip(params[0], -60.0, 60.0)))
        v = math.exp(float(np.clip(params[1], -60.0, 60.0)))
        return (alpha + beta / y + gamma / v) * _constraint(1.0, y, v, adjacency, private_labels)

    # A coarse grid finds the basin; Nelder–Mead (deterministic) refines it.
    grid = np.linspace(-20.0, 20.0, 161)
    candidates = [np.array([p, q]) for p in grid[::4] for q in grid[::4]]
    start = min(candidates, key=score)
    # Imported here, not with the module: scipy.optimize takes ~0.4 s to import,
    # and only private labels (noised counts) under REPLACE_ONE get this far.
    from scipy.optimize import minimize

    result = minimize(
        score,
        start,
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20_000, "maxfev": 40_000},
    )
    best = result.x if score(result.x) <= score(start) else start
    return 1.0, math.exp(float(best[0])), math.exp(float(best[1]))


def plan_latent_release(
    epsilon: float,
    delta: float,
    *,
    clip_norm: float,
    dim: int,
    adjacency: Adjacency,
    split: SplitName | float = "optimal",
    private_labels: bool = False,
) -> LatentReleasePlan:
    """Plan the noise of a per-class latent-statistic release for a target (ε, δ).

    The second-moment noise is isotropic on the ``d × d`` matrix viewed as a
    vector in ``R^{d²}``; symmetrising the noisy matrix afterwards (averaging it
    with its transpose) is post-processing.

    Args:
        epsilon: Target ε; finite, > 0.
        delta: Target δ; in (0, 1).
        clip_norm: Clipping radius R of every latent (L2 norm); finite, > 0.
        dim: Latent dimension d; int >= 1.  Used only by ``split="optimal"``.
        adjacency: REPLACE_ONE (same-class replacement; counts public unless
            ``private_labels``) or ADD_REMOVE (counts noised).
        split: How the μ² budget is shared:

            * ``"balanced"``: equal noise multipliers relative to the
              add/remove unit sensitivities, ``σ_s/R == σ_m/R² (== σ_c)``.
            * a float ``w`` in (0, 1): the sum's share of μ² *if the two parts
              were accounted separately*, i.e. ``(Δ_s/σ_s)² : (Δ_m/σ_m)² =
              w : 1 − w`` with Δ_s, Δ_m the separate sensitivities for the
              adjacency; both stds are then scaled by one common factor so the
              exact joint μ meets the target (the joint bound is smaller than
              the separate sum, so both end up lower than a separate split
              would give).  When counts are noised, ``σ_c = σ_s/R``.  Under
              REPLACE_ONE, ``w = 2/3`` equals ``"balanced"``.
            * ``"optimal"`` (default): minimises
              :func:`release_error_objective` subject to the exact joint μ:
              in closed form under ADD_REMOVE, by bisection on the
              stationarity condition under REPLACE_ONE with public counts,
              and by a grid search followed by deterministic Nelder–Mead
              when labels are private; the same inputs always give the same
              plan.

        private_labels: Under REPLACE_ONE, whether a replaced record may change
            class (counts are then noised).  Ignored under ADD_REMOVE.

    Returns:
        A :class:`LatentReleasePlan` whose release is ``mu``-GDP and
        (``epsilon``, ``delta``)-DP under ``adjacency`` with ``delta`` <= the
        requested δ.  The stds are nudged up after solving until the exact
        curve confirms the guarantee (conservative).

    Raises:
        ParameterError: A parameter is outside its domain.
        ParameterTypeError: A parameter has the wrong type.
        CalibrationError: The plan could not be certified (not expected).
    """
    eps, target_delta, radius, d, checked_split, labels_private = _checked_request(
        epsilon, delta, clip_norm, dim, adjacency, split, private_labels
    )
    solved = _solved_stds(
        mu_for_epsilon_delta(eps, target_delta),
        checked_split,
        radius=radius,
        dim=d,
        adjacency=adjacency,
        private_labels=labels_private,
    )
    # Nudged up until the exact curve confirms the guarantee (the one calibrator's
    # certification step, on the three stds together).
    std_sum, std_second, std_count = raise_until(
        solved,
        lambda stds: (
            gdp_delta(_joint_mu(stds, radius, adjacency, labels_private), eps) <= target_delta
        ),
        _nudged,
        max_steps=_MAX_NUDGES,
        failure="could not certify the latent release plan",
    )
    mu = _joint_mu((std_sum, std_second, std_count), radius, adjacency, labels_private)
    achieved = gdp_delta(mu, eps)
    return LatentReleasePlan(
        epsilon=eps,
        # δ can underflow to 0 for absurdly small targets; the target is then the bound.
        delta=achieved if achieved > 0.0 else target_delta,
        mu=mu,
        noise_std_sum=std_sum,
        noise_std_second_moment=std_second,
        noise_std_count=std_count,
        adjacency=adjacency,
        clip_norm=radius,
        dim=d,
        split=checked_split,
        private_labels=labels_private,
        sum_sensitivity=sum_sensitivity(radius, adjacency),
        second_moment_sensitivity=second_moment_sensitivity(radius, adjacency),
        count_sensitivity=count_sensitivity(adjacency, private_labels=labels_private),
        target_delta=target_delta,
    )


def _solved_stds(
    mu_target: float,
    split: str | float,
    *,
    radius: float,
    dim: int,
    adjacency: Adjacency,
    private_labels: bool,
) -> tuple[float, float, float]:
    """``(σ_s, σ_m, σ_c)`` of the split's direction scaled so the joint μ is ``mu_target``."""
    noised = _counts_noised(adjacency, private_labels)
    if split == "balanced":
        x, y, v = 1.0, 1.0, 1.0 if noised else 0.0
    elif split == "optimal":
        x, y, v = _optimal_direction(dim, adjacency, private_labels)
    else:
        weight = float(split)
        x = weight / (sum_sensitivity(radius, adjacency) / radius) ** 2
        y = (1.0 - weight) / (second_moment_sensitivity(radius, adjacency) / (radius * radius)) ** 2
        v = x if noised else 0.0
    scale = mu_target**2 / _constraint(x, y, v, adjacency, private_labels)
    return (
        radius / math.sqrt(scale * x),
        radius * (radius / math.sqrt(scale * y)),
        1.0 / math.sqrt(scale * v) if noised else 0.0,
    )


def _nudged(stds: tuple[float, float, float]) -> tuple[float, float, float]:
    """Every std up by a relative 1e-12 (the certification's step)."""
    return (stds[0] * (1.0 + 1e-12), stds[1] * (1.0 + 1e-12), stds[2] * (1.0 + 1e-12))


def _joint_mu(
    stds: tuple[float, float, float], radius: float, adjacency: Adjacency, private_labels: bool
) -> float:
    """The exact joint μ of the release with noise stds ``(σ_s, σ_m, σ_c)``."""
    return math.sqrt(
        joint_mu_squared(
            radius,
            stds[0],
            stds[1],
            adjacency,
            noise_std_count=stds[2] if _counts_noised(adjacency, private_labels) else None,
            private_labels=private_labels,
        )
    )


def _checked_request(
    epsilon: float,
    delta: float,
    clip_norm: float,
    dim: int,
    adjacency: Adjacency,
    split: object,
    private_labels: bool,
) -> tuple[float, float, float, int, str | float, bool]:
    """The checked ``(ε, δ, R, d, split, private labels)`` of a plan request."""
    eps = check_finite_positive("epsilon", epsilon)
    target_delta = check_delta(delta)
    radius = check_finite_positive("clip_norm", clip_norm)
    if not (_MIN_NORMAL <= radius * radius < math.inf):
        # The second-moment noise is in units of R²; it must be a normal double.
        raise ParameterError(
            "clip_norm", "a finite float > 0 whose square is a normal double", clip_norm
        )
    d = check_count("dim", dim, minimum=1)
    if not isinstance(adjacency, Adjacency):
        raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", adjacency)
    check_bool("private_labels", private_labels)
    checked_split = _check_split(split)
    labels_private = private_labels and adjacency is Adjacency.REPLACE_ONE
    return eps, target_delta, radius, d, checked_split, labels_private


def paper_baseline_noise_stds(
    epsilon: float, delta: float, *, clip_norm: float
) -> tuple[float, float]:
    """Noise stds of the reference paper's calibration (its Proposition 4.1), for comparison.

    The paper splits (ε, δ) in half between the sum and the second moment and
    uses the replace-one sensitivities ``2R`` and the loose ``2R²``, each
    calibrated with the analytic Gaussian mechanism.  The result is a valid
    but noisier (ε, δ)-DP release under REPLACE_ONE (basic composition).

    Args:
        epsilon: Total ε; finite, > 0.
        delta: Total δ; in (0, 1).
        clip_norm: R; finite, > 0.

    Returns:
        ``(noise_std_sum, noise_std_second_moment)`` in latent units.
    """
    eps = check_finite_positive("epsilon", epsilon)
    dlt = check_delta(delta)
    radius = check_finite_positive("clip_norm", clip_norm)
    return (
        calibrate_analytic_gaussian(eps / 2.0, dlt / 2.0, l2_sensitivity=2.0 * radius),
        calibrate_analytic_gaussian(eps / 2.0, dlt / 2.0, l2_sensitivity=2.0 * radius * radius),
    )
