"""DP-SGD style training: ``steps`` Poisson-subsampled Gaussian steps."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privfed._checks import check_count, check_finite_positive, to_float
from privfed.dp import events
from privfed.dp.sensitivity import Adjacency
from privfed.errors import LedgerError, ParameterError

__all__ = ["SubsampledGaussianRelease"]

_ADD_REMOVE_ACCOUNTING: frozenset[events.Accounting] = frozenset(("pld", "rdp"))
_REPLACE_ACCOUNTING: frozenset[events.Accounting] = frozenset(("pld",))


@dataclass(frozen=True)
class SubsampledGaussianRelease(events.ReleaseEvent):
    """A DP-SGD style release: ``steps`` Poisson-subsampled Gaussian steps.

    Attributes:
        name: What was trained/released; non-empty.
        partition: See :class:`~privfed.dp.GaussianRelease` (factory cells use
            the ``"cell"`` scheme).
        noise_multiplier: ``σ/C``: noise std over the per-example clipping
            norm C of each step's gradient sum (the DP-SGD convention);
            finite, > 0.  Under REPLACE_ONE a replaced example moves the sum by
            up to 2C; the accounting takes that into account.
        sampling_rate: Poisson inclusion probability q of each example per
            step; in (0, 1].
        steps: Number of steps; int >= 1.
        adjacency: The neighbouring relation.
        sampler: Name of the noise sampler.
        seeded: Whether the noise was seeded.

    Accounted exactly (up to PLD discretisation, pessimistically) with
    dp-accounting's privacy-loss distributions: ``PoissonSampledDpEvent(q,
    GaussianDpEvent(σ/C))`` self-composed ``steps`` times, under dp-accounting's
    ADD_OR_REMOVE_ONE or REPLACE_ONE relation to match ``adjacency`` (its
    replace model puts the two neighbouring contributions at ``±C``).  Even at
    ``q = 1`` the release is accounted by PLD, not as exact GDP, so the numbers
    of existing ledgers never change.

    RDP accounting (dp-accounting's Poisson-subsampled Gaussian RDP) exists
    for ADD_REMOVE only: dp-accounting has no RDP bound for Poisson sampling
    under replace-one.  So ``accounting`` is ``{"pld", "rdp"}`` under
    ADD_REMOVE and ``{"pld"}`` under REPLACE_ONE.

    dp-accounting export (:meth:`to_dp_accounting_event`):
    ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ/C)),
    steps)``, only for :attr:`accountant_relation` (a subsampled release has no
    exact translation across relations) and, under replace-one, not for the RDP
    accountant (no RDP bound; with ``accountant=None`` dp-accounting's RDP
    accountant refuses a Poisson-sampled event by itself).
    """

    type_tag: ClassVar[str] = "subsampled-gaussian"

    name: str
    partition: events.Partition
    noise_multiplier: float
    sampling_rate: float
    steps: int
    adjacency: Adjacency
    sampler: str
    seeded: bool

    def __post_init__(self) -> None:
        self._check_common()
        check_finite_positive("noise_multiplier", self.noise_multiplier)
        rate = to_float("sampling_rate", self.sampling_rate)
        if not (0.0 < rate <= 1.0):
            raise ParameterError("sampling_rate", "a float in (0, 1]", self.sampling_rate)
        check_count("steps", self.steps, minimum=1)
        self._check_noise_fields()

    # -- accounting -------------------------------------------------------------------

    @property
    def accounting(self) -> frozenset[events.Accounting]:
        """``{"pld", "rdp"}`` under ADD_REMOVE, ``{"pld"}`` under REPLACE_ONE."""
        if self.adjacency is Adjacency.REPLACE_ONE:
            return _REPLACE_ACCOUNTING
        return _ADD_REMOVE_ACCOUNTING

    def pld(self, value_discretization_interval: float) -> Any:
        """dp-accounting's subsampled-Gaussian PLD, self-composed ``steps`` times."""
        from dp_accounting.pld import privacy_loss_distribution as pld_lib
        from dp_accounting.privacy_accountant import NeighboringRelation

        replace = self.adjacency is Adjacency.REPLACE_ONE
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=float(self.noise_multiplier),
            sensitivity=1.0,
            sampling_prob=float(self.sampling_rate),
            value_discretization_interval=value_discretization_interval,
            neighboring_relation=(
                NeighboringRelation.REPLACE_ONE
                if replace
                else NeighboringRelation.ADD_OR_REMOVE_ONE
            ),
        ).self_compose(int(self.steps))

    def rdp(self, orders: Sequence[float]) -> npt.NDArray[np.float64]:
        """``steps`` times dp-accounting's Poisson-subsampled Gaussian RDP (ADD_REMOVE only).

        Raises:
            LedgerError: Under REPLACE_ONE (no RDP bound available).
        """
        if self.adjacency is Adjacency.REPLACE_ONE:
            raise LedgerError(
                f"subsampled release {self.name!r}: no RDP accounting under 'replace-one' "
                "(dp-accounting bounds Poisson sampling in RDP only for add-or-remove-one)"
            )
        from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

        per_step = rdp_lib._compute_rdp_poisson_subsampled_gaussian(
            q=float(self.sampling_rate),
            noise_multiplier=float(self.noise_multiplier),
            orders=list(orders),
        )
        return np.asarray(per_step, dtype=np.float64) * int(self.steps)

    def accounting_key(self) -> Hashable:
        """``(σ/C, q, steps, adjacency)``."""
        return (self.noise_multiplier, self.sampling_rate, self.steps, self.adjacency)

    # -- export -----------------------------------------------------------------------

    @property
    def accountant_relation(self) -> events.AccountantRelation:
        """``"replace-one"`` under REPLACE_ONE, else ``"add-or-remove-one"``.

        dp-accounting models a replaced example as gradient sums at ``±C``
        (a change of up to 2C), which is this release's replace-one meaning, so
        the multiplier is ``σ/C`` under either relation.
        """
        if self.adjacency is Adjacency.REPLACE_ONE:
            return "replace-one"
        return "add-or-remove-one"

    def _dp_event(
        self, relation: events.AccountantRelation, accountant: events.Accountant | None
    ) -> Any:
        """The self-composed subsampled event (see the class); refuses other relations."""
        import dp_accounting

        if relation != self.accountant_relation:
            raise LedgerError(
                f"a subsampled release under {self.adjacency.value!r} cannot be exported for "
                f"a {relation!r} accountant"
            )
        if accountant == "rdp" and "rdp" not in self.accounting:
            raise LedgerError(
                f"subsampled release {self.name!r} under 'replace-one' cannot be exported for "
                "dp-accounting's RDP accountant: it has no RDP bound for Poisson sampling under "
                "replace-one; use its PLD accountant (accountant='pld')"
            )
        step = dp_accounting.PoissonSampledDpEvent(
            sampling_probability=float(self.sampling_rate),
            event=dp_accounting.GaussianDpEvent(noise_multiplier=float(self.noise_multiplier)),
        )
        return dp_accounting.SelfComposedDpEvent(event=step, count=int(self.steps))

    # -- examples ---------------------------------------------------------------------

    @classmethod
    def examples(cls) -> tuple[SubsampledGaussianRelease, ...]:
        """Both adjacencies, a cell-scheme partition, a full-batch release."""
        replace, add_remove = Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE
        cell = events.PartitionKey("cell", "class=0/client=1")
        generator = "torch-generator-gaussian"
        rows = (
            # name, partition, σ/C, q, steps, adjacency, sampler, seeded
            ("factory class=0 client=1", cell, 2.0, 0.1, 4, replace, generator, True),
            ("dp-sgd", 0, 2.0, 0.05, 6, add_remove, "torch-normal", False),
            ("full-batch", None, 3.0, 1.0, 2, add_remove, "torch-normal", True),
        )
        return tuple(cls(*row) for row in rows)
