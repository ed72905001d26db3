"""The server side: a workflow that drives ``SecAggServer`` over a Flower ``Grid``.

:class:`SecAggRound` runs one secure-aggregation round inside a
``ServerApp``'s ``main(grid, context)``: per stage it sends each node its
privfed message (``query.privfed_secagg_<stage>``) with
``grid.send_and_receive(..., timeout=...)`` and feeds the replies to
:class:`~privfed.secagg.SecAggServer`.

* A node whose reply is an error, arrives after the timeout or never arrives
  is a dropout of that stage; so is a node whose reply the server refuses.
* The sender handed to :meth:`SecAggServer.receive` is the client id mapped
  from the Flower node that delivered the reply (``msg.metadata.src_node_id``),
  never the id claimed inside the payload: a message in another client's name
  is refused.  A reply from a node that was not asked is ignored.
* Fewer than ``threshold`` clients left at a stage abort the round cleanly:
  :class:`~privfed.errors.ProtocolAbort` from :meth:`SecAggRound.run`, and
  no survivor is asked to reveal anything.

Threat model: Flower authenticates nodes (with ``--enable-supernode-auth``)
and TLS protects the channel; this workflow relies on both in a deployment
(see SECURITY.md).  The node-to-client map is the identity binding: give it
from your registry, or let :meth:`SecAggRound.run` number the nodes.  In the
active mode (``config_fields`` with ``mode="active"``, the server's copy of
the registry and ``corrupted``) a node takes part only under the client id
its own registry gives its key, every round key is signed, the
ConsistencyCheck stage runs, and each node refuses a round weaker than its own
policy (:mod:`privfed.flower.policy`): the server is then not trusted to
follow the protocol either.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from privfed._checks import check_float, check_int
from privfed.errors import (
    DeclarationError,
    MessageFormatError,
    ParameterError,
    ParameterTypeError,
    PrivacyError,
    ProtocolAbort,
)
from privfed.flower import _wire
from privfed.flower._log import LOG
from privfed.flower.declaration import NoiseDeclaration
from privfed.flower.policy import identify_payload
from privfed.progress import ProgressEvent, ProgressFn
from privfed.secagg import (
    ClientIds,
    GraphMode,
    IdentityRegistry,
    SecAggConfig,
    SecAggServer,
    Stage,
    ThresholdPolicy,
    decode_message,
    new_session_id,
)
from privfed.secagg import (
    Message as ProtocolMessage,
)
from privfed.secagg.protocol.config import MAX_CLIENT_ID
from privfed.secagg.protocol.state import encode_config
from privfed.secagg.threshold import MIN_THRESHOLD, requested_threshold

__all__ = [
    "HELLO_TYPE",
    "SecAggRound",
    "SecAggRoundResult",
    "active_mode_fields",
    "hello",
    "quiet_privfed_errors",
    "round_threshold",
    "run_active_fields",
    "say",
    "sum_round",
    "wait_for_federation",
    "wait_for_nodes",
]

#: Message type of the hello round (each node reports its public partition id).
HELLO_TYPE = "query." + _wire.HELLO_ACTION

# What a refused reply raises: the reply is dropped, the round goes on.
_REFUSALS = (
    ProtocolAbort,
    MessageFormatError,
    ParameterError,
    ParameterTypeError,
    DeclarationError,
)
_T = TypeVar("_T")
_STAGES = (
    Stage.ADVERTISE_KEYS,
    Stage.SHARE_KEYS,
    Stage.MASKED_INPUT,
    Stage.CONSISTENCY_CHECK,
    Stage.UNMASKING,
)


@dataclasses.dataclass(frozen=True)
class SecAggRoundResult:
    """One round over Flower: the sum and what happened to whom.

    Attributes:
        total: The ring sum (1-D ``uint64``) of exactly the clients in ``survivors``.
        config: The round's config (client ids are the mapped ids).
        clients: Flower node id -> client id of the round.
        survivors: Client ids whose masked input is in the sum.
        dropped: Per stage, client ids that were asked and gave no accepted
            reply (error, timeout, or refused).
        refused: Client id -> why its reply was refused (forged sender,
            wrong session, malformed ...); those clients are in ``dropped`` too.
        errors: Client id -> the reason of its error reply (its ClientApp
            raised, e.g. a node refusing a rolled-back state); in ``dropped`` too.
        seconds: Wall seconds per stage (send, wait, receive, close).
        server_seconds: Seconds per stage spent in the server's own work
            (parsing, :class:`SecAggServer`, building replies), without waiting.
        bytes_received: Payload bytes received per client over the round.
        bytes_sent: Payload bytes sent to each client over the round.
        revealed_noise_seeds: With noise layers (``config.noise_layers``):
            survivor -> {layer -> seed} the server rebuilt under the reveal
            rule (:attr:`~privfed.secagg.SecAggServer.revealed_noise_seeds`);
            the DP layer subtracts their noise from ``total``.  Empty otherwise.
        declarations: Survivor -> the noise it declared with its masked input
            (:class:`~privfed.flower.declaration.NoiseDeclaration`; ``None``:
            it sent none).
    """

    total: npt.NDArray[np.uint64] = dataclasses.field(repr=False)
    config: SecAggConfig
    clients: Mapping[int, int]
    survivors: tuple[int, ...]
    dropped: Mapping[Stage, tuple[int, ...]]
    refused: Mapping[int, str]
    errors: Mapping[int, str]
    seconds: Mapping[Stage, float]
    server_seconds: Mapping[Stage, float]
    bytes_received: Mapping[int, int]
    bytes_sent: Mapping[int, int]
    revealed_noise_seeds: Mapping[int, Mapping[int, bytes]] = dataclasses.field(
        default_factory=dict, repr=False
    )
    declarations: Mapping[int, NoiseDeclaration | None] = dataclasses.field(default_factory=dict)

    @property
    def node_of(self) -> dict[int, int]:
        """Client id -> Flower node id."""
        return {cid: node for node, cid in self.clients.items()}


def wait_for_nodes(
    grid: Grid,
    count: int,
    *,
    timeout: float = 120.0,
    settle: float | None = None,
    report: Callable[[str], None] | None = None,
    poll: float = 0.1,
) -> list[int]:
    """Wait until ``count`` nodes are connected; their ids, sorted.

    Args:
        grid: The ServerApp's grid.
        count: Nodes the job needs, ``>= 1``.
        timeout: Longest wait, seconds.
        settle: Give up early once fewer than ``count`` nodes are connected
            and none has joined for this many seconds (a simulation's nodes
            are all there at the start; a deployment's sites join over a
            few seconds).  ``None``: wait the whole ``timeout``.
        report: Called with one line when the wait starts, whenever the
            number of connected nodes changes, and every 30 s.
        poll: Seconds between two looks at the grid.

    Raises:
        ProtocolAbort: Fewer than ``count`` nodes connected in time; the
            message says how many and how to run with them.
    """
    check_int("count", count, minimum=1)
    check_float("timeout", timeout, low=0.0, numpy=False)
    if settle is not None:
        check_float("settle", settle, low=0.0, open_low=True, numpy=False)
    start = time.monotonic()
    deadline = start + timeout
    seen = -1
    last_change = last_report = start
    while True:
        nodes = sorted(int(n) for n in grid.get_node_ids())
        now = time.monotonic()
        if len(nodes) >= count:
            if report is not None and seen != len(nodes):
                report(f"{len(nodes)} of {count} Flower nodes connected")
            return nodes
        if len(nodes) != seen:
            last_change = now
        if report is not None and (len(nodes) != seen or now - last_report >= 30.0):
            report(f"waiting for {count} Flower nodes: {len(nodes)} connected")
            last_report = now
        seen = len(nodes)
        quiet = now - last_change
        if now > deadline or (settle is not None and quiet >= settle):
            waited = (
                f"in {now - start:.0f} s" if now > deadline else f"(none joined for {quiet:.0f} s)"
            )
            fewer = (
                f"run with num-clients={len(nodes)} (--run-config 'num-clients={len(nodes)}') or "
                if len(nodes) >= 2
                else ""
            )
            raise ProtocolAbort(
                f"only {len(nodes)} of {count} Flower nodes connected {waited}; {fewer}"
                f"give the federation {count} nodes (simulation engine: flwr run ... "
                f"--federation-config 'num-supernodes={count}')"
            )
        time.sleep(poll)


# What a user meets for a setting or a federation, not a bug: one line, no traceback.
_USER_FACING = (ParameterError, ParameterTypeError, ProtocolAbort, PrivacyError)


class _OneLinePrivfedErrors(logging.Filter):
    """Flower logs a failing ServerApp with its traceback; a privfed error needs one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, _USER_FACING):
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_privfed_errors() -> None:
    """Make Flower log a ServerApp's privfed errors as one line (bugs keep their traceback).

    One line for a bad setting (``ParameterError``, ``ParameterTypeError``),
    a round that could not complete (``ProtocolAbort``) and a refused
    release (``PrivacyError``); everything else, privfed's other errors
    included, keeps Flower's traceback.

    Idempotent; call it from a ServerApp's ``main``.  Flower's own line
    ("ServerApp raised an exception") stays, followed by privfed's message.
    """
    logger = logging.getLogger("flwr")
    if not any(isinstance(f, _OneLinePrivfedErrors) for f in logger.filters):
        logger.addFilter(_OneLinePrivfedErrors())


def say(line: str) -> None:
    """One progress line of a privfed ServerApp (stdout: ``flwr run --stream`` shows it)."""
    print(f"privfed: {line}", flush=True)


def wait_for_federation(
    grid: Grid,
    run: Mapping[str, object],
    count: int,
    *,
    registry: IdentityRegistry | None = None,
) -> dict[int, int]:
    """A job's start: wait for ``count`` nodes, then ``{node_id: partition_id}`` (:func:`hello`).

    Run config: ``wait-s`` (longest wait, default 300 s) and ``join-grace-s``
    (give up once no node has joined for this long while too few are
    connected, default 15 s); progress lines go to stdout.  ``registry``
    (active mode): see :func:`hello`.

    Raises:
        ProtocolAbort: Too few nodes (one line saying how to run with them),
            or no node answered the hello round.
    """
    wait = float(run.get("wait-s", 300.0))  # type: ignore[arg-type]
    grace = float(run.get("join-grace-s", 15.0))  # type: ignore[arg-type]
    nodes = wait_for_nodes(
        grid, count, timeout=wait, settle=grace if grace > 0 else None, report=say
    )
    return hello(grid, nodes, timeout=wait, registry=registry, count=count)


def hello(
    grid: Grid,
    nodes: Iterable[int],
    *,
    timeout: float = 60.0,
    registry: IdentityRegistry | None = None,
    count: int | None = None,
) -> dict[int, int]:
    """Ask each node for its ``partition-id`` (node config); ``{node_id: partition_id}``.

    Nodes that fail or do not answer in time are left out.  The partition id
    is the node operator's declaration (public); two nodes declaring the same
    one are both left out, and so is one declaring an id outside ``[0,
    count)`` (``count``: the job's number of clients; ``None``: any id >= 0
    below the client-id range).  With ``registry`` (an active job) the nodes are
    asked with a fresh nonce, and only a node that signs, with the key the
    registry holds for id ``partition-id + 1``, is kept: no node can take
    another's partition (or push it out by claiming it too).

    Raises:
        ProtocolAbort: No node answered.
    """
    asked = [int(n) for n in nodes]
    nonce = secrets.token_bytes(32)
    content = (
        RecordDict()
        if registry is None
        else RecordDict({_wire.RECORD: ConfigRecord({"nonce": nonce})})
    )
    messages = [
        Message(content, dst_node_id=node, message_type=HELLO_TYPE, group_id="hello")
        for node in asked
    ]
    found: dict[int, int] = {}
    for node, record in _wire.answered_records(
        grid.send_and_receive(messages, timeout=timeout), asked
    ):
        try:
            pid = _wire.get_int(record, "partition-id")
            if registry is not None and not _signed_partition(registry, record, nonce, pid):
                LOG.warning("left out node %d: no signed identity for partition %d", node, pid)
                continue
            found[node] = pid
        except MessageFormatError:
            continue
    counts: dict[int, int] = {}
    for pid in found.values():
        counts[pid] = counts.get(pid, 0) + 1
    top = MAX_CLIENT_ID if count is None else count  # ids pid + 1 stay client ids
    for node, pid in sorted(found.items()):
        if not 0 <= pid < top:
            LOG.warning("left out node %d: partition-id %d outside [0, %d)", node, pid, top)
    result = {n: pid for n, pid in found.items() if counts[pid] == 1 and 0 <= pid < top}
    if not result:
        raise ProtocolAbort("no Flower node answered the hello round")
    return result


def _signed_partition(
    registry: IdentityRegistry, record: ConfigRecord, nonce: bytes, pid: int
) -> bool:
    """Whether the hello reply proves the key of the registry id of partition ``pid``."""
    cid = record.get("client-id")
    signature = record.get("signature")
    ids = ClientIds.any()
    if not isinstance(signature, bytes) or not isinstance(cid, int) or cid not in ids:
        return False
    if ids.partition_id(cid) != pid:
        return False
    return registry.verify(cid, identify_payload(nonce, cid, registry.digest), signature)


def active_mode_fields(
    mode: object, registry_path: object, *, num_clients: int, corrupted: int
) -> dict[str, Any]:
    """A one-shot job's :class:`SecAggRound` ``config_fields`` for its security mode.

    Semi-honest: ``{}``.  Active: the mode, ``corrupted`` and the registry read
    from ``registry_path`` (the server's copy, run config ``secagg-registry``),
    checked before any node is asked.

    Args:
        mode: Run config ``secagg-mode``: ``"semi-honest"`` or ``"active"``.
        registry_path: Run config ``secagg-registry``.
        num_clients: Client ids ``1..num_clients`` the registry must enrol.
        corrupted: Run config ``assumed-corrupted`` (n_C).

    Raises:
        ParameterError: Another mode; active mode without a registry file, or
            with one that does not enrol ``1..num_clients`` or assumes more
            corrupted clients than ``corrupted``.
    """
    if mode == "semi-honest":
        return {}
    if mode != "active":
        raise ParameterError("secagg-mode", "'semi-honest' or 'active'", mode)
    from privfed.flower.policy import load_registry

    if not isinstance(registry_path, str) or not registry_path:
        raise ParameterError(
            "secagg-registry",
            "the path of the identity registry with secagg-mode='active'",
            registry_path,
        )
    registry = load_registry(registry_path, name="secagg-registry")
    if not isinstance(registry, IdentityRegistry):
        raise ParameterError(
            "secagg-registry",
            "the integrator's full registry (a server checks every node's signatures; "
            "an enrolment file is a node's)",
            registry_path,
        )
    missing = sorted(set(ClientIds(num_clients).client_ids) - set(registry.client_ids))
    if missing:
        raise ParameterError(
            "secagg-registry",
            f"a registry enrolling client ids 1..{num_clients} (partition p is id p + 1)",
            f"{registry_path} without {missing[:5]}",
        )
    if registry.assumed_corrupted > corrupted:
        raise ParameterError(
            "assumed-corrupted",
            f"at least the registry's assumed_corrupted ({registry.assumed_corrupted})",
            corrupted,
        )
    return {"mode": "active", "identities": registry, "corrupted": corrupted}


def round_threshold(run: Mapping[str, Any], num_clients: int, fields: Mapping[str, Any]) -> int:
    """A one-shot job's threshold: run config ``threshold`` (0 or absent: the strict majority).

    Checked against the :class:`~privfed.secagg.ThresholdPolicy` of the
    round's mode and n_C (``fields``: :func:`active_mode_fields`) over
    ``num_clients``, before any node is asked: every node's policy would
    refuse a threshold outside it.

    Raises:
        ParameterError, ParameterTypeError: The threshold breaks the policy.
    """
    policy = ThresholdPolicy(
        active=fields.get("mode") == "active", corrupted=int(fields.get("corrupted", 0))
    )
    return policy.resolve(requested_threshold(run.get("threshold")), num_clients)


def run_active_fields(run: Mapping[str, Any], num_clients: int) -> dict[str, Any]:
    """:func:`active_mode_fields` from a run config's ``secagg-mode``, ``secagg-registry``
    and ``assumed-corrupted``."""
    return active_mode_fields(
        run.get("secagg-mode", "semi-honest"),
        run.get("secagg-registry"),
        num_clients=num_clients,
        corrupted=int(run.get("assumed-corrupted", 0)),
    )


def sum_round(run: Mapping[str, Any], num_clients: int, fields: dict[str, Any]) -> SecAggRound:
    """The secure-sum demo's :class:`SecAggRound` over ``num_clients`` from a run config.

    Its threshold is :func:`round_threshold`'s; ``vector-length`` (default 1000) and
    ``timeout`` (default 60 s) come from ``run``; ``fields`` are its ``config_fields``.
    """
    return SecAggRound(
        threshold=round_threshold(run, num_clients, fields),
        vector_length=int(run.get("vector-length", 1000)),
        timeout=float(run.get("timeout", 60.0)),
        config_fields=fields or None,
    )


class SecAggRound:
    """Drive one privfed secure-aggregation round per :meth:`run` over a Flower grid.

    Args:
        threshold: Shamir threshold ``t`` (see :class:`~privfed.secagg.SecAggConfig`).
        vector_length: Values per client.
        ring_bits: Ring width in bits (default 64).
        graph: ``"complete"`` or ``"harary"`` (SecAgg+).
        degree: Neighbours per client in Harary mode.
        timeout: Seconds each stage waits for replies; a node that has not
            answered by then is a dropout of that stage.  ``> 0``.
        config_fields: Further :class:`~privfed.secagg.SecAggConfig` fields:
            e.g. ``{"mode": "active", "identities": registry, "corrupted": 1}``
            for the active mode (the server's copy of the registry: each node
            refuses a round over any other than its own, and a round weaker
            than its policy; the ConsistencyCheck stage then runs between
            masked input and unmasking).
        progress: Optional callback; a
            :class:`~privfed.progress.ProgressEvent` (stage name in lower
            case) when each stage closes.
        expected_input: The noise declaration every masked input must carry
            (:class:`~privfed.flower.declaration.NoiseDeclaration`): a masked
            input without it, with another one, or with one bound to another
            session is refused (its node is a dropout of MASKED_INPUT, so its
            input never enters the total).  ``None`` (default): no declaration
            is required; those sent are recorded.

    Raises:
        ParameterError, ParameterTypeError: An argument outside its domain
            (the config's own checks run when a round starts).
    """

    def __init__(
        self,
        *,
        threshold: int,
        vector_length: int,
        ring_bits: int = 64,
        graph: GraphMode | str = GraphMode.COMPLETE,
        degree: int | None = None,
        timeout: float = 60.0,
        config_fields: Mapping[str, object] | None = None,
        progress: ProgressFn | None = None,
        expected_input: NoiseDeclaration | None = None,
    ) -> None:
        check_int("threshold", threshold, minimum=MIN_THRESHOLD)
        check_int("vector_length", vector_length, minimum=1)
        check_float("timeout", timeout, low=0.0, open_low=True, numpy=False)
        if config_fields is not None and not isinstance(config_fields, Mapping):
            raise ParameterTypeError("config_fields", "a mapping or None", config_fields)
        if expected_input is not None and not isinstance(expected_input, NoiseDeclaration):
            raise ParameterTypeError("expected_input", "a NoiseDeclaration or None", expected_input)
        self.expected_input = expected_input
        self.threshold = threshold
        self.vector_length = vector_length
        self.ring_bits = ring_bits
        self.graph = graph
        self.degree = degree
        self.timeout = float(timeout)
        self.config_fields = dict(config_fields or {})
        self.progress = progress

    def make_config(
        self, client_ids: Iterable[int], *, session_id: bytes | None = None, round_index: int = 0
    ) -> SecAggConfig:
        """The round's :class:`~privfed.secagg.SecAggConfig` for these client ids."""
        return SecAggConfig(
            client_ids=tuple(client_ids),
            threshold=self.threshold,
            vector_length=self.vector_length,
            ring_bits=self.ring_bits,
            graph=self.graph,  # type: ignore[arg-type]
            degree=self.degree,
            session_id=new_session_id() if session_id is None else session_id,
            round_index=round_index,
            **self.config_fields,  # type: ignore[arg-type]
        )

    def run(
        self,
        grid: Grid,
        clients: Mapping[int, int] | Iterable[int],
        *,
        round_index: int = 0,
        session_id: bytes | None = None,
        group_id: str | None = None,
        extra: Mapping[str, int | str | bytes] | None = None,
        absent: Iterable[int] = (),
    ) -> SecAggRoundResult:
        """Run one round over ``grid``.

        Args:
            grid: The ServerApp's grid.
            clients: ``{node_id: client_id}`` (client ids ``>= 1``, distinct),
                or node ids, numbered ``1..n`` in sorted order.
            round_index: The round's public index.
            session_id: Public session id; fresh from the OS CSPRNG by default.
            group_id: Flower group id of the messages (default: the round index).
            extra: Small public fields added to every node's ADVERTISE_KEYS
                message (e.g. job parameters), in the privfed record.
            absent: Client ids of the round that have no Flower node (they
                never connected or answered the hello): they are in the
                round's config -- whose client count a node's noise plan
                checks -- and are dropouts of ADVERTISE_KEYS.

        Returns:
            A :class:`SecAggRoundResult`.

        Raises:
            ParameterError: Bad ``clients`` map.
            ProtocolAbort: Fewer than ``threshold`` clients (or shares of a
                needed secret) remained at some stage; the round is over.
            ReconstructionError: Revealed shares are inconsistent.
        """
        mapping = _client_map(clients)
        missing = {int(c) for c in absent}
        if missing & set(mapping.values()) or any(c < 1 for c in missing):
            raise ParameterError(
                "absent", "client ids >= 1 without a node in clients", sorted(missing)
            )
        config = self.make_config(
            sorted({*mapping.values(), *missing}), session_id=session_id, round_index=round_index
        )
        group = str(round_index) if group_id is None else group_id
        return _Drive(self, grid, config, mapping, group).play(extra or {})

    def _declaration(self, content: RecordDict, session_id: bytes) -> NoiseDeclaration | None:
        """The masked input's noise declaration, checked against :attr:`expected_input`.

        Raises:
            MessageFormatError: Malformed, or bound to another session.
            DeclarationError: Missing or different while one is expected.
        """
        raw = _wire.parse_declaration(content)
        declaration = None
        if raw is not None:
            declaration, bound = NoiseDeclaration.from_bytes(raw)
            if bound != session_id:
                raise MessageFormatError("the noise declaration is bound to another session")
        wanted = self.expected_input
        if wanted is None:
            return declaration
        if declaration is None:
            raise DeclarationError(
                "the node declared no noise with its masked input (an old or different "
                f"client app); this job needs {wanted.mechanism!r} noise from every node"
            )
        differences = declaration.differences(wanted)
        if differences:
            raise DeclarationError(
                "the node's noise declaration does not match the job's plan: "
                + "; ".join(differences)
            )
        return declaration


class _Drive:
    """One round of :class:`SecAggRound` over a grid: one method per step, shared bookkeeping."""

    def __init__(
        self,
        flow: SecAggRound,
        grid: Grid,
        config: SecAggConfig,
        mapping: Mapping[int, int],
        group: str,
    ) -> None:
        self.flow = flow
        self.grid = grid
        self.server = SecAggServer(config)
        self.node_of = {cid: node for node, cid in mapping.items()}
        self.group = group
        self.state = _RoundState(config, mapping)

    def play(self, extra: Mapping[str, int | str | bytes]) -> SecAggRoundResult:
        """Every stage in protocol order (ConsistencyCheck in active mode); the result."""
        server, state, config = self.server, self.state, self.state.config
        state.stage_start = time.perf_counter()
        start = time.perf_counter()
        # An active node pins the registry (its policy refuses any other): the
        # digest is all it needs, so the download holds no one's keys.
        config_bytes = encode_config(config, registry_by_digest=True)
        fields = dict(extra)
        advertise = {
            cid: RecordDict(
                {_wire.RECORD: ConfigRecord({**fields, "config": config_bytes, "client-id": cid})}
            )
            for cid in config.client_ids
            if cid in self.node_of  # an absent client is asked nothing: a dropout of this stage
        }
        state.server[Stage.ADVERTISE_KEYS] += time.perf_counter() - start
        self.exchange(Stage.ADVERTISE_KEYS, advertise, self.receive_bytes)
        start = time.perf_counter()
        # Active SecAgg+: the roster root is fixed here, and its committee reveals.
        committee = _contents(server.committee_requests())
        state.server[Stage.ADVERTISE_KEYS] += time.perf_counter() - start
        if committee:
            self.exchange(
                Stage.ADVERTISE_KEYS,
                committee,
                self.receive_bytes,
                message_type=_wire.REVEAL_MESSAGE_TYPE,
            )
        rosters = self.close(
            Stage.ADVERTISE_KEYS,
            config.client_ids,
            server.advertised,
            lambda: _per_client(server, sorted(server.advertised)),
        )
        self.exchange(Stage.SHARE_KEYS, rosters, self.receive_bytes)
        routed = self.close(
            Stage.SHARE_KEYS,
            rosters,
            _complete_senders(server),
            lambda: _contents(server.routed_shares()),
        )
        state.dropped[Stage.SHARE_KEYS] = tuple(sorted(set(rosters) - server.shared))
        self.exchange(Stage.MASKED_INPUT, routed, self.receive_masked)
        asking = (
            (lambda: _byte_contents(server.consistency_request_bytes()))
            if config.active
            else (lambda: _contents(server.unmask_requests()))
        )
        requests = self.close(Stage.MASKED_INPUT, routed, server.survivors, asking)
        if config.active:
            self.exchange(Stage.CONSISTENCY_CHECK, requests, self.receive_bytes)
            requests = self.close(
                Stage.CONSISTENCY_CHECK,
                requests,
                server.signers,
                lambda: _contents(server.unmask_requests()),
            )
        self.exchange(Stage.UNMASKING, requests, self.receive_bytes)
        total = self.close(Stage.UNMASKING, requests, server.responders, server.finalize)
        return self.result(total)

    def result(self, total: npt.NDArray[np.uint64]) -> SecAggRoundResult:
        """The round's :class:`SecAggRoundResult`."""
        server, state = self.server, self.state
        return SecAggRoundResult(
            total=total,
            config=state.config,
            clients=MappingProxyType(dict(state.mapping)),
            survivors=tuple(sorted(server.survivors)),
            dropped=MappingProxyType(dict(state.dropped)),
            refused=MappingProxyType(dict(state.refused)),
            errors=MappingProxyType(dict(state.errors)),
            seconds=MappingProxyType(dict(state.seconds)),
            server_seconds=MappingProxyType(dict(state.server)),
            bytes_received=MappingProxyType(dict(state.received)),
            bytes_sent=MappingProxyType(dict(state.sent)),
            revealed_noise_seeds=MappingProxyType(server.revealed_noise_seeds),
            declarations=MappingProxyType(
                {cid: state.declarations.get(cid) for cid in sorted(server.survivors)}
            ),
        )

    def exchange(
        self,
        stage: Stage,
        payloads: Mapping[int, RecordDict],
        accept: Callable[[int, RecordDict], None],
        message_type: str | None = None,
    ) -> None:
        """Send each client its content; feed each reply to ``accept`` (refusals logged).

        ``message_type``: the Flower message type, if not the stage's own.
        """
        state = self.state
        start = time.perf_counter()
        messages = []
        for cid, content in payloads.items():
            state.sent[cid] = state.sent.get(cid, 0) + _wire.content_bytes(content)
            messages.append(
                Message(
                    content,
                    dst_node_id=self.node_of[cid],
                    message_type=message_type or _wire.MESSAGE_TYPES[stage],
                    group_id=self.group,
                )
            )
        state.server[stage] += time.perf_counter() - start
        replies = list(self.grid.send_and_receive(messages, timeout=self.flow.timeout))
        start = time.perf_counter()
        answered: set[int] = set()
        for reply in replies:
            found = state.mapping.get(int(reply.metadata.src_node_id))
            if found is None or found not in payloads or found in answered:
                LOG.warning("ignoring a reply from node %s", reply.metadata.src_node_id)
                continue
            answered.add(found)
            self._accept(stage, found, reply, accept)
        state.server[stage] += time.perf_counter() - start

    def _accept(
        self, stage: Stage, cid: int, reply: Message, accept: Callable[[int, RecordDict], None]
    ) -> None:
        state = self.state
        if reply.has_error():
            state.errors[cid] = str(reply.error.reason)
            LOG.warning("client %d dropped out at %s: %s", cid, stage.name, reply.error.reason)
            return
        content = reply.content
        state.received[cid] = state.received.get(cid, 0) + _wire.content_bytes(content)
        try:
            accept(cid, content)
        except _REFUSALS as exc:
            state.refused[cid] = str(exc)
            LOG.warning("refused client %d's %s reply: %s", cid, stage.name, exc)
        except Exception as exc:  # a peer's bytes must never end the round
            state.refused[cid] = f"{type(exc).__name__}: {exc}"
            LOG.error(
                "refused client %d's %s reply (unexpected %s)",
                cid,
                stage.name,
                type(exc).__name__,
                exc_info=exc,
            )

    def receive_bytes(self, cid: int, content: RecordDict) -> None:
        """A reply holding one protocol message's bytes."""
        data = _wire.get_bytes(_wire.config_record(content), "message")
        message: ProtocolMessage = decode_message(data)
        self.server.receive(message, sender=cid)

    def receive_masked(self, cid: int, content: RecordDict) -> None:
        """A masked input, with the noise declaration the round expects."""
        masked = _wire.parse_masked_input(content)
        declaration = self.flow._declaration(content, masked.session_id)
        self.server.receive(masked, sender=cid)
        self.state.declarations[cid] = declaration

    def close(
        self,
        stage: Stage,
        asked: Iterable[int],
        accepted: Iterable[int],
        fn: Callable[[], _T],
    ) -> _T:
        """Close ``stage``: record its dropouts and time, then run ``fn`` (the next payloads)."""
        state = self.state
        state.dropped[stage] = tuple(sorted(set(asked) - set(accepted)))
        start = time.perf_counter()
        try:
            return fn()
        finally:
            state.server[stage] += time.perf_counter() - start
            state.seconds[stage] = time.perf_counter() - state.stage_start
            state.stage_start = time.perf_counter()
            if self.flow.progress is not None:
                self.flow.progress(ProgressEvent(stage.name.lower(), 1, 1))


class _RoundState:
    def __init__(self, config: SecAggConfig, mapping: Mapping[int, int]) -> None:
        self.config = config
        self.mapping = mapping
        self.sent: dict[int, int] = {}
        self.received: dict[int, int] = {}
        self.refused: dict[int, str] = {}
        self.errors: dict[int, str] = {}
        self.dropped: dict[Stage, tuple[int, ...]] = {}
        self.seconds: dict[Stage, float] = {}
        # The stages this round plays (ConsistencyCheck in active mode only).
        played = _STAGES if config.active else tuple(_STAGES[i] for i in (0, 1, 2, 4))
        self.server: dict[Stage, float] = dict.fromkeys(played, 0.0)
        self.declarations: dict[int, NoiseDeclaration | None] = {}
        self.stage_start = 0.0


def _per_client(server: SecAggServer, clients: list[int]) -> dict[int, RecordDict]:
    """Each client's roster (one serialization when the graph is complete)."""
    if server.config.graph is GraphMode.COMPLETE:
        data = server.roster_bytes()
        return {cid: _wire.bytes_content(data) for cid in clients}
    return {cid: _wire.bytes_content(server.roster_bytes(cid)) for cid in clients}


def _contents(messages: Mapping[int, ProtocolMessage]) -> dict[int, RecordDict]:
    """Each client's protocol message as Flower content."""
    return {cid: _wire.bytes_content(m.to_bytes()) for cid, m in messages.items()}


def _byte_contents(messages: Mapping[int, bytes]) -> dict[int, RecordDict]:
    """Each client's serialized protocol message as Flower content."""
    return {cid: _wire.bytes_content(data) for cid, data in messages.items()}


def _complete_senders(server: SecAggServer) -> frozenset[int]:
    # Accepted bundles; the server decides completeness when it routes.
    return server.advertised


def _client_map(clients: Mapping[int, int] | Iterable[int]) -> dict[int, int]:
    if isinstance(clients, Mapping):
        mapping = {int(node): int(cid) for node, cid in clients.items()}
    elif isinstance(clients, Iterable) and not isinstance(clients, (str, bytes)):
        mapping = {int(node): i for i, node in enumerate(sorted(int(n) for n in clients), 1)}
    else:
        raise ParameterTypeError("clients", "a mapping node id -> client id, or node ids", clients)
    if len(set(mapping.values())) != len(mapping):
        raise ParameterError("clients", "distinct client ids", "duplicates")
    if len(mapping) < 2:
        raise ParameterError("clients", "at least two nodes", len(mapping))
    return mapping
