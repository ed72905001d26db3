"""Optional dependencies: import them where they are needed, with an install hint.

privfed's cores need only numpy, scipy, cryptography and dp-accounting; the
engines need torch (extra ``engines``), pictures need matplotlib (``plots``),
the Hypothesis strategies need hypothesis (``testing``), the Flower apps need
flwr (``flower``).  :func:`require` turns a missing one into a
:class:`~privfed.errors.MissingDependencyError` that says which extra to
install, instead of a bare ``ModuleNotFoundError`` from deep inside a run.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Final

from privfed.errors import MissingDependencyError

__all__ = ["EXTRAS", "available", "require"]

#: Import name -> the privfed extra that installs it.
EXTRAS: Final[dict[str, str]] = {
    "torch": "engines",
    "sklearn": "engines",
    "safetensors": "engines",
    "diffusers": "engines",
    "matplotlib": "plots",
    "hypothesis": "testing",
    "flwr": "flower",
}


def available(package: str) -> bool:
    """Whether ``package`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def require(package: str, *, feature: str) -> ModuleType:
    """Import ``package`` or raise :class:`MissingDependencyError` naming its extra.

    Args:
        package: Top-level import name, one of :data:`EXTRAS`.
        feature: What needs it, for the message (``"privfed run"``).
    """
    extra = EXTRAS.get(package, package)
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] != package:
            raise  # the package is there but one of *its* dependencies is missing
        raise MissingDependencyError(package, extra, feature=feature) from None
