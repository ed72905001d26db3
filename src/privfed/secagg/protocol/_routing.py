"""Routing at the close of SHARE_KEYS: every ciphertext to its recipient.

Honest clients each send one bundle of equal-sized ciphertexts; those bundles
are routed with array operations (:func:`route_packed`), whole records moved
and the sender id written over the recipient's.  Anything else goes item by
item (:func:`route_items`), with the same result.
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
    every client in ``complete`` sent one bundle of
    equal-sized ciphertexts (what honest clients do).  The result is the
    one :func:`route_items` builds -- the same messages, each with its
    wire encoding already assembled -- and is checked to route exactly
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
    # A bundle item ``recipient | size | ciphertext`` becomes the routed item
    # ``sender | size | ciphertext``: rewrite the id in one copy of all the
    # records, then move whole records into the routed bodies.
    records = np.concatenate([p.records for p in packs])
    records.view(_group_dtype(width))["id"] = from_ids
    routed_from: list[int] = from_ids[order].tolist()
    to_sorted = to_ids[order]
    starts = np.searchsorted(to_sorted, wanted, "left").tolist()
    stops = np.searchsorted(to_sorted, wanted, "right").tolist()
    for recipient, start, stop in zip(senders, starts, stops, strict=True):
        if stop - start != len(hood(recipient) & complete):
            return None  # pragma: no cover -- the graph is symmetric
    bodies = _assemble(records, order, senders, starts, stops)
    header = {"session_id": config.bound_session_id, "round_index": config.round_index}
    opaque = np.dtype((np.void, records.dtype.itemsize))
    routed: dict[int, RoutedShares] = {}
    for recipient, start, stop, body in zip(senders, starts, stops, bodies, strict=True):
        part = body[_GROUP_HEAD.size :].view(opaque)
        packed = _PackedBlobs(tuple(routed_from[start:stop]), width, records=part)
        routed[recipient] = RoutedShares._of_packed(header, recipient, packed, body.data)
    return routed


def _assemble(
    records: npt.NDArray[Any],
    order: npt.NDArray[np.intp],
    recipients: list[int],
    starts: list[int],
    stops: list[int],
) -> list[npt.NDArray[np.uint8]]:
    """Every routed body, back to back in one read-only buffer: one view per recipient.

    The body of ``recipients[i]`` is ``recipient u32 | count u32`` and then the
    records ``order[starts[i]:stops[i]]``, taken straight into place (no
    per-recipient copy, no joined bytes).
    """
    step = records.dtype.itemsize
    size = _GROUP_HEAD.size
    buffer = np.empty(size * len(recipients) + step * len(order), dtype=np.uint8)
    # Whole records as opaque bytes: a take of a structured dtype copies field
    # by field (an order of magnitude slower), the same bytes either way.
    opaque = np.dtype((np.void, step))
    source = records.view(opaque)
    spans = []
    at = 0
    for recipient, start, stop in zip(recipients, starts, stops, strict=True):
        end = at + size + step * (stop - start)
        buffer[at : at + size] = np.frombuffer(_GROUP_HEAD.pack(recipient, stop - start), np.uint8)
        # mode="clip": ``order`` holds valid positions (from argsort), and a
        # take with ``out`` and the default mode goes through a temporary copy.
        target = buffer[at + size : end].view(opaque)
        np.take(source, order[start:stop], out=target, mode="clip")
        spans.append((at, end))
        at = end
    buffer.flags.writeable = False
    return [buffer[a:b] for a, b in spans]
