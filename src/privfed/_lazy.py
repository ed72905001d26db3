"""Lazy re-exports for package ``__init__`` modules (PEP 562).

A package that re-exports names from heavy modules (torch engines) lists them
in a table ``{public name: defining module}``; the defining module is imported
on first attribute access, so importing the package itself stays cheap.

Such a package states its names three times, on purpose: the table
``_EXPORTS`` (name -> defining module, for the runtime), :data:`__all__` (what
``import *`` and the docs read) and ``from module import name`` under
``if TYPE_CHECKING:`` (what type checkers and IDEs see, since they cannot
follow a module ``__getattr__``).  ``tests/test_public_api.py`` checks the
three against each other and against the defining modules' own ``__all__``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, str], *, submodules: bool = False
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` re-exporting ``table``.

    Args:
        package: The re-exporting package's ``__name__`` (for error messages).
        table: Public name -> fully qualified module that defines it.
        submodules: Also resolve ``package.<submodule>`` by importing it, as an
            eager ``__init__`` that imported its submodules allowed (plain
            attribute access after ``import package``), and list the package's
            own globals in ``dir()`` beside the lazy names.

    Raises:
        AttributeError: From ``__getattr__``, for a name neither in ``table``
            nor (with ``submodules``) a submodule of ``package``.
    """
    names = dict(table)

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is not None:
            return getattr(_imported(module, f"{package}.{name}"), name)
        if submodules and name.isidentifier() and not name.startswith("__"):
            qualified = f"{package}.{name}"
            try:
                return _imported(qualified, qualified)
            except ModuleNotFoundError as exc:
                if exc.name != qualified:
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def dir_() -> list[str]:
        if not submodules:
            return sorted(names)
        return sorted(set(names).union(vars(sys.modules[package])))

    return getattr_, dir_


def _imported(module: str, what: str) -> Any:
    """``module``, imported; a missing optional dependency names the extra to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        from privfed._deps import EXTRAS
        from privfed.errors import MissingDependencyError

        missing = (exc.name or "").split(".")[0]
        if missing in EXTRAS:
            raise MissingDependencyError(missing, EXTRAS[missing], feature=what) from None
        raise
