"""Release events and the privacy ledger: composition, partition schemes, export, JSON.

The contract every release kind satisfies is tested in ``test_dp_events.py``; the
latent engine's recipe (``record_latent_release``) in
``tests/engines/latent/test_accounting.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from privfed.dp import (
    DEFAULT_SCHEME,
    DISCRETE_GAUSSIAN_SAMPLER,
    GAUSSIAN_SAMPLER,
    Adjacency,
    GaussianRelease,
    PartitionKey,
    PrivacyLedger,
    SubsampledGaussianRelease,
    gaussian_epsilon,
    gdp_epsilon,
    in_scheme,
    partition_key,
)
from privfed.dp import events as events_module
from privfed.dp import ledger as ledger_module
from privfed.dp import registry as registry_module
from privfed.engines.moments.planning import plan_latent_release
from privfed.errors import BudgetExceededError, LedgerError, ParameterError, ParameterTypeError

REPLACE = Adjacency.REPLACE_ONE
ADD_REMOVE = Adjacency.ADD_REMOVE


def gauss(
    partition: int | str | PartitionKey | None, sensitivity: float, std: float, **kw: object
) -> GaussianRelease:
    fields: dict[str, object] = {
        "name": "q",
        "partition": partition,
        "l2_sensitivity": sensitivity,
        "noise_std": std,
        "adjacency": REPLACE,
        "sampler": GAUSSIAN_SAMPLER,
        "seeded": False,
    }
    fields.update(kw)
    return GaussianRelease(**fields)  # type: ignore[arg-type]


def sgd(partition: int | str | PartitionKey | None = 0, **kw: object) -> SubsampledGaussianRelease:
    fields: dict[str, object] = {
        "name": "factory",
        "partition": partition,
        "noise_multiplier": 1.1,
        "sampling_rate": 0.02,
        "steps": 100,
        "adjacency": ADD_REMOVE,
        "sampler": "torch-normal",
        "seeded": True,
    }
    fields.update(kw)
    return SubsampledGaussianRelease(**fields)  # type: ignore[arg-type]


# -- events -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"name": ""}, "name"),
        ({"l2_sensitivity": -1.0}, "l2_sensitivity"),
        ({"l2_sensitivity": math.nan}, "l2_sensitivity"),
        ({"noise_std": 0.0}, "noise_std"),
        ({"noise_std": math.inf}, "noise_std"),
        ({"sampler": ""}, "sampler"),
        ({"sampler": DISCRETE_GAUSSIAN_SAMPLER}, "sampler"),
        ({"dimension": 0}, "dimension"),
    ],
)
def test_gaussian_release_validates(change: dict[str, object], name: str) -> None:
    with pytest.raises(ParameterError) as info:
        gauss(0, 1.0, 1.0, **change)
    assert info.value.parameter == name


@pytest.mark.parametrize(
    "change",
    [{"partition": 1.5}, {"partition": True}, {"seeded": 1}, {"adjacency": "replace-one"}],
)
def test_gaussian_release_type_checks(change: dict[str, object]) -> None:
    with pytest.raises(ParameterTypeError):
        dataclasses.replace(gauss(0, 1.0, 1.0), **change)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"sampling_rate": 0.0}, "sampling_rate"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"steps": 0}, "steps"),
    ],
)
def test_subsampled_release_validates(change: dict[str, object], name: str) -> None:
    with pytest.raises(ParameterError) as info:
        sgd(**change)
    assert info.value.parameter == name


def test_events_are_frozen_and_export() -> None:
    g = gauss(0, 2.0, 4.0)
    assert g.mu == 0.5 and g.noise_multiplier == 2.0
    assert g.to_dp_accounting_event() == dp_accounting.GaussianDpEvent(2.0)
    assert isinstance(gauss(0, 0.0, 1.0).to_dp_accounting_event(), dp_accounting.NoOpDpEvent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.noise_std = 1.0  # type: ignore[misc]


# -- composition ------------------------------------------------------------------


def test_parallel_and_sequential_composition() -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(0, 3.0, 1.0))
    ledger.record(gauss(1, 4.0, 1.0))
    assert ledger.mu == 4.0  # disjoint partitions: the worst one
    ledger.record(gauss(0, 3.0, 1.0))
    assert ledger.mu == pytest.approx(math.sqrt(18))  # same partition: μ² adds
    ledger.record(gauss(None, 1.0, 1.0))
    assert ledger.mu == pytest.approx(math.sqrt(19))  # a whole-dataset release touches every record
    assert ledger.epsilon(1e-5) == gdp_epsilon(ledger.mu, 1e-5)
    g = ledger.guarantee(1e-5)
    assert (g.method, g.mu, g.num_releases, g.adjacency) == ("gdp", ledger.mu, 4, REPLACE)


def test_budget_is_checked_before_recording() -> None:
    ledger = PrivacyLedger(budget_epsilon=1.0, budget_delta=1e-5)
    sigma = 1.0 / (1.0 / 3.730631634815942 / math.sqrt(2)) * 1.0000001  # two fit, a third not
    ledger.record(gauss(0, 1.0, sigma))
    ledger.record(gauss(0, 1.0, sigma))
    before = ledger.to_json()
    with pytest.raises(BudgetExceededError):
        ledger.record(gauss(0, 1.0, sigma))
    assert ledger.to_json() == before
    # Another partition is parallel, so it still fits.
    ledger.record(gauss(1, 1.0, sigma))
    with pytest.raises(BudgetExceededError):
        ledger.record_all([gauss(2, 1.0, sigma), gauss(2, 1.0, sigma), gauss(2, 1.0, sigma)])
    assert len(ledger.releases) == 3
    assert ledger.guarantee().epsilon <= 1.0


def test_mixed_adjacency_is_refused_atomically() -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(0, 1.0, 1.0))
    with pytest.raises(LedgerError):
        ledger.record_all([gauss(1, 1.0, 1.0), gauss(1, 1.0, 1.0, adjacency=ADD_REMOVE)])
    assert len(ledger.releases) == 1
    with pytest.raises(ParameterTypeError):
        ledger.record("release")  # type: ignore[arg-type]


def test_budget_parameters_come_in_pairs() -> None:
    with pytest.raises(ParameterError):
        PrivacyLedger(budget_epsilon=1.0)
    with pytest.raises(ParameterError) as info:
        PrivacyLedger(budget_epsilon=1.0, budget_delta=1.0)
    assert info.value.parameter == "budget_delta"
    with pytest.raises(ParameterError):
        PrivacyLedger().guarantee()


# -- cross-checks against dp-accounting --------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "releases",
    [
        [(0, 1.0, 0.5)],
        [(0, 1.0, 2.0), (0, 2.0, 3.0), (1, 1.0, 1.0)],
        [(None, 1.0, 4.0), (3, 1.0, 1.5), (4, 0.5, 0.7)],
        [(0, 1.0, 10.0)] * 5,
    ],
)
def test_ledger_epsilon_agrees_with_pld(releases: list[tuple[int | None, float, float]]) -> None:
    ledger = PrivacyLedger()
    for partition, sens, std in releases:
        ledger.record(gauss(partition, sens, std))
    accountant = pld_privacy_accountant.PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    accountant.compose(ledger.to_dp_accounting_event())
    for delta in (1e-5, 1e-8):
        pld_eps = accountant.get_epsilon(delta)
        ours = ledger.epsilon(delta)
        # PLD discretises the loss on a 1e-4 grid; ours is exact.  Never below PLD
        # by more than its slack, and close to it.
        assert ours >= pld_eps - 0.01
        assert ours == pytest.approx(pld_eps, rel=0.01, abs=0.01)


@pytest.mark.slow
def test_subsampled_release_matches_dp_accounting() -> None:
    release = sgd()
    ledger = PrivacyLedger()
    ledger.record(release)
    accountant = pld_privacy_accountant.PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    accountant.compose(release.to_dp_accounting_event())
    assert ledger.epsilon(1e-5) == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-9)
    g = ledger.guarantee(1e-5)
    assert g.method == "pld" and g.mu is None
    with pytest.raises(LedgerError):
        _ = ledger.mu


@pytest.mark.slow
def test_subsampled_replace_one_without_sampling_is_a_gaussian_of_sensitivity_2c() -> None:
    ledger = PrivacyLedger()
    ledger.record(sgd(noise_multiplier=2.0, sampling_rate=1.0, steps=1, adjacency=REPLACE))
    exact = gaussian_epsilon(2.0, 1e-5, l2_sensitivity=2.0)
    assert ledger.epsilon(1e-5) == pytest.approx(exact, abs=0.01)
    accountant = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    accountant.compose(ledger.to_dp_accounting_event())
    assert accountant.get_epsilon(1e-5) == pytest.approx(exact, abs=0.01)
    # Composed with a μ = 1 Gaussian release on the same records: μ = √2 in total.
    ledger.record(gauss(0, 1.0, 1.0))
    assert ledger.epsilon(1e-5) == pytest.approx(gdp_epsilon(math.sqrt(2), 1e-5), abs=1e-3)


@pytest.mark.slow
def test_mixed_ledger_composes_per_partition() -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(0, 1.0, 2.0, adjacency=ADD_REMOVE))
    ledger.record(sgd(partition=1))
    ledger.record(gauss(1, 1.0, 2.0, adjacency=ADD_REMOVE))
    only_sgd = PrivacyLedger()
    only_sgd.record(sgd(partition=1))
    # Partition 1 (SGD + Gaussian) is the worst and costs more than SGD alone.
    assert ledger.epsilon(1e-5) > only_sgd.epsilon(1e-5)
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(ledger.to_dp_accounting_event())
    assert ledger.epsilon(1e-5) == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-6)
    assert len(ledger.to_dp_accounting_event(partition=0).events) == 1


# -- serialisation ------------------------------------------------------------------


@pytest.mark.slow
def test_json_round_trip_is_exact() -> None:
    ledger = PrivacyLedger(budget_epsilon=50.0, budget_delta=1e-6)
    ledger.record(gauss(0, 0.1 + 0.2, 1 / 3, adjacency=ADD_REMOVE, dimension=7))
    ledger.record(gauss("class-b", 2.0, math.pi, adjacency=ADD_REMOVE, seeded=True))
    ledger.record(gauss(None, 5e-324, 1e-300, adjacency=ADD_REMOVE))
    ledger.record(sgd(partition="class-b"))
    text = ledger.to_json()
    again = PrivacyLedger.from_json(text)
    assert again.releases == ledger.releases
    assert again.to_json() == text
    assert (again.budget_epsilon, again.budget_delta) == (50.0, 1e-6)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(format="other"),
        lambda d: d.update(version=99),
        lambda d: d.update(extra=1),
        lambda d: d["releases"][0].update(noise_std=-1.0),
        lambda d: d["releases"][0].update(adjacency="sideways"),
        lambda d: d["releases"][0].update(type="laplace"),
        lambda d: d["releases"][0].pop("seeded"),
        lambda d: d.update(releases=[d["releases"][0]] * 400),  # over the budget
    ],
)
def test_from_json_rejects_invalid_ledgers(mutate) -> None:  # type: ignore[no-untyped-def]
    ledger = PrivacyLedger(budget_epsilon=5.0, budget_delta=1e-5)
    ledger.record(gauss(0, 1.0, 2.0))
    data = json.loads(ledger.to_json())
    mutate(data)
    with pytest.raises(LedgerError):
        PrivacyLedger.from_json(json.dumps(data))


def test_from_json_rejects_garbage() -> None:
    with pytest.raises(LedgerError):
        PrivacyLedger.from_json("{not json")
    with pytest.raises(LedgerError):
        PrivacyLedger.from_json("[]")
    # JSON that Python's parser cannot hold is the same typed error, not a bare one.
    with pytest.raises(LedgerError, match="does not parse"):
        PrivacyLedger.from_json("[" * 100_000)
    with pytest.raises(LedgerError, match="does not parse"):
        PrivacyLedger.from_json('{"version": ' + "1" * 5_000 + "}")


@pytest.mark.slow
def test_export_for_either_accountant_relation() -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(0, 2.0, 1.5))
    ledger.record(gauss(0, 1.0, 3.0))
    results = []
    for name, relation in [
        ("add-or-remove-one", dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE),
        ("replace-one", dp_accounting.NeighboringRelation.REPLACE_ONE),
    ]:
        accountant = pld_privacy_accountant.PLDAccountant(relation)
        # A replace-one export of Gaussians is right for the PLD accountant only:
        # it must be asked for by name.
        event = ledger.to_dp_accounting_event(relation=name, accountant="pld")  # type: ignore[arg-type]
        accountant.compose(event)
        results.append(accountant.get_epsilon(1e-6))
    assert results[0] == pytest.approx(results[1], rel=1e-6)
    assert ledger.epsilon(1e-6) == pytest.approx(results[0], abs=0.01)
    assert ledger.accountant_relation() == "add-or-remove-one"
    with pytest.raises(ParameterError):
        ledger.to_dp_accounting_event(relation="sideways")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        ledger.to_dp_accounting_event(accountant="moments")  # type: ignore[arg-type]
    for accountant_kind in (None, "rdp"):
        with pytest.raises(LedgerError, match="RDP accountant ignores"):
            ledger.to_dp_accounting_event(relation="replace-one", accountant=accountant_kind)
    replace_sgd = sgd(adjacency=REPLACE)
    with pytest.raises(LedgerError):
        replace_sgd.to_dp_accounting_event(relation="add-or-remove-one")
    with pytest.raises(LedgerError, match="RDP"):
        replace_sgd.to_dp_accounting_event(accountant="rdp")


def test_export_picks_the_worst_partition() -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(None, 1.0, 4.0))
    ledger.record(gauss("a", 1.0, 2.0))
    ledger.record(gauss("b", 1.0, 1.0))
    ledger.record(gauss("b", 1.0, 8.0))
    event = ledger.to_dp_accounting_event()
    multipliers = sorted(e.noise_multiplier for e in event.events)
    assert multipliers == [1.0, 4.0, 8.0]  # None's release plus both of "b"
    only_a = ledger.to_dp_accounting_event(partition="a")
    assert sorted(e.noise_multiplier for e in only_a.events) == [2.0, 4.0]


# -- partition schemes ------------------------------------------------------------------

NR = dp_accounting.NeighboringRelation


def test_partition_keys_are_validated_and_canonical() -> None:
    assert gauss(PartitionKey(DEFAULT_SCHEME, 3), 1.0, 1.0).partition == 3
    assert gauss(PartitionKey("class", 3), 1.0, 1.0).partition == PartitionKey("class", 3)
    assert partition_key(3) == PartitionKey(DEFAULT_SCHEME, 3)
    assert partition_key(None) is None
    assert in_scheme("cell", "0/0") == PartitionKey("cell", "0/0")
    assert in_scheme("cell", None) is None
    assert in_scheme("cell", PartitionKey("cell", 1)) == PartitionKey("cell", 1)
    with pytest.raises(ParameterError):
        in_scheme("cell", PartitionKey("class", 1))
    for bad in [{"scheme": "", "label": 1}, {"scheme": 1, "label": 1}]:
        with pytest.raises((ParameterError, ParameterTypeError)):
            PartitionKey(**bad)  # type: ignore[arg-type]
    for label in [True, 1.5, None]:
        with pytest.raises(ParameterTypeError):
            PartitionKey("class", label)  # type: ignore[arg-type]


def test_schemes_compose_sequentially_and_labels_in_parallel() -> None:
    # μ² = Σ_None μ² + Σ_schemes max_label Σ_label μ², exactly.
    ledger = PrivacyLedger()
    ledger.record(gauss(None, 1.0, 1.0))  # μ² = 1 on every record
    ledger.record(gauss(PartitionKey("class", 0), 3.0, 1.0))  # class: max 9
    ledger.record(gauss(PartitionKey("class", 1), 2.0, 1.0))
    ledger.record(gauss(PartitionKey("class", 1), 2.0, 1.0))  # class 1: 8
    ledger.record(gauss(PartitionKey("cell", "0/0"), 2.0, 1.0))  # cell: max 4
    ledger.record(gauss(PartitionKey("cell", "1/0"), 1.0, 1.0))
    ledger.record(gauss(7, 1.0, 2.0))  # default scheme: 0.25
    assert ledger.mu == pytest.approx(math.sqrt(1 + 9 + 4 + 0.25), rel=1e-15)
    assert ledger.epsilon(1e-5) == gdp_epsilon(ledger.mu, 1e-5)
    event = ledger.to_dp_accounting_event()
    assert sorted(e.noise_multiplier for e in event.events) == [
        pytest.approx(x) for x in (1 / 3, 0.5, 1.0, 2.0)
    ]
    pinned = ledger.to_dp_accounting_event(partition=PartitionKey("class", 1))
    assert sorted(e.noise_multiplier for e in pinned.events) == [0.5, 0.5, 0.5, 1.0, 2.0]


def test_one_scheme_ledgers_keep_their_numbers() -> None:
    # The same ledger with bare labels and with every label in one named scheme:
    # identical numbers, bit for bit (one scheme is the old composition rule).
    releases = [(None, 1.0, 4.0), (0, 1.0, 2.0), (1, 3.0, 5.0), (0, 0.1 + 0.2, 1 / 3)]
    bare, named = PrivacyLedger(), PrivacyLedger()
    for partition, sens, std in releases:
        bare.record(gauss(partition, sens, std))
        schemed = None if partition is None else PartitionKey("class", partition)
        named.record(gauss(schemed, sens, std))
    assert bare.mu == named.mu
    assert bare.epsilon(1e-6) == named.epsilon(1e-6)
    reference = math.sqrt(max((1 / 4) ** 2 + (1 / 2) ** 2 + (0.3 / (1 / 3)) ** 2, 1 / 16 + 0.36))
    assert bare.mu == pytest.approx(reference, rel=1e-15)


@pytest.mark.slow
def test_latent_classes_and_factory_cells_compose_sequentially() -> None:
    # The bug this fixes: latent class ids 0..9 and factory cell labels
    # "class=c/client=k" in one ledger were composed in parallel, although every
    # record is in one class AND one cell.  Declared schemes compose sequentially.
    plan = plan_latent_release(10.0, 1e-5, clip_norm=3.0, dim=8, adjacency=REPLACE)

    def latent(partition: object) -> GaussianRelease:
        return gauss(partition, plan.mu, 1.0, name="latent-statistics")

    def cell(partition: object) -> SubsampledGaussianRelease:
        return sgd(partition, noise_multiplier=1.1, sampling_rate=0.25, steps=4, adjacency=REPLACE)

    labels = [f"class={c}/client={k}" for c in range(10) for k in range(3)]
    parallel = PrivacyLedger()  # the old, wrong reading: every label in one namespace
    parallel.record_all([latent(c) for c in range(10)])
    parallel.record_all([cell(label) for label in labels])
    ledger = PrivacyLedger()
    ledger.record_all([latent(PartitionKey("class", c)) for c in range(10)])
    ledger.record_all([cell(in_scheme("cell", label)) for label in labels])

    # Independent reference: dp-accounting's PLD accountant (replace-one) on one
    # latent Gaussian (sensitivity 2 there, hence multiplier 2/μ) and one factory.
    accountant = pld_privacy_accountant.PLDAccountant(NR.REPLACE_ONE)
    accountant.compose(dp_accounting.GaussianDpEvent(2.0 / plan.mu))
    accountant.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.25, dp_accounting.GaussianDpEvent(1.1)), 4
        )
    )
    reference = accountant.get_epsilon(1e-5)
    only_latent = gdp_epsilon(plan.mu, 1e-5)
    assert parallel.epsilon(1e-5) == pytest.approx(max(only_latent, 10.0), abs=1e-6)
    assert ledger.method() == "pld"
    assert ledger.epsilon(1e-5) == pytest.approx(reference, rel=1e-6)
    assert ledger.epsilon(1e-5) > parallel.epsilon(1e-5) + 1.0
    # Exported: the latent release and one factory, for the replace-one PLD accountant.
    assert ledger.accountant_relation() == "replace-one"
    exported = ledger.to_dp_accounting_event(accountant="pld")
    assert len(exported.events) == 2
    again = pld_privacy_accountant.PLDAccountant(NR.REPLACE_ONE)
    again.compose(exported)
    assert again.get_epsilon(1e-5) == pytest.approx(reference, rel=1e-6)
    # A budget that the parallel reading would accept refuses the sequential truth.
    budgeted = PrivacyLedger(budget_epsilon=10.5, budget_delta=1e-5)
    budgeted.record_all([latent(PartitionKey("class", c)) for c in range(10)])
    before = budgeted.to_json()
    with pytest.raises(BudgetExceededError):
        budgeted.record(cell(in_scheme("cell", labels[0])))
    assert budgeted.to_json() == before


@pytest.mark.slow
def test_exact_gdp_across_schemes_matches_an_independent_sum() -> None:
    mu_latent, mu_cell = 0.8, 1.3
    ledger = PrivacyLedger()
    for c in range(10):
        ledger.record(gauss(PartitionKey("class", c), mu_latent, 1.0))
    for k in range(5):
        ledger.record(gauss(PartitionKey("cell", f"class=0/client={k}"), mu_cell, 1.0))
    mu = math.hypot(mu_latent, mu_cell)
    assert ledger.mu == pytest.approx(mu, rel=1e-15)
    assert ledger.epsilon(1e-5) == pytest.approx(gdp_epsilon(mu, 1e-5), rel=1e-12)
    accountant = pld_privacy_accountant.PLDAccountant(NR.ADD_OR_REMOVE_ONE)
    accountant.compose(ledger.to_dp_accounting_event())
    assert ledger.epsilon(1e-5) == pytest.approx(accountant.get_epsilon(1e-5), abs=1e-4)


# -- JSON versions ----------------------------------------------------------------------


def test_json_round_trip_keeps_schemes() -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(PartitionKey("class", 2), 1.0, 2.0))
    ledger.record(gauss(PartitionKey("cell", "class=2/client=0"), 1.0, 2.0))
    ledger.record(gauss("bare", 1.0, 2.0))
    text = ledger.to_json()
    data = json.loads(text)
    assert data["version"] == 2
    assert [r["partition"] for r in data["releases"]] == [
        {"scheme": "class", "label": 2},
        {"scheme": "cell", "label": "class=2/client=0"},
        "bare",
    ]
    again = PrivacyLedger.from_json(text)
    assert again.releases == ledger.releases and again.to_json() == text
    assert again.mu == ledger.mu


def test_version_1_json_is_read_into_the_default_scheme() -> None:
    ledger = PrivacyLedger(budget_epsilon=50.0, budget_delta=1e-6)
    ledger.record(gauss(0, 1.0, 2.0))
    ledger.record(gauss("class-b", 2.0, 3.0, seeded=True))
    ledger.record(gauss(None, 0.5, 1.0))
    data = json.loads(ledger.to_json())
    data["version"] = 1
    old = PrivacyLedger.from_json(json.dumps(data))
    assert old.releases == ledger.releases
    assert [partition_key(r.partition) for r in old.releases] == [
        PartitionKey(DEFAULT_SCHEME, 0),
        PartitionKey(DEFAULT_SCHEME, "class-b"),
        None,
    ]
    assert old.mu == ledger.mu
    assert json.loads(old.to_json())["version"] == 2
    # Version 1 had no partition objects and only the two original kinds.
    schemed = json.loads(ledger.to_json())
    schemed["version"] = 1
    schemed["releases"][0]["partition"] = {"scheme": "class", "label": 0}
    with pytest.raises(LedgerError):
        PrivacyLedger.from_json(json.dumps(schemed))
    for version in (0, 3, True, "2"):
        data["version"] = version
        with pytest.raises(LedgerError):
            PrivacyLedger.from_json(json.dumps(data))


@pytest.mark.parametrize(
    "partition",
    [{"scheme": "class"}, {"scheme": "class", "label": 1, "x": 0}, {"scheme": "", "label": 1}],
)
def test_from_json_rejects_bad_partition_objects(partition: object) -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(PartitionKey("class", 1), 1.0, 2.0))
    data = json.loads(ledger.to_json())
    data["releases"][0]["partition"] = partition
    with pytest.raises(LedgerError):
        PrivacyLedger.from_json(json.dumps(data))


# -- accounting methods -------------------------------------------------------------------


def test_method_selection_and_forcing() -> None:
    ledger = PrivacyLedger()
    ledger.record(gauss(0, 1.0, 2.0, adjacency=ADD_REMOVE))
    assert ledger.method() == "gdp"
    gdp = ledger.guarantee(1e-5)
    rdp = ledger.guarantee(1e-5, method="rdp")
    pld = ledger.guarantee(1e-5, method="pld")
    assert (gdp.method, rdp.method, pld.method) == ("gdp", "rdp", "pld")
    assert rdp.mu is None and pld.mu is None and gdp.mu == 0.5
    # RDP of a Gaussian agrees with dp-accounting's RDP accountant on the export.
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=NR.ADD_OR_REMOVE_ONE)
    accountant.compose(ledger.to_dp_accounting_event(accountant="rdp"))
    assert rdp.epsilon == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-9)
    assert gdp.epsilon <= pld.epsilon + 1e-4 and gdp.epsilon < rdp.epsilon
    with pytest.raises(ParameterError):
        ledger.epsilon(1e-5, method="moments")  # type: ignore[arg-type]
    ledger.record(sgd(partition=0, steps=3))
    assert ledger.method() == "pld"
    with pytest.raises(LedgerError):
        ledger.epsilon(1e-5, method="gdp")
    replace = PrivacyLedger()
    replace.record(sgd(adjacency=REPLACE, steps=3))
    with pytest.raises(LedgerError):
        replace.epsilon(1e-5, method="rdp")  # no RDP bound for replace-one subsampling


@pytest.mark.slow
def test_subsampled_rdp_matches_dp_accounting() -> None:
    ledger = PrivacyLedger()
    ledger.record(sgd(partition=0, noise_multiplier=1.3, sampling_rate=0.05, steps=20))
    ledger.record(gauss(0, 1.0, 4.0, adjacency=ADD_REMOVE))
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=NR.ADD_OR_REMOVE_ONE)
    accountant.compose(ledger.to_dp_accounting_event(accountant="rdp"))
    assert ledger.epsilon(1e-5, method="rdp") == pytest.approx(
        accountant.get_epsilon(1e-5), rel=1e-9
    )
    assert ledger.epsilon(1e-5) < ledger.epsilon(1e-5, method="rdp")


def test_too_many_combinations_fall_back_to_rdp_or_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger_module, "_MAX_COMBINATIONS", 3)
    ledger = PrivacyLedger()
    for steps in (1, 2):
        ledger.record(sgd(PartitionKey("class", steps), steps=steps, sampling_rate=0.05))
        ledger.record(sgd(PartitionKey("cell", steps), steps=steps, noise_multiplier=1.3))
    assert ledger.method() == "rdp"  # 2 x 2 distinct combinations > 3
    # RDP takes, per scheme, the pointwise worst label: never below any combination.
    full = PrivacyLedger()
    full.record(sgd(PartitionKey("class", 2), steps=2, sampling_rate=0.05))
    full.record(sgd(PartitionKey("cell", 2), steps=2, noise_multiplier=1.3))
    assert ledger.epsilon(1e-5) == pytest.approx(full.epsilon(1e-5, method="rdp"), rel=1e-12)
    # Replace-one subsampled releases have no RDP: too many combinations is refused.
    replace = PrivacyLedger()
    for steps in (1, 2):
        replace.record(sgd(PartitionKey("class", steps), steps=steps, adjacency=REPLACE))
    replace.record(sgd(PartitionKey("cell", 1), steps=1, adjacency=REPLACE))
    before = replace.to_json()
    with pytest.raises(LedgerError, match="no accounting method"):
        replace.record(sgd(PartitionKey("cell", 2), steps=2, adjacency=REPLACE))
    assert replace.to_json() == before and len(replace.releases) == 3


@dataclasses.dataclass(frozen=True)
class _RdpOnlyGaussian(GaussianRelease):
    """A Gaussian that claims RDP accounting only (stands in for distributed noise)."""

    @property
    def accounting(self) -> frozenset[events_module.Accounting]:
        return frozenset({"rdp"})

    def gdp_mu(self) -> None:  # type: ignore[override]
        return None


def test_an_rdp_only_kind_composes_by_rdp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))
    kind = registry_module.register_release("rdp-only-gaussian")(_RdpOnlyGaussian)
    only = kind(
        name="secagg-noise",
        partition=None,
        l2_sensitivity=1.0,
        noise_std=2.0,
        adjacency=ADD_REMOVE,
        sampler=GAUSSIAN_SAMPLER,
        seeded=False,
    )
    ledger = PrivacyLedger()
    ledger.record(gauss(0, 1.0, 2.0, adjacency=ADD_REMOVE))
    ledger.record(only)
    assert ledger.method() == "rdp"
    with pytest.raises(LedgerError):
        _ = ledger.mu
    both = PrivacyLedger()
    both.record_all(
        [gauss(0, 1.0, 2.0, adjacency=ADD_REMOVE), gauss(0, 1.0, 2.0, adjacency=ADD_REMOVE)]
    )
    assert ledger.epsilon(1e-5) == pytest.approx(both.epsilon(1e-5, method="rdp"), rel=1e-12)
    restored = PrivacyLedger.from_json(ledger.to_json())
    assert restored.releases == ledger.releases
    # A replace-one subsampled release (PLD only) shares no method with it.
    mixed = PrivacyLedger()
    mixed.record(sgd(adjacency=REPLACE, steps=2))
    before = mixed.to_json()
    with pytest.raises(LedgerError, match="no accounting method"):
        mixed.record(dataclasses.replace(only, adjacency=REPLACE))
    assert mixed.to_json() == before


def test_unregistered_kinds_are_refused() -> None:
    ledger = PrivacyLedger()
    stray = _RdpOnlyGaussian(
        name="x",
        partition=None,
        l2_sensitivity=1.0,
        noise_std=1.0,
        adjacency=REPLACE,
        sampler=GAUSSIAN_SAMPLER,
        seeded=False,
    )
    with pytest.raises(ParameterTypeError):
        ledger.record(stray)
    assert ledger.releases == ()


# -- the export bug ---------------------------------------------------------------------


def test_replace_one_gaussian_export_cannot_fool_the_rdp_accountant() -> None:
    # The old export for relation="replace-one" was GaussianDpEvent(2σ/Δ): right for
    # dp-accounting's PLD accountant, but its RDP accountant ignores the doubled
    # replace-one sensitivity, so it under-reported ε.  That export is now refused
    # unless the PLD accountant is named, and the default export is right for both.
    ledger = PrivacyLedger()
    ledger.record(gauss(0, 2.0, 3.0))
    claim = ledger.epsilon(1e-5)
    naive = rdp_privacy_accountant.RdpAccountant(neighboring_relation=NR.REPLACE_ONE)
    naive.compose(dp_accounting.GaussianDpEvent(2 * 3.0 / 2.0))
    assert naive.get_epsilon(1e-5) < 0.6 * claim  # what the old export let happen
    with pytest.raises(LedgerError):
        ledger.to_dp_accounting_event(relation="replace-one", accountant="rdp")
    with pytest.raises(LedgerError):
        ledger.releases[0].to_dp_accounting_event(relation="replace-one")
    assert ledger.accountant_relation() == "add-or-remove-one"
    for accountant in (
        rdp_privacy_accountant.RdpAccountant(neighboring_relation=NR.ADD_OR_REMOVE_ONE),
        pld_privacy_accountant.PLDAccountant(NR.ADD_OR_REMOVE_ONE),
    ):
        accountant.compose(ledger.to_dp_accounting_event())
        assert accountant.get_epsilon(1e-5) >= claim - 1e-4
