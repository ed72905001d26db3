"""The server's array fast paths do the same work as the item-by-item paths.

Parsed messages keep their equal-sized items packed (ciphertexts, shares), and
the server checks, routes and interpolates them with array operations and one
set of Lagrange weights per set of responders.  Every test here plays the
same content through both paths -- parsed bytes (packed) and hand-built
message objects (item by item) -- and requires the same routed bytes, the
same refusals and the same sum.
"""

from __future__ import annotations

import dataclasses
import random
import secrets

import numpy as np
import pytest

from privfed.errors import (
    MessageFormatError,
    ParameterError,
    ParameterTypeError,
    ProtocolAbort,
    ReconstructionError,
)
from privfed.secagg import (
    EncryptedShares,
    EncryptedSharesBundle,
    RevealedShare,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    UnmaskResponse,
    decode_message,
)
from privfed.secagg.primitives import shamir
from privfed.secagg.protocol import _unmasking as unmasking_module
from privfed.secagg.protocol.graph import GraphMode
from privfed.secagg.protocol.messages import Message

L = 6


def _parsed(message: Message) -> Message:
    return decode_message(message.to_bytes())


def _play(
    n: int,
    t: int,
    *,
    graph: str = "complete",
    degree: int | None = None,
    drop: tuple[int, ...] = (),
    check_all_shares: bool = False,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One round delivered to two servers: parsed bytes to one, objects to the other.

    Returns both sums and the expected sum.  Along the way every message the
    two servers publish must be byte-identical.
    """
    rng = np.random.default_rng(seed)
    config = SecAggConfig(
        client_ids=tuple(range(1, n + 1)),
        threshold=t,
        vector_length=L,
        graph=GraphMode(graph),
        degree=degree,
    )
    inputs = {c: rng.integers(0, 2**63, size=L, dtype=np.uint64) for c in config.client_ids}
    clients = {c: SecAggClient(config, c, inputs[c]) for c in config.client_ids}
    fast = SecAggServer(config, check_all_shares=check_all_shares)
    slow = SecAggServer(config, check_all_shares=check_all_shares)

    def both(message: Message, sender: int) -> None:
        fast.receive(_parsed(message), sender=sender)
        slow.receive(message, sender=sender)

    for cid, client in clients.items():
        both(client.advertise_keys(), cid)
    rosters = {cid: fast.roster(cid) for cid in clients}
    assert {c: r.to_bytes() for c, r in rosters.items()} == {
        c: slow.roster(c).to_bytes() for c in clients
    }
    for cid, client in clients.items():
        both(EncryptedSharesBundle.from_shares(client.share_keys(rosters[cid])), cid)
    routed_fast, routed_slow = fast.routed_shares(), slow.routed_shares()
    assert {c: m.to_bytes() for c, m in routed_fast.items()} == {
        c: m.to_bytes() for c, m in routed_slow.items()
    }
    for cid, routed in routed_fast.items():
        # Routed packed (fast) and item by item (slow); each reads as the other.
        packed = routed._packed_shares()
        assert packed is not None
        assert routed_slow[cid]._packed_shares() is None
        assert routed == routed_slow[cid]
        # The routed records sit in one buffer the server made read-only.
        assert not packed.records.flags.writeable and not packed.blobs.flags.writeable
        assert routed._body() == routed_slow[cid]._body()
        if cid not in drop:
            both(clients[cid].masked_input(routed), cid)
    requests = fast.unmask_requests()
    assert {c: m.to_bytes() for c, m in requests.items()} == {
        c: m.to_bytes() for c, m in slow.unmask_requests().items()
    }
    for cid, request in requests.items():
        answer = clients[cid].unmask(request)
        parsed = _parsed(answer)
        assert isinstance(parsed, UnmaskResponse) and parsed._packed_shares() is not None
        both(answer, cid)
    expected = sum(
        (inputs[c] for c in config.client_ids if c not in drop),
        start=np.zeros(L, dtype=np.uint64),
    )
    return fast.finalize(), slow.finalize(), expected


@pytest.mark.parametrize(
    ("n", "t", "graph", "degree", "drop", "check_all"),
    [
        (7, 4, "complete", None, (), False),
        (7, 4, "complete", None, (2, 6), False),
        (7, 4, "complete", None, (3,), True),
        (12, 3, "harary", 6, (1, 8), False),
        (12, 3, "harary", 6, (5,), True),
    ],
)
def test_parsed_and_built_messages_give_the_same_round(
    n: int, t: int, graph: str, degree: int | None, drop: tuple[int, ...], check_all: bool
) -> None:
    fast, slow, expected = _play(
        n, t, graph=graph, degree=degree, drop=drop, check_all_shares=check_all
    )
    assert np.array_equal(fast, expected)
    assert np.array_equal(slow, expected)


def test_parsed_share_lists_stay_packed_until_read() -> None:
    shares = tuple(
        RevealedShare(owner, shamir.Share(3, 10 * owner).to_bytes()) for owner in (1, 2, 5)
    )
    response = UnmaskResponse(
        session_id=bytes(16), round_index=0, sender=3, self_mask_shares=shares, key_shares=()
    )
    parsed = decode_message(response.to_bytes())
    assert isinstance(parsed, UnmaskResponse)
    packed = parsed._packed_shares()
    assert packed is not None and packed[0].ids == (1, 2, 5) and packed[1].ids == ()
    # Reading the field builds exactly the objects; equality, repr and bytes agree.
    assert parsed == response
    assert parsed.self_mask_shares == shares and parsed.key_shares == ()
    assert parsed.to_bytes() == response.to_bytes()
    assert repr(parsed) == repr(response)
    with pytest.raises(AttributeError):
        _ = parsed.no_such_field


def test_unequal_item_lengths_take_the_item_by_item_parse() -> None:
    shares = (RevealedShare(1, b"\x01"), RevealedShare(2, b"\x02\x02"))
    response = UnmaskResponse(
        session_id=bytes(16), round_index=0, sender=3, self_mask_shares=shares, key_shares=()
    )
    parsed = decode_message(response.to_bytes())
    assert isinstance(parsed, UnmaskResponse)
    assert parsed._packed_shares() is None
    assert parsed == response
    items = [
        EncryptedShares(bytes(16), 0, sender=4, recipient=r, ciphertext=b"x" * r) for r in (1, 2)
    ]
    bundle = EncryptedSharesBundle.from_shares(items)
    parsed_bundle = decode_message(bundle.to_bytes())
    assert isinstance(parsed_bundle, EncryptedSharesBundle)
    assert parsed_bundle._packed_shares() is None
    assert parsed_bundle == bundle


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda ids: (ids[1], ids[0], *ids[2:]), "not strictly increasing"),
        (lambda ids: (0, *ids[1:]), "client id 0"),
    ],
)
def test_packed_parse_refuses_what_the_item_parse_refuses(mutate: object, match: str) -> None:
    # Equal-sized items with bad ids: the packed parse declines, the item parse
    # raises its precise error.
    items = [
        EncryptedShares(bytes(16), 0, sender=9, recipient=r, ciphertext=b"c" * 5) for r in (1, 2, 3)
    ]
    wire = bytearray(EncryptedSharesBundle.from_shares(items).to_bytes())
    head = len(wire) - 3 * (8 + 5)
    ids = mutate((1, 2, 3))  # type: ignore[operator]
    for i, ident in enumerate(ids):
        wire[head + i * 13 : head + i * 13 + 4] = ident.to_bytes(4, "big")
    with pytest.raises(MessageFormatError, match=match):
        decode_message(bytes(wire))
    # A ciphertext to oneself is refused on the packed path too.
    to_self = [
        EncryptedShares(bytes(16), 0, sender=2, recipient=r, ciphertext=b"c") for r in (1, 3)
    ]
    wire = bytearray(EncryptedSharesBundle.from_shares(to_self).to_bytes())
    wire[-5 - 4 : -5] = (2).to_bytes(4, "big")  # second recipient := sender
    with pytest.raises(MessageFormatError, match="itself"):
        decode_message(bytes(wire))


def _unmasking_round(n: int = 5) -> tuple[SecAggServer, dict[int, UnmaskResponse]]:
    """A round up to unmasking where client ``n`` dropped: answers to every request."""
    config = SecAggConfig(client_ids=tuple(range(1, n + 1)), threshold=3, vector_length=L)
    clients = {c: SecAggClient(config, c, np.zeros(L, dtype=np.uint64)) for c in range(1, n + 1)}
    server = SecAggServer(config)
    for cid, client in clients.items():
        server.receive(_parsed(client.advertise_keys()), sender=cid)
    roster = server.roster()
    for cid, client in clients.items():
        bundle = EncryptedSharesBundle.from_shares(client.share_keys(roster))
        server.receive(_parsed(bundle), sender=cid)
    for cid, routed in server.routed_shares().items():
        if cid != n:
            server.receive(_parsed(clients[cid].masked_input(routed)), sender=cid)
    requests = server.unmask_requests()
    return server, {cid: clients[cid].unmask(request) for cid, request in requests.items()}


@pytest.mark.parametrize("where", ["key share, bytes checks", "self-mask share, array checks"])
@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        ("index_of_another_client", ProtocolAbort),
        ("index_zero", MessageFormatError),
        ("index_not_canonical", MessageFormatError),
        ("value_at_prime", MessageFormatError),
        ("value_all_ones", MessageFormatError),
        ("value_above_prime_low_byte", MessageFormatError),
    ],
)
def test_parsed_badly_encoded_share_is_refused_and_state_kept(
    mangle: str, error: type[Exception], where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short list is checked share by share as bytes, a long one with arrays
    # (here: longer than 4): both must refuse every bad encoding.
    monkeypatch.setattr(unmasking_module, "_ARRAY_CHECK_MIN", 4)
    server, responses = _unmasking_round(8)
    response = responses[1]
    fb = shamir.FIELD_BYTES
    key = where.startswith("key")
    listed = response.key_shares if key else response.self_mask_shares
    assert len(listed) == (1 if key else 7)
    good = listed[-1].share
    index, value = good[:fb], good[fb:]
    bad = {
        "index_of_another_client": (2).to_bytes(fb, "big") + value,
        "index_zero": bytes(fb) + value,
        "index_not_canonical": (1 + shamir.PRIME).to_bytes(fb, "big") + value,
        "value_at_prime": index + shamir.PRIME.to_bytes(fb, "big"),
        "value_all_ones": index + b"\xff" * fb,
        "value_above_prime_low_byte": index + b"\x02" + bytes(fb - 1),
    }[mangle]
    changed = (*listed[:-1], RevealedShare(listed[-1].owner, bad))
    if key:
        altered = dataclasses.replace(response, key_shares=changed)
    else:
        altered = dataclasses.replace(response, self_mask_shares=changed)
    parsed = _parsed(altered)
    assert isinstance(parsed, UnmaskResponse) and parsed._packed_shares() is not None
    with pytest.raises(error):
        server.receive(parsed, sender=1)
    assert server.responders == frozenset()
    for cid, answer in responses.items():
        server.receive(_parsed(answer), sender=cid)
    assert np.array_equal(server.finalize(), np.zeros(L, dtype=np.uint64))


def _canonical_reference(blobs: np.ndarray, index: bytes) -> bool:
    """The per-share checks, one share at a time, on integers."""
    fb = shamir.FIELD_BYTES
    return blobs.shape[1] == shamir.SHARE_SIZE and all(
        bytes(row[:fb]) == index and int.from_bytes(bytes(row[fb:]), "big") < shamir.PRIME
        for row in blobs
    )


def test_batched_share_check_refuses_exactly_what_the_per_share_check_refuses() -> None:
    fb, size = shamir.FIELD_BYTES, shamir.SHARE_SIZE
    rng = random.Random(7)
    index = (5).to_bytes(fb, "big")
    prime = shamir.PRIME.to_bytes(fb, "big")
    edge_values = [
        prime,  # the prime itself
        (shamir.PRIME - 1).to_bytes(fb, "big"),
        b"\x01" + b"\xff" * (fb - 2) + b"\xfe",
        b"\x02" + bytes(fb - 1),
        b"\xff" * fb,
        bytes(fb),
        b"\x01" + bytes(fb - 1),
    ]
    for trial in range(400):
        n = rng.randrange(0, 60)
        rows = [index + rng.randrange(shamir.PRIME).to_bytes(fb, "big") for _ in range(n)]
        if n and trial % 2:
            at = rng.randrange(n)
            kind = rng.randrange(4)
            if kind == 0:
                rows[at] = index + rng.choice(edge_values)
            elif kind == 1:
                rows[at] = (6).to_bytes(fb, "big") + rows[at][fb:]
            elif kind == 2:
                rows[at] = rows[at][:fb] + (1 + shamir.PRIME).to_bytes(fb, "big")[:fb]
            elif n > 1 and at + 1 < n:
                # PRIME's bytes across two rows (the second row's index then differs).
                cut = rng.randrange(1, fb)
                rows[at] = rows[at][: size - cut] + prime[:cut]
                rows[at + 1] = prime[cut:] + rows[at + 1][fb - cut :]
        flat = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(n, size)
        # The fast path sees strided views of the message bytes.
        padded = np.zeros((n, size + 8), dtype=np.uint8)
        padded[:, 8:] = flat
        for blobs in (flat, padded[:, 8:]):
            assert unmasking_module._canonical_shares(blobs, index) == _canonical_reference(
                blobs, index
            )
    wrong_width = np.zeros((3, size - 1), dtype=np.uint8)
    assert not unmasking_module._canonical_shares(wrong_width, index)


def test_parsed_shares_that_do_not_match_the_request_are_refused() -> None:
    server, responses = _unmasking_round()
    response = responses[2]
    altered = dataclasses.replace(response, key_shares=())
    with pytest.raises(ProtocolAbort, match="do not match the request"):
        server.receive(_parsed(altered), sender=2)
    server.receive(_parsed(response), sender=2)
    assert server.responders == frozenset({2})


def test_parsed_bundle_refusals_name_the_recipient_and_keep_state() -> None:
    config = SecAggConfig(client_ids=(1, 2, 3, 4), threshold=3, vector_length=L)
    clients = {c: SecAggClient(config, c, np.zeros(L, dtype=np.uint64)) for c in range(1, 5)}
    server = SecAggServer(config)
    for cid in (1, 2, 3):  # client 4 never advertises: not on the roster
        server.receive(_parsed(clients[cid].advertise_keys()), sender=cid)
    roster = server.roster()
    shares = clients[1].share_keys(roster)
    bundle = EncryptedSharesBundle.from_shares(shares)
    stray = dataclasses.replace(shares[2], recipient=4)
    bad = EncryptedSharesBundle.from_shares([shares[3], stray])
    with pytest.raises(ProtocolAbort, match="client 4 is not a roster neighbour of client 1"):
        server.receive(_parsed(bad), sender=1)
    server.receive(_parsed(bundle), sender=1)
    with pytest.raises(ProtocolAbort, match="duplicate ciphertext from 1 to 2"):
        server.receive(_parsed(bundle), sender=1)
    with pytest.raises(ProtocolAbort, match="duplicate ciphertext from 1 to 3"):
        server.receive(shares[3], sender=1)
    for cid in (2, 3):
        server.receive(
            _parsed(EncryptedSharesBundle.from_shares(clients[cid].share_keys(roster))), sender=cid
        )
    routed = server.routed_shares()
    assert sorted(routed) == [1, 2, 3]
    assert [s.sender for s in routed[1].shares] == [2, 3]


def test_single_ciphertexts_and_bundles_mix() -> None:
    # Client 1 sends one ciphertext alone and the rest as a bundle: the server
    # routes item by item and the round is exact.
    config = SecAggConfig(client_ids=(1, 2, 3, 4), threshold=3, vector_length=L)
    rng = np.random.default_rng(5)
    inputs = {c: rng.integers(0, 2**63, size=L, dtype=np.uint64) for c in range(1, 5)}
    clients = {c: SecAggClient(config, c, inputs[c]) for c in range(1, 5)}
    server = SecAggServer(config)
    for cid, client in clients.items():
        server.receive(_parsed(client.advertise_keys()), sender=cid)
    roster = server.roster()
    for cid, client in clients.items():
        shares = client.share_keys(roster)
        if cid == 1:
            server.receive(_parsed(shares[4]), sender=1)
            rest = [shares[2], shares[3]]
            server.receive(_parsed(EncryptedSharesBundle.from_shares(rest)), sender=1)
        else:
            server.receive(_parsed(EncryptedSharesBundle.from_shares(shares)), sender=cid)
    for cid, routed in server.routed_shares().items():
        assert isinstance(routed, RoutedShares)
        server.receive(_parsed(clients[cid].masked_input(_parsed(routed))), sender=cid)  # type: ignore[arg-type]
    for cid, request in server.unmask_requests().items():
        server.receive(_parsed(clients[cid].unmask(request)), sender=cid)
    expected = sum(inputs.values(), start=np.zeros(L, dtype=np.uint64))
    assert np.array_equal(server.finalize(), expected)


# -- shamir.combine_batches -------------------------------------------------------------


@pytest.mark.parametrize("threshold", [2, 3, 17, 51])
def test_combine_batches_equals_combine(threshold: int) -> None:
    rnd = random.Random(threshold)
    batches = []
    expected = []
    for _ in range(4):
        xs = tuple(rnd.sample(range(1, 5000), threshold))
        rows, secrets_of = [], []
        for _ in range(3):
            secret = secrets.token_bytes(shamir.SECRET_SIZE)
            shares = shamir.split(secret, threshold=threshold, num_shares=threshold, indices=xs)
            assert shamir.combine(shares, threshold=threshold) == secret
            rows.append([s.value for s in shares])
            secrets_of.append(secret)
        batches.append((xs, rows))
        expected.append(secrets_of)
    batches.append((batches[0][0], []))  # a batch without rows
    expected.append([])
    assert shamir.combine_batches(batches, threshold=threshold) == expected
    assert shamir.combine_batches([], threshold=threshold) == []


def test_combine_batches_checks_its_arguments() -> None:
    xs = (1, 2, 3)
    shares = shamir.split(bytes(32), threshold=3, num_shares=3)
    row = [s.value for s in shares]
    assert shamir.combine_batches([(xs, [row])], threshold=3) == [[bytes(32)]]
    with pytest.raises(ParameterError, match="exactly threshold"):
        shamir.combine_batches([((1, 2), [row])], threshold=3)
    with pytest.raises(ParameterError, match="distinct"):
        shamir.combine_batches([((1, 2, 2), [row])], threshold=3)
    with pytest.raises(ParameterError):
        shamir.combine_batches([((0, 2, 3), [row])], threshold=3)
    with pytest.raises(ParameterError, match="rows of threshold"):
        shamir.combine_batches([(xs, [row[:2]])], threshold=3)
    with pytest.raises(ParameterError, match=r"\[0, PRIME\)") as caught:
        shamir.combine_batches([(xs, [[row[0], row[1], shamir.PRIME]])], threshold=3)
    assert str(row[0]) not in str(caught.value)  # never a share value in the message
    with pytest.raises(ParameterTypeError):
        shamir.combine_batches([(xs, [[row[0], row[1], 1.0]])], threshold=3)  # type: ignore[list-item]
    with pytest.raises(ParameterTypeError):
        shamir.combine_batches([[xs, [row]]], threshold=3)  # type: ignore[list-item]
    with pytest.raises(ParameterTypeError):
        shamir.combine_batches(b"xs", threshold=3)  # type: ignore[arg-type]
    # At xs = (1, 2, 3) the Lagrange weight of x = 3 at 0 is 1: adding 2**300 to
    # that share adds 2**300 to the rebuilt value, which then exceeds 32 bytes.
    wrong = [row[0], row[1], (row[2] + 2**300) % shamir.PRIME]
    with pytest.raises(ReconstructionError, match=r"^batches\[1\] row 0: .*does not fit"):
        shamir.combine_batches([(xs, [row]), (xs, [wrong])], threshold=3)
