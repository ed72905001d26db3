"""``scripts/release_identity.py``: what counts as the same release (its comparison only;
the script's full run, three jobs on two trees, takes minutes and is run by hand)."""

from __future__ import annotations

import json
from pathlib import Path

from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]


script = load_script("scripts/release_identity.py", "_privfed_release_identity")


def _release(run_id: str, created: str, value: float) -> str:
    provenance = {"privfed_version": "0.1", "run_id": run_id, "created_utc": created}
    return json.dumps({"public": {"noise_std": value}, "provenance": provenance}, indent=2)


def test_only_the_run_id_and_the_clock_may_differ(tmp_path: Path) -> None:
    a, b, c, d = (tmp_path / f"{n}.json" for n in "abcd")
    a.write_text(_release("11", "2026-12-03T10:00:00Z", 3.16730694053507))
    b.write_text(_release("22", "2026-12-03T11:00:00Z", 3.16730694053507))
    c.write_text(_release("11", "2026-12-03T10:00:00Z", 3.167306940535068))  # the last bit
    d.write_text(_release("11", "2026-12-03T10:00:00Z", 3.16730694053507).replace("  ", " "))
    assert script._same(a, a) == (True, "bytes identical")
    assert script._same(a, b) == (True, "bytes identical but for run_id and created_utc")
    assert script._same(a, c) == (False, "content differs")
    assert script._same(a, d) == (False, "layout differs")
    # A field named run_id outside the provenance object is content, not the run's name.
    e, f = tmp_path / "e.json", tmp_path / "f.json"
    e.write_text(json.dumps({"run_id": "1"}))
    f.write_text(json.dumps({"run_id": "2"}))
    assert script._same(e, f) == (False, "content differs")


def test_npz_files_must_match_byte_for_byte(tmp_path: Path) -> None:
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    a.write_bytes(b"PK\x03\x04same")
    b.write_bytes(b"PK\x03\x04diff")
    assert script._same(a, a)[0] and script._same(a, b) == (False, "bytes differ")
