"""Release events and the privacy ledger."""

from __future__ import annotations

import dataclasses
import json
import math

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant

from privfed.dp import (
    DISCRETE_GAUSSIAN_SAMPLER,
    GAUSSIAN_SAMPLER,
    Adjacency,
    GaussianRelease,
    PrivacyLedger,
    SubsampledGaussianRelease,
    gaussian_epsilon,
    gdp_epsilon,
    plan_latent_release,
)
from privfed.errors import BudgetExceededError, LedgerError, ParameterError, ParameterTypeError

REPLACE = Adjacency.REPLACE_ONE
ADD_REMOVE = Adjacency.ADD_REMOVE


def gauss(
    partition: int | str | None, sensitivity: float, std: float, **kw: object
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


def sgd(partition: int | str | None = 0, **kw: object) -> SubsampledGaussianRelease:
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


def test_latent_plan_recording() -> None:
    plan = plan_latent_release(10.0, 1e-5, clip_norm=3.0, dim=8, adjacency=REPLACE)
    ledger = PrivacyLedger(budget_epsilon=10.0, budget_delta=1e-5)
    recorded = ledger.record_latent_release(
        plan, partitions=range(10), sampler=GAUSSIAN_SAMPLER, seeded=False
    )
    assert len(recorded) == 10 and ledger.mu == plan.mu
    assert ledger.guarantee().epsilon == pytest.approx(10.0, rel=1e-9)
    with pytest.raises(BudgetExceededError):
        ledger.record_latent_release(plan, partitions=[0], sampler=GAUSSIAN_SAMPLER, seeded=False)
    private = plan_latent_release(
        1.0, 1e-5, clip_norm=3.0, dim=8, adjacency=REPLACE, private_labels=True
    )
    other = PrivacyLedger()
    (release,) = other.record_latent_release(
        private, partitions=[0, 1, 2], sampler=GAUSSIAN_SAMPLER, seeded=True
    )
    assert release.partition is None and release.seeded and release.dimension == 8 + 64 + 1
    with pytest.raises(ParameterError):
        other.record_latent_release(private, partitions=[0, 0], sampler="s", seeded=True)
    assert len(other.releases) == 1


# -- cross-checks against dp-accounting --------------------------------------------


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
        accountant.compose(ledger.to_dp_accounting_event(relation=name))  # type: ignore[arg-type]
        results.append(accountant.get_epsilon(1e-6))
    assert results[0] == pytest.approx(results[1], rel=1e-6)
    assert ledger.epsilon(1e-6) == pytest.approx(results[0], abs=0.01)
    with pytest.raises(ParameterError):
        ledger.to_dp_accounting_event(relation="sideways")  # type: ignore[arg-type]
    replace_sgd = sgd(adjacency=REPLACE)
    with pytest.raises(LedgerError):
        replace_sgd.to_dp_accounting_event(relation="add-or-remove-one")


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


def test_record_latent_release_checks_its_plan() -> None:
    with pytest.raises(ParameterTypeError):
        PrivacyLedger().record_latent_release(
            "plan",  # type: ignore[arg-type]
            partitions=[0],
            sampler=GAUSSIAN_SAMPLER,
            seeded=False,
        )
    plan = plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=2, adjacency=REPLACE)
    with pytest.raises(ParameterError):
        PrivacyLedger().record_latent_release(
            plan, partitions=[], sampler=GAUSSIAN_SAMPLER, seeded=False
        )
