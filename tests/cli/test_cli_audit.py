"""Tests of ``privfed audit`` and of the report writer."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from privfed.audit import membership_metrics, write_audit_report
from privfed.cli.audit import AUDIT_INPUTS_FILENAME, register
from privfed.errors import ParameterError, ParameterTypeError


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="privfed")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["audit", *argv])
    return int(args.func(args))


@pytest.fixture
def score_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path / "scores.npz"
    np.savez(path, member_scores=rng.normal(1, 1, 600), nonmember_scores=rng.normal(0, 1, 600))
    return path


@pytest.mark.slow  # imports matplotlib and renders a plot
def test_scores_npz_writes_all_outputs(tmp_path: Path, score_file: Path) -> None:
    out = tmp_path / "out"
    assert _run(["--scores", str(score_file), "--out", str(out)]) == 0
    document = json.loads((out / "audit.json").read_text())
    assert document["schema"] == "privfed.audit/1"
    auc = document["attacks"]["scores"]["auc"]
    assert auc["lower"] < auc["estimate"] < auc["upper"]
    assert document["bounds"]["scores"]["selection"] == "held-out"
    assert len(document["scores"]["scores"]["member"]) == 600
    assert (out / "roc.png").stat().st_size > 1000
    assert "Empirical privacy lower bounds" in (out / "audit.md").read_text()


def test_scores_csv_fixed_threshold_no_plot(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    rows = ["score,member"] + [f"{s},1" for s in (2.0, 1.5, 3.0)] + [f"{s},0" for s in (0.1, -1)]
    path.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    code = _run(
        ["--scores", str(path), "--out", str(out), "--threshold-selection", "fixed",
         "--threshold", "1.0", "--no-plot", "--no-scores"]
    )  # fmt: skip
    assert code == 0
    document = json.loads((out / "audit.json").read_text())
    assert document["bounds"]["scores"]["false_positives"] == 0
    assert document["bounds"]["scores"]["false_negatives"] == 0
    assert document["scores"] == {}
    assert not (out / "roc.png").exists()


def test_run_dir_audit(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    members = rng.normal(size=(120, 4))
    np.savez(
        tmp_path / AUDIT_INPUTS_FILENAME,
        member_latents=members,
        nonmember_latents=rng.normal(size=(160, 4)),
        synthetic_latents=members + 0.01 * rng.normal(size=members.shape),
        member_labels=rng.integers(0, 2, 120),
        nonmember_labels=rng.integers(0, 2, 160),
        synthetic_labels=rng.integers(0, 2, 120),
    )
    out = tmp_path / "out"
    assert _run(["--run-dir", str(tmp_path), "--out", str(out), "--no-plot"]) == 0
    document = json.loads((out / "audit.json").read_text())
    assert set(document["attacks"]) == {
        "dcr",
        "domias-gaussian",
        "domias-kde",
        "latent-gaussian-lr",
    }
    assert document["attacks"]["dcr"]["auc"]["lower"] > 0.9


def test_self_audit_passes_and_catches_half_noise(tmp_path: Path) -> None:
    base = ["--self-audit", "--epsilon", "2", "--dim", "4", "--trials", "20000",
            "--calibration-trials", "5000", "--no-plot", "--significance", "0.01"]  # fmt: skip
    assert _run([*base, "--out", str(tmp_path / "ok")]) == 0
    document = json.loads((tmp_path / "ok" / "audit.json").read_text())
    (entry,) = document["canary"]
    assert entry["mu_lower_bound"] <= entry["claimed_mu"]
    assert _run([*base, "--noise-scale", "0.5", "--out", str(tmp_path / "bad")]) == 3


def test_config_file_and_flag_precedence(tmp_path: Path, score_file: Path) -> None:
    config = tmp_path / "audit.json"
    config.write_text(json.dumps({"scores": str(score_file), "delta": 1e-6, "no_plot": True}))
    out = tmp_path / "out"
    assert _run(["--config", str(config), "--out", str(out), "--delta", "1e-4"]) == 0
    document = json.loads((out / "audit.json").read_text())
    assert document["bounds"]["scores"]["delta"] == 1e-4
    assert not (out / "roc.png").exists()


def test_usage_errors_exit_2(
    tmp_path: Path, score_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["--out", str(tmp_path)]) == 2
    assert _run(["--scores", str(score_file), "--threshold-selection", "fixed"]) == 2
    bad_config = tmp_path / "c.json"
    bad_config.write_text(json.dumps({"colour": "blue"}))
    assert _run(["--config", str(bad_config)]) == 2
    assert _run(["--run-dir", str(tmp_path)]) == 2
    assert _run(["--scores", str(tmp_path / "missing.npz")]) == 2
    assert "privfed audit: error" in capsys.readouterr().err


def test_report_writer_validates_before_writing(tmp_path: Path) -> None:
    metrics = membership_metrics([1.0, 2.0, 3.0], [0.0, 1.5, -1.0])
    with pytest.raises(ParameterTypeError):
        write_audit_report(tmp_path / "x", attacks={"a": metrics}, bounds={"b": 1.0})  # type: ignore[dict-item]
    assert not (tmp_path / "x").exists()
    with pytest.raises(ParameterError):
        write_audit_report(tmp_path / "y")
    paths = write_audit_report(tmp_path / "z", attacks={"a": metrics}, plot=False)
    assert paths.roc_plot is None and paths.json.exists()
