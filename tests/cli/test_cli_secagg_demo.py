"""The ``privfed secagg-demo`` subcommand."""

from __future__ import annotations

import subprocess
import sys

import pytest

from privfed.cli import main


def test_demo_complete_graph_reports_an_exact_sum(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["secagg-demo", "--clients", "6", "--length", "16", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 0
    assert "sum exact" in out
    assert "yes" in out.split("sum exact")[1].splitlines()[0]
    assert "client bytes sent: total" in out


def test_demo_harary_graph(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["secagg-demo", "--clients", "10", "--graph", "harary", "--degree", "4", "--length", "8"]
    )
    assert code == 0
    assert "harary (degree 4)" in capsys.readouterr().out


def test_demo_below_threshold_exits_nonzero(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "secagg-demo",
            "--clients",
            "5",
            "--threshold",
            "5",
            "--dropout-rate",
            "0.2",
            "--length",
            "4",
        ]
    )
    assert code == 1
    assert "protocol aborted" in capsys.readouterr().out


def test_demo_rejects_bad_rate() -> None:
    with pytest.raises(SystemExit):
        main(["secagg-demo", "--dropout-rate", "1.5"])


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run a command that must be refused; return its single stderr line.

    Usage errors found by argparse end in ``SystemExit(2)``, those found when
    the command runs in the return value 2; both must print exactly one line
    ``privfed secagg-demo: error: ...`` and no traceback, and do no work.
    """
    try:
        code = main(["secagg-demo", *argv])
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.out == ""
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("privfed secagg-demo: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--clients", "1"], "--clients"),
        (["--clients", "x"], "--clients"),
        (["--clients", "5", "--threshold", "9"], "--threshold"),
        (["--threshold", "1"], "--threshold"),
        (["--length", "0"], "--length"),
        (["--length", "2.5"], "--length"),
        (["--dropout-rate", "nan"], "--dropout-rate"),
        (["--dropout-rate", "1"], "--dropout-rate"),
        (["--seed", "-1"], "--seed"),
        (["--graph", "harary", "--clients", "5", "--degree", "3"], "--degree"),
        (["--graph", "harary", "--clients", "5", "--degree", "5"], "--degree"),
        (
            ["--graph", "harary", "--clients", "9", "--degree", "4", "--threshold", "6"],
            "--threshold",
        ),
        (["--graph", "harary", "--clients", "2"], "--clients"),
        (["--graph", "ring"], "--graph"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_the_option(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert option in _refused(argv, capsys)


def test_degree_is_refused_with_the_complete_graph(capsys: pytest.CaptureFixture[str]) -> None:
    """--degree only means something for --graph harary; it is not silently ignored."""
    line = _refused(["--clients", "6", "--degree", "4", "--length", "4"], capsys)
    assert "--degree" in line and "harary" in line
    assert _refused(["--graph", "complete", "--degree", "2"], capsys) == line


def test_the_script_prints_no_traceback() -> None:
    """As a process: one line on stderr, exit status 2 (numpy refused this seed before)."""
    proc = subprocess.run(
        [sys.executable, "-m", "privfed.cli", "secagg-demo", "--seed", "-5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("privfed secagg-demo: error: ") and "--seed" in line
