"""A single masked input reveals nothing readable about the client's input."""

from __future__ import annotations

import numpy as np
from scipy import stats
from secagg_helpers import deliver

from privfed.secagg import MaskedInput, SecAggClient, SecAggConfig, SecAggServer


def _masked_inputs(
    inputs: list[np.ndarray],
    *,
    threshold: int,
    ring_bits: int = 64,
    session_id: bytes | None = None,
) -> list[MaskedInput]:
    """Run the first three stages honestly and return every client's masked input."""
    n = len(inputs)
    kwargs = {} if session_id is None else {"session_id": session_id}
    config = SecAggConfig(
        client_ids=tuple(range(1, n + 1)),
        threshold=threshold,
        vector_length=inputs[0].shape[0],
        ring_bits=ring_bits,
        **kwargs,  # type: ignore[arg-type]
    )
    clients = [SecAggClient(config, i + 1, v) for i, v in enumerate(inputs)]
    server = SecAggServer(config)
    for c in clients:
        deliver(server, c.advertise_keys())
    roster = server.roster()
    for c in clients:
        for message in c.share_keys(roster).values():
            deliver(server, message)
    routed = server.routed_shares()
    return [c.masked_input(routed[c.client_id]) for c in clients]


def test_masked_zero_is_not_zero_and_differs_per_session_and_client() -> None:
    zeros = [np.zeros(64, dtype=np.uint64) for _ in range(3)]
    first = _masked_inputs(zeros, threshold=2)
    second = _masked_inputs(zeros, threshold=2)
    for message in first:
        assert np.count_nonzero(message.values) > 60
    assert not np.array_equal(first[0].values, first[1].values)
    assert not np.array_equal(first[0].values, second[0].values)


def test_same_session_id_still_gives_fresh_masks() -> None:
    # Keys and seeds are fresh per client object, so replaying a session id
    # (a misuse) does not replay masks.
    sid = bytes(range(32))
    zeros = [np.zeros(32, dtype=np.uint64) for _ in range(3)]
    a = _masked_inputs(zeros, threshold=2, session_id=sid)
    b = _masked_inputs(zeros, threshold=2, session_id=sid)
    assert not np.array_equal(a[0].values, b[0].values)


def test_masked_input_is_uniform_on_a_small_ring() -> None:
    # An all-zero input in the ring Z_256: a chi-square test of the 2**14 masked
    # values against the uniform law over 256 bins.  The keys come from the OS
    # CSPRNG (no seed can be fixed), so the critical value is taken at
    # alpha = 1e-6: a correct implementation fails once in a million runs.  A mask
    # that left even ~5 % of entries at zero would push the statistic past 1000.
    length = 2**14
    zeros = [np.zeros(length, dtype=np.uint64) for _ in range(3)]
    masked = _masked_inputs(zeros, threshold=2, ring_bits=8)
    critical = stats.chi2.isf(1e-6, 255)
    for message in masked:
        counts = np.bincount(message.values.astype(np.int64), minlength=256)
        assert counts.shape == (256,)
        expected = length / 256
        statistic = float(((counts - expected) ** 2 / expected).sum())
        assert statistic < critical


def test_masked_inputs_of_different_inputs_are_indistinguishable_by_value_range() -> None:
    # A small input (all ones) must not leave a trace in the high bits: the top
    # byte of each masked value is uniform.  Same alpha = 1e-6 rule as above.
    length = 4096
    ones = [np.ones(length, dtype=np.uint64) for _ in range(3)]
    masked = _masked_inputs(ones, threshold=3)
    critical = stats.chi2.isf(1e-6, 255)
    top = (masked[0].values >> np.uint64(56)).astype(np.int64)
    counts = np.bincount(top, minlength=256)
    expected = length / 256
    assert float(((counts - expected) ** 2 / expected).sum()) < critical
