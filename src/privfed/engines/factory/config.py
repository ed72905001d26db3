"""The factory job's configuration: what one run does, checked before any work."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from privfed._checks import check_bool, check_choice, check_float, check_int, check_probability
from privfed._records import field_dict
from privfed.engines.factory.audit import (
    FactoryAuditConfig,
)
from privfed.engines.factory.edm import (
    EDMConfig,
    EDMTrainingConfig,
    UNetConfig,
)
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["ClassifierKind", "FactoryKind", "FactoryPipelineConfig", "GaussianBasis", "Scenario"]

#: Client data layout.
Scenario = Literal["single-class", "dirichlet"]
#: Which factory every client trains.
FactoryKind = Literal["gaussian", "edm", "mixture"]
#: Architecture of the downstream (and centralized) classifier.
ClassifierKind = Literal["cnn", "mlp"]
#: Latent basis of the Gaussian factories (see the module docstring).
GaussianBasis = Literal["public-pca", "public-autoencoder", "private-pca"]

# A split fraction in the open interval (0, high); either error reads "a float in (0, high)".
_open_fraction = functools.partial(
    check_float, low=0, open_low=True, open_high=True, numpy=False, type_error=False
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
            factory), ``"mixture"`` (a Gaussian mixture per cell in the
            public codec's latent space, :mod:`~privfed.engines.factory.mixture`)
            or ``"edm"`` (EDM diffusion on a small UNet).
        mixture_components: Most mixture components per cell (>= 1); the
            public rule :func:`~privfed.engines.factory.mixture.anchor_count`
            picks ``k`` from the class's public images.
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
        classifier: Architecture of the downstream classifier, ``"cnn"``
            (default, :class:`~privfed.engines.classifier.SmallCNN`) or
            ``"mlp"`` (:class:`~privfed.engines.classifier.SmallMLP`, many
            times cheaper per epoch on 28x28 images).  The centralized
            baseline trains the same architecture with the same epochs, so
            the synthetic-to-real gap compares like with like; FedAvg keeps
            its CNN.  Public post-processing only: no effect on the privacy
            accounting.
        fedavg_rounds: FedAvg rounds (>= 0; 0 skips the FedAvg baseline, whose
            accuracy and bytes are then ``None``).
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
        repeats: How many times the evaluation trains and tests the downstream
            classifier on the same synthetic data, with seeds ``seed, seed + 1,
            ...`` (int >= 1, default 1); the report gives the accuracy's mean
            and spread.  The factories and their release are made once.
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
    repeats: int = 1
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
    mixture_components: int = 8
    classifier: ClassifierKind = "cnn"

    def __post_init__(self) -> None:
        check_choice("scenario", self.scenario, ("single-class", "dirichlet"))
        check_choice("factory", self.factory, ("gaussian", "edm", "mixture"))
        check_int("mixture_components", self.mixture_components, minimum=1, expected=None)
        check_int("repeats", self.repeats, minimum=1, expected=None)
        check_choice("classifier", self.classifier, ("cnn", "mlp"))
        if self.factory == "mixture" and self.gaussian_basis == "private-pca":
            raise ParameterError(
                "gaussian_basis", "'public-pca' or 'public-autoencoder' for mixtures", "private-pca"
            )
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
        check_int("fedavg_rounds", self.fedavg_rounds, minimum=0, expected=None)
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
            if self.epsilon is None or self.factory == "edm":
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
        if self.factory != "edm":
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
