"""Canary self-audit of the latent engine's REAL release code (numpy only; never torch).

:mod:`privfed.audit.canary` holds the statistics of the canary audit (the
worst-case canary, the optimal attack, the Clopper–Pearson bounds) and takes
the mechanism under audit as an injected :class:`~privfed.audit.canary.CanaryGame`.
This module is the latent engine's side of that contract:

1. It builds the worst-case neighbouring pair under the plan's adjacency as
   real :class:`~privfed.engines.latent.statistics.LatentStatistics` (the
   exact integer totals the server holds after secure aggregation): a few
   known background records plus the canary ``z = R·e₁`` in one dataset, and
   under REPLACE_ONE the worst-case replacement ``z′`` (norm R, at the angle of
   :func:`privfed.audit.canary.worst_case_latent_records`) in its neighbour,
   under ADD_REMOVE simply no canary.  Records are put on the grid ``2**-f``
   by truncation toward zero, so every one lies in the clip ball exactly.
2. Every trial calls :func:`privfed.engines.latent.release.release_latent_statistics`
   -- the function the server calls, with its own noise sampler (rounded
   Gaussian noise from :mod:`privfed.dp.noise`'s CSPRNG for GRID placement,
   continuous Gaussian noise for CONTINUOUS) -- on one of the two datasets,
   with a fresh unbudgeted :class:`privfed.dp.PrivacyLedger` (the release
   records itself in it, as it must) and a fresh seed (``None``: the
   release's own OS-seeded CSPRNG).
3. What the release published (noisy sums, the noisy symmetric second-moment
   matrices, and the noisy counts when the plan noises them) is flattened and
   handed to the attack: the likelihood-ratio test of the claimed Gaussian
   model, i.e. the projection of ``published − exact-without-canary`` on the
   canary's shift whitened by the *claimed* noise stds.

Trials per call.  The classes of one release are disjoint and the release
draws independent noise for each (one CSPRNG draw covering all classes), so a
call on ``K`` classes that all hold the same neighbouring dataset yields
``K`` independent trials; ``classes_per_release`` sets ``K`` (``1`` makes
every trial its own call, which does not rely on that independence, at about
30 times the cost).

A deliberately broken release for testing the auditor is
:class:`PlannedRelease` with ``noise_scale != 1`` (e.g. 0.5: the
"half-noise release"), or any callable ``release(stats, seed) ->
NoisyLatentStatistics`` passed as ``release``: it runs through the same game
and must be caught.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import check_enum, check_float, check_instance, check_int
from privfed.audit.canary import (
    RELEASE_CODE_TRIALS,
    AuditTrials,
    CanaryAuditResult,
    CanaryGame,
    LatentCanaryNoise,
    ReleaseComponent,
    audit_canary_game,
    audit_latent_release,
    worst_case_latent_records,
)
from privfed.dp import Adjacency, PrivacyLedger, gdp_delta, joint_mu_squared
from privfed.engines.latent.distributed import DistributedNoisePlan
from privfed.engines.latent.distributed_round import aggregate_distributed
from privfed.engines.latent.release import (
    NoisePlacement,
    NoisyLatentStatistics,
    release_latent_statistics,
)
from privfed.engines.latent.statistics import (
    DEFAULT_MAX_RECORDS,
    LatentStatistics,
    LatentStatisticsConfig,
    unpack_symmetric,
)
from privfed.engines.moments.planning import LatentReleasePlan, plan_latent_release
from privfed.errors import AuditError, ParameterError, ParameterTypeError
from privfed.secagg import Stage

__all__ = [
    "DistributedPlannedRelease",
    "LatentRelease",
    "PlannedRelease",
    "audit_latent_release_code",
    "latent_canary_game",
    "neighbouring_statistics",
    "self_audit_distributed_release",
    "self_audit_release",
    "simulated_self_audit",
]

#: ``release(stats, seed) -> NoisyLatentStatistics``: a release of exact totals with
#: fresh noise (``seed``: an int for reproducible noise, ``None`` for the CSPRNG).
LatentRelease = Callable[[LatentStatistics, int | None], NoisyLatentStatistics]

# Published float64 values per call that the default ``classes_per_release`` aims at
# (a few arrays of this size, ~16 MiB each, exist at once), and its upper limit.
_VALUES_PER_CALL = 1 << 21
_MAX_CLASSES_PER_CALL = 2048
# The known background records of the default game (same in every class and trial).
_BACKGROUND_RECORDS = 4
_BACKGROUND_SEED = 20_240_601
_RELEASE_NAME = "privfed.engines.latent.release.release_latent_statistics"


def _scaled_plan(plan: LatentReleasePlan, scale: float) -> LatentReleasePlan:
    """The plan whose noise stds are ``scale`` times ``plan``'s, with its own honest claim."""
    noised = plan.noise_std_count > 0.0
    sum_std = plan.noise_std_sum * scale
    second_std = plan.noise_std_second_moment * scale
    count_std = plan.noise_std_count * scale
    mu = math.sqrt(
        joint_mu_squared(
            plan.clip_norm,
            sum_std,
            second_std,
            plan.adjacency,
            noise_std_count=count_std if noised else None,
            private_labels=plan.private_labels,
        )
    )
    return replace(
        plan,
        noise_std_sum=sum_std,
        noise_std_second_moment=second_std,
        noise_std_count=count_std,
        mu=mu,
        delta=max(float(gdp_delta(mu, plan.epsilon)), plan.delta),
    )


@dataclass(frozen=True)
class PlannedRelease:
    """The server's release as the engine runs it, as a :data:`LatentRelease` callable.

    ``release(stats, seed)`` calls :func:`release_latent_statistics` on ``stats``
    with the plan, ``placement``, ``seed`` and a fresh unbudgeted ledger.

    Attributes:
        plan: The plan whose claim is audited.
        placement: Where the release adds its noise (default GRID, the engine's default).
        noise_scale: ``1.0`` (default) runs the release exactly as planned.  Any
            other value builds a DELIBERATELY BROKEN release for testing the
            auditor: the real release code runs with a plan whose noise stds are
            ``noise_scale`` times the planned ones (0.5: the "half-noise
            release"), while the audit keeps the original plan's claim.
            Finite, > 0.
    """

    plan: LatentReleasePlan
    placement: NoisePlacement = NoisePlacement.GRID
    noise_scale: float = 1.0
    _run_plan: LatentReleasePlan = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.plan, LatentReleasePlan):
            raise ParameterTypeError("plan", "a LatentReleasePlan", self.plan)
        object.__setattr__(
            self, "placement", check_enum("placement", self.placement, NoisePlacement)
        )
        scale = check_float("noise_scale", self.noise_scale, low=0, open_low=True)
        object.__setattr__(self, "noise_scale", scale)
        object.__setattr__(
            self, "_run_plan", self.plan if scale == 1.0 else _scaled_plan(self.plan, scale)
        )

    @property
    def broken(self) -> bool:
        """Whether the noise was scaled on purpose (a release that tests the auditor)."""
        return self.noise_scale != 1.0

    @property
    def description(self) -> str:
        """What a call runs, in words (used as the audit's ``mechanism``)."""
        sampler = (
            "privfed.dp rounded Gaussian noise on the grid"
            if self.placement is NoisePlacement.GRID
            else "privfed.dp continuous Gaussian noise"
        )
        text = f"{_RELEASE_NAME} ({self.placement.value} placement, {sampler})"
        return _broken_wording(text, self)

    def __call__(self, stats: LatentStatistics, seed: int | None) -> NoisyLatentStatistics:
        """Release ``stats`` once with fresh noise (``seed`` None: the CSPRNG)."""
        return release_latent_statistics(
            stats, self._run_plan, ledger=PrivacyLedger(), seed=seed, placement=self.placement
        )


def _broken_wording(text: str, release: PlannedRelease | DistributedPlannedRelease) -> str:
    """``text``, or the DELIBERATELY BROKEN wording when ``release`` scales its noise."""
    if not release.broken:
        return text
    return (
        f"DELIBERATELY BROKEN release (tests the auditor): {text} with "
        f"{release.noise_scale:g} x the planned noise stds"
    )


@dataclass(frozen=True)
class DistributedPlannedRelease:
    """The DISTRIBUTED release as the engine runs it, as a :data:`LatentRelease` callable.

    ``release(stats, seed)`` plays a whole distributed round: client 1 holds
    ``stats``, the other ``n − 1`` clients hold no records; every client adds
    its noise to its exact ring vector
    (:func:`~privfed.engines.latent.distributed.add_client_noise`), the vectors
    go through a real secure-aggregation round
    (:func:`privfed.secagg.run_protocol`, with secret-shared noise layers when
    the plan has them) in which the clients after the first ``survivors``
    drop out before sending their masked input, and the server decodes the
    total (:func:`~privfed.engines.latent.distributed.decode_noisy_total`).
    Nothing is simulated: it is
    :func:`~privfed.engines.latent.distributed_round.aggregate_distributed`.

    Attributes:
        plan: The distributed plan (its spec must be that of the audited statistics).
        survivors: u, clients whose input is summed (default ``plan.threshold``,
            the fewest an accepted total can have: the tightest case for
            independent noise).
        noise_scale: 1.0 runs the plan; another value is a DELIBERATELY BROKEN
            release (each client's noise std times ``noise_scale``).
    """

    plan: DistributedNoisePlan
    survivors: int | None = None
    noise_scale: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.plan, DistributedNoisePlan):
            raise ParameterTypeError("plan", "a DistributedNoisePlan", self.plan)
        u = self.plan.threshold if self.survivors is None else self.survivors
        check_int("survivors", u, minimum=self.plan.threshold, maximum=self.plan.num_clients)
        object.__setattr__(self, "survivors", int(u))
        scale = check_float("noise_scale", self.noise_scale, low=0, open_low=True)
        object.__setattr__(self, "noise_scale", scale)

    @property
    def broken(self) -> bool:
        """Whether the noise was scaled on purpose."""
        return self.noise_scale != 1.0

    @property
    def description(self) -> str:
        """What a call runs, in words."""
        p = self.plan
        text = (
            "privfed.engines.latent.distributed_round.aggregate_distributed "
            f"({p.model.value}, {p.num_clients} clients, threshold {p.threshold}, "
            f"{self.survivors} survivors, {p.layers} noise layers, real secure aggregation)"
        )
        return _broken_wording(text, self)

    def __call__(self, stats: LatentStatistics, seed: int | None) -> NoisyLatentStatistics:
        """One distributed round on ``stats`` (``seed`` None: every client's CSPRNG)."""
        p = self.plan
        clients = [stats] + [LatentStatistics.zeros(p.spec)] * (p.num_clients - 1)
        u = int(self.survivors or p.threshold)
        dropped = list(range(u, p.num_clients))
        dropouts = {Stage.MASKED_INPUT: dropped} if dropped else {}
        return aggregate_distributed(
            clients, p, dropouts=dropouts, noise_seed=seed, noise_scale=self.noise_scale
        ).noisy


def _quantize(records: NDArray[np.float64], config: LatentStatisticsConfig) -> NDArray[np.int64]:
    """Records on the grid ``2**-f`` inside the clip ball, by truncation toward zero (exact)."""
    r, f = config.clip_norm, config.bits
    norms = np.linalg.norm(records, axis=1)
    factor = np.where(norms > r, r / np.where(norms > 0, norms, 1.0), 1.0)
    q = np.trunc(np.ldexp(records * factor[:, None], f)).astype(np.int64)
    bound = config.norm_bound_squared
    for _ in range(8):  # float rounding may leave a norm a few ulps over R; shrink it exactly
        squares = np.einsum("ij,ij->i", q, q)
        over = squares > bound
        if not over.any():
            return q
        shrink = (1.0 - 2.0**-40) * math.sqrt(bound) / np.sqrt(squares[over].astype(np.float64))
        q[over] = np.trunc(q[over] * shrink[:, None]).astype(np.int64)
    raise AuditError("could not put a record inside the clip ball")  # pragma: no cover


def _default_background(dim: int, clip_norm: float) -> NDArray[np.float64]:
    rng = np.random.default_rng(_BACKGROUND_SEED)
    z = rng.standard_normal((_BACKGROUND_RECORDS, dim))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    return np.asarray(z * clip_norm * rng.uniform(0.2, 1.0, (_BACKGROUND_RECORDS, 1)))


def _class_totals(q: NDArray[np.int64], k: int, config: LatentStatisticsConfig) -> LatentStatistics:
    """``k`` classes that each hold exactly the records ``q``."""
    d = config.dim
    rows, cols = np.triu_indices(d)
    sums = q.sum(axis=0, dtype=np.int64)
    packed = (q.T @ q)[rows, cols].astype(np.int64)
    return LatentStatistics(
        config=config,
        sums=np.tile(sums, (k, 1)),
        second_moments=np.tile(packed, (k, 1)),
        counts=np.full(k, q.shape[0], dtype=np.int64),
    )


def _check_plan(plan: object) -> LatentReleasePlan:
    if not isinstance(plan, LatentReleasePlan):
        raise ParameterTypeError("plan", "a LatentReleasePlan", plan)
    if plan.private_labels:
        raise ParameterError("plan", "a plan with public labels", "private_labels=True")
    return plan


def neighbouring_statistics(
    plan: LatentReleasePlan,
    *,
    num_classes: int = 1,
    background: ArrayLike | None = None,
    fractional_bits: int | None = None,
    max_records: int = DEFAULT_MAX_RECORDS,
) -> tuple[LatentStatistics, LatentStatistics]:
    """The worst-case neighbouring pair under ``plan.adjacency`` as exact statistics.

    Every one of the ``num_classes`` classes holds the same records: the
    background records plus the canary ``z = R·e₁`` in the first dataset; the
    background plus the worst-case replacement ``z′`` (REPLACE_ONE, counts
    equal) or the background alone (ADD_REMOVE, counts one lower) in the second.

    Args:
        plan: The release plan (public labels); its ``clip_norm`` and ``dim``
            size the statistics.
        num_classes: ``K >= 1``; ``K · (records per class)`` must not exceed
            ``max_records``.
        background: float ``(n, d)`` records the attacker knows (latent units;
            rows longer than R are scaled to R), or ``None`` for a fixed set of
            four records of norm 0.2R–R.  An empty ``(0, d)`` array is allowed.
        fractional_bits: Grid of the statistics (default: the engine's automatic choice).
        max_records: Record bound of the statistics config.

    Returns:
        ``(with_canary, without_canary)``.

    Raises:
        ParameterError, ParameterTypeError: An argument is outside its domain.
    """
    plan = _check_plan(plan)
    k = check_int("num_classes", num_classes, minimum=1, numpy=True)
    d = plan.dim
    bg = (
        _default_background(d, plan.clip_norm)
        if background is None
        else np.array(background, dtype=np.float64).reshape(-1, d)
    )
    if not np.all(np.isfinite(bg)):
        raise ParameterError("background", "finite records", "array")
    per_class = bg.shape[0] + 1
    if k * per_class > max_records:
        raise ParameterError(
            "num_classes", f"at most max_records / {per_class} = {max_records // per_class}", k
        )
    config = LatentStatisticsConfig(
        dim=d,
        num_classes=k,
        clip_norm=plan.clip_norm,
        max_records=max_records,
        fractional_bits=fractional_bits,
    )
    z, z_prime = worst_case_latent_records(LatentCanaryNoise.of(plan))
    q_bg = _quantize(bg, config)
    q_in = np.concatenate([q_bg, _quantize(z[None, :], config)])
    q_out = q_bg if z_prime is None else np.concatenate([q_bg, _quantize(z_prime[None, :], config)])
    return _class_totals(q_in, k, config), _class_totals(q_out, k, config)


def _published(noisy: NoisyLatentStatistics, counts_noised: bool) -> NDArray[np.float64]:
    """Flatten a release: per class ``[sums (d), second moments (d·d), counts (1)?]``."""
    k, d = noisy.sums.shape
    blocks = [noisy.sums, noisy.second_moments.reshape(k, d * d)]
    if counts_noised:
        blocks.append(noisy.counts[:, None])
    return np.asarray(np.concatenate(blocks, axis=1), dtype=np.float64)


def _exact(stats: LatentStatistics, counts_noised: bool) -> NDArray[np.float64]:
    """The noise-free published values of class 0, flattened like :func:`_published`."""
    blocks = [stats.sums_float()[0], stats.second_moment_matrices()[0].ravel()]
    if counts_noised:
        blocks.append(stats.counts[:1].astype(np.float64))
    return np.asarray(np.concatenate(blocks), dtype=np.float64)


def _shift_components(
    plan: LatentReleasePlan, with_canary: LatentStatistics, without: LatentStatistics
) -> tuple[ReleaseComponent, ...]:
    """The canary's exact shift of each published block, with the plan's claimed noise std."""
    f, d = with_canary.config.bits, plan.dim
    sum_shift = np.ldexp((with_canary.sums[0] - without.sums[0]).astype(np.float64), -f)
    packed = (with_canary.second_moments[0] - without.second_moments[0]).astype(np.float64)
    second_shift = np.ldexp(unpack_symmetric(packed, d), -2 * f).ravel()
    blocks = [
        ReleaseComponent("sum", plan.noise_std_sum, sum_shift),
        ReleaseComponent("second_moment", plan.noise_std_second_moment, second_shift),
    ]
    if plan.noise_std_count > 0.0:
        count_shift = float(with_canary.counts[0] - without.counts[0])
        blocks.append(ReleaseComponent("count", plan.noise_std_count, np.array([count_shift])))
    return tuple(blocks)


def _default_classes(dim: int) -> int:
    published = dim + dim * dim + dim * (dim + 1) // 2 + 1
    return max(1, min(_MAX_CLASSES_PER_CALL, _VALUES_PER_CALL // published))


def _describe(release: Any) -> str:
    text = getattr(release, "description", None)
    if isinstance(text, str) and text.strip():
        return text
    name = getattr(release, "__qualname__", None) or type(release).__qualname__
    return f"{getattr(release, '__module__', '?')}.{name}"


def latent_canary_game(
    plan: LatentReleasePlan,
    *,
    release: LatentRelease | None = None,
    placement: NoisePlacement | str = NoisePlacement.GRID,
    classes_per_release: int | None = None,
    background: ArrayLike | None = None,
    fractional_bits: int | None = None,
    max_records: int = DEFAULT_MAX_RECORDS,
) -> CanaryGame:
    """The canary game of the latent release: ``release`` on the worst-case neighbouring pair.

    Args:
        plan: The plan whose claim (``mu``, ``epsilon`` at ``delta``) is
            audited, with public labels; its noise stds are what the attacker
            is told.
        release: The release under audit, ``release(stats, seed) ->
            NoisyLatentStatistics``; default ``PlannedRelease(plan, placement)``,
            i.e. the engine's :func:`release_latent_statistics`.  Its
            ``description`` attribute, if any, names it in the result.
        placement: Noise placement of the default release (ignored otherwise).
        classes_per_release: ``K``: disjoint classes per call, each one trial;
            default from the dimension (≤ 2048, ~2 M published values per call).
        background: Known records in every class (see :func:`neighbouring_statistics`).
        fractional_bits: Grid of the statistics (default: automatic).
        max_records: Record bound of the statistics config.

    Returns:
        A :class:`privfed.audit.canary.CanaryGame` for
        :func:`privfed.audit.canary.audit_canary_game`.

    Raises:
        ParameterError, ParameterTypeError: An argument is outside its domain.
    """
    plan = _check_plan(plan)
    if release is None:
        release = PlannedRelease(plan, check_enum("placement", placement, NoisePlacement))
    elif not callable(release):
        raise ParameterTypeError("release", "a callable release(stats, seed)", release)
    k = (
        _default_classes(plan.dim)
        if classes_per_release is None
        else check_int("classes_per_release", classes_per_release, minimum=1, numpy=True)
    )
    with_canary, without = neighbouring_statistics(
        plan,
        num_classes=k,
        background=background,
        fractional_bits=fractional_bits,
        max_records=max_records,
    )
    counts_noised = plan.noise_std_count > 0.0
    run = release

    def play(canary_in: bool, seed: int | None) -> NDArray[np.float64]:
        stats = with_canary if canary_in else without
        noisy = run(stats, seed)
        if not isinstance(noisy, NoisyLatentStatistics):
            raise AuditError(f"release returned {type(noisy).__name__}, not NoisyLatentStatistics")
        if noisy.sums.shape != (k, plan.dim):
            raise AuditError(
                f"release returned sums of shape {noisy.sums.shape}, not {(k, plan.dim)}"
            )
        return _published(noisy, counts_noised)

    if plan.adjacency is Adjacency.ADD_REMOVE:
        pair = "add-remove: background + canary R·e1 vs background"
    else:
        pair = "replace-one: canary R·e1 vs the worst-case replacement of norm R"
    return CanaryGame(
        release=play,
        components=_shift_components(plan, with_canary, without),
        baseline=_exact(without, counts_noised),
        claimed_mu=plan.mu,
        claimed_epsilon=plan.epsilon,
        delta=plan.delta,
        mechanism=f"{_describe(release)} on neighbouring LatentStatistics ({pair})",
        noise_scale=float(getattr(release, "noise_scale", 1.0)),
    )


def audit_latent_release_code(
    plan: LatentReleasePlan,
    *,
    release: LatentRelease | None = None,
    placement: NoisePlacement | str = NoisePlacement.GRID,
    trials: AuditTrials = RELEASE_CODE_TRIALS,
    classes_per_release: int | None = None,
    background: ArrayLike | None = None,
) -> CanaryAuditResult:
    """Canary-audit the real release code of ``plan`` (see :func:`latent_canary_game`).

    Each bound holds with probability ≥ 1 − ``trials.significance``, so a correct
    release is flagged (``violation_detected``) with probability ≤ 2·significance.

    Args:
        plan: The plan whose claim is audited (public labels).
        release: The release under audit; default the engine's
            :func:`release_latent_statistics` with ``plan`` and ``placement``.
        placement: Noise placement of the default release.
        trials: Trials, α of each bound and seed
            (:class:`~privfed.audit.canary.AuditTrials`; ``seed`` None: every
            release draws fresh CSPRNG noise; an int: each release gets its own
            seed derived from it, reproducible).
        classes_per_release: Trials per release call (see :func:`latent_canary_game`).
        background: Known records in every class.

    Returns:
        A :class:`privfed.audit.canary.CanaryAuditResult` with ``mode=RELEASE_CODE``.
    """
    game = latent_canary_game(
        plan,
        release=release,
        placement=placement,
        classes_per_release=classes_per_release,
        background=background,
    )
    return audit_canary_game(game, trials=trials)


def _planned(
    epsilon: float,
    delta: float,
    *,
    clip_norm: float,
    dim: int,
    adjacency: Adjacency | None,
    split: str | float,
) -> LatentReleasePlan:
    """The plan a self-audit audits (adjacency ``None``: REPLACE_ONE)."""
    return plan_latent_release(
        epsilon,
        delta,
        clip_norm=clip_norm,
        dim=dim,
        adjacency=Adjacency.REPLACE_ONE if adjacency is None else adjacency,
        split=split,  # type: ignore[arg-type]
    )


def self_audit_release(
    epsilon: float,
    delta: float,
    *,
    clip_norm: float,
    dim: int,
    adjacency: Adjacency | None = None,
    split: str | float = "optimal",
    placement: NoisePlacement | str = NoisePlacement.GRID,
    noise_scale: float = 1.0,
    trials: AuditTrials = RELEASE_CODE_TRIALS,
) -> CanaryAuditResult:
    """Plan a latent release and canary-audit privfed's REAL release code against the plan.

    What ``privfed audit --self-audit`` runs: the plan comes from
    :func:`privfed.engines.moments.planning.plan_latent_release`, and every trial runs
    :func:`release_latent_statistics` on the worst-case neighbouring
    ``LatentStatistics`` (see the module docstring).

    Args:
        epsilon, delta, clip_norm, dim, adjacency, split: The plan audited, as
            in :func:`simulated_self_audit`.
        placement: Noise placement of the release (default GRID).
        noise_scale: 1.0 (default) audits the release as planned; another value
            audits a deliberately broken release with that many times the
            planned noise (0.5: the half-noise release, which must be caught).
        trials: As in :func:`audit_latent_release_code`.

    Returns:
        A :class:`privfed.audit.canary.CanaryAuditResult` comparing the plan's
        claim with μ_lb and ε_lb; its ``audited`` starts with ``"release code:"``.
    """
    plan = _planned(epsilon, delta, clip_norm=clip_norm, dim=dim, adjacency=adjacency, split=split)
    release = PlannedRelease(
        plan, check_enum("placement", placement, NoisePlacement), noise_scale=noise_scale
    )
    return audit_latent_release_code(plan, release=release, trials=trials)


def self_audit_distributed_release(
    plan: DistributedNoisePlan,
    *,
    survivors: int | None = None,
    noise_scale: float = 1.0,
    trials: AuditTrials = RELEASE_CODE_TRIALS,
) -> CanaryAuditResult:
    """Canary-audit the real round of a DISTRIBUTED latent plan against its claim.

    Every trial is a :class:`DistributedPlannedRelease` call: clients noise
    their ring vectors, a real secure-aggregation round sums them, the server
    decodes.  The claim audited is the plan's honest noise (what the ledger
    accounts for ``t − n_C`` contributors), written as the Gaussian plan of the
    same stds (:meth:`~privfed.engines.latent.distributed.DistributedNoisePlan.claimed_plan`)
    with the target ε; the lower bound must stay below it.  Each call releases
    all of the plan's K classes, K independent trials (plan a small round,
    e.g. 3 clients, to keep trials cheap).

    Args:
        plan: The :class:`~privfed.engines.latent.distributed.DistributedNoisePlan`
            under audit, from
            :func:`~privfed.engines.latent.distributed.plan_distributed_noise`.
        survivors: u (default t).
        noise_scale: 0.5 audits the deliberately broken half-noise release.
        trials: As in :func:`audit_latent_release_code`.

    Raises:
        ParameterTypeError: ``plan`` is not a ``DistributedNoisePlan``.
    """
    check_instance("plan", plan, DistributedNoisePlan)
    release = DistributedPlannedRelease(plan, survivors=survivors, noise_scale=noise_scale)
    game = latent_canary_game(
        plan.claimed_plan(),
        release=release,
        classes_per_release=plan.spec.num_classes,
        fractional_bits=plan.spec.bits,
        max_records=plan.spec.max_records,
    )
    return audit_canary_game(game, trials=trials)


def simulated_self_audit(
    epsilon: float,
    delta: float,
    *,
    clip_norm: float,
    dim: int,
    adjacency: Any = None,
    split: str | float = "optimal",
    **kwargs: Any,
) -> CanaryAuditResult:
    """Plan a latent release with :func:`~privfed.engines.moments.planning.plan_latent_release`
    and audit the plan, SIMULATED.

    **Simulated**: the release is simulated from the plan's claimed noise
    stds, so this checks the accounting arithmetic only, not the release code
    (the result's ``audited`` is :data:`privfed.audit.canary.SIMULATED_LABEL`).  The self-audit of
    privfed's real release code (``privfed audit --self-audit``) is
    :func:`self_audit_release`: it runs ``release_latent_statistics`` itself.
    This one lives beside it because the plan is the engines' (the audit
    package never imports the engines).

    Args:
        epsilon: Target ε, finite, > 0.
        delta: Target δ in (0, 1).
        clip_norm: R, finite, > 0.
        dim: Latent dimension d ≥ 1.
        adjacency: ``privfed.dp.Adjacency``; default REPLACE_ONE.
        split: Budget split passed to the planner.
        **kwargs: Forwarded to :func:`privfed.audit.canary.audit_gaussian_release`.

    Returns:
        A :class:`~privfed.audit.canary.CanaryAuditResult` comparing the plan's claim
        with μ_lb, ε_lb.
    """
    plan = _planned(epsilon, delta, clip_norm=clip_norm, dim=dim, adjacency=adjacency, split=split)
    return audit_latent_release(plan, **kwargs)
