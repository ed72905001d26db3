"""The distributed Skellam release: n honest clients add ``Poisson(λ) − Poisson(λ)`` each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from privfed._checks import check_finite_positive
from privfed.dp.distributed import skellam_zcdp
from privfed.dp.events import Partition, PartitionKey
from privfed.dp.rdp import check_orders
from privfed.dp.releases._distributed import NOISE_SAMPLERS, DistributedRelease, ExampleRow
from privfed.dp.samplers import EXACT_DISCRETE_GAUSSIAN_SAMPLER, SKELLAM_SAMPLER
from privfed.dp.sensitivity import Adjacency

__all__ = ["DistributedSkellamRelease"]


@dataclass(frozen=True)
class DistributedSkellamRelease(DistributedRelease):
    """A total released under secure aggregation with client-side Skellam noise.

    Every summed client adds ``Poisson(λ) − Poisson(λ)`` per coordinate
    (:func:`privfed.dp.samplers.skellam_noise`, variance 2λ) before
    masking; at least ``num_contributors`` of them are honest, so the total
    carries at least ``Skellam(nλ, nλ)`` of honest noise (variance ``μ = 2nλ``).

    Attributes:
        name: What was released; non-empty.
        partition: The records it reads.
        num_contributors: n, the guaranteed number of honest noise
            contributors; an int in ``[1, 2**20]``.
        poisson_mean: λ of each of a client's two Poissons; finite, > 0.
        l2_sensitivity: Δ₂ of the integer total under ``adjacency``, grid units; >= 0.
        l1_sensitivity: Δ₁ of the integer total, grid units; >= 0.
        dimension: d, the number of noised coordinates; >= 1.
        adjacency: The neighbouring relation the sensitivities are for.
        sampler: Name of the noise sampler (e.g.
            :data:`privfed.dp.samplers.SKELLAM_SAMPLER`); Gaussian-family
            samplers are refused.
        seeded: Whether the noise came from explicit, reproducible seeds.

    Accounting: Rényi DP only, on the zCDP line
    :func:`privfed.dp.distributed.skellam_zcdp` (Agarwal, Kairouz & Liu 2021,
    Thm 3.5, made valid at every real order): ``ε(α) = ξ + ρα``.  Its
    dp-accounting export ``ZCDpEvent(rho, xi)`` is therefore exact: the
    RDP accountant reproduces the ledger's figure.  PLD export is refused.
    """

    type_tag: ClassVar[str] = "distributed-skellam"

    name: str
    partition: Partition
    num_contributors: int
    poisson_mean: float
    l2_sensitivity: float
    l1_sensitivity: float
    dimension: int
    adjacency: Adjacency
    sampler: str
    seeded: bool

    _label: ClassVar[str] = "distributed Skellam"
    #: Samplers whose law is not Skellam: refused by name.
    _wrong_samplers: ClassVar[frozenset[str]] = NOISE_SAMPLERS | {EXACT_DISCRETE_GAUSSIAN_SAMPLER}
    _sampler_domain: ClassVar[str] = "a Skellam sampler"
    _sampler_detail: ClassVar[str] = (
        "the Skellam accounting holds for Poisson-difference noise only"
    )

    def _check_noise_parameter(self) -> None:
        check_finite_positive("poisson_mean", self.poisson_mean)

    def _noise_parameter(self) -> float:
        return self.poisson_mean

    # -- accounting (the rest in DistributedRelease) ---------------------------------

    def zcdp(self) -> tuple[float, float]:
        """``(rho, xi)``: :func:`privfed.dp.distributed.skellam_zcdp` of this release."""
        return skellam_zcdp(poisson_mean=float(self.poisson_mean), **self._sensitivity_arguments())

    def rdp(self, orders: Sequence[float]) -> npt.NDArray[np.float64]:
        """``xi + rho·α`` at each order α (all > 1)."""
        alpha = check_orders(orders)
        rho, xi = self.zcdp()
        return np.asarray(xi + rho * alpha, dtype=np.float64)

    # -- examples ---------------------------------------------------------------------

    @classmethod
    def examples(cls) -> tuple[DistributedSkellamRelease, ...]:
        """Both adjacencies, a cell-scheme partition, the whole dataset."""
        add, replace = Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE
        cell = PartitionKey("cell", "class=1/client=4")
        rows: tuple[ExampleRow, ...] = (  # name, partition, n, λ, Δ₂, Δ₁, d, adjacency, seeded
            ("histogram", None, 20, 50.0, 1.0, 1.0, 32, add, True),
            ("cell-sums", cell, 8, 2500.5, 200.0, 1200.0, 1000, replace, False),
        )
        return tuple(
            cls(name, part, n, lam, l2, l1, d, adjacency, SKELLAM_SAMPLER, seeded)
            for name, part, n, lam, l2, l1, d, adjacency, seeded in rows
        )
