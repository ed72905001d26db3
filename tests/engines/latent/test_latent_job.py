"""End-to-end: the pipeline API and the ``privfed run`` command on a tiny configuration."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privfed.cli import main
from privfed.engines.latent.job import PipelineConfig, run_pipeline
from privfed.errors import ParameterError

TINY = {
    "num_clients": 6,
    "samples_per_class": 40,
    "classifier_epochs": 2,
    "latent_dim": 6,
    "dropout_rate": 0.34,
}


@pytest.mark.slow
def test_pipeline_tiny_run_is_exact_and_reproducible_with_noise_seed() -> None:
    config = PipelineConfig(noise_seed=5, baselines=False, **TINY)
    a = run_pipeline(config)
    r = a.report
    assert set(r.dropped_clients) == {"MASKED_INPUT", "UNMASKING"}
    (left_out,) = r.dropped_clients["MASKED_INPUT"]
    assert len(r.dropped_clients["UNMASKING"]) == 1  # its input is still in the sum
    survivors = [i for i in range(6) if i != left_out]
    assert r.records_aggregated == sum(a.client_indices[i].size for i in survivors)
    # The delivered total is exact: its class counts are the survivors' label counts.
    held = np.concatenate([a.client_indices[i] for i in survivors])
    labels = np.asarray(a.split.private.labels)[held]
    expected = np.bincount(labels, minlength=a.aggregate.counts.shape[0])
    assert np.array_equal(a.aggregate.counts, expected)
    assert 0.0 <= r.accuracy_synthetic <= 1.0 and r.accuracy_real is None
    assert r.ledger["releases"] and all(rel["seeded"] for rel in r.ledger["releases"])
    assert r.payload_values_per_class == 6 + 21 + 1
    again = run_pipeline(config)
    assert np.array_equal(again.synthetic_images, a.synthetic_images)
    assert again.aggregate == a.aggregate


def test_partition_invariance_without_dropouts() -> None:
    kwargs = {**TINY, "dropout_rate": 0.0, "noise_seed": 3, "baselines": False}
    iid = run_pipeline(PipelineConfig(partition="iid", **kwargs))
    skew = run_pipeline(PipelineConfig(partition="dirichlet", alpha=0.05, **kwargs))
    assert iid.aggregate == skew.aggregate
    assert np.array_equal(iid.synthetic_images, skew.synthetic_images)


def test_pipeline_config_validation() -> None:
    with pytest.raises(ParameterError, match="dropout_rate"):
        PipelineConfig(dropout_rate=0.6)
    with pytest.raises(ParameterError, match="epsilon"):
        PipelineConfig(epsilon=0.0)
    with pytest.raises(ParameterError, match="partition"):
        PipelineConfig(partition="zigzag")


def test_cli_smoke(tmp_path, capsys) -> None:
    code = main(
        [
            "run",
            "--clients",
            "4",
            "--samples-per-class",
            "20",
            "--epochs",
            "1",
            "--latent-dim",
            "4",
            "--partition",
            "iid",
            "--noise-seed",
            "1",
            "--dropout-rate",
            "0",
            "--output-dir",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert code == 0
    release = json.loads((tmp_path / "release.json").read_text())
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert release["dp"]["epsilon"] == 10.0 and release["public"]["num_clients"] == 4
    assert {"accuracy_real", "accuracy_nondp_synthetic", "seconds"} <= evaluation.keys()
    assert evaluation["audit"]["attacks"]["noisy-sum-lr"]["exceeds_claim"] is False
    assert (tmp_path / "synthetic.npz").stat().st_size > 0
    assert (tmp_path / "audit_inputs.npz").stat().st_size > 0
    assert (tmp_path / "samples.png").stat().st_size > 0
    assert json.loads((tmp_path / "ledger.json").read_text())["releases"]
    assert "accuracy, synthetic (DP)" in capsys.readouterr().out
