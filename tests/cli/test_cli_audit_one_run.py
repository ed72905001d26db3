"""``privfed audit``: --one-run, several attacks per score file, --splits, warnings (issue #29)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_cli_audit import _refused, _run


def _canaries(path: Path, **extra: np.ndarray) -> Path:
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    np.savez(path, canary_scores=rng.normal(3.0 * included, 1.0), canary_included=included, **extra)
    return path


def test_one_run_file_gives_a_valid_one_run_bound(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run(["--one-run", str(_canaries(tmp_path / "c.npz")), "--out", str(out)]) == 0
    document = json.loads((out / "audit.json").read_text())
    run = document["one_run"]["one-run"]
    assert run["selection"] == "held-out" and run["trials"] == "one-run"
    assert run["epsilon_lower_bound"] > 1.0 and run["calibration_canaries"] == 500
    text = (out / "audit.md").read_text()
    assert "One-run lower bounds" in text and "valid for one run" in text


def test_one_run_several_runs_bonferroni(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    bits = rng.random(600) < 0.5
    path = tmp_path / "c.npz"
    np.savez(
        path,
        **{
            "white/canary_scores": rng.normal(4.0 * bits, 1.0),
            "white/canary_included": bits.astype(np.int64),
            "input/canary_scores": rng.normal(0.5 * bits, 1.0),
            "input/canary_included": bits,
        },
    )
    out = tmp_path / "out"
    code = _run(
        ["--one-run", str(path), "--one-run-selection", "bonferroni", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    runs = json.loads((out / "audit.json").read_text())["one_run"]
    assert set(runs) == {"white", "input"}
    assert runs["white"]["selection"] == "bonferroni" and runs["white"]["num_configurations"] == 16
    assert runs["white"]["epsilon_lower_bound"] > runs["input"]["epsilon_lower_bound"]


def test_several_attacks_per_score_file_with_repeated_splits_and_caveat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(2)
    path = tmp_path / "s.npz"
    np.savez(
        path,
        **{
            "loss/member_scores": rng.normal(1.0, 1, 400),
            "loss/nonmember_scores": rng.normal(0.0, 1, 400),
            "flipped/member_scores": rng.normal(-1.0, 1, 400),
            "flipped/nonmember_scores": rng.normal(0.0, 1, 400),
        },
    )
    out = tmp_path / "out"
    argv = ["--scores", str(path), "--splits", "5", "--no-plot", "--out", str(out)]
    assert _run(argv) == 0
    err = capsys.readouterr().err
    assert "warning: flipped" in err and "negate it" in err
    assert "caveat" in err and "not independent trials" in err
    document = json.loads((out / "audit.json").read_text())
    assert set(document["attacks"]) == {"loss", "flipped"}
    assert document["bounds"]["loss"]["trials"] == "one-model"
    splits = document["splits"]["loss"]
    assert splits["num_splits"] == 5
    assert splits["min_epsilon_lower_bound"] <= splits["median_epsilon_lower_bound"]
    assert document["attacks"]["flipped"]["warnings"]
    assert "median ε_lb" in (out / "audit.md").read_text()


def test_independent_score_trials_drop_the_caveat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    path = tmp_path / "s.csv"
    rows = ["attack,score,member"]
    rows += [f"a,{s},1" for s in rng.normal(1, 1, 50)] + [f"a,{s},0" for s in rng.normal(0, 1, 50)]
    path.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    argv = ["--scores", str(path), "--score-trials", "independent", "--no-plot", "--out", str(out)]
    assert _run(argv) == 0
    assert "caveat" not in capsys.readouterr().err
    assert json.loads((out / "audit.json").read_text())["bounds"]["a"]["trials"] == (
        "independent-trials"
    )


def _bad_files(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    rng = np.random.default_rng(4)
    np.savez(tmp_path / "nobits.npz", canary_scores=rng.normal(size=10))
    np.savez(
        tmp_path / "twos.npz", canary_scores=np.zeros(4), canary_included=np.array([0, 1, 2, 1])
    )
    np.savez(tmp_path / "short.npz", canary_scores=np.zeros(4), canary_included=np.ones(3, bool))
    np.savez(tmp_path / "half.npz", **{"a/member_scores": np.zeros(3)})
    np.savez(
        tmp_path / "nan.npz", member_scores=np.array([np.nan, 1.0]), nonmember_scores=np.ones(2)
    )
    np.savez(
        tmp_path / "both.npz",
        member_scores=np.ones(2),
        nonmember_scores=np.ones(2),
        **{"a/member_scores": np.ones(2), "a/nonmember_scores": np.ones(2)},
    )
    (tmp_path / "onlymembers.csv").write_text("score,member\n1.0,1\n2.0,1\n")
    (tmp_path / "c.txt").write_text("x")
    return {
        "no bits": (["--one-run", str(tmp_path / "nobits.npz")], "canary_included"),
        "bits not 0/1": (["--one-run", str(tmp_path / "twos.npz")], "0/1"),
        "bits too short": (["--one-run", str(tmp_path / "short.npz")], "canary_included"),
        "one-run missing": (["--one-run", str(tmp_path / "none.npz")], "not found"),
        "one-run not npz": (["--one-run", str(tmp_path / "c.txt")], ".npz"),
        "half an attack": (["--scores", str(tmp_path / "half.npz")], "a/nonmember_scores"),
        "nan score": (["--scores", str(tmp_path / "nan.npz")], "NaN"),
        "both layouts": (["--scores", str(tmp_path / "both.npz")], "not both"),
        "no non-members": (["--scores", str(tmp_path / "onlymembers.csv")], "non-members"),
        "splits zero": (["--scores", str(tmp_path / "nan.npz"), "--splits", "0"], "--splits"),
        "bad selection": (
            ["--one-run", str(tmp_path / "twos.npz"), "--one-run-selection", "best"],
            "--one-run-selection",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "no bits",
        "bits not 0/1",
        "bits too short",
        "one-run missing",
        "one-run not npz",
        "half an attack",
        "nan score",
        "both layouts",
        "no non-members",
        "splits zero",
        "bad selection",
    ],
)
def test_bad_inputs_are_one_line_exit_2_nothing_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, needle = _bad_files(tmp_path)[case]
    out = tmp_path / "out"
    line = _refused([*argv, "--no-plot", "--out", str(out)], capsys)
    assert needle in line
    assert not out.exists()
