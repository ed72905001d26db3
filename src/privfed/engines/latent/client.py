"""Client side of the latent-statistic engine: exact fixed-point statistics in torch.

:class:`LatentStatisticsAccumulator` and :func:`compute_latent_statistics` clip,
quantize and sum a client's latents exactly as described in
:mod:`privfed.engines.latent.statistics` (which holds the shared specification
:class:`~privfed.engines.latent.statistics.LatentStatisticsConfig` and the
numpy value type :class:`~privfed.engines.latent.statistics.LatentStatistics`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from privfed._checks import check_int
from privfed.engines.latent.statistics import (
    _GRAM_BYTES,
    _RECLIP_MARGIN,
    _WORK_BYTES,
    DEFAULT_MAX_RECORDS,
    LatentStatistics,
    LatentStatisticsConfig,
)
from privfed.errors import (
    NonFiniteInputError,
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)

__all__ = ["LatentStatisticsAccumulator", "compute_latent_statistics"]


def _peaks(rows: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """``max_i |rows_i|`` per row of a float64 ``(B, d)`` tensor (exact in any order).

    Raises:
        NonFiniteInputError: If a value is NaN or infinite (NaN propagates
            through the max and inf stays inf, so the peaks tell).
    """
    peak = torch.abs(rows, out=scratch).amax(dim=1)
    if not bool(torch.isfinite(peak).all()):
        raise NonFiniteInputError("latents", count=int((~torch.isfinite(rows)).sum()))
    return peak


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
            cache-sized working set (a few MiB) and at
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
        self._moments = torch.zeros((k, d, d), dtype=torch.int64, device=self._device)
        self._counts = torch.zeros(k, dtype=torch.int64, device=self._device)
        self._records = 0

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

    def _quantize_(
        self,
        rows: torch.Tensor,
        scratch: torch.Tensor | None = None,
        peak: torch.Tensor | None = None,
    ) -> None:
        """Clip and quantize float64 rows ``(B, d)`` IN PLACE (the module docstring's steps).

        ``rows`` may be a strided view (e.g. the first ``d`` columns of a wider
        buffer).  Afterwards every value is an integer of magnitude at most
        ``R 2**f + 1`` and every row's squared norm is at most ``L``; since
        ``d (R 2**f + 1)**2 <= 2**53`` (checked by the config) float64 holds all
        of them exactly, which saves integer conversions of whole batches.

        Each step is a function of the row alone, so the result does not depend
        on which other rows share the call.  The common path (no row needs
        clipping) costs four cache-resident passes: max-abs, scale, round and
        squared norm.

        Args:
            rows: ``float64`` ``(B, d)`` on the accumulator's device, overwritten.
            scratch: Optional ``float64`` buffer of at least ``B`` rows and
                ``d`` columns on the same device, reused for temporaries.
            peak: Optional ``float64`` ``(B,)``: ``max_i |rows_i|`` per row,
                already computed by the caller (and checked finite by it).

        Raises:
            NonFiniteInputError: If a value is NaN or infinite (``rows`` is then
                unchanged).
        """
        cfg = self._config
        f, radius = cfg.bits, cfg.clip_norm
        tmp = torch.empty_like(rows) if scratch is None else scratch[: rows.shape[0]]
        if peak is None:
            peak = _peaks(rows, tmp)
        over = peak > radius
        if bool(over.any()):
            # Scale by R / max|z_i| BEFORE the power-of-two scaling: for finite rows
            # this gives the same bits as scaling afterwards (a power of two commutes
            # with rounding away from overflow and subnormals, and values that small
            # round to zero either way), and rows near the float64 maximum cannot
            # overflow to infinity.
            rows[over] *= (radius / peak[over])[:, None]
        rows.mul_(math.ldexp(1.0, f))  # exact: a power of two
        torch.round_(rows)  # half to even
        limit = cfg.norm_bound_squared
        # Exact: integers whose squares sum below 2**53, in any order or blocking.
        norms = torch.mul(rows, rows, out=tmp).sum(dim=1)
        too_long = norms > limit
        if bool(too_long.any()):
            target = math.ldexp(radius, f) * _RECLIP_MARGIN
            scale = target / torch.sqrt(norms[too_long])
            rows[too_long] = torch.trunc(rows[too_long] * scale[:, None])
            check = rows[too_long]
            if bool(((check * check).sum(dim=1) > limit).any()):  # pragma: no cover
                raise RuntimeError("internal error: integer re-clipping failed")

    def update(self, latents: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor) -> None:
        """Add a batch of records.

        Args:
            latents: Floating array ``(N, d)`` (numpy or torch, any device).
            labels: Integer array ``(N,)`` with values in ``[0, K)``.

        Raises:
            ParameterTypeError / ParameterError: On bad inputs.
            NonFiniteInputError: If a latent is NaN or infinite.
            RingOverflowError: If the total would exceed ``max_records``.

        A failed call leaves the accumulator unchanged.
        """
        z, y = self._validate(latents, labels)
        n = int(z.shape[0])
        if n == 0:
            return
        cfg = self._config
        k, d = cfg.num_classes, cfg.dim
        work = min(self._batch, n, max(1, _WORK_BYTES // (8 * (d + 1))))
        # One reusable buffer of rows grouped by class, with a trailing column of
        # ones: the Gram product of a class's rows then also yields its sums (last
        # column) and count (last entry).  Reusing a cache-sized buffer keeps the
        # gather, the in-place quantization and the product in cache: the input
        # is read from memory once.  The ones column is written once, the gather
        # fills the rest.
        grouped = torch.empty((work, d + 1), dtype=torch.float64, device=self._device)
        grouped[:, d] = 1.0
        scratch = torch.empty((work, d), dtype=torch.float64, device=self._device)
        # Work on copies and commit at the end, so that a failure leaves the
        # accumulator unchanged.  Only the upper triangle of the moments is
        # maintained (the lower one stays zero); result() reads nothing else.
        sums = self._sums.clone()
        moments = self._moments.clone()
        counts = self._counts.clone()
        # Per-class Gram sums stay in float64 while provably exact (at most
        # exact_batch_size rows each, see the module docstring) and are moved to
        # int64 before that bound could be passed.  With very many classes one
        # accumulator is shared and flushed after every block instead, so that
        # memory stays at two copies of the moments as before.
        keep = k * (d + 1) * (d + 1) * 8 <= _GRAM_BYTES
        gram = torch.zeros(
            (k if keep else 1, d + 1, d + 1), dtype=torch.float64, device=self._device
        )
        pending = [0] * k
        limit = cfg.exact_batch_size
        # Column bands of the upper-triangular product: about 3/4 of the full
        # product's work at 2 bands, 5/8 at 4.  Bands narrower than ~32 columns
        # cost more in BLAS efficiency than they save (measured at d=32..256).
        bands = min(4, max(1, (d + 1) // 32))
        edges = [round(i * (d + 1) / bands) for i in range(bands + 1)]
        spans = list(itertools.pairwise(edges))

        def flush(c: int) -> None:
            slot = gram[c if keep else 0]
            exact = torch.round(slot).to(torch.int64)
            moments[c] += exact[:d, :d]
            sums[c] += exact[:d, d]  # the column of ones (upper triangle)
            slot.zero_()
            pending[c] = 0

        for start in range(0, n, work):
            stop = min(start + work, n)
            m = stop - start
            yb = y[start:stop].to(device=self._device, dtype=torch.int64)
            zb = z[start:stop].detach().to(device=self._device, dtype=torch.float64)
            # The per-row peaks are taken in input order: this streams the input
            # through the cache once, so the gather below reads from the cache.
            peak = _peaks(zb, scratch[:m])
            # Group the rows by class: one stable sort of the labels, one gather.
            order = torch.argsort(yb, stable=True)
            rows = grouped[:m]
            torch.index_select(zb, 0, order, out=rows[:, :d])
            self._quantize_(rows[:, :d], scratch, peak[order])
            per_class = torch.bincount(yb, minlength=k)
            counts += per_class
            first = 0
            for c, n_c in enumerate(per_class.tolist()):
                if n_c:
                    if pending[c] + n_c > limit:
                        flush(c)
                    block = rows[first : first + n_c]
                    upper = gram[c if keep else 0]
                    # Only the upper triangle is kept, so it is all we compute: one
                    # product per band of columns (exact: integers below 2**53).
                    for lo, hi in spans:
                        upper[lo:hi, lo:].addmm_(block[:, lo:hi].T, block[:, lo:])
                    pending[c] += n_c
                    if not keep:
                        flush(c)
                first += n_c
        for c in range(k):
            if pending[c]:
                flush(c)
        self._sums, self._moments, self._counts = sums, moments, counts
        self._records += n

    def result(self) -> LatentStatistics:
        """Return the statistics accumulated so far (on the CPU, as numpy ``int64``)."""
        rows, cols = np.triu_indices(self._config.dim)
        full = self._moments.cpu().numpy()
        return LatentStatistics(
            config=self._config,
            sums=self._sums.cpu().numpy().copy(),
            second_moments=np.ascontiguousarray(full[:, rows, cols]),
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
