"""Client side of the latent-statistic engine: exact fixed-point statistics in torch.

:class:`LatentStatisticsAccumulator` and :func:`compute_latent_statistics` clip,
quantize and sum a client's latents exactly as described in
:mod:`privfed.engines.latent.statistics` (which holds the shared specification
:class:`~privfed.engines.latent.statistics.LatentStatisticsConfig` and the
numpy value type :class:`~privfed.engines.latent.statistics.LatentStatistics`).

Speed: the records are sorted by label once and processed in blocks of one
class's rows that stay in a core's L2 cache (gather, clip and quantize in
place, banded float64 products of the upper triangle, column sums); on the CPU
the blocks are shared by ``torch.get_num_threads()`` Python threads running
torch single-threaded.  ``benchmarks/stats_throughput.py`` measures it against
a bare float64 Gram product and shows where the time goes.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
from collections.abc import Callable

import numpy as np
import torch

from privfed._checks import check_int
from privfed.engines.latent.statistics import (
    _RECLIP_MARGIN,
    DEFAULT_MAX_RECORDS,
    LatentStatistics,
    LatentStatisticsConfig,
    packed_size,
)
from privfed.errors import (
    NonFiniteInputError,
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)

__all__ = ["LatentStatisticsAccumulator", "compute_latent_statistics"]

# Bytes of the reusable buffer of grouped rows (one per thread).  Sized to stay
# in a core's L2 cache (2 MiB here) next to the BLAS packing buffers, so that
# the gather, the in-place quantization passes, the products and the column
# sums of a block all read it from there: measured at d = 128, 1 MiB blocks
# beat 4 MiB ones by about 10 %; results never depend on it.
_BLOCK_BYTES = 1 << 20
# Inputs with fewer values than this are handled in the calling thread alone
# (about half a millisecond of work: starting threads would not pay off).
_THREADS_MIN_VALUES = 1 << 16
# Bands of columns of the upper-triangular products (see _accumulate).  At d = 128
# with 1 MiB blocks, 8 bands of 16 columns measured within noise of 4 of 32.
_MAX_BANDS = 4
_MIN_BAND_WIDTH = 32


@functools.cache
def _per_thread_settings() -> bool:
    """Whether torch's thread count is a per-thread setting (its OpenMP backend).

    The worker threads of :meth:`LatentStatisticsAccumulator.update` each set
    it to one; torch's native backend has one process-wide pool instead.
    """
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


def _plan_blocks(per_class: list[int], work: int) -> list[tuple[int, int, int]]:
    """Blocks ``(class, start, stop)`` of the label-sorted records, at most ``work`` rows.

    Each class's run of ``n_c`` records is cut into ``ceil(n_c / work)``
    blocks of nearly equal height (never a full block plus a sliver), so every
    product covers as many rows as the class allows.
    """
    blocks: list[tuple[int, int, int]] = []
    first = 0
    for c, n_c in enumerate(per_class):
        pieces = -(-n_c // work)
        blocks.extend(
            (c, first + n_c * i // pieces, first + n_c * (i + 1) // pieces) for i in range(pieces)
        )
        first += n_c
    return blocks


class _Schedule:
    """Hands out the block numbers ``0, 1, ...`` in increasing order, to any threads.

    A thread that fails on a block reports it with :meth:`fail`; no block after
    the earliest failed one is handed out any more, and every block before it
    has been (and is finished by its thread), so the earliest failure -- the
    one :meth:`raise_first` raises -- does not depend on the number of threads
    or their timing.
    """

    def __init__(self, count: int) -> None:
        self._next = 0
        self._end = count
        self._errors: dict[int, BaseException] = {}
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            if self._next >= self._end:
                return None
            self._next += 1
            return self._next - 1

    def fail(self, block: int, error: BaseException) -> None:
        with self._lock:
            self._errors[block] = error
            self._end = min(self._end, block)

    def raise_first(self) -> None:
        if self._errors:
            raise self._errors[min(self._errors)]


class _Totals:
    """The int64 totals (packed moments ``(K, d(d+1)/2)``, sums ``(K, d)``) of all threads."""

    def __init__(self, moments: torch.Tensor, sums: torch.Tensor) -> None:
        self.moments = moments
        self.sums = sums
        self._lock = threading.Lock()

    def add(self, c: int, moment: torch.Tensor, column_sum: torch.Tensor) -> None:
        with self._lock:  # two threads may finish blocks of the same class
            self.moments[c] += moment
            self.sums[c] += column_sum


class _BlockSums:
    """One thread's float64 accumulators of ``Σ q qᵀ`` (upper triangle) and ``Σ q``.

    Blocks of at most ``work`` rows are gathered into one reusable buffer
    (:meth:`rows`), quantized there by the caller and added (:meth:`add`); the
    accumulators are rounded into int64 and added to the totals of a class by
    :meth:`flush`, which the caller invokes before :attr:`pending` rows could
    pass ``exact_batch_size`` and when the class changes.

    Args:
        d: Latent dimension.
        work: Most rows of a block.
        packed: Flat indices of the upper triangle of a ``(d, d)`` matrix.
        device: Where the buffers live.
    """

    def __init__(self, d: int, work: int, packed: torch.Tensor, device: torch.device) -> None:
        self._buffer = torch.empty((work, d), dtype=torch.float64, device=device)
        self._gram = torch.zeros((d, d), dtype=torch.float64, device=device)
        self._column_sums = torch.zeros(d, dtype=torch.float64, device=device)
        self._ones = torch.ones(work, dtype=torch.float64, device=device)
        # Column bands of the upper-triangular product: about 3/4 of the full
        # product's work at 2 bands, 5/8 at 4.  Bands narrower than ~32 columns
        # cost more in BLAS efficiency than they save (measured at d=32..256).
        bands = min(_MAX_BANDS, max(1, d // _MIN_BAND_WIDTH))
        self._edges = [round(i * d / bands) for i in range(bands + 1)]
        self._targets = [self._gram[lo:hi, lo:] for lo, hi in itertools.pairwise(self._edges)]
        # Views of the buffer for each block height (a class has at most two).
        self._views: dict[
            int, tuple[torch.Tensor, torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]
        ] = {}
        # The packed upper triangle and int64 images of the accumulators,
        # reused (no allocation per flush).
        self._packed = packed
        self._upper = torch.empty(packed.shape, dtype=torch.float64, device=device)
        self._moment = torch.empty(packed.shape, dtype=torch.int64, device=device)
        self._column_sum = torch.empty(d, dtype=torch.int64, device=device)
        #: Rows added since the last flush.
        self.pending = 0

    def rows(self, m: int) -> torch.Tensor:
        """The buffer's first ``m`` rows, where the caller puts the next block."""
        if m not in self._views:
            rows = self._buffer[:m]
            self._views[m] = (
                rows,
                rows.T,
                [(rows[:, lo:hi].T, rows[:, lo:]) for lo, hi in itertools.pairwise(self._edges)],
            )
        return self._views[m][0]

    def add(self, m: int) -> None:
        """Add the ``m`` quantized rows in the buffer to the accumulators."""
        _, rows_t, operands = self._views[m]
        # Only the upper triangle is kept, so it is all we compute: one
        # product per band of columns (exact: integers below 2**53).
        for target, (left, right) in zip(self._targets, operands, strict=True):
            target.addmm_(left, right)
        self._column_sums.addmv_(rows_t, self._ones[:m])  # exact, like the products
        self.pending += m

    def flush(self, c: int, totals: _Totals) -> None:
        """Add the accumulators to class ``c``'s totals and zero them."""
        # Exact: the accumulators hold integers below 2**53 (rounding them is
        # a no-op, kept as a safeguard); the int64 additions cannot wrap.
        torch.index_select(torch.round_(self._gram).view(-1), 0, self._packed, out=self._upper)
        self._moment.copy_(self._upper)
        self._column_sum.copy_(torch.round_(self._column_sums))
        totals.add(c, self._moment, self._column_sum)
        self._gram.zero_()
        self._column_sums.zero_()
        self.pending = 0


def _as_tensor(name: str, value: object) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    raise ParameterTypeError(name, "a numpy array or torch tensor", value)


class LatentStatisticsAccumulator:
    """Streaming accumulator of exact per-class statistics (constant memory in N).

    Feed batches with :meth:`update`, then call :meth:`result`.  The result is
    the same, bit for bit, however the records are batched.

    Args:
        config: The shared public parameters.
        device: Where the integer accumulators live (``"cpu"``, ``"cuda"``);
            latents are moved there batch by batch.
        batch_size: Largest number of rows grouped, quantized and multiplied
            at once (bounds the working memory).  The engine also caps it at a
            cache-sized working set (1 MiB per thread) and at
            ``config.exact_batch_size``; the result never depends on it.
    """

    def __init__(
        self,
        config: LatentStatisticsConfig,
        *,
        device: str | torch.device = "cpu",
        batch_size: int = 16384,
    ) -> None:
        if not isinstance(config, LatentStatisticsConfig):
            raise ParameterTypeError("config", "a LatentStatisticsConfig", config)
        check_int("batch_size", batch_size, minimum=1, numpy=True)
        self._config = config
        self._device = torch.device(device)
        self._batch = min(int(batch_size), config.exact_batch_size)
        k, d = config.num_classes, config.dim
        self._sums = torch.zeros((k, d), dtype=torch.int64, device=self._device)
        # Packed upper triangles, in the order of LatentStatistics.second_moments.
        self._moments = torch.zeros((k, packed_size(d)), dtype=torch.int64, device=self._device)
        rows, cols = torch.triu_indices(d, d, device=self._device)
        self._packed = rows * d + cols  # their places in a flattened (d, d) matrix
        self._counts = torch.zeros(k, dtype=torch.int64, device=self._device)
        self._records = 0
        self._lock = threading.Lock()  # one update() at a time, see there
        # Screening thresholds of _quantize_ (see "Screening" in the statistics module):
        # a float64 norm of d values is within a relative (d + 1) 2**-53 of the exact
        # one; the slack allows eight times that.
        slack = (d + 8) * 2.0**-50
        if slack < 2.0**-20:
            self._radius_screen = config.clip_norm * (1.0 - slack)
            root = math.sqrt(config.norm_bound_squared) * (1.0 - 2.0**-40)
            self._norm_screen = (
                (root - math.sqrt(d) / 2.0)
                / (math.ldexp(1.0, config.bits) * (1.0 + 2.0 * slack))
                * (1.0 - 2.0**-50)
            )
        else:  # pragma: no cover - dimensions beyond 2**40: every row takes the exact tests
            self._radius_screen = self._norm_screen = -1.0
        self._settled_screen = min(self._radius_screen, self._norm_screen)

    def __repr__(self) -> str:
        return f"LatentStatisticsAccumulator(config={self._config!r}, device={self._device})"

    @property
    def config(self) -> LatentStatisticsConfig:
        """The shared public parameters."""
        return self._config

    def _validate(self, latents: object, labels: object) -> tuple[torch.Tensor, torch.Tensor]:
        z = _as_tensor("latents", latents)
        y = _as_tensor("labels", labels)
        d, k = self._config.dim, self._config.num_classes
        if not z.is_floating_point():
            raise ParameterTypeError("latents", "a floating-point array", latents)
        if z.ndim != 2 or z.shape[1] != d:
            raise ParameterError("latents", f"an array of shape (N, {d})", tuple(z.shape))
        if y.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
            raise ParameterTypeError("labels", "an integer array", labels)
        if tuple(y.shape) != (z.shape[0],):
            raise ParameterError("labels", f"an array of shape ({z.shape[0]},)", tuple(y.shape))
        if y.numel():
            lo, hi = int(y.min()), int(y.max())
            if lo < 0 or hi >= k:
                raise ParameterError("labels", f"class indices in [0, {k})", (lo, hi))
        if self._records + int(z.shape[0]) > self._config.max_records:
            raise RingOverflowError(
                "latents",
                f"at most max_records={self._config.max_records} records in total",
                self._records + int(z.shape[0]),
            )
        return z, y

    def quantize(self, latents: torch.Tensor) -> torch.Tensor:
        """Clip and quantize finite records (see the module docstring).

        Args:
            latents: Finite floating tensor ``(B, d)`` on any device.

        Returns:
            ``int64`` tensor ``(B, d)`` on the accumulator's device with
            ``Σ_j q_j² <= config.norm_bound_squared`` for every row.

        Raises:
            NonFiniteInputError: If a value is NaN or infinite.
        """
        # A fresh float64 copy: quantization works in place and must not touch the input.
        rows = latents.detach().to(device=self._device, dtype=torch.float64, copy=True)
        self._quantize_(rows)
        return rows.to(torch.int64)

    def _quantize_(self, rows: torch.Tensor) -> None:
        """Clip and quantize float64 rows ``(B, d)`` IN PLACE (the module docstring's steps).

        ``rows`` may be a strided view (e.g. the first ``d`` columns of a wider
        buffer).  Afterwards every value is an integer of magnitude at most
        ``R 2**f + 1`` and every row's squared norm is at most ``L``; since
        ``d (R 2**f + 1)**2 <= 2**53`` (checked by the config) float64 holds all
        of them exactly, which saves integer conversions of whole batches.

        The result is that of the exact steps for every row (and a function of
        the row alone).  To save passes over the data, one fused pass computes
        every row's float64 Euclidean norm first, and the two exact tests run
        only on the rows that this norm cannot settle (see "Screening" in
        :mod:`privfed.engines.latent.statistics`): the peak test where the norm
        may exceed ``R``, the integer norm test where ``Σ q_i²`` may exceed
        ``L``.  The common path is three passes: norm, scale, round.

        Args:
            rows: ``float64`` ``(B, d)`` on the accumulator's device, overwritten.

        Raises:
            NonFiniteInputError: If a value is NaN or infinite (``rows`` is then
                unchanged).
        """
        cfg = self._config
        f, radius = cfg.bits, cfg.clip_norm
        scale = math.ldexp(1.0, f)
        norm = torch.linalg.vector_norm(rows, dim=1)
        # The common case in one reduction: no row needs either exact test (a
        # NaN norm makes the maximum NaN, and the comparison false).  No rows:
        # no maximum; the general path below handles them.
        if rows.shape[0] and float(norm.max()) <= self._settled_screen:
            rows.mul_(scale)  # exact: a power of two
            torch.round_(rows)  # half to even
            return
        # NaN-safe: a NaN or infinite norm is suspect too.
        suspect = ~(norm <= self._radius_screen)
        if bool(suspect.any()):
            picked = torch.nonzero(suspect).squeeze(1)
            sub = rows.index_select(0, picked)
            peak = sub.abs().amax(dim=1)  # exact in any order
            if not bool(torch.isfinite(peak).all()):
                raise NonFiniteInputError("latents", count=int((~torch.isfinite(sub)).sum()))
            over = peak > radius
            if bool(over.any()):
                # Scale by R / max|z_i| BEFORE the power-of-two scaling: for finite
                # rows this gives the same bits as scaling afterwards (a power of two
                # commutes with rounding away from overflow and subnormals, and values
                # that small round to zero either way), and rows near the float64
                # maximum cannot overflow to infinity.
                sub[over] *= (radius / peak[over])[:, None]
                rows.index_copy_(0, picked, sub)
        rows.mul_(scale)  # exact: a power of two
        torch.round_(rows)  # half to even
        # Rows whose norm bound proves sum(q_i^2) <= L skip the exact test; the
        # suspect ones (possibly rescaled) never do.
        unsettled = suspect | ~(norm <= self._norm_screen)
        if not bool(unsettled.any()):
            return
        picked = torch.nonzero(unsettled).squeeze(1)
        sub = rows.index_select(0, picked)
        limit = cfg.norm_bound_squared
        # Exact: integers whose squares sum below 2**53, in any order or blocking.
        norms = (sub * sub).sum(dim=1)
        too_long = norms > limit
        if bool(too_long.any()):
            target = math.ldexp(radius, f) * _RECLIP_MARGIN
            factor = target / torch.sqrt(norms[too_long])
            sub[too_long] = torch.trunc(sub[too_long] * factor[:, None])
            check = sub[too_long]
            if bool(((check * check).sum(dim=1) > limit).any()):  # pragma: no cover
                raise RuntimeError("internal error: integer re-clipping failed")
            rows.index_copy_(0, picked, sub)

    def update(self, latents: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor) -> None:
        """Add a batch of records.

        On the CPU the blocks of records (see :func:`_plan_blocks`) of a large
        enough batch are shared by ``torch.get_num_threads()`` threads, each
        running torch single-threaded; the result does not depend on their
        number.

        Args:
            latents: Floating array ``(N, d)`` (numpy or torch, any device).
            labels: Integer array ``(N,)`` with values in ``[0, K)``.

        Raises:
            ParameterTypeError / ParameterError: On bad inputs.
            NonFiniteInputError: If a latent is NaN or infinite.
            RingOverflowError: If the total would exceed ``max_records``.

        A failed call leaves the accumulator unchanged.  Calls from several
        threads are taken one at a time (each commits totals computed from the
        state it started from, so overlapping calls would lose records).
        """
        with self._lock:
            self._update(latents, labels)

    def _update(self, latents: object, labels: object) -> None:
        """The body of :meth:`update`, run under the accumulator's lock."""
        z, y = self._validate(latents, labels)
        n = int(z.shape[0])
        if n == 0:
            return
        k, d = self._config.num_classes, self._config.dim
        source = z.detach()
        yd = y.to(device=self._device, dtype=torch.int64)
        # One stable sort of all the labels (as the narrowest integers that hold
        # them: several times faster than int64, same order); every class's
        # records are then a contiguous run of `order`.
        narrow = torch.uint8 if k <= 256 else torch.int32
        order = torch.argsort(yd.to(narrow), stable=True)
        per_class = torch.bincount(yd, minlength=k)
        index = order if source.device == self._device else order.to(source.device)
        work = min(self._batch, n, max(1, _BLOCK_BYTES // (8 * d)))
        blocks = _plan_blocks(per_class.tolist(), work)
        # CPU threads: at least two blocks each and enough values in all, or
        # starting them is not worth it.
        threads = max(1, min(torch.get_num_threads(), len(blocks) // 2))
        if n * d < _THREADS_MIN_VALUES or not _per_thread_settings():
            threads = 1
        schedule = _Schedule(len(blocks))
        # Work on copies and commit at the end, so that a failure leaves the
        # accumulator unchanged.
        totals = _Totals(self._moments.clone(), self._sums.clone())
        job = functools.partial(self._accumulate, source, index, blocks, work, schedule, totals)
        if threads == 1 or self._device.type != "cpu":
            job()
        else:
            _run_in_threads(job, schedule, threads)
        self._sums, self._moments = totals.sums, totals.moments
        self._counts = self._counts + per_class
        self._records += n

    def _accumulate(
        self,
        source: torch.Tensor,
        index: torch.Tensor,
        blocks: list[tuple[int, int, int]],
        work: int,
        schedule: _Schedule,
        totals: _Totals,
    ) -> None:
        """Add ``(Σ q qᵀ, Σ q)`` of the blocks that ``schedule`` hands out to ``totals``.

        Each block ``(c, start, stop)`` names rows ``index[start:stop]`` of
        ``source``, all of class ``c``.  Blocks come in increasing order, so
        the class never decreases from one block a thread takes to the next and
        one accumulator per thread suffices (flushed when the class changes).
        A failure is reported to the schedule and raised.

        A block is gathered into one reusable contiguous buffer, quantized
        there in place and multiplied into one float64 Gram accumulator (one
        ``addmm`` per band of columns, covering the upper triangle only, and
        exactly ``d`` columns: BLAS runs markedly faster on d = 128 than on
        d + 1 = 129 columns, which a column of ones for the sums would cost)
        and one float64 column-sum accumulator.  These stay float64 while
        provably exact (at most ``exact_batch_size`` rows, see the statistics
        module) and are added to the int64 totals of their class before that
        bound could be passed, and when the class changes.
        """
        device = self._device
        direct = source.dtype == torch.float64 and source.device == device
        sums = _BlockSums(self._config.dim, work, self._packed, device)
        limit = self._config.exact_batch_size
        previous = -1
        while (block := schedule.take()) is not None:
            # Any failure inside a block (bad input, or a KeyboardInterrupt in
            # the calling thread) is reported as that block's, so the other
            # threads stop taking blocks instead of finishing the whole batch.
            try:
                c, start, stop = blocks[block]
                m = stop - start
                if c != previous and sums.pending:
                    sums.flush(previous, totals)
                previous = c
                rows = sums.rows(m)
                if direct:
                    torch.index_select(source, 0, index[start:stop], out=rows)
                else:
                    rows.copy_(torch.index_select(source, 0, index[start:stop]))
                self._quantize_(rows)
                if sums.pending + m > limit:
                    sums.flush(c, totals)
                sums.add(m)
            except BaseException as error:
                schedule.fail(block, error)
                raise
        if sums.pending:
            sums.flush(previous, totals)

    def result(self) -> LatentStatistics:
        """Return the statistics accumulated so far (on the CPU, as numpy ``int64``)."""
        with self._lock:  # not half of a concurrent update()
            return LatentStatistics(
                config=self._config,
                sums=self._sums.cpu().numpy().copy(),
                second_moments=self._moments.cpu().numpy().copy(),
                counts=self._counts.cpu().numpy().copy(),
            )


def compute_latent_statistics(
    latents: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    *,
    num_classes: int,
    clip_norm: float,
    max_records: int = DEFAULT_MAX_RECORDS,
    fractional_bits: int | None = None,
    config: LatentStatisticsConfig | None = None,
    device: str | torch.device = "cpu",
    batch_size: int = 16384,
) -> LatentStatistics:
    """Compute one client's exact per-class statistics.

    Args:
        latents: Floating array ``(N, d)``, numpy or torch on any device; ``N``
            may be 0 (an empty client sends zeros).
        labels: Integer array ``(N,)`` with values in ``[0, num_classes)``.
        num_classes: ``K``; every class appears in the output.
        clip_norm: ``R``, the L2 clipping radius (latent units), finite ``> 0``.
        max_records: Bound on the records of the whole aggregate (all clients).
        fractional_bits: Grid ``2**-f``; ``None`` chooses it from the bounds.
        config: A prepared :class:`LatentStatisticsConfig`; when given it must
            agree with ``num_classes``, ``clip_norm`` and the latent dimension,
            and ``max_records``/``fractional_bits`` are taken from it.
        device: Where to compute (``"cpu"``, ``"cuda"``).
        batch_size: Largest number of rows processed at once (capped for cache
            use and exactness; the result does not depend on it).

    Returns:
        The statistics; bit-identical for any batching, device or split of the
        records into clients (after adding the clients' results).

    Raises:
        ParameterTypeError / ParameterError: On bad inputs.
        NonFiniteInputError: If a latent is NaN or infinite.
        RingOverflowError: If the bounds could let a ring total wrap.
    """
    z = _as_tensor("latents", latents)
    if z.ndim != 2:
        raise ParameterError("latents", "an array of shape (N, d)", tuple(z.shape))
    if config is None:
        config = LatentStatisticsConfig(
            dim=int(z.shape[1]),
            num_classes=num_classes,
            clip_norm=clip_norm,
            max_records=max_records,
            fractional_bits=fractional_bits,
        )
    elif (config.dim, config.num_classes, config.clip_norm) != (
        int(z.shape[1]),
        num_classes,
        float(clip_norm),
    ):
        raise ParameterError(
            "config",
            "a config with the same dim, num_classes and clip_norm as the arguments",
            (config.dim, config.num_classes, config.clip_norm),
        )
    accumulator = LatentStatisticsAccumulator(config, device=device, batch_size=batch_size)
    accumulator.update(z, labels)
    return accumulator.result()


def _run_in_threads(job: Callable[[], None], schedule: _Schedule, threads: int) -> None:
    """Run ``job`` (an accumulator's ``_accumulate``) in ``threads`` threads, this one included.

    CPU only.  The threads take blocks from one shared schedule, so a thread that
    waits for a core (on a machine shared with other work) holds up no
    other.  Each runs torch with one intra-op thread, so together they use
    as many cores as ``torch.get_num_threads()`` allows, without the
    fork/join of a parallel region in every small operation of a block;
    torch's setting is restored afterwards.  The error of the earliest
    failed block is raised (see :class:`_Schedule`).
    """
    previous = torch.get_num_threads()
    crashes: list[BaseException] = []

    def run() -> None:
        torch.set_num_threads(1)  # this thread's intra-op threads only
        try:
            job()
        except BaseException as error:  # raised in the calling thread, below
            crashes.append(error)

    helpers = [threading.Thread(target=run, daemon=True) for _ in range(1, threads)]
    try:
        for helper in helpers:
            helper.start()
        run()
    finally:
        try:
            for helper in helpers:
                if helper.ident is not None:  # started
                    helper.join()
        except BaseException as error:  # e.g. Ctrl-C while waiting: stop the helpers
            schedule.fail(-1, error)
            raise
        finally:
            # Restored even then; set_num_threads also sets the default of
            # threads started later.
            torch.set_num_threads(previous)
    schedule.raise_first()  # the earliest failed block's error, if any
    if crashes:  # pragma: no cover - a failure outside every block
        raise crashes[0]
