"""Tests of ``privfed audit`` and of the report writer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privfed.audit import membership_metrics, write_audit_report
from privfed.cli import build_parser
from privfed.cli.audit import _DEFAULTS, AUDIT_INPUTS_FILENAME
from privfed.errors import ParameterError, ParameterTypeError


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(["audit", *argv])
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


@pytest.mark.slow
def test_self_audit_passes_and_catches_half_noise(tmp_path: Path) -> None:
    base = ["--self-audit", "--epsilon", "2", "--dim", "4", "--trials", "20000",
            "--calibration-trials", "5000", "--no-plot", "--significance", "0.01"]  # fmt: skip
    assert _run([*base, "--out", str(tmp_path / "ok")]) == 0
    document = json.loads((tmp_path / "ok" / "audit.json").read_text())
    (entry,) = document["canary"]
    assert entry["mu_lower_bound"] <= entry["claimed_mu"]
    assert _run([*base, "--noise-scale", "0.5", "--out", str(tmp_path / "bad")]) == 3


_REAL = "release code: privfed.engines.latent.release.release_latent_statistics"
_SIMULATED = "simulated: checks the accounting arithmetic only, not the release code"


@pytest.mark.slow
def test_self_audit_runs_the_real_release_by_default(tmp_path: Path) -> None:
    # Default mode and default trials (50,000 + 12,500 per hypothesis of the real
    # release; ~4 s at d = 2).  α = 0.01 per bound, fixed seed: false-failure rate ≤ 2 %.
    out = tmp_path / "real"
    argv = ["--self-audit", "--epsilon", "2", "--dim", "2", "--no-plot", "--significance",
            "0.01", "--out", str(out)]  # fmt: skip
    assert _run(argv) == 0
    document = json.loads((out / "audit.json").read_text())
    (entry,) = document["canary"]
    assert entry["mode"] == "release-code" and entry["simulated"] is False
    assert entry["audited"].startswith(_REAL)
    assert (entry["num_trials"], entry["num_calibration_trials"]) == (50_000, 12_500)
    assert document["metadata"]["self_audit_mode"] == "real"
    assert document["metadata"]["self_audit_audits"] == entry["audited"]
    assert _REAL in (out / "audit.md").read_text()


def test_self_audit_mode_simulated_is_labelled(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    argv = ["--self-audit", "--self-audit-mode", "simulated", "--epsilon", "2", "--dim", "4",
            "--no-plot", "--out", str(out)]  # fmt: skip
    assert _run(argv) == 0
    document = json.loads((out / "audit.json").read_text())
    (entry,) = document["canary"]
    assert entry["mode"] == "sufficient-statistic" and entry["simulated"] is True
    assert entry["audited"] == _SIMULATED
    assert (entry["num_trials"], entry["num_calibration_trials"]) == (200_000, 50_000)
    assert document["metadata"]["self_audit_mode"] == "simulated"
    assert _SIMULATED in (out / "audit.md").read_text()
    # The simulated audit also catches a simulated half-noise release (exit status 3).
    assert _run([*argv, "--noise-scale", "0.5", "--out", str(tmp_path / "bad")]) == 3


def test_self_audit_mode_from_config_and_refused_when_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"self_audit": True, "self_audit_mode": "simulated",
                                  "epsilon": "2", "dim": 4, "no_plot": True}))  # fmt: skip
    assert _run(["--config", str(config), "--out", str(tmp_path / "a")]) == 0
    document = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert document["canary"][0]["audited"] == _SIMULATED
    config.write_text(json.dumps({"self_audit": True, "self_audit_mode": "pretend"}))
    line = _refused(["--config", str(config), "--out", str(tmp_path / "b")], capsys)
    assert "--self-audit-mode" in line
    assert not (tmp_path / "b").exists()


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


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``privfed audit`` expecting a refusal; return its single stderr line.

    argparse refusals end in ``SystemExit(2)``, later ones in the return value
    2; either way exactly one line ``privfed audit: error: ...``, no traceback.
    """
    try:
        code = _run(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("privfed audit: error: ")
    return lines[0]


def _help_entries(text: str) -> dict[str, str]:
    """Option -> its whole help entry (wrapped lines joined) in ``--help`` output."""
    entries: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("  -"):
            current = line.split()[0].rstrip(",")
            entries[current] = line.strip()
        elif current is not None and line.startswith("   "):
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


def test_help_states_the_defaults_of_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--help`` and the defaults actually used (``_DEFAULTS``) cannot disagree."""
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping inside a value
    with pytest.raises(SystemExit):
        build_parser().parse_args(["audit", "--help"])
    text = capsys.readouterr().out
    assert "(default: None)" not in text
    entries = _help_entries(text)
    checked = 0
    for key, value in _DEFAULTS.items():
        option = "--" + key.replace("_", "-")
        assert option in entries, option
        if value is None or isinstance(value, bool):
            continue
        found = re.search(r"\(default: ([^)]*)\)", entries[option])
        assert found is not None, entries[option]
        shown = found.group(1)
        if isinstance(value, str):
            assert shown == value, (option, shown, value)
        else:
            assert type(value)(shown) == value, (option, shown, value)
        checked += 1
    assert checked >= 10  # out, delta, significance, confidence, fprs, seed, ...


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--fprs", "1e-1,,1e-3"], "--fprs"),
        (["--fprs", "0.1,"], "--fprs"),
        (["--fprs", "0.1,nan"], "--fprs"),
        (["--fprs", "0.1,2"], "--fprs"),
        (["--threshold-selection", "bonferroni", "--thresholds", "0,,1"], "--thresholds"),
        (["--threshold-selection", "bonferroni", "--thresholds", "0,inf"], "--thresholds"),
        (["--threshold-selection", "fixed", "--threshold", "nan"], "--threshold"),
        (["--self-audit", "--epsilon", "1,,4"], "--epsilon"),
        (["--self-audit", "--epsilon", "1,-4"], "--epsilon"),
        (["--self-audit", "--epsilon", "1,inf"], "--epsilon"),
        (["--self-audit", "--epsilon", "nan"], "--epsilon"),
        (["--delta", "nan"], "--delta"),
        (["--delta", "abc"], "--delta"),
        (["--significance", "inf"], "--significance"),
        (["--confidence", "1.5"], "--confidence"),
        (["--calibration-fraction", "nan"], "--calibration-fraction"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_bad_lists_and_numbers_are_refused_before_any_work(
    argv: list[str],
    option: str,
    tmp_path: Path,
    score_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing is skipped silently (``1,,4`` is not ``1,4``) and NaN/inf/out-of-range fail."""
    out = tmp_path / "out"
    small = ["--trials", "1000", "--calibration-trials", "1000"]  # should a refusal regress
    line = _refused(
        ["--scores", str(score_file), "--no-plot", "--out", str(out), *small, *argv], capsys
    )
    assert option in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("config", "option"),
    [
        ({"scores": 5}, "--scores"),
        ({"delta": "abc"}, "--delta"),
        ({"no_plot": "yes"}, "--no-plot"),
        ({"fprs": [0.1, None]}, "--fprs"),
        ({"epsilon": "1,,4", "self_audit": True}, "--epsilon"),
    ],
)
def test_a_bad_config_value_names_the_option(
    config: dict[str, object],
    option: str,
    tmp_path: Path,
    score_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "audit.json"
    path.write_text(json.dumps({"scores": str(score_file), **config}))
    assert option in _refused(["--config", str(path), "--out", str(tmp_path / "o")], capsys)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ["[" * 100_000, '{"seed": ' + "1" * 5_000 + "}"])
def test_a_config_json_cannot_hold_is_refused_in_one_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.json"
    path.write_text(text)
    assert "cannot read --config" in _refused(["--config", str(path)], capsys)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("corrupt.npz", b"PK\x03\x04 not really a zip archive"),
        ("latin1.csv", b"score,member\n\xe9,1\n"),
        ("short.csv", b"score,member\n1.0\n"),
        ("nameless.csv", b"score,member\n,1\n"),
    ],
)
def test_an_unreadable_score_file_is_one_line_naming_it(
    name: str, content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    line = _refused(["--scores", str(path), "--no-plot", "--out", str(tmp_path / "o")], capsys)
    assert str(path) in line


def test_an_out_that_is_a_file_is_refused_before_any_work(
    tmp_path: Path, score_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "taken"
    out.write_text("not a directory")
    line = _refused(["--scores", str(score_file), "--no-plot", "--out", str(out)], capsys)
    assert "--out" in line
    assert out.read_text() == "not a directory"


def _audit_without_matplotlib(argv: list[str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from privfed.cli import main\n"
        f"sys.exit(main(['audit', *{argv!r}]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_missing_matplotlib_is_named_before_any_work(tmp_path: Path, score_file: Path) -> None:
    out = tmp_path / "out"
    proc = _audit_without_matplotlib(["--scores", str(score_file), "--out", str(out)])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("privfed audit: error: ")
    assert "pip install 'privfed[plots]'" in line and "roc.png" in line
    assert not out.exists()


@pytest.mark.slow
def test_no_plot_needs_no_matplotlib(tmp_path: Path, score_file: Path) -> None:
    out = tmp_path / "out"
    proc = _audit_without_matplotlib(["--scores", str(score_file), "--out", str(out), "--no-plot"])
    assert proc.returncode == 0, proc.stderr
    assert (out / "audit.json").is_file() and not (out / "roc.png").exists()
