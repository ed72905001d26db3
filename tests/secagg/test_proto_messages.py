"""Wire format of the secure-aggregation messages: round trips and strict parsing."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from secagg_helpers import deliver

from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    EncryptedSharesBundle,
    MaskedInput,
    Message,
    RevealedNoiseShare,
    RevealedShare,
    Roster,
    RosterEntry,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
)
from privfed.secagg.protocol.messages import WIRE_VERSION
from privfed.secagg.protocol.messages.roster import RosterProof

SID = bytes(range(32))
HEADER = {"session_id": SID, "round_index": 7}


def _key(i: int) -> bytes:
    return bytes([i]) * 32


def _samples() -> list[Message]:
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**63, size=9, dtype=np.uint64)
    return [
        AdvertiseKeys(
            **HEADER,
            sender=3,
            encryption_public_key=_key(1),
            mask_public_key=_key(2),
            self_mask_commitment=_key(3),
        ),
        Roster(
            **HEADER,
            entries=(RosterEntry(1, _key(1), _key(2)), RosterEntry(5, _key(3), _key(4))),
        ),
        EncryptedShares(**HEADER, sender=2, recipient=9, ciphertext=b"\x01" * 40),
        RoutedShares(
            **HEADER,
            recipient=4,
            shares=(
                EncryptedShares(**HEADER, sender=1, recipient=4, ciphertext=b"ab"),
                EncryptedShares(**HEADER, sender=6, recipient=4, ciphertext=b"cde"),
            ),
        ),
        EncryptedSharesBundle(
            **HEADER,
            sender=4,
            shares=(
                EncryptedShares(**HEADER, sender=4, recipient=1, ciphertext=b"ab"),
                EncryptedShares(**HEADER, sender=4, recipient=6, ciphertext=b"cde"),
            ),
        ),
        MaskedInput(**HEADER, sender=8, ring_bits=64, values=values),
        MaskedInput(**HEADER, sender=8, ring_bits=20, values=values % np.uint64(2**20)),
        UnmaskRequest(**HEADER, recipient=2, survivors=(1, 2, 5), dropped=(3,)),
        UnmaskResponse(
            **HEADER,
            sender=2,
            self_mask_shares=(RevealedShare(1, b"x" * 5), RevealedShare(2, b"y" * 5)),
            key_shares=(RevealedShare(3, b"z" * 5),),
        ),
        # The optional sections of the active mode and of the noise layers.
        AdvertiseKeys(
            **HEADER,
            sender=3,
            encryption_public_key=_key(1),
            mask_public_key=_key(2),
            self_mask_commitment=_key(3),
            signature=b"s" * 64,
            noise_commitments=(_key(4), _key(5)),
        ),
        Roster(
            **HEADER,
            entries=(
                RosterEntry(1, _key(1), _key(2), b"a" * 64),
                RosterEntry(5, _key(3), _key(4), b"b" * 64),
            ),
            proof=RosterProof(
                count=3, positions=(0, 2), brackets=((1, 2, _key(8)),), hashes=(_key(9),)
            ),
        ),
        UnmaskRequest(
            **HEADER,
            recipient=2,
            survivors=(1, 2, 5),
            dropped=(3,),
            signatures=(SurvivorSignature(1, b"c" * 64), SurvivorSignature(5, b"d" * 64)),
            noise_layers=(2, 3),
        ),
        UnmaskResponse(
            **HEADER,
            sender=2,
            self_mask_shares=(RevealedShare(1, b"x" * 5),),
            key_shares=(),
            noise_shares=(RevealedNoiseShare(1, 2, b"n" * 5), RevealedNoiseShare(1, 3, b"m" * 3)),
        ),
        ConsistencyRequest(**HEADER, recipient=4, survivors=(1, 4, 9)),
        ConsistencyRequest(
            **HEADER,
            recipient=4,
            survivors=(1, 4),
            proof=RosterProof(count=5, positions=(0, 1), brackets=((2, 9, _key(6)),)),
        ),
        ConsistencySignature(**HEADER, sender=4, signature=b"e" * 64),
    ]


SAMPLES = _samples()
IDS = [f"{type(m).__name__}-{i}" for i, m in enumerate(SAMPLES)]


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_round_trip(message: Message) -> None:
    data = message.to_bytes()
    assert type(message).from_bytes(data) == message
    assert decode_message(data) == message
    assert decode_message(bytearray(data)) == message


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_every_truncation_is_refused(message: Message) -> None:
    data = message.to_bytes()
    for cut in range(len(data)):
        with pytest.raises(MessageFormatError):
            decode_message(data[:cut])


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_trailing_bytes_are_refused(message: Message) -> None:
    with pytest.raises(MessageFormatError, match="trailing"):
        decode_message(message.to_bytes() + b"\x00")


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_header_tampering_is_refused(message: Message) -> None:
    data = bytearray(message.to_bytes())
    versions = (WIRE_VERSION - 1, WIRE_VERSION + 1)
    for position, value in (
        (0, ord("X")),
        *((4, v) for v in versions),
        (5, 0),
        (5, 99),
        (6, 3),
        (6, 200),
    ):
        bad = bytearray(data)
        bad[position] = value
        with pytest.raises(MessageFormatError):
            decode_message(bytes(bad))


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_wrong_class_is_refused(message: Message) -> None:
    other = AdvertiseKeys if not isinstance(message, AdvertiseKeys) else Roster
    with pytest.raises(MessageFormatError, match="expected"):
        other.from_bytes(message.to_bytes())


@given(seed=st.integers(0, 2**32 - 1))
def test_random_byte_flips_never_escape_typed_errors(seed: int) -> None:
    # Altering any byte either still parses (to a different, valid message) or
    # raises MessageFormatError -- never an untyped exception.
    rng = np.random.default_rng(seed)
    message = SAMPLES[int(rng.integers(len(SAMPLES)))]
    data = bytearray(message.to_bytes())
    position = int(rng.integers(len(data)))
    data[position] ^= int(rng.integers(1, 256))
    try:
        parsed = decode_message(bytes(data))
    except MessageFormatError:
        return
    assert parsed != message


def _revalidate(value: object) -> None:
    """Rebuild ``value`` (and every message or share inside it) through its checked constructor.

    Parsers build objects without re-running ``__post_init__``; this proves that
    what they accept is exactly what the public constructors accept.
    """
    if isinstance(value, tuple):
        for item in value:
            _revalidate(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        for item in fields.values():
            _revalidate(item)
        assert type(value)(**fields) == value


@pytest.mark.parametrize("message", SAMPLES, ids=IDS)
def test_parsed_messages_pass_the_constructor_checks(message: Message) -> None:
    _revalidate(decode_message(message.to_bytes()))


@given(seed=st.integers(0, 2**32 - 1), flips=st.integers(1, 3))
def test_whatever_parses_passes_the_constructor_checks(seed: int, flips: int) -> None:
    rng = np.random.default_rng(seed)
    message = SAMPLES[int(rng.integers(len(SAMPLES)))]
    data = bytearray(message.to_bytes())
    for _ in range(flips):
        data[int(rng.integers(len(data)))] ^= int(rng.integers(1, 256))
    try:
        parsed = decode_message(bytes(data))
    except MessageFormatError:
        return
    _revalidate(parsed)


def _bundle_bytes(sender: int, items: list[tuple[int, bytes]], count: int | None = None) -> bytes:
    header = EncryptedSharesBundle(
        **HEADER,
        sender=sender,
        shares=(EncryptedShares(**HEADER, sender=sender, recipient=sender + 1, ciphertext=b"a"),),
    ).to_bytes()
    prefix = header[: 4 + 1 + 1 + 1 + len(SID) + 4]
    body = struct.pack(">II", sender, len(items) if count is None else count)
    for recipient, blob in items:
        body += struct.pack(">II", recipient, len(blob)) + blob
    return prefix + body


@pytest.mark.parametrize(
    ("items", "match"),
    [
        ([], "empty"),
        ([(3, b"a")], "itself"),
        ([(2, b"")], "length"),
        ([(2, b"a" * 4097)], "length"),
        ([(5, b"a"), (2, b"b")], "increasing"),
        ([(2, b"a"), (2, b"b")], "increasing"),
        ([(0, b"a")], "id 0"),
    ],
)
def test_malformed_bundles_are_refused(items: list[tuple[int, bytes]], match: str) -> None:
    assert isinstance(
        decode_message(_bundle_bytes(3, [(1, b"x"), (4, b"y")])), EncryptedSharesBundle
    )
    with pytest.raises(MessageFormatError, match=match):
        decode_message(_bundle_bytes(3, items))


def test_bundle_from_shares_sorts_and_checks() -> None:
    a = EncryptedShares(**HEADER, sender=2, recipient=7, ciphertext=b"a")
    b = EncryptedShares(**HEADER, sender=2, recipient=3, ciphertext=b"b")
    bundle = EncryptedSharesBundle.from_shares({7: a, 3: b})
    assert bundle.recipients == (3, 7)
    assert bundle.shares == (b, a)
    assert EncryptedSharesBundle.from_shares([a, b]) == bundle
    other_sender = EncryptedShares(**HEADER, sender=5, recipient=4, ciphertext=b"c")
    with pytest.raises(ParameterError, match="'shares'"):
        EncryptedSharesBundle.from_shares([a, other_sender])
    other_round = dataclasses.replace(b, round_index=8)
    with pytest.raises(ParameterError, match="'shares'"):
        EncryptedSharesBundle.from_shares([a, other_round])
    with pytest.raises(ParameterError, match="'shares'"):
        EncryptedSharesBundle.from_shares([a, a])
    with pytest.raises(ParameterError, match="'shares'"):
        EncryptedSharesBundle.from_shares([])
    with pytest.raises(ParameterTypeError, match="'shares'"):
        EncryptedSharesBundle.from_shares([a, b"raw"])  # type: ignore[list-item]


def test_count_larger_than_message_is_refused() -> None:
    data = bytearray(SAMPLES[7].to_bytes())  # UnmaskRequest
    body = 4 + 1 + 1 + 1 + len(SID) + 4
    data[body + 4 : body + 8] = struct.pack(">I", 2**30)
    with pytest.raises(MessageFormatError, match="count"):
        decode_message(bytes(data))


def test_unsorted_ids_on_the_wire_are_refused() -> None:
    request = UnmaskRequest(**HEADER, recipient=2, survivors=(1, 2), dropped=())
    data = bytearray(request.to_bytes())
    body = 4 + 1 + 1 + 1 + len(SID) + 4 + 4 + 4
    data[body : body + 8] = struct.pack(">II", 2, 1)
    with pytest.raises(MessageFormatError, match="increasing"):
        decode_message(bytes(data))


def test_zero_client_id_on_the_wire_is_refused() -> None:
    data = bytearray(SAMPLES[0].to_bytes())
    body = 4 + 1 + 1 + 1 + len(SID) + 4
    data[body : body + 4] = bytes(4)
    with pytest.raises(MessageFormatError, match="id 0"):
        decode_message(bytes(data))


def test_masked_values_outside_the_ring_are_refused_on_the_wire() -> None:
    message = MaskedInput(**HEADER, sender=1, ring_bits=20, values=np.zeros(3, dtype=np.uint64))
    data = bytearray(message.to_bytes())
    data[-1] = 0xFF  # a 4-byte wire value of 0xFF000000 >= 2**20
    with pytest.raises(MessageFormatError, match="ring"):
        decode_message(bytes(data))


def test_masked_input_wire_width_follows_ring_bits() -> None:
    values = np.arange(10, dtype=np.uint64)
    sizes = {
        bits: len(MaskedInput(**HEADER, sender=1, ring_bits=bits, values=values).to_bytes())
        for bits in (8, 16, 32, 33, 64)
    }
    base = sizes[8] - 10
    assert sizes == {8: base + 10, 16: base + 20, 32: base + 40, 33: base + 80, 64: base + 80}


@pytest.mark.parametrize("sid_length", [16, 17, 20, 23, 32, 63, 64])
@pytest.mark.parametrize("bits", [8, 20, 33, 64])
def test_masked_values_start_on_an_8_byte_boundary(sid_length: int, bits: int) -> None:
    # Wire version 4: zero padding puts the values at a multiple of 8 from the start.
    values = np.arange(5, dtype=np.uint64)
    message = MaskedInput(
        session_id=bytes(sid_length), round_index=7, sender=1, ring_bits=bits, values=values
    )
    data = message.to_bytes()
    width = {8: 1, 20: 4, 33: 8, 64: 8}[bits]
    start = len(data) - 5 * width
    assert start % 8 == 0
    fixed = 7 + sid_length + 4 + 9  # header, then sender, ring_bits and length
    assert 0 <= start - fixed < 8
    assert data[fixed:start] == bytes(start - fixed)
    parsed = MaskedInput.from_bytes(data)
    assert parsed == message
    if bits == 64 and np.frombuffer(data, dtype=np.uint8).ctypes.data % 8 == 0:
        assert parsed.values.flags.aligned  # read in place, aligned


def test_masked_input_padding_must_be_zero() -> None:
    values = np.arange(3, dtype=np.uint64)
    data = MaskedInput(**HEADER, sender=1, ring_bits=64, values=values).to_bytes()
    fixed = 7 + len(SID) + 4 + 9
    start = len(data) - 3 * 8
    assert start > fixed  # a 32-byte session id leaves 4 padding bytes
    for position in range(fixed, start):
        bad = bytearray(data)
        bad[position] = 1
        with pytest.raises(MessageFormatError, match="padding bytes are not zero"):
            decode_message(bytes(bad))
    # The version 3 layout (no padding) does not parse as version 4.
    unpadded = data[:fixed] + data[start:]
    with pytest.raises(MessageFormatError):
        decode_message(unpadded)


def test_masked_input_is_read_only_copy() -> None:
    values = np.arange(4, dtype=np.uint64)
    message = MaskedInput(**HEADER, sender=1, ring_bits=64, values=values)
    values[0] = 99
    assert message.values[0] == 0
    with pytest.raises(ValueError, match="read-only"):
        message.values[1] = 5


def test_masked_input_never_aliases_memory_someone_can_write() -> None:
    owner = np.arange(6, dtype=np.uint64)
    view = owner.view()
    view.flags.writeable = False
    frozen_owner = np.arange(6, dtype=np.uint64)
    frozen_owner.flags.writeable = False
    for supplied in (view, frozen_owner, owner[::2]):
        message = MaskedInput(**HEADER, sender=1, ring_bits=64, values=supplied)
        before = message.values.copy()
        owner[:] = 7
        frozen_owner.flags.writeable = True
        frozen_owner[:] = 7
        frozen_owner.flags.writeable = False
        assert np.array_equal(message.values, before)
        assert not np.shares_memory(message.values, owner)
        assert not np.shares_memory(message.values, frozen_owner)
    # A parsed message reads its values in place from the immutable message bytes.
    data = MaskedInput(**HEADER, sender=1, ring_bits=64, values=np.arange(6, dtype=np.uint64))
    parsed = MaskedInput.from_bytes(data.to_bytes())
    assert isinstance(parsed.values.base, bytes | np.ndarray)
    assert not parsed.values.flags.owndata
    with pytest.raises(TypeError):
        MaskedInput._trusted(**HEADER, sender=1, ring_bits=64, values=parsed.values)


def test_reprs_hide_secrets() -> None:
    for message in SAMPLES:
        text = repr(message)
        assert "ciphertext=" not in text
        assert "values=" not in text
        assert "shares=" not in text
        assert "xxxxx" not in text


@pytest.mark.parametrize(
    ("factory", "error"),
    [
        (lambda: UnmaskRequest(**HEADER, recipient=0, survivors=(), dropped=()), ParameterError),
        (
            lambda: UnmaskRequest(**HEADER, recipient=1, survivors=(2, 1), dropped=()),
            ParameterError,
        ),
        (
            lambda: UnmaskRequest(**HEADER, recipient=1, survivors=[1], dropped=()),
            ParameterTypeError,
        ),
        (
            lambda: UnmaskRequest(
                session_id=b"short", round_index=0, recipient=1, survivors=(), dropped=()
            ),
            ParameterError,
        ),
        (
            lambda: UnmaskRequest(
                session_id=SID, round_index=-1, recipient=1, survivors=(), dropped=()
            ),
            ParameterError,
        ),
        (
            lambda: UnmaskRequest(
                session_id=SID, round_index=True, recipient=1, survivors=(), dropped=()
            ),
            ParameterTypeError,
        ),
        (lambda: EncryptedShares(**HEADER, sender=1, recipient=1, ciphertext=b"a"), ParameterError),
        (lambda: EncryptedShares(**HEADER, sender=1, recipient=2, ciphertext=b""), ParameterError),
        (
            lambda: AdvertiseKeys(
                **HEADER,
                sender=1,
                encryption_public_key=b"k",
                mask_public_key=_key(1),
                self_mask_commitment=_key(2),
            ),
            ParameterError,
        ),
        (
            lambda: MaskedInput(**HEADER, sender=1, ring_bits=64, values=np.zeros(3)),
            ParameterTypeError,
        ),
        (
            lambda: MaskedInput(
                **HEADER, sender=1, ring_bits=64, values=np.zeros((2, 2), np.uint64)
            ),
            ParameterError,
        ),
        (
            lambda: MaskedInput(**HEADER, sender=1, ring_bits=8, values=np.full(2, 256, np.uint64)),
            ParameterError,
        ),
        (
            lambda: MaskedInput(**HEADER, sender=1, ring_bits=65, values=np.zeros(2, np.uint64)),
            ParameterError,
        ),
        (
            lambda: UnmaskResponse(
                **HEADER,
                sender=1,
                self_mask_shares=(RevealedShare(2, b"a"),),
                key_shares=(RevealedShare(2, b"b"),),
            ),
            ParameterError,
        ),
        (
            lambda: RoutedShares(
                **HEADER,
                recipient=4,
                shares=(EncryptedShares(**HEADER, sender=1, recipient=5, ciphertext=b"a"),),
            ),
            ParameterError,
        ),
        (
            lambda: Roster(
                **HEADER,
                entries=(RosterEntry(2, _key(1), _key(2)), RosterEntry(2, _key(3), _key(4))),
            ),
            ParameterError,
        ),
    ],
)
def test_constructors_validate(factory: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        factory()  # type: ignore[operator]


def test_decode_requires_bytes() -> None:
    with pytest.raises(ParameterTypeError):
        decode_message("PFSA")  # type: ignore[arg-type]


@pytest.mark.parametrize("graph", ["complete", "harary"])
def test_messages_the_server_builds_pass_the_constructor_checks(graph: str) -> None:
    # The server assembles rosters, routed ciphertexts and unmasking requests
    # from values it validated on receipt, without re-running the checks.
    n = 9
    config = SecAggConfig(
        client_ids=tuple(range(1, n + 1)),
        threshold=3,
        vector_length=3,
        graph=graph,
        degree=4 if graph == "harary" else None,
    )
    clients = {c: SecAggClient(config, c, np.arange(3, dtype=np.uint64)) for c in config.client_ids}
    server = SecAggServer(config)
    for c in (1, 2, 3, 4, 5, 6, 7, 8):  # client 9 never shows up
        deliver(server, clients[c].advertise_keys())
    rosters = {c: server.roster(c) for c in range(1, 9)}
    for roster in [server.roster(), *rosters.values()]:
        _revalidate(roster)
    for c, roster in rosters.items():
        deliver(server, EncryptedSharesBundle.from_shares(clients[c].share_keys(roster)))
    routed = server.routed_shares()
    for message in routed.values():
        _revalidate(message)
    for c in (1, 2, 3, 4, 5, 6):  # clients 7 and 8 drop before masked input
        deliver(server, clients[c].masked_input(routed[c]))
    requests = server.unmask_requests()
    assert requests
    for message in requests.values():
        _revalidate(message)
