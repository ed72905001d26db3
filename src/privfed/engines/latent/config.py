"""The latent job's configuration: what one run does, checked before any work."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import torch

from privfed._checks import (
    check_bool,
    check_choice,
    check_enum,
    check_float,
    check_int,
    check_optional_int,
)
from privfed.data import (
    PartitionScheme,
)
from privfed.dp import Adjacency, min_honest_contributors
from privfed.engines.classifier import ARCHITECTURES
from privfed.engines.latent.distributed import (
    NoiseModel,
    layers_supported,
)
from privfed.engines.latent.release import (
    NoisePlacement,
)
from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg import ThresholdPolicy

__all__ = ["PipelineConfig"]


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
        repeats: How many times the evaluation trains and tests the classifier
            on the synthetic data, with seeds ``seed, seed + 1, ...`` (int
            ``>= 1``; default 1: one run, no spread).  The release is made once
            whatever the value; ``evaluation.json`` records the per-seed
            accuracies with their mean, std, min and max.
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
    repeats: int = 1
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
        check_int("repeats", self.repeats, minimum=1, type_error=False)
        check_optional_int(
            "classifier_patience", self.classifier_patience, minimum=1, type_error=False
        )
        if self.noise_seed is not None and (
            isinstance(self.noise_seed, bool) or not isinstance(self.noise_seed, int)
        ):
            raise ParameterTypeError("noise_seed", "an int or None", self.noise_seed)
        if self.noise_seed is not None and self.noise_seed < 0:
            raise ParameterError("noise_seed", "an int >= 0 or None", self.noise_seed, secret=True)
        model = check_enum("noise", self.noise, NoiseModel)
        object.__setattr__(self, "noise", model)
        corrupted = check_int("assumed_corrupted", self.assumed_corrupted, minimum=0)
        check_choice("secagg_mode", self.secagg_mode, ("semi-honest", "active"))
        t = self.secagg_threshold
        limit = self.threshold_policy.max_corrupted(t, self.num_clients)
        if corrupted > limit:
            raise ParameterError(
                "assumed_corrupted",
                f"an int in [0, {limit}] with secagg_mode='{self.secagg_mode}' "
                f"(t = {t}, n = {self.num_clients})",
                corrupted,
                detail="secure aggregation needs t > n_C, and 2t > n + n_C in active mode",
            )
        if model is not NoiseModel.CENTRAL:
            min_honest_contributors(t, corrupted, num_clients=self.num_clients)
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
    def threshold_policy(self) -> ThresholdPolicy:
        """The secure-aggregation threshold policy of the run (its mode and n_C)."""
        return ThresholdPolicy(
            active=self.secagg_mode == "active", corrupted=self.assumed_corrupted
        )

    @property
    def secagg_threshold(self) -> int:
        """The run's secure-aggregation threshold: the policy's strict majority of the clients."""
        return self.threshold_policy.default(self.num_clients)

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
