"""The plumbing shared by the distributed (secure-aggregation) release kinds.

Private: not a kind itself, so :mod:`privfed.dp.releases` does not discover it;
:mod:`~privfed.dp.releases.distributed_gaussian` and
:mod:`~privfed.dp.releases.distributed_skellam` import it.  Both kinds are
accounted in Rényi DP only, export ``ZCDpEvent(rho, xi)`` and refuse PLD.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable
from typing import Any, ClassVar

from privfed._checks import check_count, check_finite_nonnegative
from privfed.dp import events
from privfed.dp.distributed import MAX_CONTRIBUTORS
from privfed.dp.noise import DISCRETE_GAUSSIAN_SAMPLER, GAUSSIAN_SAMPLER, ROUNDED_GAUSSIAN_SAMPLER
from privfed.dp.sensitivity import Adjacency
from privfed.errors import LedgerError, ParameterError

__all__ = [
    "NOISE_SAMPLERS",
    "DistributedRelease",
    "ExampleRow",
    "check_contributors",
    "zcdp_dp_event",
]

#: One example release: name, partition, n, noise parameter, Δ₂, Δ₁, d, adjacency, seeded.
ExampleRow = tuple[str, events.Partition, int, float, float, float, int, Adjacency, bool]

#: The samplers of :mod:`privfed.dp.noise`: not the law of either distributed kind.
NOISE_SAMPLERS: frozenset[str] = frozenset(
    (GAUSSIAN_SAMPLER, ROUNDED_GAUSSIAN_SAMPLER, DISCRETE_GAUSSIAN_SAMPLER)
)

_ACCOUNTING: frozenset[events.Accounting] = frozenset(("rdp",))


def check_contributors(value: object) -> int:
    """``num_contributors``: an int in ``[1, 2**20]`` (shared by the distributed kinds)."""
    count = check_count("num_contributors", value, minimum=1)
    if count > MAX_CONTRIBUTORS:
        raise ParameterError("num_contributors", f"an int in [1, {MAX_CONTRIBUTORS}]", value)
    return count


def zcdp_dp_event(
    label: str,
    name: str,
    accountant: events.Accountant | None,
    zcdp: Callable[[], tuple[float, float]],
) -> Any:
    """The dp-accounting export of a release accounted by a zCDP line (shared by the kinds).

    Args:
        label: The kind in words, for the refusal (e.g. ``"distributed Skellam"``).
        name: The release's name.
        accountant: The accountant the export is for; ``"pld"`` is refused.
        zcdp: Returns the release's ``(rho, xi)``; called only when not refused.

    Returns:
        ``ZCDpEvent(rho, xi)``, or ``NoOpDpEvent`` when both are 0.

    Raises:
        LedgerError: ``accountant="pld"``: the release has no PLD accounting.
    """
    import dp_accounting

    if accountant == "pld":
        raise LedgerError(
            f"{label} release {name!r} has no PLD accounting "
            "(dp-accounting's PLD accountant cannot take a ZCDpEvent); export with "
            "accountant='rdp'"
        )
    rho, xi = zcdp()
    if rho == 0.0 and xi == 0.0:
        return dp_accounting.NoOpDpEvent()
    return dp_accounting.ZCDpEvent(rho=rho, xi=xi)


class DistributedRelease(events.ReleaseEvent):
    """Base of the distributed kinds: n honest clients each add integer noise.

    A concrete kind is a frozen dataclass declaring the fields below plus its
    noise parameter (between ``num_contributors`` and ``l2_sensitivity``), and
    sets the class variables.  It implements :meth:`_check_noise_parameter`,
    :meth:`_noise_parameter`, :meth:`zcdp` and :meth:`rdp`.

    Attributes:
        num_contributors: n, the guaranteed number of honest noise contributors.
        l2_sensitivity: Δ₂ of the integer total, grid units.
        l1_sensitivity: Δ₁ of the integer total, grid units.
        dimension: d, the number of noised coordinates.
    """

    #: The kind in words, for error messages (e.g. ``"distributed Skellam"``).
    _label: ClassVar[str]
    #: Samplers whose law is not the kind's: refused by name.
    _wrong_samplers: ClassVar[frozenset[str]]
    #: The ``sampler`` domain and detail of the refusal.
    _sampler_domain: ClassVar[str]
    _sampler_detail: ClassVar[str]

    num_contributors: int
    l2_sensitivity: float
    l1_sensitivity: float
    dimension: int

    def __post_init__(self) -> None:
        self._check_common()
        check_contributors(self.num_contributors)
        self._check_noise_parameter()
        check_finite_nonnegative("l2_sensitivity", self.l2_sensitivity)
        check_finite_nonnegative("l1_sensitivity", self.l1_sensitivity)
        check_count("dimension", self.dimension, minimum=1)
        sampler = self._check_noise_fields()
        if sampler in self._wrong_samplers:
            raise ParameterError(
                "sampler", self._sampler_domain, sampler, detail=self._sampler_detail
            )

    @abc.abstractmethod
    def _check_noise_parameter(self) -> None:
        """Validate the kind's own noise parameter."""

    @abc.abstractmethod
    def _noise_parameter(self) -> float:
        """The kind's noise parameter (σ or λ)."""

    @abc.abstractmethod
    def zcdp(self) -> tuple[float, float]:
        """``(rho, xi)`` of the dp-accounting export."""

    def _sensitivity_arguments(self) -> dict[str, Any]:
        """The keyword arguments of the accounting functions other than the noise parameter."""
        return {
            "num_clients": int(self.num_contributors),
            "l2_sensitivity": float(self.l2_sensitivity),
            "l1_sensitivity": float(self.l1_sensitivity),
            "dimension": int(self.dimension),
        }

    # -- accounting -------------------------------------------------------------------

    @property
    def accounting(self) -> frozenset[events.Accounting]:
        """``{"rdp"}``."""
        return _ACCOUNTING

    def accounting_key(self) -> Hashable:
        """``(n, noise parameter, Δ₂, Δ₁, d)``."""
        return (
            self.num_contributors,
            self._noise_parameter(),
            self.l2_sensitivity,
            self.l1_sensitivity,
            self.dimension,
        )

    # -- export -----------------------------------------------------------------------

    def _dp_event(
        self, relation: events.AccountantRelation, accountant: events.Accountant | None
    ) -> Any:
        """``ZCDpEvent(rho, xi)`` (``NoOpDpEvent`` when free) for either relation.

        dp-accounting's RDP accountant composes a ZCDpEvent the same way under
        both relations, and ρ, ξ already carry this release's adjacency, so
        ``relation`` does not change the export.  ``accountant=None`` is fine
        (dp-accounting's PLD accountant refuses a ZCDpEvent by itself).

        Raises:
            LedgerError: ``accountant="pld"``: this release has no PLD.
        """
        return zcdp_dp_event(self._label, self.name, accountant, self.zcdp)

    @property
    def accountant_relation(self) -> events.AccountantRelation:
        """``"add-or-remove-one"``: the sensitivities already carry the adjacency."""
        return "add-or-remove-one"
