"""Canary clients: one-shot empirical privacy estimation of federated training (pure: numpy).

Andrew, Kairouz, Oh, Oprea, McMahan & Suriyakumar, "One-shot Empirical Privacy
Estimation for Federated Learning" (ICLR 2024, arXiv:2302.03098).  The auditor
adds k canary clients to one federated training run.  Canary i owns a fixed
random unit direction c_i (drawn from ``seed``) and, whenever it takes part in
a round, sends the update ``clip_norm · c_i`` (a legitimate clipped update).
Which rounds it takes part in (:class:`CanaryClients`, ``participation``):

* ``participation=1.0`` (the default): every canary in every round;
* ``participation=q < 1``: each canary independently in each round with
  probability q (the paper's variant for client sampling), drawn from
  ``seed`` and the round index, so :meth:`CanaryClients.updates` is a pure
  function of the round.

After the run, with Δ = final − initial weights (flattened), the statistic of a
direction c is the cosine ⟨Δ, c⟩ / ‖Δ‖.  It is computed for the k canaries and
for k' fresh random directions that never entered the run (the null; drawn
from ``seed`` too, independent of the canaries).  A Gaussian is fitted to
each set, N(μ_canary, σ_canary²) and N(μ_null, σ_null²).

The ε estimate.  Andrew et al. take the ε at δ of the Gaussian mechanism whose
output distributions are the two fitted Gaussians.  Approximation used here:
both Gaussians are given the null's spread σ_null, which makes the pair exactly
μ-GDP with ``μ = (μ_canary − μ_null) / σ_null``, and ε is
:func:`privfed.dp.gdp_epsilon` (μ, δ).  This equals the paper's two-variance ε
when σ_canary = σ_null, which holds for the Gaussian mechanism in high
dimension (each canary's cosine and a null cosine carry the same projected
noise); both spreads are reported so a reader can check it.  The interval is a
seeded percentile bootstrap that resamples the canaries and the null
directions (ε is increasing in μ, so it is the image of μ's percentile
interval).

This is an **estimate, not a bound**: it is neither a lower nor an upper
bound on ε with any guaranteed confidence, and the Gaussian fit is an
assumption.  For a bound valid in one run use :func:`privfed.audit.one_run_audit`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privfed._atomic import atomic_write_text
from privfed._checks import (
    check_delta,
    check_float,
    check_instance,
    check_int,
    check_probability,
    check_seed,
    check_vector,
)
from privfed._records import set_fields
from privfed.audit.metrics import ConfidenceInterval
from privfed.errors import ParameterError

__all__ = [
    "CANARY_CLIENT_MODEL",
    "CanaryClientEstimate",
    "CanaryClients",
    "CanaryEstimateSpec",
    "audit_training_run",
    "canary_client_epsilon",
]

#: The statistical model every :class:`CanaryClientEstimate` states.
CANARY_CLIENT_MODEL = (
    "ESTIMATE, not a bound (Andrew et al. 2024): a Gaussian is fitted to the canary cosines "
    "and to the null cosines of unseen random directions; epsilon is that of mu-GDP with "
    "mu = (mean_canary - mean_null) / std_null at delta (both Gaussians given the null's "
    "spread); neither a lower nor an upper bound with guaranteed confidence"
)
_APPROXIMATION = "mu-GDP with mu = (mean_canary - mean_null) / std_null (common spread std_null)"


@dataclass(frozen=True)
class CanaryEstimateSpec:
    """What a canary-client estimate reports: ε at which δ, and its bootstrap interval.

    Taken as one argument (``spec=``) by :func:`canary_client_epsilon`,
    :meth:`CanaryClients.estimate` and :func:`audit_training_run`.  Checked here, once.

    Attributes:
        delta: δ of the estimate, in (0, 1).
        confidence: Nominal coverage of the bootstrap interval, in (0, 1).
        num_bootstrap: Bootstrap resamples, >= 100.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    delta: float
    confidence: float = 0.95
    num_bootstrap: int = 1000

    def __post_init__(self) -> None:
        set_fields(
            self,
            delta=check_delta(self.delta),
            confidence=check_probability(
                "confidence", self.confidence, open_low=True, open_high=True
            ),
            num_bootstrap=check_int("num_bootstrap", self.num_bootstrap, minimum=100),
        )


@dataclass(frozen=True)
class CanaryClientEstimate:
    """The empirical ε estimate of one run from its canary clients.

    Attributes:
        epsilon: The ε estimate at :attr:`delta` (module notes).
        interval: Its seeded bootstrap percentile interval (a
            :class:`~privfed.audit.ConfidenceInterval` of ε).
        mu: The fitted μ = (μ_canary − μ_null) / σ_null, clipped at 0.
        cosines: The k canary cosines.
        null_cosines: The k' null cosines.
        canary_mean, canary_std, null_mean, null_std: The two fitted Gaussians
            (standard deviations with ddof = 1).
        delta: The δ of the estimate.
        num_bootstrap: Bootstrap resamples behind :attr:`interval`.
        participation: The canaries' per-round participation probability (``None``
            when the cosines came from elsewhere, :func:`canary_client_epsilon`).
        approximation: How the two Gaussians become one ε (module notes).
        statistical_model: The text saying this is an estimate, not a bound.
    """

    epsilon: float
    interval: ConfidenceInterval
    mu: float
    cosines: NDArray[np.float64]
    null_cosines: NDArray[np.float64]
    canary_mean: float
    canary_std: float
    null_mean: float
    null_std: float
    delta: float
    num_bootstrap: int
    participation: float | None = None
    approximation: str = _APPROXIMATION
    statistical_model: str = CANARY_CLIENT_MODEL

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the cosines as lists)."""
        return {
            "method": "canary-clients (Andrew et al. 2024)",
            "epsilon": self.epsilon,
            "interval": [self.interval.lower, self.interval.upper],
            "confidence": self.interval.confidence,
            "interval_method": self.interval.method,
            "mu": self.mu,
            "delta": self.delta,
            "num_canaries": int(self.cosines.size),
            "num_null": int(self.null_cosines.size),
            "canary_mean": self.canary_mean,
            "canary_std": self.canary_std,
            "null_mean": self.null_mean,
            "null_std": self.null_std,
            "num_bootstrap": self.num_bootstrap,
            "participation": self.participation,
            "approximation": self.approximation,
            "statistical_model": self.statistical_model,
            "cosines": self.cosines.tolist(),
            "null_cosines": self.null_cosines.tolist(),
        }


def _mu(canary: NDArray[np.float64], null: NDArray[np.float64]) -> NDArray[np.float64]:
    """μ of each row pair (last axis: the sample), clipped at 0."""
    spread = null.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = (canary.mean(axis=-1) - null.mean(axis=-1)) / spread
    return np.asarray(np.maximum(np.nan_to_num(mu, nan=0.0, posinf=np.inf), 0.0))


def _epsilon(mu: float, delta: float) -> float:
    from privfed.dp.calibration import gdp_epsilon

    if not math.isfinite(mu) or mu > 1e7:  # a null of (nearly) zero spread
        raise ParameterError("null_cosines", "cosines with a positive spread", f"mu = {mu}")
    return gdp_epsilon(mu, delta)


def canary_client_epsilon(
    cosines: object,
    null_cosines: object,
    *,
    spec: CanaryEstimateSpec,
    seed: int | None = 0,
) -> CanaryClientEstimate:
    """The Andrew et al. ε estimate from canary and null cosines (module notes).

    Args:
        cosines: The k >= 2 canary cosines (finite).
        null_cosines: The k' >= 2 cosines of unseen random directions (finite).
        spec: δ, the interval's coverage and its bootstrap resamples
            (:class:`CanaryEstimateSpec`).
        seed: Seed of the bootstrap (``None``: fresh entropy).

    Raises:
        ParameterError: A bad argument, or a null of zero spread.
        ParameterTypeError: An argument of the wrong type.
        NonFiniteInputError: A NaN or infinite cosine.
    """
    canary = check_vector("cosines", cosines, min_size=2)
    null = check_vector("null_cosines", null_cosines, min_size=2)
    checked = check_instance("spec", spec, CanaryEstimateSpec)
    d, level, draws = checked.delta, checked.confidence, checked.num_bootstrap
    rng = np.random.default_rng(check_seed("seed", seed))
    if float(null.std()) == 0.0:
        raise ParameterError("null_cosines", "cosines with a positive spread", "all equal")
    mu = float(_mu(canary, null))
    epsilon = _epsilon(mu, d)
    picks_c = rng.integers(0, canary.size, size=(draws, canary.size))
    picks_n = rng.integers(0, null.size, size=(draws, null.size))
    boot = _mu(canary[picks_c], null[picks_n])
    tail = (1.0 - level) / 2.0
    lo_mu, hi_mu = (float(v) for v in np.quantile(boot[np.isfinite(boot)], [tail, 1.0 - tail]))
    lower = min(_epsilon(lo_mu, d), epsilon)
    upper = max(_epsilon(min(hi_mu, 1e7), d), epsilon)
    interval = ConfidenceInterval(
        epsilon, lower, upper, level, f"percentile bootstrap over canaries and null ({draws})"
    )
    return CanaryClientEstimate(
        epsilon=epsilon, interval=interval, mu=mu, cosines=canary, null_cosines=null,
        canary_mean=float(canary.mean()), canary_std=float(canary.std(ddof=1)),
        null_mean=float(null.mean()), null_std=float(null.std(ddof=1)),
        delta=d, num_bootstrap=draws,
    )  # fmt: skip


def _unit_rows(rng: np.random.Generator, rows: int, dimension: int) -> NDArray[np.float64]:
    out = rng.standard_normal((rows, dimension))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


class CanaryClients:
    """k canary clients for one federated training run (module notes).

    Args:
        num_canaries: k >= 2 canaries.
        dimension: d >= 2, the number of model parameters (the flattened update).
        clip_norm: The run's client clipping bound C > 0 (each canary update has norm C).
        seed: Seed of the directions, the null and the participation (an int >= 0).
        num_null: k' >= 2 unseen null directions (default: k).
        participation: Each canary's probability of joining a round, in (0, 1]
            (1: every round).

    Call :meth:`updates` each round and add its rows to the round's client
    updates (as clients: each row is one client's update), then
    :meth:`estimate` on the initial and final weights.
    """

    def __init__(
        self,
        num_canaries: int,
        dimension: int,
        clip_norm: float,
        seed: int,
        *,
        num_null: int | None = None,
        participation: float = 1.0,
    ) -> None:
        self.num_canaries = check_int("num_canaries", num_canaries, minimum=2, numpy=True)
        self.dimension = check_int("dimension", dimension, minimum=2, numpy=True)
        self.clip_norm = check_float("clip_norm", clip_norm, low=0.0, open_low=True)
        checked = check_seed("seed", seed)
        if checked is None:
            raise ParameterError("seed", "an int >= 0 (the directions must be reproducible)", seed)
        self.seed = checked
        self.num_null = self.num_canaries if num_null is None else check_int(
            "num_null", num_null, minimum=2, numpy=True
        )  # fmt: skip
        self.participation = check_probability("participation", participation, open_high=False)
        self.directions = _unit_rows(np.random.default_rng([self.seed, 0]), self.num_canaries,
                                     self.dimension)  # fmt: skip

    def participants(self, round_index: int) -> NDArray[np.int64]:
        """Indices of the canaries that take part in round ``round_index`` (>= 0)."""
        r = check_int("round_index", round_index, minimum=0, numpy=True)
        if self.participation == 1.0:
            return np.arange(self.num_canaries)
        draws = np.random.default_rng([self.seed, 2, r]).random(self.num_canaries)
        return np.flatnonzero(draws < self.participation)

    def updates(self, round_index: int) -> NDArray[np.float64]:
        """The canary clients' updates of a round: one row ``C · c_i`` per participant."""
        return self.clip_norm * self.directions[self.participants(round_index)]

    def null_directions(self) -> NDArray[np.float64]:
        """The k' unseen unit directions (independent of the canaries and of the run)."""
        return _unit_rows(np.random.default_rng([self.seed, 1]), self.num_null, self.dimension)

    def cosines(self, initial: object, final: object) -> tuple[NDArray[np.float64], ...]:
        """(canary cosines, null cosines) with Δ = final − initial (both flattened)."""
        start = np.ravel(np.asarray(initial, dtype=np.float64))
        end = np.ravel(np.asarray(final, dtype=np.float64))
        first = check_vector("initial", start, min_size=self.dimension)
        last = check_vector("final", end, min_size=self.dimension)
        if first.size != self.dimension or last.size != self.dimension:
            raise ParameterError(
                "initial/final", f"weights with {self.dimension} parameters in all",
                (first.size, last.size),
            )  # fmt: skip
        delta = last - first
        norm = float(np.linalg.norm(delta))
        if norm == 0.0:
            raise ParameterError("final", "weights that differ from initial", "final == initial")
        return self.directions @ delta / norm, self.null_directions() @ delta / norm

    def estimate(
        self,
        initial: object,
        final: object,
        *,
        spec: CanaryEstimateSpec,
    ) -> CanaryClientEstimate:
        """The ε estimate of the run from ``initial`` to ``final`` (module notes).

        The bootstrap is seeded from :attr:`seed`.  See
        :func:`canary_client_epsilon` for the errors.
        """
        canary, null = self.cosines(initial, final)
        result = canary_client_epsilon(canary, null, spec=spec, seed=self.seed)
        return replace(result, participation=self.participation)


def audit_training_run(
    canaries: CanaryClients,
    initial: object,
    final: object,
    *,
    spec: CanaryEstimateSpec,
    output_dir: str | Path | None = None,
) -> CanaryClientEstimate:
    """Estimate a finished run's ε and record it beside its ``dp_training.json``.

    For :class:`privfed.flower.DistributedDP` runs (or any run): after training,
    with the canaries' updates added every round, call this with the initial
    and final weights.  When ``output_dir`` holds a ``dp_training.json`` (what
    ``DistributedDP`` writes), the estimate is added to it under
    ``"canary_client_estimate"``, beside the accountant's ``epsilon_spent``;
    otherwise ``canary_client_estimate.json`` is written there.  Call it after
    the last round (``DistributedDP`` rewrites its file each round).
    """
    result = canaries.estimate(initial, final, spec=spec)
    if output_dir is not None:
        folder = Path(output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "dp_training.json"
        if target.exists():
            document = json.loads(target.read_text())
            document["canary_client_estimate"] = result.to_dict()
        else:
            target, document = folder / "canary_client_estimate.json", result.to_dict()
        atomic_write_text(target, json.dumps(document, indent=2, sort_keys=True) + "\n")
    return result
