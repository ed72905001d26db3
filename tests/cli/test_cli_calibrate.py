"""The ``privfed calibrate`` subcommand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from privfed.cli import main
from privfed.dp import Adjacency
from privfed.engines.moments.planning import paper_baseline_noise_stds, plan_latent_release


def test_json_output_matches_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["calibrate", "--epsilon", "10", "--delta", "1e-5", "--clip-norm", "3", "--dim", "16",
         "--split", "balanced", "--json"]
    )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    plan = plan_latent_release(
        10.0, 1e-5, clip_norm=3.0, dim=16, adjacency=Adjacency.REPLACE_ONE, split="balanced"
    )
    assert out["noise_std_sum"] == plan.noise_std_sum
    assert out["noise_std_second_moment"] == plan.noise_std_second_moment
    assert out["noise_std_count"] == 0.0
    assert out["mu"] == plan.mu and out["delta_achieved"] <= 1e-5
    baseline = paper_baseline_noise_stds(10.0, 1e-5, clip_norm=3.0)
    assert out["paper_baseline"]["noise_std_sum"] == baseline[0]
    assert out["ratio_to_paper"]["noise_std_sum"] <= 0.62


def test_text_output_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["calibrate", "--epsilon", "2", "--clip-norm", "1.5", "--dim", "8",
         "--adjacency", "add-remove", "--split", "0.4"]
    )  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "add-remove" in text and "second moment" in text and "paper" in text


def test_bad_parameters_exit_with_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--epsilon", "0", "--clip-norm", "1", "--dim", "4"]) == 2
    assert "epsilon" in capsys.readouterr().err
    assert main(["calibrate", "--epsilon", "1", "--clip-norm", "1", "--dim", "4",
                 "--split", "1.5"]) == 2  # fmt: skip
    with pytest.raises(SystemExit):
        main(["calibrate", "--epsilon", "1", "--clip-norm", "1", "--dim", "4", "--split", "x"])


def test_module_import_is_light() -> None:
    code = (
        "import sys\nimport privfed.cli.calibrate\n"
        "print(any(m == 'scipy' or m.startswith('privfed.dp') for m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"


BASE = ["calibrate", "--epsilon", "1", "--clip-norm", "1", "--dim", "4"]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run a command that must be refused; return its single stderr line.

    argparse refusals end in ``SystemExit(2)``, later ones in the return value
    2; either way exactly one line ``privfed calibrate: error: ...``.
    """
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.out == ""
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("privfed calibrate: error: ")
    return lines[0]


@pytest.mark.parametrize("value", ["1,,4", "1,4", "nan", "inf", "-inf", "-1", "0", "x"])
def test_a_bad_epsilon_is_refused_in_one_line(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused([*BASE, "--epsilon", value], capsys)
    assert "--epsilon" in line


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--delta", "nan"),
        ("--delta", "1"),
        ("--delta", "0,1"),
        ("--clip-norm", "inf"),
        ("--clip-norm", "-2"),
        ("--clip-norm", "1e300"),  # its square overflows
        ("--dim", "0"),
        ("--dim", "2.5"),
        ("--split", "nan"),
        ("--split", "0"),
        ("--split", "1"),
    ],
)
def test_every_bad_value_names_its_option(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert option in _refused([*BASE, option, value], capsys)


def test_a_missing_required_option_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["calibrate", "--epsilon", "1", "--dim", "4"], capsys)
    assert "--clip-norm" in line
