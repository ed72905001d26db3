"""Input files of ``privfed audit``: attack scores (``--scores``) and canaries (``--one-run``).

Score files (``--scores``), higher score = "member":

* ``.npz`` with one attack: arrays ``member_scores`` and ``nonmember_scores`` (or
  ``member`` and ``nonmember``); the attack is named ``scores``.
* ``.npz`` with several attacks: arrays ``<attack>/member_scores`` and
  ``<attack>/nonmember_scores`` for each attack name (numpy keys such as
  ``"loss/member_scores"`` and ``"loss/nonmember_scores"``).
* ``.csv`` with a header holding ``score`` and ``member`` (1/0 or true/false) and
  optionally ``attack`` (rows without one belong to ``scores``).

Canary files (``--one-run``): ``.npz`` with ``canary_scores`` (m,) floats and
``canary_included`` (m,) bools or 0/1 ints (the run is named ``one-run``), or
``<name>/canary_scores`` and ``<name>/canary_included`` for several runs.  Each
canary must have been included independently with probability ½.
"""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path
from typing import Any

from privfed.cli._options import OptionError

__all__ = ["load_canaries", "load_scores"]

_SINGLE_KEYS = (("member_scores", "nonmember_scores"), ("member", "nonmember"))


def _npz(path: Path, option: str) -> dict[str, Any]:
    import numpy as np

    if not path.is_file():
        raise OptionError(f"{option} file not found: {path}")
    if path.suffix != ".npz":
        raise OptionError(f"{option} {path}: unsupported file type {path.suffix!r} (use .npz)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: np.asarray(data[key]) for key in data.files}
    except (OSError, ValueError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        raise OptionError(f"cannot read {option} {path}: {exc}") from None


def _grouped(
    arrays: dict[str, Any], fields: tuple[str, str], path: Path
) -> dict[str, tuple[Any, Any]]:
    """``<name>/<field>`` keys grouped by name; every name needs both fields."""
    groups: dict[str, dict[str, Any]] = {}
    for key, value in arrays.items():
        name, _, field = key.rpartition("/")
        if name and field in fields:
            groups.setdefault(name, {})[field] = value
    for name, found in groups.items():
        missing = [f for f in fields if f not in found]
        if missing:
            raise OptionError(f"{path}: {name!r} lacks {name}/{missing[0]}")
    return {name: (found[fields[0]], found[fields[1]]) for name, found in sorted(groups.items())}


def _as_scores(name: str, value: Any, path: Path) -> Any:
    import numpy as np

    if value.ndim != 1 or value.size == 0 or value.dtype.kind not in "biuf":
        raise OptionError(f"{path}: {name} must be a non-empty 1-D array of numbers")
    scores = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(scores)):
        raise OptionError(f"{path}: {name} holds NaN or infinite scores")
    return scores


def load_scores(path: Path) -> dict[str, tuple[Any, Any]]:
    """``{attack: (member scores, non-member scores)}`` from a ``--scores`` file."""
    if not path.is_file():
        raise OptionError(f"--scores file not found: {path}")
    if path.suffix == ".csv":
        try:
            return _load_csv_scores(path)
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise OptionError(f"cannot read --scores {path}: {exc}") from None
    if path.suffix != ".npz":
        raise OptionError(
            f"--scores {path}: unsupported file type {path.suffix!r} (use .npz or .csv)"
        )
    arrays = _npz(path, "--scores")
    found = _grouped(arrays, _SINGLE_KEYS[0], path)
    for m_key, n_key in _SINGLE_KEYS:
        if m_key in arrays and n_key in arrays:
            if found:
                raise OptionError(f"{path}: give {m_key} or <attack>/{m_key} arrays, not both")
            found = {"scores": (arrays[m_key], arrays[n_key])}
            break
    if not found:
        raise OptionError(
            f"{path} needs arrays member_scores and nonmember_scores "
            "(or <attack>/member_scores and <attack>/nonmember_scores)"
        )
    return {
        name: (
            _as_scores(f"{name}: member scores", m, path),
            _as_scores(f"{name}: non-member scores", n, path),
        )
        for name, (m, n) in found.items()
    }


def _load_csv_scores(path: Path) -> dict[str, tuple[Any, Any]]:
    import numpy as np

    rows: dict[str, tuple[list[float], list[float]]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"score", "member"} <= set(reader.fieldnames):
            raise OptionError(f"{path} needs a header with columns 'score' and 'member'")
        for line, row in enumerate(reader, start=2):
            flag = (row["member"] or "").strip().lower()  # None: the row is too short
            if flag not in ("1", "0", "true", "false"):
                raise OptionError(f"{path}:{line}: member must be 1/0/true/false")
            try:
                score = float(row["score"] or "")
            except ValueError as exc:
                raise OptionError(f"{path}:{line}: score is not a number") from exc
            attack = (row.get("attack") or "").strip() or "scores"
            members, nonmembers = rows.setdefault(attack, ([], []))
            (members if flag in ("1", "true") else nonmembers).append(score)
    if not rows:
        raise OptionError(f"{path} holds no scores")
    out = {}
    for attack, (members, nonmembers) in rows.items():
        if not members or not nonmembers:
            raise OptionError(f"{path}: attack {attack!r} needs members and non-members")
        out[attack] = (np.asarray(members, float), np.asarray(nonmembers, float))
    return out


def load_canaries(path: Path) -> dict[str, tuple[Any, Any]]:
    """``{run: (canary scores, inclusion bits)}`` from a ``--one-run`` file."""
    import numpy as np

    arrays = _npz(path, "--one-run")
    fields = ("canary_scores", "canary_included")
    found = _grouped(arrays, fields, path)
    if all(f in arrays for f in fields):
        if found:
            raise OptionError(f"{path}: give canary_scores or <name>/canary_scores, not both")
        found = {"one-run": (arrays[fields[0]], arrays[fields[1]])}
    if not found:
        raise OptionError(
            f"{path} needs arrays canary_scores and canary_included "
            "(or <name>/canary_scores and <name>/canary_included)"
        )
    out = {}
    for name, (scores, bits) in found.items():
        values = _as_scores(f"{name}: canary_scores", scores, path)
        if (
            bits.shape != values.shape
            or bits.dtype.kind not in "biu"
            or not np.all((bits == 0) | (bits == 1))
        ):
            raise OptionError(
                f"{path}: {name}: canary_included must be {values.size} bools or 0/1 ints"
            )
        out[name] = (values, np.asarray(bits, dtype=bool))
    return out
