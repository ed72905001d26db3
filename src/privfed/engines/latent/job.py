"""The job of the latent-statistic engine (FedKT-CSD), as typed stages.

:func:`run_pipeline` runs the stages below in order; each is a public function
that takes and returns frozen values, so the same stages run in one process
here, on Flower nodes (the client stage) and in a ServerApp (the server stages).

1. ``data`` -- :func:`load_data`: load the dataset, split it into public /
   private / test parts, spread the private part over clients
   (:func:`privfed.data.partition`).
2. ``codec`` -- :func:`fit_codec` on the PUBLIC part only (or load a pretrained
   one) and :func:`release_spec`: the one specification (dimension, classes,
   clip norm, grid) shared by the clients' statistics and the DP plan; the
   clip norm is the codec's data-independent default unless given.
3. ``clients`` -- :func:`encode` and :func:`client_statistics`: every client's
   exact fixed-point statistics, flattened to a ring vector.
4. ``secagg`` -- :func:`aggregate`: a real double-masking secure-aggregation
   round over serialized messages, with scripted dropouts; the server learns
   only the total of the survivors, which is checked against the exact sum.
5. ``release`` -- :func:`release`: the DP plan from :mod:`privfed.dp`, grid
   noise, the ledger entry.
6. ``synthesis`` -- :func:`synthesize`: per-class Gaussians (post-processing),
   sampling, decoding.
7. ``train`` -- :func:`train_evaluate`: a classifier on the synthetic images,
   evaluated on real test data.
8. ``baselines`` -- the same classifier on the real private data, and on
   synthetic data from the noiseless statistics (no DP), for reference.
9. ``audit`` -- :func:`audit`: the default membership-inference audit of the
   release and its synthetic latents (who counts as member, non-member and
   reference is documented in :mod:`privfed.engines.latent.audit`).  Its
   summary goes into the report, its inputs into ``audit_inputs.npz`` so that
   ``privfed audit --run-dir`` can rerun or extend it.

Progress is reported through the one protocol of :mod:`privfed.progress`
(a start and a finish event per stage); the artefacts are written by the one
path of :mod:`privfed.engines.job`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privfed._checks import (
    check_bool,
    check_choice,
    check_enum,
    check_float,
    check_int,
    check_optional_int,
)
from privfed._records import field_dict
from privfed.data import (
    DatasetSplit,
    ImageDataset,
    PartitionScheme,
    load_dataset,
    partition,
    require_classification_data,
    split_public_private,
)
from privfed.dp import Adjacency, PrivacyLedger, min_honest_contributors
from privfed.dp.distributed_blocks import dropout_inflation
from privfed.engines.classifier import ARCHITECTURES, evaluate_classifier, train_classifier
from privfed.engines.codecs import Codec, ConvAutoencoderCodec, DiffusersCodec, PCACodec
from privfed.engines.job import (
    RunArtifacts,
    StageClock,
    WritesArtifacts,
    evaluation_document,
    release_document,
    run_job,
)
from privfed.engines.latent.audit import (
    AuditInputs,
    AuditSkipped,
    AuditSummary,
    audit_skip_reason,
    audit_summary,
)
from privfed.engines.latent.client import LatentStatisticsAccumulator
from privfed.engines.latent.distributed import (
    DistributedAggregation,
    DistributedNoisePlan,
    NoiseModel,
    aggregate_distributed,
    layers_supported,
    plan_distributed_noise,
    secagg_options,
)
from privfed.engines.latent.gaussians import ClassGaussians, fit_class_gaussians
from privfed.engines.latent.release import (
    NoisePlacement,
    NoisyLatentStatistics,
    nonprivate_release,
    release_latent_statistics,
)
from privfed.engines.latent.statistics import (
    DEFAULT_MAX_RECORDS,
    LatentStatistics,
    LatentStatisticsConfig,
)
from privfed.engines.moments.planning import LatentReleasePlan, plan_latent_release
from privfed.errors import ParameterError, ParameterTypeError
from privfed.progress import ProgressFn
from privfed.secagg import Stage, run_protocol

__all__ = [
    "Aggregation",
    "Aggregator",
    "LatentData",
    "LatentRelease",
    "NoisyAggregator",
    "NoisyRound",
    "PipelineConfig",
    "PipelineReport",
    "PipelineResult",
    "ProgressFn",
    "SyntheticData",
    "aggregate",
    "audit",
    "client_statistics",
    "distributed_plan",
    "dropout_plan",
    "encode",
    "fit_codec",
    "load_data",
    "release",
    "release_spec",
    "run_pipeline",
    "run_spec",
    "synthesize",
    "train_evaluate",
]


def _finite(name: str, value: object, *, low: float, high: float | None = None) -> None:
    domain = f"a finite float > {low}" + ("" if high is None else f" and < {high}")
    check_float(
        name,
        value,
        low=low,
        high=high,
        open_low=True,
        open_high=True,
        numpy=False,
        expected="a float",
        domain=domain,
    )


def _idle_cores() -> int:
    """CPU threads for a run whose ``num_threads`` is ``None``: the cores not already busy.

    Torch's own thread count (the machine's cores, or ``OMP_NUM_THREADS``) less
    the 1-minute load average rounded to the nearest integer, at least 1.  On a
    quiet machine every core is used; on a loaded one fewer, because torch's
    threads wait for each other at every operation and a thread that has to share
    its core stalls the rest (on a 2-core machine at a load average of 4.8, two
    threads trained the MLP classifier 15-50x slower than one).  The load average
    counts this process too once it has been busy for a while.
    """
    cores = max(1, torch.get_num_threads())
    try:
        busy = math.floor(os.getloadavg()[0] + 0.5)
    except (AttributeError, OSError):  # no load average on this platform
        return cores
    return max(1, cores - busy)


@dataclass(frozen=True)
class PipelineConfig:
    """Configuration of one run of the latent-statistic job.

    Attributes:
        dataset: ``"digits"`` (bundled), a ``.npz`` path, or an image-folder path.
        public_fraction: Share of records in the public split, ``(0, 1)``.
        test_fraction: Share of records in the held-out test split, ``(0, 1)``.
        partition: How the private split is spread over clients.
        alpha: Dirichlet concentration (``partition="dirichlet"`` only).
        classes_per_client: Classes per client (``"pathological"`` only).
        num_clients: Number of clients ``>= 2``.
        codec: ``"pca"``, ``"conv-ae"``, or a diffusers model directory.
        codec_kind: For a diffusers codec, which autoencoder it is
            (``"tiny"``, ``"kl"`` or ``"dc"``; never guessed); ``None`` otherwise.
        num_classes: The dataset's number of classes; ``None`` infers it from
            the labels (and refuses labels that leave classes empty).
        latent_dim: ``d`` for the fitted codecs (ignored for diffusers).
        clip_norm: ``R``; ``None`` uses the codec's ``default_clip_norm``.
        epsilon: ε of the release, finite ``> 0``.
        delta: δ of the release, in ``(0, 1)``.
        adjacency: Neighbouring relation of the guarantee.
        dropout_rate: Fraction of clients that drop out during secure
            aggregation, in ``[0, 0.5)``; half of them before sending their
            masked input (their data is left out), half after (their data is in).
        samples_per_class: Synthetic latents drawn per class.
        classifier: Architecture of the downstream classifiers, ``"mlp"`` or
            ``"cnn"`` (see :mod:`privfed.engines.classifier`).
        classifier_epochs: Most epochs of each downstream classifier.
        classifier_patience: Early stopping: epochs without improvement of the
            loss on a held-out tenth of the classifier's own training data
            (synthetic data for the synthetic classifier; never the test split)
            before training stops; ``None`` trains every epoch on all of it.
        baselines: Also train on real private data and on noiseless synthetic
            data (off by default: neither depends on the privacy parameters, so
            sweeps need them once, not every run).
        audit: Run the membership-inference audit stage (about 1-2 s on a
            CPU at the default size).
        placement: Where the server adds the noise.
        device: Torch device for the PCA and diffusers codecs, statistics and
            classifiers (the small convolutional autoencoder always runs on the CPU).
        num_threads: CPU threads torch may use during the run (restored after);
            ``None`` (default): the machine's cores that are
            not already busy.  The default MLP classifier gives the same bits at
            any thread count; the CNN does not.
        seed: Seed of the experimental design (split, partition, codec fit,
            dropouts, sampling, classifier).  Never used for the DP noise.
        noise_seed: ``None`` (default): DP noise from the OS CSPRNG.  An int
            makes the noise reproducible (recorded as seeded in the ledger).
        noise: Who adds the DP noise (:class:`~privfed.engines.latent.distributed.NoiseModel`):
            ``"central"`` (default; the server adds it once after unmasking and
            sees the exact totals), ``"distributed-gaussian"`` or
            ``"distributed-skellam"`` (every client adds integer noise before
            masking; the server never holds a noiseless total).
        assumed_corrupted: n_C, clients assumed to collude with the server
            (distributed models: the noise is calibrated for ``t − n_C``
            honest contributors; ``t − n_C < 1`` is refused).
        noise_layers: Distributed Skellam only: remove the dropout excess with
            secret-shared noise layers (``None``: when secure aggregation
            supports them).  Refused for the discrete Gaussian.
        secagg_mode: Security mode of secure aggregation: ``"semi-honest"``
            (default; the server is trusted to follow the protocol) or
            ``"active"`` (one Ed25519 identity key per simulated client, a
            registry pinning ``assumed_corrupted`` as n_C, signed keys and the
            ConsistencyCheck round; a server that deviates cannot unmask an
            honest input while at most n_C clients collude with it).  Active
            mode needs ``2t > num_clients + assumed_corrupted``.
    """

    dataset: str = "digits"
    public_fraction: float = 0.15
    test_fraction: float = 0.25
    partition: PartitionScheme | str = PartitionScheme.DIRICHLET
    alpha: float | None = 0.1
    classes_per_client: int | None = None
    num_clients: int = 20
    codec: str = "pca"
    codec_kind: str | None = None
    num_classes: int | None = None
    latent_dim: int = 8
    clip_norm: float | None = None
    epsilon: float = 10.0
    delta: float = 1e-5
    adjacency: Adjacency = Adjacency.REPLACE_ONE
    dropout_rate: float = 0.1
    samples_per_class: int = 300
    classifier: str = "mlp"
    classifier_epochs: int = 50
    classifier_patience: int | None = 3
    baselines: bool = False
    audit: bool = True
    placement: NoisePlacement | str = NoisePlacement.GRID
    device: str = "cpu"
    num_threads: int | None = None
    seed: int = 0
    noise_seed: int | None = None
    noise: NoiseModel | str = NoiseModel.CENTRAL
    assumed_corrupted: int = 0
    noise_layers: bool | None = None
    secagg_mode: str = "semi-honest"

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ParameterError("dataset", "'digits', an .npz path or a directory", self.dataset)
        if self.codec in ("pca", "conv-ae"):
            if self.codec_kind is not None:
                raise ParameterError(
                    "codec_kind", f"None for the {self.codec!r} codec", self.codec_kind
                )
        elif self.codec_kind not in ("tiny", "kl", "dc"):
            raise ParameterError(
                "codec_kind", "'tiny', 'kl' or 'dc' for a diffusers codec", self.codec_kind
            )
        if self.num_classes is not None and (
            isinstance(self.num_classes, bool)
            or not isinstance(self.num_classes, int)
            or self.num_classes < 2
        ):
            raise ParameterError("num_classes", "an int >= 2 or None", self.num_classes)
        _finite("public_fraction", self.public_fraction, low=0.0, high=1.0)
        _finite("test_fraction", self.test_fraction, low=0.0, high=1.0)
        scheme = check_enum("partition", self.partition, PartitionScheme)
        object.__setattr__(self, "partition", scheme)
        if scheme is not PartitionScheme.DIRICHLET:
            object.__setattr__(self, "alpha", None)
        elif self.alpha is None:
            raise ParameterError("alpha", "a finite float > 0 for the dirichlet partition", None)
        else:
            _finite("alpha", self.alpha, low=0.0)
        if scheme is not PartitionScheme.PATHOLOGICAL:
            object.__setattr__(self, "classes_per_client", None)
        elif self.classes_per_client is None:
            object.__setattr__(self, "classes_per_client", 2)
        for name, low in (
            ("num_clients", 2),
            ("latent_dim", 1),
            ("samples_per_class", 1),
            ("classifier_epochs", 1),
        ):
            check_int(name, getattr(self, name), minimum=low, type_error=False)
        if self.clip_norm is not None:
            _finite("clip_norm", self.clip_norm, low=0.0)
        _finite("epsilon", self.epsilon, low=0.0)
        _finite("delta", self.delta, low=0.0, high=1.0)
        object.__setattr__(self, "adjacency", check_enum("adjacency", self.adjacency, Adjacency))
        if isinstance(self.dropout_rate, bool) or not isinstance(self.dropout_rate, int | float):
            raise ParameterTypeError("dropout_rate", "a float", self.dropout_rate)
        if not 0.0 <= self.dropout_rate < 0.5:
            raise ParameterError("dropout_rate", "a float in [0, 0.5)", self.dropout_rate)
        placement = check_enum("placement", self.placement, NoisePlacement)
        object.__setattr__(self, "placement", placement)
        for name in ("baselines", "audit"):
            check_bool(name, getattr(self, name))
        check_choice("classifier", self.classifier, ARCHITECTURES)
        check_optional_int("num_threads", self.num_threads, minimum=1, type_error=False)
        check_optional_int(
            "classifier_patience", self.classifier_patience, minimum=1, type_error=False
        )
        if self.noise_seed is not None and (
            isinstance(self.noise_seed, bool) or not isinstance(self.noise_seed, int)
        ):
            raise ParameterTypeError("noise_seed", "an int or None", self.noise_seed)
        model = check_enum("noise", self.noise, NoiseModel)
        object.__setattr__(self, "noise", model)
        corrupted = check_int("assumed_corrupted", self.assumed_corrupted, minimum=0)
        check_choice("secagg_mode", self.secagg_mode, ("semi-honest", "active"))
        t = threshold_for(self.num_clients)
        if self.secagg_mode == "active" and 2 * t <= self.num_clients + corrupted:
            raise ParameterError(
                "assumed_corrupted",
                f"an int < 2t - n = {2 * t - self.num_clients} with secagg_mode='active' "
                f"(t = {t}, n = {self.num_clients})",
                corrupted,
                detail="the active protocol needs 2t > n + n_C",
            )
        if model is not NoiseModel.CENTRAL:
            min_honest_contributors(
                threshold_for(self.num_clients), corrupted, num_clients=self.num_clients
            )
        if self.noise_layers is not None:
            check_bool("noise_layers", self.noise_layers)
            if self.noise_layers and model is not NoiseModel.DISTRIBUTED_SKELLAM:
                raise ParameterError(
                    "noise_layers",
                    "False or None unless noise='distributed-skellam'",
                    self.noise_layers,
                    detail="excess removal is proved for Skellam noise only",
                )
            if self.noise_layers and not layers_supported():
                raise ParameterError(
                    "noise_layers",
                    "False or None (this secure aggregation cannot share noise layers)",
                    self.noise_layers,
                )

    @property
    def uses_noise_layers(self) -> bool:
        """Whether the run removes the dropout excess with secret-shared noise layers."""
        if self.noise is not NoiseModel.DISTRIBUTED_SKELLAM:
            return False
        return layers_supported() if self.noise_layers is None else bool(self.noise_layers)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly view (enums as their values; the noise seed only as a flag)."""
        out: dict[str, Any] = {"engine": "latent"}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "noise_seed":
                out["noise_seeded"] = value is not None
                continue
            out[f.name] = value.value if hasattr(value, "value") else value
        return out


@dataclass(frozen=True)
class PipelineReport:
    """What one run measured (JSON-serialisable through :meth:`to_dict`).

    Accuracies are top-1 on the held-out real test split, in ``[0, 1]``;
    baseline accuracies are ``None`` when ``baselines`` was off.  ``audit`` is
    the :class:`~privfed.engines.latent.audit.AuditSummary` (``None`` when the
    audit was off; an :class:`~privfed.engines.latent.audit.AuditSkipped` when
    the data were too few).
    """

    config: dict[str, Any]
    accuracy_synthetic: float
    accuracy_real: float | None
    accuracy_nondp_synthetic: float | None
    epsilon: float
    delta: float
    mu: float
    noise_std_sum: float
    noise_std_second_moment: float
    noise_std_count: float
    clip_norm: float
    latent_dim: int
    fractional_bits: int
    payload_values_per_class: int
    payload_values_per_client: int
    payload_bytes_per_client: int
    secagg_bytes_per_client: float
    num_clients: int
    empty_clients: int
    dropped_clients: dict[str, list[int]]
    records_public: int
    records_private: int
    records_aggregated: int
    records_test: int
    seconds: dict[str, float]
    ledger: dict[str, Any]
    audit: AuditSummary | AuditSkipped | None = None
    secagg_threshold: int = 0
    noisy_class_counts: tuple[float, ...] | None = None
    distributed: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Everything the run measured, as one plain dict (release and evaluation together).

        This view mixes DP outputs with numbers computed from private data
        without noise; it is for the Python caller.  What a run directory holds
        is split: :meth:`release_dict` and :meth:`evaluation_dict`.
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["audit"] = None if self.audit is None else self.audit.to_dict()
        plain: dict[str, Any] = json.loads(json.dumps(out))
        return plain

    def release_dict(self) -> dict[str, Any]:
        """``release.json``: DP outputs and public facts only.

        Public facts are what the operator declared (the configuration, the
        codec's dimension, the clip norm and the ring's grid, which follow from
        it and from public bounds) and the protocol's own facts (threshold,
        scripted dropouts).  DP outputs are the plan's guarantee and noise
        stds, the ledger's guarantee and digest, and -- when counts are private
        (add/remove) -- the noisy class counts of the release.
        """
        ledger_text = json.dumps(self.ledger, sort_keys=True)
        dp: dict[str, Any] = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mu": self.mu,
            "adjacency": self.config["adjacency"],
            "noise_std_sum": self.noise_std_sum,
            "noise_std_second_moment": self.noise_std_second_moment,
            "noise_std_count": self.noise_std_count,
            "mechanism": "Gaussian (rounded to the fixed-point grid), added once by the server",
            "accountant": "exact mu-GDP (privfed.dp.PrivacyLedger)",
            "ledger_sha256": hashlib.sha256(ledger_text.encode()).hexdigest(),
            "noise_model": "central (server adds noise once after unmasking)",
            "trust": "trusted server: it sees the exact unmasked totals",
        }
        if self.distributed is not None:
            # The distributed release is accounted in RDP; the Gaussian mu of the same
            # noise stds is kept under its own name (it is not this mechanism's claim).
            dp.update(
                {
                    "mu": None,
                    "gaussian_equivalent_mu": self.mu,
                    "mechanism": (
                        f"distributed {self.distributed['mechanism']} (exact integer noise "
                        "added by every client before masking)"
                    ),
                    "accountant": "Renyi DP (privfed.dp.PrivacyLedger, distributed-blocks)",
                    "noise_model": self.distributed["noise_model"],
                    "trust": self.distributed["trust"],
                    "distributed": self.distributed,
                }
            )
        if self.noisy_class_counts is not None:
            dp["noisy_class_counts"] = list(self.noisy_class_counts)
        return release_document(
            "latent",
            public={
                "config": self.config,
                "latent_dim": self.latent_dim,
                "clip_norm": self.clip_norm,
                "fractional_bits": self.fractional_bits,
                "payload_values_per_class": self.payload_values_per_class,
                "payload_values_per_client": self.payload_values_per_client,
                "payload_bytes_per_client": self.payload_bytes_per_client,
                "num_clients": self.num_clients,
                "secagg_threshold": self.secagg_threshold,
                "secagg_mode": self.config.get("secagg_mode", "semi-honest"),
                "dropped_clients": self.dropped_clients,
            },
            dp=dp,
            samples_per_class=self.config["samples_per_class"],
        )

    def evaluation_dict(self) -> dict[str, Any]:
        """``evaluation.json``: what the run computed from private data without noise."""
        counted = field_dict(
            self,
            "accuracy_synthetic",
            "accuracy_real",
            "accuracy_nondp_synthetic",
            "records_public",
            "records_private",
            "records_aggregated",
            "records_test",
            "empty_clients",
            "secagg_bytes_per_client",
        )
        return evaluation_document(
            "latent",
            {
                **counted,
                "seconds": dict(self.seconds),
                "audit": None if self.audit is None else self.audit.to_dict(),
            },
        )


@dataclass(frozen=True, eq=False)
class PipelineResult(WritesArtifacts):
    """A run's report plus the artefacts later stages (plots, audits) need.

    ``synthetic_latents`` are the sampled latents behind ``synthetic_images``
    (float64 ``(s, d)``); ``audit`` is the full audit (with per-record scores)
    and ``audit_inputs`` what ``audit_inputs.npz`` holds; both ``None`` when
    the audit was off or skipped.
    """

    report: PipelineReport
    ledger: PrivacyLedger
    split: DatasetSplit
    client_indices: tuple[np.ndarray, ...]
    codec: Codec
    aggregate: LatentStatistics | None = field(repr=False)
    release: NoisyLatentStatistics = field(repr=False)
    gaussians: ClassGaussians = field(repr=False)
    synthetic_images: np.ndarray = field(repr=False)
    synthetic_labels: np.ndarray = field(repr=False)
    synthetic_latents: np.ndarray = field(repr=False)
    audit: Any = field(default=None, repr=False)
    audit_inputs: AuditInputs | None = field(default=None, repr=False)

    def artifacts(self, *, release_only: bool = False) -> RunArtifacts:
        """The run's artefacts, for :func:`privfed.engines.job.write_artifacts`.

        Args:
            release_only: Only the release (what a deployment ships): no
                ``evaluation.json`` and no ``audit_inputs.npz``.
        """
        return RunArtifacts(
            release=self.report.release_dict(),
            evaluation=None if release_only else self.report.evaluation_dict(),
            ledger=self.ledger,
            sample_images=self.synthetic_images,
            sample_labels=self.synthetic_labels,
            audit_inputs=None if release_only else self.audit_inputs,
        )


# -- the stages ------------------------------------------------------------------------


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
class Aggregation:
    """What secure aggregation delivered to the server.

    Attributes:
        aggregate: The exact total of the survivors' statistics; ``None`` when
            the process never held it (distributed noise over an external
            round, e.g. Flower: the nodes noise before masking).
        survivors: Indices (0-based) of the clients whose input is in the total.
        dropouts: Scripted dropouts per stage (0-based client indices).
        threshold: The secure-aggregation threshold.
        bytes_per_client: Mean bytes a client that finished the round sent.
    """

    aggregate: LatentStatistics | None = field(repr=False)
    survivors: tuple[int, ...]
    dropouts: Mapping[Stage, tuple[int, ...]]
    threshold: int
    bytes_per_client: float


def dropout_plan(config: PipelineConfig) -> dict[Stage, list[int]]:
    """The scripted dropouts of a run: half before the masked input, half after."""
    count = round(config.dropout_rate * config.num_clients)
    if count == 0:
        return {}
    rng = np.random.default_rng([config.seed, 0xD20])
    chosen = sorted(int(i) for i in rng.choice(config.num_clients, size=count, replace=False))
    before, after = chosen[: (count + 1) // 2], chosen[(count + 1) // 2 :]
    plan: dict[Stage, list[int]] = {Stage.MASKED_INPUT: before}
    if after:
        plan[Stage.UNMASKING] = after
    return plan


def threshold_for(num_clients: int) -> int:
    """The secure-aggregation threshold of a run: a strict majority of the clients."""
    return num_clients // 2 + 1


def aggregate(
    client_stats: list[LatentStatistics],
    spec: LatentStatisticsConfig,
    *,
    threshold: int,
    dropouts: Mapping[Stage, list[int]],
    mode: str = "semi-honest",
    corrupted: int = 0,
) -> Aggregation:
    """Sum the clients' statistics by secure aggregation (in process, through bytes).

    ``mode="active"`` plays the actively secure round with one fresh identity
    key per client and ``corrupted`` (n_C) pinned in the registry
    (:func:`~privfed.engines.latent.distributed.secagg_options`).

    The delivered total is checked against the exact sum of the survivors'
    statistics; a mismatch raises ``RuntimeError`` (it would be a bug).

    Raises:
        ProtocolAbort: Fewer than ``threshold`` clients remained at some stage.
    """
    vectors = [s.to_ring_vector() for s in client_stats]
    report = run_protocol(
        vectors,
        threshold=threshold,
        dropouts=dropouts,
        **secagg_options(mode, corrupted, len(vectors)),
    )
    survivors = tuple(i - 1 for i in report.survivors)
    total = LatentStatistics.from_ring_vector(report.total, spec)
    expected = LatentStatistics.zeros(spec)
    for i in survivors:
        expected = expected + client_stats[i]
    if total != expected:
        raise RuntimeError("secure aggregation total differs from the exact sum of its inputs")
    full = [c for c in report.clients if Stage.UNMASKING in c.bytes_sent]
    return Aggregation(
        aggregate=total,
        survivors=survivors,
        dropouts={stage: tuple(ids) for stage, ids in dropouts.items()},
        threshold=threshold,
        bytes_per_client=float(np.mean([c.total_bytes for c in full])) if full else 0.0,
    )


def distributed_plan(config: PipelineConfig, spec: LatentStatisticsConfig) -> DistributedNoisePlan:
    """The clients' noise plan of a distributed run (grid, calibration, layers)."""
    plan = plan_distributed_noise(
        config.noise,
        config.epsilon,
        config.delta,
        clip_norm=spec.clip_norm,
        dim=spec.dim,
        num_classes=spec.num_classes,
        adjacency=config.adjacency,
        num_clients=config.num_clients,
        threshold=threshold_for(config.num_clients),
        corrupted=config.assumed_corrupted,
        layers=config.uses_noise_layers,
        max_records=spec.max_records,
    )
    if config.secagg_mode == "semi-honest":
        return plan
    return dataclasses.replace(plan, secagg_mode=config.secagg_mode)


def run_spec(
    config: PipelineConfig, codec: Codec, *, num_classes: int
) -> tuple[LatentStatisticsConfig, DistributedNoisePlan | None]:
    """The statistics' spec of a run and, with distributed noise, the clients' noise plan.

    Computed from public quantities only (the configuration, the codec fitted
    on the public split, the declared record bound); the server and every
    node of a Flower run compute the same pair.
    """
    # The ring bound must be public: the library's declared bound, never the private count
    # (the grid it selects is published).
    spec = release_spec(config, codec, num_classes=num_classes, max_records=DEFAULT_MAX_RECORDS)
    if config.noise is NoiseModel.CENTRAL:
        return spec, None
    # Distributed noise: the grid is chosen for the clients' noise.
    dplan = distributed_plan(config, spec)
    return dplan.spec, dplan


def _evaluation_aggregation(
    client_stats: Sequence[LatentStatistics],
    dist: DistributedAggregation,
    dropouts: Mapping[Stage, Sequence[int]],
    threshold: int,
    spec: LatentStatisticsConfig,
) -> Aggregation:
    """The harness's exact sum of the survivors' plaintext statistics (evaluation only)."""
    expected = LatentStatistics.zeros(spec)
    for i in dist.survivors:
        expected = expected + client_stats[i]
    return Aggregation(
        aggregate=expected,
        survivors=dist.survivors,
        dropouts={stage: tuple(ids) for stage, ids in dropouts.items()},
        threshold=threshold,
        bytes_per_client=dist.bytes_per_client,
    )


def aggregate_with_noise(
    client_stats: list[LatentStatistics],
    plan: DistributedNoisePlan,
    dropouts: Mapping[Stage, list[int]],
    noise_seed: int | None,
) -> tuple[Aggregation, DistributedAggregation]:
    """The distributed round: clients noise before masking, the server decodes the noisy total.

    The :class:`Aggregation`'s exact total is the in-process harness's sum of
    the survivors' plaintext statistics, for the evaluation only (the
    noiseless baseline, the record count); the server never computes it.
    """
    dist = aggregate_distributed(client_stats, plan, dropouts=dropouts, noise_seed=noise_seed)
    return _evaluation_aggregation(client_stats, dist, dropouts, plan.threshold, plan.spec), dist


def distributed_facts(plan: DistributedNoisePlan, dist: DistributedAggregation) -> dict[str, Any]:
    """Public facts of a distributed release: the plan, the trust, the dropout inflation."""
    u = len(dist.survivors)
    claimed = plan.claimed_stds()
    delivered = plan.delivered_stds(u)
    central = plan.central.noise_std_sum
    facts = plan.describe()
    if dist.noisy.seeded:
        # A public seed makes every client's noise known to whoever knows the run config.
        facts["trust"] = (
            f"{facts['trust']}. The clients' noise was derived from the run's noise seed "
            "(reproduction only): whoever knows that seed, the server included, can remove "
            "it, so this run gives no DP against them"
        )
    return {
        **facts,
        "independent_noise_inflation": dropout_inflation(u, plan.threshold, plan.corrupted),
        "delivered_vs_claimed_std": delivered[0] / claimed[0],
        "delivered_vs_central_std": delivered[0] / central,
    }


@dataclass(frozen=True, eq=False)
class LatentRelease:
    """The DP release stage's output: the plan, the ledger and the noisy statistics."""

    plan: LatentReleasePlan
    ledger: PrivacyLedger
    noisy: NoisyLatentStatistics = field(repr=False)


def release(
    total: LatentStatistics, config: PipelineConfig, spec: LatentStatisticsConfig
) -> LatentRelease:
    """Plan the noise for (ε, δ), add it once, record it in a fresh budgeted ledger."""
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
) -> float:
    """Train the downstream classifier on ``(images, labels)``; accuracy on ``test``."""
    test_x = torch.from_numpy(np.array(test.images))
    test_y = torch.from_numpy(np.array(test.labels))
    model = train_classifier(
        torch.from_numpy(images),
        torch.from_numpy(labels),
        num_classes=int(max(int(test_y.max()) + 1, int(labels.max()) + 1, 2)),
        architecture=config.classifier,
        epochs=config.classifier_epochs,
        patience=config.classifier_patience,
        seed=config.seed,
        device=device,
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


# -- the job -----------------------------------------------------------------------------


#: Secure aggregation as a replaceable stage: ``(data, spec, threshold, dropouts) ->
#: Aggregation``.  The Flower app passes one that runs the round over the network,
#: each node computing its own statistics; the server then never builds them.
Aggregator = Callable[
    [LatentData, LatentStatisticsConfig, int, Mapping[Stage, list[int]]], Aggregation
]


@dataclass(frozen=True, eq=False)
class NoisyRound:
    """What a :data:`NoisyAggregator` delivered: the decoded noisy release and the dropouts.

    Attributes:
        distributed: The round's :class:`DistributedAggregation` (decoded by
            :func:`~privfed.engines.latent.distributed.decode_noisy_total`).
        dropouts: Observed dropouts per stage (0-based client indices).
    """

    distributed: DistributedAggregation
    dropouts: Mapping[Stage, tuple[int, ...]]


#: The distributed-noise round as a replaceable stage: ``(data, plan, dropouts) ->
#: NoisyRound``.  The Flower app passes one whose nodes add their noise before masking;
#: the server only decodes the noisy total.
NoisyAggregator = Callable[
    [LatentData, DistributedNoisePlan, Mapping[Stage, list[int]]], NoisyRound
]


def run_pipeline(
    config: PipelineConfig,
    *,
    progress: ProgressFn | None = None,
    aggregator: Aggregator | None = None,
    noisy_aggregator: NoisyAggregator | None = None,
    aggregator_mode: str = "semi-honest",
) -> PipelineResult:
    """Run the latent-statistic job once; see the module docstring for the stages.

    Args:
        config: The run's configuration.
        progress: Optional callback receiving a
            :class:`~privfed.progress.ProgressEvent` when each stage starts
            and finishes.
        aggregator: Replaces the in-process ``clients`` and ``secagg`` stages
            (see :data:`Aggregator`); ``None`` runs them here.  Central noise only.
        noisy_aggregator: Replaces the distributed round (see
            :data:`NoisyAggregator`); distributed noise models only.  The job
            then never computes the clients' exact statistics or their total
            (the point of distributed noise: whoever runs this job holds only
            the noisy total), so ``baselines`` must be off and the report's
            record count is the one the release carries.
        aggregator_mode: The secure-aggregation mode the external aggregator
            plays (``"semi-honest"`` or ``"active"``); it must be
            ``config.secagg_mode``, so a release never claims a mode that was
            not run.

    Returns:
        The result: a JSON-able :class:`PipelineReport` plus artefacts.

    Raises:
        ParameterError: On configurations the data cannot satisfy.
        ProtocolAbort: If secure aggregation cannot complete.
    """
    if not isinstance(config, PipelineConfig):
        raise ParameterTypeError("config", "a PipelineConfig", config)
    return run_job(
        config.device,
        _idle_cores() if config.num_threads is None else config.num_threads,
        progress,
        lambda clock: _run(config, clock, aggregator, noisy_aggregator, aggregator_mode),
    )


def _run(
    config: PipelineConfig,
    clock: StageClock,
    aggregator: Aggregator | None = None,
    noisy_aggregator: NoisyAggregator | None = None,
    aggregator_mode: str = "semi-honest",
) -> PipelineResult:
    device = torch.device(config.device)
    if config.secagg_mode != aggregator_mode and (
        aggregator is not None or noisy_aggregator is not None
    ):
        # An external aggregator plays its own round; the release must not claim a
        # mode that was not run.
        raise ParameterError(
            "secagg_mode",
            f"{aggregator_mode!r}: the mode the external aggregator plays",
            config.secagg_mode,
        )
    if noisy_aggregator is not None and config.baselines:
        # The noiseless baseline needs the exact total, which this job must never hold.
        raise ParameterError(
            "baselines", "False with an external distributed round", config.baselines
        )

    clock.start("data", f"loading {config.dataset!r}")
    data = load_data(config)
    split = data.split
    clock.finish(
        "data",
        f"{len(split.public)} public / {len(split.private)} private / {len(split.test)} test; "
        f"{config.num_clients} clients ({config.partition}), {data.empty_clients} empty",
    )

    clock.start("codec", f"fitting {config.codec!r} on the public split")
    codec = fit_codec(config, split.public)
    spec, dplan = run_spec(config, codec, num_classes=data.num_classes)
    if dplan is None and noisy_aggregator is not None:
        raise ParameterError(
            "noisy_aggregator", "None with central noise", type(noisy_aggregator).__name__
        )
    clock.finish("codec", f"d={spec.dim}, R={spec.clip_norm:.4g}, f={spec.bits} bits")

    latents: torch.Tensor | None = None
    client_stats: list[LatentStatistics] = []
    if aggregator is None and noisy_aggregator is None:
        clock.start("clients", "encoding and computing exact statistics")
        latents = encode(codec, split.private.images, device)
        client_stats = [
            client_statistics(latents[idx], split.private.labels[idx], spec, device)
            for idx in data.clients
        ]
        clock.finish("clients", f"{spec.num_values} ring values per client")

    dropouts = dropout_plan(config)
    threshold = threshold_for(config.num_clients)
    clock.start("secagg", f"secure aggregation, threshold {threshold}, dropouts {_named(dropouts)}")
    dist: DistributedAggregation | None = None
    ledger: PrivacyLedger | None = None
    if dplan is not None:
        if aggregator is not None:
            raise ParameterError(
                "aggregator", "None with a distributed noise model", type(aggregator).__name__
            )
        # Recorded before any client draws noise: a budget overflow releases nothing.
        ledger = dplan.ledger()
        ledger.record_all(dplan.events(seeded=config.noise_seed is not None))
        if noisy_aggregator is None:
            agg, dist = aggregate_with_noise(client_stats, dplan, dropouts, config.noise_seed)
        else:
            delivered = noisy_aggregator(data, dplan, dropouts)
            dist = delivered.distributed
            agg = Aggregation(
                aggregate=None,  # the nodes' exact statistics never reach this process
                survivors=dist.survivors,
                dropouts={stage: tuple(ids) for stage, ids in delivered.dropouts.items()},
                threshold=dplan.threshold,
                bytes_per_client=dist.bytes_per_client,
            )
    elif aggregator is None:
        agg = aggregate(
            client_stats,
            spec,
            threshold=threshold,
            dropouts=dropouts,
            mode=config.secagg_mode,
            corrupted=config.assumed_corrupted,
        )
    else:
        agg = aggregator(data, spec, threshold, dropouts)
    records = (
        agg.aggregate.total_records
        if agg.aggregate is not None
        else round(float(np.sum(dist.noisy.counts)))
        if dist is not None
        else 0
    )
    clock.finish(
        "secagg",
        f"{len(agg.survivors)} survivors, {records} records, "
        + ("exact" if dist is None else f"noisy ({config.noise})"),
    )

    clock.start(
        "release", f"planning (epsilon={config.epsilon}, delta={config.delta}, {config.adjacency})"
    )
    if dplan is None or dist is None or ledger is None:
        assert agg.aggregate is not None  # noqa: S101 -- central noise: the server holds it
        rel = release(agg.aggregate, config, spec)
    else:  # the clients' noise is already in the total: decoding was the release
        rel = LatentRelease(plan=dplan.claimed_plan(), ledger=ledger, noisy=dist.noisy)
    clock.finish(
        "release",
        f"sigma_sum={rel.plan.noise_std_sum:.4g}, "
        f"sigma_second={rel.plan.noise_std_second_moment:.4g}",
    )

    clock.start("synthesis", "fitting class Gaussians, sampling, decoding")
    gaussians = fit_class_gaussians(rel.noisy)
    synthetic = synthesize(codec, gaussians, config, device, offset=1)
    clock.finish("synthesis", f"{synthetic.labels.size} synthetic images")

    clock.start("train", "training the classifier on synthetic data")
    acc_synth = train_evaluate(synthetic.images, synthetic.labels, split.test, config, device)
    clock.finish("train", f"accuracy {acc_synth:.4f} on real test data")

    acc_real = acc_nondp = None
    if config.baselines:
        clock.start("baselines", "real private data, and noiseless synthetic data")
        acc_real = train_evaluate(
            np.array(split.private.images),
            np.array(split.private.labels),
            split.test,
            config,
            device,
        )
        assert agg.aggregate is not None  # noqa: S101 -- refused above otherwise
        clean = fit_class_gaussians(nonprivate_release(agg.aggregate))
        clean_synthetic = synthesize(codec, clean, config, device, offset=2)
        acc_nondp = train_evaluate(
            clean_synthetic.images, clean_synthetic.labels, split.test, config, device
        )
        clock.finish("baselines", f"real {acc_real:.4f}, non-DP synthetic {acc_nondp:.4f}")

    full_audit: Any = None
    inputs: AuditInputs | None = None
    summary: AuditSummary | AuditSkipped | None = None
    if config.audit:
        clock.start("audit", "membership inference: members vs held-out test records")
        member_parts = [np.asarray(data.clients[i], dtype=np.int64) for i in agg.survivors]
        members = np.sort(np.concatenate(member_parts)) if member_parts else np.zeros(0, np.int64)
        if latents is None:  # the statistics were computed elsewhere (the audit reads private data)
            latents = encode(codec, split.private.images, device)
        inputs = audit_inputs(codec, split, members, latents, spec, rel.noisy, synthetic, device)
        full_audit, summary = audit(inputs, config, rel.plan)
        if isinstance(summary, AuditSkipped):
            inputs = None
            clock.finish("audit", f"skipped: {summary.reason}")
        else:
            top = full_audit.best()
            clock.finish(
                "audit",
                f"{len(full_audit.results)} attacks, best {top.attack.value} "
                f"AUC {top.metrics.auc.estimate:.3f}",
            )

    plan = rel.plan
    report = PipelineReport(
        config=config.to_dict(),
        accuracy_synthetic=acc_synth,
        accuracy_real=acc_real,
        accuracy_nondp_synthetic=acc_nondp,
        epsilon=plan.epsilon,
        delta=plan.delta,
        mu=plan.mu,
        noise_std_sum=plan.noise_std_sum,
        noise_std_second_moment=plan.noise_std_second_moment,
        noise_std_count=plan.noise_std_count,
        clip_norm=spec.clip_norm,
        latent_dim=spec.dim,
        fractional_bits=spec.bits,
        payload_values_per_class=spec.values_per_class,
        payload_values_per_client=spec.num_values,
        payload_bytes_per_client=spec.payload_bytes,
        secagg_bytes_per_client=agg.bytes_per_client,
        num_clients=config.num_clients,
        empty_clients=data.empty_clients,
        dropped_clients={stage.name: list(ids) for stage, ids in agg.dropouts.items()},
        records_public=len(split.public),
        records_private=len(split.private),
        records_aggregated=records,
        records_test=len(split.test),
        seconds=dict(clock.seconds)
        | (
            {"client_noise_mean": float(np.mean(dist.noise_seconds))}
            if dist is not None and dist.noise_seconds
            else {}
        ),
        ledger=json.loads(rel.ledger.to_json()),
        audit=summary,
        secagg_threshold=agg.threshold,
        noisy_class_counts=(
            None
            if plan.noise_std_count == 0
            else tuple(float(c) for c in np.asarray(rel.noisy.counts, dtype=np.float64))
        ),
        distributed=None if dplan is None or dist is None else distributed_facts(dplan, dist),
    )
    return PipelineResult(
        report=report,
        ledger=rel.ledger,
        split=split,
        client_indices=data.clients,
        codec=codec,
        aggregate=agg.aggregate,
        release=rel.noisy,
        gaussians=gaussians,
        synthetic_images=synthetic.images,
        synthetic_labels=synthetic.labels,
        synthetic_latents=synthetic.latents,
        audit=full_audit,
        audit_inputs=inputs,
    )


def _named(dropouts: Mapping[Stage, list[int]]) -> str:
    return ", ".join(f"{s.name}: {ids}" for s, ids in dropouts.items()) or "none"
