"""Lazy re-exports for package ``__init__`` modules (PEP 562).

A package that re-exports names from heavy modules (torch engines) lists them
in a table ``{public name: defining module}``; the defining module is imported
on first attribute access, so importing the package itself stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` re-exporting ``table``.

    Args:
        package: The re-exporting package's ``__name__`` (for error messages).
        table: Public name -> fully qualified module that defines it.
    """
    names = dict(table)

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def dir_() -> list[str]:
        return sorted(names)

    return getattr_, dir_
