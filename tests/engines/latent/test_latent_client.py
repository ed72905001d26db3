"""The cache-blocked statistics engine against an independent integer reference.

The engine groups, quantizes in place and accumulates Gram products in float64
blocks; the reference below follows the module docstring's per-record recipe
in numpy and does every sum in exact int64 arithmetic.  They must agree bit for
bit, including where the float64 accumulator has to be flushed into int64
before it could lose bits, and for inputs at the edge of the float64 range.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import privfed.engines.latent.client as client
from privfed.engines.latent.client import LatentStatisticsAccumulator, compute_latent_statistics
from privfed.engines.latent.statistics import LatentStatisticsConfig
from privfed.errors import NonFiniteInputError

_MARGIN = 1.0 - 2.0**-40


def _reference_quantize(latents: np.ndarray, cfg: LatentStatisticsConfig) -> np.ndarray:
    """The module docstring's steps, in numpy, in the committed order of operations."""
    z = np.asarray(latents, dtype=np.float64)
    f, radius, limit = cfg.bits, cfg.clip_norm, cfg.norm_bound_squared
    peak = np.abs(z).max(axis=1) if z.size else np.zeros(z.shape[0])
    q = z * math.ldexp(1.0, f)
    over = peak > radius
    q[over] *= (radius / peak[over])[:, None]
    q = np.rint(q)
    ints = q.astype(np.int64)
    norms = (ints * ints).sum(axis=1)
    long = norms > limit
    target = math.ldexp(radius, f) * _MARGIN
    q[long] = np.trunc(q[long] * (target / np.sqrt(norms[long].astype(np.float64)))[:, None])
    return q.astype(np.int64)


def _reference_statistics(
    latents: np.ndarray, labels: np.ndarray, cfg: LatentStatisticsConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = _reference_quantize(latents, cfg)
    rows, cols = np.triu_indices(cfg.dim)
    sums, moments, counts = [], [], []
    for c in range(cfg.num_classes):
        mine = q[labels == c]
        sums.append(mine.sum(axis=0, dtype=np.int64))
        moments.append((mine.T @ mine)[rows, cols])  # int64 matmul: exact
        counts.append(mine.shape[0])
    return np.array(sums), np.array(moments), np.array(counts, dtype=np.int64)


def _assert_matches_reference(
    latents: np.ndarray, labels: np.ndarray, cfg: LatentStatisticsConfig, **kwargs: object
) -> None:
    stats = compute_latent_statistics(
        latents, labels, num_classes=cfg.num_classes, clip_norm=cfg.clip_norm, config=cfg, **kwargs
    )
    sums, moments, counts = _reference_statistics(latents, labels, cfg)
    np.testing.assert_array_equal(stats.counts, counts)
    np.testing.assert_array_equal(stats.sums, sums)
    np.testing.assert_array_equal(stats.second_moments, moments)


def _mixed_records(seed: int, n: int, d: int) -> np.ndarray:
    """Records of wildly different scales: most need no clipping, some need both steps."""
    rng = np.random.default_rng(seed)
    scale = rng.choice([0.0, 1e-3, 0.3, 1.0, 3.0, 1e6], size=(n, 1))
    return rng.normal(size=(n, d)) * scale


@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 300),
    d=st.integers(1, 9),
    k=st.integers(1, 5),
    batch=st.integers(1, 512),
)
def test_matches_integer_reference(seed: int, n: int, d: int, k: int, batch: int) -> None:
    cfg = LatentStatisticsConfig(dim=d, num_classes=k, clip_norm=2.5)
    z = _mixed_records(seed, n, d)
    y = np.random.default_rng(seed + 1).integers(0, k, size=n)
    _assert_matches_reference(z, y, cfg, batch_size=batch)


def test_several_passes_through_the_buffer_match_reference() -> None:
    # The reusable buffer holds _BLOCK_BYTES of rows; 4.5 buffers' worth of
    # records in 4 classes take two passes through it per class.
    d, k = 16, 4
    per_pass = client._BLOCK_BYTES // (8 * d)
    n = per_pass * 9 // 2
    cfg = LatentStatisticsConfig(dim=d, num_classes=k, clip_norm=3.0 * math.sqrt(d))
    rng = np.random.default_rng(7)
    z = rng.normal(size=(n, d)) * rng.choice([1.0, 10.0], size=(n, 1))
    y = rng.integers(0, k, size=n)
    _assert_matches_reference(z, y, cfg, batch_size=n)
    # The same through torch, float32 and a smaller batch: bit-identical again
    # (float32 -> float64 is exact, so the reference sees the same values).
    z32 = z.astype(np.float32)
    _assert_matches_reference(z32, y, cfg, batch_size=n)
    stats = compute_latent_statistics(
        torch.from_numpy(z32), torch.from_numpy(y), num_classes=k, clip_norm=cfg.clip_norm
    )
    small = compute_latent_statistics(
        z32, y, num_classes=k, clip_norm=cfg.clip_norm, batch_size=4097
    )
    assert stats == small


def test_d128_in_two_buffer_passes_matches_reference() -> None:
    d, k = 128, 3
    n = 3 * (client._BLOCK_BYTES // (8 * d)) + 500  # two blocks per class
    cfg = LatentStatisticsConfig(dim=d, num_classes=k, clip_norm=3.0 * math.sqrt(d))
    rng = np.random.default_rng(8)
    z = rng.normal(size=(n, d)) * rng.choice([1.0, 10.0], size=(n, 1))
    _assert_matches_reference(z, rng.integers(0, k, size=n), cfg)


@pytest.mark.parametrize("d", [31, 32, 47, 63, 64, 95, 200])
def test_banded_upper_triangle_matches_reference(d: int) -> None:
    # Above ~32 columns the product is split into bands of columns covering the
    # upper triangle only; the edges fall at different places for each d.
    cfg = LatentStatisticsConfig(dim=d, num_classes=3, clip_norm=2.0 * math.sqrt(d))
    rng = np.random.default_rng(d)
    z = rng.normal(size=(300, d)) * rng.choice([0.5, 1.0, 5.0], size=(300, 1))
    _assert_matches_reference(z, rng.integers(0, 3, size=300), cfg, batch_size=128)


@pytest.mark.parametrize("k", [7, 300])
def test_many_classes_match_reference(k: int) -> None:
    # Records are processed class by class through one accumulator; above 256
    # classes the labels are sorted as int32 instead of uint8.
    cfg = LatentStatisticsConfig(dim=6, num_classes=k, clip_norm=2.0)
    z = _mixed_records(11, 900, 6)
    y = np.random.default_rng(12).integers(0, k, size=900)
    _assert_matches_reference(z, y, cfg, batch_size=50)
    _assert_matches_reference(z, y, cfg)


def test_float64_accumulator_is_flushed_before_it_could_round() -> None:
    # f=25 and R=1 give L = 2**50, so only 8 rows fit exactly in one float64
    # accumulator; 400 near-full-norm records per class push every entry of the
    # total far beyond 2**53, where float64 would drop the low bits that the
    # integer reference keeps.
    cfg = LatentStatisticsConfig(
        dim=2, num_classes=2, clip_norm=1.0, max_records=1000, fractional_bits=25
    )
    assert cfg.exact_batch_size == 8
    rng = np.random.default_rng(3)
    z = rng.normal(size=(800, 2)) * 5.0  # all clipped, so |q_i q_j| close to 2**49
    y = np.repeat([0, 1], 400)
    rng.shuffle(y)
    _assert_matches_reference(z, y, cfg)
    _assert_matches_reference(z, y, cfg, batch_size=3)
    stats = compute_latent_statistics(z, y, num_classes=2, clip_norm=1.0, config=cfg)
    assert int(np.abs(stats.second_moments).max()) > 2**53  # the regime that needs the flush


def test_records_near_the_float64_maximum_are_clipped_not_overflowed() -> None:
    cfg = LatentStatisticsConfig(dim=3, num_classes=1, clip_norm=2.0)
    z = np.array(
        [
            [1.7e308, -1.7e308, 3.0],
            [-np.finfo(np.float64).max, 0.0, 1e-300],
            [1e300, 1e-310, -5e-324],
        ]
    )
    acc = LatentStatisticsAccumulator(cfg)
    q = acc.quantize(torch.from_numpy(z)).numpy()
    assert int((q * q).sum(axis=1).max()) <= cfg.norm_bound_squared
    one = cfg.clip_norm * 2**cfg.bits
    # Each record points along its largest coordinates, scaled to the clip norm.
    np.testing.assert_allclose(q[1], [-one, 0, 0], rtol=2**-30)
    np.testing.assert_allclose(q[2], [one, 0, 0], rtol=2**-30)
    assert q[0, 0] == -q[0, 1] > 0 and abs(q[0, 0]) * math.sqrt(2) <= one
    stats = compute_latent_statistics(z, np.zeros(3, dtype=np.int64), num_classes=1, clip_norm=2.0)
    np.testing.assert_array_equal(stats.sums[0], q.sum(axis=0))


def test_inputs_are_never_modified() -> None:
    cfg = LatentStatisticsConfig(dim=4, num_classes=2, clip_norm=1.0)
    z = _mixed_records(5, 200, 4)
    y = np.random.default_rng(6).integers(0, 2, size=200)
    z_copy, y_copy = z.copy(), y.copy()
    compute_latent_statistics(z, y, num_classes=2, clip_norm=1.0)
    zt = torch.from_numpy(z.copy())
    zt_copy = zt.clone()
    LatentStatisticsAccumulator(cfg).quantize(zt)
    compute_latent_statistics(zt, torch.from_numpy(y), num_classes=2, clip_norm=1.0)
    assert np.array_equal(z, z_copy) and np.array_equal(y, y_copy)
    assert torch.equal(zt, zt_copy)


def test_latents_that_require_grad_are_accepted() -> None:
    # Encoders hand over latents that may still carry autograd history.
    cfg = LatentStatisticsConfig(dim=4, num_classes=2, clip_norm=1.0)
    z = _mixed_records(9, 50, 4)
    y = np.random.default_rng(10).integers(0, 2, size=50)
    zt = torch.from_numpy(z.copy()).requires_grad_(True)
    expected = compute_latent_statistics(z, y, num_classes=2, clip_norm=1.0)
    assert compute_latent_statistics(zt * 1.0, y, num_classes=2, clip_norm=1.0) == expected
    q = LatentStatisticsAccumulator(cfg).quantize(zt)
    assert torch.equal(q, torch.from_numpy(_reference_quantize(z, cfg)))


def test_non_finite_in_a_later_block_leaves_accumulator_unchanged() -> None:
    cfg = LatentStatisticsConfig(dim=3, num_classes=2, clip_norm=1.0)
    acc = LatentStatisticsAccumulator(cfg, batch_size=4)
    acc.update(np.ones((5, 3)), np.array([0, 1, 0, 1, 1]))
    before = acc.result()
    bad = np.ones((10, 3))
    bad[9, 0] = np.nan  # in the third block of four: two blocks were already added
    with pytest.raises(NonFiniteInputError, match="latents"):
        acc.update(bad, np.zeros(10, dtype=np.int64))
    assert acc.result() == before
    acc.update(bad[:9], np.zeros(9, dtype=np.int64))
    assert acc.result().total_records == 14


# --- Blocking and threads -----------------------------------------------------
# update() cuts every class's run of label-sorted records into blocks of nearly
# equal height and, on the CPU, shares the blocks among torch.get_num_threads()
# Python threads (each running torch single-threaded).  None of this may change
# a bit of the result.


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """torch may use ``n`` threads, and inputs of any size are shared among them."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    threshold = client._THREADS_MIN_VALUES
    client._THREADS_MIN_VALUES = 0
    try:
        yield
    finally:
        client._THREADS_MIN_VALUES = threshold
        torch.set_num_threads(previous)


@settings(max_examples=50)
@given(
    per_class=st.lists(st.integers(0, 40), min_size=1, max_size=8),
    work=st.integers(1, 16),
    parts=st.integers(1, 5),
)
def test_blocks_tile_each_class_and_are_handed_out_in_order(
    per_class: list[int], work: int, parts: int
) -> None:
    blocks = client._plan_blocks(per_class, work)
    first = 0
    for c, n_c in enumerate(per_class):
        mine = [(start, stop) for cls, start, stop in blocks if cls == c]
        heights = [stop - start for start, stop in mine]
        # Consecutive, covering exactly the class's run, as few blocks as `work`
        # allows, of heights that differ by at most one.
        starts = [first, *(stop for _, stop in mine[:-1])] if mine else []
        assert [start for start, _ in mine] == starts
        assert sum(heights) == n_c and len(mine) == -(-n_c // work)
        assert all(1 <= h <= work for h in heights)
        assert max(heights, default=0) - min(heights, default=0) <= 1
        first += n_c
    # The schedule hands every block out once, in order, to any taker.
    schedule = client._Schedule(len(blocks))
    taken = [schedule.take() for _ in range(len(blocks) + parts)]
    assert taken == [*range(len(blocks)), *([None] * parts)]


def test_schedule_stops_after_the_earliest_failure_and_raises_it() -> None:
    schedule = client._Schedule(10)
    assert [schedule.take() for _ in range(6)] == [0, 1, 2, 3, 4, 5]
    schedule.fail(5, ValueError("five"))
    assert schedule.take() is None  # nothing after a failed block
    schedule.fail(3, KeyError("three"))  # a slower thread fails earlier
    with pytest.raises(KeyError, match="three"):
        schedule.raise_first()
    client._Schedule(3).raise_first()  # no failure: no error


@pytest.mark.parametrize("threads", [2, 3])
def test_threads_match_reference_and_single_thread(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Imbalanced classes (two empty), d = 37 (no multiple of any band or block
    # width), records of every scale (fast and exact quantization paths in the
    # same blocks), and a batch size small enough for dozens of blocks per thread.
    d, k = 37, 6
    cfg = LatentStatisticsConfig(dim=d, num_classes=k, clip_norm=2.0 * math.sqrt(d))
    z = _mixed_records(21, 700, d)
    y = np.random.default_rng(22).choice([0, 1, 3, 5], size=700, p=[0.7, 0.2, 0.07, 0.03])
    with _torch_threads(1):
        single = compute_latent_statistics(
            z, y, num_classes=k, clip_norm=cfg.clip_norm, batch_size=9
        )
    shared = client._run_in_threads
    calls: list[object] = []

    def spy(*args: Any) -> Any:
        calls.append(args[-1])  # the number of threads
        return shared(*args)

    monkeypatch.setattr(client, "_run_in_threads", spy)
    with _torch_threads(threads):
        _assert_matches_reference(z, y, cfg, batch_size=9)
        _assert_matches_reference(z, y, cfg, batch_size=100)
        threaded = compute_latent_statistics(
            z, y, num_classes=k, clip_norm=cfg.clip_norm, batch_size=9
        )
        assert torch.get_num_threads() == threads  # restored after the worker threads
    assert threaded == single
    # Every call above shared its blocks among the threads (where torch's
    # thread count is per thread, as with its OpenMP backend, the usual one).
    assert calls == ([threads] * 3 if client._per_thread_settings() else [])
    assert threaded.counts[2] == threaded.counts[4] == 0
    assert not threaded.sums[2].any() and not threaded.second_moments[4].any()


def test_threads_with_clip_boundary_records_and_one_class() -> None:
    # All records in one class, most of them exactly at or a few ulps around the
    # clip norm: every block takes the exact tests, in every thread.
    d = 20
    cfg = LatentStatisticsConfig(dim=d, num_classes=1, clip_norm=3.0)
    rng = np.random.default_rng(23)
    directions = rng.normal(size=(400, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    scale = 3.0 * (1.0 + rng.choice([0.0, 2.0**-52, -(2.0**-52), 1e-12, -1e-12, 0.5], size=400))
    z = directions * scale[:, None]
    with _torch_threads(2):
        _assert_matches_reference(z, np.zeros(400, dtype=np.int64), cfg, batch_size=16)


def test_non_finite_with_threads_raises_the_earliest_block_and_changes_nothing() -> None:
    cfg = LatentStatisticsConfig(dim=3, num_classes=2, clip_norm=1.0)
    acc = LatentStatisticsAccumulator(cfg, batch_size=4)
    acc.update(np.ones((5, 3)), np.array([0, 1, 0, 1, 1]))
    before = acc.result()
    bad = np.ones((64, 3))
    bad[-1, 1] = np.inf  # in the last block
    twice = bad.copy()
    twice[9, :2] = np.nan  # two more in the third block of four rows: raised first
    with _torch_threads(1), pytest.raises(NonFiniteInputError) as single:
        acc.update(twice, np.zeros(64, dtype=np.int64))
    with _torch_threads(2):
        for _ in range(5):  # whatever the timing of the threads
            with pytest.raises(NonFiniteInputError) as threaded:
                acc.update(twice, np.zeros(64, dtype=np.int64))
            assert str(threaded.value) == str(single.value) and "2 non-finite" in str(single.value)
        with pytest.raises(NonFiniteInputError, match="latents"):
            acc.update(bad, np.zeros(64, dtype=np.int64))
        assert torch.get_num_threads() == 2
        assert acc.result() == before
        acc.update(bad[:-1], np.zeros(63, dtype=np.int64))
    assert acc.result().total_records == 68
