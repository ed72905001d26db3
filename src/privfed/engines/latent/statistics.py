"""Exact fixed-point per-class latent statistics: the shared specification and the value type.

This module is numpy-only, so a server that only sums ring vectors, decodes them
and releases them never imports torch; the client-side computation (torch) is
:mod:`privfed.engines.latent.client`.

A client holding latents ``z`` (one row per record) and labels computes, for
every class ``c`` of ``K``:

* ``m_c = Σ q``          (``d`` integers, grid step ``2**-f``),
* ``M_c = Σ q qᵀ``       (packed upper triangle, ``d(d+1)/2`` integers, step ``2**-2f``),
* ``n_c``                (one integer),

where ``q`` is the record's clipped latent quantized to the grid ``2**-f``.
Every client sends every class (zeros where it has no records), so the payload
has the same layout everywhere: ``d + d(d+1)/2 + 1`` values per class.

Exactness.  The quantization is a function of the record alone and everything
after it is integer arithmetic, so the statistics of any partition of the same
records over any number of clients add up to a BIT-IDENTICAL total.  This is
what makes the aggregate invariant to heterogeneity and client count.

Per-record clipping and quantization (all steps deterministic per record,
independent of batching, device and summation order):

1. If ``max_i |z_i| > R`` the record is scaled by ``R / max_i |z_i|`` (a max is
   exact in any order), so every coordinate is at most ``R``.
2. ``q = rint(z * 2**f)`` (round half to even) as ``int64``.
3. ``s = Σ q_i²`` is computed exactly in ``int64``.  If ``s > L`` with
   ``L = floor((R 2**f)²)``, the record is scaled by
   ``c = (1 - 2**-40) R 2**f / sqrt(s)`` and truncated toward zero.  IEEE
   arithmetic makes ``c`` exceed the exact ratio by at most a few ulps, far
   below the ``2**-40`` margin, and truncation never increases a magnitude, so
   afterwards ``Σ q_i² < (R 2**f)²`` and hence ``<= L``.  This is re-checked
   exactly; the sensitivity analysis therefore holds for the quantized values:
   ``‖q / 2**f‖ <= R`` exactly.

Screening.  The two exact tests above (the peak in step 1, the integer norm in
step 3) run only on the rows that one fused float64 pass cannot settle: the
row's Euclidean norm ``n``, which is within a relative ``(d + 1) 2**-53`` of
the exact norm (the client allows eight times that, ``e``).  A row with
``n <= R (1 - e)`` has ``max_i |z_i| <= ‖z‖ <= R``, so step 1 leaves it alone;
for such a row ``‖q‖ <= ‖z‖ 2**f + sqrt(d) / 2`` (rounding moves each
coordinate by at most a half), so ``n 2**f (1 + 2 e) + sqrt(d) / 2 <=
sqrt(L) (1 - 2**-40)`` proves ``Σ q_i² <= L`` and step 3 leaves it alone too.
Every other row (including NaN and infinite norms) takes the exact tests.
Squares that underflow make ``n`` smaller only by about ``sqrt(d) 2**-511``,
far inside both margins (``R >= 2**-60`` by the grid check below).  The
screen therefore only decides which rows need the exact tests, never their
outcome: the quantized rows are those of the exact steps, bit for bit.

Second moments by matrix products.  The labels are sorted once (stably) and
the records processed class by class: a cache-sized block of one class's rows
is gathered into a reused buffer, quantized in place, and added to a
``float64`` accumulator as ``Qᵀ Q`` (one ``addmm`` per band of columns,
covering the upper triangle only, which is all that is kept) and to a
``float64`` column-sum accumulator (the sums ``m_c``; the counts come from
the labels).  Every term ``q_i q_j`` satisfies ``|q_i q_j| <= ‖q‖² <= L``
(and ``|q_i| <= L``, ``1 <= L``), so after ``B`` rows every partial sum, in
whatever order, blocking and with or without fused multiply-add, is an
integer of magnitude at most ``B L``.  The accumulators take at most
``floor(2**53 / L)`` rows before they are rounded into ``int64`` and
restarted (and are flushed at the end of every class), so every intermediate
is an integer of magnitude at most ``2**53`` and hence exactly representable:
the accumulation is exact.  The ``int64`` additions are exact because all
totals are bounded (below).

Ring bounds.  The ring is ``Z_{2**64}`` read as signed ``int64``.  With at
most ``max_records`` records in the aggregate over all clients, the largest
total is ``max_records * L`` for the second moments, ``max_records * R 2**f``
for the sums and ``max_records`` for the counts.  The configuration is checked
at construction with :func:`privfed.secagg.primitives.fixedpoint.check_no_wraparound`
(the check of the fixed-point encoder, which refuses anything that could
wrap), and an aggregate whose count total exceeds ``max_records`` is refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privfed._checks import check_float, check_int
from privfed.errors import (
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)
from privfed.secagg.primitives.fixedpoint import FixedPointConfig, check_no_wraparound

__all__ = [
    "DEFAULT_MAX_RECORDS",
    "LatentStatistics",
    "LatentStatisticsConfig",
    "packed_size",
    "unpack_symmetric",
]

#: Default bound on the number of records in one aggregate (over all clients): 2**20.
DEFAULT_MAX_RECORDS = 1 << 20

# Exactness limit of float64 integers.
_FLOAT64_EXACT = 1 << 53
# The automatic choice of fractional bits keeps L = (R 2**f)**2 <= 2**34.  Then
# exact float64 batches of 2**19 records are possible, and a server adding
# rounded Gaussian noise on the grid stays within the integer samplers' range
# (std <= 2**40 grid units) for second-moment noise up to 64 R**2.
_AUTO_NORM_BOUND = 1 << 34
# Largest number of fractional bits chosen automatically (2**-24 is far below any noise).
_MAX_AUTO_FRACTIONAL_BITS = 24
# Relative safety margin of the integer re-clipping step (see the module docstring).
_RECLIP_MARGIN = 1.0 - 2.0**-40
_RING_BITS = 64
# Bytes of the reusable buffer of grouped rows.  A few MiB keeps the gather, the
# in-place quantization and the products within the cache (measured at d=128:
# 2048-4096 rows beat 16384 by about 20%; 1-8 MiB within noise of each other
# since the rows are gathered class by class); results never depend on it.
_WORK_BYTES = 1 << 22


def packed_size(dim: int) -> int:
    """Number of entries of the packed upper triangle (with diagonal): ``d(d+1)/2``."""
    return dim * (dim + 1) // 2


def _norm_bound_squared(clip_norm: float, fractional_bits: int) -> int:
    """``floor((R * 2**f)**2)`` computed exactly."""
    scaled = Fraction(clip_norm) * (1 << fractional_bits)
    return math.floor(scaled * scaled)


def _auto_fractional_bits(clip_norm: float, max_records: int) -> int:
    """The largest ``f <= 24`` satisfying both the ring and the batch-exactness bounds."""
    for f in range(_MAX_AUTO_FRACTIONAL_BITS, -1, -1):
        bound = _norm_bound_squared(clip_norm, f)
        if bound > _AUTO_NORM_BOUND:
            continue
        if max_records * (bound + 2) < (1 << (_RING_BITS - 1)):
            return f
    raise RingOverflowError(
        "(clip_norm, max_records)",
        "bounds that leave at least one fractional bit without wrap-around",
        (clip_norm, max_records),
        detail="lower max_records or clip_norm",
    )


@dataclass(frozen=True)
class LatentStatisticsConfig:
    """Public parameters every client and the server must share.

    Attributes:
        dim: Latent dimension ``d >= 1``.
        num_classes: Number of classes ``K >= 1``.
        clip_norm: Clipping radius ``R`` (L2 norm, latent units), finite ``> 0``.
            Choose it without looking at private data.
        max_records: Upper bound on the number of records in one aggregate, over
            all clients together (``>= 1``).  Part of the wrap-around proof.
        fractional_bits: ``f``: latents live on the grid ``2**-f``.  ``None``
            (default) picks the largest ``f <= 24`` with ``(R 2**f)**2 <= 2**34``
            for which the ring cannot wrap (exact batches of 2**19 records, and
            grid noise in range for second-moment noise stds up to ``64 R²``).

    Raises:
        ParameterError: On a bad value.
        RingOverflowError: If the bounds let some ring total wrap, or single
            products exceed the float64-exact range.
    """

    dim: int
    num_classes: int
    clip_norm: float
    max_records: int = DEFAULT_MAX_RECORDS
    fractional_bits: int | None = None

    def __post_init__(self) -> None:
        check_int("dim", self.dim, minimum=1, numpy=True)
        check_int("num_classes", self.num_classes, minimum=1, numpy=True)
        check_int("max_records", self.max_records, minimum=1, numpy=True)
        radius = check_float("clip_norm", self.clip_norm, low=0, open_low=True, expected="a float")
        object.__setattr__(self, "clip_norm", radius)
        if self.fractional_bits is None:
            f = _auto_fractional_bits(self.clip_norm, self.max_records)
        else:
            f = check_int("fractional_bits", self.fractional_bits, minimum=0, numpy=True)
            if f > 60:
                raise ParameterError("fractional_bits", "an int in [0, 60]", f)
        bound = _norm_bound_squared(self.clip_norm, f)
        if bound == 0:
            raise ParameterError(
                "fractional_bits", "large enough that R * 2**f >= 1", f, detail="grid too coarse"
            )
        coordinate = math.ceil(Fraction(self.clip_norm) * (1 << f)) + 1
        if self.dim * coordinate * coordinate > _FLOAT64_EXACT:
            raise RingOverflowError(
                "fractional_bits",
                "small enough that dim * (clip_norm * 2**f + 1)**2 <= 2**53",
                f,
                detail="squared norms would not be exact in float64",
            )
        # The fixed-point encoder's own wrap-around check proves (and refuses
        # otherwise) that no total of max_records summands can wrap the ring:
        # first moments have magnitude <= R on the grid 2**-f, second moments
        # <= L * 2**-2f on the grid 2**-2f.
        check_no_wraparound(f, self.clip_norm, self.max_records, _RING_BITS)
        second_moment_bound = float(Fraction(bound, 1 << (2 * f)))
        check_no_wraparound(2 * f, second_moment_bound, self.max_records, _RING_BITS)
        object.__setattr__(self, "fractional_bits", f)

    @property
    def bits(self) -> int:
        """The resolved number of fractional bits ``f``."""
        if self.fractional_bits is None:  # pragma: no cover - resolved in __post_init__
            raise RuntimeError("unresolved fractional_bits")
        return self.fractional_bits

    @property
    def norm_bound_squared(self) -> int:
        """``L = floor((R 2**f)**2)``: exact bound on ``Σ q_i²`` of one record."""
        return _norm_bound_squared(self.clip_norm, self.bits)

    @property
    def exact_batch_size(self) -> int:
        """Largest batch whose float64 second-moment product is provably exact."""
        return max(1, _FLOAT64_EXACT // self.norm_bound_squared)

    @property
    def values_per_class(self) -> int:
        """``d + d(d+1)/2 + 1``: ring values sent per class."""
        return self.dim + packed_size(self.dim) + 1

    @property
    def num_values(self) -> int:
        """Ring values in one client's payload: ``K * values_per_class``."""
        return self.num_classes * self.values_per_class

    @property
    def payload_bytes(self) -> int:
        """Bytes of one client's payload on the wire: 8 per ring value (``Z_{2**64}``)."""
        return self.num_values * (_RING_BITS // 8)

    def payload_bytes_at(self, bytes_per_value: int) -> int:
        """Payload size if every value took ``bytes_per_value`` bytes (e.g. 4 as in the paper)."""
        return self.num_values * check_int(
            "bytes_per_value", bytes_per_value, minimum=1, numpy=True
        )


@dataclass(frozen=True, eq=False)
class LatentStatistics:
    """Exact integer per-class statistics of some set of records.

    Attributes:
        config: The shared public parameters.
        sums: ``int64`` ``(K, d)``: ``Σ q`` per class, in grid units ``2**-f``.
        second_moments: ``int64`` ``(K, d(d+1)/2)``: packed upper triangle
            (row-major, diagonal included) of ``Σ q qᵀ``, in units ``2**-2f``.
        counts: ``int64`` ``(K,)``: records per class.

    Equality (``==``) is exact, bit for bit.  The repr shows shapes only: the
    values are a client's unmasked statistics and never belong in logs.
    """

    config: LatentStatisticsConfig
    sums: np.ndarray
    second_moments: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        cfg = self.config
        if not isinstance(cfg, LatentStatisticsConfig):
            raise ParameterTypeError("config", "a LatentStatisticsConfig", cfg)
        k, d = cfg.num_classes, cfg.dim
        for name, arr, shape in (
            ("sums", self.sums, (k, d)),
            ("second_moments", self.second_moments, (k, packed_size(d))),
            ("counts", self.counts, (k,)),
        ):
            if not isinstance(arr, np.ndarray) or arr.dtype != np.int64:
                raise ParameterTypeError(name, "a numpy int64 array", arr)
            if arr.shape != shape:
                raise ParameterError(name, f"an array of shape {shape}", arr.shape)
        if self.counts.size and int(self.counts.min()) < 0:
            raise ParameterError("counts", "non-negative counts", None, secret=True)
        if int(self.counts.sum()) > cfg.max_records:
            raise RingOverflowError(
                "counts",
                f"a total of at most max_records={cfg.max_records}",
                int(self.counts.sum()),
                detail="the ring totals may have wrapped",
            )
        for name in ("sums", "second_moments", "counts"):
            view = getattr(self, name).view()
            view.setflags(write=False)
            object.__setattr__(self, name, view)

    def __repr__(self) -> str:
        cfg = self.config
        return (
            f"LatentStatistics(dim={cfg.dim}, num_classes={cfg.num_classes}, "
            f"clip_norm={cfg.clip_norm!r}, fractional_bits={cfg.bits}, values=<redacted>)"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LatentStatistics):
            return NotImplemented
        return (
            self.config == other.config
            and np.array_equal(self.sums, other.sums)
            and np.array_equal(self.second_moments, other.second_moments)
            and np.array_equal(self.counts, other.counts)
        )

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: LatentStatistics) -> LatentStatistics:
        """Exact sum of two clients' statistics (same config required)."""
        if not isinstance(other, LatentStatistics):
            return NotImplemented
        if other.config != self.config:
            raise ParameterError("other", "statistics with the same config", other.config)
        return LatentStatistics(
            config=self.config,
            sums=self.sums + other.sums,
            second_moments=self.second_moments + other.second_moments,
            counts=self.counts + other.counts,
        )

    @classmethod
    def zeros(cls, config: LatentStatisticsConfig) -> LatentStatistics:
        """The statistics of no records (what an empty client sends)."""
        k, d = config.num_classes, config.dim
        return cls(
            config=config,
            sums=np.zeros((k, d), dtype=np.int64),
            second_moments=np.zeros((k, packed_size(d)), dtype=np.int64),
            counts=np.zeros(k, dtype=np.int64),
        )

    @property
    def total_records(self) -> int:
        """Number of records summarised."""
        return int(self.counts.sum())

    def _ring(self, fractional_bits: int) -> FixedPointConfig:
        # max_abs_value only sizes the wrap proof; the validated config already passed it.
        bound = self.config.norm_bound_squared
        return FixedPointConfig(
            fractional_bits,
            float(Fraction(bound, 1 << (2 * self.config.bits))),
            self.config.max_records,
            _RING_BITS,
        )

    def to_ring_vector(self) -> np.ndarray:
        """Flatten to the secure-aggregation payload: ``uint64`` in ``Z_{2**64}``.

        Layout: for each class in order, ``[sums (d), packed second moments
        (d(d+1)/2), count (1)]``; signed values in two's complement.  Length
        ``config.num_values``.
        """
        blocks = np.concatenate(
            [self.sums, self.second_moments, self.counts[:, None]], axis=1
        ).reshape(-1)
        return self._ring(2 * self.config.bits).to_ring(blocks)

    @classmethod
    def from_ring_vector(
        cls, vector: np.ndarray, config: LatentStatisticsConfig
    ) -> LatentStatistics:
        """Read a (summed) ring vector back into statistics.

        Args:
            vector: ``uint64`` of length ``config.num_values`` in ``Z_{2**64}``,
                e.g. the output of secure aggregation.
            config: The shared public parameters.

        Raises:
            ParameterError: On a wrong length or dtype.
            RingOverflowError: If the decoded counts exceed ``max_records``
                (then the totals may have wrapped and are meaningless).
        """
        if not isinstance(config, LatentStatisticsConfig):
            raise ParameterTypeError("config", "a LatentStatisticsConfig", config)
        arr = np.asarray(vector)
        if arr.dtype.kind not in "iu":
            raise ParameterTypeError("vector", "an integer (uint64) array", vector)
        if arr.shape != (config.num_values,):
            raise ParameterError("vector", f"an array of shape ({config.num_values},)", arr.shape)
        ring = cls.zeros(config)._ring(2 * config.bits)
        signed = ring.from_ring(arr).reshape(config.num_classes, config.values_per_class)
        d = config.dim
        return cls(
            config=config,
            sums=np.ascontiguousarray(signed[:, :d]),
            second_moments=np.ascontiguousarray(signed[:, d : d + packed_size(d)]),
            counts=np.ascontiguousarray(signed[:, -1]),
        )

    def sums_float(self) -> np.ndarray:
        """``float64`` ``(K, d)``: the per-class sums in latent units."""
        return np.ldexp(self.sums.astype(np.float64), -self.config.bits)

    def second_moment_matrices(self) -> np.ndarray:
        """``float64`` ``(K, d, d)``: the symmetric per-class ``Σ z zᵀ`` in latent units²."""
        packed = np.ldexp(self.second_moments.astype(np.float64), -2 * self.config.bits)
        return unpack_symmetric(packed, self.config.dim)

    def iter_classes(self) -> Iterator[tuple[int, np.ndarray, np.ndarray, int]]:
        """Yield ``(class, sum (d,), second moment (d, d), count)`` in latent units."""
        sums, moments = self.sums_float(), self.second_moment_matrices()
        for c in range(self.config.num_classes):
            yield c, sums[c], moments[c], int(self.counts[c])


def unpack_symmetric(packed: np.ndarray, dim: int) -> np.ndarray:
    """Unpack ``(..., d(d+1)/2)`` row-major upper triangles into symmetric ``(..., d, d)``."""
    arr = np.asarray(packed)
    if arr.shape[-1] != packed_size(dim):
        raise ParameterError("packed", f"last axis of length {packed_size(dim)}", arr.shape)
    rows, cols = np.triu_indices(dim)
    out: np.ndarray[Any, Any] = np.zeros((*arr.shape[:-1], dim, dim), dtype=arr.dtype)
    out[..., rows, cols] = arr
    out[..., cols, rows] = arr
    return out
