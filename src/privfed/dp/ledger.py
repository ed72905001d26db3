"""Audited privacy accounting: a ledger that composes validated release events.

Every noisy release is recorded as a small frozen *event* (see
:mod:`privfed.dp.events` for the protocol and :mod:`privfed.dp.releases` for
the kinds, e.g. :class:`GaussianRelease` and :class:`SubsampledGaussianRelease`).
The ledger never looks at an event's concrete type: it asks each event for its
accounting (exact μ-GDP, a dp-accounting PLD, an RDP curve) and composes.

Which releases compose how
--------------------------

Each release reads the records of its partition: ``None`` (every record), or a
label within a declared partition *scheme* (:class:`~privfed.dp.PartitionKey`;
a bare int/str is a label of the default scheme).  Labels of one scheme are
disjoint, so their releases compose in parallel; schemes may overlap (one
record has a label in every scheme), so schemes compose sequentially.  The
worst-case record sees

    every release on ``None``  +  for each scheme, the releases of one label,

and the ledger reports the worst such combination.  For exact GDP this is
``μ² = Σ_{None} μ_i² + Σ_schemes max_label Σ_label μ_i²``.

How the guarantee is computed
-----------------------------

The ledger uses the tightest method that every recorded release supports
(:attr:`~privfed.dp.events.ReleaseEvent.accounting`):

* ``"gdp"`` -- every release exactly GDP: the exact μ above, then ε(δ) from
  the exact GDP curve (conservative rounding).
* ``"pld"`` -- dp-accounting privacy-loss distributions (pessimistic
  discretisation, interval 1e-4).  For every worst-case combination (one
  label per scheme; identical label groups counted once) the PLDs of its
  releases are composed in record order, ε(δ) is read off, and the maximum is
  reported.  Used when there are at most 1024 distinct combinations.
* ``"rdp"`` -- Rényi DP at dp-accounting's default orders: the curves of the
  releases on ``None`` plus, per scheme, the pointwise maximum over labels of
  their summed curves (an upper bound on every combination), converted to
  (ε, δ) with dp-accounting's conversion (:mod:`privfed.dp.rdp`).

A release whose kinds share no usable method with the rest of the ledger is
refused when recorded.  Events are validated when built (dp-accounting does
not validate), and :meth:`PrivacyLedger.record` checks everything, the budget
included, before changing anything.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privfed._checks import (
    check_count,
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    to_float,
)
from privfed.dp.calibration import gdp_delta, gdp_epsilon
from privfed.dp.events import (
    Accountant,
    AccountantRelation,
    Accounting,
    Partition,
    PartitionKey,
    ReleaseEvent,
    check_accountant,
    check_partition,
    check_relation,
    partition_key,
)
from privfed.dp.rdp import RDP_ORDERS, rdp_delta, rdp_epsilon
from privfed.dp.registry import is_registered, release_from_dict
from privfed.dp.releases import GaussianRelease, SubsampledGaussianRelease
from privfed.dp.sensitivity import Adjacency
from privfed.errors import BudgetExceededError, LedgerError, ParameterError, ParameterTypeError

__all__ = [
    "AccountantRelation",
    "GaussianRelease",
    "LedgerGuarantee",
    "Partition",
    "PrivacyLedger",
    "Release",
    "SubsampledGaussianRelease",
]

#: Any event a ledger accepts: an instance of a registered release kind.
Release = ReleaseEvent

_FORMAT = "privfed.dp.ledger"
#: Version 2 added partition schemes (partition objects) and open release kinds.
_VERSION = 2
_V1_TAGS = ("gaussian", "subsampled-gaussian")
_PLD_INTERVAL = 1e-4
#: Above this many distinct worst-case combinations the PLD method is not used.
_MAX_COMBINATIONS = 1024
_METHODS: tuple[Accounting, ...] = ("gdp", "pld", "rdp")
_DEFAULT_EXPORT_DELTA = 1e-5
#: Top-level keys a ledger file may carry beside the ledger itself (explanations for
#: a reader, provenance); :meth:`PrivacyLedger.from_json` ignores them.
ANNOTATION_KEYS: tuple[str, ...] = ("explanation", "provenance")


@dataclass(frozen=True)
class LedgerGuarantee:
    """The guarantee a ledger states for the worst-case record.

    Attributes:
        epsilon: ε at ``delta`` (conservative).
        delta: The δ the guarantee is stated at.
        mu: Exact μ-GDP when every release is exactly GDP, else ``None``.
        method: ``"gdp"`` (exact μ-GDP), ``"pld"`` (dp-accounting PLD,
            pessimistic) or ``"rdp"`` (Rényi DP).
        adjacency: The neighbouring relation, ``None`` for an empty ledger.
        num_releases: Number of recorded releases.
    """

    epsilon: float
    delta: float
    mu: float | None
    method: Accounting
    adjacency: Adjacency | None
    num_releases: int

    def __post_init__(self) -> None:
        eps = to_float("epsilon", self.epsilon)
        if eps < 0.0:
            raise ParameterError("epsilon", "a float >= 0 (math.inf allowed)", self.epsilon)
        check_delta(self.delta)
        if self.mu is not None:
            check_finite_nonnegative("mu", self.mu)
        if self.method not in _METHODS:
            raise ParameterError("method", "'gdp', 'pld' or 'rdp'", self.method)
        check_count("num_releases", self.num_releases, minimum=0)


# -- layout: what the worst-case record sees ----------------------------------------------

Group = list[ReleaseEvent]


@dataclass(frozen=True)
class _Layout:
    """Releases grouped by partition: on ``None``, and per scheme per label (record order)."""

    everywhere: Group
    schemes: dict[str, dict[int | str, Group]]


def _layout(releases: Sequence[ReleaseEvent]) -> _Layout:
    everywhere: Group = []
    schemes: dict[str, dict[int | str, Group]] = {}
    for release in releases:
        key = partition_key(release.partition)
        if key is None:
            everywhere.append(release)
        else:
            schemes.setdefault(key.scheme, {}).setdefault(key.label, []).append(release)
    return _Layout(everywhere, schemes)


def _key(release: ReleaseEvent) -> Hashable:
    return (type(release).type_tag, release.accounting_key())


def _distinct(groups: Iterable[Group]) -> list[Group]:
    """The groups with distinct privacy loss (first of each kept, order preserved)."""
    seen: set[Hashable] = set()
    out: list[Group] = []
    for group in groups:
        signature = tuple(_key(r) for r in group)
        if signature not in seen:
            seen.add(signature)
            out.append(group)
    return out


def _num_combinations(layout: _Layout) -> int:
    count = 1
    for labels in layout.schemes.values():
        count *= len(_distinct(labels.values()))
        if count > _MAX_COMBINATIONS:
            break
    return count


class _Keyed:
    """A release hashed by its accounting key (for the caches)."""

    __slots__ = ("key", "release")

    def __init__(self, release: ReleaseEvent) -> None:
        self.release = release
        self.key = _key(release)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Keyed) and self.key == other.key


@functools.lru_cache(maxsize=512)
def _cached_pld(keyed: _Keyed) -> Any:
    """PLD of one release (``None`` if free); cached, as PLDs are immutable."""
    return keyed.release.pld(_PLD_INTERVAL)


@functools.lru_cache(maxsize=512)
def _cached_rdp(keyed: _Keyed) -> tuple[float, ...]:
    curve = keyed.release.rdp(RDP_ORDERS)
    return tuple(float(v) for v in curve)


# -- the three methods -------------------------------------------------------------------


def _common_accounting(releases: Sequence[ReleaseEvent]) -> set[Accounting]:
    common: set[Accounting] = set(_METHODS)
    for release in releases:
        common &= release.accounting
    return common


def _pick_method(
    releases: Sequence[ReleaseEvent], layout: _Layout, forced: Accounting | None = None
) -> Accounting:
    """The method for ``releases``: ``forced`` if given and usable, else the tightest usable."""
    common = _common_accounting(releases)
    pld_ok = "pld" in common and _num_combinations(layout) <= _MAX_COMBINATIONS
    if forced is not None:
        if forced not in _METHODS:
            raise ParameterError("method", "None, 'gdp', 'pld' or 'rdp'", forced)
        if forced not in common or (forced == "pld" and not pld_ok):
            raise LedgerError(
                f"method {forced!r} is not usable for these releases (every release supports "
                f"{sorted(common)}; PLD needs at most {_MAX_COMBINATIONS} worst-case combinations)"
            )
        return forced
    if "gdp" in common:
        return "gdp"
    if pld_ok:
        return "pld"
    if "rdp" in common:
        return "rdp"
    raise LedgerError(
        "the releases share no accounting method the ledger can use (common to all: "
        f"{sorted(common)}; PLD limited to {_MAX_COMBINATIONS} worst-case combinations)"
    )


def _mu_squared(release: ReleaseEvent) -> float:
    mu = release.gdp_mu()
    if mu is None:
        raise LedgerError(f"release {release.name!r} declares 'gdp' but has no exact mu")
    return mu**2


def _gdp_choice(layout: _Layout, fixed: PartitionKey | None) -> tuple[float, Group]:
    """Worst μ² and the releases achieving it (greedy per scheme, exact for GDP)."""
    total = 0.0
    chosen: Group = list(layout.everywhere)
    for release in layout.everywhere:
        total += _mu_squared(release)
    for scheme, labels in layout.schemes.items():
        if fixed is not None and fixed.scheme == scheme:
            candidates = [labels.get(fixed.label, [])]
        else:
            candidates = list(labels.values())
        best_total, best_group = total, candidates[0] if candidates else []
        first = True
        for group in candidates:
            running = total
            for release in group:
                running += _mu_squared(release)
            if first or running > best_total:
                best_total, best_group, first = running, group, False
        total = best_total
        chosen.extend(best_group)
    return total, chosen


def _gdp_mu(layout: _Layout) -> float:
    return math.sqrt(_gdp_choice(layout, None)[0])


def _fold(composed: Any, releases: Iterable[ReleaseEvent]) -> Any:
    for release in releases:
        pld = _cached_pld(_Keyed(release))
        if pld is None:
            continue
        composed = pld if composed is None else composed.compose(pld)
    return composed


def _pld_profiles(layout: _Layout) -> list[Any]:
    """Composed PLD (``None`` if free) of every distinct worst-case combination."""
    partials = [_fold(None, layout.everywhere)]
    for labels in layout.schemes.values():
        groups = _distinct(labels.values())
        partials = [_fold(partial, group) for partial in partials for group in groups]
    return partials


def _pld_epsilon(pld: Any, delta: float) -> float:
    if pld is None:
        return 0.0
    return max(0.0, float(pld.get_epsilon_for_delta(delta)))


def _curve(release: ReleaseEvent) -> npt.NDArray[np.float64]:
    return np.asarray(_cached_rdp(_Keyed(release)), dtype=np.float64)


def _rdp_total(layout: _Layout) -> npt.NDArray[np.float64]:
    total = np.zeros(len(RDP_ORDERS), dtype=np.float64)
    for release in layout.everywhere:
        total = total + _curve(release)
    for labels in layout.schemes.values():
        worst: npt.NDArray[np.float64] | None = None
        for group in _distinct(labels.values()):
            summed = np.zeros_like(total)
            for release in group:
                summed = summed + _curve(release)
            worst = summed if worst is None else np.maximum(worst, summed)
        if worst is not None:
            total = total + worst
    return total


def _epsilon(
    releases: Sequence[ReleaseEvent], delta: float, forced: Accounting | None = None
) -> tuple[float, float | None, Accounting]:
    layout = _layout(releases)
    method = _pick_method(releases, layout, forced)
    if method == "gdp":
        mu = _gdp_mu(layout)
        return gdp_epsilon(mu, delta), mu, "gdp"
    if method == "pld":
        worst = max(_pld_epsilon(pld, delta) for pld in _pld_profiles(layout))
        return worst, None, "pld"
    return rdp_epsilon(_rdp_total(layout), delta), None, "rdp"


def _within_budget(releases: Sequence[ReleaseEvent], epsilon: float, delta: float) -> bool:
    """Whether the releases are (ε, δ)-DP, tested as δ(ε) <= δ (no ε solver rounding)."""
    layout = _layout(releases)
    method = _pick_method(releases, layout)
    if method == "gdp":
        return gdp_delta(_gdp_mu(layout), epsilon) <= delta
    if method == "pld":
        return all(
            pld is None or float(pld.get_delta_for_epsilon(epsilon)) <= delta
            for pld in _pld_profiles(layout)
        )
    return rdp_delta(_rdp_total(layout), epsilon) <= delta


def _worst_combination(
    releases: Sequence[ReleaseEvent], delta: float, fixed: PartitionKey | None
) -> Group:
    """The releases one worst-case record sees (``fixed`` pins one scheme's label)."""
    layout = _layout(releases)
    method = _pick_method(releases, layout)
    if method == "gdp":
        return _gdp_choice(layout, fixed)[1]
    per_scheme: list[list[Group]] = []
    for scheme, labels in layout.schemes.items():
        if fixed is not None and fixed.scheme == scheme:
            per_scheme.append([labels.get(fixed.label, [])])
        else:
            per_scheme.append(_distinct(labels.values()))
    count = math.prod(len(groups) for groups in per_scheme)
    if count > _MAX_COMBINATIONS:
        raise LedgerError(
            f"{count} worst-case combinations of partitions are too many to search for the "
            f"export (at most {_MAX_COMBINATIONS}); pass the partition to export"
        )
    best: Group = list(layout.everywhere)
    best_eps = -1.0
    for combination in itertools.product(*per_scheme):
        candidate = [*layout.everywhere, *itertools.chain.from_iterable(combination)]
        eps = _epsilon(candidate, delta, method)[0]
        if eps > best_eps:
            best, best_eps = candidate, eps
    return best


# -- JSON ---------------------------------------------------------------------------------


def _release_from_json(item: object, version: int) -> ReleaseEvent:
    if version == 1:
        if isinstance(item, dict) and isinstance(item.get("partition"), dict):
            raise LedgerError("a version-1 ledger has no partition schemes")
        return release_from_dict(item, tags=_V1_TAGS)
    return release_from_dict(item)


# -- the ledger ---------------------------------------------------------------------------


class PrivacyLedger:
    """An append-only record of privacy releases with an optional (ε, δ) budget.

    Args:
        budget_epsilon: Declared ε budget (finite, > 0) or ``None``.
        budget_delta: δ at which the budget is stated (in (0, 1)) or ``None``.
            Give both or neither.

    All releases in one ledger must share one :class:`Adjacency`: guarantees
    under different relations do not compose into one statement.

    Raises:
        ParameterError: Only one of the two budget parameters given, or a value
            outside its domain.
    """

    def __init__(
        self, *, budget_epsilon: float | None = None, budget_delta: float | None = None
    ) -> None:
        if (budget_epsilon is None) != (budget_delta is None):
            raise ParameterError(
                "budget_epsilon",
                "given together with budget_delta (both or neither)",
                budget_epsilon,
            )
        self._budget_epsilon = (
            None
            if budget_epsilon is None
            else check_finite_positive("budget_epsilon", budget_epsilon)
        )
        self._budget_delta = (
            None if budget_delta is None else check_delta(budget_delta, "budget_delta")
        )
        self._releases: list[ReleaseEvent] = []

    def __repr__(self) -> str:
        return (
            f"PrivacyLedger(budget_epsilon={self._budget_epsilon!r}, "
            f"budget_delta={self._budget_delta!r}, releases={len(self._releases)})"
        )

    @property
    def budget_epsilon(self) -> float | None:
        """The declared ε budget, or ``None``."""
        return self._budget_epsilon

    @property
    def budget_delta(self) -> float | None:
        """The δ of the declared budget, or ``None``."""
        return self._budget_delta

    @property
    def releases(self) -> tuple[ReleaseEvent, ...]:
        """The recorded releases, in order."""
        return tuple(self._releases)

    @property
    def adjacency(self) -> Adjacency | None:
        """The ledger's adjacency (that of its first release), ``None`` when empty."""
        return self._releases[0].adjacency if self._releases else None

    def _check_candidates(self, new: Sequence[object]) -> list[ReleaseEvent]:
        checked: list[ReleaseEvent] = []
        for index, release in enumerate(new):
            if not (isinstance(release, ReleaseEvent) and is_registered(release)):
                raise ParameterTypeError(
                    f"releases[{index}]",
                    "a release event of a registered kind (e.g. a GaussianRelease)",
                    release,
                )
            checked.append(release)
        adjacency = self.adjacency
        for release in checked:
            adjacency = adjacency or release.adjacency
            if release.adjacency is not adjacency:
                raise LedgerError(
                    f"release {release.name!r} uses adjacency {release.adjacency.value!r} but "
                    f"the ledger uses {adjacency.value!r}"
                )
        candidate = [*self._releases, *checked]
        _pick_method(candidate, _layout(candidate))
        epsilon, delta = self._budget_epsilon, self._budget_delta
        if (
            epsilon is not None
            and delta is not None
            and not _within_budget(candidate, epsilon, delta)
        ):
            spent, _, _ = _epsilon(candidate, delta)
            raise BudgetExceededError(
                f"recording would bring epsilon to {spent:.6g} at delta="
                f"{delta:.3g}, over the budget {epsilon:.6g}"
            )
        return checked

    def record(self, release: ReleaseEvent) -> None:
        """Record one release, after validating it and checking the budget.

        Raises:
            ParameterTypeError: ``release`` is not an event of a registered kind.
            LedgerError: Its adjacency differs from the ledger's, or it shares no
                accounting method with the recorded releases.
            BudgetExceededError: The total would exceed the budget; nothing is
                recorded.
        """
        self.record_all([release])

    def record_all(self, releases: Iterable[ReleaseEvent]) -> None:
        """Record several releases atomically: all of them, or none on error."""
        checked = self._check_candidates(list(releases))
        self._releases.extend(checked)

    @property
    def mu(self) -> float:
        """Exact μ-GDP of the worst-case record over all releases.

        Raises:
            LedgerError: Some release is not exactly GDP (e.g. a subsampled one).
        """
        if "gdp" not in _common_accounting(self._releases):
            raise LedgerError("mu is defined only when every release is exactly GDP")
        return _gdp_mu(_layout(self._releases))

    def method(self) -> Accounting:
        """The accounting method the ledger uses now (see the module notes)."""
        return _pick_method(self._releases, _layout(self._releases))

    def epsilon(self, delta: float, *, method: Accounting | None = None) -> float:
        """ε at ``delta`` for the worst-case record (conservative; see the module notes).

        Args:
            delta: In (0, 1).
            method: Force ``"gdp"``, ``"pld"`` or ``"rdp"`` (every release must
                support it); default the tightest available.

        Raises:
            LedgerError: ``method`` is not usable for the recorded releases.
        """
        dlt = check_delta(delta)
        return _epsilon(self._releases, dlt, method)[0]

    def guarantee(
        self, delta: float | None = None, *, method: Accounting | None = None
    ) -> LedgerGuarantee:
        """Summarise the guarantee at ``delta`` (default: the budget's δ).

        Args:
            delta: In (0, 1); default the budget's δ.
            method: See :meth:`epsilon`.

        Raises:
            ParameterError: No ``delta`` given and no budget declared.
        """
        if delta is None:
            if self._budget_delta is None:
                raise ParameterError("delta", "a float in (0, 1) when no budget is set", delta)
            delta = self._budget_delta
        dlt = check_delta(delta)
        eps, mu, used = _epsilon(self._releases, dlt, method)
        return LedgerGuarantee(
            epsilon=eps,
            delta=dlt,
            mu=mu,
            method=used,
            adjacency=self.adjacency,
            num_releases=len(self._releases),
        )

    # -- dp-accounting export -------------------------------------------------------------

    def _exported(self, partition: Partition) -> Group:
        fixed = partition_key(check_partition(partition))
        delta = self._budget_delta or _DEFAULT_EXPORT_DELTA
        return _worst_combination(self._releases, delta, fixed)

    def accountant_relation(self, partition: Partition = None) -> AccountantRelation:
        """The neighbouring relation an accountant must use for the default export.

        ``"replace-one"`` when one of the exported releases needs it (a
        subsampled release under REPLACE_ONE), else ``"add-or-remove-one"``.
        Construct the dp-accounting accountant with
        ``NeighboringRelation.REPLACE_ONE`` or ``ADD_OR_REMOVE_ONE`` accordingly.
        """
        return _relation_of(self._exported(partition))

    def to_dp_accounting_event(
        self,
        partition: Partition = None,
        *,
        relation: AccountantRelation | None = None,
        accountant: Accountant | None = None,
    ) -> Any:
        """Export the releases affecting one record as a ``ComposedDpEvent``.

        dp-accounting events cannot express parallel composition, so this
        exports what one record sees: the releases on ``None`` and, for each
        scheme, those of one label -- the label of ``partition`` in its scheme
        if given, the worst combination (largest ε at the budget δ, or at 1e-5
        without a budget) otherwise.

        Args:
            partition: A label to pin (its scheme's other labels are left out),
                or ``None`` for the worst combination.
            relation: The neighbouring relation of the accountant that will
                consume the event; default :meth:`accountant_relation`.
                Gaussian releases then export as ``σ/Δ`` with Δ already
                expressed for the adjacency, under ``"add-or-remove-one"``.
            accountant: ``"pld"``, ``"rdp"`` or ``None`` (unknown); a release
                that cannot be exported correctly for it raises.

        Raises:
            ParameterError: Unknown ``relation``/``accountant``, bad ``partition``.
            LedgerError: A release cannot be expressed correctly for
                ``relation`` and ``accountant`` (e.g. ``"replace-one"`` with
                Gaussian releases for anything but dp-accounting's PLD
                accountant, or a replace-one subsampled release for RDP).
        """
        import dp_accounting

        check_partition(partition)
        wanted = None if relation is None else check_relation(relation)
        consumer = check_accountant(accountant)
        chosen = self._exported(partition)
        used = wanted or _relation_of(chosen)
        events = []
        for release in chosen:
            try:
                events.append(release.to_dp_accounting_event(relation=used, accountant=consumer))
            except LedgerError as exc:
                raise LedgerError(
                    f"cannot export the ledger for a {used!r} accountant: {exc}"
                ) from exc
        return dp_accounting.ComposedDpEvent(events=events)

    # -- JSON -----------------------------------------------------------------------------

    def to_json(self) -> str:
        """Serialise to JSON; :meth:`from_json` restores an identical ledger."""
        return json.dumps(
            {
                "format": _FORMAT,
                "version": _VERSION,
                "budget_epsilon": self._budget_epsilon,
                "budget_delta": self._budget_delta,
                "releases": [r.to_dict() for r in self._releases],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> PrivacyLedger:
        """Rebuild a ledger from :meth:`to_json` output, re-validating everything.

        Reads format versions 1 (bare partition labels, which land in the
        default scheme; Gaussian and subsampled-Gaussian releases only) and 2.
        The annotations a run's ``ledger.json`` adds (:data:`ANNOTATION_KEYS`:
        what its numbers mean, its provenance) are read past: they never
        change the accounting, and :meth:`to_json` does not restore them.

        Raises:
            LedgerError: Malformed JSON, unknown format/version, an invalid
                release, mixed adjacencies, or releases beyond the budget.
        """
        if not isinstance(text, str):
            raise ParameterTypeError("text", "a str", text)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LedgerError(f"ledger JSON does not parse: {exc.msg}") from exc
        except (ValueError, RecursionError):  # a number past the digit limit, or too deep
            raise LedgerError("ledger JSON does not parse: Python cannot hold it") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise LedgerError("not a privfed privacy ledger")
        version = data.get("version")
        if isinstance(version, bool) or version not in (1, _VERSION):
            raise LedgerError(f"unsupported ledger version {version!r}")
        required = {"format", "version", "budget_epsilon", "budget_delta", "releases"}
        if not required <= set(data) or not set(data) <= required | set(ANNOTATION_KEYS):
            raise LedgerError("ledger JSON has missing or unknown fields")
        raw = data["releases"]
        if not isinstance(raw, list):
            raise LedgerError("'releases' must be a list")
        try:
            ledger = cls(budget_epsilon=data["budget_epsilon"], budget_delta=data["budget_delta"])
            releases = [_release_from_json(item, int(version)) for item in raw]
            ledger.record_all(releases)
        except (BudgetExceededError, ParameterError, ParameterTypeError) as exc:
            raise LedgerError(f"invalid ledger: {exc}") from exc
        return ledger


def _relation_of(releases: Sequence[ReleaseEvent]) -> AccountantRelation:
    if any(r.accountant_relation == "replace-one" for r in releases):
        return "replace-one"
    return "add-or-remove-one"
