"""A config's ids as runs: the same sequence as the tuple of them, O(runs) on the wire.

The oracle is the sorted tuple of the same ids (what a config held before):
every read of an :class:`IdRuns` must give what the tuple gives.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError
from privfed.secagg import IdentityKey, IdentityRegistry, IdRuns, SecAggConfig
from privfed.secagg.protocol.config import MAX_CLIENT_ID
from privfed.secagg.protocol.state import decode_config, encode_config

# Sets of ids with runs and gaps: small ids (many touching), and ids near the top.
_ids = st.one_of(
    st.sets(st.integers(1, 60), min_size=0, max_size=40),
    st.sets(st.integers(MAX_CLIENT_ID - 40, MAX_CLIENT_ID), min_size=0, max_size=30),
).map(sorted)


@settings(max_examples=300, deadline=None)
@given(_ids, st.integers(-70, 70), st.data())
def test_every_read_gives_what_the_tuple_of_the_ids_gives(
    ids: list[int], position: int, data: st.DataObject
) -> None:
    runs, oracle = IdRuns.from_sorted(ids), tuple(ids)
    assert len(runs) == len(oracle) and tuple(runs) == oracle
    assert list(reversed(runs)) == list(reversed(oracle))
    assert runs == oracle and hash(runs) == hash(oracle)
    assert runs != (*oracle, 0)
    if -len(oracle) <= position < len(oracle):
        assert runs[position] == oracle[position]
    else:
        with pytest.raises(IndexError):
            runs[position]
    window = data.draw(st.slices(max(len(oracle), 1)))
    assert runs[window] == oracle[window]
    probes = [0, 1, 30, 61, MAX_CLIENT_ID, MAX_CLIENT_ID + 1, *oracle[:3]]
    for value in probes:
        for form in (value, float(value), np.int64(value) if value < 2**62 else value):
            assert (form in runs) is (form in oracle)
            assert runs.count(form) == oracle.count(form)
            if form in oracle:
                assert runs.index(form) == oracle.index(form)
            else:
                with pytest.raises(ValueError):
                    runs.index(form)
    for stranger in (True, False, 2.5, "3", None, b"\x01"):
        assert (stranger in runs) is (stranger in oracle)
    # Consecutive ids make one run each; the runs cover exactly the ids.
    assert [i for r in runs.runs for i in r] == ids
    assert all(b.start > a.stop for a, b in zip(runs.runs, runs.runs[1:], strict=False))


@settings(max_examples=200, deadline=None)
@given(_ids)
def test_the_wire_form_is_eight_bytes_a_run_and_round_trips(ids: list[int]) -> None:
    runs = IdRuns.from_sorted(ids)
    wire = runs.to_bytes()
    assert len(wire) == 4 + 8 * len(runs.runs)
    assert IdRuns.from_bytes(wire) == runs
    assert b"".join(runs.big_endian_chunks()) == b"".join(i.to_bytes(4, "big") for i in ids)


@pytest.mark.parametrize(
    "runs",
    [
        [(0, 2)],  # id 0 is the Shamir secret's point
        [(5, 0)],  # an empty run
        [(1, 3), (4, 1)],  # touching runs: 1..4 has one canonical form, one run
        [(4, 1), (1, 2)],  # not increasing
        [(1, 2), (2, 2)],  # overlapping
        [(MAX_CLIENT_ID, 2)],  # past the largest id
    ],
)
def test_a_non_canonical_wire_form_is_refused(runs: list[tuple[int, int]]) -> None:
    wire = struct.pack(">I", len(runs)) + b"".join(struct.pack(">II", *r) for r in runs)
    with pytest.raises(MessageFormatError, match="not canonical"):
        IdRuns.from_bytes(wire)


def test_truncated_or_trailing_wire_bytes_are_refused() -> None:
    wire = IdRuns.from_sorted([1, 2, 5]).to_bytes()
    for bad in (wire[:3], wire[:-1], wire + b"\x00"):
        with pytest.raises(MessageFormatError):
            IdRuns.from_bytes(bad)


def _config(ids: object, **kwargs: object) -> SecAggConfig:
    return SecAggConfig(
        client_ids=ids,  # type: ignore[arg-type]
        threshold=2,
        vector_length=3,
        session_id=b"s" * 32,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "ids", [(1, 2, 3, 4), (7, 3, 9, 8), (1, 2, 3, 10, 11, 40), (MAX_CLIENT_ID - 1, MAX_CLIENT_ID)]
)
def test_a_range_runs_or_a_tuple_of_the_same_ids_make_one_config(ids: tuple[int, ...]) -> None:
    ordered = tuple(sorted(ids))
    forms: list[object] = [ids, list(ids), IdRuns.from_sorted(ordered)]
    if ordered == tuple(range(ordered[0], ordered[-1] + 1)):
        forms.append(range(ordered[0], ordered[-1] + 1))
    configs = [_config(form) for form in forms]
    assert all(c == configs[0] and c.digest == configs[0].digest for c in configs)
    assert all(type(c.client_ids) is IdRuns and c.client_ids == ordered for c in configs)
    assert configs[0].client_id_set == frozenset(ids)


@pytest.mark.parametrize(
    ("compact", "listed"),
    [
        (range(0, 5), (0, 1, 2, 3, 4)),
        (range(-3, 2), (-3, -2, -1, 0, 1)),
        (
            range(MAX_CLIENT_ID - 1, MAX_CLIENT_ID + 3),
            tuple(range(MAX_CLIENT_ID - 1, MAX_CLIENT_ID + 3)),
        ),
        (range(3, 4), (3,)),
        (range(3, 3), ()),
    ],
)
def test_a_bad_range_is_refused_with_the_words_of_the_tuple(
    compact: range, listed: tuple[int, ...]
) -> None:
    with pytest.raises((ParameterError, ParameterTypeError)) as expected:
        _config(listed)
    with pytest.raises(type(expected.value)) as got:
        _config(compact)
    assert str(got.value) == str(expected.value)
    with pytest.raises(type(expected.value)) as got_runs:
        _config(IdRuns.from_sorted(listed))
    assert str(got_runs.value) == str(expected.value)


def test_a_million_ids_numbered_from_one_cost_the_config_bytes_not_megabytes() -> None:
    """What a phone downloads and holds for a round of a million: one run, not 7 MB of ids."""
    n = 1_000_000
    config = SecAggConfig(
        client_ids=range(1, n + 1), threshold=40, vector_length=10, graph="harary", degree=60
    )
    wire = encode_config(config)
    assert len(wire) < 1_000
    back = decode_config(wire)
    assert back == config and back.digest == config.digest
    assert back.num_clients == n and back.client_ids[n - 1] == n and n + 1 not in back.client_ids
    # The Harary neighbourhood of one client, from the runs alone.
    hood = back.neighbours(123_456, b"\x07" * 32)
    assert len(hood) == 60 and hood <= frozenset(range(1, n + 1))


def test_an_active_config_of_runs_is_the_config_of_its_tuple() -> None:
    keys = {c: IdentityKey.generate() for c in range(1, 9)}
    registry = IdentityRegistry({c: k.public_key for c, k in keys.items()})
    common = {"mode": "active", "identities": registry, "corrupted": 1}
    listed = SecAggConfig(
        client_ids=tuple(range(1, 9)), threshold=5, vector_length=2, session_id=b"a" * 32, **common
    )
    compact = SecAggConfig(
        client_ids=range(1, 9), threshold=5, vector_length=2, session_id=b"a" * 32, **common
    )
    assert compact == listed and compact.digest == listed.digest
    back = decode_config(encode_config(compact, registry_by_digest=True), registry=registry)
    assert back == listed
    with pytest.raises(ParameterError, match="identit"):
        SecAggConfig(
            client_ids=range(1, 10), threshold=5, vector_length=2, session_id=b"a" * 32, **common
        )
