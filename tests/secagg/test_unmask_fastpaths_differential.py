"""The UNMASKING fast paths against the implementations they replaced (main 0de51a8).

:meth:`SecAggServer.unmask_requests` now sorts each neighbourhood once and
filters it (signers, survivors, dropped) instead of sorting three sets per
client; :meth:`_Reader.uniform_id_blobs` compares the items' length fields as
strided byte slices and unpacks only the ids; ``_PackedBlobs.blobs`` is one
strided view; the server checks a short packed share list on its blob bytes
(``_unmasking._canonical``).  Each must give the reference's result exactly:
the same request bytes (and the same clients skipped), the same parse or
``None`` (and cursor), the same verdict on every kind of bad share.
"""

from __future__ import annotations

import copy
import operator
import random
import struct

import numpy as np
import pytest
from secagg_helpers import active_harary_parties, deliver, share_keys_round

from privfed.secagg import (
    EncryptedSharesBundle,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    SurvivorSignature,
)
from privfed.secagg.primitives import shamir
from privfed.secagg.protocol import _unmasking
from privfed.secagg.protocol.commitment import noise_layers_to_reveal
from privfed.secagg.protocol.messages import UnmaskRequest, _codec
from privfed.secagg.protocol.messages._codec import _PackedBlobs, _Reader, _unchecked

L = 3


def reference_unmask_requests(server: SecAggServer) -> dict[int, bytes]:
    """The requests of ``unmask_requests`` as main 0de51a8 built them (no state change)."""
    cfg = server._config
    survivors = frozenset(server._masked)
    dropped = server._shared - survivors
    layers = noise_layers_to_reveal(cfg, len(survivors)) if cfg.noise_layers else ()
    t = cfg.threshold
    out: dict[int, bytes] = {}
    asked = sorted(server._signatures) if cfg.active else sorted(survivors)
    signed = {
        c: _unchecked(SurvivorSignature, {"signer": c, "signature": sig})
        for c, sig in server._signatures.items()
    }
    for client in asked:
        hood = server._hood(client) | {client}
        signatures: tuple[SurvivorSignature, ...] = ()
        if cfg.active:
            cosigners = sorted(c for c in hood if c in signed)[:t]
            if len(cosigners) < t:
                continue
            signatures = tuple(signed[c] for c in cosigners)
        out[client] = UnmaskRequest._trusted(
            session_id=cfg.bound_session_id,
            round_index=cfg.round_index,
            recipient=client,
            survivors=tuple(sorted(survivors & hood)),
            dropped=tuple(sorted(dropped & hood)),
            signatures=signatures,
            noise_layers=layers,
        ).to_bytes()
    return out


def _requests_bytes(server: SecAggServer) -> dict[int, bytes]:
    return {c: m.to_bytes() for c, m in server.unmask_requests().items()}


def _active_round_to_consistency(non_signers: set[int]) -> SecAggServer:
    cfg, _, clients, _ = active_harary_parties(40, 8, 6, 1, L, seed=11)
    server = SecAggServer(cfg)
    share_keys_round(server, clients)
    late = {7, 23}
    for cid, routed in server.routed_shares().items():
        if cid not in late:
            deliver(server, clients[cid].masked_input(routed))
    for cid, request in server.consistency_requests().items():
        if cid not in non_signers:
            deliver(server, clients[cid].consistency_check(request))
    return server


def test_active_requests_match_the_reference_including_the_clients_left_out() -> None:
    # A third of the clients do not sign: some neighbourhoods keep fewer than
    # threshold signers, and those clients are not asked.
    server = _active_round_to_consistency(set(range(3, 41, 3)))
    expected = reference_unmask_requests(server)
    assert len(expected) < len(server._signatures)  # someone was left out
    assert _requests_bytes(server) == expected


@pytest.mark.parametrize(
    ("graph", "degree", "noise"), [("harary", 6, 0), ("complete", None, 0), ("complete", None, 2)]
)
def test_semi_honest_requests_match_the_reference(
    graph: str, degree: int | None, noise: int
) -> None:
    n = 14
    extra = {"noise_layers": noise, "corrupted": 1} if noise else {}
    cfg = SecAggConfig(
        client_ids=tuple(range(1, n + 1)),
        threshold=3,
        vector_length=L,
        graph=graph,
        degree=degree,
        **extra,  # type: ignore[arg-type]
    )
    rng = np.random.default_rng(3)
    clients = {
        c: SecAggClient(
            cfg,
            c,
            rng.integers(0, 2**32, L, dtype=np.uint64),
            noise_seeds=[rng.bytes(32) for _ in range(noise)],
        )
        for c in cfg.client_ids
    }
    server = SecAggServer(cfg)
    for cid, c in clients.items():
        if cid != 9:  # never advertises: in no list
            server.receive(c.advertise_keys(), sender=cid)
    for cid, c in clients.items():
        if cid != 9:
            server.receive(
                EncryptedSharesBundle.from_shares(c.share_keys(server.roster(cid))), sender=cid
            )
    for cid, routed in server.routed_shares().items():
        if cid not in (2, 12):
            server.receive(clients[cid].masked_input(routed), sender=cid)
    expected = reference_unmask_requests(server)
    got = _requests_bytes(copy.deepcopy(server))
    assert got == expected


def reference_uniform_id_blobs(
    reader: _Reader, n: int, *, wide: bool, max_size: int
) -> _PackedBlobs | None:
    """``_Reader.uniform_id_blobs`` of main 0de51a8."""
    head = _codec._ID_U32 if wide else _codec._ID_U16
    pos = reader._pos
    if n < 1 or pos + head.size > reader._end:
        return None
    size = int(head.unpack_from(reader._data, pos)[1])
    stop = pos + n * (head.size + size)
    if not 1 <= size <= max_size or stop > reader._end:
        return None
    item = ("II" if wide else "IH") + f"{size}x"
    fields = struct.Struct(">" + item * n).unpack_from(reader._data, pos)
    ids: tuple[int, ...] = fields[0::2]
    if fields[1::2].count(size) != n or ids[0] == 0:
        return None
    if n > 1 and not all(map(operator.lt, ids, ids[1:])):
        return None
    reader._pos = stop
    return _PackedBlobs(ids, size, data=reader._data, offset=pos, wide=wide)


def _items(rng: random.Random, wide: bool) -> tuple[bytes, int]:
    """Random ``id | length | blob`` items, now and then breaking one rule."""
    n = rng.choice([1, 2, 3, 5, 17, 40])
    size = rng.choice([1, 7, 132, 255, 256, 300])
    ids = sorted(rng.sample(range(1, 10_000), n))
    sizes = [size] * n
    fault = rng.randrange(8)
    victim = rng.randrange(n)
    if fault == 1:
        sizes[victim] = size ^ 1  # low byte differs
    elif fault == 2:
        sizes[victim] = size ^ 0x100  # high byte differs
    elif fault == 3 and wide:
        sizes[victim] = size | 0x10000  # a byte only a wide length has
    elif fault == 4:
        ids[0] = 0
    elif fault == 5 and n > 1:
        ids[victim], ids[victim - 1] = ids[victim - 1], ids[victim]
    elif fault == 6 and n > 1:
        ids[victim] = ids[victim - 1]
    fmt = ">II" if wide else ">IH"
    body = b"".join(
        struct.pack(fmt, i, s & (0xFFFFFFFF if wide else 0xFFFF)) + rng.randbytes(size)
        for i, s in zip(ids, sizes, strict=True)
    )
    if fault == 7:
        body = body[: rng.randrange(len(body))]  # truncated
    return body, n


@pytest.mark.parametrize("wide", [False, True])
def test_uniform_id_blobs_matches_the_reference(wide: bool) -> None:
    rng = random.Random(7)
    for _ in range(1500):
        body, n = _items(rng, wide)
        data = rng.randbytes(rng.randrange(3)) + body + rng.randbytes(rng.randrange(3))
        start = data.index(body)
        for max_size in (256, 1024):
            new, old = _Reader(data), _Reader(data)
            new._pos = old._pos = start
            got = new.uniform_id_blobs(n, wide=wide, max_size=max_size)
            want = reference_uniform_id_blobs(old, n, wide=wide, max_size=max_size)
            assert new._pos == old._pos
            if want is None:
                assert got is None
                continue
            assert got is not None
            assert (got.ids, got.width, got.items()) == (want.ids, want.width, want.items())
            # The strided blob view: the same bytes, read-only, backed by the message.
            step = (8 if wide else 6) + got.width
            rows = np.frombuffer(data, np.uint8, count=n * step, offset=start).reshape(n, step)
            np.testing.assert_array_equal(got.blobs, rows[:, step - got.width :])
            assert not got.blobs.flags.writeable and _codec._backed_by_bytes(got.blobs)


_PRIME = shamir.PRIME.to_bytes(shamir.FIELD_BYTES, "big")


def reference_canonical(group: _PackedBlobs, index: bytes) -> bool:
    """``_unmasking._canonical`` of main 0de51a8."""
    if len(group) > _unmasking._ARRAY_CHECK_MIN:
        return _unmasking._canonical_shares(group.blobs, index)
    width = shamir.FIELD_BYTES
    return all(
        len(share) == shamir.SHARE_SIZE and share[:width] == index and share[width:] < _PRIME
        for _, share in group.items()
    )


def _share(rng: random.Random, index: bytes) -> bytes:
    value = rng.randrange(shamir.PRIME).to_bytes(shamir.FIELD_BYTES, "big")
    kind = rng.randrange(12)
    if kind == 1:
        return (int.from_bytes(index, "big") + 1).to_bytes(shamir.FIELD_BYTES, "big") + value
    if kind == 2:
        return index + _PRIME
    if kind == 3:
        return index + b"\x02" + value[1:]
    if kind == 4:
        return index + b"\xff" * shamir.FIELD_BYTES
    if kind == 5:
        return index + (shamir.PRIME - 1).to_bytes(shamir.FIELD_BYTES, "big")
    return index + value


def test_canonical_matches_the_reference() -> None:
    rng = random.Random(5)
    for trial in range(1200):
        sender = rng.choice([1, 2, 255, 256, 70_000, 2**32 - 1])
        index = sender.to_bytes(shamir.FIELD_BYTES, "big")
        n = rng.choice([0, 1, 2, 3, 8, 31, 32, 33, 40])
        # Mostly one bad share at most, so that both verdicts are common.
        shares = [index + (rng.randrange(shamir.PRIME)).to_bytes(66, "big") for _ in range(n)]
        if n and trial % 2:
            shares[rng.randrange(n)] = _share(rng, index)
        if n and trial % 7 == 0:
            longer = rng.random() < 0.5  # every share of another width
            shares = [s + b"\x00" if longer else s[:-1] for s in shares]
        body = b"".join(struct.pack(">IH", owner, len(s)) + s for owner, s in enumerate(shares, 1))
        group = _Reader(body).uniform_id_blobs(n, wide=False, max_size=1024) if n else None
        if group is None:
            group = _PackedBlobs((), 0)
        assert _unmasking._canonical(group, group.blobs, index) == reference_canonical(group, index)
