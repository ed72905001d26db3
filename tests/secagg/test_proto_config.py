"""SecAggConfig validation and the SecAgg+ Harary graph."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg import GraphMode, SecAggConfig, Stage, harary_neighbourhoods
from privfed.secagg.protocol.graph import harary_neighbours


def test_defaults_and_normalisation() -> None:
    cfg = SecAggConfig(client_ids=(5, 2, 9), threshold=2, vector_length=3)
    assert cfg.client_ids == (2, 5, 9)
    assert cfg.ring_bits == 64
    assert cfg.graph is GraphMode.COMPLETE
    assert len(cfg.session_id) == 32
    assert cfg.neighbours(5) == {2, 9}
    assert cfg.neighbourhood(5) == {2, 5, 9}
    assert cfg.value_bytes == 8
    other = SecAggConfig(client_ids=(5, 2, 9), threshold=2, vector_length=3)
    assert other.session_id != cfg.session_id  # fresh by default
    assert "session_id" in repr(cfg)


def test_stage_order_leaves_room_for_consistency_check() -> None:
    assert list(Stage) == sorted(Stage)
    assert Stage.MASKED_INPUT < 3 < Stage.UNMASKING


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"threshold": 0}, ParameterError, "threshold"),
        ({"threshold": 1}, ParameterError, "threshold"),
        ({"threshold": 5}, ParameterError, "threshold"),
        ({"threshold": 2.0}, ParameterTypeError, "threshold"),
        ({"threshold": True}, ParameterTypeError, "threshold"),
        ({"client_ids": (1,)}, ParameterError, "client_ids"),
        ({"client_ids": (1, 1, 2)}, ParameterError, "client_ids"),
        ({"client_ids": (0, 1, 2)}, ParameterError, "client_ids"),
        ({"client_ids": (1, 2, 2**32)}, ParameterError, "client_ids"),
        ({"client_ids": "abc"}, ParameterTypeError, "client_ids"),
        ({"vector_length": 0}, ParameterError, "vector_length"),
        ({"ring_bits": 7}, ParameterError, "ring_bits"),
        ({"ring_bits": 65}, ParameterError, "ring_bits"),
        ({"session_id": b"short"}, ParameterError, "session_id"),
        ({"session_id": "x" * 32}, ParameterTypeError, "session_id"),
        ({"round_index": -1}, ParameterError, "round_index"),
        ({"graph": "ring"}, ParameterError, "graph"),
        ({"degree": 2}, ParameterError, "degree"),
        ({"graph": "harary"}, ParameterError, "degree"),
        ({"graph": "harary", "degree": 1}, ParameterError, "degree"),
        ({"graph": "harary", "degree": 4}, ParameterError, "degree"),
        ({"graph": "harary", "degree": 2, "threshold": 4}, ParameterError, "threshold"),
    ],
)
def test_invalid_configs_are_refused(
    kwargs: dict[str, object], error: type[Exception], name: str
) -> None:
    base: dict[str, object] = {"client_ids": (1, 2, 3, 4), "threshold": 3, "vector_length": 2}
    base.update(kwargs)
    with pytest.raises(error) as info:
        SecAggConfig(**base)  # type: ignore[arg-type]
    assert info.value.parameter == name  # type: ignore[attr-defined]


def test_odd_degree_needs_an_even_number_of_clients() -> None:
    with pytest.raises(ParameterError):
        SecAggConfig(
            client_ids=(1, 2, 3, 4, 5), threshold=2, vector_length=1, graph="harary", degree=3
        )
    cfg = SecAggConfig(
        client_ids=tuple(range(1, 7)), threshold=2, vector_length=1, graph="harary", degree=3
    )
    assert all(len(cfg.neighbours(c, bytes(32))) == 3 for c in cfg.client_ids)


def test_unknown_client_has_no_neighbours() -> None:
    cfg = SecAggConfig(client_ids=(1, 2, 3), threshold=2, vector_length=1)
    with pytest.raises(ParameterError):
        cfg.neighbours(4)


def _connected_after_removing(hood: dict[int, frozenset[int]], removed: set[int]) -> bool:
    alive = [c for c in hood if c not in removed]
    seen = {alive[0]}
    queue = collections.deque([alive[0]])
    while queue:
        for peer in hood[queue.popleft()]:
            if peer not in removed and peer not in seen:
                seen.add(peer)
                queue.append(peer)
    return len(seen) == len(alive)


@given(
    n=st.integers(3, 40),
    data=st.data(),
    session=st.binary(min_size=16, max_size=16),
)
def test_harary_graph_is_regular_symmetric_and_deterministic(
    n: int, data: st.DataObject, session: bytes
) -> None:
    degree = data.draw(st.integers(2, n - 1).filter(lambda k: k % 2 == 0 or n % 2 == 0))
    ids = list(range(10, 10 + n))
    hood = harary_neighbourhoods(ids, degree=degree, session_id=session, round_index=0)
    assert set(hood) == set(ids)
    for client, peers in hood.items():
        assert client not in peers
        assert len(peers) == degree
        assert all(client in hood[p] for p in peers)
    assert hood == harary_neighbourhoods(
        ids[::-1], degree=degree, session_id=session, round_index=0
    )
    # Harary graphs are degree-connected: removing degree - 1 nodes keeps them connected.
    removed = set(data.draw(st.permutations(ids))[: degree - 1])
    assert _connected_after_removing(hood, removed)


def test_harary_graph_depends_on_the_session() -> None:
    ids = list(range(1, 31))
    graphs = {
        frozenset(
            (c, frozenset(p))
            for c, p in harary_neighbourhoods(
                ids, degree=4, session_id=bytes([i]) * 16, round_index=0
            ).items()
        )
        for i in range(5)
    }
    assert len(graphs) == 5


@settings(deadline=None)
@given(
    n=st.integers(3, 60),
    data=st.data(),
    session=st.binary(min_size=16, max_size=16),
)
def test_one_clients_neighbours_match_the_whole_graph(
    n: int, data: st.DataObject, session: bytes
) -> None:
    """The O(k) single-client path gives exactly the whole graph's neighbourhood."""
    degree = data.draw(st.integers(2, n - 1).filter(lambda k: k % 2 == 0 or n % 2 == 0))
    start, step = data.draw(st.integers(1, 1000)), data.draw(st.integers(1, 9))
    ids = [start + step * i for i in range(n)]
    hood = harary_neighbourhoods(ids, degree=degree, session_id=session, round_index=3)
    for client in data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=6)):
        assert hood[client] == harary_neighbours(
            ids, client, degree=degree, session_id=session, round_index=3
        )


def test_the_config_gives_one_neighbourhood_without_building_the_graph() -> None:
    cfg = SecAggConfig(
        client_ids=tuple(range(1, 301)), threshold=5, vector_length=1, graph="harary", degree=8
    )
    seed = bytes(range(32))
    single = {c: cfg.neighbours(c, seed) for c in (1, 150, 300)}
    assert not cfg._graph_cache  # nothing built for the whole graph
    full = cfg.neighbourhoods(seed)
    assert all(full[c] == single[c] for c in single)
    with pytest.raises(ParameterError):
        SecAggConfig(
            client_ids=(1, 2, 3, 4), threshold=2, vector_length=1, graph="harary", degree=2
        ).neighbours(9, seed)


def test_the_ring_permutation_is_a_bijection_with_its_inverse() -> None:
    from privfed.secagg.protocol.graph import _Permutation

    for n in (*range(1, 70), 255, 256, 257, 1000, 1023, 1024, 1025, 4097):
        perm = _Permutation(bytes([n % 256]) * 32, n)
        images = [perm.forward(i) for i in range(n)]
        assert sorted(images) == list(range(n))
        assert perm.forward_all() == images  # the table path: the same permutation
        assert [perm.inverse(y) for y in images] == list(range(n))
