"""Every CLI option with a bad value: exit 2, one line naming the flag, nothing written, no work.

The messages are in the command line's terms (flag names, never a Python
parameter, ``None``, an exception class or numpy's advice), and the value is
checked before any stage runs: the engines' job functions are replaced by ones
that fail the test if called.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

import privfed.engines.factory.job as factory_job
import privfed.engines.latent.job as latent_job
import privfed.secagg as secagg
from privfed.cli import build_parser, main

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
    (
        ["--engine", "factory", "--public-fraction", "0.6", "--test-fraction", "0.5"],
        "--public-fraction + --test-fraction",
    ),
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
    (["--engine", "factory", "--classifier", "resnet"], "--classifier"),
    (["--engine", "factory", "--mixture-components", "0"], "--mixture-components"),
    (["--threads", "0"], "--threads"),
    (["--repeats", "0"], "--repeats"),
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
    (["--engine", "gan"], "--engine"),
    (["--codec-kind", "vq"], "--codec-kind"),
    (["--engine", "factory", "--factory", "gan"], "--factory"),
    (["--device", "quantum"], "--device"),
    (["--baselines=yes"], "--baselines"),
    (["--no-baselines=yes"], "--no-baselines"),
    (["--no-audit=yes"], "--no-audit"),
    (["--overwrite=yes"], "--overwrite"),
    (["--release-only=yes"], "--release-only"),
    (["--quiet=yes"], "--quiet"),
    # Keyword settings quoted by the library become options too.
    (
        ["--noise", "distributed-gaussian", "--clients", "4", "--assumed-corrupted", "4"],
        "--secagg-mode semi-honest",
    ),
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
    (["--one-run", "DATA_MISSING"], "--one-run"),
    (["--one-run", "SCORES", "--one-run-selection", "best"], "--one-run-selection"),
    (["--scores", "SCORES", "--score-trials", "many"], "--score-trials"),
    (["--run-dir", "DATA_MISSING"], "--run-dir"),
    (["--self-audit=yes"], "--self-audit"),
    (["--scores", "SCORES", "--threshold-selection", "magic"], "--threshold-selection"),
    (["--scores", "SCORES", "--threshold-selection", "fixed", "--threshold", "nan"], "--threshold"),
    (
        ["--scores", "SCORES", "--threshold-selection", "bonferroni", "--thresholds", "1,,2"],
        "--thresholds",
    ),
    (["--self-audit", "--clip-norm", "-1"], "--clip-norm"),
    (["--self-audit", "--adjacency", "swap"], "--adjacency"),
    (["--self-audit", "--self-audit-mode", "dream"], "--self-audit-mode"),
    (["--self-audit", "--trials", "0"], "--trials"),
    (["--self-audit", "--calibration-trials", "0"], "--calibration-trials"),
    (["--scores", "SCORES", "--no-plot=yes"], "--no-plot"),
    (["--scores", "SCORES", "--no-scores=yes"], "--no-scores"),
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
    ([*_CALIBRATE_OK, "--private-labels=yes"], "--private-labels"),
    ([*_CALIBRATE_OK, "--json=yes"], "--json"),
]

_SECAGG: list[tuple[list[str], str]] = [
    (["--clients", "1"], "--clients"),
    (["--threshold", "1"], "--threshold"),
    (["--clients", "5", "--threshold", "6"], "--threshold"),
    (["--length", "0"], "--length"),
    (["--dropout-rate", "1"], "--dropout-rate"),
    (["--graph", "ring"], "--graph"),
    (["--degree", "1"], "--degree"),
    (["--degree", "4"], "--degree"),  # the complete graph has no degree
    (["--seed", "-1"], "--seed"),
    (["--quiet=yes"], "--quiet"),
]

#: Every case, as (subcommand, argv, the flag the message must name).
_CASES = (
    [("run", a, f) for a, f in _RUN]
    + [("audit", a, f) for a, f in _AUDIT]
    + [("calibrate", a, f) for a, f in _CALIBRATE]
    + [("secagg-demo", a, f) for a, f in _SECAGG]
)

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
    "got 'array'",
    "got None",
)


def _materialise(argv: list[str], tmp_path: Path) -> list[str]:
    text = tmp_path / "data.txt"
    text.write_text("not an archive\n")
    npz = tmp_path / "data.npz"
    npz.write_text("not an archive either\n")
    scores = tmp_path / "scores.npz"
    np.savez(scores, member_scores=np.arange(40.0), nonmember_scores=np.arange(40.0) - 2)
    array = tmp_path / "array.npz"
    np.savez(array, np.zeros((4, 8, 8)))  # numpy names it 'arr_0'
    names = {
        "DATA_ARRAY": str(array),
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
    monkeypatch.setattr(secagg, "run_protocol", refuse)


@pytest.mark.parametrize(
    ("command", "argv", "flag"),
    _CASES,
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


def _options_of(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Subcommand -> every option string it accepts (``--help`` aside)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name: [
            flag
            for action in child._actions
            for flag in action.option_strings
            if flag not in ("-h", "--help")
        ]
        for name, child in sub.choices.items()
    }


def test_every_option_of_every_subcommand_has_a_bad_value_case() -> None:
    """The table above covers each option the parser knows (a new option needs a case)."""
    for command, flags in _options_of(build_parser()).items():
        given = {item.split("=")[0] for c, argv, _ in _CASES if c == command for item in argv}
        missing = [flag for flag in flags if flag not in given]
        assert not missing, (command, missing)


def test_help_describes_every_option_without_rest_markup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, child in sub.choices.items():
        for action in child._actions:
            assert action.help, (name, action.option_strings)
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = capsys.readouterr().out
        assert "``" not in text, name
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for described in (
        "--engine {latent,factory} latent:",
        "--seed SEED experimental-design",
        "--quiet no progress",
    ):
        assert described in text, described


def test_too_small_an_epsilon_fails_before_any_client_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The noise the grid cannot hold is found at the codec stage, in the CLI's terms."""
    from tiny_args import TINY_CLI

    argv = [a for a in TINY_CLI if a != "--quiet"]
    out = tmp_path / "out"
    assert main([*argv, "--epsilon", "0.01", "--no-audit", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "--epsilon 0.01" in errors[0], err
    for term in _PYTHON_TERMS:
        assert term not in errors[0], term
    assert "] clients " not in err and "] secagg " not in err  # those stages never started
    assert not out.exists()


@pytest.mark.parametrize(
    "env",
    [{"HF_HUB_OFFLINE": "1"}, {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}],
    ids=["HF_HUB_OFFLINE", "unreachable-endpoint"],
)
def test_an_offline_hub_id_fails_fast_naming_the_network(
    env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_work: None,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    out = tmp_path / "out"
    argv = ["run", "--codec", "madebyollin/taesd", "--codec-kind", "tiny"]
    assert main([*argv, "--output-dir", str(out), "--quiet"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("privfed run: error: --codec ")
    assert "network" in line and "save_pretrained" in line and "config.json" not in line
    assert not out.exists()


def test_audit_without_matplotlib_suggests_no_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    argv = _materialise(["--scores", "SCORES"], tmp_path)
    assert main(["audit", *argv, "--out", str(tmp_path / "out")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "privfed[plots]" in line and "--no-plot" in line
    assert not (tmp_path / "out").exists()


def test_a_torch_engine_without_torch_names_the_extra() -> None:
    """The cores-only install: a lazily exported engine name says what to install."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "try:\n    from privfed.engines.latent import PipelineConfig\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.startswith("MissingDependencyError"), done.stdout + done.stderr
    assert "privfed[engines]" in done.stdout


def test_float_inputs_to_secure_aggregation_point_to_fixed_point() -> None:
    from privfed.errors import ParameterTypeError

    with pytest.raises(ParameterTypeError, match="FixedPointConfig"):
        secagg.run_protocol([np.zeros(3, np.float32)] * 3, threshold=2)


def test_an_archive_without_images_says_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read at the data stage (the archive is opened there), still in the CLI's terms."""
    from tiny_args import TINY_CLI

    out = tmp_path / "out"
    argv = _materialise(["--dataset", "DATA_ARRAY"], tmp_path)
    assert main([*TINY_CLI, *argv, "--output-dir", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("privfed run: error: --dataset ") and "'images'" in line, line
    for term in _PYTHON_TERMS:
        assert term not in line, term
    assert not out.exists()
