"""privfed.models: the engines (torch).

Latent-statistic engine: frozen public codecs (:mod:`privfed.models.codecs`),
exact fixed-point client statistics (:mod:`privfed.models.statistics`), the
server's DP release (:mod:`privfed.models.release`), class-conditional
Gaussians (:mod:`privfed.models.gaussians`) and the downstream classifier
(:mod:`privfed.models.classifier`).

Factory-matrix engine (:mod:`privfed.models.factories`): per-client, per-class
generative factories in a class x client matrix with quota synthesis and exact
unlearning.  Its main names are re-exported here.
"""

from privfed.models.classifier import SmallCNN, evaluate_classifier, train_classifier
from privfed.models.codecs import (
    Codec,
    ConvAutoencoderCodec,
    DiffusersCodec,
    DiffusersKind,
    PCACodec,
)
from privfed.models.factories import (
    EDMDiffusionFactory,
    FactoryMatrix,
    LatentGaussianFactory,
    UnlearningCertificate,
    load_factory,
)
from privfed.models.gaussians import ClassGaussians, fit_class_gaussians, project_psd
from privfed.models.release import (
    NoisePlacement,
    NoisyLatentStatistics,
    nonprivate_release,
    release_latent_statistics,
    release_with_noise_stds,
)
from privfed.models.statistics import (
    DEFAULT_MAX_RECORDS,
    LatentStatistics,
    LatentStatisticsAccumulator,
    LatentStatisticsConfig,
    compute_latent_statistics,
    packed_size,
    unpack_symmetric,
)

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
