"""``privfed run``: the audit stage of the latent engine, and ``--engine factory``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privfed.audit import SyntheticReleaseAudit, audit_synthetic_release
from privfed.cli import main
from privfed.cli.audit import AUDIT_INPUTS_FILENAME as CLI_FILENAME
from privfed.cli.run import _factory_has_audit
from privfed.dp import Adjacency, gdp_epsilon
from privfed.engines.latent.audit import (
    AUDIT_INPUT_ARRAYS,
    AUDIT_INPUTS_FILENAME,
    audit_skip_reason,
    audit_summary,
    save_audit_inputs,
)
from privfed.errors import ParameterError, ParameterTypeError
from privfed.pipeline import PipelineConfig, PipelineResult, run_pipeline

TINY: dict[str, Any] = {
    "num_clients": 6,
    "samples_per_class": 40,
    "classifier_epochs": 1,
    "latent_dim": 6,
    "dropout_rate": 0.34,
    "baselines": False,
    "noise_seed": 11,
}

TINY_CLI = [
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
    "--no-baselines",
    "--quiet",
]


@pytest.fixture(scope="module")
def tiny_run() -> PipelineResult:
    return run_pipeline(PipelineConfig(**TINY))


def test_filename_matches_the_audit_cli() -> None:
    assert AUDIT_INPUTS_FILENAME == CLI_FILENAME


@pytest.mark.slow
def test_audit_summary_is_in_the_report_with_sane_values(tiny_run: PipelineResult) -> None:
    r = tiny_run.report
    summary = r.audit
    assert summary is not None and "audit" in r.seconds
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
    inputs = tiny_run.audit_inputs
    assert inputs is not None and set(inputs) == set(AUDIT_INPUT_ARRAYS)
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
    assert len(tiny_run.audit.results) == len(tiny_run.report.audit["attacks"])  # type: ignore[index]


@pytest.mark.slow
def test_run_writes_audit_inputs_that_privfed_audit_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, audit_dir = tmp_path / "run", tmp_path / "audit"
    assert main([*TINY_CLI, "--output-dir", str(run_dir)]) == 0
    table = capsys.readouterr().out
    assert "audit: noisy-sum-lr" in table and "audit: dcr" in table
    report = json.loads((run_dir / "report.json").read_text())
    assert (run_dir / AUDIT_INPUTS_FILENAME).is_file()
    code = main(["audit", "--run-dir", str(run_dir), "--out", str(audit_dir), "--no-plot"])
    assert code == 0
    rerun = json.loads((audit_dir / "audit.json").read_text())
    text = json.dumps(rerun)
    for name, entry in report["audit"]["attacks"].items():
        assert name in text
        # Same inputs, same (seed-free) metric: the AUC is reproduced exactly.
        assert repr(entry["auc"]["estimate"]) in text


@pytest.mark.slow
def test_no_audit_flag_skips_the_stage(tmp_path: Path) -> None:
    assert main([*TINY_CLI, "--no-audit", "--output-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["audit"] is None and "audit" not in report["seconds"]
    assert report["config"]["audit"] is False
    assert not (tmp_path / AUDIT_INPUTS_FILENAME).exists()


def test_engine_factory_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--engine", "factory", "--samples-per-class", "10", "--epochs", "1"]
    argv += ["--fedavg-rounds", "1", "--no-baselines", "--seed", "3", "--output-dir", str(tmp_path)]
    if _factory_has_audit():  # the factory engine's audit stage is switched off for speed
        argv.append("--no-audit")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "accuracy, synthetic (factories)" in out and "factories" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["engine"] == "factory"
    assert report["config"]["scenario"] == "single-class"
    assert report["config"]["factory"] == "gaussian"
    assert report["config"]["num_clients"] == 10 and report["config"]["seed"] == 3
    assert report["config"]["fedavg_rounds"] == 1 and report["config"]["centralized"] is False
    assert report["num_factories"] == 10 and report["centralized_accuracy"] is None
    assert 0.0 <= report["factory_accuracy"] <= 1.0
    assert report["config"].get("audit", False) is False


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--engine", "factory", "--codec", "pca"], "--codec"),
        (["--engine", "factory", "--epsilon", "3"], "--epsilon"),
        (["--engine", "factory", "--noise-seed", "1"], "--noise-seed"),
        (["--engine", "factory", "--partition", "iid"], "--partition iid"),
        (["--engine", "factory", "--factory", "edm", "--latent-dim", "4"], "--latent-dim"),
        (["--factory", "edm"], "--factory"),
        (["--fedavg-rounds", "2"], "--fedavg-rounds"),
        (["--engine", "factory", "--clients", "5"], "num_clients"),
        (["--engine", "factory", "--threads", "0"], "threads"),
    ],
)
def test_options_that_do_not_apply_are_refused(
    argv: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *argv, "--output-dir", str(tmp_path / "out")]) == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bad_partition_spec_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--partition", "dirichlet:x"])
    assert info.value.code == 2
    assert "expected iid" in capsys.readouterr().err


def _small_audit(seed: int) -> SyntheticReleaseAudit:
    rng = np.random.default_rng(seed)
    return audit_synthetic_release(
        rng.normal(size=(40, 3)), rng.normal(size=(40, 3)), rng.normal(size=(60, 3)), delta=1e-5
    )


def test_audit_summary_add_remove_game_and_validation() -> None:
    audit = _small_audit(0)
    kwargs = {"claimed_epsilon": 2.0, "claimed_delta": 1e-5, "claimed_mu": 0.5}
    s = audit_summary(audit, adjacency=Adjacency.ADD_REMOVE, **kwargs)
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
    summary = result.report.audit
    assert summary is not None and result.audit_inputs is not None
    claimed = summary["claimed"]
    assert claimed["adjacency"] == "add-remove"
    assert claimed["game_mu"] == 2 * result.report.mu
    # Noisy counts are released: the attack sees them rounded and floored at one.
    counts = result.audit_inputs["counts"]
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
