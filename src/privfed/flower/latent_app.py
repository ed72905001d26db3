"""The latent-statistic job (``privfed run --engine latent``) as a Flower app.

Each node loads the dataset, takes its own partition (``partition-id`` of its
node config), encodes it with the public codec (fitted on the public split,
the same on every node) and computes its exact statistics
(:func:`privfed.engines.latent.stages.client_statistics`); the statistics leave
the node only masked, through :class:`~privfed.flower.SecAggRound`.  The
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

Active mode (``secagg-mode = "active"``): the run config's ``secagg-registry``
names the server's copy of the integrator's registry (a file on the
ServerApp's machine, :class:`~privfed.secagg.IdentityRegistry` JSON) which
enrols partition ``p`` as client id ``p + 1``, and ``assumed-corrupted`` is
n_C.  The round's keys are signed and the ConsistencyCheck stage runs; every
node checks the round against its own policy (:mod:`privfed.flower.policy`:
its node config's identity key, registry, minimum threshold and n_C) and
refuses a registry other than its own, a client id that is not its identity,
or a weaker round.

Run config (``[tool.flwr.app.config]`` or ``flwr run ... --run-config``):
the keys of :func:`pipeline_config` (``epsilon``, ``delta``, ``codec``,
``num-clients``, ``noise-seed``, ``secagg-mode`` ...), plus ``secagg-registry``
(active mode), ``threshold`` (0: the job's
strict majority), ``timeout`` (stage timeout, s), ``wait-s`` (how long to
wait for nodes), ``output-dir``, ``overwrite``, ``release-only`` and
``scripted-dropouts`` (nodes named by the job's dropout plan drop out for
real, so a run reproduces ``privfed run``; set false in a deployment).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from privfed._atomic import atomic_write_text
from privfed.errors import DeclarationError, ParameterError, ProtocolAbort
from privfed.flower._log import LOG
from privfed.flower.client import JournalFn
from privfed.flower.declaration import NoiseDeclaration
from privfed.flower.latent_node import (
    _RunConfig,
    check_round_config,
    declaration_for,
    node_inputs,
    node_ring_vector,
    pipeline_config,
)
from privfed.flower.server import (
    SecAggRound,
    SecAggRoundResult,
    active_mode_fields,
    quiet_privfed_errors,
    wait_for_federation,
)
from privfed.secagg import ClientIds, Stage
from privfed.secagg.threshold import requested_threshold

__all__ = [
    "FLOWER_EVALUATION_FILE",
    "active_fields",
    "check_declarations",
    "check_round_config",
    "client_app",
    "declaration_for",
    "latent_client_app",
    "latent_main",
    "latent_server_app",
    "node_inputs",
    "node_ring_vector",
    "pipeline_config",
    "server_app",
]


#: Evaluation file the Flower server adds next to ``privfed run``'s artefacts:
#: who survived, the transport's costs and a digest of the exact aggregate
#: (computed from private data without noise: not part of the release).
FLOWER_EVALUATION_FILE = "flower_evaluation.json"


def latent_client_app(
    run_config: Mapping[str, Any] | None = None, *, journal: JournalFn | None = None
) -> ClientApp:
    """The latent job's ClientApp: privfed's one ClientApp (:mod:`privfed.flower.node_app`)
    with ``job = "latent"``.

    Args:
        run_config: Overrides of Flower's run config (for :func:`privfed.flower.run_simulation`,
            whose nodes get no run config of their own).
        journal: The nodes' reveal journals (default:
            :func:`privfed.flower.client.default_journal`).
    """
    from privfed.flower.node_app import make_client_app

    return make_client_app({"job": "latent", **dict(run_config or {})}, journal=journal)


# -- the server ------------------------------------------------------------------------------


class _FlowerAggregator:
    """The job's ``secagg`` stage over Flower (a :data:`~privfed.engines.latent.job.Aggregator`)."""

    def __init__(
        self,
        grid: Grid,
        partitions: Mapping[int, int],
        *,
        threshold: int | None,
        timeout: float,
        seeded: bool = False,
        noise_model: str = "central",
        num_clients: int | None = None,
        secagg_fields: Mapping[str, Any] | None = None,
    ) -> None:
        self.grid = grid
        #: Further SecAggConfig fields of the round (the active mode's).
        self.secagg_fields = dict(secagg_fields or {})
        self.num_clients = len(partitions) if num_clients is None else num_clients
        self.seeded = seeded
        self.noise_model = noise_model
        self.partitions = dict(partitions)  # node id -> partition id
        self.ids = ClientIds.from_partitions(self.partitions.values(), self.num_clients)
        #: The run config's threshold (``None``: the job's).
        self.threshold = requested_threshold(threshold)
        self.timeout = timeout
        self.round: SecAggRoundResult | None = None

    def __call__(self, data: Any, spec: Any, threshold: int, dropouts: Any) -> Any:
        from privfed.engines.latent.job import Aggregation
        from privfed.engines.latent.statistics import LatentStatistics

        t = threshold if self.threshold is None else self.threshold
        expected = NoiseDeclaration.none(self.noise_model)
        result = self._round(t, spec.num_values, 0, expected)
        check_declarations(result, expected)
        return Aggregation(
            aggregate=LatentStatistics.from_ring_vector(result.total, spec),
            survivors=self.ids.partition_ids(result.survivors),
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
        from privfed.engines.latent.distributed import decode_noisy_total
        from privfed.engines.latent.distributed_round import DistributedAggregation
        from privfed.engines.latent.job import NoisyRound

        if self.threshold not in (None, plan.threshold):
            raise ParameterError(
                "threshold", f"0 or {plan.threshold} (the noise is calibrated for it)",
                self.threshold,
            )  # fmt: skip
        expected = declaration_for(plan, seeded=self.seeded)
        result = self._round(plan.threshold, plan.spec.num_values, plan.layers, expected)
        # The release claims the plan's noise: every survivor must have declared it.
        check_declarations(result, expected)
        noisy = decode_noisy_total(
            result.total,
            plan,
            survivors=result.survivors,
            revealed=result.revealed_noise_seeds if plan.layers else None,
            seeded=self.seeded,
        )
        dist = DistributedAggregation(
            noisy=noisy,
            survivors=self.ids.partition_ids(result.survivors),
            server_total=result.total,
            bytes_per_client=self._bytes(result),
            noise_seconds=(),  # measured on the nodes, not reported to the server
            secagg_client_seconds=0.0,
        )
        return NoisyRound(distributed=dist, dropouts=self._observed(result, len(data.clients)))

    def _round(
        self, threshold: int, length: int, layers: int, expected: NoiseDeclaration
    ) -> SecAggRoundResult:
        fields = dict(self.secagg_fields)
        if layers:
            fields["noise_layers"] = layers
        workflow = SecAggRound(
            threshold=threshold,
            vector_length=length,
            timeout=self.timeout,
            config_fields=fields or None,
            expected_input=expected,
        )
        mapping = self.ids.of_nodes(self.partitions)
        # Partitions without a node are still clients of the round (the nodes' noise plan
        # counts n of them): dropouts before they advertise.
        absent = set(self.ids.client_ids) - set(mapping.values())
        result = workflow.run(self.grid, mapping, absent=absent)
        self.round = result
        return result

    def _observed(
        self, result: SecAggRoundResult, num_clients: int
    ) -> dict[Stage, tuple[int, ...]]:
        observed = {
            stage: tuple(sorted(self.ids.partition_ids(ids)))
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


def check_declarations(result: SecAggRoundResult, expected: NoiseDeclaration) -> None:
    """Refuse a release unless every survivor declared exactly the ``expected`` noise.

    The workflow already refuses mismatching masked inputs; this is the
    release's own check on the round it rests on (a release never claims
    noise that a contributor did not declare).

    Raises:
        DeclarationError: A survivor's declaration is missing or differs.
    """
    problems = []
    ids = ClientIds.any()
    for cid in result.survivors:
        declared = result.declarations.get(cid)
        pid = ids.partition_id(cid)
        if declared is None:
            problems.append(f"client {pid} declared nothing")
        elif declared != expected:
            problems.append(f"client {pid}: " + "; ".join(declared.differences(expected)))
    if problems:
        raise DeclarationError(
            "refusing to write a DP release: the noise of its contributors is not the "
            "plan's (" + ", ".join(problems) + ")"
        )


def _write_flower_evaluation(out: Path, agg: _FlowerAggregator, result: Any) -> None:
    rnd = agg.round
    if rnd is None:  # pragma: no cover -- the aggregator ran
        return
    ids = agg.ids
    total = np.ascontiguousarray(rnd.total, dtype="<u8")
    central = result.report.distributed is None
    doc = {
        "kind": "evaluation: computed from private data without noise; not part of the release"
        if central
        else "evaluation: the round's transport facts; the unmasked total already carries "
        "the clients' noise",
        "transport": "flower",
        "nodes": len(rnd.clients),
        "survivors": list(ids.partition_ids(rnd.survivors)),
        "dropped": {s.name: list(ids.partition_ids(cids)) for s, cids in rnd.dropped.items()},
        "refused": {str(ids.partition_id(c)): why for c, why in rnd.refused.items()},
        "stage_seconds": {s.name: v for s, v in rnd.seconds.items()},
        "server_seconds": {s.name: v for s, v in rnd.server_seconds.items()},
        "aggregate_ring_sha256": hashlib.sha256(total.tobytes()).hexdigest(),
        # What each contributing node declared it added (the server refused any other).
        "declarations": {
            str(ids.partition_id(c)): None if d is None else d.to_dict()
            for c, d in rnd.declarations.items()
        },
    }
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    atomic_write_text(out / FLOWER_EVALUATION_FILE, text)


def active_fields(run: Mapping[str, Any], config: Any) -> dict[str, Any]:
    """The round's active-mode config fields (``{}`` in semi-honest mode), checked before waiting.

    See :func:`~privfed.flower.server.active_mode_fields` (``secagg-registry``,
    n_C from ``assumed-corrupted``).

    Raises:
        ParameterError: Active mode without a ``secagg-registry`` file, or with
            one that does not enrol ids ``1..num-clients`` or assumes more
            corrupted clients than ``assumed-corrupted``.
    """
    return active_mode_fields(
        config.secagg_mode,
        run.get("secagg-registry"),
        num_clients=config.num_clients,
        corrupted=config.assumed_corrupted,
    )


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
    from privfed.engines.latent.job import run_pipeline

    config = pipeline_config(run)
    distributed = config.noise is not NoiseModel.CENTRAL
    threshold = requested_threshold(run.get("threshold"))
    if distributed and threshold not in (None, config.secagg_threshold):
        # The clients' noise is calibrated for the job's threshold: fail before waiting.
        raise ParameterError(
            "threshold", f"0 or {config.secagg_threshold} with distributed noise", threshold
        )
    if threshold is not None:  # every node refuses a round outside the policy: fail first
        config.threshold_policy.check(threshold, config.num_clients)
    secagg_fields = active_fields(run, config)
    if distributed and config.baselines:
        raise ParameterError(
            "baselines", "false with distributed noise (the noiseless baseline needs the "
            "exact total, which the server never holds)", config.baselines,
        )  # fmt: skip
    output = str(run.get("output-dir", "runs/flower-latent"))
    overwrite = bool(run.get("overwrite", False))
    release_only = bool(run.get("release-only", False))
    check_output_dir(output, overwrite=overwrite)
    # Active mode: only a node signing as registry id partition + 1 keeps its partition.
    registry = secagg_fields.get("identities")
    # A node declaring a partition-id outside [0, num-clients) is left out there.
    partitions = wait_for_federation(grid, run, config.num_clients, registry=registry)
    if len(partitions) < 2:
        raise ProtocolAbort(
            f"only {len(partitions)} node(s) declare a partition-id in [0, {config.num_clients})"
        )
    aggregator = _FlowerAggregator(
        grid,
        partitions,
        threshold=threshold,
        timeout=float(run.get("timeout", 120.0)),
        seeded=config.noise_seed is not None,
        noise_model=str(config.noise),
        num_clients=config.num_clients,
        secagg_fields=secagg_fields,
    )
    mode = config.secagg_mode
    if distributed:
        result = run_pipeline(config, noisy_aggregator=aggregator.noisy, aggregator_mode=mode)
    else:
        result = run_pipeline(config, aggregator=aggregator, aggregator_mode=mode)
    result.write(output, overwrite=overwrite, release_only=release_only)
    if not release_only:
        _write_flower_evaluation(Path(output), aggregator, result)
    LOG.info("latent job over Flower: artefacts in %s", output)
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
        on_result: Called with the :class:`~privfed.engines.latent.report.PipelineResult`
            (in the ServerApp's process).
    """
    app = ServerApp()
    source = _RunConfig(run_config)

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        quiet_privfed_errors()
        latent_main(grid, source.of(context), on_result=on_result)

    return app


#: Module-level apps for ``[tool.flwr.app.components]``.
server_app = latent_server_app()
client_app = latent_client_app()
