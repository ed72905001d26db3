"""Canary audit of privfed's own Gaussian releases (pure: numpy + scipy + privfed.dp).

The latent-statistic engine claims that its per-class release of noisy sums,
second-moment sums and (optionally) counts is μ-GDP, hence (ε, δ)-DP.  This
module tests that claim empirically, the way a sceptical auditor would:

1. Build the **worst-case canary** for the adjacency: the pair of
   neighbouring datasets whose release differs the most after whitening by
   the noise (for REPLACE_ONE, two latents of norm R at the angle that
   maximises the joint change; for ADD_REMOVE, one latent of norm R).
2. Simulate the release many times with the canary in ("member" trials) and
   out ("non-member" trials).  The other records are known to the attacker
   (the strongest threat model), so their contribution cancels.
3. Run the **optimal attack**: by Neyman–Pearson, the likelihood ratio of two
   Gaussians with a shared covariance is monotone in the projection of the
   release onto the whitened canary direction.
4. Turn its error rates into μ_lb and ε_lb (held-out threshold, exact
   Clopper–Pearson) and set them beside the claimed μ and ε.

The empirical bound may exceed the claim only with probability ≤ significance
when the implementation is correct; with enough trials it comes close to the
claim (``tightness = μ_lb / μ``).  A release with too little noise is caught
(``violation_detected``), which the tests check on a half-noise release.

Two simulation modes trade realism for speed:

* :attr:`SimulationMode.SUFFICIENT_STATISTIC` samples the one-dimensional
  attack statistic directly from its exact distribution (millions of trials per
  second).  It audits the *accounting* (sensitivities, calibration, budget split).
* :attr:`SimulationMode.FULL_RELEASE` samples every noisy coordinate of the
  release with a caller-supplied noise sampler (e.g. privfed's own) and
  projects.  It also audits the *sampler* (scale, independence across
  coordinates), at a cost linear in the release size.

The simulation's own randomness is seeded for reproducibility; it protects
nothing and is unrelated to the noise of a real release.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privfed.audit._validation import (
    check_positive_float,
    check_positive_int,
    check_probability,
    check_seed,
)
from privfed.audit.bounds import PrivacyLowerBound, lower_bound_held_out
from privfed.errors import AuditError, ParameterError, ParameterTypeError

__all__ = [
    "CanaryAuditResult",
    "NoiseSampler",
    "ReleaseComponent",
    "SimulationMode",
    "audit_gaussian_mechanism",
    "audit_gaussian_release",
    "audit_latent_release",
    "self_audit",
    "worst_case_latent_canary",
]

#: ``sampler(shape, noise_std, seed=...) -> array`` of i.i.d. N(0, noise_std²) float64 values;
#: privfed.dp.noise.gaussian_noise has this signature.
NoiseSampler = Callable[..., Any]

_FULL_CHUNK_VALUES = 1 << 22  # values per chunk in FULL_RELEASE mode (~32 MiB of float64)


class SimulationMode(enum.Enum):
    """How the canary audit simulates the release."""

    #: Sample the optimal attack's statistic from its exact distribution (fast).
    SUFFICIENT_STATISTIC = "sufficient-statistic"
    #: Sample every noisy coordinate with a noise sampler, then project (slow, audits the sampler).
    FULL_RELEASE = "full-release"


@dataclass(frozen=True)
class ReleaseComponent:
    """One block of a Gaussian release with isotropic noise, and the canary's effect on it.

    Attributes:
        name: A label for reports (``"sum"``, ``"second_moment"``, ``"count"``).
        noise_std: Claimed noise standard deviation on each coordinate of the
            block, in the block's units; finite, > 0.
        canary_shift: The change of the block's exact value when the canary is
            in rather than out, float64 array of shape (k,) (matrices flattened).
    """

    name: str
    noise_std: float
    canary_shift: NDArray[np.float64] = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ParameterError("name", "a non-empty str", self.name)
        check_positive_float("noise_std", self.noise_std)
        shift = np.asarray(self.canary_shift, dtype=np.float64)
        if shift.ndim != 1 or shift.size < 1:
            raise ParameterError("canary_shift", "a non-empty 1-D array", f"shape {shift.shape}")
        if not np.all(np.isfinite(shift)):
            raise ParameterError("canary_shift", "finite everywhere", "array")
        shift.setflags(write=False)
        object.__setattr__(self, "canary_shift", shift)

    @property
    def mu_squared(self) -> float:
        """‖shift‖² / noise_std²: this block's share of the canary's μ²."""
        return float(np.dot(self.canary_shift, self.canary_shift)) / self.noise_std**2


@dataclass(frozen=True)
class CanaryAuditResult:
    """Outcome of a canary audit: claimed guarantee next to empirical lower bounds.

    Attributes:
        claimed_mu: μ the accounting claims (e.g. ``LatentReleasePlan.mu``).
        claimed_epsilon: ε the accounting claims at ``delta``.
        delta: δ of the claim and of ``epsilon_bound``.
        noise_scale: Actual noise std / claimed noise std used by the
            simulation (1.0 audits the release as calibrated; 0.5 simulates a
            bug that halves the noise).
        canary_mu: Exact μ of the simulated release for this canary,
            √(Σ‖shift‖²/σ_claimed²) / noise_scale; equals ``claimed_mu`` when
            the canary is worst-case and the accounting is exact.
        mu_bound: Bound whose held-out threshold maximised μ_lb.
        epsilon_bound: Bound whose held-out threshold maximised ε_lb.
        num_trials: Evaluation trials per hypothesis (canary in / out).
        num_calibration_trials: Calibration trials per hypothesis (threshold choice).
        mode: The simulation mode.
        significance: α of each bound (each holds with probability ≥ 1 − α).
    """

    claimed_mu: float
    claimed_epsilon: float
    delta: float
    noise_scale: float
    canary_mu: float
    mu_bound: PrivacyLowerBound
    epsilon_bound: PrivacyLowerBound
    num_trials: int
    num_calibration_trials: int
    mode: SimulationMode
    significance: float

    def __post_init__(self) -> None:
        check_positive_float("claimed_mu", self.claimed_mu, allow_zero=True)
        check_positive_float("claimed_epsilon", self.claimed_epsilon, allow_zero=True)
        check_probability("delta", self.delta, open_low=False, open_high=True)
        check_positive_float("noise_scale", self.noise_scale)
        check_positive_float("canary_mu", self.canary_mu, allow_zero=True)
        check_positive_int("num_trials", self.num_trials)
        check_positive_int("num_calibration_trials", self.num_calibration_trials)
        if not isinstance(self.mode, SimulationMode):
            raise ParameterError("mode", "a SimulationMode", self.mode)
        check_probability("significance", self.significance, open_low=True, open_high=True)

    @property
    def mu_lower_bound(self) -> float:
        """Empirical μ_lb (holds with probability ≥ 1 − significance)."""
        return self.mu_bound.mu_lower_bound

    @property
    def epsilon_lower_bound(self) -> float:
        """Empirical ε_lb at ``delta`` (holds with probability ≥ 1 − significance)."""
        return self.epsilon_bound.epsilon_lower_bound

    @property
    def tightness(self) -> float:
        """μ_lb / claimed μ (1.0 = the audit reaches the claim; > 1 = violation)."""
        return self.mu_lower_bound / self.claimed_mu if self.claimed_mu > 0 else math.inf

    @property
    def violation_detected(self) -> bool:
        """True when μ_lb or ε_lb exceeds its claim.

        Each bound fails with probability ≤ α, so a correct release is flagged
        with probability ≤ 2α (both bounds are checked).
        """
        return (
            self.mu_lower_bound > self.claimed_mu or self.epsilon_lower_bound > self.claimed_epsilon
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            "claimed_mu": self.claimed_mu,
            "claimed_epsilon": self.claimed_epsilon,
            "delta": self.delta,
            "noise_scale": self.noise_scale,
            "canary_mu": self.canary_mu,
            "mu_lower_bound": self.mu_lower_bound,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "tightness": self.tightness,
            "violation_detected": self.violation_detected,
            "mu_bound": self.mu_bound.to_dict(),
            "epsilon_bound": self.epsilon_bound.to_dict(),
            "num_trials": self.num_trials,
            "num_calibration_trials": self.num_calibration_trials,
            "mode": self.mode.value,
            "significance": self.significance,
        }


def _numpy_sampler(rng: np.random.Generator) -> NoiseSampler:
    def sample(shape: tuple[int, ...], noise_std: float, *, seed: int | None = None) -> Any:
        del seed  # the generator is already seeded
        return rng.normal(0.0, noise_std, size=shape)

    return sample


def _attack_scores(
    components: Sequence[ReleaseComponent],
    *,
    canary_in: bool,
    trials: int,
    noise_scale: float,
    mode: SimulationMode,
    rng: np.random.Generator,
    sampler: NoiseSampler | None,
) -> NDArray[np.float64]:
    """Projection T = Σ ⟨Δ_i, Y_i − base_i⟩ / σ_i² (claimed σ), normalised by the claimed μ.

    Under "out" T ~ N(0, s²) and under "in" T ~ N(Σ‖Δ_i‖²/σ_i², s²) with
    s² = noise_scale² · Σ‖Δ_i‖²/σ_i²; dividing by the claimed μ makes the
    calibrated case N(0, 1) vs N(μ, 1).
    """
    mu2 = sum(c.mu_squared for c in components)
    norm = math.sqrt(mu2)
    if mode is SimulationMode.SUFFICIENT_STATISTIC:
        scores = rng.standard_normal(trials) * (noise_scale * norm)
    else:
        scores = np.zeros(trials)
        draw = sampler if sampler is not None else _numpy_sampler(rng)
        for component in components:
            k = component.canary_shift.size
            weight = component.canary_shift / component.noise_std**2
            actual_std = component.noise_std * noise_scale
            chunk = max(1, _FULL_CHUNK_VALUES // k)
            for start in range(0, trials, chunk):
                stop = min(trials, start + chunk)
                sub_seed = int(rng.integers(0, 2**63 - 1))
                noise = np.asarray(
                    draw((stop - start, k), actual_std, seed=sub_seed), dtype=np.float64
                )
                if noise.shape != (stop - start, k):
                    raise AuditError(
                        f"noise sampler returned shape {noise.shape}, expected {(stop - start, k)}"
                    )
                scores[start:stop] += noise @ weight
    if canary_in:
        scores = scores + mu2
    return np.asarray(scores / norm, dtype=np.float64)


def _check_components(components: Any) -> tuple[ReleaseComponent, ...]:
    if isinstance(components, ReleaseComponent):
        components = (components,)
    try:
        items = tuple(components)
    except TypeError as exc:
        raise ParameterTypeError(
            "components", "a sequence of ReleaseComponent", components
        ) from exc
    if not items or not all(isinstance(c, ReleaseComponent) for c in items):
        raise ParameterError("components", "a non-empty sequence of ReleaseComponent", components)
    if sum(c.mu_squared for c in items) <= 0.0:
        raise ParameterError("components", "with a non-zero canary shift", "all shifts zero")
    return items


def _claimed_epsilon(mu: float, delta: float) -> float:
    from privfed.dp import gdp_epsilon

    return float(gdp_epsilon(mu, delta))


def audit_gaussian_release(
    components: Sequence[ReleaseComponent],
    *,
    claimed_mu: float,
    delta: float,
    claimed_epsilon: float | None = None,
    noise_scale: float = 1.0,
    num_trials: int = 200_000,
    num_calibration_trials: int = 50_000,
    significance: float = 0.05,
    mode: SimulationMode = SimulationMode.SUFFICIENT_STATISTIC,
    noise_sampler: NoiseSampler | None = None,
    seed: int | None = None,
) -> CanaryAuditResult:
    """Audit a multi-block Gaussian release against its claimed μ with the optimal attack.

    Threat model: the attacker knows every record except the canary's
    membership bit and the noise distribution it was *claimed* to use; it
    observes one release per trial and outputs "in" when the whitened
    projection exceeds a threshold chosen on separate calibration trials.

    Args:
        components: The release's blocks with the canary's shift in each.
        claimed_mu: The μ-GDP guarantee claimed for the release; finite, > 0.
        delta: δ at which ε is claimed and bounded, in (0, 1).
        claimed_epsilon: ε claimed at ``delta``; default: the exact ε of a
            ``claimed_mu``-GDP mechanism (``privfed.dp`` ``gdp_epsilon``).
        noise_scale: Actual / claimed noise std in the simulation, > 0; 1.0
            audits the release as specified; values < 1 simulate a bug.
        num_trials: Evaluation trials per hypothesis, ≥ 100.
        num_calibration_trials: Threshold-selection trials per hypothesis, ≥ 100.
        significance: α in (0, 1) of each reported bound.
        mode: :class:`SimulationMode`.
        noise_sampler: FULL_RELEASE only: ``sampler(shape, noise_std, *, seed)``
            returning i.i.d. N(0, noise_std²) values of that shape (e.g.
            ``privfed.dp.noise.gaussian_noise``); default numpy's generator.
        seed: Seed of the simulation, or None for fresh entropy.

    Returns:
        A :class:`CanaryAuditResult`.

    Raises:
        ParameterError: An argument is outside its domain.
        AuditError: The noise sampler returned an array of the wrong shape.
    """
    items = _check_components(components)
    mu = check_positive_float("claimed_mu", claimed_mu)
    d = check_probability("delta", delta, open_low=True, open_high=True)
    eps = (
        _claimed_epsilon(mu, d)
        if claimed_epsilon is None
        else check_positive_float("claimed_epsilon", claimed_epsilon, allow_zero=True)
    )
    scale = check_positive_float("noise_scale", noise_scale)
    n = check_positive_int("num_trials", num_trials, minimum=100)
    c = check_positive_int("num_calibration_trials", num_calibration_trials, minimum=100)
    alpha = check_probability("significance", significance, open_low=True, open_high=True)
    if not isinstance(mode, SimulationMode):
        raise ParameterError("mode", "a SimulationMode", mode)
    if noise_sampler is not None and not callable(noise_sampler):
        raise ParameterTypeError("noise_sampler", "a callable or None", noise_sampler)
    if noise_sampler is not None and mode is not SimulationMode.FULL_RELEASE:
        raise ParameterError("noise_sampler", "None unless mode is FULL_RELEASE", "a callable")
    rng = np.random.default_rng(check_seed("seed", seed))

    def scores(canary_in: bool, trials: int) -> NDArray[np.float64]:
        return _attack_scores(
            items,
            canary_in=canary_in,
            trials=trials,
            noise_scale=scale,
            mode=mode,
            rng=rng,
            sampler=noise_sampler,
        )

    cal_in, cal_out = scores(True, c), scores(False, c)
    ev_in, ev_out = scores(True, n), scores(False, n)
    mu_bound = lower_bound_held_out(
        cal_in, cal_out, ev_in, ev_out, delta=d, significance=alpha, objective="mu"
    )
    eps_bound = lower_bound_held_out(
        cal_in, cal_out, ev_in, ev_out, delta=d, significance=alpha, objective="epsilon"
    )
    return CanaryAuditResult(
        claimed_mu=mu,
        claimed_epsilon=eps,
        delta=d,
        noise_scale=scale,
        canary_mu=math.sqrt(sum(x.mu_squared for x in items)) / scale,
        mu_bound=mu_bound,
        epsilon_bound=eps_bound,
        num_trials=n,
        num_calibration_trials=c,
        mode=mode,
        significance=alpha,
    )


def audit_gaussian_mechanism(
    l2_sensitivity: float,
    noise_std: float,
    *,
    delta: float,
    **kwargs: Any,
) -> CanaryAuditResult:
    """Audit the plain Gaussian mechanism x + N(0, noise_std²) with sensitivity Δ.

    Claimed μ = Δ / noise_std.  Keyword arguments are those of
    :func:`audit_gaussian_release` (``noise_scale``, ``num_trials``, ``seed``...).

    Args:
        l2_sensitivity: Δ, finite, > 0, units of the query.
        noise_std: σ, finite, > 0, same units.
        delta: δ in (0, 1).
        **kwargs: Forwarded to :func:`audit_gaussian_release`.

    Returns:
        A :class:`CanaryAuditResult`.
    """
    sens = check_positive_float("l2_sensitivity", l2_sensitivity)
    sigma = check_positive_float("noise_std", noise_std)
    component = ReleaseComponent("query", sigma, np.array([sens]))
    return audit_gaussian_release([component], claimed_mu=sens / sigma, delta=delta, **kwargs)


def worst_case_latent_canary(
    *,
    clip_norm: float,
    dim: int,
    noise_std_sum: float,
    noise_std_second_moment: float,
    noise_std_count: float | None,
    adjacency: Any,
) -> tuple[ReleaseComponent, ...]:
    """The canary that maximises the whitened change of the latent-statistic release.

    The release of one class is ``(Σz + N(0, σ_s² I_d), Σzzᵀ + N(0, σ_m² I_{d²}),
    n + N(0, σ_c²))`` (second-moment noise isotropic on the d×d matrix, as in
    ``privfed.dp.plan_latent_release``).  Public labels only.

    * REPLACE_ONE: z = R·e₁ is replaced by z′ = R·(c·e₁ + √(1−c²)·e₂) with
      c = max(−σ_m²/(2σ_s²R²), −1), the angle maximising
      ‖z − z′‖²/σ_s² + ‖zzᵀ − z′z′ᵀ‖_F²/σ_m² (needs d ≥ 2 unless c = −1).
      Counts are unchanged.
    * ADD_REMOVE: z = R·e₁ is added; the count moves by one.

    Args:
        clip_norm: R, finite, > 0 (latent units).
        dim: d ≥ 1.
        noise_std_sum: σ_s > 0.
        noise_std_second_moment: σ_m > 0.
        noise_std_count: σ_c > 0, or None / 0 when counts are public (REPLACE_ONE).
        adjacency: A ``privfed.dp.Adjacency`` member.

    Returns:
        The release blocks with the canary's shift: ``sum`` (d), ``second_moment``
        (d²) and, under ADD_REMOVE, ``count`` (1).
    """
    from privfed.dp import Adjacency

    r = check_positive_float("clip_norm", clip_norm)
    d = check_positive_int("dim", dim)
    s_sum = check_positive_float("noise_std_sum", noise_std_sum)
    s_m = check_positive_float("noise_std_second_moment", noise_std_second_moment)
    if not isinstance(adjacency, Adjacency):
        raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", adjacency)
    s_c = (
        None
        if noise_std_count in (None, 0, 0.0)
        else check_positive_float("noise_std_count", noise_std_count)
    )
    if adjacency is Adjacency.ADD_REMOVE:
        if s_c is None:
            raise ParameterError("noise_std_count", "> 0 under ADD_REMOVE", noise_std_count)
        z = np.zeros(d)
        z[0] = r
        return (
            ReleaseComponent("sum", s_sum, z),
            ReleaseComponent("second_moment", s_m, np.outer(z, z).ravel()),
            ReleaseComponent("count", s_c, np.array([1.0])),
        )
    cos = max(-(s_m**2) / (2.0 * s_sum**2 * r**2), -1.0)
    if d < 2 and cos > -1.0:
        cos = -1.0  # in one dimension only antipodal replacement exists
    z = np.zeros(d)
    z[0] = r
    z_prime = np.zeros(d)
    z_prime[0] = r * cos
    if d >= 2:
        z_prime[1] = r * math.sqrt(max(0.0, 1.0 - cos * cos))
    blocks = [
        ReleaseComponent("sum", s_sum, z - z_prime),
        ReleaseComponent(
            "second_moment", s_m, (np.outer(z, z) - np.outer(z_prime, z_prime)).ravel()
        ),
    ]
    return tuple(blocks)


def audit_latent_release(plan: Any, **kwargs: Any) -> CanaryAuditResult:
    """Canary-audit a ``privfed.dp.LatentReleasePlan`` with its worst-case canary.

    The claim audited is the plan's ``mu`` and its ``epsilon`` at its ``delta``.
    Private-label plans are refused (the cross-class canary is not built here).

    Args:
        plan: A ``LatentReleasePlan`` (any object with its attributes).
        **kwargs: Forwarded to :func:`audit_gaussian_release` (``noise_scale``,
            ``num_trials``, ``num_calibration_trials``, ``significance``,
            ``mode``, ``noise_sampler``, ``seed``).

    Returns:
        A :class:`CanaryAuditResult`.
    """
    required = (
        "mu",
        "epsilon",
        "delta",
        "clip_norm",
        "dim",
        "adjacency",
        "noise_std_sum",
        "noise_std_second_moment",
        "noise_std_count",
    )
    missing = [name for name in required if not hasattr(plan, name)]
    if missing:
        raise ParameterTypeError("plan", "a LatentReleasePlan", plan)
    if getattr(plan, "private_labels", False):
        raise ParameterError("plan", "a plan with public labels", "private_labels=True")
    components = worst_case_latent_canary(
        clip_norm=plan.clip_norm,
        dim=plan.dim,
        noise_std_sum=plan.noise_std_sum,
        noise_std_second_moment=plan.noise_std_second_moment,
        noise_std_count=plan.noise_std_count,
        adjacency=plan.adjacency,
    )
    return audit_gaussian_release(
        components,
        claimed_mu=float(plan.mu),
        delta=float(plan.delta),
        claimed_epsilon=float(plan.epsilon),
        **kwargs,
    )


def self_audit(
    epsilon: float,
    delta: float,
    *,
    clip_norm: float,
    dim: int,
    adjacency: Any = None,
    split: str | float = "optimal",
    **kwargs: Any,
) -> CanaryAuditResult:
    """Plan a latent release with ``privfed.dp.plan_latent_release`` and canary-audit it.

    Args:
        epsilon: Target ε, finite, > 0.
        delta: Target δ in (0, 1).
        clip_norm: R, finite, > 0.
        dim: Latent dimension d ≥ 1.
        adjacency: ``privfed.dp.Adjacency``; default REPLACE_ONE.
        split: Budget split passed to the planner.
        **kwargs: Forwarded to :func:`audit_gaussian_release`.

    Returns:
        A :class:`CanaryAuditResult` comparing the plan's claim with μ_lb, ε_lb.
    """
    from privfed.dp import Adjacency, plan_latent_release

    adj = Adjacency.REPLACE_ONE if adjacency is None else adjacency
    plan = plan_latent_release(
        epsilon,
        delta,
        clip_norm=clip_norm,
        dim=dim,
        adjacency=adj,
        split=split,  # type: ignore[arg-type]
    )
    return audit_latent_release(plan, **kwargs)
