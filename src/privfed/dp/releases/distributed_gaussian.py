"""The distributed discrete Gaussian release: n honest clients add ``N_Z(0, σ²)`` each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privfed._checks import check_float
from privfed.dp.distributed import DDG_MIN_NOISE_STD, ddg_rdp, ddg_zcdp
from privfed.dp.events import Partition, PartitionKey
from privfed.dp.releases._distributed import NOISE_SAMPLERS, DistributedRelease, ExampleRow
from privfed.dp.samplers import EXACT_DISCRETE_GAUSSIAN_SAMPLER, SKELLAM_SAMPLER
from privfed.dp.sensitivity import Adjacency

__all__ = ["DistributedDiscreteGaussianRelease"]


@dataclass(frozen=True)
class DistributedDiscreteGaussianRelease(DistributedRelease):
    """A total released under secure aggregation with client-side discrete Gaussian noise.

    Every client whose masked input is summed adds ``N_Z(0, σ²)`` per
    coordinate (:func:`privfed.dp.samplers.exact_discrete_gaussian`) to its
    integer input before masking, so the server only unmasks the noisy total.
    At least ``num_contributors`` of the summed clients are honest (see
    :func:`privfed.dp.distributed.min_honest_contributors`); the rest may know
    their own noise.

    Attributes:
        name: What was released; non-empty.
        partition: The records it reads (see :mod:`privfed.dp.events`).
        num_contributors: n, the guaranteed number of honest noise
            contributors; an int in ``[1, 2**20]``.
        noise_std: σ of each client's discrete Gaussian, in grid units;
            finite, >= 0.5.
        l2_sensitivity: Δ₂ of the integer total under ``adjacency``, grid units; >= 0.
        l1_sensitivity: Δ₁ of the integer total under ``adjacency``, grid
            units; >= 0 (``min(√d·Δ₂, Δ₂²)`` is always valid for integer totals).
        dimension: d, the number of noised coordinates; >= 1.
        adjacency: The neighbouring relation the sensitivities are for.
        sampler: Name of the noise sampler (e.g.
            :data:`privfed.dp.samplers.EXACT_DISCRETE_GAUSSIAN_SAMPLER`).  The
            continuous, rounded and float discrete-Gaussian samplers of
            :mod:`privfed.dp.noise` and the Skellam sampler are refused.
        seeded: Whether the noise came from explicit, reproducible seeds.

    Accounting: Rényi DP only (``{"rdp"}``), the curve
    :func:`privfed.dp.distributed.ddg_rdp` (Kairouz, Liu & Steinke 2021,
    Prop. 14, minimised over every n' <= n).  It composes with every release
    kind that supports RDP (e.g. :class:`~privfed.dp.GaussianRelease`).

    dp-accounting export: ``ZCDpEvent(rho, xi)`` with ``(rho, xi)`` from
    :func:`privfed.dp.distributed.ddg_zcdp` -- the zCDP term of the bound at n,
    an upper bound on the accounted curve at every order and equal to it
    whenever τ·d is negligible (σ of a few grid units or more).  Its RDP
    accountant consumes it under either neighbouring relation (the
    sensitivities already carry the adjacency, and ZCDpEvent has no
    relation-dependent parameter); its PLD accountant cannot, so
    ``accountant="pld"`` is refused.
    """

    type_tag: ClassVar[str] = "distributed-discrete-gaussian"

    name: str
    partition: Partition
    num_contributors: int
    noise_std: float
    l2_sensitivity: float
    l1_sensitivity: float
    dimension: int
    adjacency: Adjacency
    sampler: str
    seeded: bool

    _label: ClassVar[str] = "distributed discrete Gaussian"
    #: Samplers whose law is not the exact discrete Gaussian: refused by name.
    _wrong_samplers: ClassVar[frozenset[str]] = NOISE_SAMPLERS | {SKELLAM_SAMPLER}
    _sampler_domain: ClassVar[str] = "an exact discrete Gaussian sampler"
    _sampler_detail: ClassVar[str] = (
        "the distributed accounting holds for exact discrete Gaussian noise only"
    )

    def _check_noise_parameter(self) -> None:
        check_float(
            "noise_std",
            self.noise_std,
            low=DDG_MIN_NOISE_STD,
            domain=f"a finite float >= {DDG_MIN_NOISE_STD} (grid units)",
        )

    def _noise_parameter(self) -> float:
        return self.noise_std

    def _arguments(self) -> dict[str, Any]:
        return {"noise_std": float(self.noise_std), **self._sensitivity_arguments()}

    # -- accounting (the rest in DistributedRelease) ---------------------------------

    def rdp(self, orders: Sequence[float]) -> npt.NDArray[np.float64]:
        """:func:`privfed.dp.distributed.ddg_rdp` at ``orders`` (all > 1)."""
        return ddg_rdp(orders, **self._arguments())

    def zcdp(self) -> tuple[float, float]:
        """``(rho, xi)`` of the export (:func:`privfed.dp.distributed.ddg_zcdp`)."""
        return ddg_zcdp(**self._arguments())

    # -- examples ---------------------------------------------------------------------

    @classmethod
    def examples(cls) -> tuple[DistributedDiscreteGaussianRelease, ...]:
        """Both adjacencies, a class-scheme partition, a bare label, the whole dataset."""
        add, replace = Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE
        rows: tuple[ExampleRow, ...] = (  # name, partition, n, σ, Δ₂, Δ₁, d, adjacency, seeded
            ("class-sums", PartitionKey("class", 2), 16, 40.0, 256.0, 2048.0, 64, replace, False),
            ("counts", None, 3, 2.5, 1.0, 1.0, 10, add, True),
            ("model-update", "cohort-a", 100, 12.0, 300.0, 30000.0, 100_000, add, False),
        )
        return tuple(
            cls(name, part, n, sigma, l2, l1, d, adjacency, EXACT_DISCRETE_GAUSSIAN_SAMPLER, seeded)
            for name, part, n, sigma, l2, l1, d, adjacency, seeded in rows
        )
