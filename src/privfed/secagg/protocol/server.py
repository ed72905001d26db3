"""The server side of secure aggregation: a message-driven state machine.

A :class:`SecAggServer` collects each stage's messages with
:meth:`~SecAggServer.receive`, then closes the stage with the call that
publishes what the clients need next:

1. ADVERTISE_KEYS: ``receive(AdvertiseKeys)`` ... then :meth:`~SecAggServer.roster`
2. SHARE_KEYS: ``receive(EncryptedShares)`` or ``receive(EncryptedSharesBundle)``
   (a client's ciphertexts together, taken whole or not at all) ... then
   :meth:`~SecAggServer.routed_shares`
3. MASKED_INPUT: ``receive(MaskedInput)`` ... then
   :meth:`~SecAggServer.unmask_requests` (semi-honest) or
   :meth:`~SecAggServer.consistency_requests` (active mode)
3b. CONSISTENCY_CHECK (active mode): ``receive(ConsistencySignature)`` ...
   then :meth:`~SecAggServer.unmask_requests`, which forwards to each signer
   ``threshold`` signatures on the survivor set
4. UNMASKING: ``receive(UnmaskResponse)`` ... then :meth:`~SecAggServer.finalize`,
   which returns the ring sum of exactly the clients whose masked input was
   accepted.

Errors: a message that cannot be accepted (another session or round, a wrong
stage -- e.g. a masked input that arrives after unmasking started --, an
unknown or duplicate sender, content that does not fit the round) raises
:class:`~privfed.errors.ProtocolAbort` *for that message only*: the server's
state is unchanged and the round goes on.  When a stage cannot be closed
(fewer than ``threshold`` clients left, too few shares to unmask someone), the
closing call raises :class:`~privfed.errors.ProtocolAbort` and the server is
aborted for good (:attr:`SecAggServer.aborted`).  Reconstructed secrets are
verified before use; a failure raises
:class:`~privfed.errors.ReconstructionError` without changing the state.

Cost: the work per ciphertext and per share is done on arrays -- parsed
messages keep their items packed (see :mod:`~privfed.secagg.protocol.messages`),
routing moves whole records, and the secrets rebuilt from the shares of the
same responders share one set of Lagrange weights
(:func:`~privfed.secagg.primitives.shamir.combine_batches`).  Messages built by
hand take the item-by-item path, with the same checks and results.

Threat model (see SECURITY.md): in semi-honest mode the server is
honest-but-curious.  It learns the sum of the surviving clients' inputs and
who dropped out, nothing else, as long as fewer than ``threshold`` clients of
any neighbourhood collude with it.  In active mode the clients' checks, not
this class, carry the security: the server verifies signatures only so that
it never forwards junk.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Callable, Container, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from privfed._checks import check_bool, check_int
from privfed.errors import (
    ParameterError,
    ParameterTypeError,
    ProtocolAbort,
    ReconstructionError,
)
from privfed.secagg.primitives import keys, prg
from privfed.secagg.protocol._committee_round import CommitteeRefusedError, CommitteeRound
from privfed.secagg.protocol._party import Party, refusal
from privfed.secagg.protocol._roster_check import (
    identity_proofs,
    neighbourhood_proofs,
    pick,
    roster_parts,
    roster_tree,
    survivor_payload,
    survivor_tree,
)
from privfed.secagg.protocol._roster_wire import (
    PartBatches,
    PartWriter,
    consistency_request_wires,
)
from privfed.secagg.protocol._routing import route_items, route_packed
from privfed.secagg.protocol._unmasking import RevealedShares, unmask_requests_for
from privfed.secagg.protocol.commitment import (
    noise_layers_to_reveal,
    self_mask_commitment,
)
from privfed.secagg.protocol.config import MAX_CLIENT_ID, SecAggConfig
from privfed.secagg.protocol.graph import (
    GraphMode,
    advertisement_hash,
    graph_seed_of_root,
    graph_session,
)
from privfed.secagg.protocol.identity import IdentityRegistry, advertisement_payload
from privfed.secagg.protocol.messages import (
    AdvertiseKeys,
    CommitteeRequest,
    CommitteeReveal,
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    EncryptedSharesBundle,
    MaskedInput,
    Message,
    Roster,
    RosterEntry,
    RoutedShares,
    UnmaskRequest,
    UnmaskResponse,
)
from privfed.secagg.protocol.roster_tree import RosterTree
from privfed.secagg.protocol.stages import Stage

__all__ = ["SecAggServer"]

_ClientMessage = (
    AdvertiseKeys
    | CommitteeReveal
    | EncryptedShares
    | EncryptedSharesBundle
    | MaskedInput
    | ConsistencySignature
    | UnmaskResponse
)


class _Phase(enum.Enum):
    ADVERTISE = Stage.ADVERTISE_KEYS
    SHARE = Stage.SHARE_KEYS
    MASK = Stage.MASKED_INPUT
    CONSIST = Stage.CONSISTENCY_CHECK
    UNMASK = Stage.UNMASKING
    DONE = "done"
    ABORTED = "aborted"


# How a late-stage message from a client the stage does not expect, or a second one, is
# refused: (what the unexpected sender did not do, what the message is called).
_ADMISSION = {
    _Phase.MASK: ("did not share keys", "masked input"),
    _Phase.CONSIST: ("is not a survivor", "signature"),
    _Phase.UNMASK: ("was not asked to unmask", "response"),
}


class SecAggServer(Party):
    """The server of one secure-aggregation round.

    Args:
        config: The round's public parameters (the same as every client's).
        check_all_shares: How many revealed shares go into each
            reconstruction.  ``False`` (default): exactly ``threshold`` shares
            (those of the lowest responder ids).  ``True``: every share
            received, so that :func:`~privfed.secagg.primitives.shamir.combine`
            also checks that they lie on one polynomial -- this flags *any*
            inconsistent share, at about four times the reconstruction cost for
            ``n = 100, t = 51``.  Either way every rebuilt secret is verified
            against its commitment or public key before use, so a wrong share
            can never produce a wrong sum; the option only decides whether
            surplus shares are cross-checked too.

    Raises:
        ParameterTypeError: An argument has the wrong type.
    """

    def __init__(self, config: SecAggConfig, *, check_all_shares: bool = False) -> None:
        if not isinstance(config, SecAggConfig):
            raise ParameterTypeError("config", "a SecAggConfig", config)
        check_bool("check_all_shares", check_all_shares)
        if config.active and not isinstance(config.identities, IdentityRegistry):
            raise ParameterError(
                "config",
                "an active config holding the full IdentityRegistry (a server checks "
                "every client's signatures and proves their keys to the others)",
                "a config holding the registry's root only",
            )
        self._check_all = check_all_shares
        self._config = config
        self._phase = _Phase.ADVERTISE
        self._advertised: dict[int, AdvertiseKeys] = {}
        self._public_keys: set[bytes] = set()
        # SHARE_KEYS: per sender, the recipients it has sent ciphertexts to, and
        # the ciphertexts: one bundle kept packed as parsed, or single items.
        self._received: dict[int, set[int]] = {}
        self._bundles: dict[int, EncryptedSharesBundle] = {}
        self._ciphertexts: dict[int, dict[int, EncryptedShares]] = {}
        self._shared: frozenset[int] = frozenset()
        self._total: npt.NDArray[np.uint64] | None = None
        self._masked: set[int] = set()
        self._requests: dict[int, UnmaskRequest] = {}
        self._responses: dict[int, UnmaskResponse] = {}
        # UNMASKING: the revealed shares, checked and kept packed.
        self._reveals = RevealedShares(config.threshold, check_all_shares, self._require_quorum)
        self._roster: Roster | None = None
        self._tree: RosterTree | None = None
        self._leaf_of: dict[int, int] = {}
        # SecAgg+ roster parts built ahead (asked in id order): as messages, or as bytes.
        self._parts: PartBatches[Roster] | None = None
        self._part_wires: PartBatches[bytes] | None = None
        # Active SecAgg+: the committee that reveals the graph seed's values.
        self._committee: CommitteeRound | None = None
        self._committee_items: tuple[tuple[int, int, bytes, bytes, bytes], ...] = ()
        self._graph_seed: bytes | None = None
        self._round_session = config.bound_session_id
        self._bound_session = config.bound_session_id
        self._result: npt.NDArray[np.uint64] | None = None
        # Active mode: the survivor set sent for signing and the valid signatures.
        self._survivor_set: tuple[int, ...] = ()
        self._survivor_root = b""
        self._survivor_payload = b""
        self._signatures: dict[int, bytes] = {}
        # Noise layers: the seeds rebuilt under the reveal rule.
        self._noise_seeds: dict[int, dict[int, bytes]] = {}

    def __repr__(self) -> str:
        return (
            f"SecAggServer(clients={self._config.num_clients}, "
            f"threshold={self._config.threshold}, state={self._phase.name.lower()})"
        )

    # -- public state ------------------------------------------------------------

    @property
    def config(self) -> SecAggConfig:
        """The round's public parameters."""
        return self._config

    @property
    def stage(self) -> Stage | None:
        """The stage being collected; ``None`` once finalized or aborted."""
        value = self._phase.value
        return value if isinstance(value, Stage) else None

    @property
    def aborted(self) -> bool:
        """Whether the round has been aborted (permanently)."""
        return self._phase is _Phase.ABORTED

    @property
    def advertised(self) -> frozenset[int]:
        """Clients whose keys were accepted (``U1``)."""
        return frozenset(self._advertised)

    @property
    def shared(self) -> frozenset[int]:
        """Clients whose complete set of encrypted shares was routed (``U2``)."""
        return self._shared

    @property
    def survivors(self) -> frozenset[int]:
        """Clients whose masked input was accepted (``U3``): the sum covers them."""
        return frozenset(self._masked)

    @property
    def dropped(self) -> frozenset[int]:
        """Clients that shared keys but delivered no masked input (``U2 \\ U3``)."""
        return self._shared - self._masked

    @property
    def responders(self) -> frozenset[int]:
        """Clients whose unmasking response was accepted."""
        return frozenset(self._responses)

    @property
    def graph_seed(self) -> bytes | None:
        """SecAgg+: the graph seed the roster fixed (``None`` before; always for complete)."""
        return self._graph_seed

    @property
    def signers(self) -> frozenset[int]:
        """Active mode: clients whose ConsistencyCheck signature was accepted."""
        return frozenset(self._signatures)

    @property
    def revealed_noise_seeds(self) -> dict[int, dict[int, bytes]]:
        """After :meth:`finalize`: ``{survivor: {layer j: seed}}`` rebuilt under the reveal rule.

        Empty without noise layers (or before finalize).  The DP layer removes
        the noise these seeds generate from the sum.
        """
        return {owner: dict(layers) for owner, layers in self._noise_seeds.items()}

    def neighbours(self, client_id: int) -> frozenset[int]:
        """The neighbours of ``client_id`` in this round's graph (SecAgg+: once the roster is out).

        Raises:
            ParameterError: Unknown client, or a SecAgg+ graph not fixed yet.
        """
        return self._config.neighbours(client_id, self._graph_seed)

    def _hood(self, client_id: int) -> frozenset[int]:
        # The server needs every neighbourhood: the whole graph, built once per seed.
        if self._graph_seed is None:
            return self._config.neighbours(client_id)
        return self._config.neighbourhoods(self._graph_seed)[client_id]

    # -- helpers -----------------------------------------------------------------

    def _refuse(self, reason: str, stage: Stage | None) -> ProtocolAbort:
        return refusal(reason, stage)

    def _abort(self, reason: str, stage: Stage) -> ProtocolAbort:
        self._phase = _Phase.ABORTED
        self._ciphertexts = {}
        self._bundles = {}
        self._received = {}
        self._reveals.clear()
        self._responses = {}
        self._total = None
        return ProtocolAbort(reason, stage=stage.name)

    def _require(self, phase: _Phase) -> Stage:
        stage = phase.value
        if not isinstance(stage, Stage):  # pragma: no cover -- internal use only
            raise TypeError(phase)
        if self._phase is _Phase.ABORTED:
            raise ProtocolAbort("the round has been aborted", stage=stage.name)
        if self._phase is not phase:
            current = self.stage.name if self.stage is not None else "the end"
            raise ProtocolAbort(f"call out of order: the server is at {current}", stage=stage.name)
        return stage

    # -- receiving ---------------------------------------------------------------

    def receive(self, message: Message, *, sender: int) -> None:
        """Accept one client message of the current stage.

        Args:
            message: An :class:`AdvertiseKeys`, :class:`EncryptedShares`,
                :class:`EncryptedSharesBundle` (taken whole or not at all),
                :class:`MaskedInput`, :class:`ConsistencySignature` (active
                mode) or :class:`UnmaskResponse` (parse bytes with
                ``from_bytes`` or :func:`decode_message` first).  In active
                mode an advertisement or survivor-set signature that does not
                verify against the registry is refused.
            sender: The authenticated identity of whoever delivered the
                message: the transport's word (e.g. the Flower node mapped to
                a client id), never a field of the message itself.  A message
                whose ``sender`` field names another client is refused, so no
                client can speak in another's name (e.g. forge a masked input
                for a peer that dropped).

        Raises:
            ParameterTypeError: ``message`` is not a client-to-server message,
                or ``sender`` is not an int.
            ParameterError: ``sender`` is not a client id (``[1, 2**32 - 1]``).
            ProtocolAbort: The message is refused (state unchanged): it names
                another sender than ``sender``, the round
                is aborted or finished, another session or round, another
                stage (late or early), an unknown or duplicate sender, or
                content that does not fit the round (listed per type below).
            MessageFormatError: An :class:`UnmaskResponse` carries a share that
                is not a valid serialized Shamir share.
        """
        receive = _RECEIVERS.get(type(message))
        if receive is None:
            raise ParameterTypeError("message", "a client-to-server protocol message", message)
        if type(sender) is not int or not 1 <= sender <= MAX_CLIENT_ID:
            check_int("sender", sender, minimum=1, maximum=MAX_CLIENT_ID)
        claimed = cast("_ClientMessage", message).sender
        if claimed != sender:
            stage = self.stage
            raise self._refuse(
                f"it names client {claimed} but was delivered by client {sender}", stage
            )
        receive(self, message)

    def _precheck(self, message: Message, expected: _Phase) -> Stage:
        stage = expected.value
        if not isinstance(stage, Stage):  # pragma: no cover -- internal use only
            raise TypeError(expected)
        if (
            message.session_id != self._bound_session
            or message.round_index != self._config.round_index
        ):
            raise self._refuse("it belongs to another session, round or configuration", stage)
        if self._phase is _Phase.ABORTED:
            raise self._refuse("the round has been aborted", stage)
        if self._phase is not expected:
            when = (
                "late"
                if self._phase is _Phase.DONE
                or (isinstance(self._phase.value, Stage) and self._phase.value > stage)
                else "early"
            )
            raise self._refuse(f"it arrived {when} (the server is past or before its stage)", stage)
        return stage

    def _receive_keys(self, message: AdvertiseKeys) -> None:
        stage = self._precheck(message, _Phase.ADVERTISE)
        sender = message.sender
        if sender not in self._config.client_ids:
            raise self._refuse(f"unknown sender {sender}", stage)
        if sender in self._advertised:
            raise self._refuse(f"duplicate keys from client {sender}", stage)
        if self._roster is not None:
            raise self._refuse("it arrived late (the roster is closed)", stage)
        if (message.graph_commitment is not None) != self._config.committee:
            raise self._refuse(
                f"client {sender}'s graph commitment does not fit the round's mode", stage
            )
        pair = {message.encryption_public_key, message.mask_public_key}
        if len(pair) != 2 or pair & self._public_keys:
            raise self._refuse(f"client {sender} reuses a public key", stage)
        if any(keys.is_low_order(public) for public in pair):
            raise self._refuse(f"client {sender} sent a low-order public key", stage)
        cfg = self._config
        if len(message.noise_commitments) != cfg.noise_layers:
            raise self._refuse(
                f"client {sender} committed to {len(message.noise_commitments)} noise seeds, "
                f"not {cfg.noise_layers}",
                stage,
            )
        if cfg.active:
            registry = self._registry()
            payload = advertisement_payload(
                session=cfg.bound_session_id,
                config_digest=cfg.digest,
                client_id=sender,
                encryption_public_key=message.encryption_public_key,
                mask_public_key=message.mask_public_key,
            )
            if (
                registry is None
                or message.signature is None
                or not registry.verify(sender, payload, message.signature)
            ):
                raise self._refuse(f"client {sender}'s keys carry no valid signature", stage)
        elif message.signature is not None:
            raise self._refuse("a signature in a semi-honest round", stage)
        self._advertised[sender] = message
        self._public_keys |= pair

    def _receive_reveal(self, message: CommitteeReveal) -> None:
        stage = self._precheck(message, _Phase.ADVERTISE)
        if self._committee is None:
            raise self._refuse("it arrived early (no committee has been asked)", stage)
        try:
            self._committee.accept(message)
        except CommitteeRefusedError as exc:
            raise self._refuse(str(exc), stage) from None

    def _receive_shares(self, message: EncryptedShares) -> None:
        stage = self._precheck(message, _Phase.SHARE)
        self._check_recipients(message.sender, (message.recipient,), stage)
        self._unpack_bundle(message.sender)[message.recipient] = message
        self._received.setdefault(message.sender, set()).add(message.recipient)

    def _receive_bundle(self, message: EncryptedSharesBundle) -> None:
        # All or nothing: every ciphertext is checked before any is stored.
        if (
            self._phase is not _Phase.SHARE
            or message.session_id != self._bound_session
            or message.round_index != self._config.round_index
        ):
            self._precheck(message, _Phase.SHARE)  # refuses it, naming why
        sender = message.sender
        packed = message._packed_shares()
        order: tuple[int, ...] = (
            packed.ids if packed is not None else tuple(s.recipient for s in message.shares)
        )
        # One set of the recipients for every check, kept as the sender's
        # record if it is the first: no list, temporary set or copy per bundle.
        recipients = set(order)
        got = self._received.get(sender)
        # The checks of _check_recipients on whole sets; it runs (and names the
        # offending recipient) only if they fail.
        if not (
            sender in self._advertised
            and self._advertised.keys() >= recipients
            and self._hood(sender) >= recipients
            and (got is None or got.isdisjoint(recipients))
        ):
            self._check_recipients(sender, order, Stage.SHARE_KEYS)
        if got is None:
            if packed is not None:
                self._bundles[sender] = message
            else:
                box = self._unpack_bundle(sender)
                for item in message.shares:
                    box[item.recipient] = item
            self._received[sender] = recipients
        else:
            box = self._unpack_bundle(sender)
            for item in message.shares:
                box[item.recipient] = item
            got.update(recipients)

    def _unpack_bundle(self, sender: int) -> dict[int, EncryptedShares]:
        """The single-item box of ``sender``, with its packed bundle (if any) moved in."""
        box = self._ciphertexts.setdefault(sender, {})
        bundle = self._bundles.pop(sender, None)
        if bundle is not None:
            box.update((item.recipient, item) for item in bundle.shares)
        return box

    def _check_recipients(self, sender: int, recipients: tuple[int, ...], stage: Stage) -> None:
        if sender not in self._advertised:
            raise self._refuse(f"client {sender} is not on the roster", stage)
        allowed = self._hood(sender)
        box = self._received.get(sender, set())
        for recipient in recipients:
            if recipient not in self._advertised or recipient not in allowed:
                raise self._refuse(
                    f"client {recipient} is not a roster neighbour of client {sender}", stage
                )
            if recipient in box:
                raise self._refuse(f"duplicate ciphertext from {sender} to {recipient}", stage)

    def _admit(
        self,
        message: MaskedInput | ConsistencySignature | UnmaskResponse,
        phase: _Phase,
        expected: Container[int],
        seen: Container[int],
    ) -> Stage:
        """:meth:`_precheck`, then refuse a sender not in ``expected`` or already in ``seen``
        (worded by :data:`_ADMISSION` for ``phase``)."""
        stage = self._precheck(message, phase)
        sender = message.sender
        unexpected, what = _ADMISSION[phase]
        if sender not in expected:
            raise self._refuse(f"client {sender} {unexpected}", stage)
        if sender in seen:
            raise self._refuse(f"duplicate {what} from client {sender}", stage)
        return stage

    def _receive_masked(self, message: MaskedInput) -> None:
        sender = message.sender
        cfg = self._config
        values = message.values
        if not (
            self._phase is _Phase.MASK
            and message.session_id == self._bound_session
            and message.round_index == cfg.round_index
            and sender in self._shared
            and sender not in self._masked
            and message.ring_bits == cfg.ring_bits
            and values.shape[0] == cfg.vector_length
        ):
            # Some check fails: run them in order, so the refusal names the first.
            stage = self._admit(message, _Phase.MASK, self._shared, self._masked)
            if message.ring_bits != cfg.ring_bits or values.shape[0] != cfg.vector_length:
                raise self._refuse("ring width or vector length differs from the config", stage)
        if self._total is None:
            self._total = np.array(values, dtype=np.uint64, copy=True)
        else:
            np.add(self._total, values, out=self._total)
        self._masked.add(sender)

    def _receive_signature(self, message: ConsistencySignature) -> None:
        stage = self._admit(message, _Phase.CONSIST, self._masked, self._signatures)
        sender = message.sender
        cfg = self._config
        registry = self._registry()
        payload = self._survivor_payload or survivor_payload(
            session=self._round_session,
            config_digest=cfg.digest,
            survivors=self._survivor_set,
            root=None if cfg.graph is GraphMode.COMPLETE else self._survivor_root,
        )
        self._survivor_payload = payload  # fixed for the stage: made once, not per signer
        if registry is None or not registry.verify(sender, payload, message.signature):
            raise self._refuse(f"client {sender}'s signature on the survivor set is invalid", stage)
        self._signatures[sender] = message.signature

    def _receive_unmask(self, message: UnmaskResponse) -> None:
        stage = self._admit(message, _Phase.UNMASK, self._requests, self._responses)
        sender = message.sender
        request = self._requests[sender]
        packed = message._packed_shares()
        if packed is not None:
            seed_owners = packed[0].ids
            key_owners = packed[1].ids
        else:
            seed_owners = tuple(s.owner for s in message.self_mask_shares)
            key_owners = tuple(s.owner for s in message.key_shares)
        if seed_owners != request.survivors or key_owners != request.dropped:
            raise self._refuse("the shares do not match the request", stage)
        layers = request.noise_layers
        noise_wanted = tuple((v, j) for v in request.survivors for j in layers) if layers else ()
        noise = message.noise_shares
        if (tuple((s.owner, s.layer) for s in noise) if noise else ()) != noise_wanted:
            raise self._refuse("the noise-layer shares do not match the request", stage)
        self._reveals.add(message, packed, stage)
        self._responses[sender] = message

    # -- closing stages ------------------------------------------------------------

    def roster(self, client_id: int | None = None) -> Roster:
        """Close ADVERTISE_KEYS and publish the keys of the clients accepted so far.

        The first call closes the stage; later calls return the same roster
        (or a part of it) without changing anything.

        Args:
            client_id: ``None`` for the full roster (to broadcast), or a client
                id for that client's part.  In SecAgg+ mode a part holds the
                entries of the client's neighbourhood and a multiproof of the
                roster's Merkle root (:mod:`~privfed.secagg.protocol.roster_tree`),
                which fixes the graph: ``O(k log n)`` bytes instead of
                ``O(n)``.  In complete mode both are the whole roster.

        Returns:
            The :class:`Roster` to send.

        Raises:
            ParameterError: ``client_id`` is not a client of the config.
            ProtocolAbort: The round has been aborted, or (aborting) fewer than
                ``threshold`` clients advertised keys; active SecAgg+: the
                committee was not asked (:meth:`committee_requests`), or
                (aborting) more than ``committee_dropouts`` of its members
                did not reveal.
        """
        full = self._roster_closed(client_id)
        if client_id is None or self._config.graph is GraphMode.COMPLETE:
            return full
        return self._roster_part(client_id)

    def _roster_closed(self, client_id: int | None) -> Roster:
        """:meth:`roster`'s checks, and the stage's close on the first call: the full roster."""
        cfg = self._config
        if client_id is not None and (
            isinstance(client_id, bool) or client_id not in cfg.client_ids
        ):
            raise ParameterError("client_id", "one of the config's client ids", client_id)
        if self._phase is _Phase.ADVERTISE:
            stage = self._require(_Phase.ADVERTISE)
            if self._committee is not None:
                try:
                    seed, self._committee_items = self._committee.close()
                except CommitteeRefusedError as exc:
                    raise self._abort(str(exc), stage) from None
                self._fix_graph(seed)
            elif cfg.committee:
                raise ProtocolAbort(
                    "the committee has not been asked to reveal: call committee_requests() first",
                    stage=stage.name,
                )
            else:
                self._close_roster(stage)
            self._phase = _Phase.SHARE
        elif self._phase is _Phase.ABORTED:
            raise ProtocolAbort("the round has been aborted", stage=Stage.ADVERTISE_KEYS.name)
        if self._roster is None:  # pragma: no cover -- the stage closed with a roster
            raise TypeError("no roster yet")
        return self._roster

    def committee_requests(self) -> dict[int, CommitteeRequest]:
        """Active SecAgg+: close ADVERTISE_KEYS's roster and ask its committee to reveal.

        Fixes the roster (its Merkle root) with the clients accepted so far
        and returns one :class:`CommitteeRequest` per member of the committee
        the root draws (:mod:`~privfed.secagg.protocol.committee`); their
        :class:`CommitteeReveal` answers go to :meth:`receive`, and the next
        :meth:`roster` call derives the graph seed from them.  Later calls
        return the same requests.  Outside active SecAgg+ there is no
        committee: returns ``{}`` and changes nothing.

        Raises:
            ProtocolAbort: The round has been aborted or is past this stage, or
                (aborting) fewer than ``threshold`` clients advertised keys.
        """
        if not self._config.committee:
            return {}
        if self._committee is None:
            stage = self._require(_Phase.ADVERTISE)
            tree = self._close_roster(stage)
            if tree is None:  # pragma: no cover -- a committee needs the Harary graph
                raise TypeError("no roster tree")
            members = {
                cid: (
                    advertisement_hash(
                        self._config.bound_session_id,
                        cid,
                        msg.encryption_public_key,
                        msg.mask_public_key,
                    ),
                    msg.graph_commitment or b"",
                )
                for cid, msg in self._advertised.items()
            }
            self._committee = CommitteeRound(self._config, tree, members)
        elif self._phase is _Phase.ABORTED:
            raise ProtocolAbort("the round has been aborted", stage=Stage.ADVERTISE_KEYS.name)
        return self._committee.requests()

    @property
    def committee(self) -> frozenset[int]:
        """Active SecAgg+: the committee of the roster root (empty before it is drawn)."""
        return frozenset() if self._committee is None else self._committee.seats

    def _close_roster(self, stage: Stage) -> RosterTree | None:
        """Fix the roster of the clients accepted so far (SecAgg+: its Merkle tree)."""
        cfg = self._config
        self._require_quorum(len(self._advertised), "clients advertised keys", stage)
        entries = tuple(
            RosterEntry(
                client_id=cid,
                encryption_public_key=msg.encryption_public_key,
                mask_public_key=msg.mask_public_key,
                signature=msg.signature,
                graph_commitment=msg.graph_commitment,
            )
            for cid, msg in sorted(self._advertised.items())
        )
        session = cfg.bound_session_id
        registry = self._registry()
        self._roster = Roster(
            session_id=session,
            round_index=cfg.round_index,
            entries=entries,
            identities=(
                None
                if registry is None
                else identity_proofs(registry, [[e.client_id for e in entries]])[0]
            ),
        )
        if cfg.graph is not GraphMode.HARARY:
            return None
        tree = roster_tree(session, entries)
        self._tree = tree
        self._leaf_of = {e.client_id: i for i, e in enumerate(entries)}
        if not cfg.committee:
            self._fix_graph(graph_seed_of_root(session, tree.root))
        return tree

    def _registry(self) -> IdentityRegistry | None:
        """Active mode: the registry whose keys the roster proves (checked at construction)."""
        registry = self._config.identities
        return registry if isinstance(registry, IdentityRegistry) else None

    def _fix_graph(self, seed: bytes) -> None:
        self._graph_seed = seed
        self._round_session = graph_session(self._config.bound_session_id, seed)

    def _roster_part(self, client_id: int) -> Roster:
        """SecAgg+: the neighbourhood's entries of the roster, with their Merkle multiproof
        (built in id-order batches, :class:`~privfed.secagg.protocol._roster_wire.PartBatches`)."""
        roster, tree = self._roster, self._tree
        if roster is None or tree is None:  # pragma: no cover -- roster() built both
            raise TypeError("no roster yet")
        if self._parts is None:
            items, registry = self._committee_items, self._registry()
            self._parts = PartBatches(
                self._config.client_ids,
                lambda batch: roster_parts(roster, tree, self._hoods(batch), items, registry),
            )
        return self._parts.get(client_id)

    def roster_bytes(self, client_id: int | None = None) -> bytes:
        """``roster(client_id).to_bytes()``: the same checks, errors and close.

        A SecAgg+ part is written straight to its wire bytes, without building
        the :class:`Roster` (what a server that streams parts wants: several
        times less work and garbage per part).
        """
        full = self._roster_closed(client_id)
        roster, tree = self._roster, self._tree
        complete = self._config.graph is GraphMode.COMPLETE
        if client_id is None or complete or roster is None or tree is None:
            return full.to_bytes()
        if self._part_wires is None:
            writer = PartWriter(roster, tree, self._committee_items, self._registry())
            self._part_wires = PartBatches(
                self._config.client_ids, lambda batch: writer.parts(self._hoods(batch))
            )
        return self._part_wires.get(client_id)

    def _hoods(self, batch: Sequence[int]) -> list[frozenset[int]]:
        if self._graph_seed is None:
            return [self._hood(c) | {c} for c in batch]
        graph = self._config.neighbourhoods(self._graph_seed)
        return [graph[c] | {c} for c in batch]

    def routed_shares(self) -> dict[int, RoutedShares]:
        """Close SHARE_KEYS and route every ciphertext to its recipient.

        A client counts as having shared keys only if a ciphertext arrived for
        every one of its neighbours on the roster; a partial set (a client that
        dropped while sending) is discarded, and that client is treated as
        dropped before this stage.

        Returns:
            ``{client_id: RoutedShares}`` for every client that shared keys.

        Raises:
            ProtocolAbort: Out of order, or (aborting) fewer than ``threshold``
                clients shared keys.
        """
        stage = self._require(_Phase.SHARE)
        roster = set(self._advertised)
        complete = frozenset(
            sender for sender, got in self._received.items() if got == self._hood(sender) & roster
        )
        self._require_quorum(len(complete), "clients shared keys", stage)
        routed = route_packed(self._config, complete, self._bundles, self._hood)
        if routed is None:
            for sender in complete:
                self._unpack_bundle(sender)
            routed = route_items(self._config, complete, self._ciphertexts, self._hood)
        self._shared = complete
        self._parts = self._part_wires = None
        self._ciphertexts = {}
        self._bundles = {}
        self._received = {}
        self._phase = _Phase.MASK
        return routed

    def consistency_requests(self) -> dict[int, ConsistencyRequest]:
        """Active mode: close MASKED_INPUT and ask every survivor to sign the survivor set.

        Returns:
            ``{client_id: ConsistencyRequest}`` for every survivor, all with the
            one global survivor set.

        Raises:
            ProtocolAbort: Semi-honest mode or out of order, or (aborting) fewer
                than ``threshold`` masked inputs arrived.
        """
        cfg = self._config
        survivors, tree = self._close_masked()
        if tree is None:
            return {
                client: ConsistencyRequest._trusted(
                    session_id=cfg.bound_session_id,
                    round_index=cfg.round_index,
                    recipient=client,
                    survivors=survivors,
                )
                for client in survivors
            }
        # SecAgg+: commit to the set; each survivor gets its neighbourhood's part.
        requests = {}
        for client, (positions, proof) in zip(
            survivors, neighbourhood_proofs(tree, self._hoods(survivors)), strict=True
        ):
            requests[client] = ConsistencyRequest._trusted(
                session_id=cfg.bound_session_id,
                round_index=cfg.round_index,
                recipient=client,
                survivors=pick(survivors, positions),
                proof=proof,
            )
        return requests

    def _close_masked(self) -> tuple[tuple[int, ...], RosterTree | None]:
        """:meth:`consistency_requests`'s checks and close: the survivors (SecAgg+: their tree)."""
        if not self._config.active:
            raise ProtocolAbort(
                "no ConsistencyCheck round in semi-honest mode", stage=Stage.MASKED_INPUT.name
            )
        stage = self._require(_Phase.MASK)
        survivors = tuple(sorted(self._masked))
        self._require_quorum(len(survivors), "masked inputs arrived", stage)
        self._survivor_set = survivors
        self._phase = _Phase.CONSIST
        if self._config.graph is GraphMode.COMPLETE:
            return survivors, None
        tree = survivor_tree(self._round_session, survivors)
        self._survivor_root = tree.root
        return survivors, tree

    def consistency_request_bytes(self) -> dict[int, bytes]:
        """``{client: request.to_bytes()}`` of :meth:`consistency_requests`: the same
        checks, errors and close; SecAgg+ requests are written straight to bytes."""
        cfg = self._config
        if cfg.graph is GraphMode.COMPLETE:
            return {c: m.to_bytes() for c, m in self.consistency_requests().items()}
        survivors, tree = self._close_masked()
        if tree is None:  # pragma: no cover -- SecAgg+ has a survivor tree
            raise TypeError("no survivor tree")
        session, index = cfg.bound_session_id, cfg.round_index
        wires = consistency_request_wires(tree, survivors, self._hoods(survivors), session, index)
        return dict(zip(survivors, wires, strict=True))

    def unmask_requests(self) -> dict[int, UnmaskRequest]:
        """Close MASKED_INPUT (semi-honest) or CONSISTENCY_CHECK (active) and ask for shares.

        From now on masked inputs (and signatures) are refused (late).  Each
        request lists, within the recipient's neighbourhood, the clients whose
        masked input was accepted and those that shared keys but sent no
        masked input, and the noise layers the reveal rule allows.  In active
        mode only clients that signed are asked, each with ``threshold``
        signatures (the lowest signer ids) of survivors of its neighbourhood;
        a signer for whose neighbourhood fewer arrived is not asked.

        Returns:
            ``{client_id: UnmaskRequest}`` for every survivor (active mode:
            every signer with enough co-signers).

        Raises:
            ProtocolAbort: Out of order, or (aborting) fewer than ``threshold``
                masked inputs arrived (or, active mode, fewer than
                ``threshold`` clients can be asked).
        """
        cfg = self._config
        stage = self._require(_Phase.CONSIST if cfg.active else _Phase.MASK)
        survivors = frozenset(self._masked)
        self._require_quorum(len(survivors), "masked inputs arrived", stage)
        dropped = self._shared - survivors
        layers = noise_layers_to_reveal(cfg, len(survivors)) if cfg.noise_layers else ()
        asked = sorted(self._signatures) if cfg.active else sorted(survivors)
        seed = self._graph_seed
        hood = self._hood if seed is None else cfg.neighbourhoods(seed).__getitem__
        requests = unmask_requests_for(
            cfg, asked, hood, survivors, dropped, self._signatures, layers
        )
        self._require_quorum(len(requests), "clients can be asked to unmask", stage)
        self._requests = requests
        self._phase = _Phase.UNMASK
        return dict(requests)

    def finalize(self) -> npt.NDArray[np.uint64]:
        """Close UNMASKING: rebuild the secrets, strip the masks, return the sum.

        For every survivor, its self-mask seed is rebuilt from the responders'
        shares and checked against the commitment it advertised; for every
        dropped client with a surviving neighbour, its mask private key is
        rebuilt and checked against its advertised mask public key.  All
        secrets are rebuilt and verified before the sum is touched.

        Returns:
            A new 1-D ``uint64`` array of length ``vector_length``: the sum,
            modulo ``2**ring_bits``, of the inputs of exactly the clients in
            :attr:`survivors`.  A repeated call returns a copy of the same sum.

        Raises:
            ProtocolAbort: Out of order, or (aborting) fewer than ``threshold``
                responses, or fewer than ``threshold`` shares for a secret that
                is needed.
            ReconstructionError: Shares are inconsistent, or a rebuilt secret
                does not match its commitment or public key (state unchanged).
        """
        if self._phase is _Phase.DONE and self._result is not None:
            return self._result.copy()
        stage = self._require(_Phase.UNMASK)
        cfg = self._config
        self._require_quorum(len(self._responses), "clients answered the unmasking request", stage)
        survivors = sorted(self._masked)
        dropped = sorted(self._shared - self._masked)
        layers = noise_layers_to_reveal(cfg, len(survivors)) if cfg.noise_layers else ()
        # Rebuild and verify every secret first: nothing is mutated until all pass.
        self_seeds = self._self_mask_seeds(survivors, stage)
        noise_seeds = self._reveals.noise_seeds(
            survivors, layers, self._advertised, cfg.bound_session_id, stage
        )
        session = (self._round_session, cfg.round_index)
        pair_seeds = self._reveals.pair_seeds(
            dropped, survivors, self._advertised, self._hood, session, stage
        )
        total = self._total
        if total is None:  # pragma: no cover -- at least threshold inputs arrived
            raise self._abort("no masked input", stage)
        result = total.copy()
        prg.add_expanded_many(result, [(seed, True) for seed in self_seeds] + pair_seeds)
        if cfg.ring_bits < 64:
            np.bitwise_and(result, np.uint64(cfg.modulus - 1), out=result)
        self._result = result
        self._result.flags.writeable = False
        self._reveals.clear()
        self._noise_seeds = noise_seeds if layers else {}
        self._total = None
        self._phase = _Phase.DONE
        return result.copy()

    def _self_mask_seeds(self, survivors: list[int], stage: Stage) -> list[bytes]:
        """The survivors' rebuilt self-mask seeds, each checked against its commitment."""
        cfg = self._config
        session = cfg.bound_session_id
        self_seeds: list[bytes] = []
        for owner, seed in zip(survivors, self._reveals.rebuild(survivors, 0, stage), strict=True):
            expected = self._advertised[owner].self_mask_commitment
            actual = self_mask_commitment(
                seed, session_id=session, round_index=cfg.round_index, client_id=owner
            )
            if not hmac.compare_digest(expected, actual):
                raise ReconstructionError(
                    f"the rebuilt self-mask seed of client {owner} does not match its commitment"
                )
            self_seeds.append(
                keys.derive_self_mask_seed(
                    seed, session_id=session, round_index=cfg.round_index, client_id=owner
                )
            )
        return self_seeds


# What the server does with each client-to-server message type, looked up by exact
# type (a subclass of a message is nothing the wire decodes to).
_RECEIVERS: dict[type, Callable[[SecAggServer, Any], None]] = {
    AdvertiseKeys: SecAggServer._receive_keys,
    CommitteeReveal: SecAggServer._receive_reveal,
    EncryptedShares: SecAggServer._receive_shares,
    EncryptedSharesBundle: SecAggServer._receive_bundle,
    MaskedInput: SecAggServer._receive_masked,
    ConsistencySignature: SecAggServer._receive_signature,
    UnmaskResponse: SecAggServer._receive_unmask,
}
