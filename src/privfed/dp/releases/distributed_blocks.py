"""The distributed block release: honest clients add integer noise, one scale per block."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privfed._checks import check_choice, check_count, check_finite_nonnegative
from privfed.dp import events
from privfed.dp.distributed import DDG_MIN_NOISE_STD, DistributedMechanism
from privfed.dp.distributed_blocks import block_rdp, block_zcdp
from privfed.dp.events import Partition, PartitionKey
from privfed.dp.releases._distributed import NOISE_SAMPLERS, check_contributors, zcdp_dp_event
from privfed.dp.samplers import EXACT_DISCRETE_GAUSSIAN_SAMPLER, SKELLAM_SAMPLER
from privfed.dp.sensitivity import Adjacency
from privfed.errors import LedgerError, ParameterError, ParameterTypeError

__all__ = ["DistributedBlockRelease"]

_ACCOUNTING: frozenset[events.Accounting] = frozenset(("rdp",))
_SAMPLERS = {"discrete-gaussian": EXACT_DISCRETE_GAUSSIAN_SAMPLER, "skellam": SKELLAM_SAMPLER}


def _tuple(name: str, value: object) -> tuple[Any, ...]:
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple) or not value:
        raise ParameterTypeError(name, "a non-empty tuple (one entry per block)", value)
    return value


@dataclass(frozen=True)
class DistributedBlockRelease(events.ReleaseEvent):
    """A vector released under secure aggregation with client-side noise, one scale per block.

    Every summed client adds, to each coordinate of block b, an exact draw of
    ``N_Z(0, σ_b²)`` (``mechanism="discrete-gaussian"``) or
    ``Poisson(λ_b) − Poisson(λ_b)`` (``"skellam"``) before masking; at least
    ``num_contributors`` of the summed clients are honest.  The accounting is
    :func:`privfed.dp.distributed_blocks.block_rdp` (proofs in that module).

    Attributes:
        name: What was released; non-empty.
        partition: The records it reads.
        mechanism: ``"discrete-gaussian"`` or ``"skellam"``.
        num_contributors: n, guaranteed honest noise contributors, in ``[1, 2**20]``.
        noise: Per-client σ_b (>= 0.5) or λ_b (> 0) per block, grid units.
        dimensions: Coordinates per block (ints >= 1), same length as ``noise``.
        unit_mu_squared: M = sup over neighbours of ``Σ_b ‖Δ_b‖²/v_b`` for ONE
            client's noise (``v_b = σ_b²`` or ``2λ_b``), under ``adjacency``.
        adjacency: The neighbouring relation M is computed for.
        sampler: The sampler's name; must be the mechanism's exact sampler.
        seeded: Whether the noise came from explicit seeds.
        block_mu_squared: ``None`` (default) or, per block, ``M_b = sup
            ‖Δ_b‖²/v_b`` under ``adjacency`` (finite, >= 0): the Skellam
            accounting then charges each block only its own second-order term
            (:func:`~privfed.dp.distributed_blocks.block_rdp`).  Always in the
            ledger JSON (``null`` when ``None``), like every field.

    dp-accounting export: ``ZCDpEvent(rho, xi)`` from
    :func:`~privfed.dp.distributed_blocks.block_zcdp` (an upper bound on the
    curve; equal to it for Skellam); PLD is refused.
    """

    type_tag: ClassVar[str] = "distributed-blocks"

    name: str
    partition: Partition
    mechanism: DistributedMechanism
    num_contributors: int
    noise: tuple[float, ...]
    dimensions: tuple[int, ...]
    unit_mu_squared: float
    adjacency: Adjacency
    sampler: str
    seeded: bool
    block_mu_squared: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        self._check_common()
        kind = check_choice("mechanism", self.mechanism, tuple(_SAMPLERS))
        check_contributors(self.num_contributors)
        noise = _tuple("noise", self.noise)
        dims = _tuple("dimensions", self.dimensions)
        if len(noise) != len(dims):
            raise ParameterError("dimensions", f"{len(noise)} entries (one per block)", len(dims))
        values = []
        for value in noise:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParameterTypeError("noise", "floats", value)
            v = float(value)
            low = DDG_MIN_NOISE_STD if kind == "discrete-gaussian" else 0.0
            if not np.isfinite(v) or v < low or v == 0.0:
                raise ParameterError("noise", f"finite floats >= {low} (and > 0)", v)
            values.append(v)
        object.__setattr__(self, "noise", tuple(values))
        object.__setattr__(
            self, "dimensions", tuple(check_count("dimensions", d, minimum=1) for d in dims)
        )
        check_finite_nonnegative("unit_mu_squared", self.unit_mu_squared)
        if self.block_mu_squared is not None:
            caps = _tuple("block_mu_squared", self.block_mu_squared)
            if len(caps) != len(noise):
                raise ParameterError(
                    "block_mu_squared", f"{len(noise)} entries (one per block)", len(caps)
                )
            object.__setattr__(
                self,
                "block_mu_squared",
                tuple(check_finite_nonnegative("block_mu_squared", v) for v in caps),
            )
        sampler = self._check_noise_fields()
        if sampler in NOISE_SAMPLERS or (
            sampler in _SAMPLERS.values() and sampler != _SAMPLERS[kind]
        ):
            raise ParameterError(
                "sampler",
                f"the exact {kind} sampler",
                sampler,
                detail="the accounting holds for the mechanism's exact law only",
            )

    def _arguments(self) -> dict[str, Any]:
        return {
            "num_clients": int(self.num_contributors),
            "noise": self.noise,
            "dimensions": self.dimensions,
            "unit_mu_squared": float(self.unit_mu_squared),
            "block_mu_squared": self.block_mu_squared,
        }

    # -- accounting -------------------------------------------------------------------

    @property
    def accounting(self) -> frozenset[events.Accounting]:
        """``{"rdp"}``."""
        return _ACCOUNTING

    def rdp(self, orders: Sequence[float]) -> npt.NDArray[np.float64]:
        """:func:`privfed.dp.distributed_blocks.block_rdp` at ``orders``."""
        return block_rdp(self.mechanism, orders, **self._arguments())

    def zcdp(self) -> tuple[float, float]:
        """``(rho, xi)`` of the export."""
        return block_zcdp(self.mechanism, **self._arguments())

    def accounting_key(self) -> Hashable:
        """``(mechanism, n, noise, dimensions, M, M_b)``."""
        return (
            self.mechanism,
            self.num_contributors,
            self.noise,
            self.dimensions,
            self.unit_mu_squared,
            self.block_mu_squared,
        )

    # -- export -----------------------------------------------------------------------

    def _dp_event(
        self, relation: events.AccountantRelation, accountant: events.Accountant | None
    ) -> Any:
        """``ZCDpEvent(rho, xi)`` (``NoOpDpEvent`` when free); PLD refused.

        ρ and ξ already carry this release's adjacency, and dp-accounting's RDP
        accountant composes a ZCDpEvent the same way under both relations.
        """
        return zcdp_dp_event("distributed block", self.name, accountant, self.zcdp)

    @property
    def rdp_export_exact(self) -> bool:
        """``False`` for Skellam: the accounted curve is below its exported zCDP line.

        Between integer orders the Skellam curve is interpolated by convexity,
        and on (1, 2) it is ε(2); no ``ZCDpEvent`` expresses that, so the
        export (the line of :meth:`zcdp`) reports a slightly larger ε.  For
        the discrete Gaussian the line is the curve at n whenever τ is
        negligible.
        """
        return self.mechanism != "skellam"

    @property
    def accountant_relation(self) -> events.AccountantRelation:
        """``"add-or-remove-one"``: M already carries the adjacency."""
        return "add-or-remove-one"

    # -- JSON -------------------------------------------------------------------------

    def _field_to_json(self, name: str, value: object) -> Any:
        if name in ("noise", "dimensions", "block_mu_squared") and value is not None:
            return list(value)  # type: ignore[call-overload]
        return super()._field_to_json(name, value)

    @classmethod
    def _field_from_json(cls, name: str, value: object) -> Any:
        if name in ("noise", "dimensions") or (name == "block_mu_squared" and value is not None):
            if not isinstance(value, list):
                raise LedgerError(f"{name} must be a JSON list")
            return tuple(value)
        return super()._field_from_json(name, value)

    # -- examples ---------------------------------------------------------------------

    @classmethod
    def examples(cls) -> tuple[DistributedBlockRelease, ...]:
        """Both mechanisms and adjacencies; a class-scheme partition and the whole dataset."""
        add, replace = Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE
        # Each mechanism with its own exact sampler; the Skellam ones over 11 clients.
        skellam = functools.partial(
            cls, mechanism="skellam", num_contributors=11, sampler=SKELLAM_SAMPLER, seeded=False
        )
        ddg = functools.partial(
            cls, mechanism="discrete-gaussian", sampler=EXACT_DISCRETE_GAUSSIAN_SAMPLER
        )
        lam = (2000.0, 4.0e6, 2.0e6)
        return (
            skellam(
                name="latent/class",
                partition=PartitionKey("class", 0),
                noise=lam,
                dimensions=(8, 8, 28),
                unit_mu_squared=0.9,
                adjacency=replace,
            ),
            ddg(
                name="latent/class",
                partition=PartitionKey("class", 1),
                num_contributors=5,
                noise=(40.0, 900.0, 636.5, 3.0),
                dimensions=(4, 4, 6, 1),
                unit_mu_squared=2.5,
                adjacency=add,
                seeded=True,
            ),
            skellam(
                name="latent/class",
                partition=PartitionKey("class", 2),
                noise=(*lam, 3.0),
                dimensions=(8, 8, 28, 1),
                unit_mu_squared=1.1,
                adjacency=add,
                block_mu_squared=(0.3, 0.4, 0.4, 1.0 / 6.0),
            ),
            ddg(
                name="counts",
                partition=None,
                num_contributors=3,
                noise=(1.5,),
                dimensions=(10,),
                unit_mu_squared=0.4,
                adjacency=replace,
                seeded=False,
            ),
        )
