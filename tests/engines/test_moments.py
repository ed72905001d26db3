"""The shared moment release: the plan budgets its ledger and yields its events; seeded noise."""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pytest

from privfed.dp import Adjacency, GaussianRelease, PartitionKey, PrivacyLedger
from privfed.engines.latent.accounting import LATENT_SCHEME, record_latent_release
from privfed.engines.moments.noise import (
    FACTORY_DOMAIN,
    LATENT_DOMAIN,
    add_gaussian,
    section_seed,
)
from privfed.engines.moments.planning import plan_latent_release
from privfed.errors import ParameterError, ParameterTypeError


def test_the_plan_budgets_its_ledger_at_its_own_target() -> None:
    plan = plan_latent_release(2.0, 1e-6, clip_norm=1.5, dim=3, adjacency=Adjacency.REPLACE_ONE)
    assert plan.target_delta == 1e-6 and plan.delta <= 1e-6
    ledger = plan.ledger()
    assert ledger.to_json() == PrivacyLedger(budget_epsilon=2.0, budget_delta=1e-6).to_json()
    assert ledger.to_json() != PrivacyLedger(budget_epsilon=2.0, budget_delta=1e-5).to_json()
    with pytest.raises(ParameterError) as info:
        dataclasses.replace(plan, target_delta=None).ledger()
    assert info.value.parameter == "target_delta"  # type: ignore[attr-defined]


def test_the_events_are_what_the_ledger_records() -> None:
    plan = plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=2, adjacency=Adjacency.ADD_REMOVE)
    events = plan.events([0, 1], scheme=LATENT_SCHEME, sampler="s", seeded=True)
    assert [e.partition for e in events] == [PartitionKey("class", 0), PartitionKey("class", 1)]
    assert all(isinstance(e, GaussianRelease) and e.l2_sensitivity == plan.mu for e in events)
    assert all(e.dimension == 2 + 4 + 1 for e in events)
    ledger = PrivacyLedger()
    recorded = record_latent_release(ledger, plan, partitions=[0, 1], sampler="s", seeded=True)
    assert [r.to_dict() for r in recorded] == [e.to_dict() for e in events]
    assert len(ledger.releases) == 2
    for bad, kind in (([], ParameterError), ([0, 0], ParameterError), ([True], ParameterTypeError)):
        with pytest.raises(kind):
            plan.events(bad, scheme=LATENT_SCHEME, sampler="s", seeded=False)


def test_section_seeds_keep_both_historical_derivations() -> None:
    # The latent derivation: an int big-endian after "privfed.models.release/v1/<section>/".
    latent = hashlib.sha256(b"privfed.models.release/v1/sum/" + (11).to_bytes(1, "big")).digest()
    assert section_seed(11, "sum") == section_seed(11, "sum", domain=LATENT_DOMAIN) == latent
    # The factory derivation: "latent-gaussian-dp|<section>|<bytes>".
    factory = hashlib.sha256(b"latent-gaussian-dp|s|cell").digest()
    assert section_seed(b"cell", "s", domain=FACTORY_DOMAIN) == factory
    assert section_seed(None, "sum") is None
    with pytest.raises(ParameterError):
        section_seed(-1, "sum")
    with pytest.raises(ParameterTypeError):
        section_seed(True, "sum")


def test_seeded_noise_is_reproducible_and_scaled() -> None:
    values = np.zeros((2, 3))
    a = add_gaussian(values, 1.0, 5, "m")
    assert np.array_equal(a, add_gaussian(values, 1.0, 5, "m"))
    assert not np.array_equal(a, add_gaussian(values, 1.0, 5, "n"))
    half = add_gaussian(values, 1.0, 5, "m", scale=np.full(3, 0.5)[None, :])
    assert np.array_equal(half, 0.5 * a)


@pytest.mark.parametrize(
    ("split", "shown"),
    [
        ("fast", "'fast'"),
        ("", "''"),
        (0.0, "0.0"),
        (1, "1"),
        (np.float64(1.5), "np.float64(1.5)"),
        (-math.inf, "-inf"),
    ],
)
def test_a_bad_split_is_refused_in_one_wording(split: object, shown: str) -> None:
    kwargs = {"clip_norm": 1.0, "dim": 2, "adjacency": Adjacency.REPLACE_ONE}
    with pytest.raises(ParameterError) as info:
        plan_latent_release(1.0, 1e-5, split=split, **kwargs)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"parameter 'split' must be 'balanced', 'optimal' or a float in (0, 1); got {shown}"
    )
    with pytest.raises(ParameterTypeError):
        plan_latent_release(1.0, 1e-5, split=None, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="not NaN"):
        plan_latent_release(1.0, 1e-5, split=math.nan, **kwargs)  # type: ignore[arg-type]
