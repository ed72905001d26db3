"""A lying server, lying peers and tampered messages: every trick aborts or is caught.

The helpers below drive the client and server state machines by hand so a test
can alter any message between them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from secagg_helpers import deliver

from privfed.errors import (
    AuthenticationError,
    MessageFormatError,
    ParameterError,
    ParameterTypeError,
    ProtocolAbort,
    ReconstructionError,
)
from privfed.secagg import (
    AdvertiseKeys,
    EncryptedShares,
    EncryptedSharesBundle,
    MaskedInput,
    RevealedShare,
    Roster,
    RosterEntry,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
)
from privfed.secagg.primitives import shamir

N, T, L = 5, 3, 4


@dataclasses.dataclass
class Round:
    config: SecAggConfig
    clients: dict[int, SecAggClient]
    server: SecAggServer
    inputs: dict[int, np.ndarray]
    roster: Roster | None = None
    routed: dict[int, RoutedShares] | None = None
    requests: dict[int, UnmaskRequest] | None = None


def _round(n: int = N, t: int = T, seed: int = 0, *, check_all_shares: bool = False) -> Round:
    rng = np.random.default_rng(seed)
    config = SecAggConfig(client_ids=tuple(range(1, n + 1)), threshold=t, vector_length=L)
    inputs = {c: rng.integers(0, 2**32, size=L, dtype=np.uint64) for c in config.client_ids}
    clients = {c: SecAggClient(config, c, inputs[c]) for c in config.client_ids}
    server = SecAggServer(config, check_all_shares=check_all_shares)
    return Round(config, clients, server, inputs)


def _advertise(r: Round, skip: tuple[int, ...] = ()) -> Roster:
    for cid, client in r.clients.items():
        if cid not in skip:
            deliver(r.server, client.advertise_keys())
    r.roster = r.server.roster()
    return r.roster


def _share(r: Round, skip: tuple[int, ...] = ()) -> dict[int, RoutedShares]:
    assert r.roster is not None
    for cid in r.roster.client_ids:
        if cid not in skip:
            for message in r.clients[cid].share_keys(r.roster).values():
                deliver(r.server, message)
    r.routed = r.server.routed_shares()
    return r.routed


def _mask(r: Round, skip: tuple[int, ...] = ()) -> dict[int, UnmaskRequest]:
    assert r.routed is not None
    for cid, routed in r.routed.items():
        if cid not in skip:
            deliver(r.server, r.clients[cid].masked_input(routed))
    r.requests = r.server.unmask_requests()
    return r.requests


def _to_unmasking(r: Round, mask_skip: tuple[int, ...] = ()) -> dict[int, UnmaskRequest]:
    _advertise(r)
    _share(r)
    return _mask(r, mask_skip)


def _expect_abort(client: SecAggClient, call: object, *args: object) -> None:
    with pytest.raises(ProtocolAbort):
        call(*args)  # type: ignore[operator]
    assert client.aborted
    assert client.stage is None


# -- a lying server at unmasking ----------------------------------------------------


def test_honest_request_is_answered() -> None:
    r = _round()
    requests = _to_unmasking(r, mask_skip=(5,))
    response = r.clients[1].unmask(requests[1])
    assert [s.owner for s in response.self_mask_shares] == [1, 2, 3, 4]
    assert [s.owner for s in response.key_shares] == [5]


def test_client_listed_as_both_survivor_and_dropped_aborts() -> None:
    r = _round()
    requests = _to_unmasking(r, mask_skip=(5,))
    bad = dataclasses.replace(requests[1], dropped=(2, 5))
    _expect_abort(r.clients[1], r.clients[1].unmask, bad)
    # Having aborted, it refuses even the honest request.
    with pytest.raises(ProtocolAbort):
        r.clients[1].unmask(requests[1])


def test_claiming_the_asking_client_dropped_aborts() -> None:
    r = _round()
    requests = _to_unmasking(r)
    bad = dataclasses.replace(requests[2], survivors=(1, 3, 4, 5), dropped=(2,))
    _expect_abort(r.clients[2], r.clients[2].unmask, bad)


def test_survivor_relabelled_as_dropped_below_threshold_aborts() -> None:
    # The attack of a lying server: call a live client "dropped" to get its mask
    # key while others reveal its self-mask seed.  With t=3 it cannot shrink
    # the survivors below 3 without the client noticing.
    r = _round()
    requests = _to_unmasking(r)
    bad = dataclasses.replace(requests[1], survivors=(1, 2), dropped=(3, 4, 5))
    _expect_abort(r.clients[1], r.clients[1].unmask, bad)


def test_client_never_seen_at_previous_stage_aborts() -> None:
    r = _round()
    _advertise(r)
    _share(r, skip=(4,))  # 4 advertised keys but never shared them
    requests = _mask(r)
    assert 4 not in requests[1].survivors + requests[1].dropped
    bad = dataclasses.replace(requests[1], dropped=(4,))
    _expect_abort(r.clients[1], r.clients[1].unmask, bad)


def test_view_missing_a_masked_peer_aborts() -> None:
    r = _round()
    requests = _to_unmasking(r)
    bad = dataclasses.replace(requests[1], survivors=(1, 2, 3, 4))
    _expect_abort(r.clients[1], r.clients[1].unmask, bad)


def test_second_request_with_another_view_aborts_but_a_repeat_is_idempotent() -> None:
    r = _round()
    requests = _to_unmasking(r)
    first = r.clients[3].unmask(requests[3])
    again = r.clients[3].unmask(UnmaskRequest.from_bytes(requests[3].to_bytes()))
    assert again == first
    assert again.to_bytes() == first.to_bytes()
    other = dataclasses.replace(requests[3], survivors=(1, 2, 3, 4), dropped=(5,))
    _expect_abort(r.clients[3], r.clients[3].unmask, other)


def test_request_of_another_session_or_recipient_aborts() -> None:
    r = _round()
    requests = _to_unmasking(r)
    bad = dataclasses.replace(requests[1], session_id=bytes(32))
    _expect_abort(r.clients[1], r.clients[1].unmask, bad)
    _expect_abort(r.clients[2], r.clients[2].unmask, dataclasses.replace(requests[2], recipient=3))


def test_wrong_type_does_not_change_state() -> None:
    r = _round()
    requests = _to_unmasking(r)
    with pytest.raises(ParameterTypeError):
        r.clients[1].unmask(requests[1].to_bytes())  # type: ignore[arg-type]
    assert not r.clients[1].aborted
    assert r.clients[1].stage is Stage.UNMASKING
    r.clients[1].unmask(requests[1])
    assert r.clients[1].done


# -- a lying server at SHARE_KEYS ------------------------------------------------------


def _roster_without(roster: Roster, drop: int) -> Roster:
    return dataclasses.replace(
        roster, entries=tuple(e for e in roster.entries if e.client_id != drop)
    )


def test_roster_tricks_abort() -> None:
    r = _round()
    roster = _advertise(r)
    # Omits the client itself.
    _expect_abort(r.clients[1], r.clients[1].share_keys, _roster_without(roster, 1))
    # Substitutes the client's own key.
    entries = list(roster.entries)
    entries[1] = dataclasses.replace(entries[1], mask_public_key=entries[0].mask_public_key)
    swapped = dataclasses.replace(roster, entries=tuple(entries))
    _expect_abort(r.clients[2], r.clients[2].share_keys, swapped)
    # Repeats a peer's key under another id.
    entries = list(roster.entries)
    entries[4] = dataclasses.replace(
        entries[4], encryption_public_key=entries[3].encryption_public_key
    )
    _expect_abort(
        r.clients[3], r.clients[3].share_keys, dataclasses.replace(roster, entries=tuple(entries))
    )
    # Another session.
    _expect_abort(r.clients[4], r.clients[4].share_keys, dataclasses.replace(roster, round_index=9))
    # Lists a client outside the configuration.
    extra = RosterEntry(99, bytes([7]) * 32, bytes([8]) * 32)
    _expect_abort(
        r.clients[5],
        r.clients[5].share_keys,
        dataclasses.replace(roster, entries=(*roster.entries, extra)),
    )


@pytest.mark.parametrize("field", ["encryption_public_key", "mask_public_key"])
def test_low_order_key_slipped_into_the_roster_aborts_the_client(field: str) -> None:
    # The server refuses low-order keys on arrival; a lying server could still
    # relay one.  Clients run X25519 themselves and abort, naming the peer.
    r = _round()
    roster = _advertise(r)
    entries = list(roster.entries)
    point_of_order_8 = bytes.fromhex(
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"
    )
    entries[2] = dataclasses.replace(entries[2], **{field: point_of_order_8})
    forged = dataclasses.replace(roster, entries=tuple(entries))
    if field == "encryption_public_key":
        with pytest.raises(ProtocolAbort, match="client 3 advertised an invalid encryption key"):
            r.clients[1].share_keys(forged)
        assert r.clients[1].aborted
        return
    # The mask key is used at the next stage.
    for cid in (1, 2, 3, 4, 5):
        outgoing = r.clients[cid].share_keys(forged if cid == 1 else roster)
        for message in outgoing.values():
            deliver(r.server, message)
    routed = r.server.routed_shares()
    with pytest.raises(ProtocolAbort, match="client 3 advertised an invalid mask key"):
        r.clients[1].masked_input(routed[1])
    assert r.clients[1].aborted


def test_roster_below_threshold_aborts() -> None:
    r = _round()
    roster = _advertise(r)
    short = dataclasses.replace(
        roster, entries=tuple(e for e in roster.entries if e.client_id in (1, 2))
    )
    _expect_abort(r.clients[1], r.clients[1].share_keys, short)


def test_peer_dropped_before_share_keys_is_left_out() -> None:
    r = _round()
    roster = _advertise(r, skip=(2,))
    out = r.clients[1].share_keys(roster)
    assert sorted(out) == [3, 4, 5]


# -- ciphertexts --------------------------------------------------------------------


def test_tampered_ciphertext_fails_authentication() -> None:
    r = _round()
    _advertise(r)
    routed = _share(r)
    original = routed[1].shares[0]
    flipped = bytearray(original.ciphertext)
    flipped[-1] ^= 1
    bad_item = dataclasses.replace(original, ciphertext=bytes(flipped))
    bad = dataclasses.replace(routed[1], shares=(bad_item, *routed[1].shares[1:]))
    with pytest.raises(AuthenticationError) as info:
        r.clients[1].masked_input(bad)
    assert str(info.value) == "authentication failed"
    assert r.clients[1].aborted


def test_ciphertext_rerouted_to_another_recipient_fails_authentication() -> None:
    r = _round()
    _advertise(r)
    routed = _share(r)
    # Client 2's ciphertext for client 3, relabelled as addressed to client 1.
    stolen = next(s for s in routed[3].shares if s.sender == 2)
    relabelled = EncryptedShares(
        session_id=stolen.session_id,
        round_index=stolen.round_index,
        sender=2,
        recipient=1,
        ciphertext=stolen.ciphertext,
    )
    shares = tuple(relabelled if s.sender == 2 else s for s in routed[1].shares)
    with pytest.raises(AuthenticationError):
        r.clients[1].masked_input(dataclasses.replace(routed[1], shares=shares))


def test_routed_shares_tricks_abort() -> None:
    r = _round()
    _advertise(r)
    routed = _share(r)
    _expect_abort(
        r.clients[1],
        r.clients[1].masked_input,
        dataclasses.replace(routed[1], shares=routed[1].shares[:1]),
    )
    _expect_abort(r.clients[2], r.clients[2].masked_input, routed[3])


def test_masked_input_out_of_order_does_not_change_state() -> None:
    r = _round()
    with pytest.raises(ProtocolAbort, match="out of order"):
        r.clients[1].masked_input(
            RoutedShares(
                session_id=r.config.bound_session_id, round_index=0, recipient=1, shares=()
            )
        )
    assert r.clients[1].stage is Stage.ADVERTISE_KEYS
    assert not r.clients[1].aborted


# -- the server refuses bad client messages ---------------------------------------------


def test_server_refuses_duplicates_unknowns_other_sessions_and_bad_keys() -> None:
    r = _round()
    first = r.clients[1].advertise_keys()
    deliver(r.server, first)
    with pytest.raises(ProtocolAbort, match="duplicate"):
        deliver(r.server, first)
    with pytest.raises(ProtocolAbort, match="unknown"):
        deliver(r.server, dataclasses.replace(first, sender=42))
    with pytest.raises(ProtocolAbort, match="another session"):
        deliver(r.server, dataclasses.replace(first, session_id=bytes(16)))
    low_order = dataclasses.replace(r.clients[2].advertise_keys(), encryption_public_key=bytes(32))
    with pytest.raises(ProtocolAbort, match="low-order"):
        deliver(r.server, low_order)
    reused = dataclasses.replace(low_order, encryption_public_key=first.mask_public_key)
    with pytest.raises(ProtocolAbort, match="reuses"):
        deliver(r.server, reused)
    assert r.server.advertised == {1}
    assert not r.server.aborted
    with pytest.raises(ParameterTypeError):
        deliver(r.server, first.to_bytes())  # type: ignore[arg-type]


def test_server_refuses_late_and_early_masked_input() -> None:
    r = _round()
    _advertise(r)
    routed = _share(r)
    late = r.clients[5].masked_input(routed[5])
    _mask(r, skip=(5,))
    with pytest.raises(ProtocolAbort, match="late"):
        deliver(r.server, late)
    responses = [r.clients[c].unmask(req) for c, req in r.requests.items()]  # type: ignore[union-attr]
    for response in responses:
        deliver(r.server, response)
    total = r.server.finalize()
    expected = sum((r.inputs[c] for c in (1, 2, 3, 4)), start=np.zeros(L, np.uint64))
    np.testing.assert_array_equal(total, expected)
    np.testing.assert_array_equal(r.server.finalize(), total)
    with pytest.raises(ProtocolAbort, match="late"):
        deliver(r.server, late)


def test_server_refuses_masked_input_before_its_stage() -> None:
    r = _round()
    message = MaskedInput(
        session_id=r.config.bound_session_id,
        round_index=0,
        sender=1,
        ring_bits=64,
        values=np.zeros(L, np.uint64),
    )
    with pytest.raises(ProtocolAbort, match="early"):
        deliver(r.server, message)


def test_partial_ciphertext_set_counts_as_dropped() -> None:
    r = _round()
    roster = _advertise(r)
    for cid in roster.client_ids:
        out = r.clients[cid].share_keys(roster)
        messages = list(out.values())
        if cid == 2:
            messages = messages[:2]
        for message in messages:
            deliver(r.server, message)
    routed = r.server.routed_shares()
    assert r.server.shared == {1, 3, 4, 5}
    assert 2 not in routed
    assert all(2 not in routed[c].senders for c in routed)


def test_bundles_are_taken_whole_or_not_at_all() -> None:
    r = _round()
    roster = _advertise(r, skip=(5,))
    cfg = r.config
    out = r.clients[1].share_keys(roster)
    stray = EncryptedShares(
        session_id=cfg.bound_session_id,
        round_index=cfg.round_index,
        sender=1,
        recipient=5,
        ciphertext=b"x" * 80,
    )
    # A ciphertext for a client that is not on the roster spoils the whole bundle.
    with pytest.raises(ProtocolAbort, match="not a roster neighbour"):
        deliver(r.server, EncryptedSharesBundle.from_shares([*out.values(), stray]))
    assert not r.server.aborted
    # Nothing of it was kept: the same ciphertexts are accepted afterwards.
    first, *rest = sorted(out.values(), key=lambda m: m.recipient)
    deliver(r.server, first)
    # A bundle repeating an accepted ciphertext is refused as a whole, too.
    with pytest.raises(ProtocolAbort, match="duplicate"):
        deliver(r.server, EncryptedSharesBundle.from_shares(out))
    deliver(r.server, EncryptedSharesBundle.from_shares(rest))
    for cid in (2, 3, 4):
        deliver(r.server, EncryptedSharesBundle.from_shares(r.clients[cid].share_keys(roster)))
    r.routed = r.server.routed_shares()
    assert r.server.shared == {1, 2, 3, 4}
    # Routed exactly as the clients sent them.
    assert r.routed[2].shares[0] == out[2]
    requests = _mask(r)
    for cid in sorted(requests):
        deliver(r.server, r.clients[cid].unmask(requests[cid]))
    expected = sum((r.inputs[c] for c in (1, 2, 3, 4)), start=np.zeros(L, dtype=np.uint64))
    assert np.array_equal(r.server.finalize(), expected)


def test_a_partial_bundle_counts_as_dropped() -> None:
    r = _round()
    roster = _advertise(r)
    for cid in roster.client_ids:
        out = r.clients[cid].share_keys(roster)
        items = sorted(out.values(), key=lambda m: m.recipient)
        deliver(r.server, EncryptedSharesBundle.from_shares(items[:2] if cid == 3 else items))
    routed = r.server.routed_shares()
    assert r.server.shared == {1, 2, 4, 5}
    assert all(3 not in routed[c].senders for c in routed)


def test_server_aborts_below_threshold_for_good() -> None:
    r = _round()
    deliver(r.server, r.clients[1].advertise_keys())
    deliver(r.server, r.clients[2].advertise_keys())
    with pytest.raises(ProtocolAbort) as info:
        r.server.roster()
    assert info.value.stage == "ADVERTISE_KEYS"
    assert r.server.aborted
    with pytest.raises(ProtocolAbort):
        r.server.roster()
    with pytest.raises(ProtocolAbort):
        deliver(r.server, r.clients[3].advertise_keys())


def test_server_needs_threshold_responses() -> None:
    r = _round()
    requests = _to_unmasking(r)
    for cid in (1, 2):
        deliver(r.server, r.clients[cid].unmask(requests[cid]))
    with pytest.raises(ProtocolAbort, match="answered"):
        r.server.finalize()
    assert r.server.aborted


def test_server_refuses_responses_that_do_not_match_the_request() -> None:
    r = _round()
    requests = _to_unmasking(r, mask_skip=(5,))
    response = r.clients[1].unmask(requests[1])
    # Moving the dropped client's key share to the seed shares is refused.
    swapped = dataclasses.replace(
        response,
        self_mask_shares=(*response.self_mask_shares, *response.key_shares),
        key_shares=(),
    )
    with pytest.raises(ProtocolAbort, match="do not match"):
        deliver(r.server, swapped)
    with pytest.raises(ProtocolAbort, match="not asked"):
        deliver(r.server, dataclasses.replace(response, sender=5))
    garbled = dataclasses.replace(response, key_shares=(RevealedShare(5, b"\x00" * 7),))
    with pytest.raises(MessageFormatError):
        deliver(r.server, garbled)
    deliver(r.server, response)
    with pytest.raises(ProtocolAbort, match="duplicate"):
        deliver(r.server, response)


@pytest.mark.parametrize(
    "mangle",
    [
        "short",
        "long",
        "index_of_another_client",
        "index_zero",
        "index_not_canonical",
        "value_at_prime",
        "value_all_ones",
    ],
)
def test_server_refuses_badly_encoded_shares_and_keeps_its_state(mangle: str) -> None:
    r = _round()
    requests = _to_unmasking(r, mask_skip=(5,))
    response = r.clients[1].unmask(requests[1])
    fb = shamir.FIELD_BYTES
    good = response.self_mask_shares[0].share
    index, value = good[:fb], good[fb:]
    bad = {
        "short": good[:-1],
        "long": good + b"\x00",
        "index_of_another_client": (2).to_bytes(fb, "big") + value,
        "index_zero": bytes(fb) + value,
        "index_not_canonical": (1 + shamir.PRIME).to_bytes(fb, "big") + value,
        "value_at_prime": index + shamir.PRIME.to_bytes(fb, "big"),
        "value_all_ones": index + b"\xff" * fb,
    }[mangle]
    first = RevealedShare(response.self_mask_shares[0].owner, bad)
    altered = dataclasses.replace(
        response, self_mask_shares=(first, *response.self_mask_shares[1:])
    )
    expected: type[Exception] = (
        ProtocolAbort if mangle == "index_of_another_client" else MessageFormatError
    )
    with pytest.raises(expected):
        deliver(r.server, altered)
    assert not r.server.aborted
    assert r.server.responders == frozenset()
    # The honest response is still accepted and the round completes exactly.
    for cid in sorted(requests):
        deliver(r.server, r.clients[cid].unmask(requests[cid]) if cid != 1 else response)
    total = r.server.finalize()
    expected_sum = sum((r.inputs[c] for c in (1, 2, 3, 4)), start=np.zeros(L, dtype=np.uint64))
    assert np.array_equal(total, expected_sum)


# -- wrong-but-well-formed shares are caught at reconstruction ------------------------


def _lagrange_at_zero(index: int, indices: list[int]) -> int:
    p = shamir.PRIME
    value = 1
    for m in indices:
        if m != index:
            value = value * m % p * pow(m - index, -1, p) % p
    return value


def _shift_share(
    response: UnmaskResponse, owner: int, *, key: bool, holders: list[int]
) -> UnmaskResponse:
    """Alter one revealed share so that interpolation over ``holders`` yields secret + 1."""
    revealed = response.key_shares if key else response.self_mask_shares
    p = shamir.PRIME
    changed = []
    for item in revealed:
        if item.owner == owner:
            share = shamir.Share.from_bytes(item.share)
            delta = pow(_lagrange_at_zero(share.index, holders), -1, p)
            item = RevealedShare(
                owner, shamir.Share(share.index, (share.value + delta) % p).to_bytes()
            )
        changed.append(item)
    field = "key_shares" if key else "self_mask_shares"
    return dataclasses.replace(response, **{field: tuple(changed)})


def test_wrong_self_mask_share_fails_the_commitment() -> None:
    r = _round()
    requests = _to_unmasking(r)
    responders = [1, 2, 3]  # exactly t: the shares cannot be cross-checked
    for cid in responders:
        response = r.clients[cid].unmask(requests[cid])
        if cid == 2:
            response = _shift_share(response, 4, key=False, holders=responders)
        deliver(r.server, response)
    with pytest.raises(ReconstructionError, match="commitment"):
        r.server.finalize()
    assert not r.server.aborted


def test_wrong_key_share_fails_the_public_key_check() -> None:
    r = _round()
    requests = _to_unmasking(r, mask_skip=(5,))
    responders = [1, 2, 3]
    for cid in responders:
        response = r.clients[cid].unmask(requests[cid])
        if cid == 3:
            response = _shift_share(response, 5, key=True, holders=responders)
        deliver(r.server, response)
    with pytest.raises(ReconstructionError, match="public key"):
        r.server.finalize()


@pytest.mark.parametrize("culprit", [1, 5])
def test_wrong_share_among_redundant_shares_is_inconsistent(culprit: int) -> None:
    r = _round(check_all_shares=True)
    requests = _to_unmasking(r)
    for cid in r.config.client_ids:
        response = r.clients[cid].unmask(requests[cid])
        if cid == culprit:
            response = _shift_share(response, 2, key=False, holders=[1, 2, 3])
        deliver(r.server, response)
    with pytest.raises(ReconstructionError, match="inconsistent"):
        r.server.finalize()


def test_by_default_surplus_shares_are_not_used() -> None:
    # A wrong share from a responder beyond the first t is never combined, and
    # the sum is still exact (the rebuilt seeds pass their commitments).
    r = _round()
    requests = _to_unmasking(r)
    for cid in r.config.client_ids:
        response = r.clients[cid].unmask(requests[cid])
        if cid == 5:
            response = _shift_share(response, 2, key=False, holders=[1, 2, 3])
        deliver(r.server, response)
    expected = sum(r.inputs.values(), start=np.zeros(L, np.uint64))
    np.testing.assert_array_equal(r.server.finalize(), expected)


def test_server_option_is_type_checked() -> None:
    config = SecAggConfig(client_ids=(1, 2, 3), threshold=2, vector_length=1)
    with pytest.raises(ParameterTypeError):
        SecAggServer(config, check_all_shares=1)  # type: ignore[arg-type]


def test_advertise_message_carries_no_secret() -> None:
    r = _round()
    message: AdvertiseKeys = r.clients[1].advertise_keys()
    text = repr(message) + repr(r.clients[1]) + repr(r.server)
    assert "private" not in text.lower()


# -- handing the input over at the masked-input stage -----------------------------------


def test_input_can_be_given_late_but_exactly_once() -> None:
    config = SecAggConfig(client_ids=(1, 2, 3), threshold=2, vector_length=L)
    values = {c: np.full(L, c, dtype=np.uint64) for c in config.client_ids}
    clients = {
        1: SecAggClient(config, 1, values[1]),
        2: SecAggClient(config, 2),
        3: SecAggClient(config, 3),
    }
    server = SecAggServer(config)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    roster = server.roster()
    for c in clients.values():
        for message in c.share_keys(roster).values():
            deliver(server, message)
    routed = server.routed_shares()
    with pytest.raises(ParameterError, match="already given"):
        clients[1].masked_input(routed[1], values[1])
    with pytest.raises(ParameterError, match="none was given"):
        clients[2].masked_input(routed[2])
    with pytest.raises(ParameterError, match="length"):
        clients[3].masked_input(routed[3], np.zeros(L + 1, np.uint64))
    for cid in (1, 2, 3):
        assert clients[cid].stage is Stage.MASKED_INPUT
    deliver(server, clients[1].masked_input(routed[1]))
    deliver(server, clients[2].masked_input(routed[2], values[2]))
    deliver(server, clients[3].masked_input(routed[3], values[3].astype(np.int32)))
    requests = server.unmask_requests()
    for cid, request in requests.items():
        deliver(server, clients[cid].unmask(request))
    np.testing.assert_array_equal(server.finalize(), np.full(L, 6, np.uint64))


def test_secagg_plus_roster_parts_hold_only_the_neighbourhood() -> None:
    config = SecAggConfig(
        client_ids=tuple(range(1, 11)), threshold=3, vector_length=L, graph="harary", degree=4
    )
    clients = {c: SecAggClient(config, c, np.full(L, c, np.uint64)) for c in config.client_ids}
    server = SecAggServer(config)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    full = server.roster()
    assert full.client_ids == config.client_ids
    for cid, client in clients.items():
        part = server.roster(cid)
        # The roster fixed the graph (its seed hashes every member's advertisement).
        assert set(part.client_ids) == server.neighbours(cid) | {cid}
        # Clients accept their part (or the full roster) and share with neighbours only.
        outgoing = client.share_keys(Roster.from_bytes(part.to_bytes()))
        assert set(outgoing) == server.neighbours(cid) == client.neighbours
        for message in outgoing.values():
            deliver(server, message)
    assert server.roster() == full  # idempotent once the stage is closed
    routed = server.routed_shares()
    for cid, client in clients.items():
        deliver(server, client.masked_input(routed[cid]))
    for cid, request in server.unmask_requests().items():
        deliver(server, clients[cid].unmask(request))
    np.testing.assert_array_equal(server.finalize(), np.full(L, 55, np.uint64))
    with pytest.raises(ParameterError):
        server.roster(99)


# -- the authenticated sender (the transport's word, not the message's) -------------------


def test_a_masked_input_forged_in_another_clients_name_is_refused() -> None:
    r = _round()
    _advertise(r)
    routed = _share(r)
    # Client 5 drops before sending its masked input; client 1 tries to send one in
    # its name (so the server would treat 5 as a survivor and ask for b_5 shares).
    honest = {cid: r.clients[cid].masked_input(routed[cid]) for cid in (1, 2, 3, 4)}
    forged = MaskedInput(
        session_id=honest[1].session_id,
        round_index=honest[1].round_index,
        sender=5,
        ring_bits=64,
        values=np.zeros(L, np.uint64),
    )
    with pytest.raises(ProtocolAbort, match="delivered by client 1"):
        r.server.receive(forged, sender=1)
    with pytest.raises(ProtocolAbort, match="delivered by client 2"):
        r.server.receive(honest[1], sender=2)
    assert r.server.survivors == frozenset()
    for cid, message in honest.items():
        r.server.receive(message, sender=cid)
    assert r.server.survivors == {1, 2, 3, 4}
    requests = r.server.unmask_requests()
    for cid, request in requests.items():
        deliver(r.server, r.clients[cid].unmask(request))
    expected = sum((r.inputs[c] for c in (1, 2, 3, 4)), np.zeros(L, np.uint64))
    np.testing.assert_array_equal(r.server.finalize(), expected)


def test_receive_requires_an_authenticated_sender() -> None:
    r = _round()
    message = r.clients[1].advertise_keys()
    with pytest.raises(TypeError):
        r.server.receive(message)  # type: ignore[call-arg]
    with pytest.raises(ParameterTypeError):
        r.server.receive(message, sender="1")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        r.server.receive(message, sender=0)
    assert r.server.advertised == frozenset()
    r.server.receive(message, sender=1)
    assert r.server.advertised == {1}
