"""The factory-matrix engine: per-(class, client) generative factories and the matrix Γ.

FederatedFactory (arXiv:2603.16370) with what its public code lacks: exact
unlearning with certificates, DP-SGD training accounted in a
:class:`privfed.dp.PrivacyLedger`, and checksummed factory artifacts.

* :mod:`~privfed.engines.factory.base` -- the :class:`Factory` protocol,
  manifests and checksummed persistence.
* :mod:`~privfed.engines.factory.edm` -- EDM diffusion factory on a diffusers UNet.
* :mod:`~privfed.engines.factory.gaussian` -- Gaussian factory in a private-PCA
  or public-codec latent space (optionally DP: noisy clipped latent moments).
* :mod:`~privfed.engines.factory.dpsgd` -- DP-SGD with per-example gradients.
* :mod:`~privfed.engines.factory.matrix` -- :class:`FactoryMatrix`, quotas,
  provenance and unlearning certificates.
* :mod:`~privfed.engines.factory.unlearning` -- unlearning verified by
  membership inference (original vs unlearned vs retrained matrix).
* :mod:`~privfed.engines.factory.audit` -- membership-inference audit of
  factories (denoising-loss, likelihood and reconstruction attacks, AUC/TPR
  with intervals, held-out-threshold ε/μ lower bounds).
* :mod:`~privfed.engines.factory.job` -- end-to-end runs with a FedAvg baseline,
  configured by :mod:`~privfed.engines.factory.config` and reported by
  :mod:`~privfed.engines.factory.report` (imported on demand).
"""

from __future__ import annotations

from privfed.engines.factory.audit import (
    AttackAudit,
    FactoryAttack,
    FactoryAudit,
    FactoryAuditConfig,
    FactoryAuditReport,
    attacks_for,
    audit_factories,
    audit_factory,
    factory_attack_scores,
    numpy_denoiser,
)
from privfed.engines.factory.base import (
    ClientId,
    Factory,
    FactoryManifest,
    PrivacyRecord,
    read_manifest,
    tensors_sha256,
)
from privfed.engines.factory.dpsgd import DPSGDConfig, GaussianNoiseSource, record_in_ledger
from privfed.engines.factory.edm import (
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    UNetConfig,
    edm_sigmas,
)
from privfed.engines.factory.gaussian import (
    LatentGaussianDP,
    LatentGaussianFactory,
    codec_fingerprint,
)
from privfed.engines.factory.matrix import (
    CellKey,
    FactoryMatrix,
    RemovedCell,
    SampleProvenance,
    SyntheticDataset,
    UnlearningCertificate,
    cell_seed,
    largest_remainder_quotas,
)
from privfed.engines.factory.registry import FACTORY_KINDS, load_factory
from privfed.engines.factory.unlearning import (
    MembershipProbe,
    MembershipUnlearningCheck,
    membership_unlearning_check,
    remove_client_verified,
)

__all__ = [
    "FACTORY_KINDS",
    "AttackAudit",
    "CellKey",
    "ClientId",
    "DPSGDConfig",
    "EDMConfig",
    "EDMDiffusionFactory",
    "EDMTrainingConfig",
    "Factory",
    "FactoryAttack",
    "FactoryAudit",
    "FactoryAuditConfig",
    "FactoryAuditReport",
    "FactoryManifest",
    "FactoryMatrix",
    "GaussianNoiseSource",
    "LatentGaussianDP",
    "LatentGaussianFactory",
    "MembershipProbe",
    "MembershipUnlearningCheck",
    "PrivacyRecord",
    "RemovedCell",
    "SampleProvenance",
    "SyntheticDataset",
    "UNetConfig",
    "UnlearningCertificate",
    "attacks_for",
    "audit_factories",
    "audit_factory",
    "cell_seed",
    "codec_fingerprint",
    "edm_sigmas",
    "factory_attack_scores",
    "largest_remainder_quotas",
    "load_factory",
    "membership_unlearning_check",
    "numpy_denoiser",
    "read_manifest",
    "record_in_ledger",
    "remove_client_verified",
    "tensors_sha256",
]
