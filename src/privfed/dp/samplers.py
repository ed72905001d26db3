"""Exact integer samplers for distributed DP, driven by a ChaCha20 CSPRNG.

Each client of a distributed release adds integer noise to its integer
(fixed-point) input before masking (:mod:`privfed.dp.distributed` accounts
it).  The samplers here draw that noise *exactly*:

* the discrete Gaussian :func:`exact_discrete_gaussian` (``N_Z(0, σ²)``);
* the Poisson :func:`exact_poisson` and the symmetric Skellam
  :func:`skellam_noise` (a difference of two Poisson draws).

Both are rejection samplers from an integer histogram envelope with exact
Bernoulli factories (see the notes on the histogram sampler below): no
floating-point value enters the law and the support is unbounded.  The float
samplers are in :mod:`privfed.dp.noise`; the streams here are its ChaCha20
keystreams, keyed by :func:`privfed.dp.noise.stream_key` under this module's own
domain.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from privfed._checks import check_float
from privfed.dp.noise import Seed, _KeyStream, check_shape
from privfed.errors import ParameterError

__all__ = [
    "EXACT_DISCRETE_GAUSSIAN_SAMPLER",
    "MAX_EXACT_DISCRETE_GAUSSIAN_SCALE",
    "MAX_POISSON_MEAN",
    "MIN_EXACT_DISCRETE_GAUSSIAN_SCALE",
    "MIN_POISSON_MEAN",
    "SKELLAM_SAMPLER",
    "exact_discrete_gaussian",
    "exact_poisson",
    "skellam_noise",
]

#: Sampler names to record in a ledger.
EXACT_DISCRETE_GAUSSIAN_SAMPLER: Final = "chacha20-exact-discrete-gaussian"
SKELLAM_SAMPLER: Final = "chacha20-exact-skellam"

#: Domain of the exact discrete Gaussian sampler's σ (grid units).  The upper
#: end bounds its lookup table (about 8σ entries); use a coarser grid beyond it.
MIN_EXACT_DISCRETE_GAUSSIAN_SCALE: Final = 2.0**-4
MAX_EXACT_DISCRETE_GAUSSIAN_SCALE: Final = 2.0**15
#: Domain of the exact Poisson sampler's mean (its table holds about 16√λ entries).
MIN_POISSON_MEAN: Final = 2.0**-30
MAX_POISSON_MEAN: Final = 2.0**30

#: The key-derivation domain of the streams (unchanged since the samplers lived in
#: :mod:`privfed.dp.distributed`: the same seed draws the same noise).
_DOMAIN = b"privfed.dp.distributed/v1/"
_U: Final = 2.0**-53  # unit roundoff of IEEE-754 binary64
_TINY: Final = 2.0**-900  # table weights below this are left to the tails
_UINT64_MAX: Final = np.uint64(np.iinfo(np.uint64).max)


# =========================================================================================
# The CSPRNG source and exact Bernoulli primitives
# =========================================================================================


class _Source(_KeyStream):
    """A ChaCha20 keystream (fresh 256-bit key per stream) with exact uniform integers."""

    __slots__ = ()

    def __init__(self, label: bytes, seed: Seed | None) -> None:
        super().__init__(label, seed, _DOMAIN)

    def words(self, count: int) -> npt.NDArray[np.uint64]:
        data = self.raw(8 * count)
        return np.frombuffer(data, dtype="<u8").astype(np.uint64, copy=True)

    def below(self, bounds: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """One exact uniform integer in ``[0, b)`` for each ``b >= 1`` of ``bounds``.

        Rejection sampling on 64-bit words: a word ``w`` is kept when it lies in
        the largest multiple of ``b`` below ``2**64``, then reduced mod ``b``.
        """
        out = np.empty(bounds.shape[0], dtype=np.uint64)
        rem = (_UINT64_MAX - bounds + np.uint64(1)) % bounds  # 2**64 mod b
        limit = _UINT64_MAX - rem
        pending = np.arange(bounds.shape[0])
        while pending.size:
            w = self.words(pending.size)
            ok = w <= limit[pending]
            out[pending[ok]] = w[ok] % bounds[pending[ok]]
            pending = pending[~ok]
        return out

    def below_int(self, bound: int) -> int:
        """An exact uniform Python int in ``[0, bound)`` (``bound >= 1``)."""
        bits = (bound - 1).bit_length()
        if bits == 0:
            return 0
        nbytes = (bits + 7) // 8
        shift = 8 * nbytes - bits
        while True:
            value = int.from_bytes(self.raw(nbytes), "big") >> shift
            if value < bound:
                return value

    def bernoulli(self, num: int, den: int) -> bool:
        """Exact ``Bernoulli(num/den)`` for integers ``0 <= num <= den``, ``den >= 1``."""
        if num <= 0:
            return False
        if num >= den:
            return True
        return self.below_int(den) < num

    def bernoulli_exp(self, num: int, den: int) -> bool:
        """Exact ``Bernoulli(exp(-num/den))`` for integers ``num >= 0``, ``den >= 1``.

        Canonne, Kamath & Steinke (2020, arXiv:2004.00010), Algorithm 1: for
        γ <= 1, draw ``A_k ~ Bernoulli(γ/k)`` for k = 1, 2, ... until one fails
        and return whether the number of draws is odd (probability ``e^-γ``);
        for γ > 1, ``e^-γ`` is ``e^-1`` raised to ``floor(γ)`` times ``e^-frac(γ)``.
        Only rational Bernoullis are drawn, so the law is exact.
        """
        while num > den:
            if not self._bernoulli_exp_unit(1, 1):
                return False
            num -= den
        return self._bernoulli_exp_unit(num, den)

    def _bernoulli_exp_unit(self, num: int, den: int) -> bool:
        k = 1
        while self.bernoulli(num, den * k):
            k += 1
        return k % 2 == 1


@functools.lru_cache(maxsize=4096)
def _exp_scaled_bounds(num: int, den: int, bits: int) -> tuple[int, int]:
    """Integers ``lo <= exp(-num/den) * 2**bits <= hi`` (``num >= 0``, ``den >= 1``).

    ``e^γ`` is bracketed by its Taylor series in fixed point with directed
    rounding (each lower term rounded down, each upper term up, and the
    remainder after term k bounded by twice term k once ``γ/(k+1) <= 1/2``),
    then inverted with directed rounding.  The width is a few units at scale
    ``2**bits``.
    """
    if num == 0:
        return 1 << bits, 1 << bits
    prec = bits + 64
    one = 1 << prec
    e_lo = e_hi = one
    t_lo = t_hi = one
    k = 0
    while True:
        k += 1
        t_lo = (t_lo * num) // (den * k)
        t_hi = -((-(t_hi * num)) // (den * k))
        if (k + 1) * den >= 2 * num and t_hi <= 1:
            e_hi += 2 * t_hi
            break
        e_lo += t_lo
        e_hi += t_hi
    scale = 1 << (prec + bits)
    return scale // e_hi, -((-scale) // e_lo)


def _exp_less(num: int, den: int, value: int, bits: int) -> bool:
    """Whether the integer ``value < exp(-num/den) * 2**bits``, decided exactly.

    Refines :func:`_exp_scaled_bounds` until the bracket excludes ``value``; it
    always does, because ``e^-γ`` is irrational for rational ``γ > 0``
    (Lindemann) and equals ``2**bits`` for ``γ = 0``.
    """
    if num == 0:
        return value < (1 << bits)
    extra = 32
    while True:
        lo, hi = _exp_scaled_bounds(num, den, bits + extra)
        scaled = value << extra
        if scaled < lo:
            return True
        if scaled >= hi:
            return False
        extra *= 2


def _uniform_below_exp(source: _Source, offset: int, num: int, den: int, bits: int) -> bool:
    """Whether ``offset + V < exp(-num/den) * 2**bits`` for a fresh uniform ``V`` in [0, 1).

    ``V`` is drawn 64 bits at a time, only as far as needed to decide: with
    ``z`` the integer formed by ``offset`` and the bits drawn so far (``t`` of
    them), ``offset + V`` lies in ``[z, z + 1) * 2**-t``.  Exact.
    """
    if num == 0:
        return offset < (1 << bits)
    z, t = offset, 0
    while True:
        if _exp_less(num, den, z + 1, bits + t):
            return True
        if not _exp_less(num, den, z, bits + t):
            return False
        z = (z << 64) | int(source.words(1)[0])
        t += 64


def _uniform_below_fraction(source: _Source, offset: int, value: Fraction) -> bool:
    """Whether ``offset + V < value`` for a fresh uniform ``V`` in [0, 1).  Exact."""
    gap = value - offset
    if gap >= 1:
        return True
    if gap <= 0:
        return False
    return source.bernoulli(gap.numerator, gap.denominator)


def _product_range(lo: int, hi: int) -> int:
    """``lo * (lo + 1) * ... * (hi - 1)`` by a balanced product tree (1 if empty)."""
    if hi - lo <= 16:
        out = 1
        for v in range(lo, hi):
            out *= v
        return out
    mid = (lo + hi) // 2
    return _product_range(lo, mid) * _product_range(mid, hi)


# =========================================================================================
# The exact histogram sampler
# =========================================================================================
#
# Both exact samplers draw from a target pmf y(k) (known up to a constant) by
# rejection from an integer histogram envelope:
#
# * a window of support points k with integer weights hi(k) >= y(k) and integer
#   lower bounds lo(k) <= y(k) (y scaled by 2**S);
# * geometric tails beyond the window, with rational ratio ρ chosen so that
#   the tail envelope dominates y.
#
# One uniform integer V in [0, total) picks a bin with probability hi/total;
# its offset W = V − (start of the bin) is uniform in [0, hi(k)) given the bin.
# The proposal is accepted iff W + U < y(k) for a continuous uniform U in
# [0, 1): certain when W < lo(k) (the fast, vectorised path), otherwise decided
# exactly (rational arithmetic for Poisson, certified exp bounds for the
# Gaussian).  So P(accept k) = y(k)/total and the accepted law is exactly y.
#
# The table bounds come from float64 products with a *proved* relative error:
# every step is one IEEE-754 multiplication or division of binary64 values,
# each correctly rounded (relative error <= u = 2**-53), so a value built from
# N such steps (and inputs with N0 units of error) lies within γ_{N+N0} =
# (N+N0)u / (1 − (N+N0)u) of the exact value, whatever the evaluation order;
# weights are kept only while >= 2**-900, far from subnormals.  The bounds are
# widened by a further 4 units and a factor 1.01.  The float values therefore
# only decide which proposals are *certainly* accepted; they never change the
# law.


def _relative_error(units: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    n = (units + 4.0) * _U
    return np.asarray(1.01 * n / (1.0 - n), dtype=np.float64)


def _integer_bounds(
    values: npt.NDArray[np.float64], units: npt.NDArray[np.float64], scale_bits: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(lo, hi) integers bracketing ``exact * 2**S`` from ``values`` with ``units`` of error."""
    eta = _relative_error(units)
    x = np.ldexp(values, scale_bits)
    hi = np.ceil(x * (1.0 + eta)).astype(np.int64)
    lo = np.maximum(np.floor(x * (1.0 - eta)), 0.0).astype(np.int64)
    return lo, np.maximum(hi, 1)


class _Histogram:
    """Window bins plus tail bins; subclasses supply the exact tests."""

    start: int
    scale_bits: int
    lower: npt.NDArray[np.int64]  # per bin (0 for tail bins)
    weights: npt.NDArray[np.int64]  # per bin: [left tail, window..., right tail]
    cum: npt.NDArray[np.int64]
    total: int

    def _finish(
        self, lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64], left: int, right: int
    ) -> None:
        self.weights = np.concatenate(
            [np.array([left], dtype=np.int64), hi, np.array([right], dtype=np.int64)]
        )
        self.lower = np.concatenate([np.zeros(1, np.int64), lo, np.zeros(1, np.int64)])
        if float(np.sum(hi, dtype=np.float64)) + float(left) + float(right) >= 2.0**61:
            raise ArithmeticError("histogram total too large")  # caller lowers the scale
        total = int(left) + int(right) + int(hi.sum(dtype=np.int64))
        if total >= 2**62:
            raise ArithmeticError("histogram total too large")  # caller lowers the scale
        self.cum = np.cumsum(self.weights, dtype=np.int64)
        self.total = total

    def window_exact(self, source: _Source, index: int, offset: int) -> bool:
        """Whether ``offset + U < y(start + index)`` for a fresh uniform U (exact)."""
        raise NotImplementedError

    def tail(self, source: _Source, side: int) -> int | None:
        """One tail proposal (side 0 left, 1 right): the value, or ``None`` if rejected."""
        raise NotImplementedError

    def draw(self, source: _Source, count: int) -> npt.NDArray[np.int64]:
        out = np.empty(count, dtype=np.int64)
        filled = 0
        window = self.weights.shape[0] - 2
        bounds_cache: npt.NDArray[np.uint64] | None = None
        while filled < count:
            need = count - filled
            batch = need + need // 64 + 16
            if bounds_cache is None or bounds_cache.shape[0] != batch:
                bounds_cache = np.full(batch, self.total, dtype=np.uint64)
            v = source.below(bounds_cache).astype(np.int64)
            b = np.searchsorted(self.cum, v, side="right")
            offset = v - (self.cum[b] - self.weights[b])
            in_window = (b >= 1) & (b <= window)
            fast = in_window & (offset < self.lower[b])
            accepted = fast.copy()
            values = self.start + (b - 1)
            for i in np.flatnonzero(~fast):
                bin_ = int(b[i])
                if 1 <= bin_ <= window:
                    accepted[i] = self.window_exact(source, bin_ - 1, int(offset[i]))
                else:
                    value = self.tail(source, 0 if bin_ == 0 else 1)
                    if value is not None:
                        values[i] = value
                        accepted[i] = True
            got = values[accepted][:need]
            out[filled : filled + got.size] = got
            filled += got.size
        return out


class _PoissonTable(_Histogram):
    """Exact Poisson(λ): y(k) = 2**S · λ^(k−m) m!/k! with m = floor(λ) (the mode)."""

    def __init__(self, lam: float, half_width: int | None = None) -> None:
        frac = Fraction(lam)
        self.a, self.b = frac.numerator, frac.denominator
        self.lam = frac
        m = math.floor(lam)
        self.mode = m
        width = math.ceil(8.0 * math.sqrt(lam)) + 32 if half_width is None else half_width
        j = np.arange(1, width + 1, dtype=np.float64)
        right = np.cumprod(lam / (m + j))
        n_right = int(np.count_nonzero(right >= _TINY))
        right = right[:n_right]
        n_left_max = min(m, width)
        jl = np.arange(0, n_left_max, dtype=np.float64)
        left = np.cumprod((m - jl) / lam)
        n_left = int(np.count_nonzero(left >= _TINY))
        left = left[:n_left]
        self.start = m - n_left
        self.right_end = m + n_right  # R: last window point
        values = np.concatenate([left[::-1], np.ones(1), right])
        # r(m ± i) is built from i roundings of the factors and i − 1 products.
        steps_left = np.arange(n_left, 0, -1, dtype=np.float64)
        steps_right = np.arange(1, n_right + 1, dtype=np.float64)
        units = np.concatenate([2.0 * steps_left - 1.0, np.zeros(1), 2.0 * steps_right - 1.0])
        bins = values.shape[0] + 2
        scale = min(52, 60 - math.ceil(math.log2(bins + 2)))
        while True:
            try:
                self._build(values, units, scale, n_left)
                break
            except ArithmeticError:
                scale -= 1

    def _build(
        self,
        values: npt.NDArray[np.float64],
        units: npt.NDArray[np.float64],
        scale: int,
        n_left: int,
    ) -> None:
        self.scale_bits = scale
        lo, hi = _integer_bounds(values, units, scale)
        lo[n_left] = hi[n_left] = 1 << scale  # the mode: y = 2**S exactly
        self.hi = hi
        a, b = self.a, self.b
        big_r = self.right_end
        right_tail = -((-int(hi[-1]) * a) // (b * (big_r + 1) - a))
        big_l = self.start
        left_tail = 0
        if big_l > 0:
            left_tail = -((-int(hi[0]) * big_l * b) // (a - big_l * b))
        self._finish(lo, hi, left_tail, right_tail)

    def exact_weight(self, k: int) -> Fraction:
        """y(k) = 2**S · λ^(k−m) m!/k! as an exact fraction (the window edges are cached)."""
        if k in (self.start, self.right_end):
            cache = self.__dict__.setdefault("_edges", {})
            if k not in cache:
                cache[k] = self._weight(k)
            return cache[k]  # type: ignore[no-any-return]
        return self._weight(k)

    def _weight(self, k: int) -> Fraction:
        m, a, b = self.mode, self.a, self.b
        scale = 1 << self.scale_bits
        if k >= m:
            i = k - m
            return Fraction(a**i * scale, b**i * _product_range(m + 1, k + 1))
        i = m - k
        return Fraction(b**i * _product_range(k + 1, m + 1) * scale, a**i)

    def window_exact(self, source: _Source, index: int, offset: int) -> bool:
        return _uniform_below_fraction(source, offset, self.exact_weight(self.start + index))

    def tail(self, source: _Source, side: int) -> int | None:
        a, b = self.a, self.b
        if side == 1:
            big_r = self.right_end
            hi_r = int(self.hi[-1])
            j = 1
            while source.bernoulli(a, b * (big_r + 1)):  # geometric, ratio λ/(R+1)
                j += 1
            weight_r = self.exact_weight(big_r)
            if not _uniform_below_fraction(source, source.below_int(hi_r), weight_r):
                return None
            tail_mass = int(self.weights[-1])
            if not source.bernoulli(hi_r * a, (b * (big_r + 1) - a) * tail_mass):
                return None
            for i in range(2, j + 1):
                if not source.bernoulli(big_r + 1, big_r + i):
                    return None
            return big_r + j
        big_l = self.start
        hi_l = int(self.hi[0])
        j = 1
        while source.bernoulli(big_l * b, a):  # geometric, ratio L/λ
            j += 1
        if j > big_l:
            return None  # below 0: probability zero
        weight_l = self.exact_weight(big_l)
        if not _uniform_below_fraction(source, source.below_int(hi_l), weight_l):
            return None
        tail_mass = int(self.weights[0])
        if not source.bernoulli(hi_l * big_l * b, (a - big_l * b) * tail_mass):
            return None
        for i in range(1, j):
            if not source.bernoulli(big_l - i, big_l):
                return None
        return big_l - j


class _DiscreteGaussianTable(_Histogram):
    """Exact |X| for X ~ N_Z(0, σ²): y(0) = 2**S, y(x) = 2**(S+1) · exp(−x²/(2σ²)) for x >= 1."""

    def __init__(self, scale: float, half_width: int | None = None) -> None:
        var = Fraction(scale) ** 2
        self.vn, self.vd = var.numerator, var.denominator  # σ² = vn/vd
        width = math.ceil(8.0 * scale) + 32 if half_width is None else max(half_width, 1)
        # q = exp(−1/(2σ²)) to within 2 units: a bracket 2**-100 wide relative to q (q >=
        # e^-128 on the domain of σ), then one correctly rounded int/int division.
        q_bits = 100 + 2 * (self.vd // (2 * self.vn) + 1)
        q_lo, _ = _exp_scaled_bounds(self.vd, 2 * self.vn, q_bits)
        q = q_lo / (1 << q_bits)
        s = np.cumprod(np.concatenate([[q], np.full(max(width - 1, 0), q * q)]))
        w = np.cumprod(s)[:width]
        n_win = int(np.count_nonzero(w >= _TINY))
        w = w[:n_win]
        self.right_end = n_win  # R >= 1: w(1) = q >= e^-128 > 2**-900 on the domain of σ
        self.start = 0
        x = np.arange(1, n_win + 1, dtype=np.float64)
        values = np.concatenate([np.ones(1), w])
        units = np.concatenate([np.zeros(1), 3.0 * x * x])
        # exp(−(2R+1)/(2σ²)) <= ρ = rho_num / 2**64 < 1: the tail ratio.
        self.c_num, self.c_den = (2 * n_win + 1) * self.vd, 2 * self.vn
        _, rho_num = _exp_scaled_bounds(self.c_num, self.c_den, 64)
        if rho_num >= 1 << 64:
            raise ParameterError("scale", "a σ with a tail ratio below 1", scale)
        self.rho_num = rho_num
        bins = values.shape[0] + 2
        bits = min(51, 59 - math.ceil(math.log2(bins + 2)))
        while True:
            try:
                self._build(values, units, bits)
                break
            except ArithmeticError:
                bits -= 1

    def _build(
        self, values: npt.NDArray[np.float64], units: npt.NDArray[np.float64], bits: int
    ) -> None:
        self.scale_bits = bits
        lo, hi = _integer_bounds(values, units, bits)
        lo[0] = hi[0] = 1 << bits
        lo[1:] *= 2  # |X| = x >= 1 has two preimages ±x
        hi[1:] *= 2
        self.hi = hi
        rho = self.rho_num
        right_tail = -((-int(hi[-1]) * rho) // ((1 << 64) - rho))
        self._finish(lo, hi, 0, right_tail)

    def _gamma(self, x: int) -> tuple[int, int]:
        return x * x * self.vd, 2 * self.vn  # x²/(2σ²)

    def window_exact(self, source: _Source, index: int, offset: int) -> bool:
        if index == 0:
            return True  # y(0) = 2**S = hi(0) > offset
        num, den = self._gamma(index)
        return _uniform_below_exp(source, offset, num, den, self.scale_bits + 1)

    def tail(self, source: _Source, side: int) -> int | None:
        # Proposal |X| = R + j, j >= 1, with mass T(1 − ρ)ρ^(j−1) >= hi(R)ρ^j.  Accepted
        # with [y(R)/hi(R)] · [hi(R)ρ/((1 − ρ)T)] · exp(−(j² − j)/(2σ²)) · (e^(−c)/ρ)^j,
        # c = (2R+1)/(2σ²), whose product is y(R + j)/(T(1 − ρ)ρ^(j−1)), because
        # y(R + j) = y(R)·e^(−cj)·e^(−(j²−j)/(2σ²)).
        big_r, rho = self.right_end, self.rho_num
        hi_r = int(self.hi[-1])
        j = 1
        while int(source.words(1)[0]) < rho:  # geometric, ratio ρ
            j += 1
        num, den = self._gamma(big_r)
        if not _uniform_below_exp(source, source.below_int(hi_r), num, den, self.scale_bits + 1):
            return None
        tail_mass = int(self.weights[-1])
        if not source.bernoulli(hi_r * rho, ((1 << 64) - rho) * tail_mass):
            return None
        if not source.bernoulli_exp((j * j - j) * self.vd, 2 * self.vn):
            return None
        for _ in range(j):
            if not _uniform_below_exp(source, source.below_int(rho), self.c_num, self.c_den, 64):
                return None
        return big_r + j


class _TableCache:
    """Least-recently-used cache of sampler tables, bounded by their total bytes.

    A layered client draws from one table per (layer, block), and the server
    re-derives every revealed layer of every survivor in the same order: with
    a cache of a fixed small number of entries (64 before) a cycle over more
    keys than that never hits (n = 200, t = 101: 300 tables, 0 hits, every
    table rebuilt for every client and every survivor).  Tables are immutable
    once built, and a table is a function of its key alone, so caching changes
    no draw.  The bound is on bytes (the largest tables are about 0.7 MiB), not
    on entries; thread-safe.
    """

    def __init__(self, factory: Callable[[float, int | None], _Histogram], max_bytes: int) -> None:
        self._factory = factory
        self._max_bytes = max_bytes
        self._tables: OrderedDict[tuple[float, int | None], tuple[_Histogram, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __call__(self, value: float, half_width: int | None) -> _Histogram:
        key = (value, half_width)
        with self._lock:
            found = self._tables.get(key)
            if found is not None:
                self._tables.move_to_end(key)
                self.hits += 1
                return found[0]
        table = self._factory(value, half_width)  # built outside the lock
        size = sum(int(v.nbytes) for v in vars(table).values() if isinstance(v, np.ndarray))
        with self._lock:
            self.misses += 1
            if key not in self._tables:
                self._tables[key] = (table, size)
                self._bytes += size
            while self._bytes > self._max_bytes and len(self._tables) > 1:
                _, (_, dropped) = self._tables.popitem(last=False)
                self._bytes -= dropped
        return table

    def cache_clear(self) -> None:
        """Forget every table (benchmarks measure a client's cold cost with it)."""
        with self._lock:
            self._tables.clear()
            self._bytes = 0
            self.hits = self.misses = 0

    def cache_info(self) -> tuple[int, int, int, int]:
        """``(hits, misses, tables, bytes)``."""
        with self._lock:
            return self.hits, self.misses, len(self._tables), self._bytes


#: Total bytes of cached sampler tables per kind (64 MiB: hundreds of the largest tables).
_TABLE_CACHE_BYTES: Final = 64 * 2**20

_poisson_table: Final = _TableCache(
    lambda lam, half_width: _PoissonTable(lam, half_width), _TABLE_CACHE_BYTES
)
_gaussian_table: Final = _TableCache(
    lambda scale, half_width: _DiscreteGaussianTable(scale, half_width), _TABLE_CACHE_BYTES
)


def _sample(
    dims: tuple[int, ...],
    label: bytes,
    seed: Seed | None,
    draw: Callable[[_Source, int], npt.NDArray[np.int64]],
) -> npt.NDArray[np.int64]:
    """``draw(source, count)`` from a fresh stream labelled ``label``, shaped ``dims``."""
    source = _Source(label, seed)
    count = math.prod(dims)
    if count == 0:
        return np.zeros(dims, dtype=np.int64)
    return draw(source, count).reshape(dims)


def exact_discrete_gaussian(
    shape: int | Sequence[int],
    scale: float,
    *,
    seed: Seed | None = None,
    _half_width: int | None = None,
) -> npt.NDArray[np.int64]:
    """Draw i.i.d. discrete Gaussians ``N_Z(0, scale²)`` *exactly* from a CSPRNG.

    ``P[X = x] ∝ exp(−x²/(2·scale²))`` on the integers, with ``scale²`` taken
    exactly as the rational square of the float ``scale``.  The sampler is
    exact (no floating-point approximation of the law, tails unbounded): a
    rejection sampler from an integer histogram envelope whose acceptance test
    is decided either by proved float64 bounds or, when those cannot decide,
    by exact comparison against certified bounds of ``exp(−x²/(2σ²))``;
    beyond a window of about ±8σ, a geometric envelope with exact Bernoulli
    factories (including Canonne–Kamath–Steinke's ``Bernoulli(exp(−γ))``)
    takes over.  (The float sampler :func:`privfed.dp.noise.discrete_gaussian`
    is within a few 2^-53 of this law per draw; this one is exact.)

    Args:
        shape: Output shape (an int or a sequence of non-negative ints).
        scale: σ in grid units; finite, in ``[2**-4, 2**15]``.  Calibrations
            return σ with a 17-bit mantissa, which keeps the exact arithmetic short.
        seed: ``None`` (default) for a fresh key from :func:`os.urandom`; an
            ``int >= 0`` or ``bytes`` for a reproducible stream (tests,
            experiments) -- record ``seeded=True`` in the ledger then.
        _half_width: Private test hook: the table's half width (forces the
            exact tail paths when small).  Leave it unset.

    Returns:
        int64 array of ``shape``.  Each client of a distributed release adds
        one such array to its integer input before masking; the accounting is
        :func:`privfed.dp.distributed.ddg_rdp`, not that of the continuous Gaussian.
    """
    dims = check_shape(shape)
    sigma = check_float(
        "scale",
        scale,
        low=MIN_EXACT_DISCRETE_GAUSSIAN_SCALE,
        high=MAX_EXACT_DISCRETE_GAUSSIAN_SCALE,
        domain=f"a finite float in [{MIN_EXACT_DISCRETE_GAUSSIAN_SCALE}, "
        f"{MAX_EXACT_DISCRETE_GAUSSIAN_SCALE:.0f}]",
    )

    def draw(source: _Source, count: int) -> npt.NDArray[np.int64]:
        magnitude = _gaussian_table(sigma, _half_width).draw(source, count)
        negative = (source.words(count) & np.uint64(1)).astype(bool)
        return np.where(negative, -magnitude, magnitude)

    return _sample(dims, b"exact-discrete-gaussian", seed, draw)


def _check_poisson_mean(value: object, name: str = "poisson_mean") -> float:
    return check_float(
        name,
        value,
        low=MIN_POISSON_MEAN,
        high=MAX_POISSON_MEAN,
        domain="a finite float in [2**-30, 2**30]",
    )


def exact_poisson(
    shape: int | Sequence[int],
    poisson_mean: float,
    *,
    seed: Seed | None = None,
    _half_width: int | None = None,
) -> npt.NDArray[np.int64]:
    """Draw i.i.d. ``Poisson(λ)`` values *exactly* from a CSPRNG.

    Exactness argument: the target weights ``y(k) = λ^(k−m) m!/k!`` (m the
    mode) are rational.  Proposals come from an integer histogram over a window
    of about ±8√λ around m plus two geometric tails with rational ratios
    ``λ/(R+1)`` and ``L/λ`` (which dominate y beyond the window, since each
    further step multiplies y by at most that ratio).  A proposal k is accepted
    with probability ``y(k)/envelope(k)``: decided by proved float64 bounds when
    they suffice and by exact rational arithmetic (Python integers) otherwise;
    tail proposals are accepted through a product of exact rational Bernoullis.
    No floating-point value ever enters the law, the support is unbounded, and
    there is no inversion by ``exp``/``log``.

    Args:
        shape: Output shape.
        poisson_mean: λ; finite, in ``[2**-30, 2**30]``.
        seed: See :func:`exact_discrete_gaussian`.
        _half_width: Private test hook, as in :func:`exact_discrete_gaussian`.

    Returns:
        int64 array of ``shape``, non-negative.
    """
    dims = check_shape(shape)
    lam = _check_poisson_mean(poisson_mean)
    table = functools.partial(_poisson_table, lam, _half_width)
    return _sample(dims, b"exact-poisson", seed, lambda source, count: table().draw(source, count))


def skellam_noise(
    shape: int | Sequence[int], poisson_mean: float, *, seed: Seed | None = None
) -> npt.NDArray[np.int64]:
    """Draw i.i.d. symmetric Skellam noise ``Poisson(λ) − Poisson(λ)`` exactly from a CSPRNG.

    Mean 0, variance ``2λ`` (grid units²).  Sums of independent Skellams are
    Skellam: n honest clients with mean λ each give ``Skellam(nλ, nλ)`` with
    total variance ``μ = 2nλ``, which :func:`privfed.dp.distributed.skellam_rdp` accounts.

    Args:
        shape: Output shape.
        poisson_mean: λ of each Poisson; finite, in ``[2**-30, 2**30]``.
        seed: See :func:`exact_discrete_gaussian`.

    Returns:
        int64 array of ``shape``.
    """
    dims = check_shape(shape)
    lam = _check_poisson_mean(poisson_mean)

    def draw(source: _Source, count: int) -> npt.NDArray[np.int64]:
        both = _poisson_table(lam, None).draw(source, 2 * count)
        return both[:count] - both[count:]

    return _sample(dims, b"skellam", seed, draw)
