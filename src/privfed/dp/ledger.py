"""Audited privacy accounting: validated release events and a ledger.

Every noisy release is recorded as a small frozen value:

* :class:`GaussianRelease` -- one Gaussian mechanism ``q(D) + N(0, σ² I)``
  with L2 sensitivity Δ under the ledger's adjacency; exactly ``Δ/σ``-GDP.
* :class:`SubsampledGaussianRelease` -- DP-SGD style training: ``steps``
  Poisson-subsampled Gaussian steps.

Records live in *partitions*: a partition label (an ``int`` or ``str``, e.g. a
class id) names a set of records disjoint from every other label's, and
``None`` names the whole dataset.  One record belongs to exactly one labelled
partition and to ``None``, so the worst record sees the releases on ``None``
composed with those of one labelled partition.  Releases on the same partition
compose sequentially, disjoint partitions in parallel (the worst one counts).

How the ledger computes its guarantee:

* All releases Gaussian: exact μ-GDP, ``μ² = Σ_{None} μ_i² + max_p Σ_p μ_i²``,
  then ε(δ) from the exact GDP curve (conservative rounding).
* Any subsampled release present: for every labelled partition (or for
  ``None`` alone when there is none) the privacy-loss distributions of all its
  releases and those on ``None`` are composed with dp-accounting's PLD
  implementation (pessimistic discretisation, interval 1e-4), ε(δ) is read off,
  and the maximum over partitions is reported.  Gaussian releases enter as
  ``noise_multiplier = σ/Δ`` with Δ already expressed for the adjacency, under
  ADD_OR_REMOVE_ONE (dp-accounting's REPLACE_ONE handling is not used for them).

Events are validated when built (dp-accounting does not validate), and
:meth:`PrivacyLedger.record` checks the budget before changing anything.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from privfed.dp._validation import (
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    check_int,
    to_float,
)
from privfed.dp.calibration import gdp_delta, gdp_epsilon
from privfed.dp.noise import DISCRETE_GAUSSIAN_SAMPLER
from privfed.dp.sensitivity import Adjacency
from privfed.errors import BudgetExceededError, LedgerError, ParameterError, ParameterTypeError

if TYPE_CHECKING:  # pragma: no cover
    from privfed.dp.planning import LatentReleasePlan

__all__ = [
    "AccountantRelation",
    "GaussianRelease",
    "LedgerGuarantee",
    "Partition",
    "PrivacyLedger",
    "Release",
    "SubsampledGaussianRelease",
]

#: A partition label: an int or str naming disjoint records; ``None`` = all records.
Partition = int | str | None

#: The neighbouring relation of a dp-accounting accountant that consumes exported events.
AccountantRelation = Literal["add-or-remove-one", "replace-one"]

_FORMAT = "privfed.dp.ledger"
_VERSION = 1
_PLD_INTERVAL = 1e-4


def _relation_factor(relation: object) -> float:
    """Multiplier scale for an accountant relation (dp-accounting replace shifts by 2)."""
    if relation == "add-or-remove-one":
        return 1.0
    if relation == "replace-one":
        return 2.0
    raise ParameterError("relation", "'add-or-remove-one' or 'replace-one'", relation)


def _check_name(value: object) -> str:
    if not isinstance(value, str):
        raise ParameterTypeError("name", "a non-empty str", value)
    if not value:
        raise ParameterError("name", "a non-empty str", value)
    return value


def _check_partition(value: object) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterTypeError("partition", "an int, a str or None", value)


def _check_sampler(value: object) -> str:
    if not isinstance(value, str):
        raise ParameterTypeError("sampler", "a non-empty str", value)
    if not value:
        raise ParameterError("sampler", "a non-empty str", value)
    return value


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ParameterTypeError(name, "a bool", value)


def _check_adjacency(value: object) -> None:
    if not isinstance(value, Adjacency):
        raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", value)


@dataclass(frozen=True)
class GaussianRelease:
    """One Gaussian mechanism release, validated at construction.

    Attributes:
        name: What was released (e.g. ``"latent-statistics"``); non-empty.
        partition: The records it reads: an int/str label of a disjoint
            partition (e.g. a class id) or ``None`` for the whole dataset.
        l2_sensitivity: Δ of the released query under ``adjacency``; >= 0.
        noise_std: σ of the isotropic noise, same units as Δ; > 0.
        adjacency: The neighbouring relation Δ was computed for.
        sampler: Name of the noise sampler (e.g.
            :data:`privfed.dp.noise.GAUSSIAN_SAMPLER`).  The discrete Gaussian
            sampler is refused: its guarantee is not the continuous one.
        seeded: Whether the noise came from an explicit, reproducible seed.
        dimension: Number of noised coordinates, if known (>= 1).

    The release is exactly ``mu = Δ/σ``-GDP under ``adjacency``.  A release
    whose coordinates carry different noise stds (such as a latent-statistic
    plan) is recorded in whitened form: ``noise_std = 1`` and
    ``l2_sensitivity`` = its exact joint μ.
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
        _check_name(self.name)
        _check_partition(self.partition)
        check_finite_nonnegative("l2_sensitivity", self.l2_sensitivity)
        check_finite_positive("noise_std", self.noise_std)
        _check_adjacency(self.adjacency)
        sampler = _check_sampler(self.sampler)
        if sampler == DISCRETE_GAUSSIAN_SAMPLER:
            raise ParameterError(
                "sampler",
                "a continuous or rounded Gaussian sampler",
                sampler,
                detail="discrete-Gaussian releases are not accounted as continuous Gaussians",
            )
        _check_bool("seeded", self.seeded)
        if self.dimension is not None:
            check_int("dimension", self.dimension, minimum=1)

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

    def to_dp_accounting_event(self, *, relation: AccountantRelation = "add-or-remove-one") -> Any:
        """Return a ``dp_accounting.GaussianDpEvent`` (``NoOpDpEvent`` when Δ = 0).

        Args:
            relation: The neighbouring relation of the dp-accounting accountant
                that will consume the event.  ``"add-or-remove-one"``
                (recommended): the multiplier is ``σ/Δ`` with Δ already
                expressed for this release's adjacency.  ``"replace-one"``:
                dp-accounting then shifts by twice the unit sensitivity, so the
                multiplier is ``2σ/Δ`` (same privacy loss).
        """
        import dp_accounting

        factor = _relation_factor(relation)
        if self.l2_sensitivity == 0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.GaussianDpEvent(noise_multiplier=factor * self.noise_multiplier)


@dataclass(frozen=True)
class SubsampledGaussianRelease:
    """A DP-SGD style release: ``steps`` Poisson-subsampled Gaussian steps.

    Attributes:
        name: What was trained/released; non-empty.
        partition: See :class:`GaussianRelease`.
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
    replace model puts the two neighbouring contributions at ``±C``).
    """

    name: str
    partition: Partition
    noise_multiplier: float
    sampling_rate: float
    steps: int
    adjacency: Adjacency
    sampler: str
    seeded: bool

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_partition(self.partition)
        check_finite_positive("noise_multiplier", self.noise_multiplier)
        rate = to_float("sampling_rate", self.sampling_rate)
        if not (0.0 < rate <= 1.0):
            raise ParameterError("sampling_rate", "a float in (0, 1]", self.sampling_rate)
        check_int("steps", self.steps, minimum=1)
        _check_adjacency(self.adjacency)
        _check_sampler(self.sampler)
        _check_bool("seeded", self.seeded)

    def to_dp_accounting_event(self, *, relation: AccountantRelation | None = None) -> Any:
        """Return ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ/C)), steps)``.

        Args:
            relation: The neighbouring relation of the consuming accountant;
                ``None`` (default) picks the one matching :attr:`adjacency`.
                dp-accounting models a replaced example as gradient sums at
                ``±C``, i.e. a change of up to 2C, which is this release's
                replace-one meaning, so the multiplier is ``σ/C`` either way.

        Raises:
            LedgerError: ``relation`` differs from the release's adjacency
                (a subsampled release has no exact translation across them).
        """
        import dp_accounting

        wanted: AccountantRelation = (
            "replace-one" if self.adjacency is Adjacency.REPLACE_ONE else "add-or-remove-one"
        )
        if relation is None:
            relation = wanted
        _relation_factor(relation)
        if relation != wanted:
            raise LedgerError(
                f"a subsampled release under {self.adjacency.value!r} cannot be exported for "
                f"a {relation!r} accountant"
            )
        step = dp_accounting.PoissonSampledDpEvent(
            sampling_probability=float(self.sampling_rate),
            event=dp_accounting.GaussianDpEvent(noise_multiplier=float(self.noise_multiplier)),
        )
        return dp_accounting.SelfComposedDpEvent(event=step, count=int(self.steps))


#: Any event a ledger accepts.
Release = GaussianRelease | SubsampledGaussianRelease


@dataclass(frozen=True)
class LedgerGuarantee:
    """The guarantee a ledger states for the worst-case record.

    Attributes:
        epsilon: ε at ``delta`` (conservative).
        delta: The δ the guarantee is stated at.
        mu: Exact μ-GDP when every release is Gaussian, else ``None``.
        method: ``"gdp"`` (exact μ-GDP) or ``"pld"`` (dp-accounting PLD,
            pessimistic).
        adjacency: The neighbouring relation, ``None`` for an empty ledger.
        num_releases: Number of recorded releases.
    """

    epsilon: float
    delta: float
    mu: float | None
    method: Literal["gdp", "pld"]
    adjacency: Adjacency | None
    num_releases: int

    def __post_init__(self) -> None:
        eps = to_float("epsilon", self.epsilon)
        if eps < 0.0:
            raise ParameterError("epsilon", "a float >= 0 (math.inf allowed)", self.epsilon)
        check_delta(self.delta)
        if self.mu is not None:
            check_finite_nonnegative("mu", self.mu)
        if self.method not in ("gdp", "pld"):
            raise ParameterError("method", "'gdp' or 'pld'", self.method)
        check_int("num_releases", self.num_releases, minimum=0)


def _group_by_partition(
    releases: Sequence[Release],
) -> tuple[list[Release], dict[int | str, list[Release]]]:
    everywhere: list[Release] = []
    groups: dict[int | str, list[Release]] = {}
    for release in releases:
        if release.partition is None:
            everywhere.append(release)
        else:
            groups.setdefault(release.partition, []).append(release)
    return everywhere, groups


def _worst_groups(releases: Sequence[Release]) -> list[list[Release]]:
    """Every set of releases one record can be affected by (one per labelled partition)."""
    everywhere, groups = _group_by_partition(releases)
    if not groups:
        return [everywhere]
    return [everywhere + group for group in groups.values()]


def _gaussian_mu(releases: Sequence[Release]) -> float:
    worst = 0.0
    for group in _worst_groups(releases):
        total = 0.0
        for release in group:
            if isinstance(release, GaussianRelease):  # callers pass Gaussian releases only
                total += release.mu**2
        worst = max(worst, total)
    return math.sqrt(worst)


@functools.lru_cache(maxsize=512)
def _release_pld(release: Release) -> Any:
    """dp-accounting PLD of one release (``None`` if free); cached, as PLDs are immutable."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.privacy_accountant import NeighboringRelation

    if isinstance(release, GaussianRelease):
        if release.l2_sensitivity == 0:
            return None
        # Δ is already expressed for the adjacency: a plain shift by Δ/σ.
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=release.noise_multiplier,
            sensitivity=1.0,
            value_discretization_interval=_PLD_INTERVAL,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
        )
    replace = release.adjacency is Adjacency.REPLACE_ONE
    return pld_lib.from_gaussian_mechanism(
        standard_deviation=float(release.noise_multiplier),
        sensitivity=1.0,
        sampling_prob=float(release.sampling_rate),
        value_discretization_interval=_PLD_INTERVAL,
        neighboring_relation=(
            NeighboringRelation.REPLACE_ONE if replace else NeighboringRelation.ADD_OR_REMOVE_ONE
        ),
    ).self_compose(int(release.steps))


def _composed_pld(group: Sequence[Release]) -> Any:
    """dp-accounting PLD of every release in ``group``, composed (``None`` if free)."""
    composed = None
    for release in group:
        pld = _release_pld(release)
        if pld is None:
            continue
        composed = pld if composed is None else composed.compose(pld)
    return composed


def _pld_epsilon(group: Sequence[Release], delta: float) -> float:
    composed = _composed_pld(group)
    if composed is None:
        return 0.0
    return max(0.0, float(composed.get_epsilon_for_delta(delta)))


def _within_budget(releases: Sequence[Release], epsilon: float, delta: float) -> bool:
    """Whether the releases are (ε, δ)-DP, tested as δ(ε) <= δ (no ε solver rounding)."""
    if all(isinstance(r, GaussianRelease) for r in releases):
        return gdp_delta(_gaussian_mu(releases), epsilon) <= delta
    for group in _worst_groups(releases):
        composed = _composed_pld(group)
        if composed is not None and float(composed.get_delta_for_epsilon(epsilon)) > delta:
            return False
    return True


def _epsilon(releases: Sequence[Release], delta: float) -> tuple[float, float | None, str]:
    if all(isinstance(r, GaussianRelease) for r in releases):
        mu = _gaussian_mu(releases)
        return gdp_epsilon(mu, delta), mu, "gdp"
    worst = max(_pld_epsilon(group, delta) for group in _worst_groups(releases))
    return worst, None, "pld"


# JSON tag of each release type; the fields are the dataclass fields.
_RELEASE_TAGS: dict[str, type[GaussianRelease] | type[SubsampledGaussianRelease]] = {
    "gaussian": GaussianRelease,
    "subsampled-gaussian": SubsampledGaussianRelease,
}


def _release_to_dict(release: Release) -> dict[str, Any]:
    tag = "gaussian" if isinstance(release, GaussianRelease) else "subsampled-gaussian"
    out: dict[str, Any] = {"type": tag}
    for field in dataclasses.fields(release):
        value = getattr(release, field.name)
        out[field.name] = value.value if isinstance(value, Adjacency) else value
    return out


def _release_from_dict(data: object) -> Release:
    if not isinstance(data, dict):
        raise LedgerError("each release must be a JSON object")
    kind = data.get("type")
    cls = _RELEASE_TAGS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise LedgerError(f"unknown release type {kind!r}")
    names = {field.name for field in dataclasses.fields(cls)}
    if set(data) != names | {"type"}:
        raise LedgerError(f"a {kind} release has missing or unknown fields")
    values = {name: data[name] for name in names}
    try:
        values["adjacency"] = Adjacency(values["adjacency"])
        return cls(**values)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, LedgerError):
            raise
        raise LedgerError(f"invalid release in ledger JSON: {exc}") from exc


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
        self._releases: list[Release] = []

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
    def releases(self) -> tuple[Release, ...]:
        """The recorded releases, in order."""
        return tuple(self._releases)

    @property
    def adjacency(self) -> Adjacency | None:
        """The ledger's adjacency (that of its first release), ``None`` when empty."""
        return self._releases[0].adjacency if self._releases else None

    def _check_candidates(self, new: Sequence[Release]) -> None:
        for index, release in enumerate(new):
            if not isinstance(release, GaussianRelease | SubsampledGaussianRelease):
                raise ParameterTypeError(
                    f"releases[{index}]",
                    "a GaussianRelease or SubsampledGaussianRelease",
                    release,
                )
        adjacency = self.adjacency
        for release in new:
            adjacency = adjacency or release.adjacency
            if release.adjacency is not adjacency:
                raise LedgerError(
                    f"release {release.name!r} uses adjacency {release.adjacency.value!r} but "
                    f"the ledger uses {adjacency.value!r}"
                )
        if self._budget_epsilon is not None and self._budget_delta is not None:
            candidate = [*self._releases, *new]
            if not _within_budget(candidate, self._budget_epsilon, self._budget_delta):
                spent, _, _ = _epsilon(candidate, self._budget_delta)
                raise BudgetExceededError(
                    f"recording would bring epsilon to {spent:.6g} at delta="
                    f"{self._budget_delta:.3g}, over the budget {self._budget_epsilon:.6g}"
                )

    def record(self, release: Release) -> None:
        """Record one release, after validating it and checking the budget.

        Raises:
            ParameterTypeError: ``release`` is not a release event.
            LedgerError: Its adjacency differs from the ledger's.
            BudgetExceededError: The total would exceed the budget; nothing is
                recorded.
        """
        self.record_all([release])

    def record_all(self, releases: Iterable[Release]) -> None:
        """Record several releases atomically: all of them, or none on error."""
        new = list(releases)
        self._check_candidates(new)
        self._releases.extend(new)

    def record_latent_release(
        self,
        plan: LatentReleasePlan,
        *,
        partitions: Sequence[int | str],
        sampler: str,
        seeded: bool,
        name: str = "latent-statistics",
    ) -> tuple[GaussianRelease, ...]:
        """Record the per-class releases of a latent-statistic plan, atomically.

        Each class's (sum, second moment[, count]) release is recorded in
        whitened form (``noise_std = 1``, ``l2_sensitivity = plan.mu``), one
        per class partition.  With ``plan.private_labels`` a record may change
        class, so the classes are not disjoint partitions: a single release on
        ``None`` (all records) is recorded instead, whose μ already covers both
        classes a replacement touches.

        Args:
            plan: The plan whose noise was added.
            partitions: The class ids released (at least one, no repeats).
            sampler: Noise sampler name.
            seeded: Whether the noise was seeded.
            name: Release name.

        Returns:
            The releases recorded.
        """
        from privfed.dp.planning import LatentReleasePlan

        if not isinstance(plan, LatentReleasePlan):
            raise ParameterTypeError("plan", "a LatentReleasePlan", plan)
        labels = list(partitions)
        if not labels:
            raise ParameterError("partitions", "a non-empty sequence of class ids", labels)
        if len(set(labels)) != len(labels):
            raise ParameterError("partitions", "class ids without repeats", labels)
        for label in labels:
            if label is None:
                raise ParameterTypeError("partitions", "a sequence of ints or strs", label)
            _check_partition(label)
        d = plan.dim
        dimension = d + d * d + (1 if plan.noise_std_count > 0 else 0)
        targets: list[Partition] = [None] if plan.private_labels else list(labels)
        new = tuple(
            GaussianRelease(
                name=name,
                partition=target,
                l2_sensitivity=plan.mu,
                noise_std=1.0,
                adjacency=plan.adjacency,
                sampler=sampler,
                seeded=seeded,
                dimension=dimension,
            )
            for target in targets
        )
        self.record_all(new)
        return new

    @property
    def mu(self) -> float:
        """Exact μ-GDP of the worst-case record over all Gaussian releases.

        Raises:
            LedgerError: The ledger holds a subsampled release (not exactly GDP).
        """
        if not all(isinstance(r, GaussianRelease) for r in self._releases):
            raise LedgerError("mu is defined only when every release is a GaussianRelease")
        return _gaussian_mu(self._releases)

    def epsilon(self, delta: float) -> float:
        """ε at ``delta`` for the worst-case record (conservative; see the module notes)."""
        dlt = check_delta(delta)
        return _epsilon(self._releases, dlt)[0]

    def guarantee(self, delta: float | None = None) -> LedgerGuarantee:
        """Summarise the guarantee at ``delta`` (default: the budget's δ).

        Raises:
            ParameterError: No ``delta`` given and no budget declared.
        """
        if delta is None:
            if self._budget_delta is None:
                raise ParameterError("delta", "a float in (0, 1) when no budget is set", delta)
            delta = self._budget_delta
        dlt = check_delta(delta)
        eps, mu, method = _epsilon(self._releases, dlt)
        return LedgerGuarantee(
            epsilon=eps,
            delta=dlt,
            mu=mu,
            method="gdp" if method == "gdp" else "pld",
            adjacency=self.adjacency,
            num_releases=len(self._releases),
        )

    def to_dp_accounting_event(
        self, partition: Partition = None, *, relation: AccountantRelation | None = None
    ) -> Any:
        """Export the releases affecting one record as a ``ComposedDpEvent``.

        dp-accounting events cannot express parallel composition, so this
        exports the releases on ``None`` together with those of one labelled
        partition: ``partition`` if given, otherwise the worst one (largest ε
        at the budget δ, or at 1e-5 without a budget).

        Args:
            partition: The labelled partition to export, or ``None`` for the worst.
            relation: The neighbouring relation of the accountant that will
                consume the event.  Default: ``"add-or-remove-one"`` when every
                release is Gaussian or the ledger is ADD_REMOVE (Gaussian
                multipliers ``σ/Δ`` with Δ already expressed for the
                adjacency -- the way to feed dp-accounting, whose RDP accountant
                mishandles REPLACE_ONE); ``"replace-one"`` for a REPLACE_ONE
                ledger holding subsampled releases (use its PLD accountant).

        Raises:
            LedgerError: A subsampled release cannot be expressed for ``relation``.
        """
        import dp_accounting

        _check_partition(partition)
        if relation is None:
            replace_sgd = any(
                isinstance(r, SubsampledGaussianRelease) and r.adjacency is Adjacency.REPLACE_ONE
                for r in self._releases
            )
            relation = "replace-one" if replace_sgd else "add-or-remove-one"
        _relation_factor(relation)
        everywhere, groups = _group_by_partition(self._releases)
        if partition is not None:
            chosen = groups.get(partition, [])
        elif groups:
            delta = self._budget_delta or 1e-5
            chosen = max(
                groups.values(), key=lambda group: _epsilon([*everywhere, *group], delta)[0]
            )
        else:
            chosen = []
        events = [r.to_dp_accounting_event(relation=relation) for r in [*everywhere, *chosen]]
        return dp_accounting.ComposedDpEvent(events=events)

    def to_json(self) -> str:
        """Serialise to JSON; :meth:`from_json` restores an identical ledger."""
        return json.dumps(
            {
                "format": _FORMAT,
                "version": _VERSION,
                "budget_epsilon": self._budget_epsilon,
                "budget_delta": self._budget_delta,
                "releases": [_release_to_dict(r) for r in self._releases],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> PrivacyLedger:
        """Rebuild a ledger from :meth:`to_json` output, re-validating everything.

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
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise LedgerError("not a privfed privacy ledger")
        if data.get("version") != _VERSION:
            raise LedgerError(f"unsupported ledger version {data.get('version')!r}")
        if set(data) != {"format", "version", "budget_epsilon", "budget_delta", "releases"}:
            raise LedgerError("ledger JSON has missing or unknown fields")
        raw = data["releases"]
        if not isinstance(raw, list):
            raise LedgerError("'releases' must be a list")
        try:
            ledger = cls(budget_epsilon=data["budget_epsilon"], budget_delta=data["budget_delta"])
            releases = [_release_from_dict(item) for item in raw]
            ledger.record_all(releases)
        except (BudgetExceededError, ParameterError, ParameterTypeError) as exc:
            raise LedgerError(f"invalid ledger: {exc}") from exc
        return ledger
