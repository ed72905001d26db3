"""Play a whole secure-aggregation round in one process, through serialized bytes.

:func:`run_in_memory` is the quickest way to use (and to test) the protocol: it
builds a :class:`~privfed.secagg.SecAggServer` and one
:class:`~privfed.secagg.SecAggClient` per input, and passes every message
between them as bytes (``to_bytes`` on the sender's side, ``from_bytes`` on the
receiver's), so the wire format is exercised at every hop.  Clients are played
one after another.  :func:`run_protocol` does the same and also returns
per-stage timings and byte counts (:class:`RunReport`) for benchmarks.

Dropouts are scripted: ``dropouts[stage]`` lists the indices of clients that
stop responding from ``stage`` on.  A client dropping at
:attr:`~privfed.secagg.Stage.SHARE_KEYS` delivers only the first half of its
ciphertexts (it dies while sending), which the server must discard.  Each
client sends its ciphertexts as one :class:`~privfed.secagg.EncryptedSharesBundle`.

``mode="active"`` plays the actively secure protocol: every client gets a
fresh Ed25519 identity key (unless ``identity_keys`` are given), the registry
of their public keys goes into the server's config (each client's holds the
registry's :class:`~privfed.secagg.IdentityRoot` only), and the ConsistencyCheck round runs
between masked input and unmasking.  A client dropping at
:attr:`~privfed.secagg.Stage.CONSISTENCY_CHECK` sent its masked input (it is in
the sum) but signs nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Required, TypedDict, TypeVar, Unpack

import numpy as np
import numpy.typing as npt

from privfed.errors import ParameterError, ParameterTypeError, ProtocolAbort
from privfed.progress import ProgressEvent, ProgressFn
from privfed.secagg.protocol.client import SecAggClient
from privfed.secagg.protocol.config import SecAggConfig, SecurityMode, new_session_id
from privfed.secagg.protocol.graph import GraphMode
from privfed.secagg.protocol.identity import IdentityKey, IdentityRegistry
from privfed.secagg.protocol.messages import (
    CommitteeRequest,
    ConsistencyRequest,
    EncryptedSharesBundle,
    Message,
    Roster,
    RoutedShares,
    UnmaskRequest,
    decode_message,
)
from privfed.secagg.protocol.server import SecAggServer
from privfed.secagg.protocol.stages import Stage

__all__ = ["ClientRecord", "RunReport", "run_in_memory", "run_protocol"]

_T = TypeVar("_T")
_E = TypeVar("_E", GraphMode, SecurityMode)
_STAGES = (Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.UNMASKING)
_ACTIVE_STAGES = (*_STAGES[:3], Stage.CONSISTENCY_CHECK, Stage.UNMASKING)


@dataclasses.dataclass(frozen=True)
class ClientRecord:
    """What one client did in a :func:`run_protocol` run.

    Attributes:
        client_id: The client's id (its input index plus one).
        seconds: Wall-clock seconds per stage the client ran (its own work,
            including parsing what it received and serializing what it sent).
        bytes_sent: Bytes the client sent per stage it ran.
        aborted: Whether the client aborted (an honest client aborts only when
            its neighbourhood fell below the threshold).
        signatures_made: Ed25519 signatures the client made (active mode).
        signatures_verified: Ed25519 signatures the client verified (active mode).
    """

    client_id: int
    seconds: Mapping[Stage, float]
    bytes_sent: Mapping[Stage, int]
    aborted: bool
    signatures_made: int = 0
    signatures_verified: int = 0

    @property
    def total_seconds(self) -> float:
        """Seconds over all stages."""
        return float(sum(self.seconds.values()))

    @property
    def total_bytes(self) -> int:
        """Bytes sent over all stages."""
        return int(sum(self.bytes_sent.values()))


@dataclasses.dataclass(frozen=True)
class RunReport:
    """Result and costs of one :func:`run_protocol` run.

    Attributes:
        total: The unmasked ring sum (1-D ``uint64``, entries below
            ``2**ring_bits``) of the inputs of exactly the clients in
            ``survivors``.
        config: The round's config (holds the session id).
        shared: Ids of the clients whose complete set of encrypted shares was
            routed (``U2``); ``shared - survivors`` are the clients whose
            pairwise masks the server had to remove.
        survivors: Ids of the clients whose masked input is in the sum.
        clients: One :class:`ClientRecord` per client that ran any stage.
        server_seconds: Server wall-clock seconds per stage (receiving,
            parsing, closing the stage and serializing what it publishes).
        server_bytes_sent: Bytes the server published per stage (a broadcast
            roster counted once per recipient).
        revealed_noise_seeds: ``{survivor: {layer: seed}}`` the server rebuilt
            under the noise-layer reveal rule (empty without noise layers).
        graph_seed: SecAgg+: the graph seed the roster fixed (``None`` for the
            complete graph); ``config.neighbours(id, graph_seed)`` gives the
            round's neighbourhoods.
        committee: Active SecAgg+: the clients the roster root drew to reveal
            the values that seed the graph (empty otherwise).
    """

    total: npt.NDArray[np.uint64] = dataclasses.field(repr=False)
    config: SecAggConfig
    shared: tuple[int, ...]
    survivors: tuple[int, ...]
    clients: tuple[ClientRecord, ...] = dataclasses.field(repr=False)
    server_seconds: Mapping[Stage, float]
    server_bytes_sent: Mapping[Stage, int]
    revealed_noise_seeds: Mapping[int, Mapping[int, bytes]] = dataclasses.field(
        default_factory=dict, repr=False
    )
    graph_seed: bytes | None = None
    committee: frozenset[int] = frozenset()

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages of this round's mode, in order."""
        return _ACTIVE_STAGES if self.config.active else _STAGES

    @property
    def mean_client_seconds(self) -> float:
        """Mean over clients that ran every stage of their total seconds."""
        full = [c.total_seconds for c in self.clients if len(c.seconds) == len(self.stages)]
        return float(np.mean(full)) if full else 0.0

    @property
    def total_server_seconds(self) -> float:
        """Server seconds over all stages."""
        return float(sum(self.server_seconds.values()))


def _check_inputs(inputs: object, ring_bits: object) -> Sequence[npt.NDArray[np.integer]]:
    """Check every row (type, shape, ring range) without copying any of them."""
    is_matrix = isinstance(inputs, np.ndarray) and inputs.ndim == 2
    is_sequence = isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes))
    if not (is_matrix or is_sequence):
        raise ParameterTypeError("inputs", "a sequence of 1-D integer numpy arrays", inputs)
    rows: Sequence[npt.NDArray[np.integer]] = inputs  # type: ignore[assignment]
    if len(rows) < 2:
        raise ParameterError("inputs", "at least two client vectors", len(rows))
    bits = ring_bits if isinstance(ring_bits, int) and 8 <= ring_bits <= 64 else 64
    shape = None
    for row in rows:
        if isinstance(row, np.ndarray) and np.issubdtype(row.dtype, np.floating):
            raise ParameterTypeError(
                "inputs",
                "a sequence of 1-D integer numpy arrays (ring elements); encode float "
                "vectors first with privfed.secagg.primitives.FixedPointConfig(...).encode "
                "and decode the sum",
                row,
            )
        if not isinstance(row, np.ndarray) or not np.issubdtype(row.dtype, np.integer):
            raise ParameterTypeError("inputs", "a sequence of 1-D integer numpy arrays", row)
        if row.ndim != 1 or row.shape[0] == 0 or (shape is not None and row.shape != shape):
            raise ParameterError("inputs", "non-empty 1-D vectors of one common length", row.shape)
        shape = row.shape
        if (row.dtype != np.uint64 and int(row.min()) < 0) or int(row.max()) >> bits:
            raise ParameterError("inputs", f"ring elements in [0, 2**{bits})", "<redacted>")
    return rows


def _check_dropouts(dropouts: Mapping[Stage, Iterable[int]] | None, n: int) -> dict[int, Stage]:
    stop: dict[int, Stage] = {}
    if dropouts is None:
        return stop
    if not isinstance(dropouts, Mapping):
        raise ParameterTypeError("dropouts", "a mapping from Stage to client indices", dropouts)
    for stage, indices in dropouts.items():
        if not isinstance(stage, Stage):
            raise ParameterTypeError("dropouts", "a mapping whose keys are Stage members", stage)
        for index in indices:
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
                raise ParameterTypeError("dropouts", "client indices (ints)", index)
            if not 0 <= int(index) < n:
                raise ParameterError("dropouts", f"client indices in [0, {n - 1}]", index)
            if int(index) in stop:
                raise ParameterError(
                    "dropouts", "each client index under at most one stage", int(index)
                )
            stop[int(index)] = stage
    return stop


class _RoundOptions(TypedDict, total=False):
    """The keywords :func:`run_in_memory` and :func:`run_protocol` share (see run_in_memory)."""

    threshold: Required[int]
    dropouts: Mapping[Stage, Iterable[int]] | None
    ring_bits: int
    graph: GraphMode | str
    degree: int | None
    session_id: bytes | None
    round_index: int
    progress: ProgressFn | None
    mode: SecurityMode | str
    corrupted: int
    identity_keys: Mapping[int, IdentityKey] | None
    committee_size: int | None
    committee_dropouts: int


_OPTION_NAMES = frozenset(_RoundOptions.__annotations__)


def _check_option_names(function: str, options: Mapping[str, object]) -> None:
    """The ``TypeError`` Python raises for an unknown or missing keyword argument."""
    for name in options:
        if name not in _OPTION_NAMES:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    if "threshold" not in options:
        raise TypeError(f"{function}() missing 1 required keyword-only argument: 'threshold'")


def _enum_option(kind: type[_E], name: str, domain: str, value: _E | str) -> _E:
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            raise ParameterError(name, domain, value) from None
    return value


def _identities(
    mode: SecurityMode,
    identity_keys: Mapping[int, IdentityKey] | None,
    ids: tuple[int, ...],
    corrupted: int,
) -> tuple[Mapping[int, IdentityKey] | None, IdentityRegistry | None]:
    """Active mode: the clients' identity keys (fresh ones unless given) and their registry."""
    if mode is SecurityMode.ACTIVE:
        if identity_keys is None:
            identity_keys = {cid: IdentityKey.generate() for cid in ids}
        if not isinstance(identity_keys, Mapping):
            raise ParameterTypeError("identity_keys", "a mapping id -> IdentityKey", identity_keys)
        return identity_keys, IdentityRegistry.of(identity_keys, assumed_corrupted=corrupted)
    if identity_keys is not None:
        raise ParameterError("identity_keys", "None in semi-honest mode", "keys")
    return None, None


def _no_input(_: int) -> None:
    return None


class _StreamedParts(Mapping[int, bytes]):
    """SecAgg+ roster parts, each built and serialized when its client is handed it.

    A deployment's server streams every client its part; building all ``N``
    before handing out the first would hold ``O(N k log N)`` bytes at once (4 GB
    at N = 30,000).  The server builds the parts in id-order batches either way
    (:data:`~privfed.secagg.protocol._roster_check.PROOF_BATCH`), written
    straight to their bytes (:meth:`SecAggServer.roster_bytes`), and every part
    is still its ADVERTISE_KEYS work: timed as such and counted as sent.  Each
    part is handed over once, in id order (a second look builds it again).
    """

    def __init__(self, played: _Round, ids: Sequence[int]) -> None:
        self._played, self._ids = played, frozenset(ids)
        self._order = sorted(ids)
        self._first = {self._order[0]: self._build(self._order[0])} if ids else {}

    def _build(self, cid: int) -> bytes:
        stage = Stage.ADVERTISE_KEYS
        data = self._played.server_close(stage, lambda: self._played.server.roster_bytes(cid))
        self._played.count_sent(stage, len(data))
        return data

    def __getitem__(self, cid: int) -> bytes:
        if cid not in self._ids:
            raise KeyError(cid)
        first = self._first.pop(cid, None)
        return self._build(cid) if first is None else first

    def __contains__(self, cid: object) -> bool:
        return cid in self._ids

    def __iter__(self) -> Iterator[int]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


def _serialized(messages: Mapping[int, Message]) -> dict[int, bytes]:
    """``{client: message.to_bytes()}``, a message sent to many clients serialized once."""
    encoded: dict[int, bytes] = {}
    for message in messages.values():
        if id(message) not in encoded:
            encoded[id(message)] = message.to_bytes()
    return {cid: encoded[id(m)] for cid, m in messages.items()}


class _Round:
    """One round played in memory: the parties, the scripted dropouts and the costs so far.

    Each protocol stage is one method; each passes what the server published
    to the next as bytes, keyed by client id.
    """

    def __init__(
        self,
        config: SecAggConfig,
        clients: list[SecAggClient],
        rows: Sequence[npt.NDArray[np.integer]],
        stop: Mapping[int, Stage],
        progress: ProgressFn | None,
    ) -> None:
        n = len(clients)
        self.config = config
        self.clients = clients
        self.server = SecAggServer(config)
        self.rows = rows
        self.stop = stop
        self.progress = progress
        self.seconds: list[dict[Stage, float]] = [{} for _ in range(n)]
        self.sent: list[dict[Stage, int]] = [{} for _ in range(n)]
        self.aborted = [False] * n
        self.server_seconds: dict[Stage, float] = {}
        self.server_sent: dict[Stage, int] = {}

    # -- the bookkeeping of every stage ------------------------------------------------

    def active(self, index: int, stage: Stage) -> bool:
        """Whether client ``index`` still answers at ``stage``."""
        stop = self.stop.get(index)
        return not self.aborted[index] and (stop is None or stop > stage)

    def order(self, stage: Stage, addressed: Mapping[int, bytes] | None = None) -> list[int]:
        """The clients that answer at ``stage`` (of those the server addressed, if given)."""
        return [
            i
            for i in range(len(self.clients))
            if (addressed is None or (i + 1) in addressed) and self.active(i, stage)
        ]

    def _tick(self, stage: Stage, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(ProgressEvent(stage.name.lower(), done, total))

    def _server_receive(self, stage: Stage, data: bytes, client_id: int) -> None:
        # ``client_id``: the transport's word for who sent the bytes -- here the
        # client object that produced them.
        start = time.perf_counter()
        self.server.receive(decode_message(data), sender=client_id)
        self._server_time(stage, start)

    def _server_time(self, stage: Stage, start: float) -> None:
        spent = time.perf_counter() - start
        self.server_seconds[stage] = self.server_seconds.get(stage, 0.0) + spent

    def server_close(self, stage: Stage, close: Callable[[], _T]) -> _T:
        """Run the server call that closes ``stage``, timed as the server's work."""
        start = time.perf_counter()
        try:
            return close()
        finally:
            self._server_time(stage, start)

    def play_replies(
        self,
        stage: Stage,
        order: list[int],
        act: Callable[[int, _T], bytes],
        fetch: Callable[[int], _T],
    ) -> None:
        """Run one stage in which each client answers with one message to the server.

        ``fetch(i)`` prepares client ``i``'s local data outside the timed region;
        ``act(i, data)`` is the client's timed work and returns the bytes it
        sends (empty: it sends nothing).
        """
        for done, i in enumerate(order, 1):
            local = fetch(i)
            start = time.perf_counter()
            try:
                data = act(i, local)
            except ProtocolAbort:
                self.aborted[i] = True
                self.seconds[i][stage] = time.perf_counter() - start
                continue
            # A committee member answers twice in ADVERTISE_KEYS: both count.
            self.seconds[i][stage] = self.seconds[i].get(stage, 0.0) + time.perf_counter() - start
            self.sent[i][stage] = self.sent[i].get(stage, 0) + len(data)
            if data:
                self._server_receive(stage, data, i + 1)
            self._tick(stage, done, len(order))

    def play_answers(
        self,
        stage: Stage,
        published: Mapping[int, bytes],
        answer: Callable[[SecAggClient, bytes, _T], Message],
        fetch: Callable[[int], _T] = _no_input,  # type: ignore[assignment]  # _T is None then
    ) -> None:
        """:meth:`play_replies` for the clients the server addressed at ``stage``.

        ``answer(client, data, local)`` parses ``data``, what the server
        published for ``client``, and returns the client's reply.
        """
        self.play_replies(
            stage,
            self.order(stage, published),
            lambda i, local: answer(self.clients[i], published[i + 1], local).to_bytes(),
            fetch,
        )

    def publish(
        self, stage: Stage, produce: Callable[[], Mapping[int, Message]]
    ) -> dict[int, bytes]:
        """Close ``stage`` on the server and serialize what it sends to each client."""

        return self.publish_bytes(stage, lambda: _serialized(produce()))

    def publish_bytes(
        self, stage: Stage, produce: Callable[[], dict[int, bytes]]
    ) -> dict[int, bytes]:
        """Close ``stage`` on the server with what it sends each client, already serialized."""
        out = self.server_close(stage, produce)
        self.count_sent(stage, sum(len(b) for b in out.values()))
        return out

    def count_sent(self, stage: Stage, size: int) -> None:
        """Count ``size`` bytes the server sent in ``stage``."""
        self.server_sent[stage] = self.server_sent.get(stage, 0) + size

    # -- the stages, in protocol order ---------------------------------------------------

    def advertise_keys(self) -> Mapping[int, bytes]:
        """ADVERTISE_KEYS; returns each advertiser's roster."""
        stage = Stage.ADVERTISE_KEYS
        order = self.order(stage)
        self.play_replies(
            stage, order, lambda i, _: self.clients[i].advertise_keys().to_bytes(), _no_input
        )
        # Active SecAgg+: the roster root is fixed, and its committee reveals.
        asked = self.publish(stage, self.server.committee_requests)
        self.play_answers(
            stage, asked, lambda client, data, _: client.reveal(CommitteeRequest.from_bytes(data))
        )

        if self.config.graph is GraphMode.COMPLETE:
            # One roster, broadcast to everyone (its bytes counted once per recipient).
            return self.publish(
                stage, lambda: dict.fromkeys((i + 1 for i in order), self.server.roster())
            )
        # SecAgg+: each client gets the entries of its own neighbourhood only, built
        # when it is handed over (the first now, which closes the stage).
        return _StreamedParts(self, [i + 1 for i in order])

    def share_keys(self, rosters: Mapping[int, bytes]) -> dict[int, bytes]:
        """SHARE_KEYS (clients dropping here send half their ciphertexts, then die)."""
        stage = Stage.SHARE_KEYS

        def share(i: int, roster: bytes) -> bytes:
            outgoing = self.clients[i].share_keys(Roster.from_bytes(roster))
            items = [outgoing[r] for r in sorted(outgoing)]
            if not self.active(i, stage):
                items = items[: len(items) // 2]
            return EncryptedSharesBundle.from_shares(items).to_bytes() if items else b""

        # The roster is fetched outside the client's timed work (a part is the server's).
        self.play_replies(stage, self.order(Stage.ADVERTISE_KEYS), share, lambda i: rosters[i + 1])
        return self.publish(stage, self.server.routed_shares)

    def masked_input(self, routed: Mapping[int, bytes]) -> tuple[Stage, dict[int, bytes]]:
        """MASKED_INPUT, then (active mode) CONSISTENCY_CHECK; returns the unmask requests.

        Fetching an input (which the caller may compute lazily) is the caller's
        work, not the client's protocol work, so it is not timed.  The stage
        returned is the one whose closing published the requests.
        """
        stage = Stage.MASKED_INPUT
        self.play_answers(
            stage,
            routed,
            lambda client, data, values: client.masked_input(RoutedShares.from_bytes(data), values),
            fetch=lambda i: self.rows[i],
        )
        if self.config.active:
            consistency = self.publish_bytes(stage, self.server.consistency_request_bytes)
            stage = Stage.CONSISTENCY_CHECK
            self.play_answers(
                stage,
                consistency,
                lambda client, data, _: client.consistency_check(
                    ConsistencyRequest.from_bytes(data)
                ),
            )
        return stage, self.publish(stage, self.server.unmask_requests)

    def unmask(self, requests: Mapping[int, bytes]) -> npt.NDArray[np.uint64]:
        """UNMASKING; returns the server's sum."""
        stage = Stage.UNMASKING
        self.play_answers(
            stage, requests, lambda client, data, _: client.unmask(UnmaskRequest.from_bytes(data))
        )
        return self.server_close(stage, self.server.finalize)

    def report(self, total: npt.NDArray[np.uint64]) -> RunReport:
        """The :class:`RunReport` of the finished round."""
        server = self.server
        records = tuple(
            ClientRecord(
                client_id=i + 1,
                seconds=MappingProxyType(self.seconds[i]),
                bytes_sent=MappingProxyType(self.sent[i]),
                aborted=self.aborted[i],
                signatures_made=client.signatures_made,
                signatures_verified=client.signatures_verified,
            )
            for i, client in enumerate(self.clients)
            if self.seconds[i]
        )
        return RunReport(
            total=total,
            config=self.config,
            shared=tuple(sorted(server.shared)),
            survivors=tuple(sorted(server.survivors)),
            clients=records,
            server_seconds=MappingProxyType(self.server_seconds),
            server_bytes_sent=MappingProxyType(self.server_sent),
            revealed_noise_seeds=server.revealed_noise_seeds,
            graph_seed=server.graph_seed,
            committee=server.committee,
        )


def run_protocol(
    inputs: Sequence[npt.NDArray[np.integer]],
    *,
    noise_layers: int = 0,
    noise_seeds: Sequence[Sequence[bytes]] | None = None,
    **options: Unpack[_RoundOptions],
) -> RunReport:
    """Play one round for ``len(inputs)`` clients and report the sum and its costs.

    Arguments are those of :func:`run_in_memory`, plus ``noise_layers`` (see
    :class:`~privfed.secagg.SecAggConfig`) and ``noise_seeds``: one sequence of
    ``noise_layers`` 32-byte seeds per client.

    Returns:
        A :class:`RunReport`.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain (see
            :class:`~privfed.secagg.SecAggConfig` for the config's domains).
        ProtocolAbort: The server aborted: fewer than ``threshold`` clients
            (or shares of a needed secret) remained at some stage.
        TypeError: An unknown keyword, or no ``threshold``.
    """
    _check_option_names("run_protocol", options)
    ring_bits = options.get("ring_bits", 64)
    rows = _check_inputs(inputs, ring_bits)
    n = len(rows)
    stop = _check_dropouts(options.get("dropouts"), n)
    graph = _enum_option(
        GraphMode, "graph", "'complete' or 'harary'", options.get("graph", GraphMode.COMPLETE)
    )
    mode = _enum_option(
        SecurityMode,
        "mode",
        "'semi-honest' or 'active'",
        options.get("mode", SecurityMode.SEMI_HONEST),
    )
    ids = tuple(range(1, n + 1))
    corrupted = options.get("corrupted", 0)
    identity_keys, registry = _identities(mode, options.get("identity_keys"), ids, corrupted)
    if noise_seeds is not None and len(noise_seeds) != n:
        raise ParameterError(
            "noise_seeds", f"one sequence of seeds per client ({n})", len(noise_seeds)
        )
    session_id = options.get("session_id")
    config = SecAggConfig(
        client_ids=ids,
        threshold=options["threshold"],
        vector_length=int(rows[0].shape[0]),
        ring_bits=ring_bits,
        graph=graph,
        degree=options.get("degree"),
        session_id=new_session_id() if session_id is None else session_id,
        round_index=options.get("round_index", 0),
        mode=mode,
        corrupted=corrupted,
        noise_layers=noise_layers,
        identities=registry,
        committee_size=options.get("committee_size"),
        committee_dropouts=options.get("committee_dropouts", 0),
    )
    # Inputs are handed over at the masked-input stage, so only one client's
    # copy is alive at a time.  Active clients hold the registry's root only, as
    # a deployment's would: every key they use comes with its proof.
    client_config = config.for_clients()
    clients = [
        SecAggClient(
            client_config,
            i + 1,
            identity=None if identity_keys is None else identity_keys[i + 1],
            noise_seeds=() if noise_seeds is None else noise_seeds[i],
        )
        for i in range(n)
    ]
    played = _Round(config, clients, rows, stop, options.get("progress"))
    rosters = played.advertise_keys()
    routed = played.share_keys(rosters)
    _, requests = played.masked_input(routed)
    return played.report(played.unmask(requests))


def run_in_memory(
    inputs: Sequence[npt.NDArray[np.integer]], **options: Unpack[_RoundOptions]
) -> npt.NDArray[np.uint64]:
    """Securely sum ``inputs`` with one in-memory round of double-masking SecAgg.

    Every message crosses a serialization boundary, so this exercises the same
    code a networked deployment would.  It is meant for tests, benchmarks and
    simulations: all parties live in one process, so it offers no privacy by
    itself.

    Args:
        inputs: One 1-D integer numpy array per client (client ``i`` gets id
            ``i + 1``), all of one length, entries in ``[0, 2**ring_bits)``
            (e.g. fixed-point encodings from
            :class:`~privfed.secagg.primitives.fixedpoint.FixedPointConfig`).
        threshold: Shamir threshold ``t`` (see
            :class:`~privfed.secagg.SecAggConfig`).
        dropouts: ``{stage: client indices}``: these clients stop responding
            from that stage on (each index under at most one stage).  Stage
            ``ADVERTISE_KEYS``: never shows up; ``SHARE_KEYS``: advertises keys,
            then dies half-way through sending its ciphertexts;
            ``MASKED_INPUT``: shares keys but sends no masked input (its input
            is left out of the sum); ``UNMASKING``: sends its masked input (it
            is in the sum) but does not answer the unmasking request.
        ring_bits: Ring width in bits, in ``[8, 64]`` (default 64).
        graph: ``"complete"`` (Bonawitz) or ``"harary"`` (SecAgg+).
        degree: Neighbours per client in Harary mode (``None`` otherwise).
        session_id: Public session id; fresh from the OS CSPRNG by default.
        round_index: Public round index.
        progress: Optional callback; receives a :class:`privfed.progress.ProgressEvent`
            after each client finishes a stage (``stage`` is the stage's name in
            lower case, e.g. ``"share_keys"``).
        mode: ``"semi-honest"`` (default) or ``"active"`` (signed keys against
            a registry of fresh identity keys, the ConsistencyCheck round).
        corrupted: ``n_C`` of :class:`~privfed.secagg.SecAggConfig` (active
            mode refuses ``2 * threshold <= s + corrupted``).
        identity_keys: Active mode: ``{client id: IdentityKey}`` to use
            instead of fresh ones.
        committee_size, committee_dropouts: Active SecAgg+: the graph-seed
            committee of :class:`~privfed.secagg.SecAggConfig` (default: its
            default size, no member may fail to reveal).

    Returns:
        The ring sum (1-D ``uint64``, modulo ``2**ring_bits``) of the inputs of
        every client that delivered its masked input -- exactly, with no
        rounding.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain.
        ProtocolAbort: Fewer than ``threshold`` clients (or shares of a needed
            secret) remained at some stage.
        TypeError: An unknown keyword, or no ``threshold``.
    """
    _check_option_names("run_in_memory", options)
    return run_protocol(inputs, **options).total
