"""record_latent_release: the latent engine's ledger recipe (moved out of the DP core)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from privfed.dp import (
    GAUSSIAN_SAMPLER,
    Adjacency,
    PartitionKey,
    PrivacyLedger,
    SubsampledGaussianRelease,
)
from privfed.engines.latent.accounting import LATENT_SCHEME, record_latent_release
from privfed.engines.moments.planning import plan_latent_release
from privfed.errors import BudgetExceededError, ParameterError, ParameterTypeError

REPLACE = Adjacency.REPLACE_ONE


def test_latent_plan_recording() -> None:
    plan = plan_latent_release(10.0, 1e-5, clip_norm=3.0, dim=8, adjacency=REPLACE)
    ledger = PrivacyLedger(budget_epsilon=10.0, budget_delta=1e-5)
    recorded = record_latent_release(
        ledger, plan, partitions=range(10), sampler=GAUSSIAN_SAMPLER, seeded=False
    )
    assert len(recorded) == 10 and ledger.mu == plan.mu
    assert ledger.guarantee().epsilon == pytest.approx(10.0, rel=1e-9)
    assert [r.partition for r in recorded] == [PartitionKey("class", c) for c in range(10)]
    assert LATENT_SCHEME == "class"
    with pytest.raises(BudgetExceededError):
        record_latent_release(ledger, plan, partitions=[0], sampler=GAUSSIAN_SAMPLER, seeded=False)
    private = plan_latent_release(
        1.0, 1e-5, clip_norm=3.0, dim=8, adjacency=REPLACE, private_labels=True
    )
    other = PrivacyLedger()
    (release,) = record_latent_release(
        other, private, partitions=[0, 1, 2], sampler=GAUSSIAN_SAMPLER, seeded=True
    )
    assert release.partition is None and release.seeded and release.dimension == 8 + 64 + 1
    with pytest.raises(ParameterError):
        record_latent_release(other, private, partitions=[0, 0], sampler="s", seeded=True)
    assert len(other.releases) == 1


def test_record_latent_release_checks_its_plan() -> None:
    with pytest.raises(ParameterTypeError):
        record_latent_release(
            PrivacyLedger(),
            "plan",  # type: ignore[arg-type]
            partitions=[0],
            sampler=GAUSSIAN_SAMPLER,
            seeded=False,
        )
    plan = plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=2, adjacency=REPLACE)
    with pytest.raises(ParameterError):
        record_latent_release(
            PrivacyLedger(), plan, partitions=[], sampler=GAUSSIAN_SAMPLER, seeded=False
        )


def test_record_latent_release_checks_ledger_and_labels() -> None:
    plan = plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=2, adjacency=REPLACE)
    with pytest.raises(ParameterTypeError) as info:
        record_latent_release(
            "ledger",  # type: ignore[arg-type]
            plan,
            partitions=[0],
            sampler=GAUSSIAN_SAMPLER,
            seeded=False,
        )
    assert info.value.parameter == "ledger"
    ledger = PrivacyLedger()
    for bad in ([None], [1.5], [True], [PartitionKey("class", 0)]):
        with pytest.raises(ParameterTypeError):
            record_latent_release(
                ledger,
                plan,
                partitions=bad,  # type: ignore[arg-type]
                sampler=GAUSSIAN_SAMPLER,
                seeded=False,
            )
    assert ledger.releases == ()


def test_latent_classes_compose_sequentially_with_factory_cells() -> None:
    # Class 3 of the latent release and factory cell "class=3/client=0" share
    # records: the ledger must not treat their labels as disjoint.
    plan = plan_latent_release(2.0, 1e-5, clip_norm=1.0, dim=2, adjacency=REPLACE)
    ledger = PrivacyLedger()
    record_latent_release(ledger, plan, partitions=range(4), sampler=GAUSSIAN_SAMPLER, seeded=False)
    alone = ledger.epsilon(1e-5)
    ledger.record(
        SubsampledGaussianRelease(
            name="factory class=3 client=0",
            partition=PartitionKey("cell", "class=3/client=0"),
            noise_multiplier=3.0,
            sampling_rate=1.0,
            steps=1,
            adjacency=REPLACE,
            sampler="torch-generator-gaussian",
            seeded=True,
        )
    )
    assert ledger.epsilon(1e-5) > alone + 0.1


def test_accounting_module_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import privfed.engines.latent.accounting\n"
        "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
