"""The client side of secure aggregation: a message-driven state machine.

A :class:`SecAggClient` runs one round of Bonawitz et al. double masking
(arXiv:1611.04482, §4, Fig. 4), with the SecAgg+ sparse graph of Bell et al.
(arXiv:2009.01867) as an option, in one of two security modes
(:class:`~privfed.secagg.SecurityMode`): semi-honest (the default) or active
(signed round keys, the ConsistencyCheck round).  Its methods are called in
protocol order, each consuming what the server published and returning what
to send back:

1. :meth:`~SecAggClient.advertise_keys` -> :class:`AdvertiseKeys`
2. :meth:`~SecAggClient.share_keys` (:class:`Roster`) ->
   ``{recipient_id: EncryptedShares}``
3. :meth:`~SecAggClient.masked_input` (:class:`RoutedShares`) -> :class:`MaskedInput`
   (active SecAgg+: a committee member first answers
   :meth:`~SecAggClient.reveal` (:class:`CommitteeRequest`) -> :class:`CommitteeReveal`)
4. active mode only: :meth:`~SecAggClient.consistency_check`
   (:class:`ConsistencyRequest`) -> :class:`ConsistencySignature`
5. :meth:`~SecAggClient.unmask` (:class:`UnmaskRequest`) -> :class:`UnmaskResponse`

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
import hmac
import secrets
from collections.abc import Sequence
from typing import TypedDict

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
from privfed.secagg.protocol._roster_check import (
    RosterRefusedError,
    member_root,
    roster_graph,
    roster_identities,
    signed_reveal,
    survivor_payload,
    survivor_root,
    unsigned_entry,
)
from privfed.secagg.protocol._vectors import check_ring_vector, client_input
from privfed.secagg.protocol.commitment import (
    SEED_SIZE,
    checked_layers,
    noise_seed_commitment,
    self_mask_commitment,
)
from privfed.secagg.protocol.committee import new_graph_value
from privfed.secagg.protocol.config import SecAggConfig, SecurityMode
from privfed.secagg.protocol.graph import (
    GraphMode,
    graph_session,
)
from privfed.secagg.protocol.identity import (
    IdentityKey,
    IdentityRegistry,
    advertisement_payload,
    verify_signature,
)
from privfed.secagg.protocol.messages.base import Message
from privfed.secagg.protocol.messages.masked import MaskedInput
from privfed.secagg.protocol.messages.roster import (
    AdvertiseKeys,
    CommitteeRequest,
    CommitteeReveal,
    Roster,
)
from privfed.secagg.protocol.messages.shares import EncryptedShares, RoutedShares
from privfed.secagg.protocol.messages.unmasking import (
    ConsistencyRequest,
    ConsistencySignature,
    RevealedNoiseShare,
    RevealedShare,
    UnmaskRequest,
    UnmaskResponse,
)
from privfed.secagg.protocol.stages import Stage

__all__ = ["SecAggClient", "check_ring_vector"]


class _Phase(enum.Enum):
    ADVERTISE = enum.auto()
    REVEAL = enum.auto()  # active SecAgg+: advertised, may be asked to reveal for the committee
    SHARE = enum.auto()
    MASK = enum.auto()
    CONSIST = enum.auto()
    UNMASK = enum.auto()
    DONE = enum.auto()
    ABORTED = enum.auto()


_STAGE_OF_PHASE = {
    _Phase.ADVERTISE: Stage.ADVERTISE_KEYS,
    _Phase.REVEAL: Stage.SHARE_KEYS,
    _Phase.SHARE: Stage.SHARE_KEYS,
    _Phase.MASK: Stage.MASKED_INPUT,
    _Phase.CONSIST: Stage.CONSISTENCY_CHECK,
    _Phase.UNMASK: Stage.UNMASKING,
}

# Serialized (key share, seed share, noise-layer shares) of one owner's secrets.
_HeldShares = tuple[bytes, bytes, tuple[bytes, ...]]


class _Header(TypedDict):
    """The fields that every message a client sends starts with."""

    session_id: bytes
    round_index: int
    sender: int


# The client module re-exports the mode enum so the state codec whitelists it.
_MODES = SecurityMode


class SecAggClient(Party):
    """One client of one secure-aggregation round.

    Keys and the self-mask seed are drawn fresh from the OS CSPRNG at
    construction, so a client object serves exactly one session; build a new
    one per round.

    Threat model: the client trusts nobody but itself.  Against a server that
    lies about who dropped out, it reveals for each peer at most one kind of
    share, and only for a view with at least ``threshold`` survivors in its
    neighbourhood.  In semi-honest mode it relies on the server to relay
    public keys faithfully (without signatures a malicious server could
    substitute them -- see SECURITY.md).  In active mode it verifies every
    peer's signed round keys with identity keys proven against the registry's root before it
    shares anything, signs the survivor set once, and unmasks only after
    verifying ``threshold`` signatures of its neighbourhood on that very set;
    any failure aborts the round with nothing revealed.

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
        identity: Active mode: this client's long-term
            :class:`~privfed.secagg.IdentityKey`, the one the config's registry
            (or the roster's proof against its root) enrols for ``client_id``.
        noise_seeds: Exactly ``config.noise_layers`` secret seeds of 32
            bytes (layer 1 first) from which the DP layer derives this
            client's noise layers; each is Shamir-shared like the self-mask
            seed and revealed only under the reveal rule of :meth:`unmask`.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: ``client_id`` is not in the config, ``values`` has
            the wrong shape or an entry outside the ring, ``identity`` does
            not match the registry (or is given in semi-honest mode), or the
            wrong number of noise seeds.
    """

    def __init__(
        self,
        config: SecAggConfig,
        client_id: int,
        values: npt.NDArray[np.integer] | None = None,
        *,
        identity: IdentityKey | None = None,
        noise_seeds: Sequence[bytes] = (),
    ) -> None:
        if not isinstance(config, SecAggConfig):
            raise ParameterTypeError("config", "a SecAggConfig", config)
        check_int("client_id", client_id)
        if client_id not in config.client_ids:
            raise ParameterError("client_id", "one of config.client_ids", client_id)
        vector = client_input(values, config)
        if config.active:
            if not isinstance(identity, IdentityKey):
                raise ParameterTypeError("identity", "an IdentityKey (active mode)", identity)
            registry = config.identities
            # With the registry's root only, the roster proves this client's key
            # (roster_identities); with the registry, it is checked here as well.
            if isinstance(registry, IdentityRegistry) and not hmac.compare_digest(
                registry.public_key(client_id), identity.public_key
            ):
                raise ParameterError(
                    "identity", "the key the registry holds for this client", identity
                )
        elif identity is not None:
            raise ParameterError("identity", "None in semi-honest mode", identity)
        if isinstance(noise_seeds, (str, bytes)) or not isinstance(noise_seeds, Sequence):
            raise ParameterTypeError("noise_seeds", "a sequence of 32-byte seeds", noise_seeds)
        if len(noise_seeds) != config.noise_layers:
            raise ParameterError(
                "noise_seeds", f"exactly {config.noise_layers} seeds", len(noise_seeds)
            )
        for seed in noise_seeds:
            if not isinstance(seed, bytes) or len(seed) != SEED_SIZE:
                raise ParameterError("noise_seeds", "32-byte seeds", None, secret=True)
        session = config.bound_session_id
        self._config = config
        self._id = client_id
        self._identity = identity
        self._noise_seeds = tuple(noise_seeds)
        self._noise_commitments = tuple(
            noise_seed_commitment(seed, session_id=session, client_id=client_id, layer=j)
            for j, seed in enumerate(noise_seeds, 1)
        )
        self._values: npt.NDArray[np.uint64] | None = vector
        self._values_given = vector is not None
        self._phase = _Phase.ADVERTISE
        self._encryption_keys = keys.KeyPair.generate()
        self._mask_keys = keys.KeyPair.generate()
        self._seed = secrets.token_bytes(SEED_SIZE)
        self._commitment = self_mask_commitment(
            self._seed,
            session_id=session,
            round_index=config.round_index,
            client_id=client_id,
        )
        # Active SecAgg+: the committed graph value, and the root it was revealed for.
        self._graph_value, self._graph_commitment = new_graph_value(
            session, client_id, committee=config.committee
        )
        self._revealed_root: bytes | None = None
        # Filled as the round goes on.
        self._roster: dict[int, tuple[bytes, bytes]] = {}
        self._roster_members: frozenset[int] = frozenset()
        # Active mode: the identity keys the roster proved against the registry's root.
        self._identity_keys: dict[int, bytes] = {}
        self._graph_seed: bytes | None = None
        # The session pairwise keys, share AEADs and survivor-set signatures are
        # bound to: the bound session id, and for SecAgg+ also the graph seed.
        self._round_session = session
        self._neighbours: frozenset[int] = (
            config.neighbours(client_id) if config.graph is GraphMode.COMPLETE else frozenset()
        )
        self._share_keys: dict[int, bytes] = {}
        # Serialized (key share, seed share, noise-layer shares): this client's
        # own, and those it holds for each peer.  They are only ever revealed,
        # never parsed.
        self._own_shares: tuple[bytes, bytes, tuple[bytes, ...]] | None = None
        self._held: dict[int, tuple[bytes, bytes, tuple[bytes, ...]]] = {}
        self._masked_with: frozenset[int] = frozenset()
        # Active mode: the survivor set this client signed, and its signature.
        self._signed_survivors: tuple[int, ...] | None = None
        self._signed_root: bytes | None = None
        self._consistency: ConsistencySignature | None = None
        self._request: UnmaskRequest | None = None
        self._response: UnmaskResponse | None = None
        # Public counters (benchmarks): Ed25519 signatures made and verified.
        self._signatures_made = 0
        self._signatures_verified = 0

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

    @property
    def signatures_made(self) -> int:
        """Ed25519 signatures this client made so far (active mode; 0 otherwise)."""
        return self._signatures_made

    @property
    def signatures_verified(self) -> int:
        """Ed25519 signatures this client verified so far (active mode; 0 otherwise)."""
        return self._signatures_verified

    @property
    def neighbours(self) -> frozenset[int]:
        """This client's neighbours; in SecAgg+ known once the roster fixed the graph."""
        return self._neighbours

    # -- helpers -----------------------------------------------------------------

    def _require(self, phase: _Phase, stage: Stage) -> None:
        if self._phase is _Phase.ABORTED:
            raise ProtocolAbort("this client has aborted the round", stage=stage.name)
        if self._phase is not phase:
            raise ProtocolAbort(
                f"call out of order: the client is at {self._state_name()}",
                stage=stage.name,
            )

    def _header(self) -> _Header:
        """The bound session, the round and this client's id, for a message it sends."""
        cfg = self._config
        return _Header(
            session_id=cfg.bound_session_id, round_index=cfg.round_index, sender=self._id
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
        self._noise_seeds = ()

    def _check_context(self, message: Message, stage: Stage) -> None:
        cfg = self._config
        if message.session_id != cfg.bound_session_id or message.round_index != cfg.round_index:
            raise self._abort("message belongs to another session, round or configuration", stage)

    def _sign(self, payload: bytes) -> bytes:
        identity = self._identity
        if identity is None:  # pragma: no cover -- active mode guarantees a key
            raise TypeError("no identity key")
        self._signatures_made += 1
        return identity.sign(payload)

    def _verify(self, signer: int, payload: bytes, signature: bytes | None) -> bool:
        key = self._identity_keys.get(signer)
        if key is None or signature is None:
            return False
        self._signatures_verified += 1
        return verify_signature(key, payload, signature)

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
                session_id=self._round_session,
                round_index=self._config.round_index,
                client_id=self._id,
            )
        except KeyAgreementError as exc:
            raise self._abort(
                f"client {exc.peer_id} advertised an invalid {what} key", stage
            ) from None

    def advertise_keys(self) -> AdvertiseKeys:
        """Stage ADVERTISE_KEYS: publish this round's public keys.

        Threat model: the message holds two fresh X25519 public keys, a
        SHA-256 commitment to the self-mask seed (and one per noise-layer
        seed) and, in active mode, this client's Ed25519 signature over
        (bound session, config digest, id, both keys); none reveals a secret.

        Returns:
            The message for the server.

        Raises:
            ProtocolAbort: Called out of order or after an abort.
        """
        self._require(_Phase.ADVERTISE, Stage.ADVERTISE_KEYS)
        cfg = self._config
        signature = None
        if cfg.active:
            signature = self._sign(
                advertisement_payload(
                    session=cfg.bound_session_id,
                    config_digest=cfg.digest,
                    client_id=self._id,
                    encryption_public_key=self._encryption_keys.public_key,
                    mask_public_key=self._mask_keys.public_key,
                )
            )
        message = AdvertiseKeys(
            **self._header(),
            encryption_public_key=self._encryption_keys.public_key,
            mask_public_key=self._mask_keys.public_key,
            self_mask_commitment=self._commitment,
            signature=signature,
            noise_commitments=self._noise_commitments,
            graph_commitment=self._graph_commitment,
        )
        self._phase = _Phase.REVEAL if cfg.committee else _Phase.SHARE
        return message

    def reveal(self, request: CommitteeRequest) -> CommitteeReveal:
        """Active SecAgg+: sign this client's graph value for the root ``request`` proves.

        Only if the root holds this client's leaf and draws it for the committee
        (:mod:`~.committee`); for one root only (asked for another, it aborts).

        Raises:
            ParameterTypeError: ``request`` is not a :class:`CommitteeRequest`.
            ProtocolAbort: Out of order; or (aborting) another session, a proof
                without this client's leaf, a root not drawing it, a second root.
        """
        if not isinstance(request, CommitteeRequest):
            raise ParameterTypeError("request", "a CommitteeRequest", request)
        stage = Stage.ADVERTISE_KEYS
        if self._phase is not _Phase.SHARE or self._revealed_root is None:
            self._require(_Phase.REVEAL, stage)
        self._check_context(request, stage)
        own, cfg = (self._encryption_keys.public_key, self._mask_keys.public_key), self._config
        try:
            root = member_root(
                cfg, request, self._id, own, self._graph_commitment, self._revealed_root
            )
        except RosterRefusedError as exc:
            raise self._abort(str(exc), stage) from None
        self._revealed_root, self._phase = root, _Phase.SHARE
        return signed_reveal(self._config, self._id, root, self._graph_value or b"", self._sign)

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

        In SecAgg+ the graph is fixed here: its seed is the hash of the
        roster's Merkle root over every member's advertisement, which no party
        chooses alone.  The part carries only this client's neighbourhood and
        a multiproof of the root (``O(k log n)`` bytes); the client rebuilds
        the root and checks that the part shows every member of its
        neighbourhood (:mod:`~privfed.secagg.protocol.roster_tree`).  In
        active mode every listed entry's signature is verified against the
        identity registry first.

        Threat model: the server sees only ciphertexts.  Fewer than ``t``
        holders learn nothing about either secret (nor about a noise-layer
        seed).

        Args:
            roster: The server's :class:`Roster`.

        Returns:
            ``{recipient_id: EncryptedShares}``, one per neighbour in the roster.

        Raises:
            ParameterTypeError: ``roster`` is not a :class:`Roster`.
            ProtocolAbort: Out of order; or (aborting) the roster is of another
                session, lists an unknown or a repeated client, misstates this
                client's own keys, repeats a public key, leaves fewer than
                ``threshold`` clients in this client's neighbourhood, holds an
                invalid (low-order) public key, carries a missing or invalid
                signature (active mode), or (SecAgg+) a proof that rebuilds
                no root, lists a client twice or leaves out part of the
                neighbourhood.
        """
        if not isinstance(roster, Roster):
            raise ParameterTypeError("roster", "a Roster", roster)
        stage = Stage.SHARE_KEYS
        self._require(_Phase.REVEAL if self._phase is _Phase.REVEAL else _Phase.SHARE, stage)
        self._check_context(roster, stage)
        if self._config.active and self._identity is not None:  # active: always a key
            try:
                mine = self._identity.public_key
                self._identity_keys = roster_identities(self._config, self._id, mine, roster)
            except RosterRefusedError as exc:
                raise self._abort(str(exc), stage) from None
        entries = self._roster_entries(roster, stage)
        members = self._fix_graph(roster, entries, stage)
        peers = sorted(self._neighbours & set(entries))
        self._require_quorum(len(peers) + 1, "clients of this neighbourhood advertised keys", stage)
        share_keys = self._pairwise_keys(
            self._encryption_keys, {peer: entries[peer][0] for peer in peers}, stage
        )
        out, own = self._encrypted_shares(sorted([self._id, *peers]), share_keys)
        self._roster = entries
        self._roster_members = members
        # The share-encryption key is symmetric in the pair, so the key used to
        # encrypt to a peer also decrypts what that peer sent: keep it rather
        # than run X25519 again at the next stage.
        self._share_keys = share_keys
        self._own_shares = own
        self._phase = _Phase.MASK
        return out

    def _roster_entries(self, roster: Roster, stage: Stage) -> dict[int, tuple[bytes, bytes]]:
        """``{id: (encryption key, mask key)}`` of a roster that passes every check (else abort)."""
        cfg = self._config
        entries = {
            e.client_id: (e.encryption_public_key, e.mask_public_key) for e in roster.entries
        }
        if len(entries) != len(roster.entries):
            raise self._abort("the roster lists a client twice", stage)
        if not all(member in cfg.client_ids for member in entries):
            raise self._abort("the roster lists a client outside the configuration", stage)
        mine = (self._encryption_keys.public_key, self._mask_keys.public_key)
        own = [e.graph_commitment for e in roster.entries if e.client_id == self._id]
        if entries.get(self._id) != mine or own != [self._graph_commitment]:
            raise self._abort("the roster misstates or omits this client's keys", stage)
        all_keys = [k for pair in entries.values() for k in pair]
        if len(set(all_keys)) != len(all_keys):
            raise self._abort("the roster repeats a public key", stage)
        if cfg.active:
            unsigned = unsigned_entry(cfg, self._id, roster, self._verify)
            if unsigned is not None:
                raise self._abort(
                    f"the advertised keys of client {unsigned} carry no valid signature", stage
                )
        return entries

    def _fix_graph(
        self, roster: Roster, entries: dict[int, tuple[bytes, bytes]], stage: Stage
    ) -> frozenset[int]:
        """The roster members this client knows of; SecAgg+: the graph they fix.

        See :func:`~privfed.secagg.protocol._roster_check.roster_graph`.
        """
        cfg = self._config
        if cfg.graph is not GraphMode.HARARY:
            return frozenset(entries)
        try:
            seed, neighbours, members = roster_graph(
                cfg,
                self._id,
                roster,
                entries,
                verify=self._verify,
                revealed_root=self._revealed_root,
            )
        except RosterRefusedError as exc:
            raise self._abort(str(exc), stage) from None
        self._graph_seed = seed
        self._round_session = graph_session(cfg.bound_session_id, seed)
        self._neighbours = neighbours
        return members

    def _encrypted_shares(
        self, holders: list[int], share_keys: dict[int, bytes]
    ) -> tuple[dict[int, EncryptedShares], _HeldShares | None]:
        """Share the secrets among ``holders``: the others' encrypted, and this client's own."""
        cfg = self._config
        key_shares, seed_shares, *noise_shares = shamir.split_many(
            (self._mask_keys.private_key, self._seed, *self._noise_seeds),
            threshold=cfg.threshold,
            holders=holders,
        )
        out: dict[int, EncryptedShares] = {}
        own: _HeldShares | None = None
        header = self._header()
        for position, (holder, key_share, seed_share) in enumerate(
            zip(holders, key_shares, seed_shares, strict=True)
        ):
            layers = tuple(shares[position] for shares in noise_shares)
            if holder == self._id:
                own = (key_share, seed_share, layers)
                continue
            plaintext = pack_shares(
                sender=self._id,
                recipient=holder,
                key_share=key_share,
                seed_share=seed_share,
                noise_shares=layers,
            )
            ciphertext = aead.seal(
                share_keys[holder],
                plaintext,
                associated_data=aead.share_associated_data(
                    session_id=self._round_session,
                    round_index=cfg.round_index,
                    sender=self._id,
                    recipient=holder,
                ),
            )
            out[holder] = EncryptedShares(**header, recipient=holder, ciphertext=ciphertext)
        return out, own

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
        late = client_input(values, cfg)
        self._check_context(routed, stage)
        if routed.recipient != self._id:
            raise self._abort("ciphertexts addressed to another client", stage)
        allowed = self._neighbours & set(self._roster)
        senders = routed.senders
        distinct = set(senders)
        if len(distinct) != len(senders):
            raise self._abort("ciphertexts from one client listed twice", stage)
        if not distinct <= allowed:
            raise self._abort("ciphertexts from a client outside the roster neighbourhood", stage)
        self._require_quorum(len(distinct) + 1, "clients of this neighbourhood shared keys", stage)
        held = self._open_shares(routed, stage)
        buffer = self._values if late is None else late
        if buffer is None:  # pragma: no cover -- only None after an abort
            raise self._abort("input already consumed", stage)
        # ``buffer`` is our private copy of the input; it is masked in place.
        self._mask(buffer, senders, stage)
        self._values = None
        self._share_keys = {}
        # The seed lives on only in the Shamir shares now.  (Python cannot
        # zeroize memory; dropping references is the best it can do.)
        self._seed = b""
        buffer.flags.writeable = False
        self._noise_seeds = ()
        self._held = held
        self._masked_with = frozenset(senders)
        self._phase = _Phase.CONSIST if cfg.active else _Phase.UNMASK
        return MaskedInput(**self._header(), ring_bits=cfg.ring_bits, values=buffer)

    def _open_shares(self, routed: RoutedShares, stage: Stage) -> dict[int, _HeldShares]:
        """Decrypt the shares each sender holds for this client (abort on any failure)."""
        cfg = self._config
        held: dict[int, _HeldShares] = {}
        for item in routed.shares:
            try:
                plaintext = aead.unseal(
                    self._share_keys[item.sender],
                    item.ciphertext,
                    associated_data=aead.share_associated_data(
                        session_id=self._round_session,
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
                held[item.sender] = unpack_shares(
                    plaintext,
                    sender=item.sender,
                    recipient=self._id,
                    noise_layers=cfg.noise_layers,
                )
            except (ParameterError, ParameterTypeError):
                raise self._abort(
                    f"client {item.sender} sent a malformed share plaintext", stage
                ) from None
        return held

    def _mask(self, buffer: npt.NDArray[np.uint64], senders: tuple[int, ...], stage: Stage) -> None:
        """Add the self mask and the pairwise masks with ``senders`` to ``buffer``, in place."""
        cfg = self._config
        self_seed = keys.derive_self_mask_seed(
            self._seed,
            session_id=cfg.bound_session_id,
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

    # -- stage 3 (active mode) -----------------------------------------------------------

    def consistency_check(self, request: ConsistencyRequest) -> ConsistencySignature:
        """Stage CONSISTENCY_CHECK (active mode): sign the survivor set, once.

        The client signs (session, config digest, survivor set) -- in SecAgg+
        the root of the survivor tree, whose neighbourhood part and multiproof
        it checks -- after checking the set: ids of the roster, this client
        among them, ``threshold`` of them in the clients it masked with (itself
        included).  It signs one set: the same request again returns the same
        signature; any other aborts.

        Threat model: the signature commits this client to one view of who
        survived.  The server needs ``threshold`` such signatures on one set
        for any client to unmask, so it cannot show two groups of honest
        clients two different views when ``2t > s + n_C``.

        Args:
            request: The server's :class:`ConsistencyRequest` for this client.

        Returns:
            The :class:`ConsistencySignature` for the server.

        Raises:
            ParameterTypeError: ``request`` is not a :class:`ConsistencyRequest`.
            ProtocolAbort: Semi-honest mode or out of order (state unchanged);
                or (aborting) another session, recipient or set than the one
                signed, or a set that fails the checks above.
        """
        if not isinstance(request, ConsistencyRequest):
            raise ParameterTypeError("request", "a ConsistencyRequest", request)
        stage = Stage.CONSISTENCY_CHECK
        cfg = self._config
        if not cfg.active:
            raise ProtocolAbort("no ConsistencyCheck round in semi-honest mode", stage=stage.name)
        if self._signed_survivors is not None and self._consistency is not None:
            if self._phase is _Phase.ABORTED:
                raise ProtocolAbort("this client has aborted the round", stage=stage.name)
            if (
                request.survivors == self._signed_survivors
                and request.recipient == self._id
                and self._survivor_root(request, stage) == self._signed_root
            ):
                return self._consistency
            raise self._abort("asked to sign two different survivor sets", stage)
        self._require(_Phase.CONSIST, stage)
        self._check_context(request, stage)
        if request.recipient != self._id:
            raise self._abort("request addressed to another client", stage)
        root = self._survivor_root(request, stage)
        survivors = frozenset(request.survivors)
        if self._id not in survivors:
            raise self._abort("the survivor set does not list this client", stage)
        # SecAgg+: a client knows the roster within its neighbourhood only.
        hood = self._neighbours | {self._id}
        outside = not all(member in cfg.client_ids for member in survivors)
        if outside or not survivors & hood <= self._roster_members:
            raise self._abort("the survivor set lists a client outside the roster", stage)
        view = self._masked_with | {self._id}
        self._require_quorum(len(survivors & view), "survivors this client masked with", stage)
        signature = self._sign(
            survivor_payload(
                session=self._round_session,
                config_digest=self._config.digest,
                survivors=request.survivors,
                root=root,
            )
        )
        message = ConsistencySignature(**self._header(), signature=signature)
        self._signed_survivors = request.survivors
        self._signed_root = root
        self._consistency = message
        self._phase = _Phase.UNMASK
        return message

    def _survivor_root(self, request: ConsistencyRequest, stage: Stage) -> bytes | None:
        """SecAgg+: the survivor tree's root the request proves (``None``: complete graph).

        The request lists this client's neighbourhood's survivors only, with
        a multiproof; see :func:`~privfed.secagg.protocol._roster_check.survivor_root`.
        """
        if self._config.graph is GraphMode.COMPLETE:
            if request.proof is not None:
                raise self._abort("a survivor-set proof in a complete-graph round", stage)
            return None
        try:
            root, _ = survivor_root(self._round_session, request, self._neighbours | {self._id})
        except RosterRefusedError as exc:
            raise self._abort(str(exc), stage) from None
        return root

    def _check_signed_view(self, request: UnmaskRequest, stage: Stage) -> None:
        """Active mode: the request must carry ``t`` valid signatures on the signed set."""
        signed = self._signed_survivors
        if signed is None:  # pragma: no cover -- the phase guarantees a signed set
            raise self._abort("no survivor set was signed", stage)
        members = frozenset(signed)
        view = self._masked_with | {self._id}
        if set(request.survivors) != members & view or set(request.dropped) != view - members:
            raise self._abort("the request's view differs from the signed survivor set", stage)
        eligible = members & (self._neighbours | {self._id})
        payload = survivor_payload(
            session=self._round_session,
            config_digest=self._config.digest,
            survivors=signed,
            root=self._signed_root,
        )
        signers = [item.signer for item in request.signatures]
        if len(set(signers)) != len(signers):
            raise self._abort("a signer is listed twice", stage)
        if not set(signers) <= eligible:
            raise self._abort(
                "a signature from a client outside the neighbourhood's survivors", stage
            )
        self._require_quorum(len(signers), "signatures on the survivor set", stage)
        for item in request.signatures:
            if not self._verify(item.signer, payload, item.signature):
                raise self._abort(
                    f"the signature of client {item.signer} on the survivor set is invalid", stage
                )

    # -- stage 4 -----------------------------------------------------------------------

    def unmask(self, request: UnmaskRequest) -> UnmaskResponse:
        """Stage UNMASKING: reveal one share per peer, as the request's view dictates.

        For each survivor (this client included) the share of its self-mask
        seed; for each dropped client the share of its mask private key.  The
        client answers only if the view is sound: survivors and dropped are
        disjoint, together they are exactly this client plus the peers it
        masked with, this client is a survivor, and at least ``threshold``
        survivors remain.  In active mode, additionally, the view must be the
        survivor set this client signed (restricted to the peers it masked
        with) and the request must carry at least ``threshold`` valid
        signatures on that very set from survivors of this client's
        neighbourhood; every forwarded signature is verified.  It answers at
        most one view: a repeat of the very same request returns the very
        same response (so a lost reply can be re-sent), any other request
        aborts.

        Noise layers (``config.noise_layers = L > 0``, complete graph): with
        ``u`` survivors of ``n`` clients, the client also reveals, for each
        survivor ``v``, its shares of ``v``'s layer seeds ``j`` with
        ``n - u < j <= L`` -- never of a dropped client, never another layer.
        ``u`` counts only survivors this client masked with (in active mode,
        the signed set within its view), so a set padded with roster members
        that never masked with it unlocks no extra layer.  The request must
        name exactly those layers.

        Threat model: this is the step a lying server would exploit -- listing a
        survivor as dropped would hand it both the self-mask seed and the mask
        key of that client, i.e. its input; asking for more noise layers than
        the survivor count allows would strip honest noise.  The checks above
        make both impossible; every check runs before anything is revealed.

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
        survivors, dropped = self._check_view(request, stage)
        layers = self._layers_to_reveal(request, survivors, stage)
        own = self._own_shares
        if own is None:  # pragma: no cover -- only None after an abort
            raise self._abort("shares already wiped", stage)
        held = dict(self._held)
        held[self._id] = own
        ordered = sorted(survivors)
        response = UnmaskResponse(
            **self._header(),
            self_mask_shares=tuple(RevealedShare(owner=v, share=held[v][1]) for v in ordered),
            key_shares=tuple(RevealedShare(owner=v, share=held[v][0]) for v in sorted(dropped)),
            noise_shares=tuple(
                RevealedNoiseShare(owner=v, layer=j, share=held[v][2][j - 1])
                for v in ordered
                for j in layers
            ),
        )
        self._request = request
        self._response = response
        self._wipe()
        self._phase = _Phase.DONE
        return response

    def _check_view(self, request: UnmaskRequest, stage: Stage) -> tuple[set[int], set[int]]:
        """The request's (survivors, dropped), once every check of :meth:`unmask` passed."""
        cfg = self._config
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
        if cfg.active:
            self._check_signed_view(request, stage)
        elif request.signatures:
            raise self._abort("signatures in a semi-honest round", stage)
        return survivors, dropped

    def _layers_to_reveal(
        self, request: UnmaskRequest, survivors: set[int], stage: Stage
    ) -> tuple[int, ...]:
        """The noise layers the reveal rule allows, which the request must name exactly."""
        cfg, view = self._config, self._masked_with | {self._id}
        # Count only survivors this client masked with: a signed set padded with
        # roster members outside its view (no masks, no noise in the sum) must
        # not unlock more layers.
        count = (
            len(set(self._signed_survivors) & view)
            if self._signed_survivors is not None
            else len(survivors)
        )
        try:
            return checked_layers(cfg, request.noise_layers, count)
        except ValueError as exc:
            raise self._abort(str(exc), stage) from None
