"""The stages of the latent job, as public functions over frozen values.

Each takes and returns frozen values, so the same stages run in one process
(:mod:`privfed.engines.latent.job`), on Flower nodes (the client stage) and in a
ServerApp (the server stages); see the job's module docstring for the order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privfed.data import (
    DatasetSplit,
    ImageDataset,
    load_dataset,
    partition,
    require_classification_data,
    split_public_private,
)
from privfed.dp import PrivacyLedger
from privfed.engines.classifier import evaluate_classifier, train_classifier
from privfed.engines.codecs import Codec, ConvAutoencoderCodec, DiffusersCodec, PCACodec
from privfed.engines.latent.audit import (
    AuditInputs,
    AuditSkipped,
    AuditSummary,
    audit_skip_reason,
    audit_summary,
)
from privfed.engines.latent.client import LatentStatisticsAccumulator
from privfed.engines.latent.config import PipelineConfig
from privfed.engines.latent.gaussians import ClassGaussians
from privfed.engines.latent.release import (
    NoisyLatentStatistics,
    release_latent_statistics,
)
from privfed.engines.latent.statistics import (
    LatentStatistics,
    LatentStatisticsConfig,
)
from privfed.engines.moments.planning import LatentReleasePlan, plan_latent_release

__all__ = [
    "LatentData",
    "LatentRelease",
    "SyntheticData",
    "audit",
    "audit_inputs",
    "client_statistics",
    "encode",
    "fit_codec",
    "load_data",
    "plan_release",
    "release",
    "release_spec",
    "synthesize",
    "train_evaluate",
]


@dataclass(frozen=True, eq=False)
class LatentData:
    """The data stage's output.

    Attributes:
        num_classes: Classes of the dataset (every client sends every class).
        split: Public / private / test parts.
        clients: Each client's indices into ``split.private``.
    """

    num_classes: int
    split: DatasetSplit = field(repr=False)
    clients: tuple[np.ndarray, ...] = field(repr=False)

    @property
    def empty_clients(self) -> int:
        """Clients holding no private record."""
        return sum(1 for c in self.clients if c.size == 0)


def load_data(config: PipelineConfig) -> LatentData:
    """Load, split and partition the data of a run (the experimental design's seed)."""
    dataset = load_dataset(config.dataset, num_classes=config.num_classes)
    require_classification_data(dataset)
    split = split_public_private(
        dataset,
        public_fraction=config.public_fraction,
        test_fraction=config.test_fraction,
        seed=config.seed,
    )
    clients = partition(
        split.private.labels,
        scheme=config.partition,
        num_clients=config.num_clients,
        seed=config.seed,
        alpha=config.alpha,
        classes_per_client=config.classes_per_client,
    )
    return LatentData(num_classes=dataset.num_classes, split=split, clients=tuple(clients))


def fit_codec(config: PipelineConfig, public: ImageDataset) -> Codec:
    """Fit the configured codec on the public split (or load a pretrained one)."""
    images = torch.from_numpy(np.array(public.images))
    if config.codec == "pca":
        return PCACodec.fit(images, latent_dim=config.latent_dim)
    if config.codec == "conv-ae":
        return ConvAutoencoderCodec.fit(images, latent_dim=config.latent_dim, seed=config.seed)
    return DiffusersCodec.from_pretrained(
        config.codec,
        kind=str(config.codec_kind),
        image_shape=public.image_shape,
        device=config.device,
    )


def release_spec(
    config: PipelineConfig, codec: Codec, *, num_classes: int, max_records: int
) -> LatentStatisticsConfig:
    """The one release specification shared by the clients and the DP plan.

    Dimension from the codec, the clip norm from the configuration (or the
    codec's data-independent default), the grid from the ring bounds.

    Args:
        config: The run's configuration.
        codec: The frozen public codec.
        num_classes: Classes every client sends.
        max_records: Public upper bound on the records of the aggregate.
    """
    clip_norm = float(config.clip_norm if config.clip_norm is not None else codec.default_clip_norm)
    return LatentStatisticsConfig(
        dim=codec.latent_dim,
        num_classes=num_classes,
        clip_norm=clip_norm,
        max_records=max(max_records, 1),
    )


def plan_release(config: PipelineConfig, spec: LatentStatisticsConfig) -> LatentReleasePlan:
    """The DP plan for ``spec`` (clip norm and dimension come from the spec only)."""
    return plan_latent_release(
        config.epsilon,
        config.delta,
        clip_norm=spec.clip_norm,
        dim=spec.dim,
        adjacency=config.adjacency,
    )


def encode(codec: Codec, images: np.ndarray, device: torch.device) -> torch.Tensor:
    """Latents of ``images`` through the frozen codec: float64 ``(n, d)`` on the CPU."""
    return codec.encode(torch.from_numpy(np.array(images)).to(device)).to(torch.float64).cpu()


def client_statistics(
    latents: torch.Tensor,
    labels: np.ndarray,
    spec: LatentStatisticsConfig,
    device: torch.device,
) -> LatentStatistics:
    """One client's exact statistics (the client stage); zeros for an empty client."""
    if latents.shape[0] == 0:
        return LatentStatistics.zeros(spec)
    accumulator = LatentStatisticsAccumulator(spec, device=device)
    accumulator.update(latents, torch.from_numpy(np.array(labels)))
    return accumulator.result()


@dataclass(frozen=True, eq=False)
class LatentRelease:
    """The DP release stage's output: the plan, the ledger and the noisy statistics."""

    plan: LatentReleasePlan
    ledger: PrivacyLedger
    noisy: NoisyLatentStatistics = field(repr=False)


def release(
    total: LatentStatistics,
    config: PipelineConfig,
    spec: LatentStatisticsConfig,
    plan: LatentReleasePlan | None = None,
) -> LatentRelease:
    """Add the noise of ``plan`` (default: planned for (ε, δ)) once, in a fresh budgeted ledger."""
    if plan is None:
        plan = plan_release(config, spec)
    ledger = plan.ledger()
    noisy = release_latent_statistics(
        total, plan, ledger=ledger, seed=config.noise_seed, placement=config.placement
    )
    return LatentRelease(plan=plan, ledger=ledger, noisy=noisy)


@dataclass(frozen=True, eq=False)
class SyntheticData:
    """Synthetic latents ``(s, d)`` float64, decoded images ``(s, C, H, W)`` float32, labels."""

    latents: np.ndarray = field(repr=False)
    images: np.ndarray = field(repr=False)
    labels: np.ndarray = field(repr=False)


def synthesize(
    codec: Codec,
    gaussians: ClassGaussians,
    config: PipelineConfig,
    device: torch.device,
    *,
    offset: int,
) -> SyntheticData:
    """Sample ``samples_per_class`` latents per class and decode them.

    The sampling seed is ``seed * 1000 + offset`` (offset 1: the DP release, 2: the
    noiseless baseline), so the two syntheses never share draws.
    """
    latents, labels = gaussians.sample(config.samples_per_class, seed=config.seed * 1000 + offset)
    images = codec.decode(torch.from_numpy(latents).to(device)).cpu().numpy()
    return SyntheticData(latents=latents, images=images.astype(np.float32), labels=labels)


def train_evaluate(
    images: np.ndarray,
    labels: np.ndarray,
    test: ImageDataset,
    config: PipelineConfig,
    device: torch.device,
    progress: Any = None,
    seed: int | None = None,
) -> float:
    """Train the downstream classifier on ``(images, labels)``; accuracy on ``test``.

    ``progress``: an optional ``(epoch, epochs, loss)`` callback, as for
    :func:`~privfed.engines.classifier.train_classifier`; ``seed`` overrides
    ``config.seed`` for the classifier (a repeat's seed).
    """
    test_x = torch.from_numpy(np.array(test.images))
    test_y = torch.from_numpy(np.array(test.labels))
    model = train_classifier(
        torch.from_numpy(images),
        torch.from_numpy(labels),
        num_classes=int(max(int(test_y.max()) + 1, int(labels.max()) + 1, 2)),
        architecture=config.classifier,
        epochs=config.classifier_epochs,
        patience=config.classifier_patience,
        seed=config.seed if seed is None else seed,
        device=device,
        progress=progress,
    )
    return evaluate_classifier(model, test_x, test_y, device=device)


def audit_inputs(
    codec: Codec,
    split: DatasetSplit,
    member_indices: np.ndarray,
    private_latents: torch.Tensor,
    spec: LatentStatisticsConfig,
    noisy: NoisyLatentStatistics,
    synthetic: SyntheticData,
    device: torch.device,
) -> AuditInputs:
    """The default audit's inputs; see :mod:`privfed.engines.latent.audit` for the roles."""
    # The statistics' own quantizer: member rows are then exactly what was summed.
    quantizer = LatentStatisticsAccumulator(spec, device=device)
    grid = math.ldexp(1.0, -spec.bits)

    def clipped(latents: torch.Tensor) -> np.ndarray:
        if latents.shape[0] == 0:
            return np.zeros((0, spec.dim))
        q = quantizer.quantize(latents).cpu().numpy().astype(np.float64)
        return q * grid

    private_labels = np.asarray(split.private.labels, dtype=np.int64)
    return AuditInputs(
        member_latents=clipped(private_latents[torch.from_numpy(member_indices)]),
        member_labels=private_labels[member_indices],
        nonmember_latents=clipped(encode(codec, split.test.images, device)),
        nonmember_labels=np.asarray(split.test.labels, dtype=np.int64),
        synthetic_latents=np.asarray(synthetic.latents, dtype=np.float64),
        synthetic_labels=np.asarray(synthetic.labels, dtype=np.int64),
        reference_latents=clipped(encode(codec, split.public.images, device)),
        reference_labels=np.asarray(split.public.labels, dtype=np.int64),
        noisy_sums=np.array(noisy.sums, dtype=np.float64),
        # What the attacker sees: exact counts when public, else rounded noisy
        # ones; floored at 1 because the attack's model needs a record per class.
        counts=np.maximum(np.rint(np.asarray(noisy.counts, dtype=np.float64)), 1.0),
        # The grid rounding of the noise adds a little variance; the attack's model includes it.
        noise_std_sum=float(math.sqrt(noisy.noise_std_sum**2 + noisy.grid_variance)),
    )


def audit(
    inputs: AuditInputs, config: PipelineConfig, plan: LatentReleasePlan
) -> tuple[Any, AuditSummary | AuditSkipped]:
    """Run the default audit on ``inputs``; ``(full audit or None, summary)``."""
    reason = audit_skip_reason(
        members=inputs.member_latents.shape[0],
        nonmembers=inputs.nonmember_latents.shape[0],
        reference=0 if inputs.reference_latents is None else inputs.reference_latents.shape[0],
    )
    if reason is not None:
        return None, AuditSkipped(reason)
    full = inputs.run(delta=config.delta, seed=config.seed)
    summary = audit_summary(
        full,
        claimed_epsilon=plan.epsilon,
        claimed_delta=plan.delta,
        claimed_mu=plan.mu,
        adjacency=config.adjacency,
    )
    return full, summary
