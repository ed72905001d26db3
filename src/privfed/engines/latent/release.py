"""The server's differentially private release of aggregated latent statistics.

Threat model: a trusted server (the paper's model, DESIGN §3) holds the exact
aggregated totals after secure aggregation and adds the noise once; everything
it publishes afterwards is derived from the noisy release only.

Noise placement (:class:`NoisePlacement`):

* ``GRID`` (default): rounded Gaussian noise from :mod:`privfed.dp.noise`
  (CSPRNG) is added to the exact integer totals, in grid units.  For an integer
  total ``x``, ``x + round(σ N) = round(x + σ N)``, so the release is
  post-processing of the continuous Gaussian mechanism with the same std and is
  accounted exactly like it; no data-dependent floating-point value is ever
  formed (Mironov, CCS 2012).
* ``CONTINUOUS``: the totals are decoded to float64 and continuous Gaussian
  noise is added.  Same accounting for the real-valued mechanism; exposed to
  floating-point attacks in principle.

Second moments.  :mod:`privfed.engines.moments.planning` calibrates ``σ_m`` for noise that
is isotropic on the full ``d × d`` matrix (an independent draw per entry, both
triangles), followed by symmetrisation (averaging with the transpose), which
is post-processing.  The symmetrised noise has std ``σ_m`` on the diagonal and
``σ_m / √2`` off it, independent across the packed upper triangle; that is the
law this module draws directly on the packed entries.

Counts are released exactly when the plan says they are public
(``noise_std_count == 0``, REPLACE_ONE with public labels) and with rounded
Gaussian noise otherwise.

Every release is recorded in a :class:`privfed.dp.PrivacyLedger` before any
noise is drawn; a budget overflow therefore releases nothing.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from privfed._checks import check_enum, check_float
from privfed.dp import (
    GAUSSIAN_SAMPLER,
    ROUNDED_GAUSSIAN_SAMPLER,
    Adjacency,
    GaussianRelease,
    PartitionKey,
    PrivacyLedger,
    rounded_gaussian,
    second_moment_sensitivity,
    sum_sensitivity,
)
from privfed.dp.noise import MAX_INTEGER_SCALE
from privfed.engines.latent.accounting import LATENT_SCHEME, record_latent_release
from privfed.engines.latent.statistics import (
    LatentStatistics,
    LatentStatisticsConfig,
    packed_size,
    unpack_symmetric,
)
from privfed.engines.moments.noise import add_gaussian, section_seed
from privfed.engines.moments.planning import LatentReleasePlan
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "NoisePlacement",
    "NoisyLatentStatistics",
    "check_grid_noise",
    "nonprivate_release",
    "release_latent_statistics",
    "release_with_noise_stds",
]


class NoisePlacement(enum.StrEnum):
    """Where the server adds the noise (see the module docstring)."""

    GRID = "grid"
    CONTINUOUS = "continuous"


class _PerClassRecord:
    """``num_classes`` and ``dim`` of a record of per-class arrays.

    ``_ROWS`` names the record's ``(K, d)`` array.
    """

    _ROWS: ClassVar[str]

    @property
    def num_classes(self) -> int:
        """``K``."""
        return int(getattr(self, self._ROWS).shape[0])

    @property
    def dim(self) -> int:
        """``d``."""
        return int(getattr(self, self._ROWS).shape[1])


@dataclass(frozen=True, eq=False)
class NoisyLatentStatistics(_PerClassRecord):
    """A differentially private release of per-class latent statistics.

    Everything here is public output of the mechanism (safe to log or publish).

    Attributes:
        sums: ``float64`` ``(K, d)``: noisy ``Σ z`` per class, latent units.
        second_moments: ``float64`` ``(K, d, d)``: noisy symmetric ``Σ z zᵀ``.
        counts: ``float64`` ``(K,)``: counts (exact integers when public).
        noise_std_sum: Std of the noise on each sum coordinate (latent units).
        noise_std_second_moment: Std on each diagonal entry (``/√2`` off it).
        noise_std_count: Std of the count noise (0 when counts are public).
        grid_variance: Extra variance per sum coordinate from rounding the
            noise to the grid (``2**-2f / 12`` for GRID, 0 for CONTINUOUS).
        clip_norm: ``R`` of the statistics.
        placement: Where the noise was added.
        seeded: Whether the noise came from an explicit seed (tests/experiments).
    """

    sums: np.ndarray
    second_moments: np.ndarray
    counts: np.ndarray
    noise_std_sum: float
    noise_std_second_moment: float
    noise_std_count: float
    grid_variance: float
    clip_norm: float
    placement: NoisePlacement
    seeded: bool

    _ROWS: ClassVar[str] = "sums"

    def __post_init__(self) -> None:
        if self.sums.ndim != 2:
            raise ParameterError("sums", "an array of shape (K, d)", self.sums.shape)
        k, d = self.sums.shape
        if self.second_moments.shape != (k, d, d) or self.counts.shape != (k,):
            raise ParameterError(
                "second_moments", f"shape {(k, d, d)} with counts {(k,)}", self.second_moments.shape
            )
        for name in ("sums", "second_moments", "counts"):
            view = getattr(self, name).view()
            view.setflags(write=False)
            object.__setattr__(self, name, view)

    @property
    def counts_public(self) -> bool:
        """Whether the counts were released exactly."""
        return self.noise_std_count == 0.0


def _grid_scale(noise_std: float, bits: int, name: str) -> float:
    scale = math.ldexp(noise_std, bits)
    if scale > MAX_INTEGER_SCALE:
        raise ParameterError(
            name,
            f"at most {MAX_INTEGER_SCALE:.0f} grid units for GRID placement",
            scale,
            detail="use fewer fractional_bits or NoisePlacement.CONTINUOUS",
        )
    return scale


def check_grid_noise(
    plan: LatentReleasePlan,
    config: LatentStatisticsConfig,
    placement: NoisePlacement | str = NoisePlacement.GRID,
) -> None:
    """Check, before any statistic is computed, that ``plan``'s noise fits the grid.

    :func:`release_latent_statistics` makes the same check when it releases;
    a job calls this as soon as the spec is known, so that a target that needs
    too much noise fails before any client works.

    Raises:
        ParameterError (parameter ``noise_std_sum`` or ``noise_std_second_moment``):
            With GRID placement, the noise is more than the field's grid holds.
    """
    if check_enum("placement", placement, NoisePlacement) is NoisePlacement.GRID:
        _grid_scale(plan.noise_std_sum, config.bits, "noise_std_sum")
        _grid_scale(plan.noise_std_second_moment, 2 * config.bits, "noise_std_second_moment")


def _add_noise(
    stats: LatentStatistics,
    *,
    std_sum: float,
    std_second: float,
    std_count: float,
    placement: NoisePlacement,
    seed: int | bytes | None,
) -> NoisyLatentStatistics:
    cfg = stats.config
    f, k, d = cfg.bits, cfg.num_classes, cfg.dim
    rows, cols = np.triu_indices(d)
    off_diagonal = rows != cols
    # Std per packed entry: σ_m on the diagonal, σ_m/√2 off it (see the module docstring).
    entry_factor = np.where(off_diagonal, 1.0 / math.sqrt(2.0), 1.0)
    if placement is NoisePlacement.GRID:
        scale_sum = _grid_scale(std_sum, f, "noise_std_sum")
        scale_second = _grid_scale(std_second, 2 * f, "noise_std_second_moment")
        if std_count > 0.0:
            _grid_scale(std_count, 0, "noise_std_count")
        # Draw everything before combining, then add in exact Python-checked int64.
        noise_sum = rounded_gaussian((k, d), scale_sum, seed=section_seed(seed, "sum"))
        noise_second = np.empty((k, packed_size(d)), dtype=np.int64)
        noise_second[:, ~off_diagonal] = rounded_gaussian(
            (k, d), scale_second, seed=section_seed(seed, "second-diagonal")
        )
        if d > 1:
            noise_second[:, off_diagonal] = rounded_gaussian(
                (k, packed_size(d) - d),
                scale_second / math.sqrt(2.0),
                seed=section_seed(seed, "second-off-diagonal"),
            )
        headroom = (1 << 63) - 1
        for exact, noise in ((stats.sums, noise_sum), (stats.second_moments, noise_second)):
            if exact.size and int(np.abs(exact).max()) + int(np.abs(noise).max()) >= headroom:
                raise ParameterError("stats", "totals with int64 headroom for the noise", None)
        noisy_sums = np.ldexp((stats.sums + noise_sum).astype(np.float64), -f)
        noisy_packed = np.ldexp((stats.second_moments + noise_second).astype(np.float64), -2 * f)
        if std_count > 0.0:
            counts = (
                stats.counts + rounded_gaussian(k, std_count, seed=section_seed(seed, "n"))
            ).astype(np.float64)
        else:
            counts = stats.counts.astype(np.float64)
        grid_variance = math.ldexp(1.0, -2 * f) / 12.0
    else:
        noisy_sums = add_gaussian(stats.sums_float(), std_sum, seed, "sum")
        packed = np.ldexp(stats.second_moments.astype(np.float64), -2 * f)
        noisy_packed = add_gaussian(packed, std_second, seed, "m", scale=entry_factor[None, :])
        counts = stats.counts.astype(np.float64)
        if std_count > 0.0:
            counts = add_gaussian(counts, std_count, seed, "n")
        grid_variance = 0.0
    return NoisyLatentStatistics(
        sums=noisy_sums,
        second_moments=unpack_symmetric(noisy_packed, d),
        counts=counts,
        noise_std_sum=float(std_sum),
        noise_std_second_moment=float(std_second),
        noise_std_count=float(std_count),
        grid_variance=grid_variance,
        clip_norm=cfg.clip_norm,
        placement=placement,
        seeded=seed is not None,
    )


def _check_common(
    stats: object, ledger: object, placement: object
) -> tuple[LatentStatistics, PrivacyLedger, NoisePlacement]:
    if not isinstance(stats, LatentStatistics):
        raise ParameterTypeError("stats", "a LatentStatistics", stats)
    if not isinstance(ledger, PrivacyLedger):
        raise ParameterTypeError("ledger", "a privfed.dp.PrivacyLedger", ledger)
    return stats, ledger, check_enum("placement", placement, NoisePlacement)


def release_latent_statistics(
    stats: LatentStatistics,
    plan: LatentReleasePlan,
    *,
    ledger: PrivacyLedger,
    seed: int | bytes | None = None,
    placement: NoisePlacement | str = NoisePlacement.GRID,
) -> NoisyLatentStatistics:
    """Add the noise of ``plan`` to aggregated statistics and record the release.

    Guarantee: the output is ``plan.mu``-GDP, hence ``(plan.epsilon,
    plan.delta)``-DP, under ``plan.adjacency`` with respect to the records
    summarised in ``stats`` (each clipped to ``‖z‖ <= R``; classes are
    disjoint and compose in parallel).  One release per class is recorded in
    ``ledger`` *before* noise is drawn.

    Args:
        stats: Exact aggregated totals (e.g. decoded from secure aggregation).
        plan: From :func:`privfed.engines.moments.planning.plan_latent_release` with
            ``clip_norm == stats.config.clip_norm`` and ``dim == stats.config.dim``.
        ledger: Where the release is recorded (atomically).
        seed: ``None`` (default) for CSPRNG noise from the OS; an int or bytes
            for reproducible experiments (recorded as ``seeded`` in the ledger).
        placement: :class:`NoisePlacement` (default GRID).

    Returns:
        The noisy release.

    Raises:
        ParameterError: If the plan does not match the statistics, or the grid
            noise scale is out of range (nothing is recorded then).
        BudgetExceededError: If the ledger's budget would be exceeded (nothing
            is released).
    """
    stats, ledger, where = _check_common(stats, ledger, placement)
    if not isinstance(plan, LatentReleasePlan):
        raise ParameterTypeError("plan", "a LatentReleasePlan", plan)
    cfg = stats.config
    if plan.clip_norm != cfg.clip_norm or plan.dim != cfg.dim:
        raise ParameterError(
            "plan",
            f"a plan for clip_norm={cfg.clip_norm!r} and dim={cfg.dim}",
            (plan.clip_norm, plan.dim),
        )
    section_seed(seed, "check")
    check_grid_noise(plan, cfg, where)
    record_latent_release(
        ledger,
        plan,
        partitions=list(range(cfg.num_classes)),
        sampler=ROUNDED_GAUSSIAN_SAMPLER if where is NoisePlacement.GRID else GAUSSIAN_SAMPLER,
        seeded=seed is not None,
    )
    return _add_noise(
        stats,
        std_sum=plan.noise_std_sum,
        std_second=plan.noise_std_second_moment,
        std_count=plan.noise_std_count,
        placement=where,
        seed=seed,
    )


def release_with_noise_stds(
    stats: LatentStatistics,
    *,
    noise_std_sum: float,
    noise_std_second_moment: float,
    ledger: PrivacyLedger,
    seed: int | bytes | None = None,
    placement: NoisePlacement | str = NoisePlacement.GRID,
    name: str = "latent-statistics",
) -> NoisyLatentStatistics:
    """Release with caller-chosen noise stds (e.g. the paper's calibration), counts public.

    For comparisons such as :func:`privfed.engines.moments.planning.paper_baseline_noise_stds`.  The
    adjacency is REPLACE_ONE with public labels (counts released exactly).
    Two releases per class are recorded, the sum (sensitivity ``2R``) and the
    second moment (``√2 R²``), accounted *separately*; the ledger composes
    them (ignoring the tighter joint bound, so its claim is conservative).

    Args:
        stats: Exact aggregated totals.
        noise_std_sum: Std on each sum coordinate, latent units, finite ``> 0``.
        noise_std_second_moment: Std on each diagonal second-moment entry
            (``/√2`` off the diagonal), finite ``> 0``.
        ledger: Where the releases are recorded.
        seed: See :func:`release_latent_statistics`.
        placement: See :func:`release_latent_statistics`.
        name: Name prefix of the recorded releases.

    Returns:
        The noisy release.
    """
    stats, ledger, where = _check_common(stats, ledger, placement)
    for label, value in (
        ("noise_std_sum", noise_std_sum),
        ("noise_std_second_moment", noise_std_second_moment),
    ):
        check_float(label, value, low=0, open_low=True, numpy=False, expected="a float")
    cfg = stats.config
    section_seed(seed, "check")
    if where is NoisePlacement.GRID:
        _grid_scale(noise_std_sum, cfg.bits, "noise_std_sum")
        _grid_scale(noise_std_second_moment, 2 * cfg.bits, "noise_std_second_moment")
    sampler = ROUNDED_GAUSSIAN_SAMPLER if where is NoisePlacement.GRID else GAUSSIAN_SAMPLER
    d = cfg.dim
    # (name suffix, sensitivity, noise std, noised coordinates) of each per-class release
    parts = (
        ("sum", sum_sensitivity, noise_std_sum, d),
        ("second-moment", second_moment_sensitivity, noise_std_second_moment, d * d),
    )
    releases = [
        GaussianRelease(
            name=f"{name}/{suffix}",
            partition=PartitionKey(LATENT_SCHEME, c),
            l2_sensitivity=sensitivity(cfg.clip_norm, Adjacency.REPLACE_ONE),
            noise_std=float(std),
            adjacency=Adjacency.REPLACE_ONE,
            sampler=sampler,
            seeded=seed is not None,
            dimension=dimension,
        )
        for c in range(cfg.num_classes)
        for suffix, sensitivity, std, dimension in parts
    ]
    ledger.record_all(releases)
    return _add_noise(
        stats,
        std_sum=float(noise_std_sum),
        std_second=float(noise_std_second_moment),
        std_count=0.0,
        placement=where,
        seed=seed,
    )


def nonprivate_release(stats: LatentStatistics) -> NoisyLatentStatistics:
    """The exact statistics in release form, WITHOUT noise (not differentially private).

    Only for baselines ("what would the engine reach without DP?").  Nothing is
    recorded in any ledger because nothing private may be published from it.
    """
    if not isinstance(stats, LatentStatistics):
        raise ParameterTypeError("stats", "a LatentStatistics", stats)
    return NoisyLatentStatistics(
        sums=stats.sums_float(),
        second_moments=stats.second_moment_matrices(),
        counts=stats.counts.astype(np.float64),
        noise_std_sum=0.0,
        noise_std_second_moment=0.0,
        noise_std_count=0.0,
        grid_variance=0.0,
        clip_norm=stats.config.clip_norm,
        placement=NoisePlacement.CONTINUOUS,
        seeded=False,
    )
