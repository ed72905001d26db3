"""The factory-matrix engine: per-(class, client) generative factories and the matrix Γ.

FederatedFactory (arXiv:2603.16370) with what its public code lacks: exact
unlearning with certificates, DP-SGD training accounted in a
:class:`privfed.dp.PrivacyLedger`, and checksummed factory artifacts.

* :mod:`~privfed.models.factories.base` -- the :class:`Factory` protocol,
  manifests and checksummed persistence.
* :mod:`~privfed.models.factories.edm` -- EDM diffusion factory on a diffusers UNet.
* :mod:`~privfed.models.factories.gaussian` -- probabilistic-PCA Gaussian factory.
* :mod:`~privfed.models.factories.dpsgd` -- DP-SGD with per-example gradients.
* :mod:`~privfed.models.factories.matrix` -- :class:`FactoryMatrix`, quotas,
  provenance and unlearning certificates.
* :mod:`~privfed.models.factories.pipeline` -- end-to-end runs with a FedAvg baseline
  (imported on demand: ``from privfed.models.factories.pipeline import ...``).
"""

from __future__ import annotations

from privfed.models.factories.base import (
    ClientId,
    Factory,
    FactoryManifest,
    PrivacyRecord,
    load_factory,
    read_manifest,
    tensors_sha256,
)
from privfed.models.factories.dpsgd import DPSGDConfig, GaussianNoiseSource, record_in_ledger
from privfed.models.factories.edm import (
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    UNetConfig,
    edm_sigmas,
)
from privfed.models.factories.gaussian import LatentGaussianFactory
from privfed.models.factories.matrix import (
    CellKey,
    FactoryMatrix,
    RemovedCell,
    SampleProvenance,
    SyntheticDataset,
    UnlearningCertificate,
    cell_seed,
    largest_remainder_quotas,
)

__all__ = [
    "CellKey",
    "ClientId",
    "DPSGDConfig",
    "EDMConfig",
    "EDMDiffusionFactory",
    "EDMTrainingConfig",
    "Factory",
    "FactoryManifest",
    "FactoryMatrix",
    "GaussianNoiseSource",
    "LatentGaussianFactory",
    "PrivacyRecord",
    "RemovedCell",
    "SampleProvenance",
    "SyntheticDataset",
    "UNetConfig",
    "UnlearningCertificate",
    "cell_seed",
    "edm_sigmas",
    "largest_remainder_quotas",
    "load_factory",
    "read_manifest",
    "record_in_ledger",
    "tensors_sha256",
]
