"""The client side of secure aggregation: a message-driven state machine.

A :class:`SecAggClient` runs one round of Bonawitz et al. double masking
(arXiv:1611.04482, §4, Fig. 4) in the semi-honest / semi-malicious setting, with
the SecAgg+ sparse graph of Bell et al. (arXiv:2009.01867) as an option.  Its
methods are called in protocol order, each consuming what the server published
and returning what to send back:

1. :meth:`~SecAggClient.advertise_keys` -> :class:`AdvertiseKeys`
2. :meth:`~SecAggClient.share_keys` (:class:`Roster`) ->
   ``{recipient_id: EncryptedShares}``
3. :meth:`~SecAggClient.masked_input` (:class:`RoutedShares`) -> :class:`MaskedInput`
4. :meth:`~SecAggClient.unmask` (:class:`UnmaskRequest`) -> :class:`UnmaskResponse`

Abort rule: whenever what the server sent could make the client reveal more
than the protocol allows (a roster without the client's own keys, a view with
fewer than ``threshold`` clients, an unmasking request that lists a client as
both survivor and dropout, a second request with a different view, ...) or a
ciphertext fails authentication, the client moves to a permanent aborted state
and raises (:class:`~privfed.errors.ProtocolAbort`, or
:class:`~privfed.errors.AuthenticationError` for a forged ciphertext).  Every
later call raises :class:`~privfed.errors.ProtocolAbort`.  A call at the wrong
stage, or with an argument of the wrong type, raises without changing the
state.
"""

from __future__ import annotations

import enum
import secrets

import numpy as np
import numpy.typing as npt

from privfed._checks import check_int
from privfed.errors import (
    AuthenticationError,
    KeyAgreementError,
    ParameterError,
    ParameterTypeError,
    ProtocolAbort,
)
from privfed.secagg.primitives import aead, keys, prg, shamir
from privfed.secagg.protocol._party import Party
from privfed.secagg.protocol._plaintext import pack_shares, unpack_shares
from privfed.secagg.protocol.commitment import SEED_SIZE, self_mask_commitment
from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.messages import (
    AdvertiseKeys,
    EncryptedShares,
    MaskedInput,
    Message,
    RevealedShare,
    Roster,
    RoutedShares,
    UnmaskRequest,
    UnmaskResponse,
)
from privfed.secagg.protocol.stages import Stage

__all__ = ["SecAggClient", "check_ring_vector"]


class _Phase(enum.Enum):
    ADVERTISE = enum.auto()
    SHARE = enum.auto()
    MASK = enum.auto()
    UNMASK = enum.auto()
    DONE = enum.auto()
    ABORTED = enum.auto()


_STAGE_OF_PHASE = {
    _Phase.ADVERTISE: Stage.ADVERTISE_KEYS,
    _Phase.SHARE: Stage.SHARE_KEYS,
    _Phase.MASK: Stage.MASKED_INPUT,
    _Phase.UNMASK: Stage.UNMASKING,
}


def check_ring_vector(
    name: str, values: object, *, length: int, ring_bits: int
) -> npt.NDArray[np.uint64]:
    """Validate a ring vector and return it as a fresh C-contiguous ``uint64`` copy.

    Args:
        name: Parameter name for error messages.
        values: A 1-D numpy array of integers (any integer dtype), every entry in
            ``[0, 2**ring_bits)``.
        length: Required length.
        ring_bits: Ring width in bits.

    Raises:
        ParameterTypeError: Not a numpy integer array.
        ParameterError: Wrong shape, or an entry outside ``[0, 2**ring_bits)``
            (the offending values are not shown).
    """
    if not isinstance(values, np.ndarray) or not np.issubdtype(values.dtype, np.integer):
        raise ParameterTypeError(name, "a numpy array of integers", values)
    if values.shape != (length,):
        raise ParameterError(name, f"a 1-D array of length {length}", values.shape)
    if values.dtype != np.uint64 and values.size and int(values.min()) < 0:
        raise ParameterError(name, f"ring elements in [0, 2**{ring_bits})", "<redacted>")
    if ring_bits < 64 and values.size and int(values.max()) >> ring_bits:
        raise ParameterError(name, f"ring elements in [0, 2**{ring_bits})", "<redacted>")
    return np.array(values, dtype=np.uint64, order="C", copy=True)


def _client_input(values: object, config: SecAggConfig) -> npt.NDArray[np.uint64] | None:
    """``values`` checked as this round's input vector, or ``None`` when not given."""
    if values is None:
        return None
    return check_ring_vector(
        "values", values, length=config.vector_length, ring_bits=config.ring_bits
    )


class SecAggClient(Party):
    """One client of one secure-aggregation round.

    Keys and the self-mask seed are drawn fresh from the OS CSPRNG at
    construction, so a client object serves exactly one session; build a new
    one per round.

    Threat model: the client trusts nobody but itself.  It assumes the
    client-server channel is authenticated (the server relays messages and
    public keys; without signatures a malicious server could substitute public
    keys -- see SECURITY.md).  Against a server that lies about who dropped out,
    it guarantees to reveal for each peer at most one kind of share, and only
    for a view with at least ``threshold`` survivors in its neighbourhood.

    Args:
        config: The round's public parameters.
        client_id: This client's id; one of ``config.client_ids``.
        values: The input, a 1-D numpy integer array of length
            ``config.vector_length`` with entries in ``[0, 2**ring_bits)``
            (ring elements, e.g. fixed-point encodings).  Give it here or to
            :meth:`masked_input` (exactly once): passing it late lets a client
            run the key stages while it is still computing its update, and
            keeps the input out of memory until it is needed.  A copy is kept
            until the masked input is produced, then dropped.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: ``client_id`` is not in the config, or ``values`` has
            the wrong shape or an entry outside the ring.
    """

    def __init__(
        self,
        config: SecAggConfig,
        client_id: int,
        values: npt.NDArray[np.integer] | None = None,
    ) -> None:
        if not isinstance(config, SecAggConfig):
            raise ParameterTypeError("config", "a SecAggConfig", config)
        check_int("client_id", client_id)
        if client_id not in config.client_ids:
            raise ParameterError("client_id", "one of config.client_ids", client_id)
        vector = _client_input(values, config)
        self._config = config
        self._id = client_id
        self._values: npt.NDArray[np.uint64] | None = vector
        self._values_given = vector is not None
        self._phase = _Phase.ADVERTISE
        self._encryption_keys = keys.KeyPair.generate()
        self._mask_keys = keys.KeyPair.generate()
        self._seed = secrets.token_bytes(SEED_SIZE)
        self._commitment = self_mask_commitment(
            self._seed,
            session_id=config.session_id,
            round_index=config.round_index,
            client_id=client_id,
        )
        # Filled as the round goes on.
        self._roster: dict[int, tuple[bytes, bytes]] = {}
        self._share_keys: dict[int, bytes] = {}
        # Serialized (key share, seed share) pairs: this client's own, and those
        # it holds for each peer.  They are only ever revealed, never parsed.
        self._own_shares: tuple[bytes, bytes] | None = None
        self._held: dict[int, tuple[bytes, bytes]] = {}
        self._masked_with: frozenset[int] = frozenset()
        self._request: UnmaskRequest | None = None
        self._response: UnmaskResponse | None = None

    def __repr__(self) -> str:
        return f"SecAggClient(client_id={self._id}, state={self._state_name()})"

    def _state_name(self) -> str:
        stage = self.stage
        return self._phase.name.lower() if stage is None else stage.name

    # -- public state ------------------------------------------------------------

    @property
    def client_id(self) -> int:
        """This client's id."""
        return self._id

    @property
    def config(self) -> SecAggConfig:
        """The round's public parameters."""
        return self._config

    @property
    def stage(self) -> Stage | None:
        """The stage the next call belongs to; ``None`` once done or aborted."""
        return _STAGE_OF_PHASE.get(self._phase)

    @property
    def aborted(self) -> bool:
        """Whether this client has aborted the round (permanently)."""
        return self._phase is _Phase.ABORTED

    @property
    def done(self) -> bool:
        """Whether this client has answered its unmasking request."""
        return self._phase is _Phase.DONE

    # -- helpers -----------------------------------------------------------------

    def _require(self, phase: _Phase, stage: Stage) -> None:
        if self._phase is _Phase.ABORTED:
            raise ProtocolAbort("this client has aborted the round", stage=stage.name)
        if self._phase is not phase:
            raise ProtocolAbort(
                f"call out of order: the client is at {self._state_name()}",
                stage=stage.name,
            )

    def _abort(self, reason: str, stage: Stage) -> ProtocolAbort:
        self._phase = _Phase.ABORTED
        self._wipe()
        return ProtocolAbort(reason, stage=stage.name)

    def _wipe(self) -> None:
        self._values = None
        self._held = {}
        self._share_keys = {}
        self._own_shares = None

    def _check_context(self, message: Message, stage: Stage) -> None:
        cfg = self._config
        if message.session_id != cfg.session_id or message.round_index != cfg.round_index:
            raise self._abort("message belongs to another session or round", stage)

    # -- stage 0 ---------------------------------------------------------------------

    def _pairwise_keys(
        self, pair: keys.KeyPair, publics: dict[int, bytes], stage: Stage
    ) -> dict[int, bytes]:
        """Keys shared with each peer: for encryption (encryption pair) or masks (mask pair)."""
        purpose, what = (
            (keys.Purpose.SHARE_ENCRYPTION, "encryption")
            if pair is self._encryption_keys
            else (keys.Purpose.MASK, "mask")
        )
        try:
            return pair.pairwise_keys(
                publics,
                purpose=purpose,
                session_id=self._config.session_id,
                round_index=self._config.round_index,
                client_id=self._id,
            )
        except KeyAgreementError as exc:
            raise self._abort(
                f"client {exc.peer_id} advertised an invalid {what} key", stage
            ) from None

    def advertise_keys(self) -> AdvertiseKeys:
        """Stage ADVERTISE_KEYS: publish this round's public keys.

        Threat model: the message holds two fresh X25519 public keys and a
        SHA-256 commitment to the self-mask seed; none reveals a secret.

        Returns:
            The message for the server.

        Raises:
            ProtocolAbort: Called out of order or after an abort.
        """
        self._require(_Phase.ADVERTISE, Stage.ADVERTISE_KEYS)
        message = AdvertiseKeys(
            session_id=self._config.session_id,
            round_index=self._config.round_index,
            sender=self._id,
            encryption_public_key=self._encryption_keys.public_key,
            mask_public_key=self._mask_keys.public_key,
            self_mask_commitment=self._commitment,
        )
        self._phase = _Phase.SHARE
        return message

    # -- stage 1 ---------------------------------------------------------------------

    def share_keys(self, roster: Roster) -> dict[int, EncryptedShares]:
        """Stage SHARE_KEYS: Shamir-share both secrets among the neighbours in the roster.

        The mask private key ``s_sk`` and the self-mask seed ``b`` are each
        split with threshold ``t`` over this client and its neighbours that
        appear in the roster (Shamir evaluation points are the client ids).
        Each neighbour's two shares are encrypted to it with an AEAD key derived
        from X25519 between the clients' encryption keys, with the session,
        round, sender and recipient as associated data.  This client keeps its
        own shares.  Neighbours missing from the roster (dropped before this
        stage) are simply left out.

        Threat model: the server sees only ciphertexts.  Fewer than ``t``
        holders learn nothing about either secret.

        Args:
            roster: The server's :class:`Roster`.

        Returns:
            ``{recipient_id: EncryptedShares}``, one per neighbour in the roster.

        Raises:
            ParameterTypeError: ``roster`` is not a :class:`Roster`.
            ProtocolAbort: Out of order; or (aborting) the roster is of another
                session, lists an unknown client, misstates this client's own
                keys, repeats a public key, leaves fewer than ``threshold``
                clients in this client's neighbourhood, or holds an invalid
                (low-order) public key.
        """
        if not isinstance(roster, Roster):
            raise ParameterTypeError("roster", "a Roster", roster)
        stage = Stage.SHARE_KEYS
        self._require(_Phase.SHARE, stage)
        self._check_context(roster, stage)
        cfg = self._config
        entries = {
            e.client_id: (e.encryption_public_key, e.mask_public_key) for e in roster.entries
        }
        if not set(entries) <= set(cfg.client_ids):
            raise self._abort("the roster lists a client outside the configuration", stage)
        mine = (self._encryption_keys.public_key, self._mask_keys.public_key)
        if entries.get(self._id) != mine:
            raise self._abort("the roster misstates or omits this client's keys", stage)
        all_keys = [k for pair in entries.values() for k in pair]
        if len(set(all_keys)) != len(all_keys):
            raise self._abort("the roster repeats a public key", stage)
        peers = sorted(cfg.neighbours(self._id) & set(entries))
        self._require_quorum(len(peers) + 1, "clients of this neighbourhood advertised keys", stage)
        holders = sorted([self._id, *peers])
        key_shares = shamir.split(
            self._mask_keys.private_key,
            threshold=cfg.threshold,
            num_shares=len(holders),
            indices=holders,
        )
        seed_shares = shamir.split(
            self._seed, threshold=cfg.threshold, num_shares=len(holders), indices=holders
        )
        share_keys = self._pairwise_keys(
            self._encryption_keys, {peer: entries[peer][0] for peer in peers}, stage
        )
        out: dict[int, EncryptedShares] = {}
        own: tuple[bytes, bytes] | None = None
        for holder, key_share, seed_share in zip(holders, key_shares, seed_shares, strict=True):
            pair = (key_share.to_bytes(), seed_share.to_bytes())
            if holder == self._id:
                own = pair
                continue
            key = share_keys[holder]
            plaintext = pack_shares(
                sender=self._id, recipient=holder, key_share=pair[0], seed_share=pair[1]
            )
            ciphertext = aead.seal(
                key,
                plaintext,
                associated_data=aead.share_associated_data(
                    session_id=cfg.session_id,
                    round_index=cfg.round_index,
                    sender=self._id,
                    recipient=holder,
                ),
            )
            out[holder] = EncryptedShares(
                session_id=cfg.session_id,
                round_index=cfg.round_index,
                sender=self._id,
                recipient=holder,
                ciphertext=ciphertext,
            )
        self._roster = entries
        # The share-encryption key is symmetric in the pair, so the key used to
        # encrypt to a peer also decrypts what that peer sent: keep it rather
        # than run X25519 again at the next stage.
        self._share_keys = share_keys
        self._own_shares = own
        self._phase = _Phase.MASK
        return out

    # -- stage 2 ---------------------------------------------------------------------

    def masked_input(
        self, routed: RoutedShares, values: npt.NDArray[np.integer] | None = None
    ) -> MaskedInput:
        """Stage MASKED_INPUT: decrypt the shares held for peers and send the masked input.

        The senders of the routed ciphertexts are this client's view of who
        shared keys.  The masked input is
        ``y = x + PRG(b') + sum_{v in view} (+1 if id < v else -1) PRG(s_uv)``
        modulo ``2**ring_bits``, with ``b'`` derived from the self-mask seed and
        ``s_uv`` from X25519 between mask keys (HKDF-bound to session, round and
        pair).  Pairwise masks cancel in the sum over survivors; the self mask
        makes ``y`` uniform to anyone without ``b``.

        Threat model: ``y`` reveals nothing about ``x`` to a server that holds
        fewer than ``threshold`` shares of ``b`` (which honest clients only
        reveal for a surviving client).

        Args:
            routed: The server's :class:`RoutedShares` for this client.
            values: The input, if it was not given at construction (same
                domain as there); ``None`` otherwise.

        Returns:
            The :class:`MaskedInput` for the server.

        Raises:
            ParameterTypeError: ``routed`` is not a :class:`RoutedShares`, or
                ``values`` has the wrong type.
            ParameterError: ``values`` is missing, given twice, or outside its
                domain (state unchanged).
            ProtocolAbort: Out of order; or (aborting) wrong session or
                recipient, a sender that is not a neighbour in the roster, fewer
                than ``threshold`` clients in the view, or a malformed
                plaintext behind a valid ciphertext.
            AuthenticationError: A ciphertext fails authentication (aborting).
        """
        if not isinstance(routed, RoutedShares):
            raise ParameterTypeError("routed", "a RoutedShares", routed)
        stage = Stage.MASKED_INPUT
        self._require(_Phase.MASK, stage)
        cfg = self._config
        if values is not None and self._values_given:
            raise ParameterError(
                "values", "None: the input was already given at construction", "an array"
            )
        if values is None and not self._values_given:
            raise ParameterError("values", "the input (none was given at construction)", None)
        late = _client_input(values, cfg)
        self._check_context(routed, stage)
        if routed.recipient != self._id:
            raise self._abort("ciphertexts addressed to another client", stage)
        allowed = cfg.neighbours(self._id) & set(self._roster)
        senders = routed.senders
        if not set(senders) <= allowed:
            raise self._abort("ciphertexts from a client outside the roster neighbourhood", stage)
        self._require_quorum(len(senders) + 1, "clients of this neighbourhood shared keys", stage)
        held: dict[int, tuple[bytes, bytes]] = {}
        for item in routed.shares:
            try:
                plaintext = aead.unseal(
                    self._share_keys[item.sender],
                    item.ciphertext,
                    associated_data=aead.share_associated_data(
                        session_id=cfg.session_id,
                        round_index=cfg.round_index,
                        sender=item.sender,
                        recipient=self._id,
                    ),
                )
            except AuthenticationError:
                self._phase = _Phase.ABORTED
                self._wipe()
                raise
            try:
                held[item.sender] = unpack_shares(plaintext, sender=item.sender, recipient=self._id)
            except (ParameterError, ParameterTypeError):
                raise self._abort(
                    f"client {item.sender} sent a malformed share plaintext", stage
                ) from None
        buffer = self._values if late is None else late
        if buffer is None:  # pragma: no cover -- only None after an abort
            raise self._abort("input already consumed", stage)
        # ``buffer`` is our private copy of the input; it is masked in place.
        self_seed = keys.derive_self_mask_seed(
            self._seed,
            session_id=cfg.session_id,
            round_index=cfg.round_index,
            client_id=self._id,
        )
        pair_seeds = self._pairwise_keys(
            self._mask_keys, {peer: self._roster[peer][1] for peer in senders}, stage
        )
        # Pairwise masks: +PRG(s_uv) towards larger ids, -PRG(s_uv) towards smaller.
        masks = [(self_seed, False)]
        masks += [(seed, self._id > peer) for peer, seed in pair_seeds.items()]
        prg.add_expanded_many(buffer, masks)
        if cfg.ring_bits < 64:
            np.bitwise_and(buffer, np.uint64(cfg.modulus - 1), out=buffer)
        self._values = None
        self._share_keys = {}
        # The seed lives on only in the Shamir shares now.  (Python cannot
        # zeroize memory; dropping references is the best it can do.)
        self._seed = b""
        buffer.flags.writeable = False
        self._held = held
        self._masked_with = frozenset(senders)
        self._phase = _Phase.UNMASK
        return MaskedInput(
            session_id=cfg.session_id,
            round_index=cfg.round_index,
            sender=self._id,
            ring_bits=cfg.ring_bits,
            values=buffer,
        )

    # -- stage 3 ---------------------------------------------------------------------

    def unmask(self, request: UnmaskRequest) -> UnmaskResponse:
        """Stage UNMASKING: reveal one share per peer, as the request's view dictates.

        For each survivor (this client included) the share of its self-mask
        seed; for each dropped client the share of its mask private key.  The
        client answers only if the view is sound: survivors and dropped are
        disjoint, together they are exactly this client plus the peers it
        masked with, this client is a survivor, and at least ``threshold``
        survivors remain.  It answers at most one view: a repeat of the very
        same request returns the very same response (so a lost reply can be
        re-sent), any other request aborts.

        Threat model: this is the step a lying server would exploit -- listing a
        survivor as dropped would hand it both the self-mask seed and the mask
        key of that client, i.e. its input.  The checks above make that
        impossible for the honest majority of a neighbourhood.

        Args:
            request: The server's :class:`UnmaskRequest` for this client.

        Returns:
            The :class:`UnmaskResponse` for the server.

        Raises:
            ParameterTypeError: ``request`` is not an :class:`UnmaskRequest`.
            ProtocolAbort: Out of order, or (aborting) any of the checks above
                fails.
        """
        if not isinstance(request, UnmaskRequest):
            raise ParameterTypeError("request", "an UnmaskRequest", request)
        stage = Stage.UNMASKING
        if self._phase is _Phase.DONE and self._response is not None:
            if request == self._request:
                return self._response
            raise self._abort("asked twice with different views", stage)
        self._require(_Phase.UNMASK, stage)
        self._check_context(request, stage)
        if request.recipient != self._id:
            raise self._abort("request addressed to another client", stage)
        survivors = set(request.survivors)
        dropped = set(request.dropped)
        if survivors & dropped:
            raise self._abort("a client is listed both as survivor and as dropped", stage)
        if self._id not in survivors:
            raise self._abort("the request does not list this client as a survivor", stage)
        view = self._masked_with | {self._id}
        if survivors | dropped != view:
            raise self._abort(
                "the request's clients differ from those this client masked with", stage
            )
        self._require_quorum(len(survivors), "survivors", stage)
        own = self._own_shares
        if own is None:  # pragma: no cover -- only None after an abort
            raise self._abort("shares already wiped", stage)
        held = dict(self._held)
        held[self._id] = own
        response = UnmaskResponse(
            session_id=self._config.session_id,
            round_index=self._config.round_index,
            sender=self._id,
            self_mask_shares=tuple(
                RevealedShare(owner=v, share=held[v][1]) for v in sorted(survivors)
            ),
            key_shares=tuple(RevealedShare(owner=v, share=held[v][0]) for v in sorted(dropped)),
        )
        self._request = request
        self._response = response
        self._wipe()
        self._phase = _Phase.DONE
        return response
