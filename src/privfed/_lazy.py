"""Lazy re-exports for package ``__init__`` modules (PEP 562).

A package that re-exports names from heavy modules (torch engines) lists them
in a table ``{public name: defining module}``; the defining module is imported
on first attribute access, so importing the package itself stays cheap.

``privfed.secagg``, ``privfed.secagg.protocol`` and ``privfed.dp`` state their
names twice, on purpose: the table ``_EXPORTS`` (name -> defining module, for
the runtime) and ``from module import name as name`` under ``if TYPE_CHECKING:``
(what type checkers and IDEs see, since they cannot follow a module
``__getattr__``; the redundant alias is what makes each name an explicit
re-export for them).  :data:`__all__` (what ``import *`` and the docs read) is
derived from the table by :func:`public_names`, at run time only: a literal
``__all__`` would be a third list, and one mypy could see would hide every name
it did not list.  (``privfed.secagg.primitives`` and ``privfed.engines.latent``
still keep a literal ``__all__`` beside the two.)  ``tests/test_public_api.py``
checks the views against each other and against the defining modules' own
``__all__``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports", "public_names"]


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


def public_names(table: Mapping[str, str]) -> list[str]:
    """The names of ``table`` in the order of a sorted ``__all__`` (ruff's RUF022).

    Constants (``UPPER_CASE``) first, then classes (``CamelCase``), then the rest,
    each group sorted: what a package's :data:`__all__` reads when it is derived
    from its lazy table rather than listed a second time.
    """
    return sorted(
        table, key=lambda name: (0 if name.isupper() else 1 if name[0].isupper() else 2, name)
    )


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
