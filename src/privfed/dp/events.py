"""Release events: the protocol every release kind implements, and partitions.

A *release event* is a small frozen value that says what one noisy release
cost: which records it read (its partition), under which neighbouring relation
(its adjacency), and enough about the mechanism for the
:class:`privfed.dp.PrivacyLedger` to compose it with other events.  The ledger
only composes; everything kind-specific lives in the event.

The protocol (:class:`ReleaseEvent`)
------------------------------------

Every kind is a frozen dataclass subclassing :class:`ReleaseEvent`, with the
common fields ``name``, ``partition``, ``adjacency``, ``sampler`` and
``seeded`` (its ``__post_init__`` calls ``_check_common`` first and
``_check_noise_fields`` after its own fields), and implements:

* :attr:`~ReleaseEvent.accounting` -- the accounting methods it supports, a
  subset of ``{"gdp", "pld", "rdp"}``.  The ledger uses the tightest method
  that *every* recorded event supports: exact μ-GDP if all are exactly GDP,
  else dp-accounting privacy-loss distributions (PLD), else Rényi DP (RDP).  A
  future RDP-only mechanism (e.g. distributed discrete noise) declares
  ``{"rdp"}`` and composes with everything that also declares ``"rdp"``.
* :meth:`~ReleaseEvent.gdp_mu` -- its exact μ when ``"gdp"`` is supported.
* :meth:`~ReleaseEvent.pld` -- its dp-accounting PLD (``None`` when free).
* :meth:`~ReleaseEvent.rdp` -- its RDP curve at given orders.
* :meth:`~ReleaseEvent.accounting_key` -- a hashable value such that two
  events of the same kind with equal keys have the same privacy loss (names,
  partitions, samplers and seeds left out); the ledger caches and
  de-duplicates by it.
* :attr:`~ReleaseEvent.accountant_relation` and ``_dp_event`` -- the
  dp-accounting export behind :meth:`~ReleaseEvent.to_dp_accounting_event`
  (which checks its arguments and calls ``_dp_event``).  The exported event is
  correct for a dp-accounting accountant constructed with
  :attr:`~ReleaseEvent.accountant_relation`; a combination that would be
  wrong for the named accountant (``accountant="pld"`` or ``"rdp"``) raises
  :class:`~privfed.errors.LedgerError` instead of exporting.
* :meth:`~ReleaseEvent.to_dict` / :meth:`~ReleaseEvent.from_dict` -- JSON
  keyed by the kind's type tag :attr:`~ReleaseEvent.type_tag` (inherited; a kind only
  overrides them for fields that are not JSON scalars, an
  :class:`~privfed.dp.Adjacency` or a :data:`Partition`).
* :meth:`~ReleaseEvent.examples` -- a few valid instances (both adjacencies
  where the kind allows them); ``tests/dp/test_dp_events.py`` runs its
  contract tests on every registered kind through this hook.

Adding a release kind
---------------------

Write ONE module in the folder ``privfed/dp/releases/`` (say
``laplace.py``) that defines the kind with its tag
(``type_tag: ClassVar[str] = "laplace"``), plus its own test file, and add the
class to :data:`privfed.dp.registry.RELEASE_KINDS`, the one table of kinds.
The ledger then accepts it, JSON restores it, and the contract tests cover it
(``tests/dp/test_dp_events.py`` also checks that every module of the folder
is in the table).  Kinds defined outside privfed register at run time with
:func:`privfed.dp.registry.register_release`.  Re-exporting it from
:mod:`privfed.dp` is optional.

Partitions and schemes
----------------------

A release reads a set of records named by its *partition*:

* ``None`` -- every record.
* A :class:`PartitionKey` ``(scheme, label)`` -- the records with ``label``
  under the partition *scheme* ``scheme`` (e.g. ``("class", 3)`` for the
  latent engine's class 3, ``("cell", "class=3/client=7")`` for one factory
  cell).  Within one scheme different labels are disjoint sets of records, so
  releases on them compose in parallel.  Across schemes nothing is assumed: a
  record has one label in every scheme (class 3 *and* cell (3, 7)), so
  different schemes compose sequentially.
* A bare ``int`` or ``str`` label -- shorthand for a label in the
  :data:`DEFAULT_SCHEME` (what every release meant before schemes existed).
  ``PartitionKey(DEFAULT_SCHEME, x)`` is stored as the bare ``x``, so each
  partition has one canonical form.

The worst-case record therefore sees every release on ``None``, plus, for each
scheme, the releases of one label of that scheme.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, Self

import numpy as np
import numpy.typing as npt

from privfed._checks import check_bool, check_str
from privfed.dp.sensitivity import Adjacency
from privfed.errors import LedgerError, ParameterError, ParameterTypeError

__all__ = [
    "DEFAULT_SCHEME",
    "Accountant",
    "AccountantRelation",
    "Accounting",
    "Partition",
    "PartitionKey",
    "ReleaseEvent",
    "check_accountant",
    "check_adjacency",
    "check_bool",
    "check_name",
    "check_partition",
    "check_relation",
    "check_sampler",
    "in_scheme",
    "partition_key",
]

#: The scheme of a bare ``int``/``str`` partition label.
DEFAULT_SCHEME: Final = "default"

#: An accounting method: exact μ-GDP, dp-accounting PLD, or Rényi DP.
Accounting = Literal["gdp", "pld", "rdp"]

#: The neighbouring relation a dp-accounting accountant is constructed with.
AccountantRelation = Literal["add-or-remove-one", "replace-one"]

#: A dp-accounting accountant family: ``PLDAccountant`` or ``RdpAccountant``.
Accountant = Literal["pld", "rdp"]

_RELATIONS: Final = ("add-or-remove-one", "replace-one")
_ACCOUNTANTS: Final = ("pld", "rdp")


# -- small checks shared by the kind modules --------------------------------------------


def check_name(value: object, name: str = "name") -> str:
    """Return ``value`` after checking it is a non-empty str."""
    return check_str(name, value)


def check_sampler(value: object) -> str:
    """Return ``value`` after checking it is a non-empty sampler name."""
    return check_name(value, "sampler")


def check_adjacency(value: object) -> Adjacency:
    """Return ``value`` after checking it is an :class:`~privfed.dp.Adjacency` member."""
    if not isinstance(value, Adjacency):
        raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", value)
    return value


def check_relation(value: object) -> AccountantRelation:
    """Return ``value`` after checking it names a dp-accounting neighbouring relation."""
    if value == "add-or-remove-one":
        return "add-or-remove-one"
    if value == "replace-one":
        return "replace-one"
    raise ParameterError("relation", "'add-or-remove-one' or 'replace-one'", value)


def check_accountant(value: object) -> Accountant | None:
    """Return ``value`` after checking it is ``None``, ``"pld"`` or ``"rdp"``."""
    if value is None:
        return None
    if value == "pld":
        return "pld"
    if value == "rdp":
        return "rdp"
    raise ParameterError("accountant", "None, 'pld' or 'rdp'", value)


def _check_label(value: object, name: str) -> int | str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterTypeError(name, "an int or a str", value)
    return value


# -- partitions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionKey:
    """A label within a declared partition scheme.

    Attributes:
        scheme: The partition scheme, a non-empty str (e.g. ``"class"``,
            ``"cell"``).  Labels of one scheme name disjoint sets of records;
            different schemes may overlap arbitrarily.
        label: The label within the scheme, an int (not bool) or a str.
    """

    scheme: str
    label: int | str

    def __post_init__(self) -> None:
        check_name(self.scheme, "scheme")
        _check_label(self.label, "label")


#: Which records a release reads: ``None`` (all), a :class:`PartitionKey`, or a
#: bare int/str label of the :data:`DEFAULT_SCHEME`.
Partition = int | str | PartitionKey | None


def check_partition(value: object) -> Partition:
    """Return ``value`` in canonical form after checking it is a :data:`Partition`.

    A :class:`PartitionKey` of the :data:`DEFAULT_SCHEME` becomes its bare label.

    Raises:
        ParameterTypeError: ``value`` is none of ``None``, int, str, PartitionKey.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, PartitionKey):
        return value.label if value.scheme == DEFAULT_SCHEME else value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterTypeError("partition", "an int, a str, a PartitionKey or None", value)
    return value


def partition_key(partition: Partition) -> PartitionKey | None:
    """The scheme-qualified form of ``partition`` (``None`` stays ``None``)."""
    canonical = check_partition(partition)
    if canonical is None or isinstance(canonical, PartitionKey):
        return canonical
    return PartitionKey(DEFAULT_SCHEME, canonical)


def in_scheme(scheme: str, partition: Partition) -> Partition:
    """Put a bare label into ``scheme``; ``None`` stays ``None``.

    Engines use this to state their scheme: ``in_scheme("cell", "class=3/client=7")``.
    A :class:`PartitionKey` already in ``scheme`` is returned unchanged.

    Raises:
        ParameterError: ``partition`` is a :class:`PartitionKey` of another scheme.
    """
    check_name(scheme, "scheme")
    canonical = check_partition(partition)
    if canonical is None:
        return None
    if isinstance(canonical, PartitionKey):
        if canonical.scheme != scheme:
            raise ParameterError(
                "partition", f"a bare label or a PartitionKey of scheme {scheme!r}", canonical
            )
        return canonical
    return check_partition(PartitionKey(scheme, canonical))


def _partition_to_json(partition: Partition) -> Any:
    if isinstance(partition, PartitionKey):
        return {"scheme": partition.scheme, "label": partition.label}
    return partition


def _partition_from_json(value: object) -> Any:
    if isinstance(value, dict):
        if set(value) != {"scheme", "label"}:
            raise LedgerError("a partition object must have exactly the fields 'scheme', 'label'")
        return PartitionKey(value["scheme"], value["label"])
    return value


# -- the protocol -------------------------------------------------------------------------


class ReleaseEvent(abc.ABC):
    """The protocol every release kind implements (see the module notes).

    Concrete kinds are frozen dataclasses listed in
    :data:`privfed.dp.registry.RELEASE_KINDS`; they declare the common fields below and
    validate every field in ``__post_init__`` (a kind's constructor is its
    only validator, JSON input included).

    Attributes:
        name: What was released; a non-empty str.
        partition: The records it reads, a canonical :data:`Partition`.
        adjacency: The neighbouring relation of its guarantee.
        sampler: Name of the noise sampler (non-empty).
        seeded: Whether the noise came from an explicit, reproducible seed.
        type_tag: The kind's JSON tag (a class attribute of each kind).
    """

    type_tag: ClassVar[str]

    name: str
    partition: Partition
    adjacency: Adjacency
    sampler: str
    seeded: bool

    def _check_common(self) -> None:
        """Validate ``name`` and canonicalise ``partition`` (call first)."""
        check_name(self.name)
        object.__setattr__(self, "partition", check_partition(self.partition))

    def _check_noise_fields(self) -> str:
        """Validate ``adjacency``, ``sampler`` and ``seeded`` (call after the kind's
        own fields); return the sampler name."""
        check_adjacency(self.adjacency)
        sampler = check_sampler(self.sampler)
        check_bool("seeded", self.seeded)
        return sampler

    # -- accounting ---------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def accounting(self) -> frozenset[Accounting]:
        """The accounting methods this event supports (non-empty)."""

    def gdp_mu(self) -> float | None:
        """Exact μ-GDP under :attr:`adjacency` when ``"gdp"`` is supported, else ``None``."""
        return None

    def pld(self, value_discretization_interval: float) -> Any:
        """dp-accounting ``PrivacyLossDistribution`` of this event, ``None`` when free.

        The PLD is for :attr:`adjacency` (pessimistic discretisation on the given
        loss grid), so PLDs of events of one ledger compose directly.

        Raises:
            LedgerError: ``"pld"`` is not in :attr:`accounting`.
        """
        raise LedgerError(f"a {self.type_tag} release has no PLD accounting")

    def rdp(self, orders: Sequence[float]) -> npt.NDArray[np.float64]:
        """Rényi-DP ε of this event at each order in ``orders`` (all > 1), for :attr:`adjacency`.

        Raises:
            LedgerError: ``"rdp"`` is not in :attr:`accounting`.
        """
        raise LedgerError(f"a {self.type_tag} release has no RDP accounting")

    @abc.abstractmethod
    def accounting_key(self) -> Hashable:
        """A hashable value; two events of this kind with equal keys have equal privacy loss.

        Leaves out name, partition, sampler and seed (so twins of a release
        share a key); the ledger prefixes the type tag, so keys of different
        kinds never collide.
        """

    # -- dp-accounting export -----------------------------------------------------------

    @property
    def rdp_export_exact(self) -> bool:
        """Whether dp-accounting's RDP accountant reproduces :meth:`rdp` from the export.

        ``True`` for every built-in kind except those whose accounted curve is
        tighter than anything a dp-accounting event can express (the export is
        then an upper bound: never tighter than the claim, only looser).
        """
        return True

    @property
    @abc.abstractmethod
    def accountant_relation(self) -> AccountantRelation:
        """The ``NeighboringRelation`` of the accountant that consumes the default export."""

    def to_dp_accounting_event(
        self, *, relation: AccountantRelation | None = None, accountant: Accountant | None = None
    ) -> Any:
        """Export as a dp-accounting ``DpEvent`` (what the kind's ``_dp_event`` builds).

        Args:
            relation: The neighbouring relation the consuming accountant is
                constructed with; ``None`` means :attr:`accountant_relation`.
            accountant: The accountant family that will consume the event
                (``"pld"`` or ``"rdp"``), or ``None`` when unknown: then only
                exports that are correct for every dp-accounting accountant
                with ``relation`` (or that it refuses by itself) are made.

        Raises:
            ParameterError: ``relation`` or ``accountant`` is not a known value.
            LedgerError: The event cannot be expressed correctly for this
                relation and accountant; the message says why.
        """
        chosen = self.accountant_relation if relation is None else check_relation(relation)
        return self._dp_event(chosen, check_accountant(accountant))

    @abc.abstractmethod
    def _dp_event(self, relation: AccountantRelation, accountant: Accountant | None) -> Any:
        """The dp-accounting ``DpEvent`` for a checked ``relation`` and ``accountant``.

        Raises:
            LedgerError: As :meth:`to_dp_accounting_event`.
        """

    # -- examples for the contract tests --------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def examples(cls) -> tuple[Self, ...]:
        """A few valid, non-free instances, both adjacencies where the kind allows them."""

    # -- JSON -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{"type": tag, <every dataclass field>}``."""
        out: dict[str, Any] = {"type": type(self).type_tag}
        for field in dataclasses.fields(_as_dataclass(self)):
            out[field.name] = self._field_to_json(field.name, getattr(self, field.name))
        return out

    @classmethod
    def from_dict(cls, data: object) -> Self:
        """Rebuild an event from :meth:`to_dict` output, re-validating every field.

        Raises:
            LedgerError: Not a dict, a different type tag, missing or unknown
                fields, or a field value the constructor refuses.
        """
        tag = cls.type_tag
        if not isinstance(data, dict):
            raise LedgerError("each release must be a JSON object")
        if data.get("type") != tag:
            raise LedgerError(f"expected a {tag!r} release, got type {data.get('type')!r}")
        names = [field.name for field in dataclasses.fields(_as_dataclass(cls))]
        missing = sorted(set(names) - set(data))
        unknown = sorted(set(data) - set(names) - {"type"})
        if missing or unknown:
            raise LedgerError(
                f"a {tag} release has missing or unknown fields (missing {missing}, "
                f"unknown {unknown})"
            )
        try:
            values = {name: cls._field_from_json(name, data[name]) for name in names}
            return cls(**values)
        except LedgerError:
            raise
        except (ValueError, TypeError) as exc:
            raise LedgerError(f"invalid {tag} release in ledger JSON: {exc}") from exc

    def _field_to_json(self, name: str, value: object) -> Any:
        """JSON form of one field (override for fields beyond scalars/adjacency/partition)."""
        if isinstance(value, Adjacency):
            return value.value
        if name == "partition":
            return _partition_to_json(self.partition)
        return value

    @classmethod
    def _field_from_json(cls, name: str, value: object) -> Any:
        """Inverse of :meth:`_field_to_json`."""
        if name == "adjacency":
            return Adjacency(value)
        if name == "partition":
            return _partition_from_json(value)
        return value


def _as_dataclass(obj: object) -> Any:
    if not dataclasses.is_dataclass(obj):
        raise TypeError(f"{obj!r} is not a dataclass")
    return obj
