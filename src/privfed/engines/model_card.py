"""The federated model card of a run: ``model_card.md`` and ``model_card.json``.

Every run of either engine writes a model card beside its release
(:func:`privfed.engines.job.write_artifacts` calls :func:`build_model_card`).
The card is filled from what the run actually wrote -- ``release.json``,
``ledger.json``, the synthetic data and, unless the run was release-only,
``evaluation.json`` -- plus a few statements the operator declares
(:class:`ModelCardDeclarations`, ``privfed run --model-card-config FILE``).

Every field carries its provenance::

    {"value": 10.0, "status": "verified", "source": "release.json:dp.epsilon"}

* ``"verified"`` -- computed by this run or its privacy ledger (read from the
  release, the ledger or the synthetic data), or a fact fixed by the engine
  that ran (its source then names the engine);
* ``"declared"`` -- supplied by the operator and not checked by privfed;
* ``"evaluation"`` -- computed from private data without noise (accuracies on
  real records, the membership-inference audit, timings).  Not part of the
  release and not covered by its privacy guarantee.

Sections: model, federation, privacy, data, utility, compute, intended use and
limitations, unlearning.  What the card never holds: exact record totals,
per-client sizes or exact class counts.  The data section is at DP precision
only: the noisy class counts of an add/remove release, and under replace-one
a statement that counts are public by assumption and not published.

A release-only run (no ``evaluation.json``) writes a card without the
evaluation fields and lists what was omitted and why; such a card holds only
verified release facts and declarations, so it ships with the release.  The
card of a full run holds evaluation fields (marked) and is as private as
``evaluation.json``; ``build_model_card(artifacts, include_evaluation=False)``
gives its release counterpart without running again.

This module imports numpy and the standard library only (never torch).
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np

from privfed._checks import check_bool, check_str
from privfed._version import __version__
from privfed.engines.job import (
    EVALUATION_FILENAME,
    LEDGER_FILENAME,
    MODEL_CARD_JSON_FILENAME,
    MODEL_CARD_MARKDOWN_FILENAME,
    RELEASE_FILENAME,
    SYNTHETIC_FILENAME,
    RunArtifacts,
)
from privfed.errors import ArtifactIntegrityError, ParameterError, ParameterTypeError

__all__ = [
    "MODEL_CARD_JSON_FILENAME",
    "MODEL_CARD_MARKDOWN_FILENAME",
    "CardField",
    "CardSection",
    "FieldStatus",
    "ModelCard",
    "ModelCardDeclarations",
    "Omission",
    "build_model_card",
]

#: Where a field's value comes from (see the module docstring).
FieldStatus = Literal["verified", "declared", "evaluation"]
_STATUSES: Final = ("verified", "declared", "evaluation")

#: Longest declared text accepted (characters).
_MAX_DECLARED_CHARS: Final = 4000

_NOT_DECLARED: Final = "not declared"
_OVERALL_ONLY: Final = "overall only: this engine does not compute per-class accuracy"
_EVALUATION_OMITTED: Final = (
    "release-only run: evaluation.json was not written; these figures are computed from "
    "private data without noise and are not part of the release"
)
_NOT_REQUESTED: Final = (
    "evaluation fields left out on request (include_evaluation=False): this card describes "
    "the release alone"
)


# -- operator declarations --------------------------------------------------------------


@dataclass(frozen=True)
class ModelCardDeclarations:
    """What the operator states about a run; privfed records it, never checks it.

    Every attribute is an optional non-empty string (at most 4000 characters,
    surrounding whitespace stripped); ``None`` is shown as "not declared".

    Attributes:
        model_name: The name under which the synthetic data or model is published.
        dataset_name: The private dataset, as the operator names it.
        intended_use: What the release is meant for.
        out_of_scope_uses: Uses it is not meant for.
        limitations: Known limitations beyond those privfed states itself.
        contact: Whom to contact (for instance about a removal request).
        owner: Who is responsible for the release.
    """

    model_name: str | None = None
    dataset_name: str | None = None
    intended_use: str | None = None
    out_of_scope_uses: str | None = None
    limitations: str | None = None
    contact: str | None = None
    owner: str | None = None

    def __post_init__(self) -> None:
        cleaned: dict[str, str | None] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                cleaned[f.name] = None
                continue
            domain = f"a non-empty str of at most {_MAX_DECLARED_CHARS} characters, or None"
            text = check_str(f.name, value, domain=domain).strip()
            if not text or len(text) > _MAX_DECLARED_CHARS:
                raise ParameterError(f.name, domain, value)
            cleaned[f.name] = text
        for name, stripped in cleaned.items():
            object.__setattr__(self, name, stripped)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The accepted keys, in card order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelCardDeclarations:
        """Declarations from a mapping (a parsed JSON or TOML document).

        Keys are the attribute names; every key is optional, unknown keys are
        refused (a misspelt key would otherwise be silently dropped).

        Raises:
            ParameterTypeError (parameter ``declarations``): ``data`` is not a mapping.
            ParameterError: An unknown key, or a value that is not a non-empty string.
        """
        if not isinstance(data, Mapping):
            raise ParameterTypeError("declarations", "a mapping of declaration keys", data)
        unknown = sorted(str(k) for k in data if k not in cls.field_names())
        if unknown:
            raise ParameterError(
                "declarations", f"a mapping with keys among {list(cls.field_names())}", unknown
            )
        return cls(**{str(k): v for k, v in data.items()})

    @classmethod
    def from_file(cls, path: str | Path) -> ModelCardDeclarations:
        """Read declarations from a ``.json`` or ``.toml`` file (one table of strings).

        Raises:
            ParameterError (parameter ``model_card_config``): The file is
                missing, unreadable, not valid JSON/TOML, or not one table.
            ParameterError: A key or value is invalid (see :meth:`from_dict`).
        """
        name = "model_card_config"
        if not isinstance(path, str | Path) or not str(path):
            raise ParameterTypeError(name, "a path to a .json or .toml file", path)
        p = Path(path)
        domain = "a readable .json or .toml file of model-card declarations"
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ParameterError(name, domain, str(p), detail=type(exc).__name__) from None
        try:
            data: Any = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            kind = "TOML" if p.suffix.lower() == ".toml" else "JSON"
            raise ParameterError(name, domain, str(p), detail=f"not valid {kind}: {exc}") from None
        if not isinstance(data, dict):
            raise ParameterError(name, domain, str(p), detail="the document is not one table")
        try:
            return cls.from_dict(data)
        except (ParameterError, ParameterTypeError) as exc:
            raise ParameterError(name, domain, str(p), detail=str(exc)) from None

    def to_dict(self) -> dict[str, str | None]:
        """Every key with its value (``None`` when not declared)."""
        return {name: getattr(self, name) for name in self.field_names()}


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
        """``{"value", "status", "source"}``."""
        return {"value": self.value, "status": self.status, "source": self.source}


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
                lines.append(
                    f"| {_cell(f.label)} | {_cell(_show(f.value, f.status))} | {f.status} | "
                    f"`{_cell(f.source)}` |"
                )
        lines.extend(["", "## Omitted", ""])
        if self.omitted:
            lines.extend(f"- **{_inline(o.what)}**: {_inline(o.reason)}" for o in self.omitted)
        else:
            lines.append("Nothing: every section is filled.")
        lines.extend(["", f"*Generated by privfed {__version__} from the run's artefacts.*", ""])
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


# -- reading the artefacts ---------------------------------------------------------------

_MISSING: Final = object()


def _get(document: Mapping[str, Any] | None, path: str) -> Any:
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


class _Reader:
    """Builds fields from the run's documents, recording each value's source."""

    def __init__(self, artifacts: RunArtifacts, include_evaluation: bool) -> None:
        self.release = artifacts.release
        self.evaluation = artifacts.evaluation if include_evaluation else None
        self.engine = str(self.release.get("engine", "unknown"))

    def release_field(self, key: str, label: str, path: str, default: Any = None) -> CardField:
        value = _get(self.release, path)
        return CardField(
            key,
            label,
            default if value is _MISSING else value,
            "verified",
            f"{RELEASE_FILENAME}:{path}",
        )

    def release_value(self, path: str, default: Any = None) -> Any:
        value = _get(self.release, path)
        return default if value is _MISSING else value

    def evaluation_value(self, path: str, default: Any = None) -> Any:
        value = _get(self.evaluation, path)
        return default if value is _MISSING else value

    def evaluation_field(self, key: str, label: str, path: str) -> CardField:
        return CardField(
            key, label, self.evaluation_value(path), "evaluation", f"{EVALUATION_FILENAME}:{path}"
        )

    def engine_fact(self, key: str, label: str, value: Any) -> CardField:
        return CardField(
            key, label, value, "verified", f"{RELEASE_FILENAME}:engine ({self.engine} engine)"
        )


def _declared(declarations: ModelCardDeclarations, key: str, label: str) -> CardField:
    value = getattr(declarations, key)
    source = f"model-card config: {key}" + ("" if value is not None else " (not declared)")
    return CardField(key, label, value, "declared", source)


def _ledger_fields(artifacts: RunArtifacts, reader: _Reader) -> list[CardField]:
    """The ledger's digest (checked against the release), entries and budget."""
    if artifacts.ledger is None:
        return [
            CardField(
                "ledger",
                "Privacy ledger",
                "none: the run made no DP release",
                "verified",
                f"{RELEASE_FILENAME}:dp (no ledger_sha256)",
            )
        ]
    text = artifacts.ledger.to_json()
    digest = hashlib.sha256(text.encode()).hexdigest()
    claimed = reader.release_value("dp.ledger_sha256")
    if claimed is not None and claimed != digest:
        raise ArtifactIntegrityError(
            LEDGER_FILENAME, "its SHA-256 differs from release.json:dp.ledger_sha256"
        )
    document = json.loads(text)
    source = f"{LEDGER_FILENAME} (SHA-256 of the file; equals {RELEASE_FILENAME}:dp.ledger_sha256)"
    budget = {
        "epsilon": document.get("budget_epsilon"),
        "delta": document.get("budget_delta"),
    }
    rows = [
        CardField("ledger_sha256", "Ledger digest (SHA-256)", digest, "verified", source),
        CardField(
            "ledger_budget",
            "Ledger budget",
            budget if any(v is not None for v in budget.values()) else "none set",
            "verified",
            f"{LEDGER_FILENAME}:budget_epsilon, budget_delta",
        ),
    ]
    if reader.engine == "latent":
        # One entry per class (public).  The factory engine's entries are one per
        # trained factory, a number derived from private counts: not restated here.
        rows.insert(
            1,
            CardField(
                "ledger_releases",
                "Ledger entries (one DP release per class)",
                len(document.get("releases", [])),
                "verified",
                f"{LEDGER_FILENAME}:releases",
            ),
        )
    return rows


# -- the sections -----------------------------------------------------------------------------


def _model_section(reader: _Reader, declarations: ModelCardDeclarations) -> CardSection:
    config = "public.config"
    rows = [
        _declared(declarations, "model_name", "Model / release name"),
        _declared(declarations, "owner", "Owner"),
        _declared(declarations, "contact", "Contact"),
        reader.release_field("engine", "Engine", "engine"),
    ]
    if reader.engine == "latent":
        rows.append(
            reader.release_field("codec", "Codec (fitted on public data)", f"{config}.codec")
        )
        rows.append(reader.release_field("latent_dim", "Latent dimension", "public.latent_dim"))
        rows.append(reader.release_field("clip_norm", "Clip norm R", "public.clip_norm"))
    else:
        rows.append(reader.release_field("factory", "Factory kind", f"{config}.factory"))
        if reader.release_value(f"{config}.factory") == "gaussian":
            rows.append(
                reader.release_field("gaussian_basis", "Gaussian basis", f"{config}.gaussian_basis")
            )
    return CardSection("model", "Model", tuple(rows))


def _federation_section(reader: _Reader) -> CardSection:
    config = "public.config"
    if reader.engine == "latent":
        rows = [
            reader.release_field("num_clients", "Clients", "public.num_clients"),
            reader.release_field("partition", "Partition scheme", f"{config}.partition"),
            reader.engine_fact(
                "aggregation",
                "Aggregation",
                (
                    "secure aggregation (the double masking of Bonawitz et al., complete graph); "
                    "active model: signed keys against an identity registry and the "
                    "ConsistencyCheck round, so a server that deviates from the protocol and "
                    "colludes with at most assumed_corrupted clients learns only the total of "
                    "one signed survivor set"
                    if reader.release_value("public.secagg_mode") == "active"
                    else "secure aggregation (the double masking of Bonawitz et al., complete "
                    "graph); semi-honest model: the server and colluding clients below the "
                    "threshold follow the protocol and learn only the survivors' total"
                ),
            ),
            reader.release_field(
                "secagg_threshold", "Secure-aggregation threshold", "public.secagg_threshold"
            ),
            reader.release_field(
                "secagg_mode", "Secure-aggregation mode", "public.secagg_mode", "semi-honest"
            ),
            reader.release_field(
                "scripted_dropouts",
                "Scripted dropouts (stage: 0-based client ids)",
                "public.dropped_clients",
            ),
            reader.engine_fact("rounds", "Rounds", 1),
            (
                reader.engine_fact(
                    "noise_model", "Noise model", "central (server adds noise once after unmasking)"
                )
                if reader.release_value("dp.distributed") is None
                else reader.release_field("noise_model", "Noise model", "dp.noise_model")
            ),
            *(
                []
                if reader.release_value("dp.distributed") is None
                else [reader.release_field("noise_trust", "Noise trust assumption", "dp.trust")]
            ),
            reader.release_field("noise_placement", "Noise placement", f"{config}.placement"),
        ]
        note = "One secure-aggregation round; the partition is named, its sizes are private."
    else:
        dp = reader.release_value("dp.epsilon") is not None
        rows = [
            reader.release_field("num_clients", "Clients", f"{config}.num_clients"),
            reader.release_field("partition", "Partition scheme", f"{config}.scenario"),
            reader.engine_fact(
                "aggregation",
                "Aggregation",
                "none: each client ships its trained factories (weights) to the server once; "
                "no secure aggregation",
            ),
            reader.engine_fact(
                "secagg_threshold",
                "Secure-aggregation threshold",
                "not applicable (no secure aggregation)",
            ),
            reader.engine_fact(
                "scripted_dropouts", "Scripted dropouts", "not applicable (no secure aggregation)"
            ),
            reader.engine_fact("rounds", "Rounds", 1),
            reader.engine_fact(
                "noise_model",
                "Noise model",
                (
                    "local: one Gaussian release of clipped latent moments inside each "
                    "client's factory fit (the server adds none)"
                    if str(reader.release_value("dp.mechanism", "")).startswith("Gaussian")
                    else "local: DP-SGD inside each client's factory training "
                    "(the server adds none)"
                )
                if dp
                else "none: no differential privacy (factories trained without DP-SGD)",
            ),
        ]
        note = (
            "One-shot federation; the FedAvg run in the utility section is a baseline on the "
            "same split, not part of the release."
        )
    return CardSection("federation", "Federation", tuple(rows), note)


_ADJACENCY_MEANING: Final = {
    "replace-one": "replace-one: neighbouring datasets differ in one record replaced by another "
    "(record counts are public)",
    "add-remove": "add-remove: neighbouring datasets differ by adding or removing one record "
    "(record counts are private)",
}


def _privacy_section(
    reader: _Reader, artifacts: RunArtifacts, omitted: list[Omission], reason: str
) -> CardSection:
    has_dp = reader.release_value("dp.epsilon") is not None
    rows: list[CardField] = []
    if not has_dp:
        rows.append(
            CardField(
                "guarantee",
                "Guarantee",
                "no differential privacy",
                "verified",
                f"{RELEASE_FILENAME}:dp.guarantee (null)",
            )
        )
        rows.append(reader.release_field("warning", "Warning", "dp.warning"))
    else:
        adjacency = reader.release_value("dp.adjacency")
        rows.extend(
            [
                reader.release_field("epsilon", "ε", "dp.epsilon"),
                reader.release_field("delta", "δ", "dp.delta"),
            ]
        )
        if reader.release_value("dp.mu") is not None:
            rows.append(reader.release_field("mu", "μ (Gaussian DP)", "dp.mu"))
        rows.append(
            CardField(
                "adjacency",
                "Adjacency",
                _ADJACENCY_MEANING.get(str(adjacency), adjacency),
                "verified",
                f"{RELEASE_FILENAME}:dp.adjacency",
            )
        )
        rows.append(
            reader.engine_fact(
                "privacy_unit", "Unit of privacy", "one record (example-level DP), not one client"
            )
        )
        rows.append(reader.release_field("mechanism", "Mechanism", "dp.mechanism"))
        rows.append(reader.release_field("accountant", "Accountant", "dp.accountant"))
        for key, label in (
            ("noise_std_sum", "Noise std of the sums"),
            ("noise_std_second_moment", "Noise std of the second moments"),
            ("noise_std_count", "Noise std of the counts (0: counts public)"),
        ):
            if reader.release_value(f"dp.{key}") is not None:
                rows.append(reader.release_field(key, label, f"dp.{key}"))
        if reader.release_value("public.config.noise_seeded") is True:
            rows.append(
                reader.release_field(
                    "noise_seeded",
                    "DP noise seeded (reproducible experiment, not for deployment)",
                    "public.config.noise_seeded",
                )
            )
    rows.extend(_ledger_fields(artifacts, reader))
    if reader.evaluation is None:
        omitted.append(Omission("privacy: empirical audit", reason))
    else:
        rows.extend(_audit_fields(reader))
    note = (
        "The claim is the ledger's; the empirical audit, when present, is an evaluation "
        "(a lower bound from membership inference, never a proof). The canary self-audit "
        "of the release code is separate: privfed audit --self-audit."
    )
    return CardSection("privacy", "Privacy", tuple(rows), note)


def _audit_fields(reader: _Reader) -> list[CardField]:
    audit = reader.evaluation_value("audit")
    source = f"{EVALUATION_FILENAME}:audit"
    if audit is None:
        return [CardField("audit", "Empirical audit", "not run", "evaluation", f"{source} (null)")]
    if not isinstance(audit, Mapping):
        return [CardField("audit", "Empirical audit", "not readable", "evaluation", source)]
    if reader.engine == "latent" and "skipped" in audit:
        # The reason states record counts: it stays in evaluation.json.
        return [
            CardField(
                "audit",
                "Empirical audit",
                f"skipped: too few records (the reason is in {EVALUATION_FILENAME})",
                "evaluation",
                f"{source}.skipped (not restated)",
            )
        ]
    if reader.engine == "latent":
        return _latent_audit_fields(audit, source)
    return _factory_audit_fields(audit, source, reader)


def _max_of(values: Iterable[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return max(numbers) if numbers else None


def _latent_audit_fields(audit: Mapping[str, Any], source: str) -> list[CardField]:
    attacks: Mapping[str, Any] = audit.get("attacks", {})
    claimed: Mapping[str, Any] = audit.get("claimed", {})
    significance = _max_of(a.get("significance") for a in attacks.values())
    best = str(audit.get("best", ""))
    best_auc = _get(attacks, f"{best}.auc") if best else _MISSING
    rows = [
        CardField(
            "audit_attacks",
            "Audit attacks",
            sorted(attacks),
            "evaluation",
            f"{source}.attacks (names)",
        ),
        CardField(
            "audit_epsilon_lower_bound",
            "Audit: largest ε lower bound"
            + ("" if significance is None else f" (each at confidence {1 - significance:g})"),
            _max_of(a.get("epsilon_lower_bound") for a in attacks.values()),
            "evaluation",
            f"{source}.attacks.*.epsilon_lower_bound",
        ),
        CardField(
            "audit_mu_lower_bound",
            "Audit: largest μ lower bound",
            _max_of(a.get("mu_lower_bound") for a in attacks.values()),
            "evaluation",
            f"{source}.attacks.*.mu_lower_bound",
        ),
        CardField(
            "audit_claim",
            "Audit: what the claim allows for the membership game",
            {"epsilon": claimed.get("game_epsilon"), "mu": claimed.get("game_mu")},
            "evaluation",
            f"{source}.claimed.game_epsilon, game_mu",
        ),
        CardField(
            "audit_exceeds_claim",
            "Audit: a bound exceeds the claim (evidence of a bug or broken assumption)",
            any(bool(a.get("exceeds_claim")) for a in attacks.values()),
            "evaluation",
            f"{source}.attacks.*.exceeds_claim",
        ),
    ]
    if isinstance(best_auc, Mapping):
        rows.append(
            CardField(
                "audit_best_auc",
                f"Audit: AUC of the strongest attack ({best}), with interval",
                {k: best_auc.get(k) for k in ("estimate", "lower", "upper")},
                "evaluation",
                f"{source}.attacks.{best}.auc",
            )
        )
    return rows


def _factory_audit_fields(
    audit: Mapping[str, Any], source: str, reader: _Reader
) -> list[CardField]:
    summary: Mapping[str, Any] = audit.get("summary") or {}
    claim_epsilon = reader.release_value("dp.epsilon")
    return [
        CardField(
            "audit_attacks",
            "Audit attacks",
            sorted(summary),
            "evaluation",
            f"{source}.summary (names)",
        ),
        CardField(
            "audit_epsilon_lower_bound",
            "Audit: largest ε lower bound over the audited factories",
            _max_of(s.get("max_epsilon_lower_bound") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.max_epsilon_lower_bound",
        ),
        CardField(
            "audit_mu_lower_bound",
            "Audit: largest μ lower bound over the audited factories",
            _max_of(s.get("max_mu_lower_bound") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.max_mu_lower_bound",
        ),
        CardField(
            "audit_claim",
            "Audit: the claim beside it",
            {"epsilon": claim_epsilon}
            if claim_epsilon is not None
            else "no claim: no differential privacy",
            "verified",
            f"{RELEASE_FILENAME}:dp.epsilon"
            if claim_epsilon is not None
            else f"{RELEASE_FILENAME}:dp.guarantee (null)",
        ),
        CardField(
            "audit_max_auc",
            "Audit: largest AUC over the audited factories",
            _max_of(s.get("max_auc") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.max_auc",
        ),
        CardField(
            "audit_mean_auc",
            "Audit: mean AUC over the audited factories",
            _max_of(s.get("mean_auc") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.mean_auc",
        ),
    ]


def _data_section(
    reader: _Reader, artifacts: RunArtifacts, declarations: ModelCardDeclarations
) -> CardSection:
    config = "public.config"
    rows = [
        _declared(declarations, "dataset_name", "Dataset (as declared)"),
        reader.release_field("dataset", "Dataset source", f"{config}.dataset"),
    ]
    if artifacts.sample_labels is not None:
        labels = np.asarray(artifacts.sample_labels)
        rows.append(
            CardField(
                "classes",
                "Classes in the synthetic release",
                int(np.unique(labels).size),
                "verified",
                f"{SYNTHETIC_FILENAME}:labels",
            )
        )
    rows.append(
        reader.release_field(
            "public_fraction", "Public split fraction", f"{config}.public_fraction"
        )
    )
    rows.append(
        reader.release_field(
            "test_fraction", "Held-out test split fraction", f"{config}.test_fraction"
        )
    )
    if reader.engine == "latent":
        adjacency = reader.release_value("dp.adjacency")
        if adjacency == "add-remove":
            rows.append(
                reader.release_field(
                    "class_counts",
                    "Noisy class counts (DP release, add/remove)",
                    "dp.noisy_class_counts",
                )
            )
        else:
            rows.append(
                CardField(
                    "class_counts",
                    "Class counts",
                    f"not published: under {adjacency} adjacency the counts are public by "
                    "assumption, and this release does not publish them",
                    "verified",
                    f"{RELEASE_FILENAME}:dp.adjacency",
                )
            )
    else:
        rows.append(
            reader.engine_fact(
                "class_counts",
                "Class counts",
                "not published: the factory engine releases no counts (the exact per-(class, "
                "client) counts are private)",
            )
        )
    rows.append(
        reader.engine_fact(
            "client_sizes",
            "Per-client sizes",
            "not published: exact per-client sizes are private and in no file of the release",
        )
    )
    rows.append(
        reader.release_field(
            "synthetic_per_class", "Synthetic samples per class", "synthetic.samples_per_class"
        )
    )
    note = "Data are characterised at DP precision only: no exact record count appears here."
    return CardSection("data", "Data", tuple(rows), note)


def _utility_section(reader: _Reader) -> CardSection:
    if reader.engine == "latent":
        rows = [
            reader.evaluation_field(
                "accuracy_synthetic",
                "Accuracy: classifier trained on the DP synthetic data",
                "accuracy_synthetic",
            ),
            reader.evaluation_field(
                "accuracy_real",
                "Accuracy: classifier trained on the real private data (baseline)",
                "accuracy_real",
            ),
            reader.evaluation_field(
                "accuracy_nondp_synthetic",
                "Accuracy: synthetic data from the noiseless statistics (baseline, no DP)",
                "accuracy_nondp_synthetic",
            ),
        ]
    else:
        rows = [
            reader.evaluation_field(
                "accuracy_synthetic",
                "Accuracy: classifier trained on the factories' synthetic data",
                "factory_accuracy",
            ),
            reader.evaluation_field(
                "accuracy_fedavg",
                "Accuracy: FedAvg on the same split (baseline)",
                "fedavg_accuracy",
            ),
            reader.evaluation_field(
                "accuracy_centralized",
                "Accuracy: classifier on the pooled private data (baseline)",
                "centralized_accuracy",
            ),
        ]
    rows.append(
        CardField(
            "per_class",
            "Per-class accuracy",
            _OVERALL_ONLY,
            "evaluation",
            f"{EVALUATION_FILENAME} (no per-class figure)",
        )
    )
    note = (
        "Top-1 accuracy in [0, 1] on the held-out real test split, which the release never "
        "used; 'none' marks a baseline that was not run. Evaluation, not part of the release."
    )
    return CardSection("utility", "Utility (held-out real data)", tuple(rows), note)


def _compute_section(reader: _Reader, omitted: list[Omission], reason: str) -> CardSection:
    config = "public.config"
    rows = [
        reader.release_field("device", "Device", f"{config}.device"),
        reader.release_field("num_threads", "CPU threads", f"{config}.num_threads"),
    ]
    if reader.engine == "latent":
        rows.append(
            reader.release_field(
                "payload_bytes_per_client",
                "Statistics payload per client (bytes, before masking)",
                "public.payload_bytes_per_client",
            )
        )
    if reader.evaluation is None:
        what = "seconds per stage and bytes sent per client"
        if reader.engine == "latent":
            what = "seconds per stage and secure-aggregation bytes sent per client"
        omitted.append(Omission(f"compute: {what}", reason))
    else:
        if reader.engine == "latent":
            rows.append(
                reader.evaluation_field(
                    "secagg_bytes_per_client",
                    "Secure-aggregation bytes sent per finishing client (mean)",
                    "secagg_bytes_per_client",
                )
            )
        else:
            rows.append(
                reader.evaluation_field(
                    "factory_bytes_per_client",
                    "Factory weights shipped per client (bytes, mean)",
                    "factory_bytes_per_client",
                )
            )
            rows.append(
                reader.evaluation_field(
                    "fedavg_bytes_per_client",
                    "FedAvg bytes per client (baseline, mean)",
                    "fedavg_bytes_per_client",
                )
            )
        seconds = reader.evaluation_value("seconds") or {}
        rows.append(reader.evaluation_field("seconds", "Seconds per stage (wall clock)", "seconds"))
        rows.append(
            CardField(
                "seconds_total",
                "Seconds in all stages",
                round(sum(float(v) for v in seconds.values()), 4),
                "evaluation",
                f"{EVALUATION_FILENAME}:seconds (sum)",
            )
        )
    return CardSection("compute", "Compute", tuple(rows))


def _use_section(reader: _Reader, declarations: ModelCardDeclarations) -> CardSection:
    engine_limits: list[str]
    if reader.engine == "latent":
        engine_limits = [
            "secure aggregation is semi-honest only: it does not protect against a server "
            "that deviates from the protocol",
            "the guarantee covers the release (release.json, ledger.json, synthetic data); "
            "not evaluation.json, audit_inputs.npz or a card with evaluation fields",
            "per-class Gaussians in the codec's latent space: utility is bounded by the "
            "public codec and by the noise",
        ]
        if reader.release_value("public.config.noise_seeded") is True:
            engine_limits.append("the DP noise was seeded: a reproducible experiment only")
    else:
        engine_limits = [
            "no secure aggregation: the server sees every client's factories",
            "the synthetic data are sampled from the shipped factories; they carry what the "
            "factories memorised",
        ]
        if reader.release_value("dp.epsilon") is None:
            engine_limits.insert(
                0, "no differential privacy: the audit measures what the factories leak"
            )
    rows = [
        _declared(declarations, "intended_use", "Intended use"),
        _declared(declarations, "out_of_scope_uses", "Out-of-scope uses"),
        _declared(declarations, "limitations", "Limitations (declared)"),
        reader.engine_fact("engine_limitations", "Limitations (of this engine)", engine_limits),
    ]
    return CardSection("use", "Intended use and limitations", tuple(rows))


def _unlearning_section(reader: _Reader) -> CardSection:
    if reader.engine == "latent":
        rows = [
            reader.engine_fact(
                "unlearning",
                "What a removal request does",
                "no exact unlearning of a published release: the release is one noisy aggregate "
                "of every survivor's statistics and cannot remove one client's contribution. "
                "Honouring a request means re-running the round without that client: a new "
                "release with a new privacy cost in a new ledger. The earlier release stays "
                "published; its DP guarantee bounds what it reveals about any one record.",
            ),
            reader.engine_fact("certificate", "Unlearning certificate", "none (not supported)"),
        ]
    else:
        rows = [
            reader.engine_fact(
                "unlearning",
                "What a removal request does",
                "exact unlearning on the server: FactoryMatrix.remove_client(k) drops client "
                "k's column (its factories) and every synthetic sample they produced, and redraws "
                "the affected classes from the remaining factories with the same seeds. Copies "
                "already published (this run's synthetic data) must be replaced by the operator.",
            ),
            reader.engine_fact(
                "certificate",
                "Unlearning certificate",
                "privfed.engines.factory.matrix.UnlearningCertificate: SHA-256 of the removed "
                "weights, dropped and regenerated sample ids, matrix digests before and after, "
                "downstream consumers to retrain (here the downstream classifier); "
                "FactoryMatrix.verify(certificate) checks it",
            ),
        ]
    return CardSection("unlearning", "Unlearning", tuple(rows))


# -- the builder --------------------------------------------------------------------------


def build_model_card(
    artifacts: RunArtifacts,
    declarations: ModelCardDeclarations | None = None,
    *,
    include_evaluation: bool = True,
) -> ModelCard:
    """Fill the federated model card of a run from its artefacts.

    Args:
        artifacts: What the run writes (:class:`~privfed.engines.job.RunArtifacts`).
        declarations: The operator's statements; ``None`` uses
            ``artifacts.declarations`` (itself ``None``: nothing declared).
        include_evaluation: Include the evaluation fields (utility, audit,
            timings) when the artefacts have an evaluation.  ``False`` gives
            the card of the release alone.

    Returns:
        The :class:`ModelCard`; without an evaluation (or with
        ``include_evaluation=False``) it holds no evaluation field and lists
        the omitted sections.

    Raises:
        ParameterTypeError: ``artifacts`` or ``declarations`` has the wrong type.
        ParameterError: The release names no engine privfed knows.
        ArtifactIntegrityError (artifact ``ledger.json``): The ledger's digest
            differs from the one in the release.
    """
    if not isinstance(artifacts, RunArtifacts):
        raise ParameterTypeError("artifacts", "a RunArtifacts", artifacts)
    check_bool("include_evaluation", include_evaluation)
    if declarations is None:
        declarations = artifacts.declarations
    if declarations is None:
        declarations = ModelCardDeclarations()
    if not isinstance(declarations, ModelCardDeclarations):
        raise ParameterTypeError("declarations", "a ModelCardDeclarations or None", declarations)
    engine = artifacts.release.get("engine")
    if engine not in ("latent", "factory"):
        raise ParameterError("release['engine']", "'latent' or 'factory'", engine)
    reader = _Reader(artifacts, include_evaluation)
    reason = _NOT_REQUESTED if artifacts.evaluation is not None else _EVALUATION_OMITTED
    omitted: list[Omission] = []
    sections = [
        _model_section(reader, declarations),
        _federation_section(reader),
        _privacy_section(reader, artifacts, omitted, reason),
        _data_section(reader, artifacts, declarations),
    ]
    if reader.evaluation is None:
        omitted.insert(0, Omission("utility (held-out real data)", reason))
    else:
        sections.append(_utility_section(reader))
    sections.append(_compute_section(reader, omitted, reason))
    sections.append(_use_section(reader, declarations))
    sections.append(_unlearning_section(reader))
    contains = any(f.status == "evaluation" for s in sections for f in s.fields)
    title = declarations.model_name or f"{engine} engine run"
    return ModelCard(
        engine=str(engine),
        title=title,
        contains_evaluation=contains,
        sections=tuple(sections),
        omitted=tuple(omitted),
    )
