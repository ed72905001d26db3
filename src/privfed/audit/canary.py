"""Canary audit of privfed's own Gaussian releases (pure: numpy + scipy + privfed.dp).

The latent-statistic engine claims that its per-class release of noisy sums,
second-moment sums and (optionally) counts is μ-GDP, hence (ε, δ)-DP.  This
module tests that claim empirically, the way a sceptical auditor would:

1. Build the **worst-case canary** for the adjacency: the pair of
   neighbouring datasets whose release differs the most after whitening by
   the noise (for REPLACE_ONE, two latents of norm R at the angle that
   maximises the joint change; for ADD_REMOVE, one latent of norm R).
2. Produce the release many times with the canary in ("member" trials) and
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

What is audited depends on where the releases of step 2 come from
(:attr:`CanaryAuditResult.audited` says it in words):

* :attr:`SimulationMode.RELEASE_CODE` runs a **real release**: the mechanism
  is injected as a :class:`CanaryGame` whose ``release(with_canary, seed)``
  runs the code under test on the two neighbouring datasets and returns what
  it published.  This audits the release code itself (noise placement,
  scale, sampler, what is published).  The adapter for the latent engine,
  which builds neighbouring ``LatentStatistics`` and calls
  ``release_latent_statistics``, is :mod:`privfed.engines.latent.self_audit`
  (this module never imports the engines).
* :attr:`SimulationMode.SUFFICIENT_STATISTIC` (*simulated*) samples the
  one-dimensional attack statistic directly from the distribution the claimed
  noise stds imply (millions of trials per second).  It checks the accounting
  arithmetic only (sensitivities, calibration, budget split), not the release
  code: a bug in the release cannot show up in it.
* :attr:`SimulationMode.FULL_RELEASE` (*simulated*) samples every noisy
  coordinate of a model of the release with a caller-supplied noise sampler
  (e.g. privfed's own) and projects.  It also checks the *sampler* (scale,
  independence across coordinates), still not the release code.

The randomness of a simulation is seeded for reproducibility; it protects
nothing and is unrelated to the noise of a real release.  A real-release audit
passes each release a fresh seed derived from ``seed`` (reproducible), or
``None`` when ``seed`` is ``None``, so the release draws its noise from its
own CSPRNG.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privfed._checks import check_float, check_instance, check_int, check_probability, check_seed
from privfed._records import set_fields
from privfed.audit.bounds import BoundSpec, PrivacyLowerBound, lower_bound_held_out
from privfed.errors import AuditError, ParameterError, ParameterTypeError

__all__ = [
    "RELEASE_CODE_TRIALS",
    "SIMULATED_LABEL",
    "SIMULATION_TRIALS",
    "AuditTrials",
    "CanaryAuditResult",
    "CanaryGame",
    "CanaryRelease",
    "LatentCanaryNoise",
    "NoiseSampler",
    "ReleaseComponent",
    "SimulationMode",
    "audit_canary_game",
    "audit_gaussian_mechanism",
    "audit_gaussian_release",
    "audit_latent_release",
    "worst_case_latent_canary",
    "worst_case_latent_records",
]

#: ``sampler(shape, noise_std, seed=...) -> array`` of i.i.d. N(0, noise_std²) float64 values;
#: privfed.dp.noise.gaussian_noise has this signature.
NoiseSampler = Callable[..., Any]

#: ``release(with_canary, seed) -> observations``: run the release under audit once on
#: the neighbouring dataset with (``True``) or without (``False``) the canary and return
#: what it published, flattened: float64 of shape ``(m, k)`` (``m >= 1`` independent
#: releases, e.g. one per disjoint class) or ``(k,)``.  ``seed`` is an int for a
#: reproducible release or ``None`` for the release's own fresh (CSPRNG) noise.
CanaryRelease = Callable[[bool, int | None], Any]

#: What a simulated audit checks, in the words every result and report shows.
SIMULATED_LABEL = "simulated: checks the accounting arithmetic only, not the release code"
_FULL_RELEASE_LABEL = (
    "simulated with the given noise sampler: checks the accounting arithmetic and the "
    "sampler only, not the release code"
)

_FULL_CHUNK_VALUES = 1 << 22  # values per chunk in FULL_RELEASE mode (~32 MiB of float64)


@dataclass(frozen=True)
class AuditTrials:
    """How many releases a canary audit runs, how sure its bounds are, and its seed.

    The settings every canary audit takes as one argument (``trials=``):
    :func:`audit_gaussian_release` (and the simulated audits that forward to it),
    :func:`audit_canary_game` and the engines' self-audits.  Checked here, once.

    Attributes:
        num_trials: Evaluation trials per hypothesis (canary in / out), ≥ 100.
        num_calibration_trials: Threshold-selection trials per hypothesis, ≥ 100.
        significance: α in (0, 1) of each reported bound (each holds with
            probability ≥ 1 − α; a correct release is flagged with
            probability ≤ 2α).
        seed: ``None`` (default): a simulation draws fresh entropy and every
            real release gets ``seed=None`` (its own CSPRNG noise); an int ≥ 0:
            reproducible (each real release gets its own seed derived from it).

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    num_trials: int = 50_000
    num_calibration_trials: int = 12_500
    significance: float = 0.05
    seed: int | None = None

    def __post_init__(self) -> None:
        set_fields(
            self,
            num_trials=check_int("num_trials", self.num_trials, minimum=100, numpy=True),
            num_calibration_trials=check_int(
                "num_calibration_trials", self.num_calibration_trials, minimum=100, numpy=True
            ),
            significance=check_probability(
                "significance", self.significance, open_low=True, open_high=True
            ),
            seed=check_seed("seed", self.seed),
        )


#: Default of :func:`audit_canary_game` and the real-release self-audits (each trial
#: one published release).
RELEASE_CODE_TRIALS = AuditTrials()
#: Default of the simulated audits (:func:`audit_gaussian_release`): trials are cheap there.
SIMULATION_TRIALS = AuditTrials(num_trials=200_000, num_calibration_trials=50_000)


class SimulationMode(enum.Enum):
    """Where the canary audit's releases come from."""

    #: Simulated: sample the optimal attack's statistic from its exact distribution (fast).
    SUFFICIENT_STATISTIC = "sufficient-statistic"
    #: Simulated: sample every noisy coordinate with a noise sampler, then project.
    FULL_RELEASE = "full-release"
    #: Real: run the release code under audit (a :class:`CanaryGame`), then project.
    RELEASE_CODE = "release-code"


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
        check_float("noise_std", self.noise_std, low=0, open_low=True)
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
        noise_scale: Actual noise std / claimed noise std that the auditor put
            in on purpose: in a simulation, the scale simulated; for release
            code, the scale a deliberately broken release was built with (1.0
            audits the release as calibrated; 0.5 a bug that halves the noise).
            Informational for release code: the audit measures the code, it
            never uses this number.
        canary_mu: Exact μ of this canary's pair if the noise were exactly the
            claimed noise times ``noise_scale``,
            √(Σ‖shift‖²/σ_claimed²) / noise_scale; equals ``claimed_mu`` when
            the canary is worst-case and the accounting is exact.
        mu_bound: Bound whose held-out threshold maximised μ_lb.
        epsilon_bound: Bound whose held-out threshold maximised ε_lb.
        num_trials: Evaluation trials per hypothesis (canary in / out).
        num_calibration_trials: Calibration trials per hypothesis (threshold choice).
        mode: Where the releases came from (simulated or release code).
        significance: α of each bound (each holds with probability ≥ 1 − α).
        mechanism: For ``RELEASE_CODE``, what was run (a non-empty description
            naming the release function); empty for simulations.
        mu_attack: The attack behind ``mu_bound``: ``"joint"`` (the projection
            on the whole whitened canary shift; the only one in simulations)
            or the name of the single block a real-release audit chose.
        epsilon_attack: The attack behind ``epsilon_bound``.
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
    mechanism: str = ""
    mu_attack: str = "joint"
    epsilon_attack: str = "joint"

    def __post_init__(self) -> None:
        check_float("claimed_mu", self.claimed_mu, low=0)
        check_float("claimed_epsilon", self.claimed_epsilon, low=0)
        check_probability("delta", self.delta, open_low=False, open_high=True)
        check_float("noise_scale", self.noise_scale, low=0, open_low=True)
        check_float("canary_mu", self.canary_mu, low=0)
        check_int("num_trials", self.num_trials, minimum=1, numpy=True)
        check_int("num_calibration_trials", self.num_calibration_trials, minimum=1, numpy=True)
        if not isinstance(self.mode, SimulationMode):
            raise ParameterError("mode", "a SimulationMode", self.mode)
        check_probability("significance", self.significance, open_low=True, open_high=True)
        if not isinstance(self.mechanism, str):
            raise ParameterTypeError("mechanism", "a str", self.mechanism)
        if (self.mode is SimulationMode.RELEASE_CODE) != bool(self.mechanism):
            raise ParameterError(
                "mechanism", "non-empty exactly when mode is RELEASE_CODE", self.mechanism
            )
        for name in ("mu_attack", "epsilon_attack"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ParameterError(name, "a non-empty str", value)

    @property
    def simulated(self) -> bool:
        """True when the releases were simulated (the release code was not run)."""
        return self.mode is not SimulationMode.RELEASE_CODE

    @property
    def audited(self) -> str:
        """What this audit checks, in words (shown in reports).

        ``"release code: ..."`` for a real release, :data:`SIMULATED_LABEL`
        (or its full-release variant) for a simulation.
        """
        if self.mode is SimulationMode.RELEASE_CODE:
            return f"release code: {self.mechanism}"
        if self.mode is SimulationMode.FULL_RELEASE:
            return _FULL_RELEASE_LABEL
        return SIMULATED_LABEL

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
            "simulated": self.simulated,
            "audited": self.audited,
            "mechanism": self.mechanism,
            "mu_attack": self.mu_attack,
            "epsilon_attack": self.epsilon_attack,
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


def _check_simulation(mode: Any, noise_sampler: Any) -> None:
    """A simulated mode, and a noise sampler only with FULL_RELEASE."""
    if not isinstance(mode, SimulationMode) or mode is SimulationMode.RELEASE_CODE:
        raise ParameterError(
            "mode",
            "SimulationMode.SUFFICIENT_STATISTIC or FULL_RELEASE (release code: audit_canary_game)",
            mode,
        )
    if noise_sampler is not None and not callable(noise_sampler):
        raise ParameterTypeError("noise_sampler", "a callable or None", noise_sampler)
    if noise_sampler is not None and mode is not SimulationMode.FULL_RELEASE:
        raise ParameterError("noise_sampler", "None unless mode is FULL_RELEASE", "a callable")


def audit_gaussian_release(
    components: Sequence[ReleaseComponent],
    *,
    claimed_mu: float,
    delta: float,
    claimed_epsilon: float | None = None,
    noise_scale: float = 1.0,
    trials: AuditTrials = SIMULATION_TRIALS,
    mode: SimulationMode = SimulationMode.SUFFICIENT_STATISTIC,
    noise_sampler: NoiseSampler | None = None,
) -> CanaryAuditResult:
    """Simulated audit of a multi-block Gaussian release's claimed μ with the optimal attack.

    The release is **simulated** from ``components`` (claimed noise stds and
    the canary's shift): this checks the accounting arithmetic only, not any
    release code (:data:`SIMULATED_LABEL`).  To run real release code use
    :func:`audit_canary_game`.

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
        trials: Trials, significance and seed of the simulation
            (:class:`AuditTrials`; ``seed`` None: fresh entropy).
        mode: :class:`SimulationMode`, ``SUFFICIENT_STATISTIC`` or ``FULL_RELEASE``.
        noise_sampler: FULL_RELEASE only: ``sampler(shape, noise_std, *, seed)``
            returning i.i.d. N(0, noise_std²) values of that shape (e.g.
            ``privfed.dp.noise.gaussian_noise``); default numpy's generator.

    Returns:
        A :class:`CanaryAuditResult`.

    Raises:
        ParameterError: An argument is outside its domain.
        AuditError: The noise sampler returned an array of the wrong shape.
    """
    items = _check_components(components)
    mu = check_float("claimed_mu", claimed_mu, low=0, open_low=True)
    d = check_probability("delta", delta, open_low=True, open_high=True)
    eps = (
        _claimed_epsilon(mu, d)
        if claimed_epsilon is None
        else check_float("claimed_epsilon", claimed_epsilon, low=0)
    )
    scale = check_float("noise_scale", noise_scale, low=0, open_low=True)
    t = check_instance("trials", trials, AuditTrials)
    n, c, alpha = t.num_trials, t.num_calibration_trials, t.significance
    _check_simulation(mode, noise_sampler)
    rng = np.random.default_rng(t.seed)
    # Calibration (c trials) then evaluation (n trials), each "in" then "out": the draws' order.
    cal_in, cal_out, ev_in, ev_out = [
        _attack_scores(
            items,
            canary_in=canary_in,
            trials=trials,
            noise_scale=scale,
            mode=mode,
            rng=rng,
            sampler=noise_sampler,
        )
        for trials in (c, n)
        for canary_in in (True, False)
    ]
    spec = BoundSpec(d, alpha)
    mu_bound = lower_bound_held_out(cal_in, cal_out, ev_in, ev_out, spec=spec, objective="mu")
    eps_bound = lower_bound_held_out(cal_in, cal_out, ev_in, ev_out, spec=spec, objective="epsilon")
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
    :func:`audit_gaussian_release` (``noise_scale``, ``trials``, ``mode``...).

    Args:
        l2_sensitivity: Δ, finite, > 0, units of the query.
        noise_std: σ, finite, > 0, same units.
        delta: δ in (0, 1).
        **kwargs: Forwarded to :func:`audit_gaussian_release`.

    Returns:
        A :class:`CanaryAuditResult`.
    """
    sens = check_float("l2_sensitivity", l2_sensitivity, low=0, open_low=True)
    sigma = check_float("noise_std", noise_std, low=0, open_low=True)
    component = ReleaseComponent("query", sigma, np.array([sens]))
    return audit_gaussian_release([component], claimed_mu=sens / sigma, delta=delta, **kwargs)


@dataclass(frozen=True)
class CanaryGame:
    """A neighbouring pair run through a real release: the mechanism under audit, injected.

    The game is the attacker's view of one mechanism: ``release`` produces
    the published output on the dataset with the canary (``True``) or on its
    neighbour without it (``False``); ``components`` and ``baseline`` are what
    the attacker knows in advance (the claimed noise std of each block, the
    canary's exact shift of each block, and the exact noise-free output
    without the canary).  The observation layout is the concatenation of the
    blocks of ``components`` in order.

    Attributes:
        release: A :data:`CanaryRelease`: ``release(with_canary, seed)`` runs the
            code under audit once and returns its published values, float64
            ``(m, k)`` for ``m >= 1`` independent releases or ``(k,)``, where
            ``k`` is the total size of ``components``.
        components: The release blocks, each with its *claimed* noise std and
            the canary's shift (exact value with minus without the canary).
        baseline: float64 ``(k,)``: the exact (noise-free) published values
            without the canary.
        claimed_mu: μ-GDP claimed for the release under the game's adjacency;
            finite, > 0.
        claimed_epsilon: ε claimed at ``delta``; finite, >= 0.
        delta: δ of the claim, in (0, 1).
        mechanism: What ``release`` runs, in words (names the release
            function); shown as ``"release code: <mechanism>"``.
        noise_scale: Actual / claimed noise std the release was *built* with
            on purpose (1.0: as claimed; 0.5 for a deliberately broken
            half-noise release that tests the auditor).  Informational only.
    """

    release: CanaryRelease = field(repr=False)
    components: tuple[ReleaseComponent, ...]
    baseline: NDArray[np.float64] = field(repr=False)
    claimed_mu: float
    claimed_epsilon: float
    delta: float
    mechanism: str
    noise_scale: float = 1.0

    def __post_init__(self) -> None:
        if not callable(self.release):
            raise ParameterTypeError(
                "release", "a callable release(with_canary, seed)", self.release
            )
        items = _check_components(self.components)
        size = sum(c.canary_shift.size for c in items)
        base = np.array(self.baseline, dtype=np.float64)
        if base.shape != (size,):
            raise ParameterError(
                "baseline", f"a float64 array of shape ({size},)", f"shape {base.shape}"
            )
        if not np.all(np.isfinite(base)):
            raise ParameterError("baseline", "finite everywhere", "array")
        base.setflags(write=False)
        object.__setattr__(self, "components", items)
        object.__setattr__(self, "baseline", base)
        object.__setattr__(
            self, "claimed_mu", check_float("claimed_mu", self.claimed_mu, low=0, open_low=True)
        )
        object.__setattr__(
            self, "claimed_epsilon", check_float("claimed_epsilon", self.claimed_epsilon, low=0)
        )
        object.__setattr__(self, "delta", check_probability("delta", self.delta))
        if not isinstance(self.mechanism, str) or not self.mechanism.strip():
            raise ParameterError("mechanism", "a non-empty description", self.mechanism)
        object.__setattr__(
            self, "noise_scale", check_float("noise_scale", self.noise_scale, low=0, open_low=True)
        )

    @property
    def size(self) -> int:
        """``k``: published values per release."""
        return int(self.baseline.size)

    @property
    def canary_mu(self) -> float:
        """√(Σ‖shift‖²/σ_claimed²): the canary's μ under the claimed noise."""
        return math.sqrt(sum(c.mu_squared for c in self.components))


def _game_attacks(
    game: CanaryGame,
) -> tuple[tuple[str, ...], NDArray[np.float64], NDArray[np.float64]]:
    """The attacks of a game: names, a (k, A) weight matrix and the (A,) normalisers.

    Column 0 is the likelihood-ratio test of the claimed model on the whole
    release (the projection on the whitened canary shift); with more than one
    informative block, one more column per informative block projects on that
    block alone, which is what exposes a bug confined to one block (e.g. an
    unnoised value) that the joint statistic dilutes.
    """
    names = ["joint"]
    blocks = [np.concatenate([c.canary_shift / c.noise_std**2 for c in game.components])]
    norms = [game.canary_mu]
    informative = [c for c in game.components if c.mu_squared > 0.0]
    if len(informative) > 1:
        for index, component in enumerate(game.components):
            if component.mu_squared <= 0.0:
                continue
            column = [np.zeros(c.canary_shift.size) for c in game.components]
            column[index] = component.canary_shift / component.noise_std**2
            names.append(component.name)
            blocks.append(np.concatenate(column))
            norms.append(math.sqrt(component.mu_squared))
    return tuple(names), np.stack(blocks, axis=1), np.asarray(norms, dtype=np.float64)


def _game_scores(
    game: CanaryGame,
    weights: NDArray[np.float64],
    norms: NDArray[np.float64],
    *,
    with_canary: bool,
    trials: int,
    rng: np.random.Generator | None,
) -> NDArray[np.float64]:
    """The attacks' statistics on ``trials`` real releases, shape (trials, A).

    Column a is ⟨w_a, Y − base⟩ / ‖·‖ with the claimed noise stds, normalised so
    that for a release adding exactly the claimed Gaussian noise it is
    N(0, 1) without and N(μ_a, 1) with the canary (μ_0 = the canary's μ).
    Only coordinates with a non-zero weight enter (the others carry no
    information about the canary under the claimed model), but every release
    is run in full.
    """
    support = np.flatnonzero(np.any(weights != 0.0, axis=1))
    w, base = weights[support] / norms[None, :], game.baseline[support]
    chunks: list[NDArray[np.float64]] = []
    have = 0
    while have < trials:
        seed = None if rng is None else int(rng.integers(0, 2**63 - 1))
        observed = np.asarray(game.release(with_canary, seed), dtype=np.float64)
        if observed.ndim == 1:
            observed = observed[None, :]
        if observed.ndim != 2 or observed.shape[0] < 1 or observed.shape[1] != game.size:
            raise AuditError(
                f"release returned shape {observed.shape}, expected (m, {game.size}) with m >= 1"
            )
        picked = observed[:, support]
        if not np.all(np.isfinite(picked)):
            raise AuditError("release returned non-finite values")
        chunks.append((picked - base) @ w)
        have += observed.shape[0]
    return np.asarray(np.concatenate(chunks)[:trials], dtype=np.float64)


def _select_and_bound(
    names: tuple[str, ...],
    cal_in: NDArray[np.float64],
    cal_out: NDArray[np.float64],
    ev_in: NDArray[np.float64],
    ev_out: NDArray[np.float64],
    *,
    spec: BoundSpec,
    objective: Any,
) -> tuple[str, PrivacyLowerBound]:
    """Pick the attack on the calibration split alone, then bound it on the evaluation split.

    The choice (attack and threshold) depends on calibration trials only, so
    the evaluation bound keeps its full 1 − α coverage; no correction for the
    number of attacks is needed.  Ties go to the joint attack.
    """
    best = 0
    if len(names) > 1:
        values = []
        for a in range(len(names)):
            on_calibration = lower_bound_held_out(
                cal_in[:, a], cal_out[:, a], cal_in[:, a], cal_out[:, a],
                spec=spec, objective=objective,
            )  # fmt: skip
            values.append(
                on_calibration.mu_lower_bound
                if objective == "mu"
                else on_calibration.epsilon_lower_bound
            )
        best = int(np.argmax(values))
    bound = lower_bound_held_out(
        cal_in[:, best], cal_out[:, best], ev_in[:, best], ev_out[:, best],
        spec=spec, objective=objective,
    )  # fmt: skip
    return names[best], bound


def audit_canary_game(
    game: CanaryGame, *, trials: AuditTrials = RELEASE_CODE_TRIALS
) -> CanaryAuditResult:
    """Audit real release code: run it on the neighbouring pair many times, attack, bound.

    Every trial is a separate run of ``game.release`` with fresh noise: the
    audit sees exactly what the code publishes, so a bug in the release (too
    little noise, noise on the wrong values, an unnoised value that depends
    on the canary) raises the bound above the claim.

    The attacks are likelihood-ratio tests of the *claimed* Gaussian model:
    the projection of the release on the whitened canary shift (``"joint"``,
    optimal when the claim is right) and, when several blocks carry the
    canary, the same projection on each block alone.  The attack and its
    threshold are chosen on the calibration trials only and the bound is
    computed on disjoint evaluation trials (exact Clopper–Pearson), so
    whatever the code really does, each bound holds with probability
    ≥ 1 − α.

    Cost: ``2·(trials.num_trials + trials.num_calibration_trials)`` published
    releases (fewer calls when one call returns several independent releases).

    Args:
        game: The mechanism under audit (see :class:`CanaryGame`).
        trials: Trials per hypothesis, α of each reported bound (a correct
            release is flagged, ``violation_detected``, with probability ≤ 2α)
            and the seed (:class:`AuditTrials`).  ``seed`` None (default):
            every run gets ``seed=None`` and draws its noise from the
            release's own CSPRNG; an int: each run gets its own seed derived
            from it (reproducible, e.g. in tests).

    Returns:
        A :class:`CanaryAuditResult` with ``mode=RELEASE_CODE``,
        ``mechanism=game.mechanism`` and the chosen attacks.

    Raises:
        ParameterError, ParameterTypeError: An argument is outside its domain.
        AuditError: The release returned values of the wrong shape or non-finite ones.
    """
    check_instance("game", game, CanaryGame)
    t = check_instance("trials", trials, AuditTrials)
    n, c, alpha = t.num_trials, t.num_calibration_trials, t.significance
    rng = None if t.seed is None else np.random.default_rng(t.seed)
    names, weights, norms = _game_attacks(game)

    def scores(with_canary: bool, trials: int) -> NDArray[np.float64]:
        return _game_scores(game, weights, norms, with_canary=with_canary, trials=trials, rng=rng)

    cal_in, cal_out = scores(True, c), scores(False, c)
    ev_in, ev_out = scores(True, n), scores(False, n)
    d = game.delta
    spec = BoundSpec(d, alpha)
    mu_attack, mu_bound = _select_and_bound(
        names, cal_in, cal_out, ev_in, ev_out, spec=spec, objective="mu"
    )
    eps_attack, eps_bound = _select_and_bound(
        names, cal_in, cal_out, ev_in, ev_out, spec=spec, objective="epsilon"
    )
    return CanaryAuditResult(
        claimed_mu=game.claimed_mu,
        claimed_epsilon=game.claimed_epsilon,
        delta=d,
        noise_scale=game.noise_scale,
        canary_mu=game.canary_mu / game.noise_scale,
        mu_bound=mu_bound,
        epsilon_bound=eps_bound,
        num_trials=n,
        num_calibration_trials=c,
        mode=SimulationMode.RELEASE_CODE,
        significance=alpha,
        mechanism=game.mechanism.strip(),
        mu_attack=mu_attack,
        epsilon_attack=eps_attack,
    )


@dataclass(frozen=True)
class LatentCanaryNoise:
    """What the worst-case latent canary reads of a release: its clip bound, size and noise.

    The one argument of :func:`worst_case_latent_records` and
    :func:`worst_case_latent_canary`; :meth:`of` reads it off a
    ``LatentReleasePlan`` (or any object with its attributes).  Checked here, once.

    Attributes:
        clip_norm: R, finite, > 0 (latent units).
        dim: d ≥ 1.
        noise_std_sum: σ_s > 0.
        noise_std_second_moment: σ_m > 0.
        adjacency: A ``privfed.dp.Adjacency`` member.
        noise_std_count: σ_c > 0, or None (0 is stored as None) when counts are public.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    clip_norm: float
    dim: int
    noise_std_sum: float
    noise_std_second_moment: float
    adjacency: Any
    noise_std_count: float | None = None

    def __post_init__(self) -> None:
        from privfed.dp import Adjacency

        count = self.noise_std_count
        set_fields(
            self,
            clip_norm=check_float("clip_norm", self.clip_norm, low=0, open_low=True),
            dim=check_int("dim", self.dim, minimum=1, numpy=True),
            noise_std_sum=check_float("noise_std_sum", self.noise_std_sum, low=0, open_low=True),
            noise_std_second_moment=check_float(
                "noise_std_second_moment", self.noise_std_second_moment, low=0, open_low=True
            ),
            noise_std_count=None
            if count in (None, 0, 0.0)
            else check_float("noise_std_count", count, low=0, open_low=True),
        )
        if not isinstance(self.adjacency, Adjacency):
            raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", self.adjacency)

    @classmethod
    def of(cls, plan: Any) -> LatentCanaryNoise:
        """The noise of a ``LatentReleasePlan`` (any object with its attributes)."""
        return cls(
            plan.clip_norm,
            plan.dim,
            plan.noise_std_sum,
            plan.noise_std_second_moment,
            plan.adjacency,
            plan.noise_std_count,
        )


def worst_case_latent_records(
    noise: LatentCanaryNoise,
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    """The records of the worst-case canary pair of :func:`worst_case_latent_canary`.

    Args:
        noise: The release's clip bound, dimension, noise stds and adjacency
            (:class:`LatentCanaryNoise`).

    Returns:
        ``(z, z_prime)``: the canary ``z = R·e₁`` (float64 ``(d,)``, norm R) and
        the record replacing it in the neighbouring dataset under REPLACE_ONE
        (norm R, at the worst-case angle), or ``None`` under ADD_REMOVE (the
        neighbour simply lacks ``z``).
    """
    from privfed.dp import Adjacency

    checked = check_instance("noise", noise, LatentCanaryNoise)
    r, d = checked.clip_norm, checked.dim
    s_sum, s_m = checked.noise_std_sum, checked.noise_std_second_moment
    z = np.zeros(d)
    z[0] = r
    if checked.adjacency is Adjacency.ADD_REMOVE:
        return z, None
    cos = max(-(s_m**2) / (2.0 * s_sum**2 * r**2), -1.0)
    if d < 2 and cos > -1.0:
        cos = -1.0  # in one dimension only antipodal replacement exists
    z_prime = np.zeros(d)
    z_prime[0] = r * cos
    if d >= 2:
        z_prime[1] = r * math.sqrt(max(0.0, 1.0 - cos * cos))
    return z, z_prime


def worst_case_latent_canary(noise: LatentCanaryNoise) -> tuple[ReleaseComponent, ...]:
    """The canary that maximises the whitened change of the latent-statistic release.

    The release of one class is ``(Σz + N(0, σ_s² I_d), Σzzᵀ + N(0, σ_m² I_{d²}),
    n + N(0, σ_c²))`` (second-moment noise isotropic on the d×d matrix, as in
    ``privfed.engines.moments.planning.plan_latent_release``).  Public labels only.

    * REPLACE_ONE: z = R·e₁ is replaced by z′ = R·(c·e₁ + √(1−c²)·e₂) with
      c = max(−σ_m²/(2σ_s²R²), −1), the angle maximising
      ‖z − z′‖²/σ_s² + ‖zzᵀ − z′z′ᵀ‖_F²/σ_m² (needs d ≥ 2 unless c = −1).
      Counts are unchanged.
    * ADD_REMOVE: z = R·e₁ is added; the count moves by one.

    Args:
        noise: The release's clip bound, dimension, noise stds and adjacency
            (:class:`LatentCanaryNoise`; ``noise_std_count`` is needed under ADD_REMOVE).

    Returns:
        The release blocks with the canary's shift: ``sum`` (d), ``second_moment``
        (d²) and, under ADD_REMOVE, ``count`` (1).
    """
    z, z_prime = worst_case_latent_records(noise)
    s_sum, s_m, s_c = noise.noise_std_sum, noise.noise_std_second_moment, noise.noise_std_count
    if z_prime is None:  # ADD_REMOVE
        if s_c is None:
            raise ParameterError("noise_std_count", "> 0 under ADD_REMOVE", s_c)
        return (
            ReleaseComponent("sum", s_sum, z),
            ReleaseComponent("second_moment", s_m, np.outer(z, z).ravel()),
            ReleaseComponent("count", s_c, np.array([1.0])),
        )
    blocks = [
        ReleaseComponent("sum", s_sum, z - z_prime),
        ReleaseComponent(
            "second_moment", s_m, (np.outer(z, z) - np.outer(z_prime, z_prime)).ravel()
        ),
    ]
    return tuple(blocks)


def audit_latent_release(plan: Any, **kwargs: Any) -> CanaryAuditResult:
    """Simulated canary audit of a latent release plan with its worst-case canary.

    The plan is a ``privfed.engines.moments.planning.LatentReleasePlan`` (or
    any object with its attributes).

    **Simulated**: checks the accounting arithmetic of the plan only, not the
    release code (:data:`SIMULATED_LABEL`).  The audit of the engine's real
    release code is ``privfed.engines.latent.self_audit.audit_latent_release_code``.

    The claim audited is the plan's ``mu`` and its ``epsilon`` at its ``delta``.
    Private-label plans are refused (the cross-class canary is not built here).

    Args:
        plan: A ``LatentReleasePlan`` (any object with its attributes).
        **kwargs: Forwarded to :func:`audit_gaussian_release` (``noise_scale``,
            ``trials``, ``mode``, ``noise_sampler``).

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
    components = worst_case_latent_canary(LatentCanaryNoise.of(plan))
    return audit_gaussian_release(
        components,
        claimed_mu=float(plan.mu),
        delta=float(plan.delta),
        claimed_epsilon=float(plan.epsilon),
        **kwargs,
    )
