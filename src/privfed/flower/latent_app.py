"""The latent-statistic job (``privfed run --engine latent``) as a Flower app.

Each node loads the dataset, takes its own partition (``partition-id`` of its
node config), encodes it with the public codec (fitted on the public split,
the same on every node) and computes its exact statistics
(:func:`privfed.engines.latent.job.client_statistics`); the statistics leave
the node only masked, through :class:`~privfed.flower.SecAggWorkflow`.  The
server runs :func:`privfed.engines.latent.job.run_pipeline` with that
aggregation in place of the in-process one -- the same release (plan, noise,
ledger), synthesis, training, evaluation and artefacts as ``privfed run``.

Distributed noise (``noise = "distributed-gaussian"`` or
``"distributed-skellam"``): the noise plan is a function of public quantities
only (the run config and the codec fitted on the public split), so the
server and every node compute it from the run config; a node checks that the
round's secure-aggregation config (threshold, clients, length, noise layers)
is the one its plan is calibrated for, adds its own noise share to its exact
ring vector before masking (for layered Skellam, from layer seeds it also
Shamir-shares), and the server decodes the noisy total with
:func:`~privfed.engines.latent.distributed.decode_noisy_total` after
subtracting the layers the reveal rule released.  No node learns another's
noise or statistics; the server never holds a noiseless total.  With
``noise-seed`` >= 0 every node derives its noise from that public seed (the
in-process job's derivation: the same run gives the same noisy total, and the
ledger records the release as seeded); leave it -1 in a deployment.

Run config (``[tool.flwr.app.config]`` or ``flwr run ... --run-config``):
the keys of :func:`pipeline_config` (``epsilon``, ``delta``, ``codec``,
``num-clients``, ``noise-seed`` ...), plus ``threshold`` (0: the job's
strict majority), ``timeout`` (stage timeout, s), ``wait-s`` (how long to
wait for nodes), ``output-dir``, ``overwrite``, ``release-only`` and
``scripted-dropouts`` (nodes named by the job's dropout plan drop out for
real, so a run reproduces ``privfed run``; set false in a deployment).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import ConfigRecord, Context
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from privfed.errors import ParameterError, ProtocolAbort
from privfed.flower.client import JournalFn, add_secagg_handlers
from privfed.flower.server import SecAggRoundResult, SecAggWorkflow, hello, wait_for_nodes
from privfed.secagg import GraphMode, SecAggConfig, Stage

__all__ = [
    "FLOWER_EVALUATION_FILE",
    "check_round_config",
    "client_app",
    "latent_client_app",
    "latent_main",
    "latent_server_app",
    "node_inputs",
    "node_ring_vector",
    "pipeline_config",
    "server_app",
]

_LOG = logging.getLogger("privfed.flower")

#: Evaluation file the Flower server adds next to ``privfed run``'s artefacts:
#: who survived, the transport's costs and a digest of the exact aggregate
#: (computed from private data without noise: not part of the release).
FLOWER_EVALUATION_FILE = "flower_evaluation.json"


def pipeline_config(run_config: Mapping[str, Any]) -> Any:
    """The :class:`~privfed.engines.latent.job.PipelineConfig` a run config names.

    Keys are the dashed field names (``num-clients``, ``noise-seed`` ...),
    every field of the config; missing ones take the job's defaults.
    ``noise-seed`` and ``clip-norm``
    below 0, and ``alpha`` of 0, stand for ``None`` (TOML has no null).

    Raises:
        ParameterError: A value outside its domain (the config's own checks).
    """
    import dataclasses

    from privfed.engines.latent.job import PipelineConfig

    fields: dict[str, Any] = {}
    for field in dataclasses.fields(PipelineConfig):
        key = field.name.replace("_", "-")
        if key not in run_config or key in _NOT_FROM_RUN_CONFIG:
            continue
        value = run_config[key]
        default = field.default
        negative = isinstance(value, (int, float)) and value < 0
        if (field.name in _OPTIONAL_NUMBERS and negative) or (field.name == "alpha" and value == 0):
            value = None
        elif isinstance(default, bool):
            value = bool(value)
        elif isinstance(default, float) or field.name in _OPTIONAL_FLOATS:
            value = float(value)
        elif isinstance(default, int) or field.name == "noise_seed":
            value = int(value)
        fields[field.name] = value
    return PipelineConfig(**fields)


# TOML has no null: these take a negative number for None.
_OPTIONAL_NUMBERS = frozenset({"noise_seed", "clip_norm"})
_OPTIONAL_FLOATS = frozenset({"clip_norm", "alpha"})
# Run-config keys of the Flower app that are not the job's (the node's device is its own).
_NOT_FROM_RUN_CONFIG = frozenset({"device", "num-threads"})


# -- the node ------------------------------------------------------------------------------

_CACHE: dict[tuple[str, int], tuple[npt.NDArray[np.uint64], Any]] = {}
# The run's (spec, plan): public, the same for every node of a process (simulations).
_PLANS: dict[str, tuple[Any, Any]] = {}


def node_ring_vector(config: Any, partition_id: int) -> npt.NDArray[np.uint64]:
    """One node's exact statistics as a ring vector (the job's own client stages).

    With distributed noise, on the plan's grid (:func:`node_inputs`); still exact.

    Args:
        config: The run's PipelineConfig.
        partition_id: The node's partition, in ``[0, config.num_clients)``.

    Raises:
        ParameterError: ``partition_id`` outside the partitions.
    """
    return node_inputs(config, partition_id)[0]


def node_inputs(config: Any, partition_id: int) -> tuple[npt.NDArray[np.uint64], Any]:
    """One node's exact ring vector and the run's distributed noise plan (``None``: central).

    The plan comes from :func:`privfed.engines.latent.job.run_spec`: public
    quantities only, the same on the server and on every node.

    Raises:
        ParameterError: ``partition_id`` outside the partitions.
    """
    import torch

    from privfed.engines.latent.job import (
        client_statistics,
        encode,
        fit_codec,
        load_data,
        run_spec,
    )

    key = (json.dumps(config.to_dict(), sort_keys=True), partition_id)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    if not 0 <= partition_id < config.num_clients:
        raise ParameterError("partition-id", f"an int in [0, {config.num_clients})", partition_id)
    device = torch.device(config.device)
    data = load_data(config)
    split = data.split
    codec = fit_codec(config, split.public)
    if key[0] not in _PLANS:
        _PLANS.clear()
        _PLANS[key[0]] = run_spec(config, codec, num_classes=data.num_classes)
    spec, plan = _PLANS[key[0]]
    idx = data.clients[partition_id]
    latents = encode(codec, split.private.images[idx], device)
    stats = client_statistics(latents, split.private.labels[idx], spec, device)
    vector = np.ascontiguousarray(stats.to_ring_vector(), dtype=np.uint64)
    _CACHE.clear()  # one job per process at a time
    _CACHE[key] = (vector, plan)
    return vector, plan


class _RunConfig:
    """The run config: Flower's (``Context.run_config``) under the app's own overrides."""

    def __init__(self, overrides: Mapping[str, Any] | None) -> None:
        self.overrides = dict(overrides or {})

    def of(self, context: Context) -> dict[str, Any]:
        return {**dict(context.run_config), **self.overrides}


class _ScriptedDropouts(_RunConfig):
    """A Mod: raises at the stage where the job's dropout plan says this node drops out."""

    def __call__(self, message: Any, context: Context, call_next: Any) -> Any:
        from privfed.engines.latent.job import dropout_plan
        from privfed.flower import _wire

        stage = _wire.STAGE_OF_TYPE.get(message.metadata.message_type)
        run = self.of(context)
        if stage is not None and bool(run.get("scripted-dropouts", True)):
            pid = int(context.node_config.get("partition-id", -1))
            for when, who in dropout_plan(pipeline_config(run)).items():
                if pid in who and stage >= when:
                    raise RuntimeError(f"scripted dropout of partition {pid} at {when.name}")
        return call_next(message, context)


#: Where a node keeps its fresh layer seeds between the advertise and masked-input stages.
_LAYER_SEEDS_KEY = "privfed_noise_layers"


class _LayerSeeds(_RunConfig):
    """The node's layer seeds (a :data:`~privfed.flower.client.NoiseSeedsFn`).

    Seeded runs derive them from the public ``noise-seed`` exactly as the
    in-process job does; otherwise they are fresh from the OS CSPRNG and kept
    in the node's ``Context.state`` (next to its protocol state, which holds
    them too) for the masked-input stage of the same session.
    """

    def __call__(self, context: Context, config: SecAggConfig, client_id: int) -> list[bytes]:
        from privfed.engines.latent.distributed import client_noise_seeds

        run = pipeline_config(self.of(context))
        pid = int(context.node_config["partition-id"])
        if run.noise_seed is not None:
            return client_noise_seeds(run.noise_seed, pid, config.noise_layers)[1]
        record = context.state.config_records.get(_LAYER_SEEDS_KEY)
        if record is not None and record.get("session") == config.session_id:
            stored = record.get("seeds")
            if isinstance(stored, list) and len(stored) == config.noise_layers:
                return [s for s in stored if isinstance(s, bytes)]
        seeds = client_noise_seeds(None, pid, config.noise_layers)[1]
        context.state[_LAYER_SEEDS_KEY] = ConfigRecord(
            {"session": config.session_id, "seeds": list(seeds)}
        )
        return seeds


def check_round_config(config: SecAggConfig, plan: Any) -> None:
    """A node's check that the round is the one its noise plan is calibrated for.

    The calibration assumes ``n`` clients, threshold ``t`` over the complete
    graph and ``L`` layers; a server asking for anything else (a lower
    threshold would lower the honest contributors n_min) is refused before
    the node's input leaves.

    Raises:
        ProtocolAbort: The round's config does not match the plan.
    """
    wanted = {
        "clients": plan.num_clients,
        "threshold": plan.threshold,
        "vector_length": plan.spec.num_values,
        "noise_layers": plan.layers,
        "graph": GraphMode.COMPLETE,
    }
    got = {
        "clients": len(config.client_ids),
        "threshold": config.threshold,
        "vector_length": config.vector_length,
        "noise_layers": config.noise_layers,
        "graph": config.graph,
    }
    wrong = sorted(k for k in wanted if wanted[k] != got[k])
    if wrong:
        raise ProtocolAbort(
            "the round's secure-aggregation config does not match this node's noise plan: "
            + ", ".join(f"{k} {got[k]} (plan: {wanted[k]})" for k in wrong)
        )


class _Values(_RunConfig):
    def __init__(self, overrides: Mapping[str, Any] | None, seeds: _LayerSeeds) -> None:
        super().__init__(overrides)
        self.seeds = seeds

    def __call__(self, context: Context, config: SecAggConfig) -> npt.NDArray[np.uint64]:
        from privfed.engines.latent.distributed import add_client_noise, client_noise_seeds

        pid = int(context.node_config["partition-id"])
        run = pipeline_config(self.of(context))
        vector, plan = node_inputs(run, pid)
        if plan is None:
            return vector
        check_round_config(config, plan)
        own, _ = client_noise_seeds(run.noise_seed, pid, 0)
        layers = self.seeds(context, config, pid + 1) if plan.layers else []
        # The node's noise share, added to its exact vector before masking.
        return add_client_noise(vector, plan, seed=own, layer_seeds=layers)


def latent_client_app(
    run_config: Mapping[str, Any] | None = None, *, journal: JournalFn | None = None
) -> ClientApp:
    """The job's ClientApp (secure-aggregation handlers fed by the node's statistics).

    Args:
        run_config: Overrides of Flower's run config (for :func:`privfed.flower.run_simulation`,
            whose nodes get no run config of their own).
        journal: The nodes' reveal journals (default:
            :func:`privfed.flower.client.default_journal`).
    """
    mods: list[Any] = [_ScriptedDropouts(run_config)]
    seeds = _LayerSeeds(run_config)
    return add_secagg_handlers(
        ClientApp(mods=mods), _Values(run_config, seeds), journal=journal, noise_seeds=seeds
    )


# -- the server ------------------------------------------------------------------------------


class _FlowerAggregator:
    """The job's ``secagg`` stage over Flower (a :data:`~privfed.engines.latent.job.Aggregator`)."""

    def __init__(
        self,
        grid: Grid,
        partitions: Mapping[int, int],
        *,
        threshold: int,
        timeout: float,
        seeded: bool = False,
    ) -> None:
        self.grid = grid
        self.seeded = seeded
        self.partitions = dict(partitions)  # node id -> partition id
        self.threshold = threshold
        self.timeout = timeout
        self.round: SecAggRoundResult | None = None

    def __call__(self, data: Any, spec: Any, threshold: int, dropouts: Any) -> Any:
        from privfed.engines.latent.job import Aggregation
        from privfed.engines.latent.statistics import LatentStatistics

        t = self.threshold or threshold
        result = self._round(t, spec.num_values, 0)
        return Aggregation(
            aggregate=LatentStatistics.from_ring_vector(result.total, spec),
            survivors=tuple(cid - 1 for cid in result.survivors),
            dropouts=self._observed(result, len(data.clients)),
            threshold=t,
            bytes_per_client=self._bytes(result),
        )

    def noisy(self, data: Any, plan: Any, dropouts: Any) -> Any:
        """The distributed round (a :data:`~privfed.engines.latent.job.NoisyAggregator`).

        The nodes add their noise before masking; the server unmasks the noisy
        total, subtracts the revealed excess layers and decodes it
        (:func:`~privfed.engines.latent.distributed.decode_noisy_total`).
        """
        from privfed.engines.latent.distributed import DistributedAggregation, decode_noisy_total
        from privfed.engines.latent.job import NoisyRound

        if self.threshold not in (0, plan.threshold):
            raise ParameterError(
                "threshold", f"0 or {plan.threshold} (the noise is calibrated for it)",
                self.threshold,
            )  # fmt: skip
        result = self._round(plan.threshold, plan.spec.num_values, plan.layers)
        noisy = decode_noisy_total(
            result.total,
            plan,
            survivors=result.survivors,
            revealed=result.revealed_noise_seeds if plan.layers else None,
            seeded=self.seeded,
        )
        dist = DistributedAggregation(
            noisy=noisy,
            survivors=tuple(cid - 1 for cid in result.survivors),
            server_total=result.total,
            bytes_per_client=self._bytes(result),
            noise_seconds=(),  # measured on the nodes, not reported to the server
            secagg_client_seconds=0.0,
        )
        return NoisyRound(distributed=dist, dropouts=self._observed(result, len(data.clients)))

    def _round(self, threshold: int, length: int, layers: int) -> SecAggRoundResult:
        workflow = SecAggWorkflow(
            threshold=threshold,
            vector_length=length,
            timeout=self.timeout,
            config_fields={"noise_layers": layers} if layers else None,
        )
        mapping = {node: pid + 1 for node, pid in self.partitions.items()}
        result = workflow.run(self.grid, mapping)
        self.round = result
        return result

    def _observed(
        self, result: SecAggRoundResult, num_clients: int
    ) -> dict[Stage, tuple[int, ...]]:
        observed = {
            stage: tuple(sorted(cid - 1 for cid in ids))
            for stage, ids in result.dropped.items()
            if ids
        }
        # Clients that never reached the round (no hello) dropped before it.
        missing = sorted(set(range(num_clients)) - set(self.partitions.values()))
        if missing:
            before = observed.get(Stage.ADVERTISE_KEYS, ())
            observed[Stage.ADVERTISE_KEYS] = tuple(sorted({*before, *missing}))
        return observed

    @staticmethod
    def _bytes(result: SecAggRoundResult) -> float:
        received = result.bytes_received
        finished = [received[c] for c in result.survivors if c in received]
        return float(np.mean(finished)) if finished else 0.0


def _write_flower_evaluation(out: Path, agg: _FlowerAggregator, result: Any) -> None:
    rnd = agg.round
    if rnd is None:  # pragma: no cover -- the aggregator ran
        return
    total = np.ascontiguousarray(rnd.total, dtype="<u8")
    central = result.report.distributed is None
    doc = {
        "kind": "evaluation: computed from private data without noise; not part of the release"
        if central
        else "evaluation: the round's transport facts; the unmasked total already carries "
        "the clients' noise",
        "transport": "flower",
        "nodes": len(rnd.clients),
        "survivors": [c - 1 for c in rnd.survivors],
        "dropped": {s.name: [c - 1 for c in ids] for s, ids in rnd.dropped.items()},
        "refused": {str(c - 1): why for c, why in rnd.refused.items()},
        "stage_seconds": {s.name: v for s, v in rnd.seconds.items()},
        "server_seconds": {s.name: v for s, v in rnd.server_seconds.items()},
        "aggregate_ring_sha256": hashlib.sha256(total.tobytes()).hexdigest(),
    }
    (out / FLOWER_EVALUATION_FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def latent_main(
    grid: Grid, run: Mapping[str, Any], *, on_result: Callable[[Any], None] | None = None
) -> Any:
    """The job's server side inside a ServerApp's ``main``; returns the PipelineResult.

    Args:
        grid: The ServerApp's grid.
        run: The run config (see the module docstring).
        on_result: Called with the result before it is returned.

    Raises:
        ProtocolAbort: Too few nodes, or secure aggregation could not complete.
    """
    from privfed.engines.job import check_output_dir
    from privfed.engines.latent.distributed import NoiseModel
    from privfed.engines.latent.job import run_pipeline, threshold_for

    config = pipeline_config(run)
    distributed = config.noise is not NoiseModel.CENTRAL
    threshold = int(run.get("threshold", 0))
    if distributed and threshold not in (0, threshold_for(config.num_clients)):
        # The clients' noise is calibrated for the job's threshold: fail before waiting.
        raise ParameterError(
            "threshold",
            f"0 or {threshold_for(config.num_clients)} with distributed noise",
            threshold,
        )
    output = str(run.get("output-dir", "runs/flower-latent"))
    overwrite = bool(run.get("overwrite", False))
    release_only = bool(run.get("release-only", False))
    check_output_dir(output, overwrite=overwrite)
    wait = float(run.get("wait-s", 300.0))
    nodes = wait_for_nodes(grid, config.num_clients, timeout=wait)
    partitions = hello(grid, nodes, timeout=wait)
    if not all(0 <= p < config.num_clients for p in partitions.values()):
        raise ProtocolAbort("nodes declare partitions outside [0, num-clients)")
    aggregator = _FlowerAggregator(
        grid,
        partitions,
        threshold=threshold,
        timeout=float(run.get("timeout", 120.0)),
        seeded=config.noise_seed is not None,
    )
    if distributed:
        result = run_pipeline(config, noisy_aggregator=aggregator.noisy)
    else:
        result = run_pipeline(config, aggregator=aggregator)
    result.write(output, overwrite=overwrite, release_only=release_only)
    if not release_only:
        _write_flower_evaluation(Path(output), aggregator, result)
    _LOG.info("latent job over Flower: artefacts in %s", output)
    if on_result is not None:
        on_result(result)
    return result


def latent_server_app(
    run_config: Mapping[str, Any] | None = None,
    *,
    on_result: Callable[[Any], None] | None = None,
) -> ServerApp:
    """The job's ServerApp: waits for ``num-clients`` nodes, runs the job, writes its artefacts.

    Args:
        run_config: Overrides of Flower's run config.
        on_result: Called with the :class:`~privfed.engines.latent.job.PipelineResult`
            (in the ServerApp's process).
    """
    app = ServerApp()
    source = _RunConfig(run_config)

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        latent_main(grid, source.of(context), on_result=on_result)

    return app


#: Module-level apps for ``[tool.flwr.app.components]``.
server_app = latent_server_app()
client_app = latent_client_app()
