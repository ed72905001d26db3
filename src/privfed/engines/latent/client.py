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
        work = min(self._batch, n, max(1, _WORK_BYTES // (8 * d)))
        source = z.detach()
        direct = source.dtype == torch.float64 and source.device == self._device
        yd = y.to(device=self._device, dtype=torch.int64)
        # Class by class: one stable sort of all the labels; each class's rows are
        # then gathered, a cache-sized block at a time, into one reusable
        # contiguous buffer, quantized there in place, multiplied into one
        # float64 Gram accumulator and summed into one float64 sum accumulator.
        # The input is read from memory once, and every product covers as many
        # rows as the buffer holds (and exactly d columns: BLAS runs markedly
        # faster on d = 128 than on d + 1 = 129 columns, which a column of ones
        # for the sums would cost).
        # (Sorting the labels as the narrowest integers that hold them is several
        # times faster than as int64; the order is the same.)
        narrow = torch.uint8 if k <= 256 else torch.int32
        order = torch.argsort(yd.to(narrow), stable=True)
        per_class = torch.bincount(yd, minlength=k)
        index = order if source.device == self._device else order.to(source.device)
        grouped = torch.empty((work, d), dtype=torch.float64, device=self._device)
        # Work on copies and commit at the end, so that a failure leaves the
        # accumulator unchanged.  Only the upper triangle of the moments is
        # maintained (the lower one stays zero); result() reads nothing else.
        sums = self._sums.clone()
        moments = self._moments.clone()
        counts = self._counts + per_class
        # The float64 sums stay there while provably exact (at most
        # exact_batch_size rows, see the module docstring) and are moved to int64
        # before that bound could be passed, and at the end of every class.
        gram = torch.zeros((d, d), dtype=torch.float64, device=self._device)
        column_sums = torch.zeros(d, dtype=torch.float64, device=self._device)
        ones = torch.ones(work, dtype=torch.float64, device=self._device)
        limit = cfg.exact_batch_size
        # Column bands of the upper-triangular product: about 3/4 of the full
        # product's work at 2 bands, 5/8 at 4.  Bands narrower than ~32 columns
        # cost more in BLAS efficiency than they save (measured at d=32..256).
        bands = min(4, max(1, d // 32))
        edges = [round(i * d / bands) for i in range(bands + 1)]
        spans = list(itertools.pairwise(edges))

        def flush(c: int) -> None:
            moments[c] += torch.round(gram).to(torch.int64)
            sums[c] += torch.round(column_sums).to(torch.int64)
            gram.zero_()
            column_sums.zero_()

        first = 0
        for c, n_c in enumerate(per_class.tolist()):
            pending = 0
            for start in range(first, first + n_c, work):
                stop = min(start + work, first + n_c)
                m = stop - start
                rows = grouped[:m]
                if direct:
                    torch.index_select(source, 0, index[start:stop], out=rows)
                else:
                    rows.copy_(torch.index_select(source, 0, index[start:stop]))
                self._quantize_(rows)
                if pending + m > limit:
                    flush(c)
                    pending = 0
                # Only the upper triangle is kept, so it is all we compute: one
                # product per band of columns (exact: integers below 2**53).
                for lo, hi in spans:
                    gram[lo:hi, lo:].addmm_(rows[:, lo:hi].T, rows[:, lo:])
                column_sums.addmv_(rows.T, ones[:m])  # exact, like the products
                pending += m
            if pending:
                flush(c)
            first += n_c
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
