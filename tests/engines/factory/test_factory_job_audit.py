"""The factory pipeline's audit stage and public-codec basis (tiny configurations)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from privfed.data import load_digits, split_public_private
from privfed.engines.codecs import PCACodec
from privfed.engines.factory import FactoryAuditConfig, LatentGaussianFactory, codec_fingerprint
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import make_factory, public_codec, run_factory_pipeline

TINY = FactoryPipelineConfig(
    synthetic_per_class=20,
    classifier_epochs=1,
    fedavg_rounds=1,
    centralized=False,
    audit_config=FactoryAuditConfig(max_factories=3),
)


def test_audit_stage_reports_members_against_held_out_test_images() -> None:
    stages: list[str] = []
    report = run_factory_pipeline(TINY, progress=lambda e: stages.append(e.stage))
    assert stages.index("codec") < stages.index("factories") < stages.index("audit")
    assert stages.index("audit") < stages.index("synthesis")
    audit = report.audit
    assert audit is not None
    # Round-robin over classes: with one (random) client per class, classes 0, 1, 2.
    holder = dict(report.matrix.cells)
    assert [(f.class_id, f.client_id) for f in audit.factories] == [
        (c, holder[c]) for c in (0, 1, 2)
    ]
    assert len(audit.skipped) == 7
    counts = np.array(report.class_counts)
    test_counts = np.bincount(report.test_labels.numpy(), minlength=10)
    for f in audit.factories:
        # Members: every training image of the cell; non-members: the class's test images.
        assert f.num_members == counts[f.class_id, f.client_id]
        assert f.num_nonmembers == test_counts[f.class_id]
        assert f.basis == "public-codec"
        assert [a.attack for a in f.attacks] == ["log-likelihood"]
    # Bonferroni over 3 factories x 1 attack.
    assert audit.per_test_significance == pytest.approx(0.05 / 3)
    out = report.to_dict()
    json.dumps(out)
    assert out["audit"]["threshold_selection"] == "held-out"
    row = out["audit"]["factories"][0]["attacks"][0]
    assert {"auc", "tpr_at_fpr"} <= set(row["metrics"])
    assert {"epsilon_lower_bound", "mu_lower_bound", "significance"} <= set(row["bound"])
    assert out["config"]["audit_config"]["max_factories"] == 3


def test_audit_can_be_skipped_and_private_pca_is_still_available() -> None:
    cfg = FactoryPipelineConfig(
        synthetic_per_class=10,
        classifier_epochs=1,
        fedavg_rounds=1,
        centralized=False,
        audit=False,
        gaussian_basis="private-pca",
    )
    stages: set[str] = set()
    report = run_factory_pipeline(cfg, progress=lambda e: stages.add(e.stage))
    assert report.audit is None and report.to_dict()["audit"] is None
    assert "audit" not in stages and "codec" not in stages
    assert report.codec_seconds == 0.0
    c, k = report.matrix.cells[0]
    factory = report.matrix.factory(c, k)
    assert isinstance(factory, LatentGaussianFactory) and factory.basis == "private-pca"


def test_public_codec_is_fitted_on_the_public_split_only() -> None:
    cfg = FactoryPipelineConfig(latent_dim=8, seed=3)
    codec = public_codec(cfg)
    assert isinstance(codec, PCACodec) and codec.latent_dim == 8
    split = split_public_private(load_digits(), public_fraction=0.05, test_fraction=0.3, seed=3)
    expected = PCACodec.fit(torch.from_numpy(np.array(split.public.images)), latent_dim=8)
    assert codec_fingerprint(codec) == codec_fingerprint(expected)
    # make_factory shares the same (cached) codec.
    factory = make_factory(cfg, 4, 4)
    assert factory.basis == "public-codec" and factory.codec is codec
    assert public_codec(FactoryPipelineConfig(gaussian_basis="private-pca")) is None
    assert public_codec(FactoryPipelineConfig(factory="edm")) is None


@pytest.mark.slow
def test_public_autoencoder_basis_end_to_end() -> None:
    from privfed.engines.codecs import ConvAutoencoderCodec

    cfg = FactoryPipelineConfig(
        gaussian_basis="public-autoencoder",
        latent_dim=8,
        synthetic_per_class=10,
        classifier_epochs=1,
        fedavg_rounds=1,
        centralized=False,
        audit_config=FactoryAuditConfig(max_factories=2),
    )
    report = run_factory_pipeline(cfg)
    c, k = report.matrix.cells[0]
    factory = report.matrix.factory(c, k)
    assert isinstance(factory, LatentGaussianFactory)
    assert isinstance(factory.codec, ConvAutoencoderCodec)
    assert report.audit is not None and len(report.audit.factories) == 2
    assert report.codec_seconds > 0


@pytest.mark.slow
def test_the_factory_run_directory_works_with_privfed_audit(tmp_path: Path) -> None:
    from privfed.cli import main

    report = run_factory_pipeline(TINY)
    assert report.audit_inputs is not None
    paths = report.write(tmp_path / "run")
    assert {"release", "evaluation", "samples", "synthetic", "audit_inputs"} <= set(paths)
    inputs = report.audit_inputs
    # Members are exactly the records the factories were trained on (every private record
    # of a cell that held enough of them); non-members the held-out test split.
    assert inputs.member_latents.shape[0] == sum(map(sum, report.class_counts))
    assert inputs.nonmember_latents.shape[0] == report.test_images.shape[0]
    assert inputs.synthetic_latents.shape[0] == 10 * TINY.synthetic_per_class
    out = tmp_path / "audit"
    code = main(["audit", "--run-dir", str(tmp_path / "run"), "--out", str(out), "--no-plot"])
    assert code == 0
    audit = json.loads((out / "audit.json").read_text())
    assert "dcr" in json.dumps(audit)
