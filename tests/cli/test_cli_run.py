"""``privfed run``: options, both engines from the command line, the run directory."""


from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from privfed.cli import main
from privfed.cli.audit import AUDIT_INPUTS_FILENAME as CLI_FILENAME
from privfed.engines.latent.audit import (
    AUDIT_INPUTS_FILENAME,
)

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


def test_filename_matches_the_audit_cli() -> None:
    assert AUDIT_INPUTS_FILENAME == CLI_FILENAME


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
    argv.append("--no-audit")  # the factory engine's audit stage is switched off for speed
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
