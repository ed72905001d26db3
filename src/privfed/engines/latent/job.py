"""The job of the latent-statistic engine (FedKT-CSD), as typed stages.

:func:`run_pipeline` runs the stages below in order (:data:`STAGES`, methods of
:class:`LatentJob`, under the one timing contract of
:func:`privfed.engines.job.run_stages`).  Each calls public functions that take and
return frozen values (:mod:`privfed.engines.latent.stages`, and the secure
aggregation here), so the same stages run in one process here, on Flower nodes
(the client stage) and in a ServerApp (the server stages).  The configuration
is :mod:`privfed.engines.latent.config`, the report
:mod:`privfed.engines.latent.report`.

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
5. ``release`` -- :func:`release`: the DP plan
   (:mod:`privfed.engines.moments.planning`), grid noise, the ledger entry.
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
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privfed.dp.distributed_blocks import dropout_inflation
from privfed.engines._spread import accuracy_spread
from privfed.engines.codecs import Codec
from privfed.engines.job import JobStage, StageClock, run_job, run_stages
from privfed.engines.latent.audit import (
    AuditInputs,
    AuditSkipped,
    AuditSummary,
)
from privfed.engines.latent.config import PipelineConfig, _idle_cores
from privfed.engines.latent.distributed import (
    DistributedNoisePlan,
    NoiseModel,
    plan_distributed_noise,
)
from privfed.engines.latent.distributed_round import (
    DistributedAggregation,
    aggregate_distributed,
    secagg_options,
)
from privfed.engines.latent.gaussians import fit_class_gaussians
from privfed.engines.latent.release import (
    check_grid_noise,
    nonprivate_release,
)
from privfed.engines.latent.report import PipelineReport, PipelineResult
from privfed.engines.latent.stages import (
    LatentData,
    LatentRelease,
    audit,
    audit_inputs,
    client_statistics,
    encode,
    fit_codec,
    load_data,
    plan_release,
    release,
    release_spec,
    synthesize,
    train_evaluate,
)
from privfed.engines.latent.statistics import (
    DEFAULT_MAX_RECORDS,
    LatentStatistics,
    LatentStatisticsConfig,
)
from privfed.engines.moments.planning import LatentReleasePlan
from privfed.engines.provenance import make_provenance
from privfed.errors import ParameterError, ParameterTypeError
from privfed.progress import ProgressEvent, ProgressFn
from privfed.secagg import ClientIds, Stage, run_protocol

__all__ = [
    "STAGES",
    "Aggregation",
    "Aggregator",
    "LatentJob",
    "NoisyAggregator",
    "NoisyRound",
    "ProgressFn",
    "aggregate",
    "distributed_plan",
    "dropout_plan",
    "run_pipeline",
    "run_spec",
]


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


def aggregate(
    client_stats: list[LatentStatistics],
    spec: LatentStatisticsConfig,
    *,
    threshold: int,
    dropouts: Mapping[Stage, list[int]],
    mode: str = "semi-honest",
    corrupted: int = 0,
    progress: ProgressFn | None = None,
) -> Aggregation:
    """Sum the clients' statistics by secure aggregation (in process, through bytes).

    ``progress`` receives the round's per-stage events (clients done per stage).

    ``mode="active"`` plays the actively secure round with one fresh identity
    key per client and ``corrupted`` (n_C) pinned in the registry
    (:func:`~privfed.engines.latent.distributed_round.secagg_options`).

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
        progress=progress,
        **secagg_options(mode, corrupted, len(vectors)),
    )
    survivors = ClientIds(len(vectors)).partition_ids(report.survivors)
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
        threshold=config.secagg_threshold,
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
        functools.partial(_run, config, aggregator, noisy_aggregator, aggregator_mode),
    )


class LatentJob:
    """One run of the latent job: its stages (:data:`STAGES`) and what they hand on.

    Built with the run's configuration and its replaceable aggregators (the
    checks that need no data are made here, before any stage); every stage
    is a method that reads what earlier stages left on the job and returns
    the message of its finish event; :meth:`result` assembles the outcome.
    """

    def __init__(
        self,
        config: PipelineConfig,
        aggregator: Aggregator | None = None,
        noisy_aggregator: NoisyAggregator | None = None,
        aggregator_mode: str = "semi-honest",
    ) -> None:
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
        self.config = config
        self.device = torch.device(config.device)
        self.aggregator = aggregator
        self.noisy_aggregator = noisy_aggregator
        self.latents: torch.Tensor | None = None
        self.client_stats: list[LatentStatistics] = []
        self.dist: DistributedAggregation | None = None
        self.acc_real: float | None = None
        self.acc_nondp: float | None = None
        self.repeats: dict[str, Any] | None = None
        self.full_audit: Any = None
        self.inputs: AuditInputs | None = None
        self.summary: AuditSummary | AuditSkipped | None = None
        self.plan: LatentReleasePlan | None = None
        #: The job's clock (set by the runner): counted progress inside stages.
        self.clock: StageClock | None = None

    def _step(self, stage: str) -> Callable[..., None] | None:
        """A ``(done, total, *_)`` callback reporting counted steps of ``stage``."""
        clock = self.clock
        if clock is None:
            return None
        return lambda done, total, *_: clock.step(stage, done, total)

    @property
    def in_process(self) -> bool:
        """Whether the clients' statistics are computed here (no external aggregator)."""
        return self.aggregator is None and self.noisy_aggregator is None

    def data(self) -> str:
        """``data``: load, split and partition."""
        self.loaded = load_data(self.config)
        split = self.loaded.split
        return (
            f"{len(split.public)} public / {len(split.private)} private / {len(split.test)} "
            f"test; {self.config.num_clients} clients ({self.config.partition}), "
            f"{self.loaded.empty_clients} empty"
        )

    def codec(self) -> str:
        """``codec``: the public codec, the statistics' spec and the distributed plan."""
        self.fitted = fit_codec(self.config, self.loaded.split.public)
        self.spec, self.dplan = run_spec(
            self.config, self.fitted, num_classes=self.loaded.num_classes
        )
        if self.dplan is None and self.noisy_aggregator is not None:
            raise ParameterError(
                "noisy_aggregator", "None with central noise", type(self.noisy_aggregator).__name__
            )
        if self.dplan is None:
            # Central noise: plan it now, so a target the grid cannot hold fails before
            # any client computes a statistic.
            self.plan = plan_release(self.config, self.spec)
            check_grid_noise(self.plan, self.spec, self.config.placement)
        return f"d={self.spec.dim}, R={self.spec.clip_norm:.4g}, f={self.spec.bits} bits"

    def clients(self) -> str:
        """``clients``: every client's exact statistics (in process only)."""
        private = self.loaded.split.private
        self.latents = encode(self.fitted, private.images, self.device)
        self.client_stats = [
            client_statistics(self.latents[idx], private.labels[idx], self.spec, self.device)
            for idx in self.loaded.clients
        ]
        return f"{self.spec.num_values} ring values per client"

    def secagg_begin(self) -> str:
        """The scripted dropouts and the threshold, fixed before the round starts."""
        self.dropouts = dropout_plan(self.config)
        threshold = self.config.secagg_threshold
        return f"secure aggregation, threshold {threshold}, dropouts {_named(self.dropouts)}"

    def secagg(self) -> str:
        """``secagg``: the round (with the clients' noise when it is distributed)."""
        config = self.config
        if self.dplan is not None:
            self.agg = self._noisy_round(self.dplan)
        elif self.aggregator is None:
            self.agg = aggregate(
                self.client_stats,
                self.spec,
                threshold=config.secagg_threshold,
                dropouts=self.dropouts,
                mode=config.secagg_mode,
                corrupted=config.assumed_corrupted,
                progress=self._secagg_progress,
            )
        else:
            self.agg = self.aggregator(
                self.loaded, self.spec, config.secagg_threshold, self.dropouts
            )
        dist = self.dist
        if self.agg.aggregate is not None:
            self.records = self.agg.aggregate.total_records
        else:
            self.records = round(float(np.sum(dist.noisy.counts))) if dist is not None else 0
        return f"{len(self.agg.survivors)} survivors, {self.records} records, " + (
            "exact" if dist is None else f"noisy ({config.noise})"
        )

    def _noisy_round(self, dplan: DistributedNoisePlan) -> Aggregation:
        if self.aggregator is not None:
            raise ParameterError(
                "aggregator", "None with a distributed noise model", type(self.aggregator).__name__
            )
        # Recorded before any client draws noise: a budget overflow releases nothing.
        self.ledger = dplan.ledger()
        self.ledger.record_all(dplan.events(seeded=self.config.noise_seed is not None))
        if self.noisy_aggregator is None:
            agg, self.dist = aggregate_with_noise(
                self.client_stats, dplan, self.dropouts, self.config.noise_seed
            )
            return agg
        delivered = self.noisy_aggregator(self.loaded, dplan, self.dropouts)
        self.dist = delivered.distributed
        return Aggregation(
            aggregate=None,  # the nodes' exact statistics never reach this process
            survivors=self.dist.survivors,
            dropouts={stage: tuple(ids) for stage, ids in delivered.dropouts.items()},
            threshold=dplan.threshold,
            bytes_per_client=self.dist.bytes_per_client,
        )

    def _secagg_progress(self, event: ProgressEvent) -> None:
        # The round's stages are steps of this job's "secagg" stage: clients done per stage.
        if self.clock is not None:
            self.clock.step("secagg", event.done, event.total, f"{event.stage} clients")

    def release_begin(self) -> str:
        """The target the release is planned for."""
        config = self.config
        return (
            f"planning (epsilon={config.epsilon:g}, delta={config.delta:g}, "
            f"{config.adjacency.value})"
        )

    def release(self) -> str:
        """``release``: the central noise, or the decoded distributed release."""
        if self.dplan is None or self.dist is None:
            assert self.agg.aggregate is not None  # noqa: S101 -- central: the server holds it
            self.rel = release(self.agg.aggregate, self.config, self.spec, self.plan)
        else:  # the clients' noise is already in the total: decoding was the release
            self.rel = LatentRelease(
                plan=self.dplan.claimed_plan(), ledger=self.ledger, noisy=self.dist.noisy
            )
        return (
            f"sigma_sum={self.rel.plan.noise_std_sum:.4g}, "
            f"sigma_second={self.rel.plan.noise_std_second_moment:.4g}"
        )

    def synthesis(self) -> str:
        """``synthesis``: class Gaussians from the release, sampled and decoded."""
        self.gaussians = fit_class_gaussians(self.rel.noisy)
        self.synthetic = synthesize(self.fitted, self.gaussians, self.config, self.device, offset=1)
        return f"{self.synthetic.labels.size} synthetic images"

    def train(self) -> str:
        """``train``: the downstream classifier on the synthetic data."""
        synthetic, test, config = self.synthetic, self.loaded.split.test, self.config
        seeds = [config.seed + k for k in range(config.repeats)]
        values = [
            train_evaluate(
                synthetic.images,
                synthetic.labels,
                test,
                config,
                self.device,
                self._step("train"),
                seed=seed,
            )
            for seed in seeds
        ]
        self.repeats = accuracy_spread(seeds, values)
        self.acc_synth = self.repeats["mean"]
        if config.repeats == 1:
            return f"accuracy {self.acc_synth:.4f} on real test data"
        return (
            f"accuracy {self.acc_synth:.4f} +- {self.repeats['std']:.4f} on real test data "
            f"({config.repeats} seeds, {self.repeats['min']:.4f}-{self.repeats['max']:.4f})"
        )

    def baselines(self) -> str:
        """``baselines``: real private data, and synthetic data without noise."""
        config, device, split = self.config, self.device, self.loaded.split
        private = split.private
        self.acc_real = train_evaluate(
            np.array(private.images), np.array(private.labels), split.test, config, device
        )
        assert self.agg.aggregate is not None  # noqa: S101 -- refused otherwise
        clean = fit_class_gaussians(nonprivate_release(self.agg.aggregate))
        clean_synthetic = synthesize(self.fitted, clean, config, device, offset=2)
        self.acc_nondp = train_evaluate(
            clean_synthetic.images, clean_synthetic.labels, split.test, config, device
        )
        return f"real {self.acc_real:.4f}, non-DP synthetic {self.acc_nondp:.4f}"

    def audit(self) -> str:
        """``audit``: membership inference, members vs held-out test records."""
        split, clients = self.loaded.split, self.loaded.clients
        member_parts = [np.asarray(clients[i], dtype=np.int64) for i in self.agg.survivors]
        members = np.sort(np.concatenate(member_parts)) if member_parts else np.zeros(0, np.int64)
        if self.latents is None:  # the statistics were computed elsewhere (the audit reads data)
            self.latents = encode(self.fitted, split.private.images, self.device)
        self.inputs = audit_inputs(
            self.fitted,
            split,
            members,
            self.latents,
            self.spec,
            self.rel.noisy,
            self.synthetic,
            self.device,
        )
        self.full_audit, self.summary = audit(self.inputs, self.config, self.rel.plan)
        if isinstance(self.summary, AuditSkipped):
            self.inputs = None
            return f"skipped: {self.summary.reason}"
        top = self.full_audit.best()
        return (
            f"{len(self.full_audit.results)} attacks, best {top.attack.value} "
            f"AUC {top.metrics.auc.estimate:.3f}"
        )

    def result(self, clock: StageClock) -> PipelineResult:
        """The run's result, once every stage ran."""
        split = self.loaded.split
        return PipelineResult(
            report=self._report(clock),
            ledger=self.rel.ledger,
            split=split,
            client_indices=self.loaded.clients,
            codec=self.fitted,
            aggregate=self.agg.aggregate,
            release=self.rel.noisy,
            gaussians=self.gaussians,
            synthetic_images=self.synthetic.images,
            synthetic_labels=self.synthetic.labels,
            synthetic_latents=self.synthetic.latents,
            audit=self.full_audit,
            audit_inputs=self.inputs,
        )

    def _report(self, clock: StageClock) -> PipelineReport:
        config, spec, plan, agg, dist = self.config, self.spec, self.rel.plan, self.agg, self.dist
        split = self.loaded.split
        noise_seconds = (
            {"client_noise_mean": float(np.mean(dist.noise_seconds))}
            if dist is not None and dist.noise_seconds
            else {}
        )
        return PipelineReport(
            config=config.to_dict(),
            accuracy_synthetic=self.acc_synth,
            accuracy_real=self.acc_real,
            accuracy_nondp_synthetic=self.acc_nondp,
            epsilon=plan.epsilon,
            # The delta the guarantee is stated at: the configured target (the plan's
            # exact delta of (mu, epsilon) is at most it, and prints as float drift).
            delta=plan.delta if plan.target_delta is None else plan.target_delta,
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
            empty_clients=self.loaded.empty_clients,
            dropped_clients={stage.name: list(ids) for stage, ids in agg.dropouts.items()},
            records_public=len(split.public),
            records_private=len(split.private),
            records_aggregated=self.records,
            records_test=len(split.test),
            seconds=dict(clock.seconds) | noise_seconds,
            ledger=json.loads(self.rel.ledger.to_json()),
            audit=self.summary,
            secagg_threshold=agg.threshold,
            noisy_class_counts=(
                None
                if plan.noise_std_count == 0
                else tuple(float(c) for c in np.asarray(self.rel.noisy.counts, dtype=np.float64))
            ),
            distributed=(
                None if self.dplan is None or dist is None else distributed_facts(self.dplan, dist)
            ),
            provenance=make_provenance(config.to_dict()),
            accuracy_repeats=self.repeats,
            num_threads_used=clock.num_threads,
        )


def _data_begin(job: LatentJob) -> str:
    return f"loading {job.config.dataset!r}"


def _codec_begin(job: LatentJob) -> str:
    return f"fitting {job.config.codec!r} on the public split"


#: The latent job's stages, in order (see the module docstring).
STAGES: tuple[JobStage[LatentJob], ...] = (
    JobStage("data", LatentJob.data, _data_begin),
    JobStage("codec", LatentJob.codec, _codec_begin),
    JobStage(
        "clients",
        LatentJob.clients,
        lambda job: "encoding and computing exact statistics",
        lambda job: job.in_process,
    ),
    JobStage("secagg", LatentJob.secagg, LatentJob.secagg_begin),
    JobStage("release", LatentJob.release, LatentJob.release_begin),
    JobStage(
        "synthesis",
        LatentJob.synthesis,
        lambda job: "fitting class Gaussians, sampling, decoding",
    ),
    JobStage("train", LatentJob.train, lambda job: "training the classifier on synthetic data"),
    JobStage(
        "baselines",
        LatentJob.baselines,
        lambda job: "real private data, and noiseless synthetic data",
        lambda job: job.config.baselines,
    ),
    JobStage(
        "audit",
        LatentJob.audit,
        lambda job: "membership inference: members vs held-out test records",
        lambda job: job.config.audit,
    ),
)


def _run(
    config: PipelineConfig,
    aggregator: Aggregator | None,
    noisy_aggregator: NoisyAggregator | None,
    aggregator_mode: str,
    clock: StageClock,
) -> PipelineResult:
    job = LatentJob(config, aggregator, noisy_aggregator, aggregator_mode)
    job.clock = clock
    run_stages(job, STAGES, clock)
    return job.result(clock)


def _named(dropouts: Mapping[Stage, list[int]]) -> str:
    named = (
        f"{s.name.lower().replace('_', '-')}: {', '.join(map(str, ids))}"
        for s, ids in dropouts.items()
    )
    return "; ".join(named) or "none"
