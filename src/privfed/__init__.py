"""privfed: privacy-preserving one-shot federated learning with generative models.

Subpackages:

* :mod:`privfed.secagg` -- secure aggregation (pure: numpy + cryptography).
* :mod:`privfed.dp` -- differential-privacy calibration and accounting (pure).
* :mod:`privfed.testing` -- Hypothesis strategies for sensitivity tests (pure).
* :mod:`privfed.audit` -- membership-inference audits.
* :mod:`privfed.engines` -- the two engines, built on torch (optional extra ``engines``).

``import privfed`` is light: subpackages load on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from privfed import errors
from privfed._version import __version__

__all__ = [
    "__version__",
    "audit",
    "data",
    "dp",
    "engines",
    "errors",
    "secagg",
    "testing",
]

_LAZY = frozenset({"audit", "data", "dp", "engines", "secagg", "testing"})

if TYPE_CHECKING:  # pragma: no cover
    from privfed import audit, data, dp, engines, secagg, testing


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"privfed.{name}")
    raise AttributeError(f"module 'privfed' has no attribute {name!r}")
