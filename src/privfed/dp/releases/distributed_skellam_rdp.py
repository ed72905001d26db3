"""The distributed Skellam release accounted on its exact RDP curve (not the zCDP line).

:class:`~privfed.dp.releases.distributed_skellam.DistributedSkellamRelease`
accounts the zCDP line of :func:`~privfed.dp.distributed.skellam_zcdp`, whose
intercept ξ carries an extra ρ (the price of making the integer-order theorem a
line valid at every real order).  Composed over R training rounds that extra ρ
is paid R times.  This kind has the same fields and the same noise, and
accounts :func:`~privfed.dp.distributed.skellam_rdp` itself: Agarwal, Kairouz &
Liu (2021), Thm 3.5, at integer orders::

    ε(α) = α·Δ₂²/(2μ) + min( ((2α−1)·Δ₂² + 6·Δ₁)/(4μ²),  3·Δ₁/(2μ) ),   μ = 2nλ,

interpolated between integers by the convexity of ``(α−1)·D_α`` and equal to
ε(2) on (1, 2).  No dp-accounting event expresses that curve, so the export
stays the zCDP line (an upper bound: looser than the ledger, never tighter)
and :attr:`rdp_export_exact` is ``False``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from privfed.dp.distributed import skellam_rdp
from privfed.dp.releases.distributed_skellam import DistributedSkellamRelease
from privfed.dp.samplers import SKELLAM_SAMPLER
from privfed.dp.sensitivity import Adjacency

__all__ = ["DistributedSkellamRdpRelease"]


@dataclass(frozen=True)
class DistributedSkellamRdpRelease(DistributedSkellamRelease):
    """A distributed Skellam total accounted on the exact Skellam RDP curve (module notes).

    Attributes: As :class:`~privfed.dp.releases.distributed_skellam.DistributedSkellamRelease`.
    """

    type_tag: ClassVar[str] = "distributed-skellam-rdp"

    _label: ClassVar[str] = "distributed Skellam (RDP curve)"

    def rdp(self, orders: Sequence[float]) -> npt.NDArray[np.float64]:
        """:func:`privfed.dp.distributed.skellam_rdp` of this release at ``orders`` (all > 1)."""
        return skellam_rdp(
            orders, poisson_mean=float(self.poisson_mean), **self._sensitivity_arguments()
        )

    @property
    def rdp_export_exact(self) -> bool:
        """``False``: the exported zCDP line lies above the accounted curve."""
        return False

    @classmethod
    def examples(cls) -> tuple[DistributedSkellamRdpRelease, ...]:
        """A training round's shape (add/remove, Δ₁ = √d·Δ₂ below Δ₂²) and a replace-one total."""
        add, replace = Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE
        rows = (  # name, n, λ, Δ₂, Δ₁, d, adjacency
            ("training-round-1", 18, 3.0e6, 1100.0, 1100.0 * 2.0**6, 4096, add),
            ("histogram", 20, 50.0, 2.0, 2.0, 32, replace),
        )
        return tuple(
            cls(name, None, n, lam, l2, l1, d, adjacency, SKELLAM_SAMPLER, False)
            for name, n, lam, l2, l1, d, adjacency in rows
        )
