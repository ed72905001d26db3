"""The client side: ``SecAggClient`` inside a Flower ``ClientApp``.

:func:`add_secagg_handlers` registers one query handler per protocol stage on
a :class:`flwr.clientapp.ClientApp` (message types ``query.privfed_secagg_*``).
Between messages the client lives only as bytes in the node's
``Context.state`` (the versioned codec of
:mod:`privfed.secagg.protocol.state`): each handler restores it, checks it
against the node's durable reveal journal, runs one step, journals the answer
*before* it leaves, and stores the new state.  A state older than the
journal (a rollback) refuses to answer.

The node's policy (:mod:`privfed.flower.policy`, from its node config) is
checked against the round the server proposes before any key is made; in the
active mode the node's identity key is read from its file and handed to the
client at every restore, never stored (the ConsistencyCheck stage,
``query.privfed_secagg_consist``, runs between masked input and unmasking).

The node's input vector is asked for only at the masked-input stage, through
the ``values`` callback, so a node can run the key stages while it is still
computing its update and its input never sits in the stored state.

Threat model: the node trusts the server for nothing but relaying; every check
of :class:`~privfed.secagg.SecAggClient` and of the node's policy applies.
The stored state holds the node's round secrets (never its identity key):
``Context.state`` stays on the SuperNode, but whoever can read the
SuperNode's state store can read them.  The journal must live on storage
that is never restored together with the state (see SECURITY.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from privfed.errors import AuthenticationError, MessageFormatError, ProtocolAbort
from privfed.flower import _wire
from privfed.flower.declaration import DeclaredInput
from privfed.flower.policy import NodePolicy, PolicyFn, default_policy, identify_payload
from privfed.secagg import (
    CommitteeRequest,
    ConsistencyRequest,
    EncryptedSharesBundle,
    MaskedInput,
    Roster,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    Stage,
    UnmaskRequest,
)
from privfed.secagg.protocol.state import (
    FileRevealJournal,
    RevealJournal,
    export_client_state,
    record_answer,
    restore_client_state,
)

__all__ = [
    "JOURNAL_NODE_CONFIG_KEY",
    "STATE_KEY",
    "JournalFn",
    "JournalIn",
    "NoiseSeedsFn",
    "ValuesFn",
    "add_secagg_handlers",
    "default_journal",
]

#: A node helps unmask a sum only if, after ``n_C`` colluders, this many honest inputs
#: remain in it (itself and at least one other): else the sum is one node's input.
MIN_HONEST_SURVIVORS: Final = 2

#: Where the node keeps its protocol state in ``Context.state``.
STATE_KEY: Final = "privfed_secagg"
#: Node-config key naming the node's journal file (``--node-config
#: 'privfed-journal=/var/lib/privfed/journal.jsonl'``).
JOURNAL_NODE_CONFIG_KEY: Final = "privfed-journal"

#: ``values(context, config) -> ring vector`` of this node for this round, or a
#: :class:`~privfed.flower.declaration.DeclaredInput` (the vector and the noise the
#: node declares it added, sent with the masked input).
ValuesFn = Callable[[Context, SecAggConfig], "npt.NDArray[np.integer] | DeclaredInput"]
#: ``noise_seeds(context, config, client_id) -> seeds``: this node's ``config.noise_layers``
#: secret 32-byte layer seeds (distributed DP with excess removal), asked for at the
#: advertise stage and Shamir-shared by the client.  Must return the same seeds when
#: asked again for the same round: the node's values callback derives its noise from them.
NoiseSeedsFn = Callable[[Context, SecAggConfig, int], Sequence[bytes]]

#: ``journal(context) -> RevealJournal`` of this node.
JournalFn = Callable[[Context], RevealJournal]


def default_journal(context: Context) -> RevealJournal:
    """The node's file journal.

    Path, first found: the node config's ``privfed-journal`` (a file); the run
    config's ``journal-dir`` (a folder; one file per node); else
    ``$XDG_STATE_HOME/privfed/journal/node-<node id>.jsonl`` (default
    ``~/.local/state``).  Deployments should set the node config key to
    durable storage that backups of the node's state do not cover.
    """
    explicit = context.node_config.get(JOURNAL_NODE_CONFIG_KEY)
    if isinstance(explicit, str) and explicit:
        return FileRevealJournal(explicit)
    folder = context.run_config.get("journal-dir")
    if not (isinstance(folder, str) and folder):
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        folder = str(Path(base) / "privfed" / "journal")
    return FileRevealJournal(Path(folder) / f"node-{context.node_id}.jsonl")


def _wire_session(config: SecAggConfig) -> bytes:
    """The session id the round's messages carry (bound to the config's digest)."""
    bound = getattr(config, "bound_session_id", None)
    return bound if isinstance(bound, bytes) else config.session_id


class JournalIn:
    """A picklable :data:`JournalFn`: one file journal per node in ``folder``.

    Args:
        folder: Directory of the journals (``node-<node id>.jsonl``).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def __call__(self, context: Context) -> RevealJournal:
        return FileRevealJournal(self.folder / f"node-{context.node_id}.jsonl")


class _Handlers:
    """The client's four stages over ``Context.state``: shared by the query handlers and the mod.

    Args:
        values: The node's input at the masked-input stage (:data:`ValuesFn`).
        journal: The node's reveal journal (:data:`JournalFn`).
        noise_seeds: The node's noise-layer seeds (:data:`NoiseSeedsFn`), or ``None``.
        state_key: Where in ``Context.state`` the protocol state lives (one
            key per kind of round, so a training round never meets a query round's state).
        policy: The node's policy (:data:`~privfed.flower.policy.PolicyFn`);
            default :func:`~privfed.flower.policy.default_policy` (node config).
    """

    def __init__(
        self,
        values: ValuesFn,
        journal: JournalFn,
        noise_seeds: NoiseSeedsFn | None = None,
        *,
        state_key: str = STATE_KEY,
        policy: PolicyFn | None = None,
    ) -> None:
        self._values = values
        self._journal = journal
        self._noise_seeds = noise_seeds
        self._state_key = state_key
        self._policy = default_policy if policy is None else policy

    def policy(self, context: Context) -> NodePolicy:
        """This node's policy, read afresh (its identity key from its file)."""
        return self._policy(context)

    # -- state -----------------------------------------------------------------------

    def _restore(self, context: Context, session_id: bytes) -> tuple[SecAggClient, RevealJournal]:
        journal = self._journal(context)
        record = context.state.config_records.get(self._state_key)
        if record is None or record.get("session") != session_id:
            raise ProtocolAbort("this node holds no protocol state for that session")
        blob = record.get("state")
        if not isinstance(blob, bytes):
            raise MessageFormatError("the node's stored protocol state is not bytes")
        # The identity key comes from the node's own file at every restore: never the state.
        identity = self.policy(context).identity
        return restore_client_state(blob, journal=journal, identity=identity), journal

    def _commit(
        self, context: Context, journal: RevealJournal, client: SecAggClient, answer: object
    ) -> None:
        # Journal first: if it refuses, nothing leaves and the state is not replaced.
        record_answer(journal, client, answer)
        context.state[self._state_key] = ConfigRecord(
            {"state": export_client_state(client), "session": _wire_session(client.config)}
        )

    @staticmethod
    def _journal_abort(journal: RevealJournal, client: SecAggClient) -> None:
        # The abort is permanent: journal it so that no older state answers again.
        if client.aborted:
            record_answer(journal, client, None)

    def _step(
        self,
        context: Context,
        session_id: bytes,
        act: Callable[[SecAggClient], object],
    ) -> object:
        client, journal = self._restore(context, session_id)
        try:
            answer = act(client)
        except (ProtocolAbort, AuthenticationError):
            self._journal_abort(journal, client)
            raise
        self._commit(context, journal, client, answer)
        return answer

    # -- the stages ------------------------------------------------------------------

    def proposed(self, message: Message, context: Context) -> tuple[SecAggConfig, int, NodePolicy]:
        """The round the server proposes, checked against this node's policy.

        Raises:
            MessageFormatError: A malformed proposal.
            ProtocolAbort: The round is weaker than the node's policy.
        """
        record = _wire.config_record(message.content)
        policy = self.policy(context)
        config = policy.proposed_config(_wire.get_bytes(record, "config"))
        client_id = _wire.get_int(record, "client-id")
        policy.check(config, client_id)
        return config, client_id, policy

    def advertise(self, message: Message, context: Context) -> Message:
        config, client_id, policy = self.proposed(message, context)
        seeds: Sequence[bytes] = ()
        if config.noise_layers:
            if self._noise_seeds is None:
                raise ProtocolAbort("this node has no noise layers to share (noise_layers > 0)")
            seeds = self._noise_seeds(context, config, client_id)
        identity = policy.identity if config.active else None
        client = SecAggClient(config, client_id, noise_seeds=seeds, identity=identity)
        journal = self._journal(context)
        if journal.knows_session(config.session_id):
            # Fresh keys for a session this node already answered -- under any client
            # id or round -- would let the server pick between two key sets: one
            # session, one client.
            raise ProtocolAbort("this node already took part in that session")
        journal.start_session(config.session_id, config.round_index, client_id)
        answer = client.advertise_keys()
        self._commit(context, journal, client, answer)
        return Message(_wire.bytes_content(answer.to_bytes()), reply_to=message)

    def share(self, message: Message, context: Context) -> Message:
        roster = Roster.from_bytes(_wire.get_bytes(_wire.config_record(message.content), "message"))
        out = self._step(context, roster.session_id, lambda c: c.share_keys(roster))
        assert isinstance(out, dict)  # noqa: S101 -- share_keys returns a dict
        bundle = EncryptedSharesBundle.from_shares([out[r] for r in sorted(out)])
        return Message(_wire.bytes_content(bundle.to_bytes()), reply_to=message)

    def masked(
        self, message: Message, context: Context, values: ValuesFn | None = None
    ) -> tuple[MaskedInput, bytes | None]:
        """Run the masked-input stage: the masked input and the node's declaration (wire form).

        ``values`` replaces the handlers' own callback for this call (the mod
        passes one that runs the train handler).
        """
        routed = RoutedShares.from_bytes(
            _wire.get_bytes(_wire.config_record(message.content), "message")
        )
        produce = self._values if values is None else values
        declared: list[bytes] = []

        def act(client: SecAggClient) -> object:
            if client.stage is not Stage.MASKED_INPUT:
                # Before the input is computed (a train handler would run again).
                raise ProtocolAbort("this node is not at the masked-input stage of that session")
            produced = produce(context, client.config)
            if isinstance(produced, DeclaredInput):
                declared.append(produced.declaration.to_bytes(_wire_session(client.config)))
                produced = produced.values
            return client.masked_input(routed, produced)

        answer = self._step(context, routed.session_id, act)
        assert isinstance(answer, MaskedInput)  # noqa: S101 -- masked_input returns one
        return answer, declared[0] if declared else None

    def mask(self, message: Message, context: Context) -> Message:
        answer, declaration = self.masked(message, context)
        content = _wire.masked_input_content(answer, declaration=declaration)
        return Message(content, reply_to=message)

    def reveal(self, message: Message, context: Context) -> Message:
        """Active SecAgg+: reveal this node's graph value for the roster root (once per session)."""
        request = CommitteeRequest.from_bytes(
            _wire.get_bytes(_wire.config_record(message.content), "message")
        )
        answer = self._step(context, request.session_id, lambda c: c.reveal(request))
        return Message(_wire.bytes_content(answer.to_bytes()), reply_to=message)  # type: ignore[attr-defined]

    def consistency(self, message: Message, context: Context) -> Message:
        """Active mode: sign the survivor set (once per session)."""
        request = ConsistencyRequest.from_bytes(
            _wire.get_bytes(_wire.config_record(message.content), "message")
        )
        answer = self._step(context, request.session_id, lambda c: c.consistency_check(request))
        return Message(_wire.bytes_content(answer.to_bytes()), reply_to=message)  # type: ignore[attr-defined]

    def unmask(self, message: Message, context: Context) -> Message:
        request = UnmaskRequest.from_bytes(
            _wire.get_bytes(_wire.config_record(message.content), "message")
        )
        policy = self.policy(context)

        def act(client: SecAggClient) -> object:
            # With n_C of the survivors colluding, fewer than two honest ones would make
            # the unmasked sum one honest input: refuse to help unmask it.
            colluders = max(client.config.corrupted, policy.assumed_corrupted)
            if len(request.survivors) - colluders < MIN_HONEST_SURVIVORS:
                raise ProtocolAbort(
                    f"{len(request.survivors)} survivors with n_C = {colluders} leave fewer "
                    f"than {MIN_HONEST_SURVIVORS} honest inputs in the sum"
                )
            return client.unmask(request)

        answer = self._step(context, request.session_id, act)
        return Message(_wire.bytes_content(answer.to_bytes()), reply_to=message)  # type: ignore[attr-defined]


def add_secagg_handlers(
    app: ClientApp,
    values: ValuesFn,
    *,
    journal: JournalFn | None = None,
    noise_seeds: NoiseSeedsFn | None = None,
    policy: PolicyFn | None = None,
) -> ClientApp:
    """Register privfed's secure-aggregation handlers on a Flower ``ClientApp``.

    Args:
        app: The ClientApp (its own mods wrap these handlers too).
        values: ``values(context, config)`` returns this node's input for the
            round: a 1-D integer numpy array of ``config.vector_length`` ring
            elements, or a :class:`~privfed.flower.declaration.DeclaredInput`
            holding it with the node's noise declaration.  Called once per
            round, at the masked-input stage.
        journal: ``journal(context)`` returns the node's durable
            :class:`~privfed.secagg.protocol.state.RevealJournal`; default
            :func:`default_journal`.
        noise_seeds: ``noise_seeds(context, config, client_id)`` returns the
            node's secret layer seeds for a round with ``config.noise_layers
            > 0`` (see :data:`NoiseSeedsFn`); without it such a round is refused.
        policy: ``policy(context)`` returns the node's
            :class:`~privfed.flower.policy.NodePolicy`; default
            :func:`~privfed.flower.policy.default_policy` (its node config).

    Returns:
        ``app``, with handlers for ``query.privfed_secagg_advertise``,
        ``..._reveal`` (active SecAgg+), ``..._share``, ``..._mask``,
        ``..._consist`` (active mode) and ``..._unmask``, and
        ``query.privfed_hello`` (the node's public partition id).

    Raises:
        ValueError: ``app`` already has a handler of one of these names
            (Flower's own check).
    """
    handlers = _Handlers(
        values, default_journal if journal is None else journal, noise_seeds, policy=policy
    )
    table = {
        Stage.ADVERTISE_KEYS: handlers.advertise,
        Stage.SHARE_KEYS: handlers.share,
        Stage.MASKED_INPUT: handlers.mask,
        Stage.CONSISTENCY_CHECK: handlers.consistency,
        Stage.UNMASKING: handlers.unmask,
    }
    for stage, handler in table.items():
        app.query(_wire.ACTIONS[stage])(handler)
    app.query(_wire.REVEAL_ACTION)(handlers.reveal)
    app.query(_wire.HELLO_ACTION)(_Hello(handlers))
    return app


class _Hello:
    """The hello handler: the node's public ``partition-id`` (node config; -1 if unset).

    Asked with a nonce (an active job), a node with an identity also answers
    its registry id, signed over the nonce
    (:func:`~privfed.flower.policy.identify_payload`).
    """

    def __init__(self, handlers: _Handlers) -> None:
        self.handlers = handlers

    def __call__(self, message: Message, context: Context) -> Message:
        raw = context.node_config.get("partition-id", -1)
        pid = int(raw) if isinstance(raw, (int, float, str)) else -1
        fields: dict[str, int | bytes] = {"partition-id": pid}
        asked = message.content.config_records.get(_wire.RECORD) if message.has_content() else None
        nonce = None if asked is None else asked.get("nonce")
        if isinstance(nonce, bytes):
            policy = self.handlers.policy(context)
            key, cid, registry = policy.identity, policy.client_id, policy.registry
            if key is not None and cid is not None and registry is not None:
                fields["client-id"] = cid
                fields["signature"] = key.sign(identify_payload(nonce, cid, registry.digest))
        record = ConfigRecord(fields)  # type: ignore[arg-type]
        return Message(RecordDict({_wire.RECORD: record}), reply_to=message)
