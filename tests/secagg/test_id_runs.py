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
from privfed.secagg.protocol.config import MAX_CLIENT_ID, MAX_COMPLETE_GRAPH_CLIENTS
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


def _one_run_config(graph: str) -> bytes:
    """A small config's wire form, its one run then stretched to ``2**32 - 2`` ids."""
    kwargs: dict[str, object] = {"graph": "harary", "degree": 6} if graph == "harary" else {}
    config = SecAggConfig(
        client_ids=range(1, 11), threshold=3, vector_length=4, session_id=b"x" * 16, **kwargs
    )
    wire = encode_config(config)
    run = struct.pack(">II", 1, 10)
    assert wire.count(run) == 1
    return wire.replace(run, struct.pack(">II", 1, MAX_CLIENT_ID - 1))


def test_a_few_bytes_claiming_four_billion_ids_cost_a_harary_node_o_runs() -> None:
    """What a lying server can make a node build from 8 bytes of runs: nothing of size n.

    The digest hashes the runs, not each id, and one client's Harary
    neighbourhood is O(degree): were either O(n), this would hash 17 GB.
    """
    config = decode_config(_one_run_config("harary"))
    assert config.num_clients == MAX_CLIENT_ID - 1
    assert len(config.neighbours(MAX_CLIENT_ID - 1, b"\x01" * 32)) == 6


def test_a_complete_graph_is_capped_so_runs_cannot_make_a_node_build_n_squared() -> None:
    with pytest.raises(MessageFormatError):
        decode_config(_one_run_config("complete"))
    with pytest.raises(ParameterError, match="at most 65,536 ids with the complete graph"):
        SecAggConfig(
            client_ids=range(1, MAX_COMPLETE_GRAPH_CLIENTS + 2), threshold=2, vector_length=1
        )
    # At the cap a client's neighbours are built for it alone, not the n**2 map.
    config = SecAggConfig(
        client_ids=range(1, MAX_COMPLETE_GRAPH_CLIENTS + 1), threshold=2, vector_length=1
    )
    assert len(config.neighbours(7)) == MAX_COMPLETE_GRAPH_CLIENTS - 1
    with pytest.raises(ParameterError, match="client_id"):
        config.neighbours(MAX_COMPLETE_GRAPH_CLIENTS + 1)


def test_an_active_config_of_four_billion_ids_is_refused_after_the_registry_s_size() -> None:
    keys = {c: IdentityKey.generate() for c in range(1, 9)}
    registry = IdentityRegistry({c: k.public_key for c, k in keys.items()})
    with pytest.raises(ParameterError, match=r"missing \[9, 10, 11, 12, 13\]"):
        SecAggConfig(
            client_ids=range(1, MAX_CLIENT_ID),
            threshold=5,
            vector_length=2,
            mode="active",
            identities=registry,
            corrupted=1,
            graph="harary",
            degree=6,
        )


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: IdRuns.from_sorted([1, 1, 2, 3]), ParameterError),  # a duplicate
        (lambda: IdRuns.from_sorted([3, 2]), ParameterError),  # not increasing
        (lambda: IdRuns.from_sorted([1.5, 2.7]), ParameterTypeError),  # not ints
        (lambda: IdRuns([(1, 4), (2, 5)]), ParameterError),  # overlapping
        (lambda: IdRuns([(5, 7), (0, 2)]), ParameterError),  # out of order
        (lambda: IdRuns([(1, 3), (3, 5)]), ParameterError),  # touching: 1..4 is one run
        (lambda: IdRuns([(1, 3), (4, 4)]), ParameterError),  # empty
        (lambda: IdRuns([(1, True)]), ParameterTypeError),  # a bool bound
        (lambda: IdRuns.from_range(range(1, 10, 2)), ParameterError),  # step 2
    ],
)
def test_only_canonical_runs_can_be_built(build: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        build()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ([(0, 3)], "client_ids"),  # id 0: the secret's Shamir point
        ([(2**32, 2**32 + 2)], "client_ids"),  # past the largest id
        ([(5, 6)], "at least two ids"),
    ],
)
def test_a_config_of_runs_checks_their_ids_domain(
    runs: list[tuple[int, int]], message: str
) -> None:
    with pytest.raises(ParameterError, match=message):
        _config(IdRuns(runs))


def test_membership_and_index_of_other_numbers_answer_as_the_tuple() -> None:
    from fractions import Fraction

    runs, oracle = IdRuns.from_sorted([1, 2, 3, 7]), (1, 2, 3, 7)
    for value in (
        np.float32(2.0),
        np.True_,
        Fraction(2),
        Fraction(5, 2),
        float("inf"),
        float("nan"),
    ):
        assert (value in runs) is (value in oracle)
    for start, stop in ((0, -1), (-3, 4), (1, 2), (2, 10), (-10, -2)):
        for value in oracle:
            try:
                expected: int | None = oracle.index(value, start, stop)
            except ValueError:
                expected = None
            if expected is None:
                with pytest.raises(ValueError):
                    runs.index(value, start, stop)
            else:
                assert runs.index(value, start, stop) == expected
    with pytest.raises(TypeError):
        runs[1.0]  # type: ignore[call-overload]
