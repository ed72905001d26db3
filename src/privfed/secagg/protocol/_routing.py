"""Routing at the close of SHARE_KEYS: every ciphertext to its recipient.

Honest clients each send one bundle of equal-sized ciphertexts; those bundles
are routed with array operations (:func:`route_packed`): every record is
copied once, from the bundle that holds it to its place among the routed
records (by recipient, then sender), and the sender id is written over the
recipient's; a routed body is its 8-byte head and a view of its records.
Anything else goes item by item (:func:`route_items`), with the same result.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.messages import (
    EncryptedShares,
    EncryptedSharesBundle,
    RoutedShares,
)
from privfed.secagg.protocol.messages._codec import _blob_dtype, _PackedBlobs

__all__ = ["route_items", "route_packed"]

# RoutedShares: ``recipient u32 | count u32`` then ``sender u32 | size u32 | ciphertext`` items.
_GROUP_HEAD = struct.Struct(">II")


def _group_dtype(width: int) -> np.dtype[Any]:
    return _blob_dtype(True, width)


def route_items(
    config: SecAggConfig,
    complete: frozenset[int],
    ciphertexts: Mapping[int, Mapping[int, EncryptedShares]],
    hood: Callable[[int], frozenset[int]],
) -> dict[int, RoutedShares]:
    """Route ciphertext by ciphertext (single items, or ciphertexts of mixed sizes)."""
    routed: dict[int, RoutedShares] = {}
    for recipient in sorted(complete):
        items = tuple(
            ciphertexts[sender][recipient] for sender in sorted(hood(recipient) & complete)
        )
        # Every item was validated on receipt (session, round, ids, sender
        # and recipient on the roster and neighbours), and senders are
        # taken in increasing order: the RoutedShares checks would repeat that.
        routed[recipient] = RoutedShares._trusted(
            session_id=config.bound_session_id,
            round_index=config.round_index,
            recipient=recipient,
            shares=items,
        )
    return routed


def route_packed(
    config: SecAggConfig,
    complete: frozenset[int],
    bundle_of: Mapping[int, EncryptedSharesBundle],
    hood: Callable[[int], frozenset[int]],
) -> dict[int, RoutedShares] | None:
    """Route whole packed bundles with array operations; ``None`` where that does not apply.

    ``bundle_of``: each sender's packed bundle, if it sent one.  Applies when
    every client in ``complete`` sent one bundle of equal-sized ciphertexts
    (what honest clients do).  The result is the one :func:`route_items`
    builds -- the same messages, each with its wire encoding already in place
    (a head and a view of its records) -- and is checked to route exactly
    ``hood(recipient) & complete`` to every recipient, else ``None``.
    """
    senders = sorted(complete)
    bundles = [bundle_of.get(sender) for sender in senders]
    parts = [None if b is None else b._packed_shares() for b in bundles]
    packs = [p for p in parts if p is not None]
    if len(packs) != len(senders) or len({p.width for p in packs}) != 1:
        return None
    width = packs[0].width
    sizes = [len(p) for p in packs]
    from_ids = np.repeat(np.asarray(senders, dtype=np.int64), sizes)
    to_ids = np.fromiter(
        itertools.chain.from_iterable(p.ids for p in packs), dtype=np.int64, count=sum(sizes)
    )
    wanted = np.asarray(senders, dtype=np.int64)
    keep = np.isin(to_ids, wanted)
    # By recipient, then by sender (stable sort of sender-ordered entries).
    by_recipient = np.argsort(to_ids, kind="stable")
    order = by_recipient[keep[by_recipient]]
    to_sorted = to_ids[order]
    starts = np.searchsorted(to_sorted, wanted, "left").tolist()
    stops = np.searchsorted(to_sorted, wanted, "right").tolist()
    for recipient, start, stop in zip(senders, starts, stops, strict=True):
        if stop - start != len(hood(recipient) & complete):
            return None  # pragma: no cover -- the graph is symmetric
    records = _gathered(packs, order, keep)
    # A bundle item ``recipient | size | ciphertext`` becomes the routed item
    # ``sender | size | ciphertext``.
    from_sorted = from_ids[order]
    records.view(_group_dtype(width))["id"] = from_sorted
    records.flags.writeable = False
    routed_from: list[int] = from_sorted.tolist()
    data = records.view(np.uint8).reshape(-1).data
    step = records.dtype.itemsize
    header = {"session_id": config.bound_session_id, "round_index": config.round_index}
    routed: dict[int, RoutedShares] = {}
    for recipient, start, stop in zip(senders, starts, stops, strict=True):
        packed = _PackedBlobs(tuple(routed_from[start:stop]), width, records=records[start:stop])
        body = (_GROUP_HEAD.pack(recipient, stop - start), data[start * step : stop * step])
        routed[recipient] = RoutedShares._of_packed(header, recipient, packed, body)
    return routed


def _gathered(
    packs: list[_PackedBlobs], order: npt.NDArray[np.intp], keep: npt.NDArray[np.bool_]
) -> npt.NDArray[Any]:
    """The records of ``packs`` (back to back) in ``order``, written sender by sender.

    Each bundle's kept records go straight to their routed place: one copy of
    every record, read where the bundle holds it (no joined copy of all bundles).
    """
    step = packs[0].records.dtype.itemsize
    opaque = np.dtype((np.void, step))
    out = np.empty(len(order), dtype=opaque)
    place = np.empty(keep.size, dtype=np.intp)
    place[order] = np.arange(len(order), dtype=np.intp)
    at = 0
    for pack in packs:
        stop = at + len(pack)
        source = pack.records.view(opaque)
        if keep[at:stop].all():
            out[place[at:stop]] = source
        else:
            mine = keep[at:stop]
            out[place[at:stop][mine]] = source[mine]
        at = stop
    return out
