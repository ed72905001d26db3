"""``repeats``: the factory job's accuracy with a spread over classifier seeds (evaluation only)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import run_factory_pipeline
from privfed.errors import ParameterError, ParameterTypeError

_SMALL: dict[str, Any] = {
    "factory": "gaussian",
    "latent_dim": 8,
    "synthetic_per_class": 20,
    "classifier_epochs": 1,
    "fedavg_rounds": 0,
    "centralized": False,
    "audit": False,
    "epsilon": 3.0,
    "noise_seed": 11,
}


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_repeats_outside_its_domain_is_refused(bad: Any) -> None:
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        FactoryPipelineConfig(repeats=bad)
    assert info.value.parameter == "repeats"


def test_repeats_retrain_the_classifier_only() -> None:
    once = run_factory_pipeline(FactoryPipelineConfig(**_SMALL))
    thrice = run_factory_pipeline(FactoryPipelineConfig(**_SMALL, repeats=3))
    spread = thrice.factory_accuracy_repeats
    assert spread is not None and spread["repeats"] == 3
    assert spread["seeds"] == [0, 1, 2]
    # The first repeat is the K = 1 run's classifier (same seed, same synthetic data).
    assert spread["values"][0] == once.factory_accuracy
    assert thrice.factory_accuracy == pytest.approx(sum(spread["values"]) / 3, abs=1e-12)
    assert spread["min"] <= thrice.factory_accuracy <= spread["max"]
    assert spread["std"] is not None and spread["std"] >= 0
    # The factories and their release are made once, as for K = 1.
    assert thrice.matrix.digest() == once.matrix.digest()
    assert thrice.ledger is not None and once.ledger is not None
    assert thrice.ledger.releases == once.ledger.releases
    one = once.factory_accuracy_repeats
    assert one is not None and one["std"] is None and "no spread" in one["note"]
    assert thrice.to_dict()["factory_accuracy_repeats"] == spread
    assert replace(thrice.config, repeats=1) == once.config
