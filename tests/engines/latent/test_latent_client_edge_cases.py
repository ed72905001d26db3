"""Edge cases of the blocked, threaded client statistics: no rows, interrupts, races.

Each test failed on the reviewed version (commit 2dc0a65) of
``privfed.engines.latent.client``:

* ``quantize`` of zero rows raised (the clip-free screen took the maximum of no norms);
* a ``KeyboardInterrupt`` while the calling thread waited for its helper threads
  left torch's thread count at 1 and the helpers running;
* a failure in a block after its quantization (e.g. Ctrl-C during the products)
  did not stop the other threads, which then finished the whole batch first;
* two threads updating one accumulator at once committed counts of both calls
  but sums and moments of only one.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import pytest
import torch

import privfed.engines.latent.client as client
from privfed.engines.latent.client import LatentStatisticsAccumulator, compute_latent_statistics
from privfed.engines.latent.statistics import LatentStatisticsConfig


def test_quantize_of_no_rows_is_empty() -> None:
    cfg = LatentStatisticsConfig(dim=4, num_classes=2, clip_norm=1.0)
    acc = LatentStatisticsAccumulator(cfg)
    for dtype in (torch.float64, torch.float32):
        q = acc.quantize(torch.empty((0, 4), dtype=dtype))
        assert q.shape == (0, 4) and q.dtype == torch.int64


def test_interrupted_wait_for_helpers_restores_torch_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ctrl-C while the calling thread waits in join(): simulated by a join that
    # raises before waiting.  Threads are forced on whatever torch's backend.
    monkeypatch.setattr(client, "_per_thread_settings", lambda: True)
    monkeypatch.setattr(client, "_THREADS_MIN_VALUES", 0)
    started: list[threading.Thread] = []
    real_thread = threading.Thread

    class InterruptedJoin(threading.Thread):
        def start(self) -> None:
            started.append(self)
            super().start()

        def join(self, timeout: float | None = None) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr(threading, "Thread", InterruptedJoin)  # as client sees it
    cfg = LatentStatisticsConfig(dim=8, num_classes=2, clip_norm=3.0)
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(400, 8)), rng.integers(0, 2, size=400)
    acc = LatentStatisticsAccumulator(cfg, batch_size=4)
    acc.update(z[:10], y[:10])
    before = acc.result()
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            acc.update(z, y)
        assert torch.get_num_threads() == 2  # was left at 1
    finally:
        torch.set_num_threads(previous)
        for helper in started:
            real_thread.join(helper, timeout=30)  # the stopped helpers end promptly
    assert started and not any(helper.is_alive() for helper in started)
    assert acc.result() == before
    monkeypatch.undo()
    acc.update(z, y)  # and the accumulator works afterwards
    assert acc.result() == before + compute_latent_statistics(
        z, y, num_classes=2, clip_norm=3.0, config=cfg
    )


def test_failure_after_quantization_stops_the_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    # A failure while flushing a block's products (here: Ctrl-C) must be
    # reported to the schedule like a bad input, so no further block is handed
    # out to the other threads.  exact_batch_size is 8 rows at these bounds, so
    # the third block of 4 rows flushes the first two mid-class.
    cfg = LatentStatisticsConfig(
        dim=2, num_classes=1, clip_norm=1.0, fractional_bits=25, max_records=64
    )
    assert cfg.exact_batch_size == 8
    acc = LatentStatisticsAccumulator(cfg, batch_size=4)

    def interrupted(self: Any, c: int, moment: torch.Tensor, column_sum: torch.Tensor) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(client._Totals, "add", interrupted)
    source = torch.ones((40, 2), dtype=torch.float64) * 0.5
    index = torch.arange(40)
    blocks = client._plan_blocks([40], 4)
    schedule = client._Schedule(len(blocks))
    totals = client._Totals(
        torch.zeros((1, 3), dtype=torch.int64), torch.zeros((1, 2), dtype=torch.int64)
    )
    with pytest.raises(KeyboardInterrupt):
        acc._accumulate(source, index, blocks, 4, schedule, totals)
    assert schedule.take() is None  # blocks 3..9 are no longer handed out
    with pytest.raises(KeyboardInterrupt):
        schedule.raise_first()


def test_concurrent_updates_of_one_accumulator_lose_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Both calls are held inside the accumulation until the other one arrives
    # there too (or 0.3 s pass): without mutual exclusion both start from the
    # same state and the later commit drops the earlier call's sums.
    arrived = threading.Semaphore(0)
    inside = [0]
    accumulate = LatentStatisticsAccumulator._accumulate

    def rendezvous(self: LatentStatisticsAccumulator, *args: Any) -> None:
        inside[0] += 1
        if inside[0] == 2:
            arrived.release()
        else:
            arrived.acquire(timeout=0.3)
        accumulate(self, *args)

    monkeypatch.setattr(LatentStatisticsAccumulator, "_accumulate", rendezvous)
    d = 6
    cfg = LatentStatisticsConfig(dim=d, num_classes=2, clip_norm=2.0 * math.sqrt(d))
    rng = np.random.default_rng(4)
    za, zb = rng.normal(size=(50, d)), rng.normal(size=(70, d)) + 1.0
    ya, yb = rng.integers(0, 2, size=50), rng.integers(0, 2, size=70)
    acc = LatentStatisticsAccumulator(cfg)
    errors: list[BaseException] = []

    def feed(z: np.ndarray, y: np.ndarray) -> None:
        try:
            acc.update(z, y)
        except BaseException as error:  # reported below
            errors.append(error)

    workers = [threading.Thread(target=feed, args=pair) for pair in ((za, ya), (zb, yb))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors
    monkeypatch.undo()
    both = compute_latent_statistics(
        np.vstack([za, zb]), np.concatenate([ya, yb]), num_classes=2, clip_norm=cfg.clip_norm
    )
    assert acc.result() == both
