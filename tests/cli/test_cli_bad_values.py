"""Every CLI option with a bad value: exit 2, one line naming the flag, nothing written, no work.

The messages are in the command line's terms (flag names, never a Python
parameter, ``None``, an exception class or numpy's advice), and the value is
checked before any stage runs: the engines' job functions are replaced by ones
that fail the test if called.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import privfed.engines.factory.job as factory_job
import privfed.engines.latent.job as latent_job
from privfed.cli import main

# (argv after the subcommand, the flag the message must name)
_RUN: list[tuple[list[str], str]] = [
    (["--noise-seed=-5"], "--noise-seed"),
    (["--noise-seed", "x"], "--noise-seed"),
    (["--seed", "-1"], "--seed"),
    (["--num-classes", "0"], "--num-classes"),
    (["--num-classes", "two"], "--num-classes"),
    (["--public-fraction", "2"], "--public-fraction"),
    (["--test-fraction", "0"], "--test-fraction"),
    (["--public-fraction", "0.6", "--test-fraction", "0.5"], "--public-fraction + --test-fraction"),
    (["--engine", "factory", "--public-fraction", "0.6", "--test-fraction", "0.5"],
     "--public-fraction + --test-fraction"),
    (["--partition", "dirichlet:-1"], "--partition"),
    (["--partition", "pathological:0"], "--partition"),
    (["--partition", "ring"], "--partition"),
    (["--clients", "1"], "--clients"),
    (["--latent-dim", "0"], "--latent-dim"),
    (["--clip-norm", "-1"], "--clip-norm"),
    (["--epsilon", "nan"], "--epsilon"),
    (["--epsilon", "0"], "--epsilon"),
    (["--delta", "1"], "--delta"),
    (["--dropout-rate", "0.5"], "--dropout-rate"),
    (["--samples-per-class", "0"], "--samples-per-class"),
    (["--epochs", "0"], "--epochs"),
    (["--engine", "factory", "--fedavg-rounds", "-1"], "--fedavg-rounds"),
    (["--threads", "0"], "--threads"),
    (["--assumed-corrupted", "-1"], "--assumed-corrupted"),
    (["--noise", "local"], "--noise"),
    (["--adjacency", "swap"], "--adjacency"),
    (["--secagg-mode", "evil"], "--secagg-mode"),
    (["--engine", "latent", "--factory", "edm"], "--factory"),
    (["--codec", "pca", "--codec-kind", "kl"], "--codec-kind"),
    (["--codec", "some/model-dir"], "--codec-kind"),
    (["--dataset", "DATA_TXT"], "--dataset"),
    (["--dataset", "DATA_MISSING"], "--dataset"),
    (["--model-card-config", "DATA_MISSING"], "--model-card-config"),
    (["--output-dir", "/proc/privfed-x"], "--output-dir"),
    (["--eps", "3"], "--eps"),  # no abbreviations
]

_AUDIT: list[tuple[list[str], str]] = [
    (["--scores", "SCORES", "--delta", "2"], "--delta"),
    (["--scores", "SCORES", "--significance", "0"], "--significance"),
    (["--scores", "SCORES", "--confidence", "1"], "--confidence"),
    (["--scores", "SCORES", "--fprs", "0.1,2"], "--fprs"),
    (["--scores", "SCORES", "--seed", "-1"], "--seed"),
    (["--scores", "SCORES", "--splits", "0"], "--splits"),
    (["--scores", "SCORES", "--calibration-fraction", "1"], "--calibration-fraction"),
    (["--scores", "DATA_MISSING"], "--scores"),
    (["--scores", "DATA_TXT"], "--scores"),
    (["--config", "DATA_MISSING"], "--config"),
    (["--scores", "SCORES", "--out", "/proc/privfed-x"], "--out"),
    (["--self-audit", "--epsilon", "-1"], "--epsilon"),
    (["--self-audit", "--dim", "0"], "--dim"),
    (["--self-audit", "--noise-scale", "-1"], "--noise-scale"),
]

_CALIBRATE_OK = ["--epsilon", "1", "--delta", "1e-5", "--clip-norm", "1", "--dim", "4"]
_CALIBRATE: list[tuple[list[str], str]] = [
    (["--epsilon", "0", *_CALIBRATE_OK[2:]], "--epsilon"),
    ([*_CALIBRATE_OK[:2], "--delta", "1", *_CALIBRATE_OK[4:]], "--delta"),
    ([*_CALIBRATE_OK[:4], "--clip-norm", "0", *_CALIBRATE_OK[6:]], "--clip-norm"),
    ([*_CALIBRATE_OK[:6], "--dim", "0"], "--dim"),
    ([*_CALIBRATE_OK, "--split", "2"], "--split"),
    ([*_CALIBRATE_OK, "--adjacency", "swap"], "--adjacency"),
    ([*_CALIBRATE_OK[:2], "--del", "1e-5", *_CALIBRATE_OK[4:]], "--del"),
]

#: Python's words that must never reach a command-line user.
_PYTHON_TERMS = (
    "None",
    "parameter '",
    "Error)",
    "allow_pickle",
    "NoisePlacement",
    "fractional_bits",
    "Traceback",
    "Errno",
)


def _materialise(argv: list[str], tmp_path: Path) -> list[str]:
    text = tmp_path / "data.txt"
    text.write_text("not an archive\n")
    npz = tmp_path / "data.npz"
    npz.write_text("not an archive either\n")
    scores = tmp_path / "scores.npz"
    np.savez(scores, member_scores=np.arange(40.0), nonmember_scores=np.arange(40.0) - 2)
    names = {
        "DATA_TXT": str(npz if "--dataset" in argv else text),
        "DATA_MISSING": str(tmp_path / "missing.json"),
        "SCORES": str(scores),
    }
    return [names.get(item, item) for item in argv]


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stage ran although an option was bad")

    monkeypatch.setattr(latent_job, "run_pipeline", refuse)
    monkeypatch.setattr(factory_job, "run_factory_pipeline", refuse)


@pytest.mark.parametrize(
    ("command", "argv", "flag"),
    [("run", a, f) for a, f in _RUN]
    + [("audit", a, f) for a, f in _AUDIT]
    + [("calibrate", a, f) for a, f in _CALIBRATE],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_a_bad_value_is_one_line_naming_the_flag(
    command: str,
    argv: list[str],
    flag: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_work: None,
) -> None:
    out = tmp_path / "out"
    full = [command, *_materialise(argv, tmp_path)]
    if command == "run" and "--output-dir" not in argv:
        full += ["--output-dir", str(out), "--quiet"]
    if command == "audit" and "--out" not in argv:
        full += ["--out", str(out), "--no-plot"]
    try:
        code = main(full)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    # Unknown options (an abbreviation) are reported by the top-level parser.
    prefix = "privfed: error: unrecognized" if flag in ("--eps", "--del") else f"privfed {command}"
    assert lines[0].startswith(prefix), err
    assert ": error: " in lines[0], err
    assert flag in lines[0], err
    for term in _PYTHON_TERMS:
        assert term not in lines[0], (term, err)
    assert not out.exists()


def test_python_errors_speak_python(tmp_path: Path) -> None:
    """The library's messages name keyword arguments, not CLI flags."""
    from privfed.engines.job import check_output_dir
    from privfed.engines.latent.config import PipelineConfig
    from privfed.errors import ParameterError

    (tmp_path / "x").write_text("earlier run")
    with pytest.raises(ParameterError) as caught:
        check_output_dir(tmp_path)
    assert "overwrite=True" in str(caught.value) and "--overwrite" not in str(caught.value)
    with pytest.raises(ParameterError, match="noise_seed") as caught:
        PipelineConfig(noise_seed=-5)
    assert "-5" not in str(caught.value)  # the noise seed is secret


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--epsilon", "1e300"], "--epsilon 1e+300 is above 50"),
        (["--delta", "0.5"], "--delta 0.5 is >= 1/n"),
        (["--assumed-corrupted", "1"], "--assumed-corrupted has no effect"),
    ],
)
def test_surely_wrong_settings_warn_in_one_line_and_the_run_goes_on(
    argv: list[str],
    fragment: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[object] = []

    def stop(config: object, **kwargs: object) -> None:
        ran.append(config)
        raise KeyboardInterrupt  # the run went on to its first stage

    monkeypatch.setattr(latent_job, "run_pipeline", stop)
    code = main(["run", *argv, "--output-dir", str(tmp_path / "out"), "--quiet"])
    assert code == 130 and ran
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and fragment in warnings[0], warnings


def test_progress_goes_to_stderr_and_results_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiny_args import TINY_CLI

    argv = [a for a in TINY_CLI if a != "--quiet"]
    assert main([*argv, "--no-audit", "--output-dir", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "release (DP outputs" in captured.out
    assert "s] " not in captured.out  # no "[  1.2s] stage" line among the results
    assert "s] " in captured.err
