"""The main job of the latent-statistic engine (FedKT-CSD), end to end.

Stages (each timed, each reported through ``progress``):

1. ``data``: load the dataset and split it into public / private / test parts;
   spread the private part over clients (:func:`privfed.data.partition`).
2. ``codec``: fit the codec on the PUBLIC part only (or load a pretrained one);
   the clip norm is the codec's data-independent default unless given.
3. ``clients``: every client encodes its records and computes exact
   fixed-point statistics, flattened to a ring vector.
4. ``secagg``: a real double-masking secure-aggregation round over serialized
   messages, with scripted dropouts; the server learns only the total of the
   survivors, which is checked to equal the exact sum of their statistics.
5. ``release``: the DP plan from :mod:`privfed.dp`, grid noise, ledger entry.
6. ``synthesis``: per-class Gaussians (post-processing), sampling, decoding.
7. ``train``: a classifier on the synthetic images, evaluated on real test data.
8. ``baselines``: the same classifier on the real private data, and on
   synthetic data from the noiseless statistics (no DP), for reference.
9. ``audit``: the default membership-inference audit of the release and its
   synthetic latents (:func:`privfed.audit.audit_synthetic_release`, including
   the noisy-sum likelihood-ratio attack); who counts as member, non-member
   and reference is documented in :mod:`privfed.engines.latent.audit`.  Its summary
   goes into the report, its inputs into ``audit_inputs.npz`` so that
   ``privfed audit --run-dir`` can rerun or extend it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from privfed.audit import SyntheticReleaseAudit, audit_synthetic_release
from privfed.data import (
    DatasetSplit,
    ImageDataset,
    PartitionScheme,
    load_digits,
    load_image_folder,
    load_npz,
    partition,
    split_public_private,
)
from privfed.dp import Adjacency, PrivacyLedger, plan_latent_release
from privfed.engines.classifier import evaluate_classifier, train_classifier
from privfed.engines.codecs import Codec, ConvAutoencoderCodec, DiffusersCodec, PCACodec
from privfed.engines.latent.audit import (
    AUDIT_INPUTS_FILENAME,
    audit_skip_reason,
    audit_summary,
    save_audit_inputs,
)
from privfed.engines.latent.client import LatentStatisticsAccumulator
from privfed.engines.latent.gaussians import ClassGaussians, fit_class_gaussians
from privfed.engines.latent.release import (
    NoisePlacement,
    NoisyLatentStatistics,
    nonprivate_release,
    release_latent_statistics,
)
from privfed.engines.latent.statistics import LatentStatistics, LatentStatisticsConfig
from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg import Stage, run_protocol

__all__ = ["PipelineConfig", "PipelineReport", "PipelineResult", "ProgressFn", "run_pipeline"]

#: ``progress(stage, message)``: called when a stage starts and finishes.
ProgressFn = Callable[[str, str], None]

Engine = Literal["latent"]


def _finite(name: str, value: object, *, low: float, high: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterTypeError(name, "a float", value)
    if not math.isfinite(value) or value <= low or (high is not None and value >= high):
        domain = f"a finite float > {low}" + ("" if high is None else f" and < {high}")
        raise ParameterError(name, domain, value)


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
        codec: ``"pca"``, ``"conv-ae"``, or a diffusers model path / hub id.
        latent_dim: ``d`` for the fitted codecs (ignored for diffusers).
        clip_norm: ``R``; ``None`` uses the codec's ``default_clip_norm``.
        epsilon: ε of the release, finite ``> 0``.
        delta: δ of the release, in ``(0, 1)``.
        adjacency: Neighbouring relation of the guarantee.
        dropout_rate: Fraction of clients that drop out during secure
            aggregation, in ``[0, 0.5)``; half of them before sending their
            masked input (their data is left out), half after (their data is in).
        samples_per_class: Synthetic latents drawn per class.
        classifier_epochs: Epochs of each downstream classifier.
        baselines: Also train on real private data and on noiseless synthetic data.
        audit: Run the membership-inference audit stage (about 1-2 s on a
            CPU at the default size).
        placement: Where the server adds the noise.
        device: Torch device for the PCA and diffusers codecs, statistics and
            classifiers (the small convolutional autoencoder always runs on the CPU).
        num_threads: CPU threads torch may use during the run (restored after);
            1 is fastest on small shared machines.
        seed: Seed of the experimental design (split, partition, codec fit,
            dropouts, sampling, classifier).  Never used for the DP noise.
        noise_seed: ``None`` (default): DP noise from the OS CSPRNG.  An int
            makes the noise reproducible (recorded as seeded in the ledger).
        engine: The engine; only ``"latent"`` here.
    """

    dataset: str = "digits"
    public_fraction: float = 0.15
    test_fraction: float = 0.25
    partition: PartitionScheme | str = PartitionScheme.DIRICHLET
    alpha: float | None = 0.1
    classes_per_client: int | None = None
    num_clients: int = 20
    codec: str = "pca"
    latent_dim: int = 8
    clip_norm: float | None = None
    epsilon: float = 10.0
    delta: float = 1e-5
    adjacency: Adjacency = Adjacency.REPLACE_ONE
    dropout_rate: float = 0.1
    samples_per_class: int = 300
    classifier_epochs: int = 20
    baselines: bool = True
    audit: bool = True
    placement: NoisePlacement | str = NoisePlacement.GRID
    device: str = "cpu"
    num_threads: int = 1
    seed: int = 0
    noise_seed: int | None = None
    engine: Engine = "latent"

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ParameterError("dataset", "'digits', an .npz path or a directory", self.dataset)
        _finite("public_fraction", self.public_fraction, low=0.0, high=1.0)
        _finite("test_fraction", self.test_fraction, low=0.0, high=1.0)
        try:
            scheme = PartitionScheme(self.partition)
        except ValueError:
            raise ParameterError(
                "partition", f"one of {[s.value for s in PartitionScheme]}", self.partition
            ) from None
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
            ("num_threads", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(name, f"an int >= {low}", value)
        if self.clip_norm is not None:
            _finite("clip_norm", self.clip_norm, low=0.0)
        _finite("epsilon", self.epsilon, low=0.0)
        _finite("delta", self.delta, low=0.0, high=1.0)
        if not isinstance(self.adjacency, Adjacency):
            try:
                object.__setattr__(self, "adjacency", Adjacency(self.adjacency))
            except ValueError:
                raise ParameterError(
                    "adjacency", f"one of {[a.value for a in Adjacency]}", self.adjacency
                ) from None
        if isinstance(self.dropout_rate, bool) or not isinstance(self.dropout_rate, int | float):
            raise ParameterTypeError("dropout_rate", "a float", self.dropout_rate)
        if not 0.0 <= self.dropout_rate < 0.5:
            raise ParameterError("dropout_rate", "a float in [0, 0.5)", self.dropout_rate)
        try:
            object.__setattr__(self, "placement", NoisePlacement(self.placement))
        except ValueError:
            raise ParameterError(
                "placement", f"one of {[p.value for p in NoisePlacement]}", self.placement
            ) from None
        for name in ("baselines", "audit"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterTypeError(name, "a bool", getattr(self, name))
        if self.engine != "latent":
            raise ParameterError("engine", "'latent'", self.engine)
        if self.noise_seed is not None and (
            isinstance(self.noise_seed, bool) or not isinstance(self.noise_seed, int)
        ):
            raise ParameterTypeError("noise_seed", "an int or None", self.noise_seed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly view (enums as their values; the noise seed only as a flag)."""
        out: dict[str, Any] = {}
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
    the summary of :func:`privfed.engines.latent.audit.audit_summary` (``None`` when
    the audit was off; ``{"skipped": reason}`` when the data were too few).
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
    secagg_exact: bool
    seconds: dict[str, float]
    ledger: dict[str, Any]
    audit: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain dict for ``json.dump``."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, eq=False)
class PipelineResult:
    """A run's report plus the artefacts later stages (plots, audits) need.

    ``synthetic_latents`` are the sampled latents behind ``synthetic_images``
    (float64 ``(s, d)``); ``audit`` is the full audit (with per-record scores)
    and ``audit_inputs`` the arrays of ``audit_inputs.npz``; both ``None`` when
    the audit was off.
    """

    report: PipelineReport
    ledger: PrivacyLedger
    split: DatasetSplit
    client_indices: tuple[np.ndarray, ...]
    codec: Codec
    aggregate: LatentStatistics = field(repr=False)
    release: NoisyLatentStatistics = field(repr=False)
    gaussians: ClassGaussians = field(repr=False)
    synthetic_images: np.ndarray = field(repr=False)
    synthetic_labels: np.ndarray = field(repr=False)
    synthetic_latents: np.ndarray = field(repr=False)
    audit: SyntheticReleaseAudit | None = field(default=None, repr=False)
    audit_inputs: dict[str, np.ndarray] | None = field(default=None, repr=False)

    def write(self, output_dir: str | Path) -> dict[str, Path]:
        """Write the run's files into ``output_dir`` (created if needed).

        Files: ``report.json``, ``ledger.json``, ``samples.png`` and, when the
        audit ran, ``audit_inputs.npz``.  The last holds real records' latents
        (members and non-members): keep it as private as the data itself.

        Returns:
            The paths written, by kind (``"report"``, ``"ledger"``,
            ``"samples"``, ``"audit_inputs"``).
        """
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "report": out / "report.json",
            "ledger": out / "ledger.json",
            "samples": out / "samples.png",
        }
        paths["report"].write_text(json.dumps(self.report.to_dict(), indent=2, sort_keys=True))
        paths["ledger"].write_text(self.ledger.to_json())
        _save_sample_grid(self.synthetic_images, self.synthetic_labels, paths["samples"])
        if self.audit_inputs is not None:
            paths["audit_inputs"] = out / AUDIT_INPUTS_FILENAME
            save_audit_inputs(paths["audit_inputs"], self.audit_inputs)
        return paths


def _save_sample_grid(
    images: np.ndarray, labels: np.ndarray, path: Path, per_class: int = 8
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = sorted(int(c) for c in np.unique(labels))
    rows = max(1, len(classes))
    fig, axes = plt.subplots(rows, per_class, figsize=(per_class * 0.8, rows * 0.8), squeeze=False)
    for r, cls in enumerate(classes):
        picks = np.flatnonzero(labels == cls)[:per_class]
        for col in range(per_class):
            ax = axes[r][col]
            ax.axis("off")
            if col < picks.size:
                img = images[picks[col]]
                shown = img[0] if img.shape[0] == 1 else np.transpose(img, (1, 2, 0))
                ax.imshow(shown, cmap="gray" if img.shape[0] == 1 else None, vmin=0, vmax=1)
        axes[r][0].set_title(str(cls), fontsize=7, loc="left")
    fig.suptitle("synthetic samples per class")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _load_dataset(spec: str) -> ImageDataset:
    if spec == "digits":
        return load_digits()
    path = Path(spec)
    if path.suffix == ".npz" and path.is_file():
        return load_npz(path)
    if path.is_dir():
        return load_image_folder(path)
    raise ParameterError("dataset", "'digits', an existing .npz file or directory", spec)


def _build_codec(config: PipelineConfig, public: ImageDataset) -> Codec:
    images = torch.from_numpy(np.array(public.images))
    if config.codec == "pca":
        return PCACodec.fit(images, latent_dim=config.latent_dim)
    if config.codec == "conv-ae":
        return ConvAutoencoderCodec.fit(images, latent_dim=config.latent_dim, seed=config.seed)
    return DiffusersCodec.from_pretrained(
        config.codec, image_shape=public.image_shape, device=config.device
    )


def _dropouts(config: PipelineConfig) -> dict[Stage, list[int]]:
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


def run_pipeline(config: PipelineConfig, *, progress: ProgressFn | None = None) -> PipelineResult:
    """Run the latent-statistic job once; see the module docstring for the stages.

    Args:
        config: The run's configuration.
        progress: Optional ``progress(stage, message)`` callback.

    Returns:
        The result: a JSON-able :class:`PipelineReport` plus artefacts.

    Raises:
        ParameterError: On configurations the data cannot satisfy.
        ProtocolAbort: If secure aggregation cannot complete.
        AssertionError: Never on purpose; the secure-aggregation total is
            compared to the exact sum and a mismatch raises RuntimeError.
    """
    if not isinstance(config, PipelineConfig):
        raise ParameterTypeError("config", "a PipelineConfig", config)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(config.num_threads)
    try:
        return _run(config, progress)
    finally:
        torch.set_num_threads(previous_threads)


def _run(config: PipelineConfig, progress: ProgressFn | None) -> PipelineResult:
    say: ProgressFn = progress or (lambda stage, message: None)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def done(stage: str, message: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[stage] = round(now - clock, 4)
        clock = now
        say(stage, f"{message} ({seconds[stage]:.2f} s)")

    device = torch.device(config.device)

    say("data", f"loading {config.dataset!r}")
    dataset = _load_dataset(config.dataset)
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
    empty = sum(1 for c in clients if c.size == 0)
    done(
        "data",
        f"{len(split.public)} public / {len(split.private)} private / {len(split.test)} test; "
        f"{config.num_clients} clients ({config.partition}), {empty} empty",
    )

    say("codec", f"fitting {config.codec!r} on the public split")
    codec = _build_codec(config, split.public)
    clip_norm = float(config.clip_norm if config.clip_norm is not None else codec.default_clip_norm)
    stats_config = LatentStatisticsConfig(
        dim=codec.latent_dim,
        num_classes=dataset.num_classes,
        clip_norm=clip_norm,
        max_records=max(len(split.private), 1),
    )
    done("codec", f"d={codec.latent_dim}, R={clip_norm:.4g}, f={stats_config.bits} bits")

    say("clients", "encoding and computing exact statistics")
    private_images = torch.from_numpy(np.array(split.private.images))
    latents = codec.encode(private_images.to(device)).to(torch.float64).cpu()
    client_stats: list[LatentStatistics] = []
    for idx in clients:
        acc_stats = (
            LatentStatistics.zeros(stats_config)
            if idx.size == 0
            else _client_statistics(latents[idx], split.private.labels[idx], stats_config, device)
        )
        client_stats.append(acc_stats)
    vectors = [s.to_ring_vector() for s in client_stats]
    done("clients", f"{stats_config.num_values} ring values per client")

    dropouts = _dropouts(config)
    threshold = config.num_clients // 2 + 1
    say("secagg", f"secure aggregation, threshold {threshold}, dropouts {_named(dropouts)}")
    report = run_protocol(vectors, threshold=threshold, dropouts=dropouts)
    survivors = [i - 1 for i in report.survivors]
    aggregate = LatentStatistics.from_ring_vector(report.total, stats_config)
    expected = LatentStatistics.zeros(stats_config)
    for i in survivors:
        expected = expected + client_stats[i]
    if aggregate != expected:
        raise RuntimeError("secure aggregation total differs from the exact sum of its inputs")
    full_records = [c for c in report.clients if Stage.UNMASKING in c.bytes_sent]
    secagg_bytes = float(np.mean([c.total_bytes for c in full_records])) if full_records else 0.0
    done("secagg", f"{len(survivors)} survivors, {aggregate.total_records} records, exact")

    say("release", f"planning (epsilon={config.epsilon}, delta={config.delta}, {config.adjacency})")
    plan = plan_latent_release(
        config.epsilon,
        config.delta,
        clip_norm=clip_norm,
        dim=codec.latent_dim,
        adjacency=config.adjacency,
    )
    ledger = PrivacyLedger(budget_epsilon=config.epsilon, budget_delta=config.delta)
    release = release_latent_statistics(
        aggregate, plan, ledger=ledger, seed=config.noise_seed, placement=config.placement
    )
    done(
        "release",
        f"sigma_sum={plan.noise_std_sum:.4g}, sigma_second={plan.noise_std_second_moment:.4g}",
    )

    say("synthesis", "fitting class Gaussians, sampling, decoding")
    gaussians = fit_class_gaussians(release)
    synth_latents, synth_images, synth_labels = _synthesise(
        codec, gaussians, config, device, offset=1
    )
    done("synthesis", f"{synth_labels.size} synthetic images")

    test_x = torch.from_numpy(np.array(split.test.images))
    test_y = torch.from_numpy(np.array(split.test.labels))
    say("train", "training the classifier on synthetic data")
    acc_synth = _train_eval(synth_images, synth_labels, test_x, test_y, config, device)
    done("train", f"accuracy {acc_synth:.4f} on real test data")

    acc_real = acc_nondp = None
    if config.baselines:
        say("baselines", "real private data, and noiseless synthetic data")
        acc_real = _train_eval(
            np.array(split.private.images),
            np.array(split.private.labels),
            test_x,
            test_y,
            config,
            device,
        )
        clean = fit_class_gaussians(nonprivate_release(aggregate))
        _, clean_x, clean_y = _synthesise(codec, clean, config, device, offset=2)
        acc_nondp = _train_eval(clean_x, clean_y, test_x, test_y, config, device)
        done("baselines", f"real {acc_real:.4f}, non-DP synthetic {acc_nondp:.4f}")

    audit: SyntheticReleaseAudit | None = None
    audit_inputs: dict[str, np.ndarray] | None = None
    summary: dict[str, Any] | None = None
    reason: str | None = None
    if config.audit:
        say("audit", "membership inference: members vs held-out test records")
        member_parts = [np.asarray(clients[i], dtype=np.int64) for i in survivors]
        members = np.sort(np.concatenate(member_parts)) if member_parts else np.zeros(0, np.int64)
        audit_inputs = _audit_inputs(
            codec,
            split,
            members,
            latents,
            stats_config,
            release,
            synth_latents,
            synth_labels,
            device,
        )
        reason = audit_skip_reason(
            members=audit_inputs["member_latents"].shape[0],
            nonmembers=audit_inputs["nonmember_latents"].shape[0],
            reference=audit_inputs["reference_latents"].shape[0],
        )
    if config.audit and reason is not None:
        audit_inputs, summary = None, {"skipped": reason}
        done("audit", f"skipped: {reason}")
    elif config.audit and audit_inputs is not None:
        audit = audit_synthetic_release(
            audit_inputs["member_latents"],
            audit_inputs["nonmember_latents"],
            audit_inputs["synthetic_latents"],
            member_labels=audit_inputs["member_labels"],
            nonmember_labels=audit_inputs["nonmember_labels"],
            synthetic_labels=audit_inputs["synthetic_labels"],
            reference_latents=audit_inputs["reference_latents"],
            reference_labels=audit_inputs["reference_labels"],
            noisy_sums=audit_inputs["noisy_sums"],
            counts=audit_inputs["counts"],
            noise_std_sum=float(audit_inputs["noise_std_sum"]),
            delta=config.delta,
            seed=config.seed,
        )
        summary = audit_summary(
            audit,
            claimed_epsilon=plan.epsilon,
            claimed_delta=plan.delta,
            claimed_mu=plan.mu,
            adjacency=config.adjacency,
        )
        top = audit.best()
        done(
            "audit",
            f"{len(audit.results)} attacks, best {top.attack.value} "
            f"AUC {top.metrics.auc.estimate:.3f}",
        )

    result_report = PipelineReport(
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
        clip_norm=clip_norm,
        latent_dim=codec.latent_dim,
        fractional_bits=stats_config.bits,
        payload_values_per_class=stats_config.values_per_class,
        payload_values_per_client=stats_config.num_values,
        payload_bytes_per_client=stats_config.payload_bytes,
        secagg_bytes_per_client=secagg_bytes,
        num_clients=config.num_clients,
        empty_clients=empty,
        dropped_clients={stage.name: list(ids) for stage, ids in dropouts.items()},
        records_public=len(split.public),
        records_private=len(split.private),
        records_aggregated=aggregate.total_records,
        records_test=len(split.test),
        secagg_exact=True,
        seconds=seconds,
        ledger=json.loads(ledger.to_json()),
        audit=summary,
    )
    return PipelineResult(
        report=result_report,
        ledger=ledger,
        split=split,
        client_indices=tuple(clients),
        codec=codec,
        aggregate=aggregate,
        release=release,
        gaussians=gaussians,
        synthetic_images=synth_images,
        synthetic_labels=synth_labels,
        synthetic_latents=synth_latents,
        audit=audit,
        audit_inputs=audit_inputs,
    )


def _named(dropouts: dict[Stage, list[int]]) -> str:
    return ", ".join(f"{s.name}: {ids}" for s, ids in dropouts.items()) or "none"


def _client_statistics(
    latents: torch.Tensor, labels: np.ndarray, config: LatentStatisticsConfig, device: torch.device
) -> LatentStatistics:
    accumulator = LatentStatisticsAccumulator(config, device=device)
    accumulator.update(latents, torch.from_numpy(np.array(labels)))
    return accumulator.result()


def _synthesise(
    codec: Codec,
    gaussians: ClassGaussians,
    config: PipelineConfig,
    device: torch.device,
    *,
    offset: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    latents, labels = gaussians.sample(config.samples_per_class, seed=config.seed * 1000 + offset)
    images = codec.decode(torch.from_numpy(latents).to(device)).cpu().numpy()
    return latents, images.astype(np.float32), labels


def _audit_inputs(
    codec: Codec,
    split: DatasetSplit,
    member_indices: np.ndarray,
    private_latents: torch.Tensor,
    stats_config: LatentStatisticsConfig,
    release: NoisyLatentStatistics,
    synthetic_latents: np.ndarray,
    synthetic_labels: np.ndarray,
    device: torch.device,
) -> dict[str, np.ndarray]:
    """Arrays of ``audit_inputs.npz``; see :mod:`privfed.engines.latent.audit` for the roles."""
    # The statistics' own quantizer: member rows are then exactly what was summed.
    quantizer = LatentStatisticsAccumulator(stats_config, device=device)
    grid = math.ldexp(1.0, -stats_config.bits)

    def clipped(latents: torch.Tensor) -> np.ndarray:
        if latents.shape[0] == 0:
            return np.zeros((0, stats_config.dim))
        q = quantizer.quantize(latents).cpu().numpy().astype(np.float64)
        return q * grid

    def encode(images: np.ndarray) -> torch.Tensor:
        return codec.encode(torch.from_numpy(images).to(device)).to(torch.float64).cpu()

    private_labels = np.asarray(split.private.labels, dtype=np.int64)
    return {
        "member_latents": clipped(private_latents[torch.from_numpy(member_indices)]),
        "member_labels": private_labels[member_indices],
        "nonmember_latents": clipped(encode(np.array(split.test.images))),
        "nonmember_labels": np.asarray(split.test.labels, dtype=np.int64),
        "synthetic_latents": np.asarray(synthetic_latents, dtype=np.float64),
        "synthetic_labels": np.asarray(synthetic_labels, dtype=np.int64),
        "reference_latents": clipped(encode(np.array(split.public.images))),
        "reference_labels": np.asarray(split.public.labels, dtype=np.int64),
        "noisy_sums": np.array(release.sums, dtype=np.float64),
        # What the attacker sees: exact counts when public, else rounded noisy
        # ones; floored at 1 because the attack's model needs a record per class.
        "counts": np.maximum(np.rint(np.asarray(release.counts, dtype=np.float64)), 1.0),
        # The grid rounding of the noise adds a little variance; the attack's model includes it.
        "noise_std_sum": np.asarray(
            math.sqrt(release.noise_std_sum**2 + release.grid_variance), dtype=np.float64
        ),
    }


def _train_eval(
    images: np.ndarray,
    labels: np.ndarray,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    config: PipelineConfig,
    device: torch.device,
) -> float:
    model = train_classifier(
        torch.from_numpy(images),
        torch.from_numpy(labels),
        num_classes=int(max(int(test_y.max()) + 1, int(labels.max()) + 1, 2)),
        epochs=config.classifier_epochs,
        seed=config.seed,
        device=device,
    )
    return evaluate_classifier(model, test_x, test_y, device=device)
