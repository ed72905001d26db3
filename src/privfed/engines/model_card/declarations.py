"""What the operator declares for the model card (:class:`ModelCardDeclarations`).

Read from ``privfed run --model-card-config FILE`` (one JSON or TOML table of
strings); privfed records each statement with status ``"declared"`` and never
checks it.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from privfed._checks import check_str
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["ModelCardDeclarations"]

#: Longest declared text accepted (characters).
_MAX_DECLARED_CHARS: Final = 4000


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
            raise ParameterError(name, domain, str(p), detail=_unreadable(exc)) from None
        try:
            data: Any = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
        except (ValueError, RecursionError) as exc:  # a decode error, too deep, a huge number
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


def _unreadable(exc: BaseException) -> str:
    """Why a file cannot be read, in words (not an exception class name)."""
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "it is a directory, not a file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, UnicodeDecodeError):
        return "it is not UTF-8 text"
    return getattr(exc, "strerror", None) or "it cannot be read"
