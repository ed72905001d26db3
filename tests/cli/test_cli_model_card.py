"""``privfed run --model-card-config``: declarations read before any work, card written."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tiny_args import TINY_CLI

from privfed.cli import main


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_declarations_reach_the_card(tmp_path: Path) -> None:
    config = tmp_path / "card.json"
    config.write_text(
        json.dumps({"model_name": "digits-demo", "contact": "privacy@example.org"}),
        encoding="utf-8",
    )
    out = tmp_path / "run"
    argv = [*TINY_CLI, "--release-only", "--model-card-config", str(config)]
    assert main([*argv, "--output-dir", str(out)]) == 0
    card = json.loads((out / "model_card.json").read_text())
    model = card["sections"]["model"]["fields"]
    assert model["model_name"] == {
        "value": "digits-demo",
        "status": "declared",
        "source": "model-card config: model_name",
    }
    assert model["owner"]["value"] is None
    assert model["owner"]["status"] == "not declared"
    assert card["contains_evaluation"] is False
    markdown = (out / "model_card.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Federated model card: digits-demo")


def test_without_a_config_the_card_says_not_declared(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main([*TINY_CLI, "--no-audit", "--output-dir", str(out)]) == 0
    card = json.loads((out / "evaluation_card.json").read_text())
    assert card["contains_evaluation"] is True  # a full run: utility is an evaluation
    assert card["sections"]["use"]["fields"]["intended_use"]["value"] is None
    assert "not declared" in (out / "evaluation_card.md").read_text(encoding="utf-8")
    # The card of the release, beside it, never holds an evaluation field.
    release_card = json.loads((out / "model_card.json").read_text())
    assert release_card["contains_evaluation"] is False
    assert "not declared" in (out / "model_card.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "no such file"),
        ("{broken", "not valid JSON"),
        ('{"model_nmae": "x"}', "model_nmae"),
        ('{"owner": ""}', "owner"),
    ],
)
def test_a_bad_config_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, expected: str
) -> None:
    config = tmp_path / "card.json"
    if text is not None:
        config.write_text(text, encoding="utf-8")
    out = tmp_path / "run"
    start = time.perf_counter()
    assert main([*TINY_CLI, "--model-card-config", str(config), "--output-dir", str(out)]) == 2
    assert time.perf_counter() - start < 5.0
    line = _one_line_error(capsys.readouterr().err)
    assert line.startswith("privfed run: error: --model-card-config"), line
    assert expected in line
    assert not out.exists()
