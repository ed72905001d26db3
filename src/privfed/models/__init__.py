"""Compatibility names for the engines (their home is :mod:`privfed.engines`).

``privfed.models`` was the engines' package before they became wings; it keeps
re-exporting the public names it had, loading each on first use:

* latent-statistic engine: :mod:`privfed.engines.latent`;
* factory-matrix engine: :mod:`privfed.engines.factory`;
* shared codecs and classifier: :mod:`privfed.engines.codecs`,
  :mod:`privfed.engines.classifier`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privfed._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "DEFAULT_MAX_RECORDS": "privfed.engines.latent.statistics",
    "LatentStatistics": "privfed.engines.latent.statistics",
    "LatentStatisticsConfig": "privfed.engines.latent.statistics",
    "packed_size": "privfed.engines.latent.statistics",
    "unpack_symmetric": "privfed.engines.latent.statistics",
    "LatentStatisticsAccumulator": "privfed.engines.latent.client",
    "compute_latent_statistics": "privfed.engines.latent.client",
    "NoisePlacement": "privfed.engines.latent.release",
    "NoisyLatentStatistics": "privfed.engines.latent.release",
    "nonprivate_release": "privfed.engines.latent.release",
    "release_latent_statistics": "privfed.engines.latent.release",
    "release_with_noise_stds": "privfed.engines.latent.release",
    "ClassGaussians": "privfed.engines.latent.gaussians",
    "fit_class_gaussians": "privfed.engines.latent.gaussians",
    "project_psd": "privfed.engines.latent.gaussians",
    "SmallCNN": "privfed.engines.classifier",
    "evaluate_classifier": "privfed.engines.classifier",
    "train_classifier": "privfed.engines.classifier",
    "Codec": "privfed.engines.codecs",
    "ConvAutoencoderCodec": "privfed.engines.codecs",
    "DiffusersCodec": "privfed.engines.codecs",
    "DiffusersKind": "privfed.engines.codecs",
    "PCACodec": "privfed.engines.codecs",
    "EDMDiffusionFactory": "privfed.engines.factory",
    "FactoryMatrix": "privfed.engines.factory",
    "LatentGaussianFactory": "privfed.engines.factory",
    "UnlearningCertificate": "privfed.engines.factory",
    "load_factory": "privfed.engines.factory",
}

__all__ = [
    "DEFAULT_MAX_RECORDS",
    "ClassGaussians",
    "Codec",
    "ConvAutoencoderCodec",
    "DiffusersCodec",
    "DiffusersKind",
    "EDMDiffusionFactory",
    "FactoryMatrix",
    "LatentGaussianFactory",
    "LatentStatistics",
    "LatentStatisticsAccumulator",
    "LatentStatisticsConfig",
    "NoisePlacement",
    "NoisyLatentStatistics",
    "PCACodec",
    "SmallCNN",
    "UnlearningCertificate",
    "compute_latent_statistics",
    "evaluate_classifier",
    "fit_class_gaussians",
    "load_factory",
    "nonprivate_release",
    "packed_size",
    "project_psd",
    "release_latent_statistics",
    "release_with_noise_stds",
    "train_classifier",
    "unpack_symmetric",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover - static view of the lazy names
    from privfed.engines.classifier import (
        SmallCNN,
        evaluate_classifier,
        train_classifier,
    )
    from privfed.engines.codecs import (
        Codec,
        ConvAutoencoderCodec,
        DiffusersCodec,
        DiffusersKind,
        PCACodec,
    )
    from privfed.engines.factory import (
        EDMDiffusionFactory,
        FactoryMatrix,
        LatentGaussianFactory,
        UnlearningCertificate,
        load_factory,
    )
    from privfed.engines.latent.client import (
        LatentStatisticsAccumulator,
        compute_latent_statistics,
    )
    from privfed.engines.latent.gaussians import (
        ClassGaussians,
        fit_class_gaussians,
        project_psd,
    )
    from privfed.engines.latent.release import (
        NoisePlacement,
        NoisyLatentStatistics,
        nonprivate_release,
        release_latent_statistics,
        release_with_noise_stds,
    )
    from privfed.engines.latent.statistics import (
        DEFAULT_MAX_RECORDS,
        LatentStatistics,
        LatentStatisticsConfig,
        packed_size,
        unpack_symmetric,
    )
