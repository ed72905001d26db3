"""``privfed run``: options, both engines from the command line, the run directory."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tiny_args import TINY_CLI

import privfed.engines.latent.job as latent_job
from privfed.cli import main
from privfed.cli.audit import AUDIT_INPUTS_FILENAME as CLI_FILENAME
from privfed.engines.latent.audit import (
    AUDIT_INPUTS_FILENAME,
)


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
    report = json.loads((run_dir / "evaluation.json").read_text())
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
    report = json.loads((tmp_path / "evaluation.json").read_text())
    assert report["audit"] is None and "audit" not in report["seconds"]
    release = json.loads((tmp_path / "release.json").read_text())
    assert release["public"]["config"]["audit"] is False
    assert not (tmp_path / AUDIT_INPUTS_FILENAME).exists()


def test_engine_factory_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--engine", "factory", "--samples-per-class", "10", "--epochs", "1"]
    argv += ["--fedavg-rounds", "1", "--no-baselines", "--seed", "3", "--output-dir", str(tmp_path)]
    argv.append("--no-audit")  # the factory engine's audit stage is switched off for speed
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "accuracy, synthetic (factories)" in out and "factories" in out
    release = json.loads((tmp_path / "release.json").read_text())
    report = json.loads((tmp_path / "evaluation.json").read_text())
    assert release["engine"] == "factory" and report["engine"] == "factory"
    config = release["public"]["config"]
    assert config["scenario"] == "single-class"
    assert config["factory"] == "gaussian"
    assert config["num_clients"] == 10 and config["seed"] == 3
    assert config["fedavg_rounds"] == 1 and config["centralized"] is False
    assert report["num_factories"] == 10 and report["centralized_accuracy"] is None
    assert 0.0 <= report["factory_accuracy"] <= 1.0
    assert config.get("audit", False) is False
    assert release["dp"]["guarantee"] is None
    assert "no differential privacy" in release["dp"]["warning"]
    assert (tmp_path / "samples.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--engine", "factory", "--codec", "pca"], "--codec"),
        (["--engine", "factory", "--delta", "1e-6"], "--delta"),
        (["--engine", "factory", "--noise-seed", "1"], "--noise-seed"),
        (["--engine", "factory", "--partition", "iid"], "--partition iid"),
        (["--engine", "factory", "--factory", "edm", "--latent-dim", "4"], "--latent-dim"),
        (["--factory", "edm"], "--factory"),
        (["--fedavg-rounds", "2"], "--fedavg-rounds"),
        (["--engine", "factory", "--clients", "5"], "--clients must be an int >= 10"),
        (["--engine", "factory", "--threads", "0"], "--threads: must be an integer >= 1"),
    ],
)
def test_options_that_do_not_apply_are_refused(
    argv: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["run", *argv, "--output-dir", str(tmp_path / "out")])
    except SystemExit as exc:  # a bad value is refused by argparse itself
        code = exc.code
    assert code == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bad_partition_spec_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--partition", "dirichlet:x"])
    assert info.value.code == 2
    assert "expected iid" in capsys.readouterr().err


def _one_line_error(err: str) -> str:
    """The single stderr line of a refused command (no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.slow
def test_the_main_command_runs_twice_in_a_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Quickstart pattern (`make run` passes --overwrite) works on a second run."""
    out = tmp_path / "run"
    argv = [*TINY_CLI, "--no-audit", "--output-dir", str(out)]
    assert main(argv) == 0
    first = (out / "release.json").read_text()
    capsys.readouterr()
    start = time.perf_counter()
    assert main(argv) == 2  # refused before any work: the directory holds a run
    assert time.perf_counter() - start < 5.0
    line = _one_line_error(capsys.readouterr().err)
    assert "--output-dir" in line and "--overwrite" in line
    assert main([*argv, "--overwrite"]) == 0
    assert json.loads((out / "release.json").read_text()).keys() == json.loads(first).keys()


def test_rerun_without_audit_removes_the_earlier_audit_inputs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / AUDIT_INPUTS_FILENAME).write_bytes(b"latents of real records")  # an earlier run
    (out / "report.json").write_text("{}")
    assert main([*TINY_CLI, "--no-audit", "--output-dir", str(out), "--overwrite"]) == 0
    assert not (out / AUDIT_INPUTS_FILENAME).exists()
    assert not (out / "report.json").exists()
    assert (out / "release.json").is_file() and (out / "evaluation.json").is_file()


def test_release_only_writes_just_the_release(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main([*TINY_CLI, "--release-only", "--output-dir", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "ledger.json",
        "model_card.json",
        "model_card.md",
        "release.json",
        "samples.png",
        "synthetic.npz",
    ]


@pytest.mark.parametrize("where", ["file", "under-file"])
def test_an_output_dir_that_is_or_lies_under_a_file_is_refused_before_work(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    target = afile if where == "file" else afile / "run"
    start = time.perf_counter()
    assert main([*TINY_CLI, "--output-dir", str(target)]) == 2
    assert time.perf_counter() - start < 5.0
    line = _one_line_error(capsys.readouterr().err)
    assert line.startswith("privfed run: error: --output-dir") and "a file" in line
    assert afile.read_text() == "x"


@pytest.mark.parametrize(
    ("device", "expected"),
    [("gpu", "'cpu', 'cuda' or 'cuda:N'"), ("cuda", "no CUDA device"), ("", "--device")],
)
def test_bad_devices_get_one_line(
    device: str,
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = main([*TINY_CLI, "--device", device, "--output-dir", str(tmp_path / "run")])
    assert code == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "--device" in line and expected in line
    assert not (tmp_path / "run").exists()


def test_ctrl_c_prints_one_line_and_leaves_no_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(latent_job, "run_pipeline", interrupted)
    assert main([*TINY_CLI, "--output-dir", str(tmp_path / "run")]) == 130
    assert _one_line_error(capsys.readouterr().err) == "privfed run: interrupted"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("module", "extra"), [("torch", "engines")])
def test_a_missing_extra_is_named(module: str, extra: str, tmp_path: Path) -> None:
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from privfed.cli import main\n"
        f"sys.exit(main(['run', '--output-dir', {str(tmp_path / 'run')!r}]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stderr
    line = _one_line_error(proc.stderr)
    assert f"pip install 'privfed[{extra}]'" in line and repr(module) in line


@pytest.mark.slow
def test_run_needs_no_matplotlib(tmp_path: Path) -> None:
    """samples.png is written by privfed's own PNG encoder (matplotlib once cost ~1.5 s per run).

    (``privfed audit``'s roc.png still needs matplotlib: tests/cli/test_cli_audit.py checks
    that its absence is named before any work.)
    """
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from privfed.cli import main\n"
        f"sys.exit(main({[*TINY_CLI, '--output-dir', str(tmp_path / 'run')]!r}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    png = (tmp_path / "run" / "samples.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and b"IEND" in png[-12:]


def _npz(path: Path, labels: np.ndarray) -> Path:
    from privfed.data import load_digits

    digits = load_digits()
    n = labels.size
    np.savez(path, images=np.asarray(digits.images[:n]), labels=labels)
    return path


def test_a_stray_label_is_refused_with_the_option_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = np.tile(np.arange(10), 30)
    labels[7] = 255
    data = _npz(tmp_path / "stray.npz", labels)
    assert main([*TINY_CLI, "--dataset", str(data), "--output-dir", str(tmp_path / "a")]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "--dataset" in line or "--num-classes" in line
    argv = [*TINY_CLI, "--dataset", str(data), "--num-classes", "10"]
    code = main([*argv, "--output-dir", str(tmp_path / "b")])
    assert code == 2
    assert "--num-classes" in _one_line_error(capsys.readouterr().err)


def test_single_class_data_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _npz(tmp_path / "one.npz", np.zeros(200, dtype=np.int64))
    assert main([*TINY_CLI, "--dataset", str(data), "--output-dir", str(tmp_path / "a")]) == 2
    assert "--dataset" in _one_line_error(capsys.readouterr().err)


@pytest.mark.slow
def test_the_factory_engine_takes_a_dataset(tmp_path: Path) -> None:
    data = _npz(tmp_path / "d.npz", np.tile(np.arange(10), 60))
    argv = ["run", "--engine", "factory", "--dataset", str(data), "--samples-per-class", "10"]
    argv += ["--epochs", "1", "--fedavg-rounds", "1", "--no-baselines", "--no-audit", "--quiet"]
    assert main([*argv, "--output-dir", str(tmp_path / "run")]) == 0
    release = json.loads((tmp_path / "run" / "release.json").read_text())
    assert release["public"]["config"]["dataset"] == str(data)
    evaluation = json.loads((tmp_path / "run" / "evaluation.json").read_text())
    assert sum(map(sum, evaluation["class_counts"])) < 600  # the file's records, not digits'


def test_help_shows_the_configs_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.engines.latent.config import PipelineConfig

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    latent, factory = PipelineConfig(), FactoryPipelineConfig()
    assert f"clients (default {latent.num_clients} latent, {factory.num_clients} factory)" in text
    assert f"(default {latent.latent_dim} latent, {factory.latent_dim} factory)" in text
    assert f"cell (default {latent.epsilon:g} latent, none factory)" in text
    assert f"FedAvg rounds (default {factory.fedavg_rounds})" in text
    fractions = f"{latent.public_fraction:g} latent, {factory.public_fraction:g} factory"
    assert f"(default {fractions})" in text
    assert "{default}" not in text
