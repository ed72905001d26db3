"""End-to-end secure aggregation: exact sums with dropouts, clean aborts below t.

Every run goes through :func:`privfed.secagg.run_in_memory`, which serializes
every message at every hop.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import ParameterError, ParameterTypeError, ProtocolAbort
from privfed.secagg import GraphMode, SecAggConfig, Stage, run_in_memory, run_protocol

STAGES = (Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.UNMASKING)


def _inputs(rng: np.random.Generator, n: int, length: int, ring_bits: int) -> list[np.ndarray]:
    high = 2**ring_bits
    return [
        rng.integers(0, high, size=length, dtype=np.uint64, endpoint=False)
        if ring_bits < 64
        else rng.integers(0, 2**64 - 1, size=length, dtype=np.uint64, endpoint=True)
        for _ in range(n)
    ]


def _ring_sum(vectors: list[np.ndarray], ring_bits: int) -> np.ndarray:
    total = np.zeros_like(vectors[0])
    for v in vectors:
        total += v  # uint64 arithmetic wraps mod 2**64
    if ring_bits < 64:
        total &= np.uint64(2**ring_bits - 1)
    return total


def _schedule(rng: np.random.Generator, n: int, counts: list[int]) -> dict[Stage, list[int]]:
    order = rng.permutation(n).tolist()
    out: dict[Stage, list[int]] = {}
    start = 0
    for stage, count in zip(STAGES, counts, strict=True):
        out[stage] = order[start : start + count]
        start += count
    return out


def _expected(inputs: list[np.ndarray], dropouts: dict[Stage, list[int]], bits: int) -> np.ndarray:
    gone = {i for s in STAGES[:3] for i in dropouts.get(s, [])}
    return _ring_sum([v for i, v in enumerate(inputs) if i not in gone], bits)


@st.composite
def _complete_cases(draw: st.DrawFn) -> tuple[int, int, int, int, list[int], int]:
    n = draw(st.integers(3, 9))
    t = draw(st.integers(2, n))
    spare = n - t  # clients that may drop while keeping >= t at every stage
    counts = []
    for _ in STAGES:
        c = draw(st.integers(0, spare))
        counts.append(c)
        spare -= c
    length = draw(st.integers(1, 6))
    bits = draw(st.sampled_from([8, 13, 32, 64]))
    seed = draw(st.integers(0, 2**32 - 1))
    return n, t, length, bits, counts, seed


@pytest.mark.slow
@given(case=_complete_cases())
def test_exact_sum_with_dropouts_at_every_stage(
    case: tuple[int, int, int, int, list[int], int],
) -> None:
    n, t, length, bits, counts, seed = case
    rng = np.random.default_rng(seed)
    inputs = _inputs(rng, n, length, bits)
    dropouts = _schedule(rng, n, counts)
    total = run_in_memory(inputs, threshold=t, dropouts=dropouts, ring_bits=bits)
    assert total.dtype == np.uint64
    np.testing.assert_array_equal(total, _expected(inputs, dropouts, bits))


@st.composite
def _below_threshold_cases(draw: st.DrawFn) -> tuple[int, int, list[int], int]:
    n = draw(st.integers(3, 8))
    t = draw(st.integers(2, n))
    counts = [0, 0, 0, 0]
    # Drop enough clients, spread over stages, to leave fewer than t at the end.
    total = draw(st.integers(n - t + 1, n))
    for _ in range(total):
        counts[draw(st.integers(0, 3))] += 1
    seed = draw(st.integers(0, 2**32 - 1))
    return n, t, counts, seed


@pytest.mark.slow
@given(case=_below_threshold_cases())
def test_below_threshold_aborts_at_the_first_short_stage(
    case: tuple[int, int, list[int], int],
) -> None:
    n, t, counts, seed = case
    rng = np.random.default_rng(seed)
    inputs = _inputs(rng, n, 3, 64)
    dropouts = _schedule(rng, n, counts)
    remaining = n
    first_short = None
    for stage, count in zip(STAGES, counts, strict=True):
        remaining -= count
        if remaining < t:
            first_short = stage
            break
    assert first_short is not None
    with pytest.raises(ProtocolAbort) as info:
        run_in_memory(inputs, threshold=t, dropouts=dropouts)
    assert info.value.stage == first_short.name


@st.composite
def _harary_cases(draw: st.DrawFn) -> tuple[int, int, int, list[int], int]:
    n = draw(st.integers(5, 12))
    degree = draw(st.integers(2, n - 1).filter(lambda k: k % 2 == 0 or n % 2 == 0))
    t = draw(st.integers(2, degree + 1))
    # Dropping at most (degree + 1 - t) clients in total keeps every
    # neighbourhood at >= t, so the round must succeed.
    spare = degree + 1 - t
    counts = []
    for _ in STAGES:
        c = draw(st.integers(0, spare))
        counts.append(c)
        spare -= c
    seed = draw(st.integers(0, 2**32 - 1))
    return n, degree, t, counts, seed


@pytest.mark.slow
@given(case=_harary_cases())
def test_secagg_plus_exact_sum_with_dropouts(case: tuple[int, int, int, list[int], int]) -> None:
    n, degree, t, counts, seed = case
    rng = np.random.default_rng(seed)
    inputs = _inputs(rng, n, 4, 64)
    dropouts = _schedule(rng, n, counts)
    session = rng.bytes(32)
    total = run_in_memory(
        inputs, threshold=t, dropouts=dropouts, graph="harary", degree=degree, session_id=session
    )
    np.testing.assert_array_equal(total, _expected(inputs, dropouts, 64))


def test_secagg_plus_masks_only_with_neighbours() -> None:
    rng = np.random.default_rng(5)
    inputs = _inputs(rng, 12, 3, 64)
    report = run_protocol(inputs, threshold=3, graph=GraphMode.HARARY, degree=4)
    np.testing.assert_array_equal(report.total, _ring_sum(inputs, 64))
    for record in report.clients:
        # Four ciphertexts of fixed size, whatever the number of clients.
        sizes = {r.bytes_sent[Stage.SHARE_KEYS] for r in report.clients}
        assert len(sizes) == 1
        assert record.bytes_sent[Stage.SHARE_KEYS] > 0
    complete = run_protocol(inputs, threshold=3)
    assert (
        complete.clients[0].bytes_sent[Stage.SHARE_KEYS]
        > 2 * report.clients[0].bytes_sent[Stage.SHARE_KEYS]
    )


def test_threshold_equal_to_clients_needs_everyone() -> None:
    rng = np.random.default_rng(1)
    inputs = _inputs(rng, 4, 5, 64)
    np.testing.assert_array_equal(run_in_memory(inputs, threshold=4), _ring_sum(inputs, 64))
    with pytest.raises(ProtocolAbort):
        run_in_memory(inputs, threshold=4, dropouts={Stage.UNMASKING: [2]})


def test_unmasking_dropout_is_still_in_the_sum() -> None:
    rng = np.random.default_rng(2)
    inputs = _inputs(rng, 5, 4, 64)
    report = run_protocol(inputs, threshold=3, dropouts={Stage.UNMASKING: [0, 4]})
    assert report.survivors == (1, 2, 3, 4, 5)
    np.testing.assert_array_equal(report.total, _ring_sum(inputs, 64))


def test_report_counts_bytes_and_seconds() -> None:
    rng = np.random.default_rng(3)
    inputs = _inputs(rng, 4, 10, 32)
    seen: list[tuple[str, int, int]] = []
    report = run_protocol(
        inputs,
        threshold=2,
        ring_bits=32,
        dropouts={Stage.MASKED_INPUT: [1]},
        progress=lambda e: seen.append((e.stage, e.done, e.total)),
    )
    assert ("advertise_keys", 4, 4) in seen
    assert ("masked_input", 3, 3) in seen
    full = [c for c in report.clients if len(c.seconds) == 4]
    assert len(full) == 3
    for record in full:
        # 4-byte values on the wire for a 32-bit ring.
        assert record.bytes_sent[Stage.MASKED_INPUT] > 40
        assert record.bytes_sent[Stage.MASKED_INPUT] < 40 + 100
        assert record.total_bytes == sum(record.bytes_sent.values())
    assert report.mean_client_seconds > 0
    assert set(report.server_seconds) == set(STAGES)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"threshold": 0}, ParameterError),
        ({"threshold": 1}, ParameterError),
        ({"threshold": 5}, ParameterError),
        ({"threshold": 2, "dropouts": {Stage.SHARE_KEYS: [7]}}, ParameterError),
        (
            {"threshold": 2, "dropouts": {Stage.SHARE_KEYS: [1], Stage.UNMASKING: [1]}},
            ParameterError,
        ),
        ({"threshold": 2, "dropouts": {"SHARE_KEYS": [1]}}, ParameterTypeError),
        ({"threshold": 2, "graph": "star"}, ParameterError),
        ({"threshold": 2, "ring_bits": 4}, ParameterError),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    inputs = [np.zeros(3, dtype=np.uint64) for _ in range(4)]
    with pytest.raises(error):
        run_in_memory(inputs, **kwargs)  # type: ignore[arg-type]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ParameterError):
        run_in_memory([np.zeros(3, np.uint64)], threshold=2)
    with pytest.raises(ParameterError):
        run_in_memory([np.zeros(3, np.uint64), np.zeros(4, np.uint64)], threshold=2)
    with pytest.raises(ParameterTypeError):
        run_in_memory([np.zeros(3), np.zeros(3)], threshold=2)
    with pytest.raises(ParameterError):
        run_in_memory([np.full(3, 300, np.uint64)] * 2, threshold=2, ring_bits=8)
    with pytest.raises(ParameterError):
        run_in_memory([np.full(3, -1, np.int64)] * 2, threshold=2)


def test_the_harary_graph_needs_the_roster_seed() -> None:
    cfg = SecAggConfig(
        client_ids=tuple(range(1, 9)), threshold=2, vector_length=1, graph="harary", degree=2
    )
    # The session id alone no longer fixes the graph (a server could grind it).
    with pytest.raises(ParameterError, match="graph_seed"):
        cfg.neighbours(1)
    assert all(len(cfg.neighbours(c, bytes(32))) == 2 for c in cfg.client_ids)
    graphs = {frozenset(cfg.neighbourhoods(bytes([i]) * 32).items()) for i in range(5)}
    assert len(graphs) > 1


def test_runners_refuse_unknown_and_missing_keywords_as_python_does() -> None:
    # Both runners take their shared keywords as one typed option set; a
    # keyword outside it (noise_layers is run_protocol's alone) or no threshold
    # is the TypeError an explicit signature gave.
    inputs = [np.arange(4, dtype=np.uint64) for _ in range(3)]
    with pytest.raises(TypeError, match="unexpected keyword argument 'noise_layers'"):
        run_in_memory(inputs, threshold=2, noise_layers=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'treshold'"):
        run_protocol(inputs, treshold=2)  # type: ignore[call-arg]
    for run in (run_in_memory, run_protocol):
        with pytest.raises(TypeError, match="missing 1 required keyword-only argument"):
            run(inputs)  # type: ignore[operator]
    with pytest.raises(TypeError, match="positional"):
        run_in_memory(inputs, 2)  # type: ignore[misc]
    assert run_in_memory(inputs, threshold=2).tolist() == [0, 3, 6, 9]


def test_secagg_plus_parts_are_streamed_to_their_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    # A part is built when its client is handed it, not all N before the first is sent:
    # the runner holds one batch of parts at a time, as a streaming server would.
    from privfed.secagg import runner

    events: list[tuple[str, int | None]] = []
    # The runner streams each part's bytes, written by the server.s roster_bytes.
    real_roster, real_share = runner.SecAggServer.roster_bytes, runner.SecAggClient.share_keys

    def roster(self: object, client_id: int) -> object:
        events.append(("part", client_id))
        return real_roster(self, client_id)  # type: ignore[arg-type]

    def share(self: runner.SecAggClient, part: object) -> object:
        events.append(("share", self.client_id))
        return real_share(self, part)  # type: ignore[arg-type]

    monkeypatch.setattr(runner.SecAggServer, "roster_bytes", roster)
    monkeypatch.setattr(runner.SecAggClient, "share_keys", share)
    rng = np.random.default_rng(5)
    inputs = [rng.integers(0, 2**64, size=4, dtype=np.uint64, endpoint=False) for _ in range(12)]
    dropouts = {Stage.SHARE_KEYS: [3], Stage.MASKED_INPUT: [7]}
    report = run_protocol(inputs, threshold=5, graph="harary", degree=6, dropouts=dropouts)
    expected = np.zeros(4, dtype=np.uint64)
    for i, row in enumerate(inputs):
        if i not in (3, 7):
            expected += row
    assert np.array_equal(report.total, expected)
    # Every client's part, then its share, in id order: never all parts first.
    assert events == [e for cid in range(1, 13) for e in (("part", cid), ("share", cid))]
    # Every part is still the server's ADVERTISE_KEYS traffic.
    assert report.server_bytes_sent[Stage.ADVERTISE_KEYS] > 12 * 32
