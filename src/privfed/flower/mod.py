"""The client side of a training round: a Flower Mod where ``secaggplus_mod`` goes.

:func:`secagg_mod` (or a configured :class:`SecAggMod`) wraps a ClientApp's
train handler::

    app = ClientApp(client_fn=client_fn, mods=[secagg_mod])       # NumPyClient / fit

    app = ClientApp(mods=[secagg_mod])                            # Message API
    @app.train()
    def train(msg, context): ...

It acts only on ``train`` messages that carry privfed's record with a
training stage (sent by :class:`~privfed.flower.SecAggWorkflow` or
:class:`~privfed.flower.SecAggGrid`); every other message goes to
``call_next`` untouched.  The four stages are privfed's protocol
(:class:`~privfed.secagg.SecAggClient`), with the client's state in
``Context.state`` through the versioned state codec and the node's reveal
journal, exactly as the query handlers of :mod:`privfed.flower.client`:

1. advertise keys: the round's public encoding is checked first -- a
   configuration whose sum could wrap the ring is refused before any key is
   made -- then fresh keys are made (a new client every round);
2. share keys;
3. masked input: the train handler runs on the strategy's instructions (the
   privfed record removed), and its reply -- every float array of the layout,
   the example count capped at ``max_weight``, the numeric train metrics --
   is encoded (:mod:`privfed.flower._training_wire`) and masked.  The reply
   that leaves the node holds the masked vector and the public structure
   (record names, array dtypes, metric names) only: no value, no example
   count, no metric, no non-float array, no string metric;
   With a distributed-DP plan in the encoding (:mod:`privfed.flower.dp_training`)
   the node instead clips, rotates, rounds and noises its update (new weights
   minus the instructions' weights) and sends no example count and no metric;
   it first checks the round against the plan and its policy's ``dp-max-epsilon``;
4. active mode only: the ConsistencyCheck (sign the survivor set);
5. unmask.

In the active mode the server first asks each node who it is (stage
``identify``: the node answers the id its own registry holds for its identity
key, nothing else).  At advertise keys the node checks the proposed round
against its own policy (:class:`~privfed.flower.policy.NodePolicy`, from its
node config) before any key exists, exactly as the query handlers do, and
refuses a weaker one.

Threat model: that of :mod:`privfed.flower.client` (the node trusts the
server for relaying only; its policy pins what it accepts; ``Context.state``
and the journal hold the node's round secrets, never its identity key).  The
plaintext update exists on the node only, inside this call.
"""

from __future__ import annotations

import hashlib
from typing import Final

import numpy as np
import numpy.typing as npt
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp.typing import ClientAppCallable

from privfed._checks import check_bool
from privfed.errors import MessageFormatError, ProtocolAbort
from privfed.flower import _wire
from privfed.flower._training_wire import (
    ENCODING_FIELD,
    INSTRUCTIONS_FIELD,
    NONCE_FIELD,
    STAGE_FIELD,
    STRUCTURE_FIELD,
    TrainingEncoding,
    instructions_digest,
    training_session_id,
)
from privfed.flower.client import JournalFn, _Handlers, _wire_session, default_journal
from privfed.flower.dp_training import check_private_round, encode_private_reply, layer_seeds
from privfed.flower.policy import PolicyFn, identify_payload
from privfed.secagg import SecAggConfig
from privfed.secagg.protocol.state import JournalEntry

__all__ = [
    "TRAIN_STAGES",
    "TRAIN_STATE_KEY",
    "SecAggMod",
    "carries_training_stage",
    "secagg_mod",
]

#: Where a node keeps a training round's protocol state in ``Context.state``.
TRAIN_STATE_KEY: Final = "privfed_secagg_train"
#: Where it keeps the round's public encoding (bound to the round's session).
_ENCODING_KEY: Final = "privfed_secagg_train_encoding"
#: The stage names of a training round (field ``train-stage`` of the privfed record).
TRAIN_STAGES: Final = ("identify", "advertise", "reveal", "share", "mask", "consist", "unmask")


def _is_train(message: Message) -> bool:
    kind = message.metadata.message_type
    return kind == "train" or kind.startswith("train.")


def carries_training_stage(message: Message) -> bool:
    """Whether ``message`` is a ``train`` message with privfed's training-stage record."""
    if not _is_train(message):
        return False
    if not message.has_content():
        return False
    record = message.content.config_records.get(_wire.RECORD)
    return record is not None and STAGE_FIELD in record


class SecAggMod:
    """privfed's secure aggregation as a Flower Mod, with a chosen journal.

    :func:`secagg_mod` is ``SecAggMod()``; build one to give the node another
    journal (e.g. in tests, or a path from your own node configuration).

    Args:
        journal: ``journal(context)`` -> the node's
            :class:`~privfed.secagg.protocol.state.RevealJournal`; default
            :func:`~privfed.flower.default_journal` (node config
            ``privfed-journal``, run config ``journal-dir``, else the XDG state folder).
        allow_plain_train: Whether the node also answers plain ``train``
            messages (no privfed stage) with its update in the clear; default
            ``False``: a server could otherwise bypass secure aggregation (and
            the node's policy) by sending one.
        policy: ``policy(context)`` -> the node's
            :class:`~privfed.flower.policy.NodePolicy`; default
            :func:`~privfed.flower.policy.default_policy` (its node config).
    """

    def __init__(
        self,
        *,
        journal: JournalFn | None = None,
        policy: PolicyFn | None = None,
        allow_plain_train: bool = False,
    ) -> None:
        self._journal = default_journal if journal is None else journal
        self._policy = policy
        self._allow_plain_train = check_bool("allow_plain_train", allow_plain_train)

    def __call__(self, msg: Message, ctxt: Context, call_next: ClientAppCallable) -> Message:
        """Handle ``msg``: a privfed training stage, or anything else untouched.

        Raises:
            MessageFormatError: An unknown stage or a malformed record (Flower
                turns the exception into an error reply: the node is a dropout
                of that stage).
            ProtocolAbort, RingOverflowError, ParameterError: The node refuses
                the stage (an encoding that could wrap, a reply that does not
                fit the layout, a replayed session, ...).
        """
        if not carries_training_stage(msg):
            if _is_train(msg) and not self._allow_plain_train:
                # A server that sends a plain train message would receive the node's
                # update in the clear: a node under secure aggregation never answers one.
                raise ProtocolAbort(
                    "this node trains only under privfed's secure aggregation; a plain "
                    "train message is refused (SecAggMod(allow_plain_train=True) to allow it)"
                )
            return call_next(msg, ctxt)
        stage = _wire.config_record(msg.content).get(STAGE_FIELD)
        handlers = _Handlers(
            _no_values, self._journal, layer_seeds, state_key=TRAIN_STATE_KEY, policy=self._policy
        )
        if stage == "identify":
            return _identify(msg, ctxt, handlers)
        if stage == "advertise":
            return self._advertise(msg, ctxt, handlers)
        if stage == "reveal":
            return handlers.reveal(msg, ctxt)
        if stage == "share":
            return handlers.share(msg, ctxt)
        if stage == "mask":
            return self._mask(msg, ctxt, call_next, handlers)
        if stage == "consist":
            return handlers.consistency(msg, ctxt)
        if stage == "unmask":
            return handlers.unmask(msg, ctxt)
        raise MessageFormatError(f"unknown privfed training stage {stage!r}")

    @staticmethod
    def _advertise(msg: Message, ctxt: Context, handlers: _Handlers) -> Message:
        record = _wire.config_record(msg.content)
        raw = _wire.get_bytes(record, ENCODING_FIELD)
        encoding = TrainingEncoding.from_bytes(raw)
        policy = handlers.policy(ctxt)
        config = policy.proposed_config(_wire.get_bytes(record, "config"))
        instructions = _wire.get_bytes(record, INSTRUCTIONS_FIELD)
        nonce = _wire.get_bytes(record, NONCE_FIELD)
        if config.session_id != training_session_id(nonce, raw, instructions):
            # Every node of the session holds this encoding and will check these
            # instructions: the server cannot give one node other ranges or a model.
            raise ProtocolAbort("the round's session id does not commit to its encoding")
        if config.vector_length != encoding.vector_length:
            raise MessageFormatError("the round's vector length does not match its encoding")
        # Before any key exists: a sum of this round could not wrap.
        encoding.check_no_wrap(len(config.client_ids))
        # A DP round must be the one its plan is calibrated for (and within this node's pin).
        check_private_round(encoding, config, policy)
        reply = handlers.advertise(msg, ctxt)
        ctxt.state[_ENCODING_KEY] = ConfigRecord(
            {
                "session": _wire_session(config),
                "encoding": encoding.to_bytes(),
                "instructions": instructions,
            }
        )
        return reply

    @staticmethod
    def _mask(
        msg: Message, ctxt: Context, call_next: ClientAppCallable, handlers: _Handlers
    ) -> Message:
        structure: list[bytes] = []

        def values(context: Context, config: SecAggConfig) -> npt.NDArray[np.integer]:
            encoding = _stored_encoding(context, config)
            _claim_round(handlers, context, config)
            # The handler sees the strategy's instructions only; the message is
            # left as it came (an in-process grid shares it with the server).
            records = msg.content.config_records
            ours = records.pop(_wire.RECORD)
            try:
                if instructions_digest(msg.content) != _stored_instructions(context, config):
                    raise ProtocolAbort(
                        "the train instructions are not the ones the round's session commits to"
                    )
                reply = call_next(msg, context)
            finally:
                records[_wire.RECORD] = ours
            if reply.has_error() or not reply.has_content():
                raise ProtocolAbort("the train handler replied with an error")
            if encoding.privacy is not None:
                vector, shape = encode_private_reply(
                    encoding, msg.content, reply.content, session=_wire_session(config),
                    seeds=layer_seeds(context, config, 0) if config.noise_layers else (),
                )  # fmt: skip
            else:
                vector, shape = encoding.encode(reply.content)
            structure.append(shape.to_bytes())
            return vector

        answer, _ = handlers.masked(msg, ctxt, values)
        content = _wire.masked_input_content(answer)
        content.config_records[_wire.RECORD][STRUCTURE_FIELD] = structure[0]
        return Message(content, reply_to=msg)


def _identify(msg: Message, ctxt: Context, handlers: _Handlers) -> Message:
    """Active mode: this node's client id (its registry's id of its key), signed over a nonce.

    The signature (over :func:`~privfed.flower.policy.identify_payload`) proves that
    the node holds the key, so no node can claim another's id.
    """
    policy = handlers.policy(ctxt)
    client_id, identity = policy.client_id, policy.identity
    if client_id is None or identity is None:
        raise ProtocolAbort(
            "this node has no identity for an active round (node config privfed-identity-key "
            "and privfed-registry)"
        )
    nonce = _wire.get_bytes(_wire.config_record(msg.content), "nonce")
    signature = identity.sign(identify_payload(nonce, client_id, _registry_digest(policy)))
    record = ConfigRecord({"client-id": client_id, "signature": signature})
    return Message(RecordDict({_wire.RECORD: record}), reply_to=msg)


def _stored_encoding(context: Context, config: SecAggConfig) -> TrainingEncoding:
    record = context.state.config_records.get(_ENCODING_KEY)
    if record is None or record.get("session") != _wire_session(config):
        raise ProtocolAbort("this node holds no training encoding for that session")
    return TrainingEncoding.from_bytes(record.get("encoding"))


def _registry_digest(policy: object) -> bytes:
    registry = getattr(policy, "registry", None)
    if registry is None:  # pragma: no cover -- a policy with an identity has a registry
        raise ProtocolAbort("this node has no registry for an active round")
    return bytes(registry.digest)


def _claim_round(handlers: _Handlers, context: Context, config: SecAggConfig) -> None:
    """Journal that this node contributes to round ``r`` of this Flower run, once.

    Two sessions of one round (or a round at or below one the node already
    trained for) would let a server difference two sums over different node
    sets and read one node's update; the node's durable journal refuses that
    before its handler trains.  One journal line per run: session
    ``SHA-256(tag || run id)``, step ``r + 1``, answer the session it serves.

    Raises:
        ProtocolAbort: This run's round ``>= r`` already had this node's input.
    """
    journal = handlers._journal(context)
    run = hashlib.sha256(
        b"privfed.flower.training/contribution/v1" + int(context.run_id).to_bytes(8, "big")
    ).digest()
    latest = journal.latest_step(run, 0, 0)
    step = config.round_index + 1
    if latest is not None and latest >= step:
        raise ProtocolAbort(
            f"this node already trained for round {latest - 1} of this run: it contributes "
            f"once per round, in increasing rounds (asked for round {config.round_index})"
        )
    journal.record(
        JournalEntry(
            session_id=run, round_index=0, client_id=0, step=step,
            answer=_wire_session(config).hex(),
        )
    )  # fmt: skip


def _stored_instructions(context: Context, config: SecAggConfig) -> bytes:
    record = context.state.config_records.get(_ENCODING_KEY)
    if record is None or record.get("session") != _wire_session(config):
        raise ProtocolAbort("this node holds no training encoding for that session")
    stored = record.get("instructions")
    if not isinstance(stored, bytes):
        raise ProtocolAbort("this node holds no instructions digest for that session")
    return stored


def _no_values(context: Context, config: SecAggConfig) -> npt.NDArray[np.integer]:
    raise ProtocolAbort("a training round's input comes from the train handler")  # pragma: no cover


_DEFAULT = SecAggMod()


def secagg_mod(msg: Message, ctxt: Context, call_next: ClientAppCallable) -> Message:
    """privfed's secure aggregation of a train handler's reply: a Flower Mod.

    Use it where Flower's ``secaggplus_mod`` goes (``ClientApp(..., mods=[secagg_mod])``),
    with :class:`~privfed.flower.SecAggWorkflow` (legacy strategies) or
    :class:`~privfed.flower.SecAggGrid` (Message-API strategies) on the server.
    ``SecAggMod()`` with the default journal; see :class:`SecAggMod`.
    """
    return _DEFAULT(msg, ctxt, call_next)
