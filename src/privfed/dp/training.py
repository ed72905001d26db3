"""Distributed DP for federated training: the per-round noise plan and its accounting (numpy).

Client-level DP-FedAvg (McMahan et al. 2018) where the noise is added by the
clients, under secure aggregation, so the server never holds a noiseless sum
(Kairouz, Liu & Steinke 2021, distributed discrete Gaussian; Agarwal, Kairouz
& Liu 2021, Skellam).  Each round every sampled client

1. flattens its update ``x`` (new weights minus the round's global weights,
   ``D`` values) and clips it to ``‖x‖₂ <= C``;
2. rotates it (:mod:`privfed.dp.rotation`, public per-round seed, padded to
   ``d = 2**k``) and scales it to grid units (``z = y/γ``, ``‖z‖₂ <= C/γ``);
3. rounds it with conditional randomized rounding (:mod:`privfed.dp.rounding`):
   ``‖round(z)‖₂ <= Δ₂`` always;
4. adds its integer noise -- Skellam (default) or the exact discrete Gaussian
   -- calibrated for ``n_min = t − n_C`` honest contributors, with the
   secret-shared layers that remove the dropout excess (Skellam only; see
   :mod:`privfed.dp.distributed_blocks`);
5. reduces mod ``2**b`` (``b`` bits per coordinate, the secure-aggregation
   ring) and masks.

The server unmasks the noisy sum, subtracts the revealed excess layers,
centres it, multiplies by ``γ``, rotates back and divides by the public
number of survivors: the noisy average update (:func:`decode_noisy_sum`).

Adjacency and accounting.  Client level, add/remove one client's whole data
(equivalently: its update replaced by zero; the set of clients taking part in
a round is public, the server sees it).  One client changes the integer sum by
a vector of L2 norm at most ``Δ₂`` (and L1 norm at most ``min(√d·Δ₂, Δ₂²)``),
so each round is one
:class:`~privfed.dp.releases.distributed_skellam_rdp.DistributedSkellamRdpRelease`
(the exact Skellam RDP curve of Agarwal et al., not its zCDP line, whose extra
intercept ρ would be paid every round) or discrete-Gaussian release of ``n_min``
honest contributors on the whole dataset; R rounds compose sequentially in one
:class:`~privfed.dp.PrivacyLedger` (Rényi DP; exported to dp-accounting as
``ZCDpEvent``, exact for the discrete Gaussian, an upper bound for Skellam).  No amplification by
client sampling is claimed: the server sees who is sampled.  The calibration
(:func:`plan_training_noise`) finds the smallest noise whose R-fold
composition, on top of what the ledger already holds, meets the budget.

Wrap-around (utility, never privacy: the reduction mod ``2**b`` is
post-processing of the noisy sum).  A coordinate of the sum decodes correctly
iff it lies in ``[−2**(b−1), 2**(b−1))``.  With ``n`` summands, ``|rounded
sum_i| <= |rot_i| + n`` where ``rot`` is the rotated exact sum in grid units,
sub-Gaussian with proxy ``(n·C/γ)²/d`` over the random signs (Hoeffding; the
updates must not depend on the signs, which the clients' handlers never see),
and the noise of all ``n`` summands (every layer: before the excess is
removed) has the tails of :func:`privfed.dp.distributed.wrap_probability`.  A
union bound over the ``d`` coordinates and the split ``a`` of the margin gives
:attr:`TrainingNoisePlan.log_wrap_probability`, kept as a natural logarithm
(it is far below the smallest float).  The grid ``γ`` is the finest whose
bound is at most ``wrap_limit`` per round (default ``2**-40``) and whose
per-client noise stays within the exact samplers' fast domain.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from privfed._checks import (
    check_choice,
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    check_float,
    check_int,
)
from privfed.dp.distributed import (
    DDG_MIN_NOISE_STD,
    WRAP_PROBABILITY_LIMIT,
    DistributedMechanism,
    calibrate_noise_parameter,
    effective_sensitivities,
    log_wrap_probability,
    min_honest_contributors,
)
from privfed.dp.distributed_blocks import layer_poisson_means
from privfed.dp.events import ReleaseEvent
from privfed.dp.ledger import PrivacyLedger
from privfed.dp.rdp import RDP_ORDERS, rdp_epsilon
from privfed.dp.releases.distributed_gaussian import DistributedDiscreteGaussianRelease
from privfed.dp.releases.distributed_skellam_rdp import DistributedSkellamRdpRelease
from privfed.dp.rotation import hadamard_dimension
from privfed.dp.rounding import DEFAULT_BETA, rounded_norm_bound
from privfed.dp.samplers import (
    EXACT_DISCRETE_GAUSSIAN_SAMPLER,
    MAX_EXACT_DISCRETE_GAUSSIAN_SCALE,
    MAX_POISSON_MEAN,
    SKELLAM_SAMPLER,
)
from privfed.dp.sensitivity import Adjacency
from privfed.errors import BudgetExceededError, CalibrationError, ParameterError, RingOverflowError

__all__ = [
    "MAX_ROUNDING_INFLATION",
    "MECHANISMS",
    "TrainingNoisePlan",
    "central_noise_std",
    "count_release",
    "plan_training_noise",
    "record_training_round",
    "training_release",
]

#: The client-side mechanisms (``"skellam"`` first: the default).
MECHANISMS: Final = ("skellam", "discrete-gaussian")
#: The most the rounding may inflate the sensitivity (``Δ₂ / (C/γ)``) before a plan is refused.
MAX_ROUNDING_INFLATION: Final = 2.0
#: Per-client noise std (grid units) up to which the exact samplers' tables stay small.
_FAST_STD: Final = 2.0**11
_MAX_GRID_UNITS: Final = 2.0**40
_NAME: Final = "training-round"


@dataclasses.dataclass(frozen=True)
class TrainingNoisePlan:
    """The public plan of a distributed-DP training run (every node and the server share it).

    Attributes:
        mechanism: ``"skellam"`` or ``"discrete-gaussian"``.
        clip_norm: ``C``, the L2 clip of a client's update (model units), > 0.
        model_size: ``D``, values of one update.
        ring_bits: ``b``, bits per coordinate of the secure-aggregation ring (8..64).
        granularity: ``γ``, model units per grid step, > 0.
        beta: ``β`` of the conditional rounding.
        num_clients: ``n``, clients sampled each round.
        threshold: ``t``, the secure-aggregation threshold (every released sum
            holds at least t inputs; nodes also refuse ``2t <= s``, s their neighbourhood).
        corrupted: ``n_C``, clients assumed to collude with the server (``t − n_C >= 1``).
        layers: ``L``, secret-shared noise layers (Skellam only; ``0 <= L <= n − t``).
        noise: Per-client noise of ``n_min`` honest contributors: λ (Skellam,
            each Poisson) or σ (discrete Gaussian), grid units.
        rounds: ``R``, rounds the budget covers.
        epsilon, delta: The run's budget (ε over R rounds, δ).
        count_noise: ``0`` (fixed clip), or adaptive clipping
            (:mod:`privfed.dp.adaptive_clipping`): the per-client noise of the
            count coordinate (λ or σ, in its ``±1`` units) for ``n_min`` honest
            contributors; the masked vector then has ``d + 1`` coordinates.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    mechanism: DistributedMechanism
    clip_norm: float
    model_size: int
    ring_bits: int
    granularity: float
    beta: float
    num_clients: int
    threshold: int
    corrupted: int
    layers: int
    noise: float
    rounds: int
    epsilon: float
    delta: float
    count_noise: float = 0.0

    def __post_init__(self) -> None:
        check_choice("mechanism", self.mechanism, MECHANISMS)
        check_finite_positive("clip_norm", self.clip_norm)
        hadamard_dimension(self.model_size)
        check_int("ring_bits", self.ring_bits, minimum=8, maximum=64)
        check_finite_positive("granularity", self.granularity)
        check_float("beta", self.beta, low=0.0, high=1.0, open_low=True, open_high=True)
        n = check_int("num_clients", self.num_clients, minimum=2)
        t = check_int("threshold", self.threshold, minimum=2, maximum=n)
        min_honest_contributors(t, self.corrupted, num_clients=n)
        check_int("layers", self.layers, minimum=0, maximum=n - t)
        if self.layers and self.mechanism != "skellam":
            raise ParameterError(
                "layers", "0 with the discrete Gaussian (layers need Skellam)", self.layers
            )
        check_finite_positive("noise", self.noise)
        check_int("rounds", self.rounds, minimum=1)
        check_finite_positive("epsilon", self.epsilon)
        check_delta(self.delta)
        check_finite_nonnegative("count_noise", self.count_noise)
        if self.count_noise and self.mechanism == "discrete-gaussian":
            check_float("count_noise", self.count_noise, low=DDG_MIN_NOISE_STD)

    # -- derived (public) ------------------------------------------------------------

    @property
    def dimension(self) -> int:
        """``d``: the rotated (padded) dimension, noised and masked."""
        return hadamard_dimension(self.model_size)

    @property
    def vector_length(self) -> int:
        """Coordinates of the masked vector: ``d``, plus the count with adaptive clipping."""
        return self.dimension + (1 if self.count_noise else 0)

    @property
    def min_honest(self) -> int:
        """``n_min = t − n_C``: the honest contributors the noise is calibrated for."""
        return self.threshold - self.corrupted

    @property
    def norm_bound(self) -> float:
        """``C/γ``: the clip in grid units (before rounding)."""
        return self.clip_norm / self.granularity

    @property
    def l2_bound(self) -> float:
        """``Δ₂``: one client's L2 sensitivity of the integer sum (grid units)."""
        return rounded_norm_bound(self.norm_bound, self.dimension, self.beta)

    @functools.cached_property
    def layer_means(self) -> tuple[float, ...]:
        """Skellam λ of layers ``0..L`` (``()`` without layers)."""
        if not self.layers:
            return ()
        return layer_poisson_means(
            2.0 * self.min_honest * self.noise,
            num_clients=self.num_clients,
            corrupted=self.corrupted,
            layers=self.layers,
        )

    @property
    def sampler(self) -> str:
        """The ledger's sampler name."""
        return SKELLAM_SAMPLER if self.mechanism == "skellam" else EXACT_DISCRETE_GAUSSIAN_SAMPLER

    def release(self, round_index: int) -> ReleaseEvent:
        """The ledger event of round ``round_index``'s update (:func:`training_release`)."""
        return training_release(self, round_index)

    def releases(self, round_index: int) -> tuple[ReleaseEvent, ...]:
        """Every ledger event of a round: the update, and the count with adaptive clipping."""
        if not self.count_noise:
            return (training_release(self, round_index),)
        return (training_release(self, round_index), count_release(self, round_index))

    def round_curve(self) -> npt.NDArray[np.float64]:
        """One round's RDP curve at :data:`~privfed.dp.rdp.RDP_ORDERS` (all its releases)."""
        curves = [np.asarray(e.rdp(RDP_ORDERS), dtype=np.float64) for e in self.releases(1)]
        return np.asarray(np.sum(curves, axis=0), dtype=np.float64)

    @functools.cached_property
    def log_wrap_probability(self) -> float:
        """Natural log of a bound on one round's wrap probability (module notes)."""
        return _log_wrap(self)

    @functools.cached_property
    def accounted_epsilon(self) -> float:
        """ε of the R rounds alone at ``delta``, recomputed from the plan (what nodes check)."""
        return rdp_epsilon(self.rounds * self.round_curve(), self.delta)

    def client_variance(self) -> float:
        """One client's total noise variance per coordinate, every layer (grid units²)."""
        if self.mechanism == "discrete-gaussian":
            return self.noise * self.noise
        if self.layers:
            return 2.0 * math.fsum(self.layer_means)
        return 2.0 * self.noise

    def delivered_std(self, survivors: int) -> float:
        """Noise std per coordinate of the decoded SUM (model units) with ``survivors``."""
        u = check_int("survivors", survivors, minimum=1, maximum=self.num_clients)
        if self.layers:
            kept = math.fsum(self.layer_means[: self.num_clients - u + 1])
            variance = 2.0 * u * kept
        elif self.mechanism == "skellam":
            variance = 2.0 * u * self.noise
        else:
            variance = u * self.noise * self.noise
        return self.granularity * math.sqrt(variance)

    def count_std(self) -> float:
        """Std of the honest noise on the count coordinate's sum (``±1`` units; ``2σ_b``)."""
        return _client_std(self.mechanism, self.count_noise) * math.sqrt(self.min_honest)

    def trust(self) -> str:
        """Who is trusted for what (the release statement)."""
        t, c = self.threshold, self.corrupted
        text = (
            "Client-level DP (add/remove one client's data; who takes part in a round is "
            "public). The server is NOT trusted with any client's update nor with the "
            "noiseless sum: each client clips, rotates, rounds and adds its own noise before "
            f"masking; the noise is calibrated for n_min = t - n_C = {t} - {c} = {t - c} "
            f"honest contributors, so the claim holds while at most n_C = {c} clients "
            "collude with the server. Secure aggregation is trusted to release only sums "
            f"over at least t = {t} clients (semi-honest server unless the active mode is "
            "used). The clients are trusted to run the mechanism (no one checks their "
            "noise). No amplification by client sampling is claimed (the server sees the "
            f"sample). The budget covers {self.rounds} rounds of one run."
        )
        if self.layers:
            text += (
                f" {self.layers} secret-shared noise layers remove the dropout excess; the "
                "server must report one survivor set to every client for that."
            )
        if self.count_noise:
            text += (
                " Adaptive clipping: each client also masks its noised bit (update norm within "
                "the round's public clip); the server sees only the noisy count, charged in the "
                "same ledger as a second release of every round."
            )
        return text

    def describe(self) -> dict[str, Any]:
        """Public figures for a release file (JSON-ready)."""
        return {
            **self.to_dict(),
            "dimension": self.dimension,
            "min_honest": self.min_honest,
            "l2_bound_grid": self.l2_bound,
            "rounding_inflation": self.l2_bound / self.norm_bound,
            "layer_means": list(self.layer_means),
            "log_wrap_probability_per_round": self.log_wrap_probability,
            "accounted_epsilon": self.accounted_epsilon,
            "central_noise_std": central_noise_std(self),
            "noise_std_at_threshold": self.delivered_std(self.threshold),
            "count_noise_std": self.count_std() if self.count_noise else None,
            "trust": self.trust(),
        }

    # -- wire ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The plan's fields (JSON-ready)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        """Canonical JSON of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> TrainingNoisePlan:
        """Rebuild (and validate) a plan from :meth:`to_dict`.

        Raises:
            ParameterError: Not the fields of a plan, or a value outside its domain.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(fields, Mapping) or set(fields) != names:
            raise ParameterError("plan", f"a mapping with the fields {sorted(names)}", None)
        return cls(**dict(fields))


def training_release(plan: TrainingNoisePlan, round_index: int) -> ReleaseEvent:
    """The ledger event of one round: ``n_min`` honest contributors, sensitivity ``Δ₂``.

    Args:
        plan: The run's plan.
        round_index: The server round (names the event).
    """
    r = check_int("round_index", round_index, minimum=0)
    l2 = plan.l2_bound
    _, l1 = effective_sensitivities(l2, None, plan.dimension)
    return _round_event(plan, f"{_NAME}-{r}", plan.noise, l2, l1, plan.dimension)


def count_release(plan: TrainingNoisePlan, round_index: int) -> ReleaseEvent:
    """The ledger event of one round's noisy count (adaptive clipping): sensitivity 1.

    Raises:
        ParameterError: The plan has no adaptive clipping.
    """
    r = check_int("round_index", round_index, minimum=0)
    if not plan.count_noise:
        raise ParameterError("plan", "a plan with adaptive clipping (count_noise > 0)", plan)
    return _round_event(plan, f"{_NAME}-{r}-clip-count", plan.count_noise, 1.0, 1.0, 1)


def _round_event(
    plan: TrainingNoisePlan, name: str, noise: float, l2: float, l1: float, dimension: int
) -> ReleaseEvent:
    """The plan mechanism's ledger event of one noisy sum of ``n_min`` honest contributions."""
    common: dict[str, Any] = {
        "name": name,
        "partition": None,
        "num_contributors": plan.min_honest,
        "l2_sensitivity": l2,
        "l1_sensitivity": l1,
        "dimension": dimension,
        "adjacency": Adjacency.ADD_REMOVE,
        "sampler": plan.sampler,
        "seeded": False,
    }
    if plan.mechanism == "skellam":
        return DistributedSkellamRdpRelease(poisson_mean=noise, **common)
    return DistributedDiscreteGaussianRelease(noise_std=noise, **common)


def record_training_round(
    ledger: PrivacyLedger, plan: TrainingNoisePlan, round_index: int
) -> ReleaseEvent:
    """Record round ``round_index`` in ``ledger``, or refuse it before anything is recorded.

    Raises:
        BudgetExceededError: The round would exceed the ledger's budget (the
            run must stop before it).
            Also when the ledger already holds ``rounds`` releases of this plan.
    """
    events = plan.releases(round_index)
    if len(events) > 1:  # all of the round or nothing: try a copy first
        PrivacyLedger.from_json(ledger.to_json()).record_all(events)
    for event in events:
        ledger.record(event)
    return events[0]


def central_noise_std(plan: TrainingNoisePlan) -> float:
    """The std the central Gaussian mechanism needs for the same (ε, δ) over R rounds.

    Sensitivity ``C`` per round (add/remove one client), R Gaussian releases
    compose to one of sensitivity ``√R·C`` (model units, on the sum).
    """
    from privfed.dp.calibration import calibrate_analytic_gaussian

    return calibrate_analytic_gaussian(
        plan.epsilon, plan.delta, l2_sensitivity=math.sqrt(plan.rounds) * plan.clip_norm
    )


# =========================================================================================
# The wrap bound
# =========================================================================================


def _log_wrap(plan: TrainingNoisePlan) -> float:
    """log of the union bound over coordinates of one round's wrap probability."""
    n, d = plan.num_clients, plan.dimension
    margin = float(1 << (plan.ring_bits - 1)) - n
    if margin <= 0:
        return 0.0
    proxy = (n * plan.norm_bound) ** 2 / d  # sub-Gaussian proxy of a rotated-sum coordinate
    kind: DistributedMechanism = plan.mechanism
    per_client = plan.noise if kind == "discrete-gaussian" else plan.client_variance() / 2.0
    best = 0.0
    # P[|rotated + noise| >= margin] <= P[|rotated| >= a] + P[|noise| >= margin - a], per
    # coordinate and sign: the noise term is log_wrap_probability with the total bound n + a.
    for a in sorted({int(x) for x in np.linspace(0.0, margin, 257)[1:-1]} - {0}):
        rot = math.log(2.0 * d) - (a * a) / (2.0 * proxy)
        noise = log_wrap_probability(
            ring_bits=plan.ring_bits,
            mechanism=kind,
            noise=per_client,
            num_summands=n,
            total_bound=n + a,
            dimension=d,
        )
        best = min(best, float(np.logaddexp(rot, noise)))
    if plan.count_noise:  # the count coordinate: |Σ(2b − 1)| <= n, its own noise
        count = log_wrap_probability(
            ring_bits=plan.ring_bits,
            mechanism=kind,
            noise=plan.count_noise,
            num_summands=n,
            total_bound=n,
            dimension=1,
        )
        best = min(0.0, float(np.logaddexp(best, count)))
    return min(0.0, best * (1.0 - 1e-9))


# =========================================================================================
# Calibration
# =========================================================================================


def _ledger_curve(ledger: PrivacyLedger | None) -> npt.NDArray[np.float64]:
    """Every recorded release's RDP curve summed (an upper bound on any composition)."""
    total = np.zeros(len(RDP_ORDERS), dtype=np.float64)
    if ledger is not None:
        for release in ledger.releases:
            total = total + np.asarray(release.rdp(RDP_ORDERS), dtype=np.float64)
    return total


def _noise_for(
    base: Mapping[str, Any], granularity: float, budget: tuple[float, float], prior: Any
) -> float:
    """The smallest per-client noise meeting the budget at this grid (one calibration)."""
    epsilon, delta = budget
    trial = TrainingNoisePlan(**{**base, "granularity": granularity, "noise": 1.0})
    rounds = trial.rounds

    def curve_of(p: float) -> npt.NDArray[np.float64]:
        one = dataclasses.replace(trial, noise=p).round_curve()
        return np.asarray(prior + rounds * one, dtype=np.float64)

    l2 = trial.l2_bound
    sigma = l2 * math.sqrt(2.0 * rounds * math.log(1.25 / delta)) / epsilon
    if trial.mechanism == "skellam":
        guess = sigma * sigma / (2.0 * trial.min_honest)
        return calibrate_noise_parameter(
            curve_of, epsilon, delta, 2.0**-60, 2.0**80, guess, "poisson_mean"
        )
    guess = sigma / math.sqrt(trial.min_honest)
    return calibrate_noise_parameter(curve_of, epsilon, delta, 0.5, 2.0**40, guess, "noise_std")


def _client_std(mechanism: str, noise: float) -> float:
    return noise if mechanism == "discrete-gaussian" else math.sqrt(2.0 * noise)


def _in_sampler_domain(plan: TrainingNoisePlan) -> bool:
    if plan.mechanism == "discrete-gaussian":
        return plan.noise <= MAX_EXACT_DISCRETE_GAUSSIAN_SCALE
    try:
        means = plan.layer_means or (plan.noise,)
    except ParameterError:
        return False
    return max(means) <= MAX_POISSON_MEAN


def plan_training_noise(
    epsilon: float,
    delta: float,
    *,
    rounds: int,
    clip_norm: float,
    model_size: int,
    num_clients: int,
    threshold: int,
    corrupted: int = 0,
    mechanism: DistributedMechanism = "skellam",
    ring_bits: int = 32,
    layers: bool | None = None,
    beta: float = DEFAULT_BETA,
    wrap_limit: float = WRAP_PROBABILITY_LIMIT,
    ledger: PrivacyLedger | None = None,
    count_noise_std: float | None = None,
) -> TrainingNoisePlan:
    """The noise, grid and layers of a distributed-DP training run of ``rounds`` rounds.

    Every argument is checked here, before any round: a bad configuration is
    one typed error naming the parameter.

    Args:
        epsilon, delta: The run's budget (ε > 0 over all ``rounds``, δ in (0, 1)).
            With ``ledger``, what it already holds counts against them.
        rounds: ``R >= 1``.
        clip_norm: ``C > 0``, the L2 clip of a client's update.
        model_size: ``D``, values of one update.
        num_clients: ``n >= 2`` clients sampled each round.
        threshold: ``t`` in ``[2, n]`` (nodes refuse a minority of their neighbourhood).
        corrupted: ``n_C`` with ``t − n_C >= 1``.
        mechanism: ``"skellam"`` (default) or ``"discrete-gaussian"``.
        ring_bits: ``b``, bits per coordinate, 8..64 (default 32).
        layers: Dropout-excess layers (``L = n − t``); ``None``: with Skellam
            (the discrete Gaussian has none), ``True`` refused with the DG.
        beta: The conditional rounding's ``β``.
        wrap_limit: The largest wrap probability per round, in (0, 1).
        ledger: The run's ledger (its budget must be ``(epsilon, delta)`` if set).
        count_noise_std: ``None`` (fixed clip), or adaptive clipping: ``σ_b`` > 0,
            the std of the honest noise on the count of clients under the clip
            (:mod:`privfed.dp.adaptive_clipping`); the update noise is then
            calibrated so that both releases of every round meet the budget.

    Raises:
        ParameterError: A value outside its domain (``C <= 0``, ``t − n_C < 1``, ...).
        RingOverflowError: ``b`` bits cannot hold the sum of ``n`` noisy
            updates within ``wrap_limit`` on any grid.
        CalibrationError: ε is beyond reach in R rounds (no noise the ring and
            the samplers can carry meets it, or the ledger has spent it).
    """
    eps = check_finite_positive("epsilon", epsilon)
    dlt = check_delta(delta)
    kind = check_choice("mechanism", mechanism, MECHANISMS)
    limit = check_float("wrap_limit", wrap_limit, low=0.0, high=1.0, open_low=True, open_high=True)
    n = check_int("num_clients", num_clients, minimum=2)
    t = check_int("threshold", threshold, minimum=2, maximum=n)
    if layers and kind != "skellam":
        raise ParameterError("layers", "False or None with the discrete Gaussian", layers)
    use_layers = kind == "skellam" and layers is not False
    base: dict[str, Any] = {
        "mechanism": kind, "clip_norm": clip_norm, "model_size": model_size,
        "ring_bits": ring_bits, "beta": beta, "num_clients": n, "threshold": t,
        "corrupted": corrupted, "layers": n - t if use_layers else 0, "rounds": rounds,
        "epsilon": eps, "delta": dlt,
    }  # fmt: skip
    TrainingNoisePlan(**base, granularity=1.0, noise=1.0)  # every domain, before any work
    if count_noise_std is not None:
        base["count_noise"] = _count_noise(kind, count_noise_std, t - corrupted)
    if ledger is not None and (ledger.budget_epsilon, ledger.budget_delta) != (eps, dlt):
        raise ParameterError("ledger", f"a ledger with budget ({eps}, {dlt})", ledger)
    prior = _ledger_curve(ledger)
    if rdp_epsilon(prior, dlt) >= eps:
        raise CalibrationError(f"the ledger has already spent epsilon={eps:g}: no round fits")
    if "count_noise" in base:
        count = TrainingNoisePlan(**base, granularity=1.0, noise=1.0)
        counts = np.asarray(count_release(count, 1).rdp(RDP_ORDERS), dtype=np.float64)
        if rdp_epsilon(prior + count.rounds * counts, dlt) >= eps:
            raise ParameterError(
                "count_noise_std",
                f"a count noise whose {count.rounds} rounds leave part of epsilon={eps:g} "
                "to the updates",
                count_noise_std,
            )
    plan = _search_grid(base, (eps, dlt), prior, math.log(limit))
    if ledger is not None:
        plan = _fit_ledger(plan, ledger)
    return plan


def _count_noise(mechanism: str, count_noise_std: object, min_honest: object) -> float:
    """Per-client noise of the count coordinate whose ``n_min``-fold sum has std ``2σ_b``."""
    sb = check_finite_positive("count_noise_std", count_noise_std)
    n_min = check_int("min_honest", min_honest, minimum=1)
    if mechanism == "skellam":
        return 2.0 * sb * sb / n_min  # Var = 2·n_min·λ = (2σ_b)²
    sigma = 2.0 * sb / math.sqrt(n_min)
    if sigma < DDG_MIN_NOISE_STD:
        raise ParameterError(
            "count_noise_std",
            f"a float >= {DDG_MIN_NOISE_STD * math.sqrt(n_min) / 2:g} with the discrete "
            f"Gaussian for n_min = {n_min}",
            count_noise_std,
        )
    return sigma


def _search_grid(
    base: Mapping[str, Any], budget: tuple[float, float], prior: Any, log_limit: float
) -> TrainingNoisePlan:
    """The finest grid (largest ``C/γ``) whose plan fits the ring, the samplers and the budget.

    The calibrated noise scales with ``Δ₂`` (about ``C/γ``): one calibration
    gives the ratio, a bisection on ``C/γ`` with that ratio finds the finest
    grid whose wrap bound and sampler domain hold, and the exact calibration
    there is re-checked (the grid made 10 % coarser until it holds).
    """
    clip = float(base["clip_norm"])
    d = hadamard_dimension(base["model_size"])
    k = max(4.0 * math.sqrt(d), 1024.0)
    first = TrainingNoisePlan(**base, granularity=clip / k, noise=1.0)
    ratio = _client_std(first.mechanism, _noise_for(base, clip / k, budget, prior)) / first.l2_bound

    def approx(units: float) -> TrainingNoisePlan:
        plan = TrainingNoisePlan(**base, granularity=clip / units, noise=1.0)
        std = ratio * plan.l2_bound
        noise = std if plan.mechanism == "discrete-gaussian" else 0.5 * std * std
        return dataclasses.replace(plan, noise=noise)

    def fits(plan: TrainingNoisePlan) -> bool:
        return _in_sampler_domain(plan) and plan.log_wrap_probability <= log_limit

    high = min(_MAX_GRID_UNITS, _FAST_STD / ratio)
    low = 1e-3
    if not fits(approx(low)):
        raise RingOverflowError(
            "ring_bits",
            f"enough bits for {base['num_clients']} noisy updates of dimension {d} with a wrap "
            f"probability <= exp({log_limit:.3g}) per round",
            base["ring_bits"],
            detail="use more bits per coordinate, fewer clients per round or a larger epsilon",
        )
    if fits(approx(high)):
        low = high
    for _ in range(60):
        if high / low < 1.001:
            break
        mid = math.sqrt(low * high)
        low, high = (mid, high) if fits(approx(mid)) else (low, mid)
    units = low
    inflation = approx(units).l2_bound / units
    if inflation > MAX_ROUNDING_INFLATION:
        raise CalibrationError(
            f"epsilon={budget[0]:g} is beyond reach in {base['rounds']} rounds with "
            f"{base['ring_bits']} bits per coordinate: the finest grid the ring holds makes "
            f"the rounding {inflation:.3g}x the clip (at most {MAX_ROUNDING_INFLATION:g}); "
            "use a larger epsilon, fewer rounds or more bits"
        )
    for _ in range(40):
        gamma = clip / units
        plan = TrainingNoisePlan(
            **base, granularity=gamma, noise=_noise_for(base, gamma, budget, prior)
        )
        if fits(plan):
            return plan
        units *= 0.9
    raise CalibrationError(  # pragma: no cover -- the approximation is within 10 % in practice
        "could not find a grid whose calibrated noise fits the ring"
    )


def _fit_ledger(plan: TrainingNoisePlan, ledger: PrivacyLedger) -> TrainingNoisePlan:
    """``plan`` with its noise nudged up until R rounds fit a copy of ``ledger``."""
    for _ in range(200):
        trial = PrivacyLedger.from_json(ledger.to_json())
        try:
            trial.record_all(e for r in range(1, plan.rounds + 1) for e in plan.releases(r))
            return plan
        except BudgetExceededError:
            plan = dataclasses.replace(plan, noise=math.nextafter(plan.noise * 1.001, math.inf))
    raise CalibrationError("could not fit the rounds in the ledger's budget")  # pragma: no cover
