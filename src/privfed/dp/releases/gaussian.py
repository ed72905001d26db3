"""The Gaussian mechanism release: ``q(D) + N(0, σ² I)``, exactly ``Δ/σ``-GDP."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privfed._checks import check_count, check_finite_nonnegative, check_finite_positive
from privfed.dp.events import (
    Accountant,
    AccountantRelation,
    Accounting,
    Partition,
    PartitionKey,
    ReleaseEvent,
    check_accountant,
    check_adjacency,
    check_bool,
    check_relation,
    check_sampler,
    register_release,
)
from privfed.dp.noise import DISCRETE_GAUSSIAN_SAMPLER, GAUSSIAN_SAMPLER, ROUNDED_GAUSSIAN_SAMPLER
from privfed.dp.sensitivity import Adjacency
from privfed.errors import LedgerError, ParameterError

__all__ = ["GaussianRelease"]

_ACCOUNTING: frozenset[Accounting] = frozenset(("gdp", "pld", "rdp"))


@register_release("gaussian")
@dataclass(frozen=True)
class GaussianRelease(ReleaseEvent):
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

    dp-accounting export: ``GaussianDpEvent(σ/Δ)`` with Δ already expressed
    for ``adjacency``, for an accountant constructed with
    ``NeighboringRelation.ADD_OR_REMOVE_ONE`` (:attr:`accountant_relation`),
    PLD or RDP alike.
    """

    name: str
    partition: Partition
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
        check_adjacency(self.adjacency)
        sampler = check_sampler(self.sampler)
        if sampler == DISCRETE_GAUSSIAN_SAMPLER:
            raise ParameterError(
                "sampler",
                "a continuous or rounded Gaussian sampler",
                sampler,
                detail="discrete-Gaussian releases are not accounted as continuous Gaussians",
            )
        check_bool("seeded", self.seeded)
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
    def accounting(self) -> frozenset[Accounting]:
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
    def accountant_relation(self) -> AccountantRelation:
        """Always ``"add-or-remove-one"``: the multiplier ``σ/Δ`` already carries Δ."""
        return "add-or-remove-one"

    def to_dp_accounting_event(
        self, *, relation: AccountantRelation | None = None, accountant: Accountant | None = None
    ) -> Any:
        """Return a ``dp_accounting.GaussianDpEvent`` (``NoOpDpEvent`` when Δ = 0).

        Args:
            relation: ``None`` or ``"add-or-remove-one"`` (recommended): the
                multiplier is ``σ/Δ`` with Δ already expressed for this
                release's adjacency, correct for dp-accounting's PLD and RDP
                accountants constructed with ``ADD_OR_REMOVE_ONE``.
                ``"replace-one"``: the multiplier is ``2σ/Δ``, because
                dp-accounting's PLD accountant shifts a replace-one Gaussian by
                twice its unit sensitivity; only valid with ``accountant="pld"``.
            accountant: ``"pld"``, ``"rdp"`` or ``None`` (unknown).

        Raises:
            ParameterError: Unknown ``relation`` or ``accountant``.
            LedgerError: ``relation="replace-one"`` without ``accountant="pld"``:
                dp-accounting's RDP accountant ignores the doubled replace-one
                sensitivity of a Gaussian, so the ``2σ/Δ`` event would make it
                under-report ε (by about 2x).
        """
        import dp_accounting

        wanted = self.accountant_relation if relation is None else check_relation(relation)
        consumer = check_accountant(accountant)
        factor = 1.0
        if wanted == "replace-one":
            if consumer != "pld":
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
        return (
            cls(
                name="sum",
                partition=PartitionKey("class", 3),
                l2_sensitivity=2.0,
                noise_std=4.0,
                adjacency=Adjacency.REPLACE_ONE,
                sampler=GAUSSIAN_SAMPLER,
                seeded=False,
                dimension=8,
            ),
            cls(
                name="counts",
                partition=None,
                l2_sensitivity=1.0,
                noise_std=1.5,
                adjacency=Adjacency.ADD_REMOVE,
                sampler=ROUNDED_GAUSSIAN_SAMPLER,
                seeded=True,
            ),
            cls(
                name="latent-statistics",
                partition="class-b",
                l2_sensitivity=0.4,
                noise_std=1.0,
                adjacency=Adjacency.ADD_REMOVE,
                sampler=GAUSSIAN_SAMPLER,
                seeded=True,
                dimension=73,
            ),
        )
