"""The server side of a training round: privfed's secure aggregation under any Flower strategy.

Two entry points, one protocol (the stages of :class:`SecAggWorkflow`):

* **Legacy strategies** (``flwr.server.strategy.FedAvg`` ... inside
  ``DefaultWorkflow``): :class:`SecAggWorkflow` is a ``fit_workflow``,
  with the arguments of Flower's ``SecAggPlusWorkflow``::

      workflow = DefaultWorkflow(
          fit_workflow=SecAggWorkflow(num_shares=3, reconstruction_threshold=2)
      )

* **Message-API strategies** (``flwr.serverapp.strategy.FedAvg``, ``FedProx``,
  ``FedAdam`` ... with ``strategy.start(grid, ...)``): :class:`SecAggGrid`
  wraps the ServerApp's grid; its ``send_and_receive`` of the strategy's train
  messages runs the protocol and returns ONE reply, the securely aggregated
  weighted average with the total weight under ``weighted_by_key``::

      strategy.start(grid=SecAggGrid(grid, workflow), initial_arrays=arrays)

  Every other message (evaluate, query) passes through.  The strategy's own
  ``aggregate_train`` averages that one reply, i.e. returns it: strategies
  that average (FedAvg, FedProx, FedAvgM, FedAdam/FedYogi/FedAdagrad, the DP
  wrappers with server-side noise) work unchanged; those that need each
  node's update (Krum, Bulyan, FedMedian, FedTrimmedAvg) cannot, by design.

What the strategy receives: one result (a ``FitRes`` with the aggregate as
parameters, ``num_examples`` = the sum of the capped weights and the weighted
mean of each numeric train metric; or one Message with the same) -- never a
node's example count, metrics or update.  Nodes that dropped out are passed to
``aggregate_fit`` as failures, as Flower's workflow does.

Dropouts: a reply that is an error, late, from an unasked node, malformed or
refused by :class:`~privfed.secagg.SecAggServer` makes its node a dropout of
that stage (one log line per node); below the threshold the round is skipped
(one log line) and the global model is left as it was.  A configuration
whose sum could wrap the ring raises :class:`~privfed.errors.RingOverflowError`
before any message is sent.

Active mode (``mode="active"``, ``identities=`` the server's copy of the
integrator's registry, ``corrupted=`` n_C): the server asks each sampled node
for its registry id (stage ``identify``, once per node), the round keys are
signed and a ConsistencyCheck stage runs between the masked updates and the
unmasking; each node checks the proposed round against its own policy and
registry (:mod:`privfed.flower.policy`) and refuses a weaker one.  A round
whose threshold breaks the active rule ``2t > s + n_C`` is skipped.

Threat model: that of :mod:`privfed.flower.server` (semi-honest server unless
``mode="active"``; Flower node authentication and TLS in a deployment).  The server holds masked
vectors, the ring sum of the survivors and the public structure; it never
holds a node's unmasked update.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Final, cast

import numpy as np
import numpy.typing as npt
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.app.message_type import MessageType
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters
from flwr.compat.common import recorddict_compat as compat
from flwr.server.client_proxy import ClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
from flwr.server.workflow.constant import Key as WorkflowKey
from flwr.serverapp import Grid

from privfed._checks import check_choice, check_float, check_int
from privfed.dp.training import TrainingNoisePlan
from privfed.errors import (
    BudgetExceededError,
    MessageFormatError,
    ParameterError,
    ParameterTypeError,
    ProtocolAbort,
    ReconstructionError,
)
from privfed.flower import _wire
from privfed.flower._log import LOG
from privfed.flower._training_wire import (
    ENCODING_FIELD,
    INSTRUCTIONS_FIELD,
    NONCE_FIELD,
    STAGE_FIELD,
    STRUCTURE_FIELD,
    ArraySpec,
    ReplyFormat,
    Rounding,
    Structure,
    TrainingEncoding,
    array_layout,
    instructions_digest,
    training_session_id,
)
from privfed.flower.dp_training import DistributedDP, global_arrays
from privfed.flower.policy import identify_payload
from privfed.flower.server import _per_client
from privfed.secagg import (
    GraphMode,
    IdentityRegistry,
    MaskedInput,
    SecAggConfig,
    SecAggServer,
    SecurityMode,
    Stage,
    decode_message,
)
from privfed.secagg.protocol.state import encode_config
from privfed.secagg.threshold import MIN_THRESHOLD

__all__ = [
    "SecAggWorkflow",
    "SecureAggregate",
    "TrainingRoundReport",
    "TrainingRoundState",
]

#: ``src_node_id`` of the one reply :class:`SecAggGrid` returns: no single node sent it.
AGGREGATE_NODE_ID: Final = 0
#: How a stage feeds one reply to the server (raises on a refused reply).
_Receiver = Callable[[SecAggServer, int, RecordDict], None]
#: The :class:`TrainingEncoding` arguments the workflow holds, under the same names.
_ENCODING_ARGUMENTS: Final = (
    "clipping_range",
    "quantization_range",
    "max_weight",
    "metric_clipping_range",
    "metric_quantization_range",
    "metric_slots",
    "rounding",
)
_STAGE_NAMES: Final = {
    Stage.ADVERTISE_KEYS: "advertise",
    Stage.SHARE_KEYS: "share",
    Stage.MASKED_INPUT: "mask",
    Stage.CONSISTENCY_CHECK: "consist",
    Stage.UNMASKING: "unmask",
}


@dataclasses.dataclass(frozen=True)
class SecureAggregate:
    """The securely aggregated weighted average of one round (what the strategy gets).

    Attributes:
        arrays: ``(record name, array name, weighted mean)`` in layout order;
            each mean has the nodes' shape and dtype.
        metrics: ``(record name, metric name, weighted mean)`` of each
            numeric train metric.
        total_weight: Sum of the survivors' capped example counts, ``>= 1``.
        weight_at: ``(record name, key)`` where the nodes kept the example count.
    """

    arrays: tuple[tuple[str, str, npt.NDArray[np.floating]], ...] = dataclasses.field(repr=False)
    metrics: tuple[tuple[str, str, float], ...]
    total_weight: int
    weight_at: tuple[str, str]

    def to_content(self, weight_key: str) -> RecordDict:
        """The aggregate as one Message-API train reply (arrays, metrics, ``weight_key``)."""
        records: dict[str, ArrayRecord | MetricRecord | ConfigRecord] = {}
        for record, name, array in self.arrays:
            target = records.setdefault(record, ArrayRecord())
            cast(ArrayRecord, target)[name] = Array(np.ascontiguousarray(array))
        metric_record, _ = self.weight_at
        records.setdefault(metric_record, MetricRecord())
        for record, name, value in self.metrics:
            cast(MetricRecord, records.setdefault(record, MetricRecord()))[name] = value
        cast(MetricRecord, records[metric_record])[weight_key] = self.total_weight
        return RecordDict(records)

    def to_fitres(self) -> FitRes:
        """The aggregate as one legacy ``FitRes`` (parameters in layout order)."""
        return FitRes(
            status=Status(code=Code.OK, message="securely aggregated by privfed"),
            parameters=ndarrays_to_parameters([array for _, _, array in self.arrays]),
            num_examples=self.total_weight,
            metrics={name: value for _, name, value in self.metrics},
        )


@dataclasses.dataclass(frozen=True)
class TrainingRoundReport:
    """What happened in one round, without any value (public).

    Attributes:
        round_index: The server round.
        nodes: Flower node ids asked to take part.
        survivors: Node ids whose update is in the aggregate.
        dropped: Stage name -> node ids that gave no accepted reply there.
        refused: Node id -> why its reply was refused (also in ``dropped``).
        skipped: ``None``, or why the round was skipped (the model unchanged).
        seconds: Stage name -> wall seconds.
    """

    round_index: int
    nodes: tuple[int, ...]
    survivors: tuple[int, ...]
    dropped: Mapping[str, tuple[int, ...]]
    refused: Mapping[int, str]
    skipped: str | None
    seconds: Mapping[str, float]


@dataclasses.dataclass
class TrainingRoundState:
    """The state of one round across the stages of :class:`SecAggWorkflow`.

    Attributes:
        round_index: The server round (the protocol's public round index).
        instructions: Flower node id -> the strategy's train content for it.
        message_type: Flower message type of every stage (``train`` or ``train.<action>``).
        group_id: Flower group id of the round's messages.
        reply_format: ``"fitres"`` (legacy clients) or ``"message"`` (Message API).
        weight_key: Message API: the metric holding the example count.
        timeout: Seconds each stage waits for replies (``None``: until all arrive).
    """

    round_index: int
    instructions: dict[int, RecordDict]
    message_type: str = MessageType.TRAIN
    group_id: str = ""
    reply_format: ReplyFormat = "message"
    weight_key: str = "num-examples"
    timeout: float | None = None
    clients: dict[int, int] = dataclasses.field(default_factory=dict)
    encoding: TrainingEncoding | None = None
    server: SecAggServer | None = None
    payloads: dict[int, RecordDict] = dataclasses.field(default_factory=dict)
    structure: Structure | None = None
    dropped: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    refused: dict[int, str] = dataclasses.field(default_factory=dict)
    skipped: str | None = None
    aggregate: SecureAggregate | None = None
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def node_of(self) -> dict[int, int]:
        """Client id -> Flower node id."""
        return {cid: node for node, cid in self.clients.items()}


class _AggregateProxy(ClientProxy):
    """The one 'client' whose ``FitRes`` a legacy strategy receives: the secure aggregate."""

    def __init__(self) -> None:
        super().__init__("privfed-secure-aggregate")
        self.node_id = AGGREGATE_NODE_ID

    def _no(self, *_: object) -> object:
        raise NotImplementedError("the secure aggregate is not a node")

    get_properties = get_parameters = fit = evaluate = reconnect = _no  # type: ignore[assignment]


class SecAggWorkflow:
    """privfed's secure aggregation as a Flower ``fit_workflow``, where ``SecAggPlusWorkflow`` goes.

    The arguments Flower's ``SecAggPlusWorkflow`` has mean what they mean there;
    privfed's ring is ``Z_{2**64}`` (no ``modulus_range``), and a configuration
    that could wrap it is refused.

    Args:
        num_shares: Shares of each node's secrets, the node itself included.
            An int ``>= n`` (or 1): the complete graph (SecAgg); an int
            ``3 <= k < n``: the SecAgg+ Harary graph with ``k`` neighbours
            counting the node (``k - 1`` others; an even ``k`` with odd ``n``
            is raised by one); a float ``> 0``: ``round(num_shares * n)``
            resolved each round (as Flower does).
        reconstruction_threshold: Shares that rebuild a secret (and the fewest
            surviving neighbours, the node included): an int ``>= 2``, or a
            float in ``(0, 1]``: that fraction of the neighbourhood (at least 2).
        max_weight: A node's example count is capped at ``floor(max_weight)``
            (finite, ``>= 1``).
        clipping_range: Values are clipped to ``[-clipping_range, clipping_range]``
            (finite, ``> 0``), in the model's units.
        quantization_range: ``[-c, c]`` is quantized onto a grid of step
            ``2 * clipping_range / quantization_range``; an int ``>= 2``.  The
            aggregate is the weighted mean within one step per coordinate.
        timeout: Seconds each stage waits for replies; ``None`` (Flower's
            default) waits for all of them.
        rounding: ``"stochastic"`` (unbiased; Flower's choice) or
            ``"nearest"`` (deterministic, error at most half a step).
        metric_clipping_range: Clipping range of numeric train metrics.
        metric_quantization_range: Quantization range of train metrics.
        metric_slots: Numeric train metrics aggregated per round, an int in
            ``[0, 1024]``; a node's extra metrics (by name) are not sent.
        mode: ``"semi-honest"`` (default) or ``"active"`` (signed keys and the
            ConsistencyCheck stage; nodes need an identity in their policy).
        identities: Active mode: the registry of the nodes' identity keys
            (:class:`~privfed.secagg.IdentityRegistry`; every node checks that
            it is its own); ``None`` otherwise.
        corrupted: ``n_C``, clients assumed to collude with the server (at
            least the registry's ``assumed_corrupted``; nodes refuse fewer
            than their policy's).
        privacy: ``None`` (default), or a
            :class:`~privfed.flower.dp_training.DistributedDP`: the nodes clip,
            rotate and noise their updates (distributed DP; the server never
            holds a noiseless sum) and the run keeps one privacy ledger.

    Raises:
        ParameterError, ParameterTypeError: An argument outside its domain.
        RingOverflowError: Even two nodes could wrap the ring.
        CalibrationError: ``privacy``'s ε is beyond reach.
    """

    def __init__(
        self,
        num_shares: int | float,
        reconstruction_threshold: int | float,
        *,
        max_weight: float = 1000.0,
        clipping_range: float = 8.0,
        quantization_range: int = 2**22,
        timeout: float | None = None,
        rounding: Rounding = "stochastic",
        metric_clipping_range: float = 2.0**16,
        metric_quantization_range: int = 2**36,
        metric_slots: int = 8,
        mode: SecurityMode | str = SecurityMode.SEMI_HONEST,
        identities: IdentityRegistry | None = None,
        corrupted: int = 0,
        privacy: DistributedDP | None = None,
    ) -> None:
        self.mode = _security_mode(mode, identities)
        self.identities = identities
        self.corrupted = check_int("corrupted", corrupted, minimum=0)
        #: Active mode: Flower node id -> the registry id the node answered with.
        self.identified: dict[int, int] = {}
        self.num_shares = _share_count(num_shares)
        self.reconstruction_threshold = _threshold_arg(reconstruction_threshold)
        if (
            isinstance(self.num_shares, int)
            and isinstance(self.reconstruction_threshold, int)
            and self.reconstruction_threshold > self.num_shares
        ):
            raise ParameterError(
                "reconstruction_threshold", f"at most num_shares={self.num_shares}",
                reconstruction_threshold,
            )  # fmt: skip
        if timeout is not None:
            check_float("timeout", timeout, low=0.0, open_low=True)
        self.timeout = None if timeout is None else float(timeout)
        self.max_weight = max_weight
        self.clipping_range = clipping_range
        self.quantization_range = quantization_range
        self.rounding: Rounding = check_choice("rounding", rounding, ("stochastic", "nearest"))
        self.metric_clipping_range = metric_clipping_range
        self.metric_quantization_range = metric_quantization_range
        self.metric_slots = metric_slots
        self.encoding(()).check_no_wrap(2)  # validates every encoding argument
        if privacy is not None and not isinstance(privacy, DistributedDP):
            raise ParameterTypeError("privacy", "a DistributedDP or None", privacy)
        self.privacy = privacy
        if privacy is not None:  # every DP error before any round
            graph, _, size = self._graph(privacy.num_clients)
            privacy.configure(
                threshold=self._threshold(size),
                corrupted=self.corrupted,
                complete=graph is GraphMode.COMPLETE,
            )
        #: One :class:`TrainingRoundReport` per round run (no values).
        self.reports: list[TrainingRoundReport] = []

    def encoding(
        self,
        arrays: tuple[ArraySpec, ...],
        reply_format: ReplyFormat = "message",
        weight_key: str = "num-examples",
        privacy: TrainingNoisePlan | None = None,
        clip_scale: float = 1.0,
    ) -> TrainingEncoding:
        """The round's public encoding for this array layout (``array_layout`` of the instructions).

        Raises:
            ParameterError, ParameterTypeError: An encoding argument outside its domain.
        """
        return TrainingEncoding(
            arrays=arrays,
            **{name: getattr(self, name) for name in _ENCODING_ARGUMENTS},
            reply_format=reply_format,
            weight_key=weight_key,
            privacy=privacy,
            clip_scale=clip_scale,
        )

    # -- Flower's fit workflow ----------------------------------------------------

    def __call__(self, grid: Grid, context: Context) -> None:
        """Run one fit round of ``DefaultWorkflow``: configure, secure-aggregate, aggregate_fit.

        Raises:
            ParameterTypeError: ``context`` is not a ``LegacyContext``.
            RingOverflowError: The round's configuration could wrap the ring.
            ParameterError: The strategy sent non-float arrays, or different
                arrays to different nodes.
        """
        if not isinstance(context, LegacyContext):
            raise ParameterTypeError("context", "a LegacyContext (inside DefaultWorkflow)", context)
        state = self.configure_fit(context)
        if state is None:
            return
        if self.secure_aggregate(grid, state) is not None:
            self.aggregate_fit(context, state)

    def configure_fit(self, context: LegacyContext) -> TrainingRoundState | None:
        """Ask the strategy for the round's fit instructions; ``None``: no node selected."""
        cfg = context.state.config_records[MAIN_CONFIGS_RECORD]
        current_round = cast(int, cfg[WorkflowKey.CURRENT_ROUND])
        parameters = compat.arrayrecord_to_parameters(
            context.state.array_records[MAIN_PARAMS_RECORD], keep_input=True
        )
        pairs = context.strategy.configure_fit(
            server_round=current_round, parameters=parameters, client_manager=context.client_manager
        )
        if not pairs:
            LOG.info("configure_fit: no clients selected, cancel")
            return None
        return TrainingRoundState(
            round_index=current_round,
            instructions={
                proxy.node_id: compat.fitins_to_recorddict(fitins, True) for proxy, fitins in pairs
            },
            group_id=str(current_round),
            reply_format="fitres",
            timeout=self.timeout,
        )

    def aggregate_fit(self, context: LegacyContext, state: TrainingRoundState) -> None:
        """Hand the strategy the one secure aggregate; update the global model and history."""
        aggregate = state.aggregate
        if aggregate is None:  # pragma: no cover -- called after a completed round only
            return
        failures: list[tuple[ClientProxy, FitRes] | BaseException] = [
            Exception(f"node {node} dropped out at {stage}")
            for stage, nodes in state.dropped.items()
            for node in nodes
        ]
        LOG.info(
            "aggregate_fit: one secure aggregate (total weight %d) and %d failures",
            aggregate.total_weight,
            len(failures),
        )
        parameters, metrics = context.strategy.aggregate_fit(
            state.round_index, [(_AggregateProxy(), aggregate.to_fitres())], failures
        )
        if parameters:
            context.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
                parameters, True
            )
            context.history.add_metrics_distributed_fit(
                server_round=state.round_index, metrics=metrics
            )

    # -- the protocol ------------------------------------------------------------

    def secure_aggregate(self, grid: Grid, state: TrainingRoundState) -> SecureAggregate | None:
        """Run the four stages over ``grid``; the aggregate, or ``None`` if the round was skipped.

        Appends a :class:`TrainingRoundReport` to :attr:`reports`.
        """
        steps = (
            self.setup_stage,
            self.share_keys_stage,
            self.collect_masked_vectors_stage,
            self.consistency_check_stage,
            self.unmask_stage,
        )
        try:
            for step in steps:
                start = time.perf_counter()
                done = step(grid, state)
                state.seconds[step.__name__] = time.perf_counter() - start
                if not done:
                    LOG.warning(
                        "privfed secure aggregation: round %d skipped (%s); the global model "
                        "is unchanged",
                        state.round_index,
                        state.skipped,
                    )
                    return None
            return state.aggregate
        finally:
            self.reports.append(_report(state))
            state.server = None  # the masked inputs are no longer needed

    def setup_stage(self, grid: Grid, state: TrainingRoundState) -> bool:
        """Fix the round's config and encoding, send it, collect fresh public keys."""
        if len(state.instructions) < 2:
            return _skip(state, f"{len(state.instructions)} node sampled; needs at least 2")
        layouts = [array_layout(content) for content in state.instructions.values()]
        if any(layout != layouts[0] for layout in layouts):
            raise ParameterError("instructions", "the same arrays for every node", "different")
        if self.mode is SecurityMode.ACTIVE:
            state.clients = self._identify(grid, state)
        else:
            state.clients = {node: cid for cid, node in enumerate(sorted(state.instructions), 1)}
        n = len(state.clients)
        if n < 2:
            return _skip(state, f"{n} node(s) identified; secure aggregation needs at least 2")
        graph, degree, size = self._graph(n)
        threshold = self._threshold(size)
        if threshold > size:
            return _skip(state, f"reconstruction threshold {threshold} > {size} shares")
        plan = None
        if self.privacy is not None:
            plan = self.privacy.plan_for(sum(a.size for a in layouts[0]))
            why = self.privacy.refusal(n)
            if why:  # before any message of the round
                return _skip(state, why)
        scale = 1.0 if self.privacy is None else self.privacy.clip_scale
        encoding = self.encoding(layouts[0], state.reply_format, state.weight_key, plan, scale)
        encoding.check_no_wrap(n)  # before any key is made, anywhere
        digests = {instructions_digest(content) for content in state.instructions.values()}
        if len(digests) != 1:
            # One session commits to one set of instructions: a server that could give
            # nodes different models or settings could isolate one node's update.
            raise ParameterError(
                "instructions", "the same train instructions for every node", "different"
            )
        (instructions,) = digests
        nonce = secrets.token_bytes(32)
        encoded = encoding.to_bytes()
        try:
            config = SecAggConfig(
                session_id=training_session_id(nonce, encoded, instructions),
                client_ids=tuple(sorted(state.clients.values())),
                threshold=threshold,
                vector_length=encoding.vector_length,
                graph=graph,
                degree=degree,
                round_index=state.round_index,
                mode=self.mode,
                corrupted=self.corrupted,
                identities=self.identities,
                ring_bits=64 if plan is None else plan.ring_bits,
                noise_layers=0 if plan is None else plan.layers,
            )
        except ParameterError as exc:  # e.g. 2t <= s + n_C with the nodes this round has
            return _skip(state, str(exc))
        server = state.server = SecAggServer(config)
        state.encoding = encoding
        fields: dict[str, str | bytes] = {
            STAGE_FIELD: "advertise",
            "config": encode_config(config, registry_by_digest=True),
            ENCODING_FIELD: encoded,
            NONCE_FIELD: nonce,
            INSTRUCTIONS_FIELD: instructions,
        }
        payloads = {
            cid: RecordDict({_wire.RECORD: ConfigRecord({**fields, "client-id": cid})})
            for cid in config.client_ids
        }
        self._exchange(grid, state, Stage.ADVERTISE_KEYS, payloads, _receive_bytes)
        for cid in set(payloads) - server.advertised:  # asked again next round
            self.identified.pop(state.node_of[cid], None)
        try:
            # Active SecAgg+: the roster root is fixed here, and its committee reveals.
            committee = {
                cid: _wire.bytes_content(m.to_bytes(), **{STAGE_FIELD: "reveal"})
                for cid, m in server.committee_requests().items()
            }
            if committee:
                self._exchange(grid, state, Stage.ADVERTISE_KEYS, committee, _receive_bytes)
            rosters = _per_client(server, sorted(server.advertised))
        except ProtocolAbort as exc:
            return _skip(state, exc.reason)
        state.payloads = {cid: _restage(content, "share") for cid, content in rosters.items()}
        return True

    def _identify(self, grid: Grid, state: TrainingRoundState) -> dict[int, int]:
        """Active mode: ``{node: registry id}`` of the sampled nodes (unknown ones are asked).

        Each node signs its answer over a fresh nonce with its identity key
        (:func:`~privfed.flower.policy.identify_payload`), checked against the
        registry, so no node can claim another's id.  Nodes that fail, answer
        an id the registry does not enrol or a bad signature are left out of
        the round (and asked again next round).
        """
        registry = self.identities
        assert registry is not None  # noqa: S101 -- active mode has one
        unknown = sorted(set(state.instructions) - set(self.identified))
        nonce = secrets.token_bytes(32)
        ask = ConfigRecord({STAGE_FIELD: "identify", "nonce": nonce})
        messages = [
            Message(
                RecordDict({_wire.RECORD: ask}),
                dst_node_id=node,
                message_type=state.message_type,
                group_id=state.group_id,
            )
            for node in unknown
        ]
        replies = grid.send_and_receive(messages, timeout=state.timeout) if messages else ()
        for node, record in _wire.answered_records(replies, unknown):
            try:
                cid = _wire.get_int(record, "client-id")
                signature = _wire.get_bytes(record, "signature")
                if 0 < cid < 2**32 and registry.verify(
                    cid, identify_payload(nonce, cid, registry.digest), signature
                ):
                    self.identified[node] = cid
            except MessageFormatError:
                continue
        known = self.identified
        sampled = {node: known[node] for node in state.instructions if node in known}
        claims: dict[int, int] = {}
        for cid in sampled.values():
            claims[cid] = claims.get(cid, 0) + 1
        taking_part = {node: cid for node, cid in sampled.items() if claims[cid] == 1}
        left_out = sorted(set(state.instructions) - set(taking_part))
        for node in left_out:
            known.pop(node, None)
        if left_out:
            LOG.warning("active mode: nodes %s gave no registry id of their own", left_out)
        state.dropped["identify"] = tuple(left_out)
        return taking_part

    def share_keys_stage(self, grid: Grid, state: TrainingRoundState) -> bool:
        """Send each node its roster; collect and route the encrypted shares."""
        server = _server(state)
        asked = state.payloads
        self._exchange(grid, state, Stage.SHARE_KEYS, asked, _receive_bytes)
        try:
            routed = server.routed_shares()
        except ProtocolAbort as exc:
            return _skip(state, exc.reason)
        _note_dropouts(state, Stage.SHARE_KEYS, asked, server.shared)
        state.payloads = {
            cid: RecordDict(
                {
                    **state.instructions[state.node_of[cid]],
                    _wire.RECORD: ConfigRecord({STAGE_FIELD: "mask", "message": m.to_bytes()}),
                }
            )
            for cid, m in routed.items()
        }
        return True

    def collect_masked_vectors_stage(self, grid: Grid, state: TrainingRoundState) -> bool:
        """Send the train instructions with the routed shares; collect masked updates.

        The survivors' structures must agree: the largest group of equal
        structures is kept, the other nodes are refused (dropouts).
        """
        server = _server(state)
        encoding = _encoding(state)
        asked = state.payloads
        replies = self._exchange(grid, state, Stage.MASKED_INPUT, asked)
        parsed: dict[int, tuple[MaskedInput, Structure]] = {}
        for cid, content in replies.items():
            try:
                masked = _wire.parse_masked_input(content)
                header = _wire.config_record(content)
                parsed[cid] = (masked, Structure.from_bytes(header.get(STRUCTURE_FIELD), encoding))
            except Exception as exc:  # a peer's bytes: any failure is its dropout
                _refuse(state, cid, Stage.MASKED_INPUT, exc)
        groups: dict[Structure, list[int]] = {}
        for cid, (_, structure) in sorted(parsed.items()):
            groups.setdefault(structure, []).append(cid)
        if groups:
            state.structure = max(groups, key=lambda s: (len(groups[s]), -groups[s][0]))
        for cid, (masked, structure) in sorted(parsed.items()):
            if structure != state.structure:
                _refuse(
                    state, cid, Stage.MASKED_INPUT, "its reply's structure is not the majority's"
                )
                continue
            try:
                server.receive(masked, sender=cid)
            except Exception as exc:
                _refuse(state, cid, Stage.MASKED_INPUT, exc)
        _note_dropouts(state, Stage.MASKED_INPUT, asked, server.survivors)
        if self.privacy is not None:
            try:  # the release: charged before the server can unmask it
                self.privacy.record(state.round_index)
            except BudgetExceededError as exc:
                return _skip(state, f"privacy budget exhausted: {exc}")
        active = server.config.active
        try:
            requests = server.consistency_requests() if active else server.unmask_requests()
        except ProtocolAbort as exc:
            return _skip(state, exc.reason)
        state.payloads = {
            cid: _wire.bytes_content(
                m.to_bytes(), **{STAGE_FIELD: "consist" if active else "unmask"}
            )
            for cid, m in requests.items()
        }
        return True

    def consistency_check_stage(self, grid: Grid, state: TrainingRoundState) -> bool:
        """Active mode: collect the survivors' signatures on one survivor set (else nothing)."""
        server = _server(state)
        if not server.config.active:
            return True
        self._exchange(grid, state, Stage.CONSISTENCY_CHECK, state.payloads, _receive_bytes)
        try:
            requests = server.unmask_requests()
        except ProtocolAbort as exc:
            return _skip(state, exc.reason)
        state.payloads = {
            cid: _wire.bytes_content(m.to_bytes(), **{STAGE_FIELD: "unmask"})
            for cid, m in requests.items()
        }
        return True

    def unmask_stage(self, grid: Grid, state: TrainingRoundState) -> bool:
        """Collect the shares, remove the masks, decode the weighted average."""
        server = _server(state)
        encoding = _encoding(state)
        self._exchange(grid, state, Stage.UNMASKING, state.payloads, _receive_bytes)
        try:
            total = server.finalize()
        except (ProtocolAbort, ReconstructionError) as exc:
            return _skip(state, str(exc))
        structure = state.structure
        assert structure is not None  # noqa: S101 -- set with the survivors
        if encoding.privacy is not None:
            return self._private_aggregate(state, total, structure)
        out_of_range = _outside_the_encoding(total, encoding, len(server.survivors))
        if out_of_range:
            # A node that encodes outside its ranges (no range proofs) could move the model
            # anywhere: no honest sum leaves these bounds, so the round is not applied.
            return _skip(state, out_of_range)
        weight, arrays, metrics = encoding.decode(total, structure)
        if weight <= 0:
            return _skip(state, "the survivors' total weight is 0")
        state.aggregate = SecureAggregate(
            arrays=tuple(
                (record, spec.name, array)
                for spec, (record, _), array in zip(
                    encoding.arrays, structure.arrays, arrays, strict=True
                )
            ),
            metrics=tuple(
                (record, name, value)
                for (record, name), value in zip(structure.metrics, metrics, strict=True)
            ),
            total_weight=weight,
            weight_at=structure.weight,
        )
        return True

    def _private_aggregate(
        self, state: TrainingRoundState, total: npt.NDArray[np.uint64], structure: Structure
    ) -> bool:
        """DP round: global weights plus the noisy average update (no clean sum exists)."""
        server, encoding, privacy = _server(state), _encoding(state), self.privacy
        assert privacy is not None  # noqa: S101 -- a DP encoding comes from it
        survivors = sorted(server.survivors)
        update = privacy.decoded(
            total, survivors, server.revealed_noise_seeds, server.config.bound_session_id,
            state.round_index, clip_scale=encoding.clip_scale,
        )  # fmt: skip
        start, arrays = 0, []
        glob = global_arrays(state.instructions[state.node_of[survivors[0]]], encoding)
        for spec, (record, dtype) in zip(encoding.arrays, structure.arrays, strict=True):
            part = update[start : start + spec.size].reshape(spec.shape)
            arrays.append((record, spec.name, (glob[spec.name] + part).astype(dtype)))
            start += spec.size
        state.aggregate = SecureAggregate(
            arrays=tuple(arrays), metrics=(), total_weight=len(survivors),
            weight_at=structure.weight,
        )  # fmt: skip
        return True

    # -- helpers -----------------------------------------------------------------

    def _graph(self, n: int) -> tuple[GraphMode, int | None, int]:
        """(graph, degree, neighbourhood size) for ``n`` nodes."""
        shares = self.num_shares
        if isinstance(shares, float):
            k = round(shares * n)
            if k < n and k % 2 == 0:
                k += 1
            if k <= 2:
                k = n
        else:
            k = shares
        if k >= n:
            return GraphMode.COMPLETE, None, n
        degree = k - 1
        if degree % 2 == 1 and n % 2 == 1:
            LOG.info("num_shares %d is even with %d nodes: using %d", k, n, k + 1)
            degree += 1
        if degree + 1 >= n:
            return GraphMode.COMPLETE, None, n
        return GraphMode.HARARY, degree, degree + 1

    def _threshold(self, size: int) -> int:
        t = self.reconstruction_threshold
        if isinstance(t, float):
            return max(round(t * size), MIN_THRESHOLD)
        return t

    def _exchange(
        self,
        grid: Grid,
        state: TrainingRoundState,
        stage: Stage,
        payloads: Mapping[int, RecordDict],
        receive: _Receiver | None = None,
    ) -> dict[int, RecordDict]:
        """Send each client its content; its first reply's content (errors: dropouts).

        With ``receive``, each reply is also handed to the server with it
        (:meth:`_receive_each`).
        """
        node_of = state.node_of
        messages = [
            Message(
                content,
                dst_node_id=node_of[cid],
                message_type=state.message_type,
                group_id=state.group_id,
            )
            for cid, content in payloads.items()
        ]
        replies: dict[int, RecordDict] = {}
        seen: set[int] = set()
        for reply in grid.send_and_receive(messages, timeout=state.timeout):
            cid = state.clients.get(int(reply.metadata.src_node_id))
            if cid is None or cid not in payloads or cid in seen:
                LOG.warning("ignoring a reply from node %s", reply.metadata.src_node_id)
                continue
            seen.add(cid)
            if reply.has_error():
                LOG.warning(
                    "node %d dropped out at %s: %s",
                    node_of[cid],
                    _STAGE_NAMES[stage],
                    reply.error.reason,
                )
                continue
            replies[cid] = reply.content
        if receive is not None:
            self._receive_each(state, stage, payloads, replies, receive)
        return replies

    @staticmethod
    def _receive_each(
        state: TrainingRoundState,
        stage: Stage,
        asked: Mapping[int, RecordDict],
        replies: Mapping[int, RecordDict],
        receive: _Receiver,
    ) -> None:
        server = _server(state)
        accepted: set[int] = set()
        for cid, content in replies.items():
            try:
                receive(server, cid, content)
                accepted.add(cid)
            except Exception as exc:  # a peer's bytes: any failure is its dropout
                _refuse(state, cid, stage, exc)
        _note_dropouts(state, stage, asked, accepted)


def _receive_bytes(server: SecAggServer, cid: int, content: RecordDict) -> None:
    data = _wire.get_bytes(_wire.config_record(content), "message")
    server.receive(decode_message(data), sender=cid)


def _restage(content: RecordDict, stage: str) -> RecordDict:
    """``content`` (a privfed record) with the training-stage field set."""
    record = ConfigRecord(dict(_wire.config_record(content)))
    record[STAGE_FIELD] = stage
    return RecordDict({_wire.RECORD: record})


def _server(state: TrainingRoundState) -> SecAggServer:
    if state.server is None:
        raise ProtocolAbort("the round has no secure-aggregation server (setup not run)")
    return state.server


def _encoding(state: TrainingRoundState) -> TrainingEncoding:
    if state.encoding is None:
        raise ProtocolAbort("the round has no encoding (setup not run)")
    return state.encoding


def _skip(state: TrainingRoundState, reason: str) -> bool:
    state.skipped = reason
    return False


def _refuse(state: TrainingRoundState, cid: int, stage: Stage, why: object) -> None:
    node = state.node_of[cid]
    text = f"{type(why).__name__}: {why}" if isinstance(why, BaseException) else str(why)
    state.refused[node] = text
    LOG.warning("refused node %d's %s reply: %s", node, _STAGE_NAMES[stage], text)


def _note_dropouts(
    state: TrainingRoundState, stage: Stage, asked: Iterable[int], accepted: Iterable[int]
) -> None:
    node_of = state.node_of
    state.dropped[_STAGE_NAMES[stage]] = tuple(
        sorted(node_of[cid] for cid in set(asked) - set(accepted))
    )


def _outside_the_encoding(
    total: npt.NDArray[np.uint64], encoding: TrainingEncoding, survivors: int
) -> str:
    """Why ``total`` cannot be a sum of ``survivors`` honest encodings ("" if it can be).

    An honest node contributes a weight in ``[0, cap]`` and slots of magnitude
    at most ``weight * ceil(Q / 2)``, so the sum's weight lies in ``[1,
    survivors * cap]`` and every slot within ``weight * ceil(Q / 2)``.
    """
    signed = np.asarray(total, dtype=np.uint64).view(np.int64)
    weight = int(signed[0])
    cap = survivors * encoding.weight_cap
    if not 1 <= weight <= cap:
        return f"the survivors' total weight {weight} is outside [1, {cap}] (a node lied)"
    end = 1 + encoding.model_size
    for name, part, levels in (
        ("an array value", signed[1:end], encoding.quantization_range),
        ("a metric", signed[end:], encoding.metric_quantization_range),
    ):
        bound = weight * -(-levels // 2)
        if part.size and (int(part.max()) > bound or int(part.min()) < -bound):
            return f"{name} of the sum is outside its range (a node encoded beyond its clip)"
    return ""


def _report(state: TrainingRoundState) -> TrainingRoundReport:
    survivors: tuple[int, ...] = ()
    if state.aggregate is not None and state.server is not None:
        survivors = tuple(sorted(state.node_of[c] for c in state.server.survivors))
    return TrainingRoundReport(
        round_index=state.round_index,
        nodes=tuple(sorted(state.instructions)),
        survivors=survivors,
        dropped=dict(state.dropped),
        refused=dict(state.refused),
        skipped=state.skipped,
        seconds=dict(state.seconds),
    )


def _security_mode(mode: object, identities: object) -> SecurityMode:
    try:
        chosen = mode if isinstance(mode, SecurityMode) else SecurityMode(mode)
    except ValueError:
        raise ParameterError("mode", "'semi-honest' or 'active'", mode) from None
    if chosen is SecurityMode.ACTIVE and not isinstance(identities, IdentityRegistry):
        raise ParameterTypeError("identities", "an IdentityRegistry with mode='active'", identities)
    if chosen is SecurityMode.SEMI_HONEST and identities is not None:
        raise ParameterError("identities", "None in semi-honest mode", "a registry")
    return chosen


def _share_count(value: object) -> int | float:
    if isinstance(value, float):
        return check_float("num_shares", value, low=0.0, open_low=True)
    shares = check_int(
        "num_shares", value, expected="an int or a float", domain="an int >= 3 (or 1: all)"
    )
    if shares == 1:
        return 1.0
    if shares < 3:
        raise ParameterError("num_shares", "an int >= 3 (or 1: all), or a float > 0", value)
    return shares


def _threshold_arg(value: object) -> int | float:
    if isinstance(value, float):
        return check_float("reconstruction_threshold", value, low=0.0, high=1.0, open_low=True)
    threshold = check_int(
        "reconstruction_threshold", value, expected="an int or a float",
        domain="an int >= 2 (or 1: all shares)",
    )  # fmt: skip
    if threshold == 1:
        return 1.0
    if threshold < MIN_THRESHOLD:
        raise ParameterError(
            "reconstruction_threshold", f"an int >= {MIN_THRESHOLD}, or a float in (0, 1]", value
        )
    return threshold
