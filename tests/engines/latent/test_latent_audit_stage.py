"""The default membership-inference audit stage of the latent engine."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privfed.audit import SyntheticReleaseAudit, audit_synthetic_release
from privfed.dp import Adjacency, gdp_epsilon
from privfed.engines.latent.audit import (
    AUDIT_INPUT_ARRAYS,
    audit_skip_reason,
    audit_summary,
    save_audit_inputs,
)
from privfed.engines.latent.job import PipelineConfig, PipelineResult, run_pipeline
from privfed.errors import ParameterError, ParameterTypeError

TINY: dict[str, Any] = {
    "num_clients": 6,
    "samples_per_class": 40,
    "classifier_epochs": 1,
    "latent_dim": 6,
    "dropout_rate": 0.34,
    "baselines": False,
    "noise_seed": 11,
}


@pytest.fixture(scope="module")
def tiny_run() -> PipelineResult:
    return run_pipeline(PipelineConfig(**TINY))


@pytest.mark.slow
def test_audit_summary_is_in_the_report_with_sane_values(tiny_run: PipelineResult) -> None:
    r = tiny_run.report
    assert r.audit is not None and "audit" in r.seconds
    summary = r.audit.to_dict()
    assert summary["members"] == r.records_aggregated
    assert summary["nonmembers"] == r.records_test
    assert summary["reference"] == r.records_public
    claimed = summary["claimed"]
    assert (claimed["epsilon"], claimed["mu"]) == (r.epsilon, r.mu)
    assert (claimed["game_epsilon"], claimed["game_mu"]) == (r.epsilon, r.mu)  # replace-one
    assert set(summary["attacks"]) == {
        "dcr",
        "domias-gaussian",
        "domias-kde",
        "latent-gaussian-lr",
        "noisy-sum-lr",
    }
    for entry in summary["attacks"].values():
        auc = entry["auc"]
        assert 0.0 <= auc["lower"] <= auc["estimate"] <= auc["upper"] <= 1.0
        # Only FPRs the 450 non-members resolve (>= 3/FPR of them) are kept.
        assert [t["fpr"] for t in entry["tpr_at_fpr"]] == [0.1, 0.01]
        for t in entry["tpr_at_fpr"]:
            assert 0.0 <= t["lower"] <= t["tpr"] <= t["upper"] <= 1.0
        assert entry["significance"] == 0.05
        # Each bound holds with probability >= 95 % if the release is as private as
        # claimed; the seeds are fixed, so this is deterministic here (and a failure
        # would be a real finding: a bug in the release or in the audit).
        assert 0.0 <= entry["epsilon_lower_bound"] <= claimed["epsilon"]
        assert 0.0 <= entry["mu_lower_bound"] <= claimed["mu"]
        assert entry["exceeds_claim"] is False
    assert json.loads(json.dumps(r.to_dict()))["audit"] == summary


def test_members_are_exactly_the_clipped_latents_that_were_summed(
    tiny_run: PipelineResult,
) -> None:
    assert tiny_run.audit_inputs is not None
    inputs = tiny_run.audit_inputs.arrays()
    assert set(inputs) == set(AUDIT_INPUT_ARRAYS)
    members, labels = inputs["member_latents"], inputs["member_labels"]
    sums = tiny_run.aggregate.sums_float()
    for c in range(sums.shape[0]):
        # Exact: the members are the grid values the statistics summed.
        assert np.array_equal(members[labels == c].sum(axis=0), sums[c])
    radius = tiny_run.report.clip_norm
    for key in ("member_latents", "nonmember_latents", "reference_latents"):
        assert np.all(np.linalg.norm(inputs[key], axis=1) <= radius * (1 + 1e-12))
    assert np.array_equal(inputs["noisy_sums"], tiny_run.release.sums)
    assert np.array_equal(inputs["counts"], tiny_run.release.counts)  # public counts
    assert float(inputs["noise_std_sum"]) >= tiny_run.release.noise_std_sum
    assert np.array_equal(inputs["synthetic_latents"], tiny_run.synthetic_latents)
    assert tiny_run.audit is not None
    assert tiny_run.report.audit is not None
    assert len(tiny_run.audit.results) == len(tiny_run.report.audit.to_dict()["attacks"])


def _small_audit(seed: int) -> SyntheticReleaseAudit:
    rng = np.random.default_rng(seed)
    return audit_synthetic_release(
        rng.normal(size=(40, 3)), rng.normal(size=(40, 3)), rng.normal(size=(60, 3)), delta=1e-5
    )


def test_audit_summary_add_remove_game_and_validation() -> None:
    audit = _small_audit(0)
    kwargs = {"claimed_epsilon": 2.0, "claimed_delta": 1e-5, "claimed_mu": 0.5}
    s = audit_summary(audit, adjacency=Adjacency.ADD_REMOVE, **kwargs).to_dict()
    assert s["claimed"]["game_mu"] == 1.0
    assert s["claimed"]["game_epsilon"] == gdp_epsilon(1.0, 1e-5)
    assert s["best"] in s["attacks"]
    with pytest.raises(ParameterTypeError, match="audit"):
        audit_summary("audit", adjacency=Adjacency.REPLACE_ONE, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="adjacency"):
        audit_summary(audit, adjacency="replace-one", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="claimed_mu"):
        audit_summary(audit, adjacency=Adjacency.REPLACE_ONE, **{**kwargs, "claimed_mu": math.nan})
    with pytest.raises(ParameterError, match="claimed_delta"):
        audit_summary(audit, adjacency=Adjacency.REPLACE_ONE, **{**kwargs, "claimed_delta": 1.0})


def test_save_audit_inputs_refuses_incomplete_or_unknown_arrays(tmp_path: Path) -> None:
    base = {k: np.zeros((4, 2)) for k in AUDIT_INPUT_ARRAYS[:3]}
    with pytest.raises(ParameterError, match="arrays"):
        save_audit_inputs(tmp_path / "a.npz", {"member_latents": np.zeros((4, 2))})
    with pytest.raises(ParameterError, match="arrays"):
        save_audit_inputs(tmp_path / "b.npz", {**base, "secret": np.zeros(1)})
    assert not list(tmp_path.iterdir())
    save_audit_inputs(tmp_path / "c.npz", base)
    with np.load(tmp_path / "c.npz", allow_pickle=False) as data:
        assert set(data.files) == set(base)


def test_pipeline_config_audit_flag_is_validated() -> None:
    with pytest.raises(ParameterTypeError, match="audit"):
        PipelineConfig(audit="yes")  # type: ignore[arg-type]
    assert PipelineConfig().audit is True


def test_add_remove_release_is_audited_against_the_group_privacy_claim() -> None:
    config = PipelineConfig(
        **{**TINY, "num_clients": 3, "dropout_rate": 0.0, "samples_per_class": 10},
        adjacency=Adjacency.ADD_REMOVE,
    )
    result = run_pipeline(config)
    assert result.report.audit is not None and result.audit_inputs is not None
    summary = result.report.audit.to_dict()
    claimed = summary["claimed"]
    assert claimed["adjacency"] == "add-remove"
    assert claimed["game_mu"] == 2 * result.report.mu
    # Noisy counts are released: the attack sees them rounded and floored at one.
    counts = result.audit_inputs.counts
    assert counts is not None
    assert np.all(counts >= 1) and np.array_equal(counts, np.rint(counts))
    for entry in summary["attacks"].values():
        # Each bound fails with probability <= 5 % under a correct release; fixed seeds.
        assert entry["mu_lower_bound"] <= claimed["game_mu"]
        assert entry["epsilon_lower_bound"] <= claimed["game_epsilon"]


def test_audit_skip_reason() -> None:
    assert audit_skip_reason(members=4, nonmembers=4, reference=2) is None
    assert "has 3 and 9" in str(audit_skip_reason(members=3, nonmembers=9, reference=50))
    assert "reference" in str(audit_skip_reason(members=40, nonmembers=40, reference=1))
    with pytest.raises(ParameterError, match="members"):
        audit_skip_reason(members=-1, nonmembers=4, reference=2)
