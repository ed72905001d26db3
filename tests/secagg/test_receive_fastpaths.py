"""The server's one-test receive of bundles and masked inputs refuses what the old checks refused.

:meth:`SecAggServer._receive_bundle` and :meth:`SecAggServer._receive_masked`
test every condition of a well-formed message in one expression and run the
checks one by one only when it fails; :meth:`MaskedInput._parse_body` reads a
well-formed body in one unpack and runs the field-by-field parse only when
something is off.  Each test here plays the same stream of good and bad
messages through the code and through the step-by-step reference it replaced
(kept below), and requires the same refusals (type and message), the same
state and the same sum.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from privfed.errors import MessageFormatError, ParameterError, ProtocolAbort
from privfed.secagg import (
    EncryptedSharesBundle,
    MaskedInput,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    decode_message,
)
from privfed.secagg.protocol import server as server_module
from privfed.secagg.protocol.config import MAX_VECTOR_LENGTH
from privfed.secagg.protocol.graph import GraphMode
from privfed.secagg.protocol.messages import masked as masked_module
from privfed.secagg.protocol.messages._codec import _Reader
from privfed.secagg.protocol.messages.base import _HEAD

_Phase = server_module._Phase
L = 5


# -- the step-by-step references (the code before the fast paths) -------------------


def _reference_bundle(self: SecAggServer, message: EncryptedSharesBundle) -> None:
    stage = self._precheck(message, _Phase.SHARE)
    sender = message.sender
    packed = message._packed_shares()
    recipients: list[int] = (
        list(packed.ids) if packed is not None else [s.recipient for s in message.shares]
    )
    got = self._received.get(sender)
    if not (
        sender in self._advertised
        and self._advertised.keys() >= set(recipients)
        and self._hood(sender).issuperset(recipients)
        and (got is None or got.isdisjoint(recipients))
    ):
        self._check_recipients(sender, tuple(recipients), stage)
    if got is None and packed is not None:
        self._bundles[sender] = message
    else:
        box = self._unpack_bundle(sender)
        for item in message.shares:
            box[item.recipient] = item
    self._received.setdefault(sender, set()).update(recipients)


def _reference_masked(self: SecAggServer, message: MaskedInput) -> None:
    stage = self._admit(message, _Phase.MASK, self._shared, self._masked)
    sender = message.sender
    cfg = self._config
    if message.ring_bits != cfg.ring_bits or message.values.shape[0] != cfg.vector_length:
        raise self._refuse("ring width or vector length differs from the config", stage)
    if self._total is None:
        self._total = np.array(message.values, dtype=np.uint64, copy=True)
    else:
        np.add(self._total, message.values, out=self._total)
    self._masked.add(sender)


def _reference_masked_body(reader: _Reader) -> tuple[int, int, np.ndarray]:
    sender = reader.client_id()
    bits = reader.u8()
    if not 8 <= bits <= 64:
        raise MessageFormatError(f"ring_bits {bits} outside [8, 64]")
    dtype = masked_module._WIRE_DTYPES[bits]
    n = reader.count(dtype.itemsize)
    if not 1 <= n <= MAX_VECTOR_LENGTH:
        raise ParameterError("values", f"a 1-D array of length 1 to {MAX_VECTOR_LENGTH}", (n,))
    reader.zero_padding(8)
    return sender, bits, reader.array(dtype, n)


# -- helpers ------------------------------------------------------------------------


def _outcome(call: Any) -> tuple[str, str] | None:
    try:
        call()
    except (ProtocolAbort, MessageFormatError, ParameterError) as exc:
        return type(exc).__name__, str(exc)
    return None


def _state(server: SecAggServer) -> tuple[Any, ...]:
    total = None if server._total is None else server._total.tobytes()
    boxes = {s: sorted(box) for s, box in server._ciphertexts.items()}
    return (
        server._phase,
        {s: sorted(r) for s, r in server._received.items()},
        sorted(server._bundles),
        boxes,
        sorted(server._masked),
        total,
    )


def _servers(
    n: int, *, graph: str, degree: int | None, ring_bits: int = 64
) -> tuple[SecAggConfig, dict[int, SecAggClient], SecAggServer, SecAggServer]:
    config = SecAggConfig(
        client_ids=tuple(range(1, n + 1)),
        threshold=3,
        vector_length=L,
        ring_bits=ring_bits,
        graph=GraphMode(graph),
        degree=degree,
    )
    rng = np.random.default_rng(n)
    clients = {
        c: SecAggClient(config, c, rng.integers(0, 2**ring_bits, size=L, dtype=np.uint64))
        for c in config.client_ids
    }
    return config, clients, SecAggServer(config), SecAggServer(config)


def _mirror(new: SecAggServer, old: SecAggServer, message: Any, sender: int) -> None:
    """Deliver ``message`` to the new code and to the reference: same outcome, same state."""
    references: dict[type, Callable[[SecAggServer, Any], None]] = {
        EncryptedSharesBundle: _reference_bundle,
        MaskedInput: _reference_masked,
    }
    reference = references.get(type(message))

    def by_reference() -> None:
        if reference is None:
            old.receive(message, sender=sender)
            return
        if message.sender != sender:
            old.receive(message, sender=sender)  # the same refusal, before the stage's checks
        reference(old, message)

    got = _outcome(lambda: new.receive(message, sender=sender))
    assert got == _outcome(by_reference)
    assert _state(new) == _state(old)


def _early_bundle(config: SecAggConfig) -> EncryptedSharesBundle:
    """Client 1's bundle of a round of other clients (same config, 1 to 8), to arrive early."""
    server = SecAggServer(config)
    others = {c: SecAggClient(config, c, np.zeros(L, dtype=np.uint64)) for c in range(1, 9)}
    for cid, client in others.items():
        server.receive(client.advertise_keys(), sender=cid)
    return EncryptedSharesBundle.from_shares(others[1].share_keys(server.roster()))


def _with_session(bundle: EncryptedSharesBundle, **changes: Any) -> EncryptedSharesBundle:
    return EncryptedSharesBundle.from_shares(
        [dataclasses.replace(s, **changes) for s in bundle.shares]
    )


# -- SHARE_KEYS ----------------------------------------------------------------------


@pytest.mark.parametrize(("graph", "degree"), [("complete", None), ("harary", 4)])
@pytest.mark.parametrize("parsed", [True, False])
def test_bundle_receive_matches_the_reference(graph: str, degree: int | None, parsed: bool) -> None:
    config, clients, new, old = _servers(9, graph=graph, degree=degree)
    wire = decode_message if parsed else (lambda m: m)  # packed or item by item

    def play(message: Any, sender: int) -> None:
        _mirror(new, old, wire(message.to_bytes()) if parsed else message, sender)

    early = _early_bundle(config)
    for cid in (1, 2, 3, 4, 5, 6, 7, 8):  # 9 never advertises: not on the roster
        play(clients[cid].advertise_keys(), cid)
    play(early, 1)  # early: before the roster is out
    roster = new.roster()
    assert roster.to_bytes() == old.roster().to_bytes()
    bundles = {
        cid: EncryptedSharesBundle.from_shares(clients[cid].share_keys(roster))
        for cid in range(1, 9)
    }
    b1 = bundles[1]
    play(_with_session(b1, session_id=b"x" * 16), 1)  # another session
    play(_with_session(b1, round_index=b1.round_index + 1), 1)  # another round
    play(b1, 2)  # delivered by another client
    stray = dataclasses.replace(b1.shares[-1], recipient=9)  # 9: not on the roster
    play(EncryptedSharesBundle.from_shares([*b1.shares[:-1], stray]), 1)
    if graph == "harary":
        hood = new._hood(1)
        outsider = next(c for c in range(2, 9) if c not in hood)
        far = dataclasses.replace(b1.shares[0], recipient=outsider)
        items = sorted([*b1.shares[1:], far], key=lambda s: s.recipient)
        play(EncryptedSharesBundle.from_shares(items), 1)  # not a neighbour
    # Client 2: one ciphertext alone, then a bundle that repeats it, then the rest.
    b2 = bundles[2]
    play(b2.shares[0], 2)
    play(b2, 2)
    play(EncryptedSharesBundle.from_shares(list(b2.shares[1:])), 2)
    play(EncryptedSharesBundle.from_shares(list(b2.shares[1:2])), 2)  # duplicate
    # Client 3: half a bundle, then the other half.
    b3 = bundles[3]
    half = len(b3.shares) // 2
    play(EncryptedSharesBundle.from_shares(list(b3.shares[:half])), 3)
    play(EncryptedSharesBundle.from_shares(list(b3.shares[half:])), 3)
    play(b3, 3)  # all duplicates
    for cid in (1, 4, 5, 6, 7, 8):
        play(bundles[cid], cid)
        play(bundles[cid], cid)  # twice
    routed = new.routed_shares()
    routed_old = old.routed_shares()
    assert {c: m.to_bytes() for c, m in routed.items()} == {
        c: m.to_bytes() for c, m in routed_old.items()
    }
    play(b1, 1)  # late


def test_bundle_receive_after_abort_matches_the_reference() -> None:
    _, clients, new, old = _servers(5, graph="complete", degree=None)
    for cid, client in clients.items():
        _mirror(new, old, client.advertise_keys(), cid)
    roster = new.roster()
    old.roster()
    bundle = EncryptedSharesBundle.from_shares(clients[1].share_keys(roster))
    for server in (new, old):
        with pytest.raises(ProtocolAbort):
            server.routed_shares()  # too few shared keys: the round aborts
    _mirror(new, old, decode_message(bundle.to_bytes()), 1)


# -- MASKED_INPUT --------------------------------------------------------------------


def _to_masked(
    n: int, ring_bits: int, graph: str, degree: int | None
) -> tuple[dict[int, SecAggClient], SecAggServer, SecAggServer, dict[int, Any]]:
    _, clients, new, old = _servers(n, graph=graph, degree=degree, ring_bits=ring_bits)
    for cid, client in clients.items():
        _mirror(new, old, client.advertise_keys(), cid)
    roster = new.roster()
    old.roster()
    for cid, client in clients.items():
        if cid != n:  # the last client drops before sharing keys
            bundle = EncryptedSharesBundle.from_shares(client.share_keys(roster))
            _mirror(new, old, decode_message(bundle.to_bytes()), cid)
    routed = new.routed_shares()
    old.routed_shares()
    return clients, new, old, routed


@pytest.mark.parametrize("ring_bits", [64, 32, 20])
@pytest.mark.parametrize(("graph", "degree"), [("complete", None), ("harary", 4)])
def test_masked_receive_matches_the_reference(
    ring_bits: int, graph: str, degree: int | None
) -> None:
    clients, new, old, routed = _to_masked(8, ring_bits, graph, degree)
    inputs = {cid: clients[cid].masked_input(routed[cid]) for cid in routed}

    def play(message: MaskedInput, sender: int) -> None:
        _mirror(new, old, decode_message(message.to_bytes()), sender)
        assert decode_message(message.to_bytes()) == message

    m1 = inputs[1]
    wrong = {
        "session": dataclasses.replace(m1, session_id=b"y" * 16),
        "round": dataclasses.replace(m1, round_index=m1.round_index + 1),
        "length": dataclasses.replace(m1, values=np.zeros(L + 1, dtype=np.uint64)),
        "short": dataclasses.replace(m1, values=np.zeros(L - 1, dtype=np.uint64)),
        "ring": dataclasses.replace(
            m1, ring_bits=16 if ring_bits != 16 else 24, values=np.zeros(L, dtype=np.uint64)
        ),
    }
    for message in wrong.values():
        play(message, 1)
    play(dataclasses.replace(m1, sender=8), 8)  # 8 dropped before sharing keys
    play(dataclasses.replace(m1, sender=9 if 9 in clients else 99), 1)  # delivered by another
    for cid in sorted(inputs):
        if cid != 2:  # 2 drops
            play(inputs[cid], cid)
    play(inputs[1], 1)  # twice
    assert new._total is not None and old._total is not None
    assert new._total.tobytes() == old._total.tobytes()
    assert new.unmask_requests().keys() == old.unmask_requests().keys()
    play(inputs[2], 2)  # late


def test_masked_receive_before_and_after_abort_matches_the_reference() -> None:
    clients, new, old, routed = _to_masked(6, 64, "complete", None)
    message = decode_message(clients[1].masked_input(routed[1]).to_bytes())
    for server in (new, old):
        with pytest.raises(ProtocolAbort):
            server.unmask_requests()  # too few masked inputs: the round aborts
    _mirror(new, old, message, 1)


# -- MaskedInput bytes ---------------------------------------------------------------


def _reference_decode(data: bytes) -> tuple[str, str] | tuple[int, int, bytes, int]:
    """The old parse of a MaskedInput's body (the header as decode_message reads it)."""
    reader = _Reader(data)
    reader._pos = _HEAD.size + data[6] + 4
    try:
        sender, bits, raw = _reference_masked_body(reader)
        values = raw if raw.dtype == np.uint64 else raw.astype(np.uint64)
        if bits < 64 and int(values.max()) >> bits:
            raise ParameterError("values", f"ring elements below 2**{bits}", "<redacted>")
        reader.finish()
    except ParameterError as exc:
        return "MessageFormatError", f"invalid MaskedInput content: {exc}"
    except MessageFormatError as exc:
        return "MessageFormatError", str(exc)
    return sender, bits, values.tobytes(), values.shape[0]


def _decoded(data: bytes) -> tuple[str, str] | tuple[int, int, bytes, int]:
    try:
        message = decode_message(data)
    except MessageFormatError as exc:
        return "MessageFormatError", str(exc)
    assert isinstance(message, MaskedInput)
    assert not message.values.flags.writeable
    return message.sender, message.ring_bits, message.values.tobytes(), message.values.shape[0]


@pytest.mark.parametrize("ring_bits", [8, 12, 16, 31, 32, 48, 64])
@pytest.mark.parametrize("sid_len", [16, 17, 21, 23, 64])
def test_masked_parse_matches_the_field_by_field_parse(ring_bits: int, sid_len: int) -> None:
    rng = random.Random(ring_bits * 100 + sid_len)
    nrng = np.random.default_rng(sid_len)
    for n in (1, 2, 3, 7, 9):
        values = nrng.integers(0, 2**ring_bits, size=n, dtype=np.uint64)
        message = MaskedInput(
            session_id=bytes(range(sid_len)),
            round_index=7,
            sender=rng.randint(1, 2**32 - 1),
            ring_bits=ring_bits,
            values=values,
        )
        data = message.to_bytes()
        assert _decoded(data) == _reference_decode(data)
        body = _HEAD.size + sid_len + 4
        cases = [data[:cut] for cut in range(body, len(data))]  # truncations
        cases.append(data + b"\x00")  # a trailing byte
        for at in range(body, min(len(data), body + 24)):  # fixed fields and padding
            for byte in (0, 1, 7, 8, 65, 0x80, 0xFF):
                cases.append(data[:at] + bytes((byte,)) + data[at + 1 :])
        for count in (0, n - 1, n + 1, 2**31, 2**32 - 1):  # the length field
            at = body + 5
            cases.append(data[:at] + struct.pack(">I", count % 2**32) + data[at + 4 :])
        if ring_bits < 64:  # a value beyond the ring
            width = masked_module._WIRE_DTYPES[ring_bits].itemsize
            cases.append(data[:-width] + b"\xff" * width)
        for case in cases:
            assert _decoded(case) == _reference_decode(case), case[body:]
