"""The ``privfed secagg-demo`` subcommand."""

from __future__ import annotations

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
