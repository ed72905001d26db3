"""Distributed DP for the latent engine: clients noise their ring vectors before masking.

In the *central* model (the default) the server unmasks the exact integer
totals and adds the noise once (:mod:`privfed.engines.latent.release`).
Whoever holds the server then holds totals without any DP.  In the
*distributed* models each client adds integer noise (exact discrete Gaussian or
Skellam, :mod:`privfed.dp.distributed`) to its exact fixed-point ring vector
before masking, so what secure aggregation reveals is already private, and the
server only decodes and post-processes (numpy only; no torch here).

Trust and calibration.  Only clients whose masked input is summed add noise,
and up to ``corrupted`` (n_C) of them may collude with the server and know
their own.  Secure aggregation releases a total only over at least ``t``
(threshold) clients, so every accepted total holds the noise of at least
``n_min = t − n_C`` honest clients; the noise is calibrated for ``n_min``
(:func:`privfed.dp.min_honest_contributors`; ``t − n_C < 1`` is refused).

The blocks.  The ring vector holds per class ``[sums (d), packed second
moments (d(d+1)/2), count]`` in grid units ``2**-f`` / ``2**-2f`` / 1.  The
budget is split exactly as the central plan splits it (its noise stds, in
grid units, are the *shape*; the joint replace-one bound of
:func:`privfed.dp.joint_mu_squared` is the sensitivity; the off-diagonal
packed entries get ``1/√2`` of the diagonal's std, which is the Frobenius
sensitivity of the symmetric matrix), then scaled by one factor κ until the
distributed RDP accounting meets (ε, δ)
(:func:`privfed.dp.distributed_blocks.calibrate_block_noise`).  Counts are
noised only when the plan noises them (add/remove); under replace-one with
public labels they are exact, as in the central model.  Noised counts travel
on their own grid ``2**-c`` (the client sends ``count·2**c``): the central
count noise is a few units, and an integer noise of variance a few grid units
is far from Gaussian (the Skellam bound's second-order term, the discrete
Gaussian's τ), so ``c`` is chosen from public quantities to put the count's
noise std at 64 grid units or more.  The per-record
quantization of the statistics (every quantized record lies in the clip ball,
all totals are integers) is what makes the integer sensitivities valid.

The grid.  The exact samplers take σ <= 2**15 (discrete Gaussian) and
λ <= 2**30 (Poisson) grid units, and a noisy total must not wrap
``Z_{2**64}``.  :func:`plan_distributed_noise` therefore picks the finest grid
``2**-f`` (from public quantities only) whose per-client noise is within the
samplers' domains -- preferring grids whose noise fits small sampler tables
(σ in [2, 2**11] grid units), which are cheap to build on every client -- and
whose wrap-around probability, union-bounded over all coordinates with the
noise of every one of the ``n`` clients and the largest possible exact
totals, is at most ``2**-40``; no grid: refused.

Dropouts.  With independent noise, ``u`` survivors deliver ``u/n_min`` times
the calibrated variance (:func:`privfed.dp.distributed_blocks.dropout_inflation`).
With ``layers`` (Skellam only; Dordis, arXiv:2209.12528) each client's noise
is layer 0 plus ``L = n − t`` layers from secret-shared seeds; after the round
the server subtracts the revealed excess layers and the total carries the
calibrated noise for every accepted survivor set (see
:mod:`privfed.dp.distributed_blocks`).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from privfed._checks import check_bool, check_enum, check_float, check_int
from privfed._records import field_dict
from privfed.dp import (
    EXACT_DISCRETE_GAUSSIAN_SAMPLER,
    SKELLAM_SAMPLER,
    Adjacency,
    PartitionKey,
    PrivacyLedger,
    gdp_delta,
    joint_mu_squared,
    min_honest_contributors,
)
from privfed.dp.distributed import WRAP_PROBABILITY_LIMIT
from privfed.dp.distributed_blocks import (
    LAYER_SEED_BYTES,
    BlockNoise,
    RingBlocks,
    calibrate_block_noise,
    check_layered_mechanism,
    excess_layer_noise,
    layer_poisson_means,
    layered_noise,
    ring_log_wrap_bound,
    sample_block_noise,
)
from privfed.dp.releases.distributed_blocks import DistributedBlockRelease
from privfed.dp.samplers import (
    MAX_EXACT_DISCRETE_GAUSSIAN_SCALE,
    MAX_POISSON_MEAN,
    MIN_POISSON_MEAN,
)
from privfed.engines.latent.accounting import LATENT_SCHEME
from privfed.engines.latent.distributed_trust import trust_text as _trust
from privfed.engines.latent.release import NoisePlacement, NoisyLatentStatistics
from privfed.engines.latent.statistics import (
    DEFAULT_MAX_RECORDS,
    LatentStatistics,
    LatentStatisticsConfig,
    packed_size,
    unpack_symmetric,
)
from privfed.engines.moments.planning import LatentReleasePlan, plan_latent_release
from privfed.errors import ParameterError, ParameterTypeError, RingOverflowError
from privfed.secagg.threshold import MIN_THRESHOLD

__all__ = [
    "DistributedNoisePlan",
    "NoiseModel",
    "add_client_noise",
    "client_noise_seeds",
    "decode_noisy_total",
    "layers_supported",
    "plan_distributed_noise",
    "record_distributed_release",
]

_RING_BITS = 64
_MAX_FRACTIONAL_BITS = 24
_FAST_SCALE = 2.0**11
#: The fields of a candidate grid that its plan carries under the same names.
_ROUND_FIELDS = ("central", "num_clients", "threshold", "corrupted", "layers")


class NoiseModel(enum.StrEnum):
    """Who adds the DP noise: the server once (central) or every client (distributed)."""

    CENTRAL = "central"
    DISTRIBUTED_GAUSSIAN = "distributed-gaussian"
    DISTRIBUTED_SKELLAM = "distributed-skellam"

    @property
    def mechanism(self) -> str | None:
        """``"discrete-gaussian"``, ``"skellam"``, or ``None`` for central."""
        return {
            NoiseModel.CENTRAL: None,
            NoiseModel.DISTRIBUTED_GAUSSIAN: "discrete-gaussian",
            NoiseModel.DISTRIBUTED_SKELLAM: "skellam",
        }[self]


def layers_supported() -> bool:
    """Whether secure aggregation can share and reveal noise-layer seeds (interface I3)."""
    from privfed.secagg import SecAggConfig, SecAggServer

    return "noise_layers" in {f.name for f in dataclasses.fields(SecAggConfig)} and hasattr(
        SecAggServer, "revealed_noise_seeds"
    )


@dataclass(frozen=True, eq=False)
class DistributedNoisePlan:
    """The public plan of a distributed release (every client and the server share it).

    Attributes:
        model: The noise model (distributed only).
        spec: The statistics' configuration, with the grid chosen for the noise.
        central: The central plan whose budget split is the shape.
        noise: The calibrated block noise (per-client parameters for
            ``num_contributors`` honest clients, per class).
        num_clients: n, clients of the round.
        threshold: t of secure aggregation.
        corrupted: n_C, clients assumed to collude with the server.
        layers: L, secret-shared noise layers (0: independent noise).
        layer_means: ``layer_means[b][j]``: per-client λ of layer j in block b
            (empty when ``layers == 0``).
        log_wrap_probability: Natural log of the bound on the probability that
            a noisy total wraps (stored as a log: the bound itself underflows
            to 0.0 on most grids; see :attr:`wrap_probability`).
        block_names: Name of each block.
        positions: Per block, the ring-vector indices it noises (all classes).
        count_bits: c, the noised counts' grid ``2**-c`` (0 when counts are
            exact): a client sends ``count·2**c``.
        secagg_mode: Security mode of the secure-aggregation round,
            ``"semi-honest"`` (default) or ``"active"`` (the trust text and
            :func:`~privfed.engines.latent.distributed_round.aggregate_distributed` follow it).
    """

    model: NoiseModel
    spec: LatentStatisticsConfig
    central: LatentReleasePlan
    noise: BlockNoise
    num_clients: int
    threshold: int
    corrupted: int
    layers: int
    layer_means: tuple[tuple[float, ...], ...]
    log_wrap_probability: float
    block_names: tuple[str, ...]
    positions: tuple[npt.NDArray[np.int64], ...] = field(repr=False)
    secagg_mode: str = "semi-honest"
    count_bits: int = 0

    @property
    def mechanism(self) -> str:
        """``"discrete-gaussian"`` or ``"skellam"``."""
        return str(self.noise.mechanism)

    @property
    def wrap_probability(self) -> float:
        """``exp(log_wrap_probability)``: a float that may underflow to 0.0 (write the log)."""
        return math.exp(self.log_wrap_probability)

    @property
    def wrap_probability_text(self) -> str:
        """The bound in words, never "0.0": e.g. ``"wrap probability <= exp(-812.3)"``."""
        return f"wrap probability <= exp({_log_text(self.log_wrap_probability)})"

    @property
    def min_honest(self) -> int:
        """n_min = t − n_C."""
        return self.noise.num_contributors

    @property
    def sampler(self) -> str:
        """The exact sampler's name (for the ledger)."""
        return (
            EXACT_DISCRETE_GAUSSIAN_SAMPLER
            if self.mechanism == "discrete-gaussian"
            else SKELLAM_SAMPLER
        )

    @property
    def trust(self) -> str:
        """What the guarantee assumes, in words."""
        return _trust(self.model, self.corrupted, self.threshold, self.layers, self.secagg_mode)

    @property
    def vector_dimensions(self) -> tuple[int, ...]:
        """Coordinates per block over all classes."""
        return tuple(int(p.size) for p in self.positions)

    def _client_variance(self, block: int, survivors: int) -> float:
        """Per-client variance parameter in block b that stays in a total of u survivors."""
        if self.layers:
            keep = self.num_clients - survivors
            return 2.0 * float(sum(self.layer_means[block][: keep + 1]))
        value = self.noise.noise[block]
        return value * value if self.mechanism == "discrete-gaussian" else 2.0 * value

    def delivered_variances(self, survivors: int) -> tuple[float, ...]:
        """Noise variance (parameter) per coordinate of each block in a total of u survivors."""
        u = check_int("survivors", survivors, minimum=self.threshold, maximum=self.num_clients)
        return tuple(u * self._client_variance(b, u) for b in range(len(self.block_names)))

    def claimed_stds(self) -> tuple[float, float, float]:
        """The honest total noise stds (sum, second moment, count) in latent units."""
        f = self.spec.bits
        variances = self.noise.total_variances
        std = dict(zip(self.block_names, (math.sqrt(v) for v in variances), strict=True))
        return (
            math.ldexp(std["sum"], -f),
            math.ldexp(std["diagonal"], -2 * f),
            math.ldexp(std.get("count", 0.0), -self.count_bits),
        )

    def delivered_stds(self, survivors: int) -> tuple[float, float, float]:
        """Total noise stds (sum, second moment, count) in a total of u survivors, latent units."""
        f = self.spec.bits
        variances = self.delivered_variances(survivors)
        std = dict(zip(self.block_names, (math.sqrt(v) for v in variances), strict=True))
        return (
            math.ldexp(std["sum"], -f),
            math.ldexp(std["diagonal"], -2 * f),
            math.ldexp(std.get("count", 0.0), -self.count_bits),
        )

    def ledger(self) -> PrivacyLedger:
        """A fresh ledger budgeted at the target the plan was calibrated for."""
        return self.central.ledger()

    def events(self, *, seeded: bool) -> tuple[DistributedBlockRelease, ...]:
        """The ledger events the clients' noise spends: one block release per class."""
        return tuple(
            DistributedBlockRelease(
                name="latent-statistics",
                partition=PartitionKey(LATENT_SCHEME, c),
                mechanism=self.noise.mechanism,
                num_contributors=self.min_honest,
                noise=self.noise.noise,
                dimensions=self.noise.dimensions,
                unit_mu_squared=self.noise.unit_mu_squared,
                adjacency=self.central.adjacency,
                sampler=self.sampler,
                seeded=seeded,
                block_mu_squared=self.noise.block_mu_squared,
            )
            for c in range(self.spec.num_classes)
        )

    def claimed_plan(self) -> LatentReleasePlan:
        """The central-form plan with the claimed honest noise stds (for the canary audit).

        Its ``mu`` is the Gaussian μ of those stds under the joint bound; the
        distributed accounting is RDP, so ``epsilon`` is the calibrated target.
        """
        s, m, c = self.claimed_stds()
        noised = self.central.noise_std_count > 0.0
        mu = math.sqrt(
            joint_mu_squared(
                self.spec.clip_norm,
                s,
                m,
                self.central.adjacency,
                noise_std_count=c if noised else None,
                private_labels=self.central.private_labels,
            )
        )
        return dataclasses.replace(
            self.central,
            noise_std_sum=s,
            noise_std_second_moment=m,
            noise_std_count=c if noised else 0.0,
            mu=mu,
            delta=max(self.central.delta, float(gdp_delta(mu, self.central.epsilon))),
        )

    def digest(self) -> str:
        """Hex SHA-256 of what a client's noise and its clipping bound are (public facts).

        The server and every node compute the plan from public inputs; equal
        digests mean they add and expect the same noise for the same integer
        norm bound.  Only exact quantities enter: the mechanism, the round's
        n, t, n_C and layers, the grid (fractional bits, the integer bound
        ``L`` on a record's squared norm, the records bound), the per-client
        noise parameters (rounded to 17 bits by the calibration) and the
        layout -- not derived floats such as the clip norm, whose last bits
        follow the thread count of the codec's fit.  A node declares it with
        its masked input (:mod:`privfed.flower.declaration`).
        """
        import json

        spec = self.spec
        doc = {
            "model": self.model.value,
            "mechanism": self.mechanism,
            "sampler": self.sampler,
            "secagg_mode": self.secagg_mode,
            "num_clients": self.num_clients,
            "threshold": self.threshold,
            "corrupted": self.corrupted,
            "layers": self.layers,
            "min_honest": self.min_honest,
            "per_client_noise": [float(v).hex() for v in self.noise.noise],
            "layer_means": [[float(v).hex() for v in m] for m in self.layer_means],
            "fractional_bits": spec.bits,
            "count_bits": self.count_bits,
            "norm_bound_squared": int(spec.norm_bound_squared),
            "max_records": int(spec.max_records),
            "num_classes": spec.num_classes,
            "dim": spec.dim,
            "num_values": spec.num_values,
            "blocks": list(self.block_names),
            "positions": [
                hashlib.sha256(np.ascontiguousarray(p, dtype="<i8").tobytes()).hexdigest()
                for p in self.positions
            ],
        }
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def describe(self) -> dict[str, object]:
        """JSON-friendly public facts of the plan (for the release document)."""
        return {
            "noise_model": self.model.value,
            "mechanism": self.mechanism,
            "sampler": self.sampler,
            "trust": self.trust,
            "secagg_mode": self.secagg_mode,
            "threshold": self.threshold,
            "assumed_corrupted": self.corrupted,
            "min_honest_contributors": self.min_honest,
            "noise_layers": self.layers,
            "fractional_bits": self.spec.bits,
            "count_bits": self.count_bits,
            "per_client_noise": dict(zip(self.block_names, self.noise.noise, strict=True)),
            "honest_total_variance": dict(
                zip(self.block_names, self.noise.total_variances, strict=True)
            ),
            "wrap_probability_bound": self.wrap_probability_text,
            "log_wrap_probability_bound": self.log_wrap_probability,
            "noise_vs_central_std": math.sqrt(self.noise.scale),
        }


def _log_text(value: float) -> str:
    """A log-probability rounded UP (the stated bound stays a bound): ``-812.3``, ``-2.371e+20``.

    One decimal below 1e5 in magnitude, else four significant digits.
    """
    if not math.isfinite(value):
        return "-inf" if value < 0 else "0.0"
    if abs(value) < 1e5:
        return f"{math.ceil(value * 10.0) / 10.0:.1f}"
    exponent = math.floor(math.log10(abs(value))) - 3
    digits = math.ceil(value / 10.0**exponent)  # toward +inf: the bound only grows
    return f"{digits / 1000.0:.3f}e+{exponent + 3}"


def _layout(spec: LatentStatisticsConfig, counts: bool) -> dict[str, npt.NDArray[np.int64]]:
    k, d = spec.num_classes, spec.dim
    per = spec.values_per_class
    rows, cols = np.triu_indices(d)
    base = (np.arange(k, dtype=np.int64) * per)[:, None]
    out = {
        "sum": (base + np.arange(d)[None, :]).reshape(-1),
        "diagonal": (base + d + np.flatnonzero(rows == cols)[None, :]).reshape(-1),
    }
    off = np.flatnonzero(rows != cols)
    if off.size:
        out["off-diagonal"] = (base + d + off[None, :]).reshape(-1)
    if counts:
        out["count"] = (base + d + packed_size(d)).reshape(-1)
    return out


def _count_bits(noise_std_count: float) -> int:
    """c: the smallest count grid ``2**-c`` on which the central count std is >= 64 units."""
    if noise_std_count <= 0.0:
        return 0
    return max(0, math.ceil(math.log2(64.0 / noise_std_count)))


def _total_bounds(
    spec: LatentStatisticsConfig, names: Sequence[str], count_bits: int
) -> tuple[int, ...]:
    big_l = spec.norm_bound_squared
    coordinate = math.isqrt(big_l)  # |q_i| <= sqrt(L) for every quantized record
    per_record = {
        "sum": coordinate,
        "diagonal": big_l,
        "off-diagonal": big_l // 2,
        "count": 1 << count_bits,
    }
    return tuple(spec.max_records * per_record[name] for name in names)


def _block_mu_squared(central: LatentReleasePlan) -> dict[str, float]:
    """Per block, ``sup ‖Δ_b‖²/base_b`` of the central shape (grid-free: both scale alike).

    In grid units a quantized record has ``‖q‖² <= (R·2**f)²``, so the sums move by at
    most the sum sensitivity, and the diagonal and the off-diagonal parts each by at most
    the Frobenius sensitivity of ``Σ z zᵀ`` (the off-diagonal's variance is half the
    diagonal's, its squared change at most half of the matrix's), the counts by the count
    sensitivity (:mod:`privfed.dp.sensitivity`); ``base_b`` is the central variance of the
    block in the same grid, hence these ratios.
    """
    second = central.second_moment_sensitivity / central.noise_std_second_moment
    count = central.count_sensitivity
    return {
        "sum": (central.sum_sensitivity / central.noise_std_sum) ** 2,
        "diagonal": second * second,
        "off-diagonal": second * second,
        "count": (count / central.noise_std_count) ** 2 if count else 0.0,
    }


def _in_domain(mechanism: str, noise: Sequence[float], fast: bool) -> bool:
    """Within the exact samplers' domain; with ``fast``, also within small tables.

    The samplers build a table of about 8σ (discrete Gaussian) or 16√λ (Poisson)
    entries per noise scale, once per client process.  A grid whose largest
    per-client σ is at most 2**11 grid units keeps that to a few milliseconds,
    and its smallest σ of at least 2 keeps every block well inside the
    distributed discrete Gaussian's domain (σ >= 0.5): the grid is then still
    far finer than the noise.
    """
    if mechanism == "discrete-gaussian":
        top, low = (_FAST_SCALE, 2.0) if fast else (MAX_EXACT_DISCRETE_GAUSSIAN_SCALE, 0.0)
        return all(low <= s <= top for s in noise)
    top, low = (0.5 * _FAST_SCALE**2, 2.0) if fast else (MAX_POISSON_MEAN, MIN_POISSON_MEAN)
    return all(low <= lam <= top for lam in noise)


def plan_distributed_noise(
    model: NoiseModel | str,
    epsilon: float,
    delta: float,
    *,
    clip_norm: float,
    dim: int,
    num_classes: int,
    adjacency: Adjacency,
    num_clients: int,
    threshold: int,
    corrupted: int = 0,
    layers: bool = False,
    max_records: int = DEFAULT_MAX_RECORDS,
) -> DistributedNoisePlan:
    """Calibrate the clients' noise and choose the grid (public inputs only).

    Args:
        model: A distributed :class:`NoiseModel`.
        epsilon: Target ε, finite, > 0.
        delta: Target δ in (0, 1).
        clip_norm: R of the statistics.
        dim: d.
        num_classes: K.
        adjacency: Neighbouring relation (public labels).
        num_clients: n, clients of the round.
        threshold: t of secure aggregation, an int in ``[2, n]``.
        corrupted: n_C >= 0 with ``t − n_C >= 1``.
        layers: Secret-shared noise layers (``L = n − t``) to remove the
            dropout excess; Skellam only.
        max_records: Public bound on the records of the aggregate.

    Returns:
        The :class:`DistributedNoisePlan`.

    Raises:
        ParameterError: A value outside its domain, the central model, no
            honest contributor guaranteed, or layers with the discrete Gaussian.
        RingOverflowError: No grid keeps the wrap probability <= 2**-40 with
            the noise inside the exact samplers' domains.
    """
    kind = check_enum("model", model, NoiseModel)
    if kind is NoiseModel.CENTRAL:
        raise ParameterError("model", "a distributed noise model", kind.value)
    mechanism = str(kind.mechanism)
    n = check_int("num_clients", num_clients, minimum=2, numpy=True)
    t = check_int("threshold", threshold, minimum=MIN_THRESHOLD, maximum=n, numpy=True)
    n_min = min_honest_contributors(t, corrupted, num_clients=n)
    c = t - n_min
    check_bool("layers", layers)
    big_l = 0
    if layers:
        check_layered_mechanism(mechanism)
        big_l = n - t
    central = plan_latent_release(epsilon, delta, clip_norm=clip_norm, dim=dim, adjacency=adjacency)
    last_error: Exception | None = None
    # The finest grid whose noise fits small sampler tables, else the finest that fits at all.
    candidates = [(fast, f) for fast in (True, False) for f in range(_MAX_FRACTIONAL_BITS, 0, -1)]
    for fast, f in candidates:
        grid = _Grid(
            kind, central, dim, clip_norm, n, t, c, n_min, big_l, max_records, num_classes, fast, f
        )
        try:
            return grid.plan(epsilon, delta)
        except _GridRefusedError as refused:
            last_error = refused.reason
    raise RingOverflowError(
        "(epsilon, clip_norm, max_records)",
        "a configuration with a grid on which the distributed noise fits the exact samplers "
        "and the noisy totals wrap with probability <= 2**-40",
        (epsilon, clip_norm, max_records),
        detail=str(last_error) if last_error is not None else None,
    )


class _GridRefusedError(Exception):
    """A grid the distributed noise does not fit on (``reason``: why); the next one is tried."""

    def __init__(self, reason: Exception) -> None:
        super().__init__(str(reason))
        self.reason = reason


@dataclass(frozen=True)
class _Grid:
    """One candidate grid of :func:`plan_distributed_noise` and the round it serves."""

    kind: NoiseModel
    central: LatentReleasePlan
    dim: int
    clip_norm: float
    num_clients: int
    threshold: int
    corrupted: int
    min_honest: int
    layers: int
    max_records: int
    num_classes: int
    fast: bool
    bits: int

    def spec(self) -> LatentStatisticsConfig:
        try:
            return LatentStatisticsConfig(
                dim=self.dim,
                num_classes=self.num_classes,
                clip_norm=self.clip_norm,
                max_records=self.max_records,
                fractional_bits=self.bits,
            )
        except (ParameterError, RingOverflowError) as exc:
            raise _GridRefusedError(exc) from None

    def noise(self, epsilon: float, delta: float, names: Sequence[str]) -> BlockNoise:
        """The block noise calibrated on this grid (in its units)."""
        central, f, dim, mechanism = self.central, self.bits, self.dim, self.mechanism
        shape = {
            "sum": math.ldexp(central.noise_std_sum, f) ** 2,
            "diagonal": math.ldexp(central.noise_std_second_moment, 2 * f) ** 2,
            "off-diagonal": math.ldexp(central.noise_std_second_moment, 2 * f) ** 2 / 2.0,
            "count": math.ldexp(central.noise_std_count, self.count_bits) ** 2,
        }
        per_class = {"sum": dim, "diagonal": dim, "off-diagonal": dim * (dim - 1) // 2, "count": 1}
        try:
            noise = calibrate_block_noise(
                mechanism,  # type: ignore[arg-type]
                epsilon,
                delta,
                num_contributors=self.min_honest,
                base_variances=[shape[b] for b in names],
                dimensions=[per_class[b] for b in names],
                base_mu_squared=central.mu**2,
                base_block_mu_squared=(
                    [_block_mu_squared(central)[b] for b in names]
                    if mechanism == "skellam"
                    else None
                ),
            )
        except ParameterError as exc:
            raise _GridRefusedError(exc) from None
        if not _in_domain(mechanism, noise.noise, self.fast):
            raise _GridRefusedError(
                RingOverflowError(
                    "fractional_bits", "a grid on which the noise fits the exact samplers", f
                )
            )
        return noise

    @property
    def mechanism(self) -> str:
        return str(self.kind.mechanism)

    @property
    def count_bits(self) -> int:
        """Fractional bits of the noised counts (from public quantities only)."""
        return _count_bits(self.central.noise_std_count)

    def layer_means(self, noise: BlockNoise) -> tuple[tuple[float, ...], ...]:
        if not self.layers:
            return ()
        n_min = self.min_honest
        try:
            # From the ACCOUNTED parameter (n_min contributors of the rounded λ_b),
            # not from V_b: every accepted survivor set then keeps honest Skellam
            # noise of total mean >= n_min·λ_b exactly (what the ledger claims).
            return tuple(
                layer_poisson_means(
                    2.0 * n_min * lam,
                    num_clients=self.num_clients,
                    corrupted=self.corrupted,
                    layers=self.layers,
                )
                for lam in noise.noise
            )
        except ParameterError as exc:
            raise _GridRefusedError(exc) from None

    def plan(self, epsilon: float, delta: float) -> DistributedNoisePlan:
        """The plan on this grid, or :class:`_GridRefusedError`."""
        spec = self.spec()
        layout = _layout(spec, self.central.noise_std_count > 0.0)
        names = tuple(layout)
        noise = self.noise(epsilon, delta, names)
        means = self.layer_means(noise)
        wrap_noise = tuple(float(sum(m)) for m in means) if self.layers else noise.noise
        ring = RingBlocks(
            ring_bits=_RING_BITS,
            mechanism=self.mechanism,  # type: ignore[arg-type]
            noise=wrap_noise,
            dimensions=[int(layout[b].size) for b in names],
            total_bounds=_total_bounds(spec, names, self.count_bits),
            num_summands=self.num_clients,
        )
        log_p = ring_log_wrap_bound(ring)
        if log_p > math.log(WRAP_PROBABILITY_LIMIT):
            raise _GridRefusedError(
                RingOverflowError(
                    "fractional_bits",
                    "a grid whose noisy totals wrap with probability <= 2**-40",
                    self.bits,
                )
            )
        return DistributedNoisePlan(
            model=self.kind,
            spec=spec,
            noise=noise,
            **field_dict(self, *_ROUND_FIELDS),
            layer_means=means,
            log_wrap_probability=log_p,
            block_names=names,
            positions=tuple(layout[b] for b in names),
            count_bits=self.count_bits,
        )


def record_distributed_release(
    ledger: PrivacyLedger, plan: DistributedNoisePlan, *, seeded: bool
) -> tuple[DistributedBlockRelease, ...]:
    """Record the plan's events (:meth:`DistributedNoisePlan.events`), atomically.

    Recorded when the plan is fixed, before any client draws noise; a
    budget overflow therefore releases nothing.
    """
    if not isinstance(ledger, PrivacyLedger):
        raise ParameterTypeError("ledger", "a privfed.dp.PrivacyLedger", ledger)
    releases = plan.events(seeded=seeded)
    ledger.record_all(releases)
    return releases


def _scatter(plan: DistributedNoisePlan, blocks: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    out = np.zeros(plan.spec.num_values, dtype=np.int64)
    start = 0
    for pos in plan.positions:
        out[pos] = blocks[start : start + pos.size]
        start += pos.size
    return out.view(np.uint64)


def add_client_noise(
    vector: npt.NDArray[np.uint64],
    plan: DistributedNoisePlan,
    *,
    seed: int | bytes | None = None,
    layer_seeds: Sequence[bytes] = (),
    noise_scale: float = 1.0,
) -> npt.NDArray[np.uint64]:
    """A client's ring vector plus its noise (mod ``2**64``): what it masks and sends.

    Threat model: runs on the client, before masking; the noise never leaves
    the client except inside the masked sum.  ``layer_seeds`` are the seeds the
    client also Shamir-shares (layers 1..L), so the server can remove exactly
    the excess layers of survivors after the round, and nothing else.

    Args:
        vector: The exact statistics' ring vector (``uint64``, length
            ``plan.spec.num_values``).
        plan: The shared plan.
        seed: Seed of the client's own noise (layer 0 with layers): ``None``
            (default) for the OS CSPRNG; an int or bytes for experiments.
        layer_seeds: Exactly ``plan.layers`` 32-byte seeds (layers 1..L).
        noise_scale: Test hook for the auditor: scales the noise's std (1.0
            runs the plan; 0.5 is the deliberately broken half-noise release).

    Returns:
        A fresh ``uint64`` vector.
    """
    arr = np.asarray(vector)
    if arr.dtype != np.uint64 or arr.shape != (plan.spec.num_values,):
        raise ParameterError(
            "vector", f"a uint64 array of shape ({plan.spec.num_values},)", arr.shape
        )
    if len(layer_seeds) != plan.layers:
        raise ParameterError("layer_seeds", f"exactly {plan.layers} seeds", len(layer_seeds))
    check_float("noise_scale", noise_scale, low=0, open_low=True)
    dims = plan.vector_dimensions
    if plan.layers:
        first = tuple(_scaled(plan.mechanism, m[0], noise_scale) for m in plan.layer_means)
        noise = sample_block_noise("skellam", first, dims, seed=seed)
        for j, key in enumerate(layer_seeds, start=1):
            noise += layered_noise(
                [_scaled(plan.mechanism, m[j], noise_scale) for m in plan.layer_means], dims, key
            )
    else:
        params = tuple(_scaled(plan.mechanism, v, noise_scale) for v in plan.noise.noise)
        noise = sample_block_noise(plan.mechanism, params, dims, seed=seed)  # type: ignore[arg-type]
    return _scale_counts(arr, plan) + _scatter(plan, noise)


def _scale_counts(
    vector: npt.NDArray[np.uint64], plan: DistributedNoisePlan
) -> npt.NDArray[np.uint64]:
    """The exact vector with its noised counts on the plan's count grid (``count·2**c``)."""
    if not plan.count_bits:
        return vector
    out = np.array(vector, dtype=np.uint64, copy=True)
    spec = plan.spec
    at = np.arange(spec.num_classes) * spec.values_per_class + spec.values_per_class - 1
    out[at] = (out[at].view(np.int64) << plan.count_bits).view(np.uint64)
    return out


def _scaled(mechanism: str, value: float, scale: float) -> float:
    if scale == 1.0:
        return value
    return value * scale if mechanism == "discrete-gaussian" else value * scale * scale


def decode_noisy_total(
    total: npt.NDArray[np.uint64],
    plan: DistributedNoisePlan,
    *,
    survivors: Sequence[int],
    revealed: Mapping[int, Mapping[int, bytes]] | None = None,
    seeded: bool = False,
) -> NoisyLatentStatistics:
    """The server's side: remove the revealed excess layers, decode, return the release.

    The total is already differentially private (the clients' noise is in
    it); this is post-processing.  With layers, ``revealed`` must be exactly
    the layer seeds the reveal rule releases for ``survivors``
    (``SecAggServer.revealed_noise_seeds``).

    Args:
        total: The unmasked ring sum (``uint64``).
        plan: The shared plan.
        survivors: Ids of the clients whose input is in the sum.
        revealed: Survivor id -> {layer -> seed}; required iff ``plan.layers``.
        seeded: Whether the clients' noise was seeded (recorded in the release).

    Returns:
        The :class:`~privfed.engines.latent.release.NoisyLatentStatistics`, its
        noise stds those of the delivered total for this survivor count.
    """
    spec = plan.spec
    arr = np.array(total, dtype=np.uint64, copy=True)
    if arr.shape != (spec.num_values,):
        raise ParameterError("total", f"a uint64 array of shape ({spec.num_values},)", arr.shape)
    u = len(survivors)
    if plan.layers:
        if revealed is None:
            raise ParameterError("revealed", "the revealed layer seeds of a layered plan", None)
        excess = excess_layer_noise(
            revealed,
            plan.layer_means,
            plan.vector_dimensions,
            num_clients=plan.num_clients,
            survivors=survivors,
        )
        arr -= _scatter(plan, excess.view(np.int64))
    signed = arr.view(np.int64).reshape(spec.num_classes, spec.values_per_class)
    d, f = spec.dim, spec.bits
    sums = np.ldexp(signed[:, :d].astype(np.float64), -f)
    packed = np.ldexp(signed[:, d : d + packed_size(d)].astype(np.float64), -2 * f)
    counts = np.ldexp(signed[:, -1].astype(np.float64), -plan.count_bits)
    s, m, c = plan.delivered_stds(u)
    return NoisyLatentStatistics(
        sums=sums,
        second_moments=unpack_symmetric(packed, d),
        counts=counts,
        noise_std_sum=s,
        noise_std_second_moment=m,
        noise_std_count=c,
        grid_variance=0.0,
        clip_norm=spec.clip_norm,
        placement=NoisePlacement.GRID,
        seeded=seeded,
    )


def exact_ring_vector(stats: LatentStatistics) -> npt.NDArray[np.uint64]:
    """The exact ring vector of ``stats`` (what a client noises), as ``uint64``."""
    return np.asarray(stats.to_ring_vector(), dtype=np.uint64)


def _client_seed(seed: int | None, index: int) -> bytes | None:
    if seed is None:
        return None
    return hashlib.sha256(
        b"privfed.engines.latent.distributed/client/v1/"
        + int(seed).to_bytes(16, "big", signed=True)
        + index.to_bytes(8, "big")
    ).digest()


def _layer_seeds(seed: int | None, index: int, layers: int) -> list[bytes]:
    if seed is None:
        return [os.urandom(LAYER_SEED_BYTES) for _ in range(layers)]
    base = _client_seed(seed, index) or b""
    return [hashlib.sha256(b"layer/" + j.to_bytes(4, "big") + base).digest() for j in range(layers)]


def client_noise_seeds(
    noise_seed: int | None, index: int, layers: int
) -> tuple[bytes | None, list[bytes]]:
    """Client ``index``'s (0-based) noise seeds: its own (layer 0) and its ``layers`` layer seeds.

    With ``noise_seed`` ``None`` the own seed is ``None`` (OS CSPRNG) and the
    layer seeds are fresh from the OS CSPRNG; an int derives both from it
    (experiments: whoever knows the run's seed knows every client's noise,
    which the ledger records as ``seeded``).  The in-process round and the
    Flower nodes derive them the same way.
    """
    check_int("index", index, minimum=0)
    check_int("layers", layers, minimum=0)
    return _client_seed(noise_seed, index), _layer_seeds(noise_seed, index, layers)
