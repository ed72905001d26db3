"""End-to-end runs of the factory-matrix engine on digits, with a FedAvg baseline.

One call of :func:`run_factory_pipeline`:

1. loads the dataset (scikit-learn's digits by default, or an ``.npz`` file or image
   folder: :func:`privfed.data.load_dataset`), splits it
   (:func:`privfed.data.split_public_private`, stratified) into a small
   public part, a held-out test set and the private rest, and partitions the
   private rest over clients -- ``"single-class"`` silos (each client holds
   one class, the FederatedFactory setting) or ``"dirichlet"`` label skew;
2. Gaussian factories only: fits the public codec on the public part
   (``gaussian_basis``, see below);
3. every client trains one factory per class it holds (at least
   ``min_records_per_factory`` records) and ships it once: the report counts
   the bytes of the safetensors weights each client sends;
4. audit (``audit=True``, the default): a membership-inference audit of up to
   ``audit_config.max_factories`` factories
   (:mod:`privfed.engines.factory.audit`) -- members are the factory's own
   training images, non-members the same class's held-out test images, which
   no factory saw; the result is in the report's ``to_dict()["audit"]``;
5. the server registers the factories in a :class:`FactoryMatrix`,
   synthesizes ``synthetic_per_class`` images per class, trains the
   downstream classifier (:func:`privfed.engines.classifier.train_classifier`)
   on them and evaluates it on the real test set;
6. baselines on the same split: FedAvg with the same classifier architecture
   (:func:`~privfed.engines.factory.fedavg.run_fedavg`) and, optionally, a
   centralized classifier trained on the pooled private data.

The matrix (with its synthetic buffer) is returned in the report for
unlearning experiments.  The stages are :data:`STAGES`, methods of
:class:`FactoryJob` run under the one timing contract of
:func:`privfed.engines.job.run_stages`; the configuration is
:mod:`privfed.engines.factory.config`, the report
:mod:`privfed.engines.factory.report`.

Which basis the Gaussian factories use (``gaussian_basis``):

* ``"public-pca"`` (default): a :class:`~privfed.engines.codecs.PCACodec` with
  ``latent_dim`` components fitted on the public split (5 % of digits, about
  90 images) -- the latent engine's codec.  Clients release only a latent
  mean and covariance per class.
* ``"public-autoencoder"``: a :class:`~privfed.engines.codecs.ConvAutoencoderCodec`
  trained on the same public split (a few seconds on a CPU).
* ``"private-pca"``: each factory fits probabilistic PCA to its own private
  images, so its principal directions -- a release of private data -- are
  shipped too (the historical behaviour).

None of the Gaussian modes is differentially private; the audit measures
what they leak.

Factories to a target privacy budget (``epsilon=``): EDM factories are trained
with DP-SGD and every (class, client) cell gets its own noise multiplier,
calibrated with :func:`privfed.dp.calibrate_noise_multiplier` (PLD accounting,
the ledger's own test) for *that cell's* realised Poisson rate and number of
steps: the rate is ``min(1, batch_size / n_{c,k})`` by default (the expected
batch is the configured batch size whatever the cell's size) or the fixed
``dp_sampling_rate`` (see :func:`calibrated_dpsgd`).  Gaussian factories (public
basis only) are fitted from one Gaussian release per cell of the clipped latent
sum and second moment, planned by
:func:`privfed.engines.moments.planning.plan_latent_release`
(:class:`~privfed.engines.factory.gaussian.LatentGaussianDP`).  Every factory's
release enters the run's ledger in the ``"cell"`` scheme: a record lives in
exactly one cell, so the cells compose in parallel and the run's ε is the
largest cell's, which is at most the target.  ε travels one lane: the job's
ledger is built once from the target the cells' plans were made for (the
plan's ``ledger()``, budgeted at that target, which refuses any release over
it), and each cell's ledger event is the one its fit built and its manifest
ships.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from safetensors.torch import save as safetensors_bytes

from privfed._checks import check_int
from privfed.engines.artifacts import AuditInputs
from privfed.engines.codecs.base import Codec
from privfed.engines.factory.audit import FactoryAuditReport, audit_factories
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.dpsgd import DPSGDConfig, realised_sampling_rate
from privfed.engines.factory.edm import (
    EDMDiffusionFactory,
    EDMTrainingConfig,
)
from privfed.engines.factory.fedavg import run_fedavg
from privfed.engines.factory.gaussian import LatentGaussianDP, LatentGaussianFactory, cell_plan
from privfed.engines.factory.matrix import FactoryMatrix, SyntheticDataset
from privfed.engines.factory.report import FactoryPipelineReport
from privfed.engines.job import JobStage, StageClock, run_job, run_stages
from privfed.errors import ParameterError, ParameterTypeError
from privfed.progress import ProgressFn

if TYPE_CHECKING:
    from privfed.dp.dpsgd_calibration import DPSGDCalibration
    from privfed.engines.classifier import ProgressCallback

__all__ = [
    "STAGES",
    "DownstreamResult",
    "FactoryJob",
    "calibrated_dpsgd",
    "cell_noise_seed",
    "classify_synthetic",
    "downstream_stage",
    "load_partitions",
    "make_factory",
    "public_codec",
    "run_factory_pipeline",
    "synthesize_matrix",
    "train_downstream",
    "weight_bytes",
]


@functools.lru_cache(maxsize=4)
def _cached_codec(
    basis: str,
    latent_dim: int,
    public_fraction: float,
    test_fraction: float,
    seed: int,
    dataset: str = "digits",
    num_classes: int | None = None,
) -> Codec:
    from privfed.engines.codecs import ConvAutoencoderCodec, PCACodec
    from privfed.engines.factory.mixture_cells import public_images

    public, _ = public_images(dataset, num_classes, public_fraction, test_fraction, seed)
    if basis == "public-pca":
        limit = min(public.shape[0], int(np.prod(public.shape[1:])))
        if latent_dim > limit:
            raise ParameterError(
                "latent_dim",
                f"an int <= {limit} (public images and pixels) for public-pca",
                latent_dim,
            )
        return PCACodec.fit(public, latent_dim=latent_dim)
    return ConvAutoencoderCodec.fit(public, latent_dim=latent_dim, seed=seed)


def public_codec(config: FactoryPipelineConfig) -> Codec | None:
    """The public codec of the Gaussian factories, fitted on the public split only.

    Deterministic for a configuration (and cached, so :func:`make_factory`
    and :func:`run_factory_pipeline` share one fit).  The public split is
    the same one :func:`run_factory_pipeline` draws, disjoint from every
    client's private data and from the test set.

    Returns:
        ``None`` for EDM factories or ``gaussian_basis="private-pca"``,
        otherwise a :class:`~privfed.engines.codecs.PCACodec` or
        :class:`~privfed.engines.codecs.ConvAutoencoderCodec` with
        ``latent_dim`` dimensions.

    Raises:
        ParameterError: ``latent_dim`` exceeds what public PCA can fit.
    """
    if not isinstance(config, FactoryPipelineConfig):
        raise ParameterTypeError("config", "a FactoryPipelineConfig", config)
    if config.factory == "edm" or config.gaussian_basis == "private-pca":
        return None
    return _cached_codec(
        config.gaussian_basis,
        config.latent_dim,
        float(config.public_fraction),
        float(config.test_fraction),
        config.seed,
        config.dataset,
        config.num_classes,
    )


def cell_calibration(config: FactoryPipelineConfig, sample_count: int) -> DPSGDCalibration:
    """The DP-SGD plan of one cell of ``sample_count`` records under ``config.epsilon``.

    The plan behind :func:`calibrated_dpsgd` (same rate, multiplier, checks
    and errors), with the target it was made for: its ``ledger()`` is the
    ledger budgeted at that target.
    """
    from privfed.dp.dpsgd_calibration import calibrate_dpsgd

    if not isinstance(config, FactoryPipelineConfig):
        raise ParameterTypeError("config", "a FactoryPipelineConfig", config)
    if config.epsilon is None:
        raise ParameterError("config.epsilon", "a target epsilon (not None)", None)
    if config.factory != "edm":
        raise ParameterError("config.factory", "'edm' (the DP-SGD factory)", config.factory)
    n = check_int("sample_count", sample_count, minimum=1, expected=None)
    tr = config.edm_training
    if config.dp_sampling_rate is not None:
        rate = float(config.dp_sampling_rate)
    else:
        rate = min(1.0, tr.batch_size / n)
    return calibrate_dpsgd(
        float(config.epsilon),
        float(config.delta),
        sampling_rate=realised_sampling_rate(rate),
        steps=tr.steps,
    )


def calibrated_dpsgd(config: FactoryPipelineConfig, sample_count: int) -> DPSGDConfig:
    """The DP-SGD parameters of one cell of ``sample_count`` records under ``config.epsilon``.

    The Poisson rate is ``config.dp_sampling_rate`` or, by default,
    ``min(1, edm_training.batch_size / sample_count)``; the noise multiplier is
    :func:`privfed.dp.calibrate_noise_multiplier` at ``(config.epsilon,
    config.delta)`` for the rate the sampler *realises*
    (:func:`~privfed.engines.factory.dpsgd.realised_sampling_rate`, the one
    the ledger records) and ``edm_training.steps`` steps, under replace-one
    adjacency (the cell's size ships in its manifest).  The result is
    certified by construction: a release with these parameters fits a ledger
    whose budget is the target.  Calibrations are cached, so cells of equal
    size (or a fixed rate) share one.

    Args:
        config: A configuration with ``epsilon`` set.
        sample_count: The cell's number of training records, int >= 1.

    Returns:
        The :class:`~privfed.engines.factory.DPSGDConfig` to train the cell with.

    Raises:
        ParameterError: ``config.epsilon`` is ``None`` or ``sample_count`` < 1.
        CalibrationError: The target is unreachable for this cell (see
            :func:`privfed.dp.calibrate_noise_multiplier`), e.g. a rate so
            small that no noise is needed at all.
    """
    plan = cell_calibration(config, sample_count)
    return DPSGDConfig(
        noise_multiplier=plan.noise_multiplier,
        clip_norm=float(config.dp_clip_norm),
        sampling_rate=plan.sampling_rate,
        max_physical_batch=min(64, max(1, config.edm_training.batch_size)),
    )


def cell_noise_seed(config: FactoryPipelineConfig, class_id: int, client_id: int) -> bytes | None:
    """One cell's DP noise seed, derived from ``config.noise_seed`` (``None`` when unseeded).

    Every cell gets its own stream: equal noise in two cells would cancel in
    their difference.
    """
    if config.noise_seed is None:
        return None
    return f"factory-noise|{config.noise_seed}|class={class_id}|client={client_id}".encode()


def make_factory(
    config: FactoryPipelineConfig,
    class_id: int,
    client_id: int,
    *,
    codec: Codec | None = None,
    sample_count: int | None = None,
) -> Any:
    """The factory the pipeline trains for one cell (seeded from ``config.seed``).

    Args:
        config: The pipeline configuration.
        class_id: The cell's class.
        client_id: The cell's client.
        codec: The public codec of Gaussian factories; ``None`` fits (or
            reuses) :func:`public_codec` ``(config)``.  Ignored for EDM and
            private-PCA factories.
        sample_count: The cell's number of records; required when
            ``config.epsilon`` is set (it sets the cell's sampling rate and
            calibrated noise, :func:`calibrated_dpsgd`), ignored otherwise.

    Raises:
        ParameterError: ``config.epsilon`` is set and ``sample_count`` is not.
    """
    if config.factory == "mixture":
        from privfed.engines.factory.mixture_cells import make_mixture_factory

        public = codec if codec is not None else public_codec(config)
        noise_seed = cell_noise_seed(config, class_id, client_id)
        return make_mixture_factory(config, class_id, client_id, public, noise_seed)  # type: ignore[arg-type]
    if config.factory == "gaussian":
        if config.gaussian_basis == "private-pca":
            return LatentGaussianFactory(
                latent_dim=config.latent_dim, class_id=class_id, client_id=client_id
            )
        dp_target = (
            None
            if config.epsilon is None
            else LatentGaussianDP(
                epsilon=float(config.epsilon),
                delta=float(config.delta),
                seed=cell_noise_seed(config, class_id, client_id),
            )
        )
        return LatentGaussianFactory(
            class_id=class_id,
            client_id=client_id,
            codec=codec if codec is not None else public_codec(config),
            dp=dp_target,
        )
    tr = config.edm_training
    dp = tr.dp
    if config.epsilon is not None:
        if sample_count is None:
            raise ParameterError(
                "sample_count", "the cell's record count when config.epsilon is set", None
            )
        dp = calibrated_dpsgd(config, sample_count)
    seed = (config.seed * 1_000_003 + class_id * 1009 + client_id) % (2**62)
    training = EDMTrainingConfig(
        steps=tr.steps,
        batch_size=tr.batch_size,
        learning_rate=tr.learning_rate,
        seed=seed,
        device=config.device,
        dp=dp,
        sample_batch_size=tr.sample_batch_size,
    )
    return EDMDiffusionFactory(
        unet=config.unet, edm=config.edm, training=training, class_id=class_id, client_id=client_id
    )


def run_factory_pipeline(
    config: FactoryPipelineConfig,
    *,
    progress: ProgressFn | None = None,
    ledger: Any = None,
) -> FactoryPipelineReport:
    """Run the factory-matrix engine and its baselines on digits.

    Args:
        config: What to run.
        progress: Optional callback receiving a
            :class:`~privfed.progress.ProgressEvent` per step of the stages
            "codec", "calibration" (``config.epsilon`` set: one step per
            distinct cell size), "factories", "audit", "synthesis",
            "classifier", "fedavg" and "centralized".
        ledger: A :class:`privfed.dp.PrivacyLedger` that receives one
            release per DP-SGD factory (partition ``"class=c/client=k"``);
            a fresh one is used when ``None``.  Its budget, if any, is
            enforced before each factory is registered.

    Returns:
        Accuracies, communication, timings, the membership-inference audit
        (``None`` when ``config.audit`` is off) and the matrix.

    Raises:
        ParameterTypeError: ``config`` is not a :class:`FactoryPipelineConfig`.
        ParameterError: ``latent_dim`` exceeds what public PCA can fit on the
            public split (raised before any client trains).
    """
    if not isinstance(config, FactoryPipelineConfig):
        raise ParameterTypeError("config", "a FactoryPipelineConfig", config)
    return run_job(
        config.device, config.num_threads, progress, functools.partial(_run, config, ledger)
    )


def load_partitions(config: FactoryPipelineConfig) -> tuple[int, Any, list[np.ndarray]]:
    """Load, split and partition a run's data (the experimental design's seed).

    The one place both the in-process job and the Flower nodes (each taking
    its own part) get their data from.

    Returns:
        ``(num_classes, split, parts)``: the dataset's classes, its
        :class:`~privfed.data.DatasetSplit`, and each client's indices into
        ``split.private``.

    Raises:
        ParameterError: Single-class silos with fewer clients than classes.
    """
    from privfed.data import (
        load_dataset,
        partition,
        require_classification_data,
        split_public_private,
    )

    data = load_dataset(config.dataset, num_classes=config.num_classes)
    require_classification_data(data)
    if config.scenario == "single-class" and config.num_clients < data.num_classes:
        raise ParameterError(
            "num_clients",
            f"an int >= {data.num_classes} for single-class silos on this dataset",
            config.num_clients,
        )
    split = split_public_private(
        data,
        public_fraction=config.public_fraction,
        test_fraction=config.test_fraction,
        seed=config.seed,
    )
    if config.scenario == "single-class":
        parts = partition(
            split.private.labels,
            scheme="single-class",
            num_clients=config.num_clients,
            seed=config.seed,
        )
    else:
        parts = partition(
            split.private.labels,
            scheme="dirichlet",
            num_clients=config.num_clients,
            seed=config.seed,
            alpha=config.dirichlet_alpha,
        )
    return data.num_classes, split, list(parts)


def train_downstream(
    config: FactoryPipelineConfig,
    images: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    *,
    progress: ProgressCallback | None = None,
) -> torch.nn.Module:
    """Train a downstream classifier with the run's epochs, seed and device.

    The one place the in-process job and the Flower server map a pipeline
    configuration onto :func:`privfed.engines.classifier.train_classifier`.

    Args:
        config: The pipeline configuration.
        images: Training images ``(n, ...)``.
        labels: Their classes ``(n,)``.
        num_classes: The dataset's classes.
        progress: Optional ``(epoch, total, loss)`` callback, as for ``train_classifier``.

    Returns:
        The trained classifier.
    """
    from privfed.engines.classifier import train_classifier

    return train_classifier(
        images,
        labels,
        num_classes=num_classes,
        architecture=config.classifier,
        epochs=config.classifier_epochs,
        seed=config.seed,
        device=config.device,
        progress=progress,
    )


def weight_bytes(factory: Any) -> int:
    """Bytes of a factory's weights as shipped (its state tensors as safetensors).

    The one measure of ``factory_bytes_per_client``, in process and over Flower.
    """
    return len(safetensors_bytes(factory.state_tensors()))


class DownstreamResult(NamedTuple):
    """What :func:`downstream_stage` returns."""

    #: The synthetic dataset the classifier was trained on.
    synthetic: SyntheticDataset
    #: The classifier's accuracy on the real test set, in [0, 1].
    accuracy: float
    #: Wall-clock seconds of synthesis.
    synthesis_seconds: float


def downstream_stage(
    config: FactoryPipelineConfig,
    matrix: FactoryMatrix,
    num_classes: int,
    test_images: torch.Tensor,
    test_labels: torch.Tensor,
    clock: StageClock,
    *,
    consumer: str = "downstream-classifier",
) -> DownstreamResult:
    """The server's stage: synthesize, train the downstream classifier, evaluate it.

    The one place the in-process job and the Flower server (which receives the
    factories from its nodes) turn a filled matrix into synthetic data and an
    accuracy.  Reports the stages ``"synthesis"`` and ``"classifier"`` on
    ``clock`` and registers the classifier as ``consumer`` of the synthetic
    data in ``matrix`` (what an unlearning certificate lists for retraining).

    Args:
        config: The pipeline configuration (samples per class, seed, epochs, device).
        matrix: The registered factories.
        num_classes: The dataset's classes.
        test_images: Real held-out test images.
        test_labels: Their labels.
        clock: The job's stage clock.
        consumer: Name of the classifier in the matrix's consumer records.

    Returns:
        The synthetic dataset, the classifier's test accuracy and the synthesis seconds.
    """
    clock.start("synthesis")
    synthetic, synthesis_seconds = synthesize_matrix(config, matrix)
    clock.step("synthesis", 1, 1)
    clock.start("classifier")
    accuracy = classify_synthetic(
        config,
        matrix,
        synthetic,
        num_classes,
        test_images,
        test_labels,
        progress=lambda e, t, _loss: clock.step("classifier", e, t),
        consumer=consumer,
    )
    return DownstreamResult(synthetic, accuracy, synthesis_seconds)


def synthesize_matrix(
    config: FactoryPipelineConfig, matrix: FactoryMatrix
) -> tuple[SyntheticDataset, float]:
    """The synthetic dataset of a filled matrix (the run's quota and seed), and its seconds."""
    start = time.perf_counter()
    synthetic = matrix.synthesize(config.synthetic_per_class, seed=config.seed)
    return synthetic, time.perf_counter() - start


def classify_synthetic(
    config: FactoryPipelineConfig,
    matrix: FactoryMatrix,
    synthetic: SyntheticDataset,
    num_classes: int,
    test_images: torch.Tensor,
    test_labels: torch.Tensor,
    *,
    progress: ProgressCallback | None = None,
    consumer: str = "downstream-classifier",
) -> float:
    """Train the downstream classifier on ``synthetic``; its accuracy on the real test set.

    Registers the classifier as ``consumer`` of the synthetic data in ``matrix``.
    """
    from privfed.engines.classifier import evaluate_classifier

    clf = train_downstream(
        config, synthetic.images, synthetic.labels, num_classes, progress=progress
    )
    matrix.record_consumer(consumer, synthetic)
    return evaluate_classifier(clf, test_images, test_labels, device=config.device)


def _plan_ledger(config: FactoryPipelineConfig, codec: Codec | None, sizes: list[int]) -> Any:
    """The run's ledger, built once from the target the cells' plans were made for.

    With a target, every cell's plan (the latent-moment plan of a Gaussian
    cell, :func:`~privfed.engines.factory.gaussian.cell_plan`; the
    private-labels plan of a mixture cell,
    :func:`~privfed.engines.factory.mixture_cells.mixture_cell_plan`; the DP-SGD
    calibration of an EDM cell, :func:`cell_calibration`) is made for the
    same target, and the ledger is the first plan's (no factory over the
    target registers).  Without one (a given DP-SGD configuration) it has no
    budget.
    """
    from privfed.dp import PrivacyLedger

    if config.epsilon is None:
        return PrivacyLedger()
    if config.factory == "gaussian":
        target = LatentGaussianDP(epsilon=float(config.epsilon), delta=float(config.delta))
        public = codec if codec is not None else public_codec(config)
        if public is None:  # pragma: no cover -- the config refuses a private basis with a target
            raise ParameterError("config.gaussian_basis", "a public basis with a target", None)
        return cell_plan(target, public).ledger()
    if config.factory == "mixture":
        from privfed.engines.factory.mixture_cells import mixture_cell_plan

        public = codec if codec is not None else public_codec(config)
        if public is None:  # pragma: no cover -- the config refuses a private basis for mixtures
            raise ParameterError("config.gaussian_basis", "a public basis for mixtures", None)
        return mixture_cell_plan(config, public).ledger()
    # No cell, no plan: nothing is recorded in the ledger.
    return cell_calibration(config, min(sizes)).ledger() if sizes else PrivacyLedger()


class FactoryJob:
    """One run of the factory job: its stages (:data:`STAGES`) and what they hand on.

    Built with the run's configuration, ledger and clock (the data are loaded
    and the cells listed here, before any stage); every stage is a method
    that reads what earlier stages left on the job and returns the message of
    its finish event; :meth:`result` assembles the report.
    """

    def __init__(self, config: FactoryPipelineConfig, ledger: Any, clock: StageClock) -> None:
        self.config = config
        self.clock = clock
        # The caller's ledger, or (DP runs) one built from the plans' target in factories().
        self.ledger = ledger
        self.num_classes, self.split, self.parts = load_partitions(config)
        self.images = torch.from_numpy(np.array(self.split.private.images))
        self.labels = torch.from_numpy(np.array(self.split.private.labels))
        self.test_x = torch.from_numpy(np.array(self.split.test.images))
        self.test_y = torch.from_numpy(np.array(self.split.test.labels))
        # The (client, class, record indices) of every cell that trains a factory.
        self.cells: list[tuple[int, int, torch.Tensor]] = []
        for client, idx in enumerate(self.parts):
            idx_t = torch.from_numpy(idx)
            for c in range(self.num_classes):
                cls_idx = idx_t[self.labels[idx_t] == c]
                if cls_idx.numel() >= config.min_records_per_factory:
                    self.cells.append((client, c, cls_idx))
        self.public: Codec | None = None
        self.codec_seconds = 0.0
        self.audit_report: FactoryAuditReport | None = None
        self.central_acc: float | None = None
        self.fedavg_acc: float | None = None
        self.fedavg_bytes: float | None = None
        self.factory_repeats: dict[str, Any] | None = None

    @property
    def has_public_codec(self) -> bool:
        """Whether the factories fit in a public codec's latent space."""
        return self.config.factory != "edm" and self.config.gaussian_basis != "private-pca"

    @property
    def cell_sizes(self) -> list[int]:
        """The distinct record counts of the cells, ascending."""
        return sorted({int(idx.numel()) for _, _, idx in self.cells})

    @property
    def calibrates(self) -> bool:
        """Whether every EDM cell's noise multiplier is calibrated to a target."""
        return self.config.epsilon is not None and self.config.factory == "edm"

    def codec(self) -> str:
        """``codec``: the public codec of the Gaussian factories (public split only)."""
        start = time.perf_counter()
        self.public = public_codec(self.config)
        self.codec_seconds = time.perf_counter() - start
        return f"public PCA, d={self.config.latent_dim}"

    def calibration(self) -> str:
        """``calibration``: every cell before any trains (an unreachable target fails fast)."""
        sizes = self.cell_sizes
        for done, size in enumerate(sizes, start=1):
            calibrated_dpsgd(self.config, size)
            self.clock.step("calibration", done, len(sizes))
        return f"{len(sizes)} cell sizes calibrated"

    def factories(self) -> str:
        """``factories``: every cell trains and ships its factory; the DP ones enter the ledger."""
        config = self.config
        if config.uses_dp and self.ledger is None:
            self.ledger = _plan_ledger(config, self.public, self.cell_sizes)
        self.matrix = FactoryMatrix()
        self.seconds: list[float] = []
        self.shipped = [0] * len(self.parts)
        self.trained: list[tuple[int, int, Any, torch.Tensor]] = []
        for done, (client, c, cls_idx) in enumerate(self.cells, start=1):
            count = int(cls_idx.numel())
            factory = make_factory(config, c, client, codec=self.public, sample_count=count)
            start = time.perf_counter()
            factory.fit(self.images[cls_idx])
            self.seconds.append(time.perf_counter() - start)
            if config.uses_dp:
                # The event the fit built, named after its cell, as the manifest ships it.
                self.ledger.record(factory.release)
            self.shipped[client] += weight_bytes(factory)
            self.matrix.register(c, client, factory, count)
            self.trained.append((c, client, factory, cls_idx))
            self.clock.step("factories", done, len(self.cells))
        return f"{len(self.cells)} factories trained"

    def audit(self) -> str:
        """``audit``: membership inference on the shipped factories."""
        self.audit_report = audit_factories(
            _audit_targets(self.trained, self.images, self.test_x, self.test_y),
            config=self.config.audit_config,
            progress=lambda d, t: self.clock.step("audit", d, t),
        )
        return "membership inference done"

    def synthesis(self) -> str:
        """``synthesis``: the server synthesizes from the matrix."""
        self.synthetic, self.synthesis_seconds = synthesize_matrix(self.config, self.matrix)
        return f"{len(self.synthetic.labels)} synthetic images"

    def classifier(self) -> str:
        """``classifier``: the downstream classifier on the synthetic data."""
        import dataclasses

        from privfed.engines._spread import accuracy_spread
        from privfed.engines.classifier import evaluate_classifier

        config = self.config
        step = lambda e, t, _loss: self.clock.step("classifier", e, t)  # noqa: E731
        values = [
            classify_synthetic(
                config,
                self.matrix,
                self.synthetic,
                self.num_classes,
                self.test_x,
                self.test_y,
                progress=step,
            )
        ]
        for k in range(1, config.repeats):
            # Evaluation only: the same synthetic data, another classifier seed.
            again = dataclasses.replace(config, seed=config.seed + k)
            clf = train_downstream(
                again, self.synthetic.images, self.synthetic.labels, self.num_classes,
                progress=step,
            )
            values.append(evaluate_classifier(clf, self.test_x, self.test_y, device=config.device))
        seeds = [config.seed + k for k in range(config.repeats)]
        self.factory_repeats = accuracy_spread(seeds, values)
        self.factory_acc = self.factory_repeats["mean"]
        if config.repeats == 1:
            return f"accuracy {self.factory_acc:.4f} on real test data"
        spread = self.factory_repeats
        return (
            f"accuracy {self.factory_acc:.4f} +- {spread['std']:.4f} on real test data "
            f"({config.repeats} seeds, {spread['min']:.4f}-{spread['max']:.4f})"
        )

    def fedavg(self) -> str:
        """``fedavg``: the FedAvg baseline on the same split."""
        from privfed.engines.classifier import evaluate_classifier

        clients = [
            (self.images[torch.from_numpy(idx)], self.labels[torch.from_numpy(idx)])
            for idx in self.parts
        ]
        fed = run_fedavg(
            clients,
            num_classes=self.num_classes,
            rounds=self.config.fedavg_rounds,
            local_epochs=self.config.fedavg_local_epochs,
            seed=self.config.seed,
            progress=lambda r, t: self.clock.step("fedavg", r, t),
        )
        self.fedavg_acc = evaluate_classifier(fed.model, self.test_x, self.test_y)
        self.fedavg_bytes = fed.bytes_per_client
        return f"accuracy {self.fedavg_acc:.4f}"

    def centralized(self) -> str:
        """``centralized``: the classifier on the pooled private data (an upper bound)."""
        from privfed.engines.classifier import evaluate_classifier

        central = train_downstream(
            self.config,
            self.images,
            self.labels,
            self.num_classes,
            progress=lambda e, t, _loss: self.clock.step("centralized", e, t),
        )
        self.central_acc = evaluate_classifier(
            central, self.test_x, self.test_y, device=self.config.device
        )
        return f"accuracy {self.central_acc:.4f}"

    def result(self) -> FactoryPipelineReport:
        """The run's report, once every stage ran."""
        config, private, uses_dp = self.config, self.split.private, self.config.uses_dp
        counts = np.zeros((self.num_classes, len(self.parts)), dtype=np.int64)
        for client, idx in enumerate(self.parts):
            for c in range(self.num_classes):
                counts[c, client] = int((private.labels[idx] == c).sum())
        return FactoryPipelineReport(
            config=config,
            factory_accuracy=self.factory_acc,
            factory_accuracy_repeats=self.factory_repeats,
            fedavg_accuracy=self.fedavg_acc,
            centralized_accuracy=self.central_acc,
            num_factories=len(self.matrix),
            factory_bytes_per_client=float(np.mean(self.shipped)),
            fedavg_bytes_per_client=self.fedavg_bytes,
            factory_seconds=tuple(self.seconds),
            synthesis_seconds=self.synthesis_seconds,
            class_counts=tuple(tuple(int(v) for v in row) for row in counts),
            dp_epsilon=float(self.ledger.epsilon(config.delta)) if uses_dp else None,
            matrix=self.matrix,
            test_images=self.test_x,
            test_labels=self.test_y,
            audit=self.audit_report,
            codec_seconds=self.codec_seconds,
            seconds=dict(self.clock.seconds),
            synthetic=self.synthetic,
            ledger=self.ledger if uses_dp else None,
            audit_inputs=(
                _pixel_audit_inputs(
                    self.trained, self.images, self.labels, self.split, self.synthetic
                )
                if config.audit
                else None
            ),
        )


#: The factory job's stages, in order (see the module docstring).
STAGES: tuple[JobStage[FactoryJob], ...] = (
    JobStage(
        "codec",
        FactoryJob.codec,
        lambda job: "fitting the public codec on the public split",
        lambda job: job.has_public_codec,
    ),
    JobStage(
        "calibration",
        FactoryJob.calibration,
        lambda job: "DP-SGD noise for the target, per cell size",
        lambda job: job.calibrates,
    ),
    JobStage(
        "factories",
        FactoryJob.factories,
        lambda job: f"training {len(job.cells)} {job.config.factory} factories "
        "(one per class and client)",
    ),
    JobStage(
        "audit",
        FactoryJob.audit,
        lambda job: "membership inference on the factories",
        lambda job: job.config.audit,
    ),
    JobStage("synthesis", FactoryJob.synthesis, lambda job: "sampling from the factories"),
    JobStage(
        "classifier", FactoryJob.classifier, lambda job: "training the classifier on synthetic data"
    ),
    JobStage(
        "fedavg",
        FactoryJob.fedavg,
        lambda job: f"FedAvg baseline, {job.config.fedavg_rounds} rounds",
        lambda job: job.config.fedavg_rounds > 0,
    ),
    JobStage(
        "centralized",
        FactoryJob.centralized,
        lambda job: "the classifier on the pooled private data",
        lambda job: job.config.centralized,
    ),
)


def _run(config: FactoryPipelineConfig, ledger: Any, clock: StageClock) -> FactoryPipelineReport:
    job = FactoryJob(config, ledger, clock)
    run_stages(job, STAGES, clock)
    return job.result()


def _audit_targets(
    trained: list[tuple[int, int, Any, torch.Tensor]],
    images: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
) -> list[tuple[int, int, Any, torch.Tensor, torch.Tensor]]:
    """Cells round-robin over classes (every class before a second cell of any class)."""
    by_class: dict[int, list[tuple[int, int, Any, torch.Tensor]]] = {}
    for item in trained:
        by_class.setdefault(item[0], []).append(item)
    order = []
    depth = max((len(v) for v in by_class.values()), default=0)
    for r in range(depth):
        for c in sorted(by_class):
            if r < len(by_class[c]):
                order.append(by_class[c][r])
    return [(c, k, f, images[idx], test_x[test_y == c]) for c, k, f, idx in order]


def _pixel_audit_inputs(
    trained: list[tuple[int, int, Any, torch.Tensor]],
    images: torch.Tensor,
    labels: torch.Tensor,
    split: Any,
    synthetic: SyntheticDataset,
) -> AuditInputs:
    """The synthetic-release audit's inputs in pixel space (flattened images in [0, 1]).

    Members are the records some factory was trained on; non-members the test
    split (no factory saw it); the reference is the public split.  With these,
    ``privfed audit --run-dir`` runs its distance and density attacks on the
    factory engine's synthetic data as it does on the latent engine's.
    """
    parts = [idx for _, _, _, idx in trained]
    member_index = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)
    member_index = torch.sort(member_index).values

    def flat(x: Any) -> np.ndarray:
        array = np.asarray(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x)
        return array.reshape(array.shape[0], -1).astype(np.float64)

    return AuditInputs(
        member_latents=flat(images[member_index]),
        member_labels=labels[member_index].numpy().astype(np.int64),
        nonmember_latents=flat(np.array(split.test.images)),
        nonmember_labels=np.asarray(split.test.labels, dtype=np.int64),
        synthetic_latents=flat(synthetic.images),
        synthetic_labels=synthetic.labels.detach().cpu().numpy().astype(np.int64),
        reference_latents=flat(np.array(split.public.images)),
        reference_labels=np.asarray(split.public.labels, dtype=np.int64),
    )
