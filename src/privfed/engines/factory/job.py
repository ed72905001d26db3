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
unlearning experiments.

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
largest cell's, which is at most the target (the ledger is created with the
target as its budget and refuses any release over it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import torch
from safetensors.torch import save as safetensors_bytes

from privfed._checks import check_bool, check_choice, check_float, check_int, check_probability
from privfed._records import field_dict
from privfed.engines.codecs.base import Codec
from privfed.engines.factory.audit import (
    FactoryAuditConfig,
    FactoryAuditReport,
    audit_factories,
)
from privfed.engines.factory.dpsgd import DPSGDConfig, realised_sampling_rate, record_in_ledger
from privfed.engines.factory.edm import (
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    UNetConfig,
)
from privfed.engines.factory.fedavg import run_fedavg
from privfed.engines.factory.gaussian import LatentGaussianDP, LatentGaussianFactory
from privfed.engines.factory.matrix import FactoryMatrix, SyntheticDataset
from privfed.engines.job import (
    RunArtifacts,
    StageClock,
    WritesArtifacts,
    evaluation_document,
    release_document,
    run_job,
)
from privfed.engines.latent.audit import AuditInputs
from privfed.errors import ParameterError, ParameterTypeError
from privfed.progress import ProgressFn

if TYPE_CHECKING:
    from privfed.engines.classifier import ProgressCallback

__all__ = [
    "DownstreamResult",
    "FactoryKind",
    "FactoryPipelineConfig",
    "FactoryPipelineReport",
    "GaussianBasis",
    "Scenario",
    "calibrated_dpsgd",
    "cell_noise_seed",
    "downstream_stage",
    "load_partitions",
    "make_factory",
    "public_codec",
    "run_factory_pipeline",
    "train_downstream",
    "weight_bytes",
]

#: Client data layout.
Scenario = Literal["single-class", "dirichlet"]
#: Which factory every client trains.
FactoryKind = Literal["gaussian", "edm"]
#: Latent basis of the Gaussian factories (see the module docstring).
GaussianBasis = Literal["public-pca", "public-autoencoder", "private-pca"]

# A split fraction in the open interval (0, high); either error reads "a float in (0, high)".
_open_fraction = functools.partial(
    check_float, low=0, open_low=True, open_high=True, numpy=False, type_error=False
)


#: What a factory release discloses outside any DP guarantee (stated in every release.json).
FACTORY_RELEASE_LIMITATIONS = (
    "which (class, client) cells trained a factory (ledger entries, classes present in the "
    "synthetic data) and the synthesis quotas (proportional to each cell's exact record count) "
    "are derived from private data without noise; the DP mechanism (DP-SGD or the Gaussian "
    "release of latent moments) covers each factory's weights only"
)


@dataclass(frozen=True)
class FactoryPipelineConfig:
    """Configuration of :func:`run_factory_pipeline`.

    Attributes:
        scenario: ``"single-class"`` (client k holds class k mod 10) or
            ``"dirichlet"`` (label proportions ~ Dir(``dirichlet_alpha``)).
        num_clients: Number of clients (>= 1; >= 10 for single-class so
            every class has a holder).
        dirichlet_alpha: Dirichlet concentration (> 0), dirichlet only.
        factory: ``"gaussian"`` (probabilistic PCA, milliseconds per
            factory) or ``"edm"`` (EDM diffusion on a small UNet).
        latent_dim: Latent dimension of the Gaussian factories (>= 1):
            principal directions kept (private PCA) or the public codec's
            ``d`` (at most the public split's size, about 90, for public PCA).
        gaussian_basis: ``"public-pca"`` (default), ``"public-autoencoder"``
            or ``"private-pca"`` (see the module docstring).
        unet: UNet of the EDM factory.
        edm: EDM constants of the EDM factory.
        edm_training: Training of the EDM factory (steps, batch, device,
            optional DP-SGD).  Its ``seed`` is ignored: each factory gets a
            seed derived from ``seed``.
        min_records_per_factory: A client trains a factory for a class only
            if it holds at least this many records of it (>= 1).
        synthetic_per_class: Synthetic images per class (>= 1).
        classifier_epochs: Epochs of the downstream classifier (>= 1).
        fedavg_rounds: FedAvg rounds (>= 1).
        fedavg_local_epochs: Local epochs per FedAvg round (>= 1).
        centralized: Also train on the pooled private data (upper bound).
        test_fraction: Fraction of every class held out for testing, in (0, 0.9).
        delta: δ at which the DP guarantee is reported when the factories are
            trained with DP-SGD (``edm_training.dp`` or ``epsilon``), in (0, 1).
        epsilon: Target ε (at ``delta``) of every factory, finite and > 0, or
            ``None`` (default: no target).  EDM factories are then trained
            with DP-SGD, each cell's noise multiplier calibrated to the target
            for its own sampling rate and steps (:func:`calibrated_dpsgd`;
            requires ``edm_training.dp=None``: the multipliers are calibrated,
            not given).  Gaussian factories are fitted from one Gaussian
            release of clipped latent moments per cell
            (:class:`~privfed.engines.factory.gaussian.LatentGaussianDP`,
            noise from the OS CSPRNG unless ``noise_seed`` is set; requires a
            public basis).
        dp_clip_norm: Per-example gradient clipping bound of the calibrated
            DP-SGD (``epsilon`` set), > 0.
        dp_sampling_rate: Poisson rate of every cell under ``epsilon``, in
            ``[2**-64, 1]``, or ``None`` (default): each cell samples at
            ``min(1, edm_training.batch_size / n_{c,k})``.  The per-cell rate
            makes the ledger disclose each cell's exact record count (as the
            synthesis quotas and manifests already do); a fixed rate keeps
            it out of the ledger.
        seed: Seed of split, partition, training and synthesis (>= 0).
        device: Torch device for factories and classifiers.
        public_fraction: Fraction of every class put in the public split, in
            (0, 0.5); ``public_fraction + test_fraction < 1``.
        audit: Run the membership-inference audit stage (default ``True``).
        audit_config: Settings of the audit stage.
        num_threads: CPU threads torch may use during the run (restored
            after), int >= 1.
        dataset: ``"digits"`` (bundled), an ``.npz`` file or an image folder
            (:func:`privfed.data.load_dataset`).
        num_classes: The dataset's number of classes; ``None`` infers it (and
            refuses labels that leave classes empty).
        noise_seed: ``None`` (default): the Gaussian factories' DP noise comes
            from the OS CSPRNG.  An int >= 0 makes it reproducible
            (experiments, tests): every cell's noise is derived from it, its
            class and its client, the ledger records the releases as seeded and
            the release says ``noise_seeded``.  Only for Gaussian factories
            with ``epsilon`` set (EDM's DP-SGD noise follows ``seed``).
    """

    scenario: Scenario = "single-class"
    num_clients: int = 10
    dirichlet_alpha: float = 0.5
    factory: FactoryKind = "gaussian"
    latent_dim: int = 16
    unet: UNetConfig = field(default_factory=UNetConfig)
    edm: EDMConfig = field(default_factory=lambda: EDMConfig(sampling_steps=12))
    edm_training: EDMTrainingConfig = field(
        default_factory=lambda: EDMTrainingConfig(steps=300, batch_size=64, learning_rate=2e-3)
    )
    min_records_per_factory: int = 2
    synthetic_per_class: int = 300
    classifier_epochs: int = 20
    fedavg_rounds: int = 20
    fedavg_local_epochs: int = 1
    centralized: bool = True
    test_fraction: float = 0.3
    delta: float = 1e-5
    seed: int = 0
    device: str = "cpu"
    gaussian_basis: GaussianBasis = "public-pca"
    public_fraction: float = 0.05
    audit: bool = True
    audit_config: FactoryAuditConfig = field(default_factory=FactoryAuditConfig)
    num_threads: int = 1
    dataset: str = "digits"
    num_classes: int | None = None
    epsilon: float | None = None
    dp_clip_norm: float = 1.0
    dp_sampling_rate: float | None = None
    noise_seed: int | None = None

    def __post_init__(self) -> None:
        check_choice("scenario", self.scenario, ("single-class", "dirichlet"))
        check_choice("factory", self.factory, ("gaussian", "edm"))
        check_int("num_clients", self.num_clients, minimum=1, expected=None)
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ParameterError("dataset", "'digits', an .npz path or a directory", self.dataset)
        if self.num_classes is not None:
            check_int("num_classes", self.num_classes, minimum=2, expected=None)
        if self.dataset == "digits" and self.scenario == "single-class" and self.num_clients < 10:
            raise ParameterError(
                "num_clients", "an int >= 10 for single-class silos on digits", self.num_clients
            )
        check_float(
            "dirichlet_alpha",
            self.dirichlet_alpha,
            low=0,
            open_low=True,
            numpy=False,
            type_error=False,
        )
        check_int("latent_dim", self.latent_dim, minimum=1, expected=None)
        for name, kind in (
            ("unet", UNetConfig),
            ("edm", EDMConfig),
            ("edm_training", EDMTrainingConfig),
        ):
            if not isinstance(getattr(self, name), kind):
                raise ParameterTypeError(name, f"a {kind.__name__}", getattr(self, name))
        check_int("min_records_per_factory", self.min_records_per_factory, minimum=1, expected=None)
        check_int("synthetic_per_class", self.synthetic_per_class, minimum=1, expected=None)
        check_int("classifier_epochs", self.classifier_epochs, minimum=1, expected=None)
        check_int("fedavg_rounds", self.fedavg_rounds, minimum=1, expected=None)
        check_int("fedavg_local_epochs", self.fedavg_local_epochs, minimum=1, expected=None)
        check_bool("centralized", self.centralized)
        t = _open_fraction("test_fraction", self.test_fraction, high=0.9)
        check_probability("delta", self.delta, numpy=False, type_error=False)
        check_int("seed", self.seed, minimum=0, expected=None)
        if not isinstance(self.device, str):
            raise ParameterTypeError("device", "a torch device string", self.device)
        check_choice(
            "gaussian_basis",
            self.gaussian_basis,
            ("public-pca", "public-autoencoder", "private-pca"),
        )
        p = _open_fraction("public_fraction", self.public_fraction, high=0.5)
        if p + t >= 1:
            raise ParameterError("public_fraction + test_fraction", "< 1", p + t)
        check_bool("audit", self.audit)
        if not isinstance(self.audit_config, FactoryAuditConfig):
            raise ParameterTypeError("audit_config", "a FactoryAuditConfig", self.audit_config)
        check_int("num_threads", self.num_threads, minimum=1, expected=None)
        self._check_privacy_target()

    def _check_privacy_target(self) -> None:
        """``epsilon``, ``dp_clip_norm`` and ``dp_sampling_rate``, and how they combine."""
        from privfed._checks import check_finite_positive

        check_finite_positive("dp_clip_norm", self.dp_clip_norm)
        if self.noise_seed is not None:
            check_int("noise_seed", self.noise_seed, minimum=0, expected=None)
            if self.epsilon is None or self.factory != "gaussian":
                raise ParameterError(
                    "noise_seed",
                    "None unless Gaussian factories are released with epsilon set "
                    "(only they draw noise of their own)",
                    "an int",
                )
        if self.dp_sampling_rate is not None:
            check_float(
                "dp_sampling_rate",
                self.dp_sampling_rate,
                low=2.0**-64,
                high=1.0,
                numpy=False,
                type_error=False,
                domain="a float in [2**-64, 1] or None",
            )
        if self.epsilon is None:
            if self.dp_sampling_rate is not None:
                raise ParameterError(
                    "dp_sampling_rate", "None unless epsilon is set", self.dp_sampling_rate
                )
            return
        check_finite_positive("epsilon", self.epsilon)
        if self.factory == "gaussian":
            if self.gaussian_basis == "private-pca":
                raise ParameterError(
                    "gaussian_basis",
                    "'public-pca' or 'public-autoencoder' when epsilon is set (a private "
                    "basis is an unprotected release)",
                    self.gaussian_basis,
                )
            if self.dp_sampling_rate is not None:
                raise ParameterError(
                    "dp_sampling_rate",
                    "None for Gaussian factories (one release of every record, no sampling)",
                    self.dp_sampling_rate,
                )
            return
        if self.edm_training.dp is not None:
            raise ParameterError(
                "edm_training.dp",
                "None when epsilon is set (each cell's noise multiplier is calibrated)",
                "a DPSGDConfig",
            )

    @property
    def uses_dp(self) -> bool:
        """Whether the factories are differentially private (and enter a ledger)."""
        if self.epsilon is not None:
            return True
        return self.factory == "edm" and self.edm_training.dp is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        nested = ("unet", "edm", "edm_training", "audit_config")
        out = {**field_dict(self), **{name: getattr(self, name).to_dict() for name in nested}}
        # The noise seed only as a flag, as in the latent engine's release.
        out["noise_seeded"] = out.pop("noise_seed") is not None
        return out


@dataclass(frozen=True)
class FactoryPipelineReport(WritesArtifacts):
    """Outcome of :func:`run_factory_pipeline` (accuracies in [0, 1]).

    Attributes:
        config: The configuration run.
        factory_accuracy: Test accuracy of the classifier trained on synthetic data.
        fedavg_accuracy: Test accuracy of FedAvg on the same split, or ``None``
            when no FedAvg baseline ran (the job over Flower:
            :mod:`privfed.flower.factory_app`).
        centralized_accuracy: Test accuracy on pooled private data, or ``None``.
        num_factories: Factories registered in the matrix.
        factory_bytes_per_client: Mean bytes of safetensors weights a client ships
            (:func:`weight_bytes`, averaged over every client).
        fedavg_bytes_per_client: Mean bytes a FedAvg client sends and receives,
            or ``None`` when no FedAvg baseline ran.
        factory_seconds: Wall-clock training seconds of each factory.
        synthesis_seconds: Wall-clock seconds of synthesis.
        class_counts: Count matrix ``n_{c,k}`` (rows = classes 0..9, columns =
            clients).  Over Flower the server knows only the counts the shipped
            manifests state: cells without a factory count 0 there.
        dp_epsilon: ε at ``config.delta`` of the factory releases, from the
            privacy ledger (replace-one adjacency, PLD accounting), or
            ``None`` without DP-SGD.  Factories of different cells are
            trained on disjoint records and compose in parallel.
        matrix: The matrix with its synthetic buffer (not serialised).
        test_images: Real held-out test images (not serialised).
        test_labels: Their labels (not serialised).
        audit: The membership-inference audit, or ``None`` when
            ``config.audit`` is off.
        codec_seconds: Seconds spent fitting the public codec (0 without one).
        seconds: Wall-clock seconds per stage.
        synthetic: The synthetic dataset the classifier was trained on (not
            serialised).
        ledger: The run's privacy ledger when the factories were trained with
            DP-SGD, else ``None``.
        audit_inputs: Pixel vectors of members (the factories' training
            records), non-members (the test split), the synthetic data and the
            public reference, for ``privfed audit --run-dir`` (``None`` when the
            audit was off; private data: keep it as private as the records).
    """

    config: FactoryPipelineConfig
    factory_accuracy: float
    fedavg_accuracy: float | None
    centralized_accuracy: float | None
    num_factories: int
    factory_bytes_per_client: float
    fedavg_bytes_per_client: float | None
    factory_seconds: tuple[float, ...]
    synthesis_seconds: float
    class_counts: tuple[tuple[int, ...], ...]
    dp_epsilon: float | None
    matrix: FactoryMatrix = field(repr=False, compare=False)
    test_images: torch.Tensor = field(repr=False, compare=False)
    test_labels: torch.Tensor = field(repr=False, compare=False)
    audit: FactoryAuditReport | None = field(default=None, compare=False)
    codec_seconds: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)
    synthetic: SyntheticDataset | None = field(default=None, repr=False, compare=False)
    ledger: Any = field(default=None, repr=False, compare=False)
    audit_inputs: AuditInputs | None = field(default=None, repr=False, compare=False)

    def release_dict(self) -> dict[str, Any]:
        """``release.json``: the public configuration and the DP guarantee, if any.

        Without DP-SGD the factories are **not** differentially private (the
        audit measures what they leak) and the release says so.  Exact per-cell
        counts, the number of factories (which cells held enough records) and
        the bytes shipped are derived from private data: they are in
        :meth:`evaluation_dict` only.
        """
        dp: dict[str, Any]
        if self.ledger is None:
            dp = {
                "guarantee": None,
                "warning": "no differential privacy: the factories were trained without DP-SGD",
            }
        else:
            ledger_text = self.ledger.to_json()
            guarantee = self.ledger.guarantee(self.config.delta)
            dp = {
                "epsilon": guarantee.epsilon,
                "delta": guarantee.delta,
                "adjacency": None if guarantee.adjacency is None else guarantee.adjacency.value,
                "mechanism": (
                    "DP-SGD (Poisson-subsampled Gaussian) per (class, client) factory"
                    if self.config.factory == "edm" or self.config.epsilon is None
                    else "Gaussian mechanism on the clipped latent sum and second moment "
                    "per (class, client) factory (public codec)"
                ),
                "accountant": f"privfed.dp.PrivacyLedger ({guarantee.method})",
                "ledger_sha256": hashlib.sha256(ledger_text.encode()).hexdigest(),
            }
            if self.config.epsilon is not None:
                dp["target_epsilon"] = self.config.epsilon
                dp["calibration"] = (
                    "noise multiplier per (class, client) cell: "
                    "privfed.dp.calibrate_noise_multiplier (PLD, replace-one) for the cell's "
                    "realised Poisson rate and steps"
                    if self.config.factory == "edm"
                    # The release's words stay as published (the planner's old name).
                    else "noise per (class, client) cell: privfed.dp.plan_latent_release "
                    "(exact joint sensitivity of the sum and second moment, replace-one, "
                    "the codec's public clip radius)"
                )
                if self.config.factory == "edm" and self.config.dp_sampling_rate is None:
                    dp["sampling_rate_disclosure"] = (
                        "each cell samples at batch_size / n_{c,k}: the ledger's rates disclose "
                        "the exact per-cell record counts (as the synthesis quotas do)"
                    )
        # Not covered by any guarantee (see SECURITY.md): which cells trained a factory, and
        # the synthesis quotas, follow the exact per-cell record counts.
        dp["limitations"] = FACTORY_RELEASE_LIMITATIONS
        return release_document(
            "factory",
            public={"config": self.config.to_dict()},
            dp=dp,
            samples_per_class=self.config.synthetic_per_class,
        )

    def evaluation_dict(self) -> dict[str, Any]:
        """``evaluation.json``: accuracies, exact counts, bytes, timings and the audit."""
        body = self.to_dict()
        body.pop("config")
        return evaluation_document("factory", body)

    def artifacts(self, *, release_only: bool = False) -> RunArtifacts:
        """The run's artefacts, for :func:`privfed.engines.job.write_artifacts`."""
        images = labels = None
        if self.synthetic is not None:
            images = self.synthetic.images.detach().cpu().numpy()
            labels = self.synthetic.labels.detach().cpu().numpy()
        return RunArtifacts(
            release=json.loads(json.dumps(self.release_dict())),
            evaluation=None if release_only else json.loads(json.dumps(self.evaluation_dict())),
            ledger=self.ledger,
            sample_images=images,
            sample_labels=labels,
            audit_inputs=None if release_only else self.audit_inputs,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the matrix and test tensors)."""
        secs = self.factory_seconds
        return {
            "config": self.config.to_dict(),
            "factory_accuracy": self.factory_accuracy,
            "fedavg_accuracy": self.fedavg_accuracy,
            "centralized_accuracy": self.centralized_accuracy,
            "num_factories": self.num_factories,
            "factory_bytes_per_client": self.factory_bytes_per_client,
            "fedavg_bytes_per_client": self.fedavg_bytes_per_client,
            "factory_seconds_mean": float(np.mean(secs)) if secs else 0.0,
            "factory_seconds_max": float(np.max(secs)) if secs else 0.0,
            "synthesis_seconds": self.synthesis_seconds,
            "class_counts": [list(row) for row in self.class_counts],
            "dp_epsilon": self.dp_epsilon,
            "gaussian_basis": self.config.gaussian_basis
            if self.config.factory == "gaussian"
            else None,
            "codec_seconds": self.codec_seconds,
            "audit": None if self.audit is None else self.audit.to_dict(),
            "seconds": dict(self.seconds),
            "seconds_total": round(sum(self.seconds.values()), 4),
        }


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
    from privfed.data import load_dataset, split_public_private
    from privfed.engines.codecs import ConvAutoencoderCodec, PCACodec

    split = split_public_private(
        load_dataset(dataset, num_classes=num_classes),
        public_fraction=public_fraction,
        test_fraction=test_fraction,
        seed=seed,
    )
    public = torch.from_numpy(np.array(split.public.images))
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
    if config.factory != "gaussian" or config.gaussian_basis == "private-pca":
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
    from privfed.dp import calibrate_noise_multiplier

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
    realised = realised_sampling_rate(rate)
    multiplier = calibrate_noise_multiplier(
        float(config.epsilon), float(config.delta), sampling_rate=realised, steps=tr.steps
    )
    return DPSGDConfig(
        noise_multiplier=multiplier,
        clip_norm=float(config.dp_clip_norm),
        sampling_rate=realised,
        max_physical_batch=min(64, max(1, tr.batch_size)),
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
        config.device, config.num_threads, progress, lambda clock: _run(config, clock, ledger)
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
    """What :func:`downstream_stage` returns.

    Attributes:
        synthetic: The synthetic dataset the classifier was trained on.
        accuracy: The classifier's accuracy on the real test set, in [0, 1].
        synthesis_seconds: Wall-clock seconds of synthesis.
    """

    synthetic: SyntheticDataset
    accuracy: float
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
    from privfed.engines.classifier import evaluate_classifier

    clock.start("synthesis")
    start = time.perf_counter()
    synthetic = matrix.synthesize(config.synthetic_per_class, seed=config.seed)
    synthesis_seconds = time.perf_counter() - start
    clock.step("synthesis", 1, 1)
    clock.start("classifier")
    clf = train_downstream(
        config,
        synthetic.images,
        synthetic.labels,
        num_classes,
        progress=lambda e, t, _loss: clock.step("classifier", e, t),
    )
    matrix.record_consumer(consumer, synthetic)
    accuracy = evaluate_classifier(clf, test_images, test_labels, device=config.device)
    return DownstreamResult(synthetic, accuracy, synthesis_seconds)


def _run(config: FactoryPipelineConfig, clock: StageClock, ledger: Any) -> FactoryPipelineReport:
    from privfed.engines.classifier import evaluate_classifier

    uses_dp = config.uses_dp
    if uses_dp and ledger is None:
        from privfed.dp import PrivacyLedger

        # With a target, the ledger's budget is the target: no factory over it can register.
        target = config.epsilon
        ledger = (
            PrivacyLedger()
            if target is None
            else PrivacyLedger(budget_epsilon=target, budget_delta=config.delta)
        )

    report = clock.step

    k_classes, split, parts = load_partitions(config)
    private, test = split.private, split.test
    images = torch.from_numpy(np.array(private.images))
    labels = torch.from_numpy(np.array(private.labels))
    test_x = torch.from_numpy(np.array(test.images))
    test_y = torch.from_numpy(np.array(test.labels))

    # 0. The public codec of Gaussian factories (public split only).
    start = time.perf_counter()
    codec = public_codec(config)
    codec_seconds = time.perf_counter() - start if codec is not None else 0.0
    if codec is not None:
        clock.seconds["codec"] = round(codec_seconds, 4)
        report("codec", 1, 1)

    # 1. Clients train and ship factories.
    jobs = []
    for client, idx in enumerate(parts):
        idx_t = torch.from_numpy(idx)
        for c in range(k_classes):
            cls_idx = idx_t[labels[idx_t] == c]
            if cls_idx.numel() >= config.min_records_per_factory:
                jobs.append((client, c, cls_idx))
    if config.epsilon is not None and config.factory == "edm":
        # Calibrate every cell before any trains: an unreachable target fails fast.
        clock.start("calibration")
        sizes = sorted({int(idx.numel()) for _, _, idx in jobs})
        for done, size in enumerate(sizes, start=1):
            calibrated_dpsgd(config, size)
            report("calibration", done, len(sizes))
    clock.start("factories")
    matrix = FactoryMatrix()
    seconds: list[float] = []
    shipped = [0] * len(parts)
    trained = []
    for done, (client, c, cls_idx) in enumerate(jobs, start=1):
        factory = make_factory(config, c, client, codec=codec, sample_count=int(cls_idx.numel()))
        start = time.perf_counter()
        factory.fit(images[cls_idx])
        seconds.append(time.perf_counter() - start)
        if uses_dp:
            record_in_ledger(
                ledger,
                factory.privacy,
                name=f"factory class={c} client={client}",
                partition=f"class={c}/client={client}",
            )
        shipped[client] += weight_bytes(factory)
        matrix.register(c, client, factory, int(cls_idx.numel()))
        trained.append((c, client, factory, cls_idx))
        report("factories", done, len(jobs))

    # 1b. Membership-inference audit of the shipped factories.
    audit = None
    if config.audit:
        clock.start("audit")
        audit = audit_factories(
            _audit_targets(trained, images, test_x, test_y),
            config=config.audit_config,
            progress=lambda d, t: report("audit", d, t),
        )

    # 2. The server synthesizes and trains the downstream classifier.
    synthetic, factory_acc, synthesis_seconds = downstream_stage(
        config, matrix, k_classes, test_x, test_y, clock
    )

    # 3. Baselines on the same split.
    clients = [(images[torch.from_numpy(idx)], labels[torch.from_numpy(idx)]) for idx in parts]
    clock.start("fedavg")
    fed = run_fedavg(
        clients,
        num_classes=k_classes,
        rounds=config.fedavg_rounds,
        local_epochs=config.fedavg_local_epochs,
        seed=config.seed,
        progress=lambda r, t: report("fedavg", r, t),
    )
    fedavg_acc = evaluate_classifier(fed.model, test_x, test_y)
    central_acc = None
    if config.centralized:
        clock.start("centralized")
        central = train_downstream(
            config,
            images,
            labels,
            k_classes,
            progress=lambda e, t, _loss: report("centralized", e, t),
        )
        central_acc = evaluate_classifier(central, test_x, test_y, device=config.device)

    counts = np.zeros((k_classes, len(parts)), dtype=np.int64)
    for client, idx in enumerate(parts):
        for c in range(k_classes):
            counts[c, client] = int((private.labels[idx] == c).sum())
    return FactoryPipelineReport(
        config=config,
        factory_accuracy=factory_acc,
        fedavg_accuracy=fedavg_acc,
        centralized_accuracy=central_acc,
        num_factories=len(matrix),
        factory_bytes_per_client=float(np.mean(shipped)),
        fedavg_bytes_per_client=fed.bytes_per_client,
        factory_seconds=tuple(seconds),
        synthesis_seconds=synthesis_seconds,
        class_counts=tuple(tuple(int(v) for v in row) for row in counts),
        dp_epsilon=float(ledger.epsilon(config.delta)) if uses_dp else None,
        matrix=matrix,
        test_images=test_x,
        test_labels=test_y,
        audit=audit,
        codec_seconds=codec_seconds,
        seconds=dict(clock.seconds),
        synthetic=synthetic,
        ledger=ledger if uses_dp else None,
        audit_inputs=(
            _pixel_audit_inputs(trained, images, labels, split, synthetic) if config.audit else None
        ),
    )


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
