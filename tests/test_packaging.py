"""What the distributions carry: the licence they declare, the tests, the examples."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from sdist import sdist_members

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_file_matches_the_declared_licence() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_version_is_written_once() -> None:
    import privfed
    from privfed._version import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "privfed._version.__version__"
    assert privfed.__version__ == __version__
    hits = [
        p
        for p in (ROOT / "src" / "privfed").rglob("*.py")
        if f'"{__version__}"' in p.read_text() and p.name != "_version.py"
    ]
    assert hits == []


def test_every_ignored_lint_rule_is_selected_and_explained() -> None:
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    selected = set(lint["select"])
    per_file = [r for rules in lint["per-file-ignores"].values() for r in rules]
    ignored = list(lint["ignore"]) + per_file
    for rule in ignored:
        prefix = rule.rstrip("0123456789")
        assert prefix in selected or rule in selected, f"{rule} is ignored but never selected"
    raw = (ROOT / "pyproject.toml").read_text()
    for rule in set(ignored):
        # A reason sits in a comment that names the rule.
        assert any(rule in line and line.lstrip().startswith("#") for line in raw.splitlines()), (
            f"{rule} is ignored without a written reason"
        )


@pytest.mark.slow
def test_the_sdist_carries_tests_examples_and_licence(tmp_path: Path) -> None:
    members = sdist_members(tmp_path)
    for expected in (
        "LICENSE",
        "SECURITY.md",
        "tests/conftest.py",
        "tests/fixtures/kat/x25519_rfc7748.json",
        "examples/pipeline.py",
        "src/privfed/py.typed",
    ):
        assert expected in members, expected
    assert not any("__pycache__" in m for m in members)
