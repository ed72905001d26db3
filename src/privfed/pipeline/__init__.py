"""Compatibility names for the latent-statistic job (its home is :mod:`privfed.engines.latent.job`).

``from privfed.pipeline import PipelineConfig, run_pipeline`` keeps working; the
names load on first use.  They are the latent wing's names from its ``audit``,
``config``, ``report`` and ``job`` modules, taken from the wing's own table.
"""

from __future__ import annotations

from privfed._lazy import lazy_exports
from privfed.engines.latent import _EXPORTS as _LATENT_EXPORTS

_EXPORTS: dict[str, str] = {
    name: module
    for name, module in _LATENT_EXPORTS.items()
    if module.rpartition(".")[2] in ("audit", "config", "report", "job")
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
