"""The model card as a value: fields with provenance, sections, and its two renderings.

:class:`ModelCard` renders itself as ``model_card.json`` (:meth:`ModelCard.to_json`)
and ``model_card.md`` (:meth:`ModelCard.to_markdown`); each :class:`CardField`
carries its value, status and source (see :mod:`privfed.engines.model_card`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np

from privfed._checks import check_str
from privfed._version import __version__
from privfed.engines.artifacts import EVALUATION_FILENAME
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["CardField", "CardSection", "FieldStatus", "ModelCard", "Omission"]

#: Where a field's value comes from (see the module docstring).
FieldStatus = Literal["verified", "declared", "evaluation"]
_STATUSES: Final = ("verified", "declared", "evaluation")

_NOT_DECLARED: Final = "not declared"

# -- the card -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CardField:
    """One field of the card.

    Attributes:
        key: Identifier inside its section (the JSON key).
        label: Human-readable name (the markdown row).
        value: A JSON value (``None`` for "not declared" / "not run").
        status: ``"verified"``, ``"declared"`` or ``"evaluation"``.
        source: Where the value comes from, as ``file:path.in.document`` or an
            engine fact.
    """

    key: str
    label: str
    value: Any
    status: FieldStatus
    source: str

    def __post_init__(self) -> None:
        check_str("key", self.key)
        check_str("label", self.label)
        check_str("source", self.source)
        if self.status not in _STATUSES:
            raise ParameterError("status", f"one of {list(_STATUSES)}", self.status)
        object.__setattr__(self, "value", _plain(self.value))

    def to_dict(self) -> dict[str, Any]:
        """``{"value", "status", "source"}``; a declaration left empty has status "not declared"."""
        status = _NOT_DECLARED if self.status == "declared" and self.value is None else self.status
        return {"value": self.value, "status": status, "source": self.source}


@dataclass(frozen=True)
class CardSection:
    """A titled group of fields, with an optional explanatory note."""

    key: str
    title: str
    fields: tuple[CardField, ...]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``{"title", "note", "fields": {key: field}}``."""
        return {
            "title": self.title,
            "note": self.note,
            "fields": {f.key: f.to_dict() for f in self.fields},
        }


@dataclass(frozen=True)
class Omission:
    """A section or field the card leaves out, and why."""

    what: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """``{"what", "reason"}``."""
        return {"what": self.what, "reason": self.reason}


_LEGEND: Final = (
    ("verified", "computed by this run or its privacy ledger, or fixed by the engine that ran"),
    ("declared", "supplied by the operator (model-card config); privfed does not check it"),
    (
        "evaluation",
        "computed from private data without noise; not part of the release and not covered "
        "by its privacy guarantee",
    ),
)


@dataclass(frozen=True)
class ModelCard:
    """A run's federated model card (see the module docstring).

    Attributes:
        engine: ``"latent"`` or ``"factory"``.
        title: The card's heading (the declared model name, or the engine's run).
        contains_evaluation: Whether any field has status ``"evaluation"``.
        sections: The sections, in order.
        omitted: What was left out, and why.
    """

    engine: str
    title: str
    contains_evaluation: bool
    sections: tuple[CardSection, ...]
    omitted: tuple[Omission, ...] = ()
    provenance: dict[str, Any] | None = None

    @property
    def notice(self) -> str:
        """The card's header: whether it may travel with the release."""
        if self.contains_evaluation:
            return (
                "MODEL CARD WITH EVALUATION FIELDS: fields marked 'evaluation' were computed "
                "from private data without noise. Keep this card as private as "
                f"{EVALUATION_FILENAME}; the card that ships with the release is the one of a "
                "release-only run (or build_model_card(..., include_evaluation=False))."
            )
        return (
            "MODEL CARD OF THE RELEASE: every field is a verified fact of the release (DP "
            "outputs and public facts) or an operator declaration; it holds no number "
            "computed from private data without noise."
        )

    def field(self, section: str, key: str) -> CardField:
        """The field ``key`` of section ``section``.

        Raises:
            KeyError: No such section or field.
        """
        for s in self.sections:
            if s.key == section:
                for f in s.fields:
                    if f.key == key:
                        return f
        raise KeyError(f"{section}.{key}")

    def to_dict(self) -> dict[str, Any]:
        """The content of ``model_card.json``."""
        return {
            "format": "privfed.model_card",
            "version": 1,
            "generator": f"privfed {__version__}",
            "engine": self.engine,
            "title": self.title,
            "notice": self.notice,
            "contains_evaluation": self.contains_evaluation,
            "status_legend": dict(_LEGEND),
            "sections": {s.key: s.to_dict() for s in self.sections},
            "omitted": [o.to_dict() for o in self.omitted],
            "provenance": self.provenance,
        }

    def to_json(self) -> str:
        """``model_card.json`` (indented, sections in card order, no NaN)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    def to_markdown(self) -> str:
        """``model_card.md``: every section as a table of value, status and source."""
        lines = [f"# Federated model card: {_inline(self.title)}", "", f"> {self.notice}", ""]
        lines.append("Status of each field:")
        lines.append("")
        lines.extend(f"- **{status}**: {meaning}" for status, meaning in _LEGEND)
        for section in self.sections:
            lines.extend(["", f"## {section.title}", ""])
            if section.note:
                lines.extend([_inline(section.note), ""])
            lines.append("| Field | Value | Status | Source |")
            lines.append("|---|---|---|---|")
            for f in section.fields:
                # A declaration the operator did not make is not shown as declared.
                status = _NOT_DECLARED if f.status == "declared" and f.value is None else f.status
                lines.append(
                    f"| {_cell(f.label)} | {_cell(_show(f.value, f.status))} | {status} | "
                    f"`{_cell(f.source)}` |"
                )
        lines.extend(["", "## Omitted", ""])
        if self.omitted:
            lines.extend(f"- **{_inline(o.what)}**: {_inline(o.reason)}" for o in self.omitted)
        else:
            lines.append("Nothing: every section is filled.")
        lines.extend(["", f"*Generated by privfed {__version__} from the run's artefacts.*", ""])
        if self.provenance is not None:
            p = self.provenance
            command = p.get("command")
            made = "`" + " ".join(command) + "`" if command else "the Python API (config in JSON)"
            lines.extend(
                [
                    f"*Run {p.get('run_id')}, finished {p.get('created_utc')}, made by {made}.*",
                    "",
                ]
            )
        return "\n".join(lines)


# -- rendering helpers ----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A JSON-plain copy of ``value`` (tuples to lists, numpy scalars to Python)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise ParameterError("value", "a finite number", value)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    raise ParameterTypeError("value", "a JSON value", value)


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{value:.6g}"


def _show(value: Any, status: str) -> str:
    if value is None:
        return _NOT_DECLARED if status == "declared" else "none"
    if isinstance(value, bool | int | float):
        return _number(value)
    if isinstance(value, list):
        joiner = "; " if any(isinstance(v, str) for v in value) else ", "
        return joiner.join(_show(v, status) for v in value) if value else "none"
    if isinstance(value, dict):
        if not value:
            return "none"
        return "; ".join(f"{k}: {_show(v, status)}" for k, v in value.items())
    return str(value)


def _inline(text: str) -> str:
    return " ".join(str(text).split())


def _cell(text: str) -> str:
    return _inline(text).replace("|", "\\|")
