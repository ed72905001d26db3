"""The release-event contract, run against every registered release kind.

Each kind supplies example instances through its ``examples()`` hook, so a new
kind module in ``privfed/dp/releases/``, once listed in
:data:`privfed.dp.registry.RELEASE_KINDS`, is covered here without editing this file.
Every test is deterministic (no randomness): the tolerances below only absorb
dp-accounting's PLD discretisation (a 1e-4 loss grid, pessimistic).
"""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from privfed.dp import (
    Adjacency,
    PartitionKey,
    PrivacyLedger,
    ReleaseEvent,
    release_from_dict,
    release_kinds,
)
from privfed.dp import events as events_module
from privfed.dp import releases as releases_package
from privfed.dp.registry import RELEASE_KINDS
from privfed.errors import BudgetExceededError, LedgerError, ParameterTypeError

DELTA = 1e-5
#: |ε_dp-accounting - ε_ledger| allowed for the PLD accountant: both discretise the
#: privacy loss on a 1e-4 grid (pessimistically); the ledger's exact GDP is tighter.
PLD_TOLERANCE = 1e-4
#: How far below the ledger's claim an accountant may land (discretisation only):
#: RDP is looser than PLD/GDP, and must never be tighter beyond this.
BELOW_TOLERANCE = 1e-4

KINDS = release_kinds()
EXAMPLES = [
    pytest.param(example, id=f"{tag}-{index}")
    for tag, kind in sorted(KINDS.items())
    for index, example in enumerate(kind.examples())
]
NR = dp_accounting.NeighboringRelation
RELATIONS = {"add-or-remove-one": NR.ADD_OR_REMOVE_ONE, "replace-one": NR.REPLACE_ONE}


def _ledger(*releases: ReleaseEvent, **budget: float) -> PrivacyLedger:
    ledger = PrivacyLedger(**budget)  # type: ignore[arg-type]
    ledger.record_all(releases)
    return ledger


def _replace(release: ReleaseEvent, **changes: Any) -> ReleaseEvent:
    return dataclasses.replace(release, **changes)  # type: ignore[type-var]


def _accountant(kind: str, relation: str) -> Any:
    if kind == "pld":
        return pld_privacy_accountant.PLDAccountant(RELATIONS[relation])
    return rdp_privacy_accountant.RdpAccountant(neighboring_relation=RELATIONS[relation])


_EPSILONS: dict[tuple[str, str, str], float | None] = {}


def _accountant_epsilon(event: Any, kind: str, relation: str) -> float | None:
    """ε of dp-accounting's ``kind`` accountant on ``event``; ``None`` if it refuses it.

    Memoised by the event's repr (DpEvents are immutable attrs values whose repr
    holds every parameter): the PLD accountant is the slow part of these tests.
    """
    key = (repr(event), kind, relation)
    if key not in _EPSILONS:
        accountant = _accountant(kind, relation)
        if accountant.supports(event):
            accountant.compose(event)
            _EPSILONS[key] = float(accountant.get_epsilon(DELTA))
        else:
            _EPSILONS[key] = None
    return _EPSILONS[key]


# -- the registry and the examples hook ---------------------------------------------------


def test_registry_holds_the_built_in_kinds() -> None:
    assert {"gaussian", "subsampled-gaussian"} <= set(KINDS)
    for tag, kind in KINDS.items():
        assert kind.type_tag == tag and issubclass(kind, ReleaseEvent)


def test_the_table_lists_a_kind_of_every_release_module() -> None:
    # The table replaced discovery of the folder: a new kind module must be listed.
    folder = Path(releases_package.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    listed = {kind.__module__.rsplit(".", 1)[1] for kind in RELEASE_KINDS}
    assert listed == modules
    assert [kind.type_tag for kind in RELEASE_KINDS] == list(KINDS)[: len(RELEASE_KINDS)]


def test_events_import_no_release_kind() -> None:
    # No circle: the protocol imports neither the kinds nor the table, nor discovers them.
    tree = ast.parse(Path(events_module.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {"importlib", "pkgutil", "privfed.dp.registry"} & imported
    assert not any(name.startswith("privfed.dp.releases") for name in imported)


@pytest.mark.slow
@pytest.mark.parametrize("tag", sorted(KINDS))
def test_examples_cover_both_adjacencies(tag: str) -> None:
    examples = KINDS[tag].examples()
    assert examples and all(type(e) is KINDS[tag] for e in examples)
    assert {e.adjacency for e in examples} == set(Adjacency)
    for example in examples:
        assert _ledger(example).epsilon(DELTA) > 0.0  # examples are not free


# -- JSON -----------------------------------------------------------------------------------


@pytest.mark.parametrize("release", EXAMPLES)
def test_json_round_trip_is_identical(release: ReleaseEvent) -> None:
    data = release.to_dict()
    assert data["type"] == type(release).type_tag
    again = release_from_dict(json.loads(json.dumps(data)))
    assert again == release and type(again) is type(release)
    assert again.to_dict() == data
    assert type(release).from_dict(data) == release
    ledger = _ledger(release)
    text = ledger.to_json()
    assert PrivacyLedger.from_json(text).to_json() == text


@pytest.mark.parametrize("release", EXAMPLES)
def test_from_dict_refuses_missing_unknown_and_mistyped(release: ReleaseEvent) -> None:
    data = release.to_dict()
    kind = type(release)
    for field in data:
        if field == "type":
            continue
        broken = dict(data)
        del broken[field]
        with pytest.raises(LedgerError):
            kind.from_dict(broken)
        with pytest.raises(LedgerError):
            release_from_dict(broken)
    with pytest.raises(LedgerError):
        kind.from_dict({**data, "surprise": 1})
    with pytest.raises(LedgerError):
        release_from_dict({**data, "type": "no-such-kind"})
    with pytest.raises(LedgerError):
        release_from_dict([data])
    with pytest.raises(LedgerError):
        kind.from_dict({**data, "name": ""})
    with pytest.raises(LedgerError):
        kind.from_dict({**data, "adjacency": "sideways"})
    with pytest.raises(LedgerError):
        kind.from_dict({**data, "seeded": 1})
    with pytest.raises(LedgerError):
        kind.from_dict({**data, "partition": 1.5})
    other = next(tag for tag in KINDS if tag != kind.type_tag)
    with pytest.raises(LedgerError):
        kind.from_dict({**data, "type": other})


# -- accounting -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("release", EXAMPLES)
def test_declared_accounting_is_honoured(release: ReleaseEvent) -> None:
    methods = release.accounting
    assert methods and methods <= {"gdp", "pld", "rdp"}
    mu = release.gdp_mu()
    assert (mu is not None) == ("gdp" in methods)
    if "pld" in methods:
        release.pld(1e-4)
    else:
        with pytest.raises(LedgerError):
            release.pld(1e-4)
    orders = [1.5, 2.0, 8.0, 64.0]
    if "rdp" in methods:
        curve = release.rdp(orders)
        assert curve.shape == (4,) and np.all(curve >= 0) and np.all(np.diff(curve) >= 0)
    else:
        with pytest.raises(LedgerError):
            release.rdp(orders)
    # The accounting key ignores what does not change the privacy loss.
    twin = _replace(
        release, name="twin", partition=PartitionKey("twin", 0), sampler="other", seeded=True
    )
    assert hash(twin.accounting_key()) == hash(release.accounting_key())
    assert twin.accounting_key() == release.accounting_key()


@pytest.mark.parametrize("release", EXAMPLES)
def test_methods_are_ordered_tightest_first(release: ReleaseEvent) -> None:
    ledger = _ledger(release)
    by_method = {m: ledger.epsilon(DELTA, method=m) for m in release.accounting}
    tightest = next(m for m in ("gdp", "pld", "rdp") if m in release.accounting)
    assert ledger.method() == tightest
    assert ledger.epsilon(DELTA) == by_method[tightest]
    if "gdp" in by_method and "pld" in by_method:
        assert by_method["gdp"] <= by_method["pld"] + PLD_TOLERANCE
    for tighter in ("gdp", "pld"):
        if tighter in by_method and "rdp" in by_method:
            assert by_method[tighter] <= by_method["rdp"] + BELOW_TOLERANCE


@pytest.mark.parametrize("release", EXAMPLES)
def test_partition_semantics(release: ReleaseEvent) -> None:
    one = _ledger(release).epsilon(DELTA)
    same = _ledger(release, _replace(release, name="again")).epsilon(DELTA)
    label_a = _replace(release, partition=PartitionKey("s", "a"))
    label_b = _replace(release, partition=PartitionKey("s", "b"))
    other_scheme = _replace(release, partition=PartitionKey("t", "a"))
    everywhere = _replace(release, partition=None)
    assert same > one
    assert _ledger(label_a, label_b).epsilon(DELTA) == one  # parallel within a scheme
    assert _ledger(label_a, other_scheme).epsilon(DELTA) == pytest.approx(same, rel=1e-12)
    assert _ledger(label_a, everywhere).epsilon(DELTA) == pytest.approx(same, rel=1e-12)


# -- dp-accounting export ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("release", EXAMPLES)
def test_export_agrees_with_the_pld_accountant(release: ReleaseEvent) -> None:
    ledger = _ledger(release)
    claim = ledger.epsilon(DELTA)
    relation = release.accountant_relation
    assert ledger.accountant_relation() == relation
    if "pld" not in release.accounting:
        # An RDP-only kind has no PLD export (refused); its RDP export reproduces the
        # ledger's figure instead, and the default export is one the PLD accountant refuses.
        with pytest.raises(LedgerError):
            release.to_dp_accounting_event(accountant="pld")
        with pytest.raises(LedgerError):
            ledger.to_dp_accounting_event(accountant="pld")
        event = ledger.to_dp_accounting_event(accountant="rdp")
        reported = _accountant_epsilon(event, "rdp", relation)
        if release.rdp_export_exact:
            assert reported == pytest.approx(claim, rel=1e-9)
        else:  # an upper bound only (see rdp_export_exact): looser, never tighter
            assert reported is not None and claim - BELOW_TOLERANCE <= reported <= 1.25 * claim
        assert _accountant_epsilon(ledger.to_dp_accounting_event(), "pld", relation) is None
        return
    assert ledger.to_dp_accounting_event(accountant="pld") == ledger.to_dp_accounting_event()
    for event in (
        release.to_dp_accounting_event(accountant="pld"),
        ledger.to_dp_accounting_event(),
    ):
        assert _accountant_epsilon(event, "pld", relation) == pytest.approx(
            claim, abs=PLD_TOLERANCE
        )


@pytest.mark.parametrize("release", EXAMPLES)
@pytest.mark.parametrize("relation", sorted(RELATIONS))
@pytest.mark.parametrize("accountant", [None, "pld", "rdp"])
def test_no_export_lets_an_accountant_under_report(
    release: ReleaseEvent, relation: str, accountant: str | None
) -> None:
    # Whatever an export is made for, the accountant it is made for -- constructed
    # with the stated relation -- never reports less than the ledger claims.  An
    # export that could not be right raises LedgerError; dp-accounting refusing an
    # event by itself is fine too (no number, no under-report).
    claim = _ledger(release).epsilon(DELTA)
    try:
        event = release.to_dp_accounting_event(relation=relation, accountant=accountant)  # type: ignore[arg-type]
    except LedgerError:
        refused = True
    else:
        refused = False
        for family in [accountant] if accountant else ["pld", "rdp"]:
            reported = _accountant_epsilon(event, family, relation)
            assert reported is None or reported >= claim - BELOW_TOLERANCE
    # The default relation with a named accountant is refused exactly when the kind
    # has no accounting of that family.
    if relation == release.accountant_relation and accountant is not None:
        assert refused == (accountant not in release.accounting)


@pytest.mark.parametrize("release", EXAMPLES)
def test_rdp_export_is_never_tighter_than_the_claim(release: ReleaseEvent) -> None:
    ledger = _ledger(release)
    if "rdp" not in release.accounting:
        with pytest.raises(LedgerError):
            ledger.to_dp_accounting_event(accountant="rdp")
        return
    event = ledger.to_dp_accounting_event(accountant="rdp")
    reported = _accountant_epsilon(event, "rdp", ledger.accountant_relation())
    assert reported is not None
    assert reported >= ledger.epsilon(DELTA) - BELOW_TOLERANCE
    if release.rdp_export_exact:
        assert reported == pytest.approx(ledger.epsilon(DELTA, method="rdp"), rel=1e-9)
    else:  # the export is an upper bound on a tighter accounted curve: within 25 %
        assert reported <= 1.25 * ledger.epsilon(DELTA, method="rdp")


# -- refused records leave the ledger unchanged -----------------------------------------------


def _other_adjacency(release: ReleaseEvent) -> ReleaseEvent:
    wanted = next(a for a in Adjacency if a is not release.adjacency)
    for kind in KINDS.values():
        for example in kind.examples():
            if example.adjacency is wanted:
                return example
    raise AssertionError("no example with the other adjacency")


@pytest.mark.parametrize("release", EXAMPLES)
def test_refused_records_change_nothing(release: ReleaseEvent) -> None:
    single = _ledger(release).epsilon(DELTA)
    ledger = _ledger(release, budget_epsilon=single * (1 + 1e-6), budget_delta=DELTA)
    before = (ledger.releases, ledger.to_json())

    attempts: list[tuple[type[Exception], Callable[[], None]]] = [
        (BudgetExceededError, lambda: ledger.record(_replace(release, name="again"))),
        (BudgetExceededError, lambda: ledger.record_all([_replace(release, partition=None)])),
        (LedgerError, lambda: ledger.record(_other_adjacency(release))),
        (LedgerError, lambda: ledger.record_all([release, _other_adjacency(release)])),
        (ParameterTypeError, lambda: ledger.record("release")),  # type: ignore[arg-type]
        (ParameterTypeError, lambda: ledger.record(release.to_dict())),  # type: ignore[arg-type]
        (ParameterTypeError, lambda: ledger.record_all([release, None])),  # type: ignore[list-item]
    ]
    for error, attempt in attempts:
        with pytest.raises(error):
            attempt()
        assert (ledger.releases, ledger.to_json()) == before
