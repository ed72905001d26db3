"""The server's UNMASKING stage: revealed shares in, verified-ready secrets out.

A :class:`RevealedShares` keeps the shares each accepted
:class:`~privfed.secagg.UnmaskResponse` revealed -- checked on arrival
(canonical encoding, evaluated at the sender's id), kept packed -- and rebuilds
the secrets :meth:`~privfed.secagg.SecAggServer.finalize` needs: the secrets of
owners whose shares come from the same responders share one set of Lagrange
weights (:func:`~privfed.secagg.primitives.shamir.combine_batches`).  Values
become field elements only for the responses that are used.
"""

from __future__ import annotations

import bisect
import functools
import hmac
import itertools
import struct
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from privfed.errors import (
    MessageFormatError,
    ParameterError,
    ParameterTypeError,
    ReconstructionError,
)
from privfed.secagg.primitives import keys, shamir
from privfed.secagg.protocol._party import refusal
from privfed.secagg.protocol.commitment import noise_seed_commitment
from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.messages import (
    AdvertiseKeys,
    RevealedNoiseShare,
    RevealedShare,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskResponse,
)
from privfed.secagg.protocol.messages._codec import _PackedBlobs, _unchecked
from privfed.secagg.protocol.stages import Stage

__all__ = ["RevealedShares", "unmask_requests_for"]

_SECRET_NAMES = {0: "self-mask seed", 1: "mask key"}

# One response's revealed shares of one kind: (holder, owners, values), see RevealedShares.
_Revealed = tuple[int, npt.NDArray[np.int64], npt.NDArray[np.uint8]]

_PRIME_BYTES = shamir.PRIME.to_bytes(shamir.FIELD_BYTES, "big")
if _PRIME_BYTES != b"\x01" + b"\xff" * (shamir.FIELD_BYTES - 1):  # pragma: no cover
    raise RuntimeError("_canonical_shares assumes PRIME = 2**521 - 1 in 66 bytes")
# Share lists longer than this are checked with array operations (about where
# those start to pay off), shorter ones share by share.
_ARRAY_CHECK_MIN = 32


def _canonical(group: _PackedBlobs, blobs: npt.NDArray[np.uint8], index: bytes) -> bool:
    """:func:`_canonical_shares` of a packed list (``blobs``: its blob view); a few
    items are checked as bytes.

    Equal-length big-endian byte strings compare as the numbers they encode.
    """
    n = len(group)
    if n > _ARRAY_CHECK_MIN:
        return _canonical_shares(blobs, index)
    if n == 0:
        return True
    if group.width != shamir.SHARE_SIZE:  # one length for every item of the list
        return False
    width, size = shamir.FIELD_BYTES, shamir.SHARE_SIZE
    flat = blobs.tobytes()
    return all(
        flat[start : start + width] == index and flat[start + width : start + size] < _PRIME_BYTES
        for start in range(0, n * size, size)
    )


def _canonical_shares(blobs: npt.NDArray[np.uint8], index: bytes) -> bool:
    """Whether every row is a serialized share ``index | value`` with ``value < PRIME``.

    The batched form of the per-share checks of ``_receive_unmask``: the
    length, the index bytes equal to the sender's, and the value (big-endian)
    below the field prime.  ``PRIME = 2**521 - 1`` fills its 66 bytes but for
    the top 7 bits, so a value is below it exactly when its first byte is 0 or
    1 and its bytes are not ``PRIME``'s own: a few C-level byte operations on
    the whole list instead of one array operation per check.
    """
    n, size = blobs.shape
    if n == 0:
        return True
    if size != shamir.SHARE_SIZE:
        return False
    width = shamir.FIELD_BYTES
    if blobs[:, :width].tobytes() != index * n:
        return False
    flat = blobs.tobytes()
    if flat[width::size].translate(None, b"\x00\x01"):
        return False  # a value's first byte is above PRIME's (1)
    # Any occurrence of PRIME's bytes, aligned or not, is looked at row by row.
    return _PRIME_BYTES not in flat or all(
        flat[start + width : start + size] != _PRIME_BYTES for start in range(0, len(flat), size)
    )


@functools.cache
def _share_value(width: int) -> struct.Struct:
    """A run of ``width``-byte share values, split one at a time (``iter_unpack``)."""
    return struct.Struct(f"{width}s")


class RevealedShares:
    """The shares revealed at UNMASKING, and the secrets rebuilt from them.

    Args:
        threshold: The round's Shamir threshold ``t``.
        check_all: Interpolate every share received (``check_all_shares`` of
            :class:`~privfed.secagg.SecAggServer`) rather than exactly ``t``.
        quorum: The server's quorum rule: aborts the round at a stage unless a
            count reaches the threshold.
    """

    def __init__(
        self, threshold: int, check_all: bool, quorum: Callable[[int, str, Stage], None]
    ) -> None:
        self._t = threshold
        self._check_all = check_all
        self._require_quorum = quorum
        # Revealed shares per kind (0: self-mask seeds, 1: mask keys), one record
        # per response: (holder id = x-coordinate, owner ids, share values as an
        # (n, FIELD_BYTES) big-endian byte array, usually a view of the message).
        self._revealed: tuple[list[_Revealed], list[_Revealed]] = ([], [])
        # Noise layers: owner -> layer -> [(holder, share value)].
        self._noise_shares: dict[int, dict[int, list[tuple[int, int]]]] = {}

    def clear(self) -> None:
        """Drop every share (abort, or the secrets are rebuilt)."""
        self._revealed = ([], [])
        self._noise_shares = {}

    def add(
        self,
        message: UnmaskResponse,
        packed: tuple[_PackedBlobs, _PackedBlobs] | None,
        stage: Stage,
    ) -> None:
        """Check the shares of ``message`` (``packed``: its packed lists) and keep them.

        Shares are checked here (canonical encoding, evaluated at the sender's
        id) but only turned into field elements for the ones finalize uses.

        Raises:
            ProtocolAbort: A share is not evaluated at the sender's id (refused,
                nothing kept).
            MessageFormatError: A share is malformed (nothing kept).
        """
        sender = message.sender
        index_bytes = sender.to_bytes(shamir.FIELD_BYTES, "big")
        width = shamir.FIELD_BYTES
        records: list[_Revealed] = []
        if packed is not None:
            # One blob view per list, for the check and the record both.
            seed_blobs, key_blobs = packed[0].blobs, packed[1].blobs
            if _canonical(packed[0], seed_blobs, index_bytes) and _canonical(
                packed[1], key_blobs, index_bytes
            ):
                seed_ids, key_ids = packed[0].ids, packed[1].ids
                records = [
                    (sender, np.fromiter(seed_ids, np.int64, len(seed_ids)), seed_blobs[:, width:]),
                    (sender, np.fromiter(key_ids, np.int64, len(key_ids)), key_blobs[:, width:]),
                ]
        if not records:
            for group in (message.self_mask_shares, message.key_shares):
                for item in group:
                    _check_share(item, sender, index_bytes, stage)
                values = b"".join(item.share[width:] for item in group)
                records.append(
                    (
                        sender,
                        np.array([item.owner for item in group], dtype=np.int64),
                        np.frombuffer(values, dtype=np.uint8).reshape(len(group), width),
                    )
                )
        noise: list[tuple[RevealedNoiseShare, int]] = []
        for noise_item in message.noise_shares:
            _check_share(noise_item, sender, index_bytes, stage)
            noise.append((noise_item, int.from_bytes(noise_item.share[width:], "big")))
        for kind, record in enumerate(records):
            if record[1].shape[0]:
                self._revealed[kind].append(record)
        for noise_item, value in noise:
            layers = self._noise_shares.setdefault(noise_item.owner, {})
            layers.setdefault(noise_item.layer, []).append((sender, value))

    def _picked_shares(
        self, owners: list[int], kind: int, stage: Stage
    ) -> list[tuple[tuple[int, ...], list[int]]]:
        """Per owner (kind 0: self-mask seed, 1: mask key), the shares to interpolate.

        Each is ``(holders, values)``, holders increasing: the ``threshold``
        lowest responders holding a share of that owner (all of them with
        ``check_all_shares``).  Raises (aborting) for the first owner with
        fewer than ``threshold`` shares.  Values become field elements here,
        only for the responses that are used.
        """
        if not owners:
            return []
        t = self._t
        records = sorted(self._revealed[kind], key=lambda r: r[0])
        sizes = [r[1].shape[0] for r in records]
        if records:
            ids = np.concatenate([r[1] for r in records])
            holder_of = np.repeat(np.asarray([r[0] for r in records], dtype=np.int64), sizes)
        else:
            ids = holder_of = np.empty(0, dtype=np.int64)
        # Stable: within one owner, entries keep the increasing holder order.
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        wanted = np.asarray(owners, dtype=np.int64)
        starts = np.searchsorted(ids, wanted, "left")
        counts = np.searchsorted(ids, wanted, "right") - starts
        if (counts < t).any():
            what = _SECRET_NAMES[kind]
            for owner, count in zip(owners, counts.tolist(), strict=True):
                self._require_quorum(count, f"shares of the {what} of client {owner}", stage)
        if self._check_all:
            take = np.concatenate(
                [np.arange(a, a + n) for a, n in zip(starts, counts, strict=True)]
            )
            bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        else:
            take = (starts[:, None] + np.arange(t)[None, :]).ravel()
            bounds = list(range(0, t * len(owners) + 1, t))
        used = order[take]  # positions in the records' concatenation
        width = shamir.FIELD_BYTES
        holders: list[int] = holder_of[used].tolist()
        # The used share values only, gathered in one copy, then one int each.
        flat = np.concatenate([r[2] for r in records])[used].tobytes() if records else b""
        ys = [int.from_bytes(value, "big") for (value,) in _share_value(width).iter_unpack(flat)]
        return [(tuple(holders[a:b]), ys[a:b]) for a, b in itertools.pairwise(bounds)]

    def rebuild(self, owners: list[int], kind: int, stage: Stage) -> list[bytes]:
        """The secrets of ``owners`` of one kind.

        ``kind`` 0: self-mask seeds, 1: mask private keys, ``j + 1``: the
        layer-``j`` noise seeds.

        Raises:
            ProtocolAbort: (Aborting) fewer than ``threshold`` shares of one of them.
            ReconstructionError: The shares of an owner are inconsistent (named).
        """
        if kind >= 2:
            groups = [self._gather(owner, kind, stage) for owner in owners]
            return self._combine(owners, groups, kind)
        picked = self._picked_shares(owners, kind, stage)

        def shares() -> list[list[shamir.Share]]:
            return [[shamir.Share(h, v) for h, v in zip(xs, ys, strict=True)] for xs, ys in picked]

        if self._check_all:
            return self._combine(owners, shares(), kind)
        # Exactly t shares each: the owners whose shares come from the same
        # responders share one set of Lagrange weights (in the complete
        # graph, all of them).
        by_holders: dict[tuple[int, ...], list[int]] = {}
        for position, (xs, _) in enumerate(picked):
            by_holders.setdefault(xs, []).append(position)
        plan = [(xs, [picked[p][1] for p in positions]) for xs, positions in by_holders.items()]
        try:
            results = shamir.combine_batches(plan, threshold=self._t)
        except ReconstructionError:
            return self._combine(owners, shares(), kind)  # names the owner at fault
        out = [b""] * len(owners)
        for positions, secrets_of in zip(by_holders.values(), results, strict=True):
            for p, secret in zip(positions, secrets_of, strict=True):
                out[p] = secret
        return out

    def noise_seeds(
        self,
        survivors: list[int],
        layers: tuple[int, ...],
        advertised: Mapping[int, AdvertiseKeys],
        session: bytes,
        stage: Stage,
    ) -> dict[int, dict[int, bytes]]:
        """``{survivor: {layer: seed}}`` rebuilt for ``layers``, checked against the commitments
        the survivors ``advertised``.

        Raises:
            ProtocolAbort: (Aborting) fewer than ``threshold`` shares of a seed.
            ReconstructionError: A rebuilt seed does not match its commitment.
        """
        noise_seeds: dict[int, dict[int, bytes]] = {owner: {} for owner in survivors}
        for layer in layers:
            rebuilt = self.rebuild(survivors, layer + 1, stage)
            for owner, seed in zip(survivors, rebuilt, strict=True):
                expected = advertised[owner].noise_commitments[layer - 1]
                actual = noise_seed_commitment(
                    seed, session_id=session, client_id=owner, layer=layer
                )
                if not hmac.compare_digest(expected, actual):
                    raise ReconstructionError(
                        f"the rebuilt layer-{layer} noise seed of client {owner} does not "
                        "match its commitment"
                    )
                noise_seeds[owner][layer] = seed
        return noise_seeds

    def pair_seeds(
        self,
        dropped: list[int],
        survivors: list[int],
        advertised: Mapping[int, AdvertiseKeys],
        hood: Callable[[int], frozenset[int]],
        session: tuple[bytes, int],
        stage: Stage,
    ) -> list[tuple[bytes, bool]]:
        """The pairwise mask seeds the ``dropped`` clients left in the sum, with their signs.

        Each dropped client's mask key is rebuilt and checked against its
        ``advertised`` public key; the seeds are those of ``session``: the
        graph session id and the round index.

        Raises:
            ProtocolAbort: (Aborting) fewer than ``threshold`` shares of a key.
            ReconstructionError: A rebuilt key does not match its public key.
        """
        pair_seeds: list[tuple[bytes, bool]] = []
        alive = set(survivors)
        partners_of = {owner: sorted(hood(owner) & alive) for owner in dropped}
        # A dropped client without a surviving neighbour left no mask in the sum.
        needed = [owner for owner in dropped if partners_of[owner]]
        for owner, private in zip(needed, self.rebuild(needed, 1, stage), strict=True):
            partners = partners_of[owner]
            pair = keys.KeyPair.from_private_bytes(private)
            if not hmac.compare_digest(pair.public_key, advertised[owner].mask_public_key):
                raise ReconstructionError(
                    f"the rebuilt mask key of client {owner} does not match its public key"
                )
            seeds = pair.pairwise_keys(
                {partner: advertised[partner].mask_public_key for partner in partners},
                purpose=keys.Purpose.MASK,
                session_id=session[0],
                round_index=session[1],
                client_id=owner,
            )
            # The partner added +PRG if its id is below the dropped client's.
            pair_seeds += [(seed, partner < owner) for partner, seed in seeds.items()]
        return pair_seeds

    def _gather(self, owner: int, kind: int, stage: Stage) -> list[shamir.Share]:
        # Noise-layer seeds (kind >= 2): the shares are few, kept per owner.
        found = sorted(self._noise_shares.get(owner, {}).get(kind - 1, []))
        what = f"noise-layer-{kind - 1} seed"
        self._require_quorum(len(found), f"shares of the {what} of client {owner}", stage)
        used = found if self._check_all else found[: self._t]
        return [shamir.Share(holder, value) for holder, value in used]

    def _combine(
        self, owners: list[int], groups: list[list[shamir.Share]], kind: int
    ) -> list[bytes]:
        # One batched interpolation for all owners (one field inversion in
        # total); on failure, find the owner whose shares are at fault.
        t = self._t
        try:
            return shamir.combine_many(groups, threshold=t)
        except ReconstructionError:
            what = _SECRET_NAMES.get(kind, f"noise-layer-{kind - 1} seed")
            for owner, group in zip(owners, groups, strict=True):
                try:
                    shamir.combine(group, threshold=t)
                except ReconstructionError as exc:
                    raise ReconstructionError(
                        f"the shares of the {what} of client {owner}: {exc}"
                    ) from None
            raise  # pragma: no cover -- combine_many and combine agree


def _check_share(
    item: RevealedShare | RevealedNoiseShare, sender: int, index: bytes, stage: Stage
) -> None:
    raw = item.share
    if (
        len(raw) != shamir.SHARE_SIZE
        or raw[: shamir.FIELD_BYTES] != index
        or int.from_bytes(raw[shamir.FIELD_BYTES :], "big") >= shamir.PRIME
    ):
        _check_share_encoding(item, sender, stage)


def _check_share_encoding(
    item: RevealedShare | RevealedNoiseShare, sender: int, stage: Stage
) -> None:
    """Raise the right error for a revealed share that failed the fast checks."""
    try:
        share = shamir.Share.from_bytes(item.share)
    except (ParameterError, ParameterTypeError):
        raise MessageFormatError(
            f"client {sender} sent a malformed share for client {item.owner}"
        ) from None
    if share.index != sender:
        raise refusal("a share is not evaluated at the sender's id", stage)
    raise AssertionError("unreachable: the fast checks accept this share")  # pragma: no cover


def unmask_requests_for(
    config: SecAggConfig,
    asked: Sequence[int],
    hood: Callable[[int], frozenset[int]],
    survivors: frozenset[int],
    dropped: frozenset[int],
    signatures: Mapping[int, bytes],
    layers: tuple[int, ...],
) -> dict[int, UnmaskRequest]:
    """The server's UnmaskRequest to each of ``asked`` (increasing), built from its view.

    A request lists the ``survivors`` and the ``dropped`` clients of the
    recipient's neighbourhood (``hood``) and the noise ``layers`` to reveal;
    in active mode it carries the ``threshold`` lowest of the verified survivor
    ``signatures`` of that neighbourhood, and a client with fewer is not asked.
    """
    t = config.threshold
    # Each signature was verified on receipt: the checks hold by construction.
    signed = {
        c: _unchecked(SurvivorSignature, {"signer": c, "signature": sig})
        for c, sig in signatures.items()
    }
    # The neighbourhood is sorted once per client, O(k) not O(n); the three
    # lists are its members filtered in order (C-level filters).
    is_signer, is_survivor, is_dropped = (
        signed.__contains__,
        survivors.__contains__,
        dropped.__contains__,
    )
    active, session, index = config.active, config.bound_session_id, config.round_index
    requests: dict[int, UnmaskRequest] = {}
    for client in asked:
        near = hood(client)
        members = sorted(near)
        if client not in near:
            bisect.insort(members, client)
        cosigned: tuple[SurvivorSignature, ...] = ()
        if active:
            cosigners = tuple(itertools.islice(filter(is_signer, members), t))
            if len(cosigners) < t:
                continue
            cosigned = tuple(map(signed.__getitem__, cosigners))
        # Ids of the config, sorted: the UnmaskRequest checks hold by construction.
        requests[client] = UnmaskRequest._trusted(
            session_id=session,
            round_index=index,
            recipient=client,
            survivors=tuple(filter(is_survivor, members)),
            dropped=tuple(filter(is_dropped, members)),
            signatures=cosigned,
            noise_layers=layers,
        )
    return requests
