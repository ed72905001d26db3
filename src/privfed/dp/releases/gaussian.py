"""The Gaussian mechanism release: ``q(D) + N(0, σ² I)``, exactly ``Δ/σ``-GDP."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privfed._checks import check_count, check_finite_nonnegative, check_finite_positive
from privfed.dp import events
from privfed.dp.noise import DISCRETE_GAUSSIAN_SAMPLER, GAUSSIAN_SAMPLER, ROUNDED_GAUSSIAN_SAMPLER
from privfed.dp.sensitivity import Adjacency
from privfed.errors import LedgerError, ParameterError

__all__ = ["GaussianRelease"]

_ACCOUNTING: frozenset[events.Accounting] = frozenset(("gdp", "pld", "rdp"))


@dataclass(frozen=True)
class GaussianRelease(events.ReleaseEvent):
    """One Gaussian mechanism release, validated at construction.

    Attributes:
        name: What was released (e.g. ``"latent-statistics"``); non-empty.
        partition: The records it reads (see :mod:`privfed.dp.events`):
            ``None`` for the whole dataset, a
            :class:`~privfed.dp.PartitionKey` (e.g. ``PartitionKey("class",
            3)``) or a bare int/str label of the default scheme.
        l2_sensitivity: Δ of the released query under ``adjacency``; >= 0.
        noise_std: σ of the isotropic noise, same units as Δ; > 0.
        adjacency: The neighbouring relation Δ was computed for.
        sampler: Name of the noise sampler (e.g.
            :data:`privfed.dp.noise.GAUSSIAN_SAMPLER`).  The discrete Gaussian
            sampler is refused: its guarantee is not the continuous one.
        seeded: Whether the noise came from an explicit, reproducible seed.
        dimension: Number of noised coordinates, if known (>= 1).

    The release is exactly ``mu = Δ/σ``-GDP under ``adjacency`` (accounting
    ``{"gdp", "pld", "rdp"}``).  A release whose coordinates carry different
    noise stds (such as a latent-statistic plan) is recorded in whitened form:
    ``noise_std = 1`` and ``l2_sensitivity`` = its exact joint μ.

    dp-accounting export (:meth:`to_dp_accounting_event`):
    ``GaussianDpEvent(σ/Δ)`` with Δ already expressed for ``adjacency``, for an
    accountant constructed with ``NeighboringRelation.ADD_OR_REMOVE_ONE``
    (:attr:`accountant_relation`), PLD or RDP alike; ``NoOpDpEvent`` when
    Δ = 0.  ``relation="replace-one"`` exports the multiplier ``2σ/Δ``,
    because dp-accounting's PLD accountant shifts a replace-one Gaussian by
    twice its unit sensitivity; it is only valid with ``accountant="pld"``
    (dp-accounting's RDP accountant ignores the doubled sensitivity, so the
    ``2σ/Δ`` event would make it under-report ε by about 2x: a
    :class:`~privfed.errors.LedgerError` otherwise).
    """

    type_tag: ClassVar[str] = "gaussian"

    name: str
    partition: events.Partition
    l2_sensitivity: float
    noise_std: float
    adjacency: Adjacency
    sampler: str
    seeded: bool
    dimension: int | None = None

    def __post_init__(self) -> None:
        self._check_common()
        check_finite_nonnegative("l2_sensitivity", self.l2_sensitivity)
        check_finite_positive("noise_std", self.noise_std)
        sampler = self._check_noise_fields()
        if sampler == DISCRETE_GAUSSIAN_SAMPLER:
            raise ParameterError(
                "sampler",
                "a continuous or rounded Gaussian sampler",
                sampler,
                detail="discrete-Gaussian releases are not accounted as continuous Gaussians",
            )
        if self.dimension is not None:
            check_count("dimension", self.dimension, minimum=1)

    @property
    def mu(self) -> float:
        """μ-GDP of this release: ``l2_sensitivity / noise_std``."""
        return float(self.l2_sensitivity) / float(self.noise_std)

    @property
    def noise_multiplier(self) -> float:
        """``σ/Δ`` (``math.inf`` when Δ = 0), the dp-accounting parameter."""
        if self.l2_sensitivity == 0:
            return math.inf
        return float(self.noise_std) / float(self.l2_sensitivity)

    # -- accounting -------------------------------------------------------------------

    @property
    def accounting(self) -> frozenset[events.Accounting]:
        """``{"gdp", "pld", "rdp"}``: a Gaussian release is exactly GDP."""
        return _ACCOUNTING

    def gdp_mu(self) -> float:
        """Exact μ: :attr:`mu`."""
        return self.mu

    def pld(self, value_discretization_interval: float) -> Any:
        """A shift by ``Δ/σ`` (Δ is already for the adjacency); ``None`` when Δ = 0."""
        from dp_accounting.pld import privacy_loss_distribution as pld_lib
        from dp_accounting.privacy_accountant import NeighboringRelation

        if self.l2_sensitivity == 0:
            return None
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=self.noise_multiplier,
            sensitivity=1.0,
            value_discretization_interval=value_discretization_interval,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
        )

    def rdp(self, orders: Sequence[float]) -> npt.NDArray[np.float64]:
        """``α μ² / 2`` at each order α."""
        return 0.5 * self.mu**2 * np.asarray(orders, dtype=np.float64)

    def accounting_key(self) -> Hashable:
        """``(Δ, σ)``."""
        return (self.l2_sensitivity, self.noise_std)

    # -- export -----------------------------------------------------------------------

    @property
    def accountant_relation(self) -> events.AccountantRelation:
        """Always ``"add-or-remove-one"``: the multiplier ``σ/Δ`` already carries Δ."""
        return "add-or-remove-one"

    def _dp_event(
        self, relation: events.AccountantRelation, accountant: events.Accountant | None
    ) -> Any:
        """``GaussianDpEvent(σ/Δ)``, ``2σ/Δ`` for a replace-one PLD accountant (see the class)."""
        import dp_accounting

        factor = 1.0
        if relation == "replace-one":
            if accountant != "pld":
                raise LedgerError(
                    f"Gaussian release {self.name!r}: a 'replace-one' export (multiplier "
                    "2*sigma/Delta) is correct only for dp-accounting's PLD accountant; its RDP "
                    "accountant ignores the doubled replace-one sensitivity and would "
                    "under-report epsilon.  Export with relation='add-or-remove-one' (the "
                    "default, right for every accountant) or pass accountant='pld'"
                )
            factor = 2.0
        if self.l2_sensitivity == 0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.GaussianDpEvent(noise_multiplier=factor * self.noise_multiplier)

    # -- examples ---------------------------------------------------------------------

    @classmethod
    def examples(cls) -> tuple[GaussianRelease, ...]:
        """Both adjacencies, a whitened release, a class-scheme one, a bare label."""
        replace, add_remove = Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE
        rows = (
            # name, partition, Δ, σ, adjacency, sampler, seeded, dimension
            ("sum", events.PartitionKey("class", 3), 2.0, 4.0, replace, GAUSSIAN_SAMPLER, False, 8),
            ("counts", None, 1.0, 1.5, add_remove, ROUNDED_GAUSSIAN_SAMPLER, True, None),
            ("latent-statistics", "class-b", 0.4, 1.0, add_remove, GAUSSIAN_SAMPLER, True, 73),
        )
        return tuple(cls(*row) for row in rows)
