"""Compatibility names for the engines (their home is :mod:`privfed.engines`).

``privfed.models`` was the engines' package before they became wings; it keeps
re-exporting the public names it had, loading each on first use:

* latent-statistic engine: :mod:`privfed.engines.latent` (its statistics,
  client, release and gaussians modules);
* factory-matrix engine: :mod:`privfed.engines.factory`;
* shared codecs and classifier: :mod:`privfed.engines.codecs`,
  :mod:`privfed.engines.classifier`.

The table is built from the latent wing's own table, so a name keeps its one
home; type checkers see the names through the wings.
"""

from __future__ import annotations

from privfed._lazy import lazy_exports
from privfed.engines.latent import _EXPORTS as _LATENT_EXPORTS

#: The latent wing's modules whose names this package re-exported.
_LATENT_MODULES = ("statistics", "client", "release", "gaussians")

_EXPORTS: dict[str, str] = {
    **{
        name: module
        for name, module in _LATENT_EXPORTS.items()
        if module.rpartition(".")[2] in _LATENT_MODULES
    },
    **dict.fromkeys(
        ("SmallCNN", "evaluate_classifier", "train_classifier"), "privfed.engines.classifier"
    ),
    **dict.fromkeys(
        ("Codec", "ConvAutoencoderCodec", "DiffusersCodec", "DiffusersKind", "PCACodec"),
        "privfed.engines.codecs",
    ),
    **dict.fromkeys(
        (
            "EDMDiffusionFactory",
            "FactoryMatrix",
            "LatentGaussianFactory",
            "UnlearningCertificate",
            "load_factory",
        ),
        "privfed.engines.factory",
    ),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
