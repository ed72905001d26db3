"""End-to-end factory pipeline on digits (probabilistic-PCA factories: fast)."""

from __future__ import annotations

import json

import pytest
import torch

from privfed.engines.factory import FactoryAuditConfig
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.fedavg import run_fedavg
from privfed.engines.factory.job import run_factory_pipeline
from privfed.errors import ParameterError, ParameterTypeError


@pytest.mark.slow
def test_single_class_silos_factories_beat_collapsing_fedavg() -> None:
    # Fixed seed; the margins are wide (measured: factories ~0.95, FedAvg ~0.11
    # with full settings) so a failure means the engine or baseline is broken.
    stages: set[str] = set()
    cfg = FactoryPipelineConfig(
        classifier_epochs=8, fedavg_rounds=3, synthetic_per_class=150, centralized=False
    )
    report = run_factory_pipeline(cfg, progress=lambda event: stages.add(event.stage))
    assert stages == {"codec", "factories", "audit", "synthesis", "classifier", "fedavg"}
    assert report.num_factories == 10
    assert report.factory_accuracy > 0.8
    assert report.fedavg_accuracy < 0.3  # one class per client: FedAvg collapses
    assert report.factory_bytes_per_client < report.fedavg_bytes_per_client
    counts = torch.tensor(report.class_counts)
    assert bool(((counts > 0).sum(dim=0) == 1).all())  # each client holds one class
    out = report.to_dict()
    json.dumps(out)
    # Default: public-PCA basis, every factory audited with the likelihood attack.
    assert out["gaussian_basis"] == "public-pca"
    assert out["audit"]["summary"]["log-likelihood"]["factories"] == 10
    # The public basis ships a 16-d mean and a 16x16 factor per factory, not a
    # 64-pixel basis: 272 float32 values + safetensors header.
    assert report.factory_bytes_per_client < 4 * (16 + 16 * 16) + 200
    # The matrix came back with its buffer and the downstream consumer.
    assert len(report.matrix.buffer) == 10 * 150
    cert = report.matrix.remove_client(0)
    assert cert.retrain == ("downstream-classifier",)


def test_config_validation() -> None:
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(scenario="iid")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(num_clients=5)
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(scenario="dirichlet", dirichlet_alpha=0.0)
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(factory="gan")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(test_fraction=0.95)
    with pytest.raises(ParameterTypeError):
        FactoryPipelineConfig(unet="small")  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        run_factory_pipeline("config")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(gaussian_basis="private")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(public_fraction=0.0)
    with pytest.raises(ParameterError):
        FactoryPipelineConfig(public_fraction=0.4, test_fraction=0.6)
    with pytest.raises(ParameterTypeError):
        FactoryPipelineConfig(audit="yes")  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        FactoryPipelineConfig(audit_config={"max_factories": 2})  # type: ignore[arg-type]
    # Public PCA cannot have more components than public images (about 90 here).
    with pytest.raises(ParameterError):
        run_factory_pipeline(FactoryPipelineConfig(latent_dim=200))


def test_fedavg_with_one_client_is_plain_training_and_validates() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand((40, 1, 8, 8), generator=gen)
    y = (x.mean(dim=(1, 2, 3)) > 0.5).long()
    result = run_fedavg([(x, y), (x[:0], y[:0])], num_classes=2, rounds=2)
    assert result.rounds == 2
    n_params = sum(p.numel() for p in result.model.parameters())
    # One active client of two: 2 directions x 2 rounds x 4 bytes, averaged.
    assert result.bytes_per_client == pytest.approx(2 * 2 * 4 * n_params / 2)
    with pytest.raises(ParameterError):
        run_fedavg([(x[:0], y[:0])], num_classes=2)
    with pytest.raises(ParameterError):
        run_fedavg([(x, y)], num_classes=2, rounds=0)
    with pytest.raises(ParameterError):
        run_fedavg([(x, y)], num_classes=2, momentum=1.0)


@pytest.mark.slow
def test_dp_factories_enter_the_ledger() -> None:
    from privfed import dp
    from privfed.engines.factory import DPSGDConfig, EDMConfig, EDMTrainingConfig, UNetConfig

    dp_cfg = DPSGDConfig(noise_multiplier=1.5, sampling_rate=0.1)
    cfg = FactoryPipelineConfig(
        factory="edm",
        unet=UNetConfig(block_out_channels=(8, 16), norm_num_groups=4),
        edm=EDMConfig(sampling_steps=2),
        edm_training=EDMTrainingConfig(steps=2, dp=dp_cfg),
        synthetic_per_class=4,
        classifier_epochs=1,
        fedavg_rounds=1,
        centralized=False,
        audit_config=FactoryAuditConfig(max_factories=2),
    )
    ledger = dp.PrivacyLedger()
    report = run_factory_pipeline(cfg, ledger=ledger)
    assert len(ledger.releases) == report.num_factories == 10
    assert {r.partition for r in ledger.releases} == {
        dp.PartitionKey("cell", f"class={c}/client={k}") for c, k in report.matrix.cells
    }
    # Disjoint cells compose in parallel: the total equals one factory's ε.
    single = dp.PrivacyLedger()
    single.record(ledger.releases[0])
    assert report.dp_epsilon == pytest.approx(single.epsilon(1e-5), rel=1e-9)
    assert report.to_dict()["dp_epsilon"] == report.dp_epsilon
    # The audit stage scored two of the diffusion factories by denoising loss.
    assert report.audit is not None
    assert report.audit.summary()["denoising-loss"]["factories"] == 2
