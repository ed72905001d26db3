"""Distributed DP under secure aggregation: exact integer noise and its accounting.

Each client adds integer noise to its integer (fixed-point) input *before*
masking, so the server only ever unmasks a noisy total.  This module is the
DP core of that setting:

* exact samplers driven by a ChaCha20 CSPRNG -- the discrete Gaussian
  :func:`exact_discrete_gaussian` and the symmetric Skellam
  :func:`skellam_noise` (a difference of two :func:`exact_poisson` draws);
* closed-form Rényi-DP curves of the noisy sum for ``n`` honest contributors
  (:func:`ddg_rdp`, :func:`skellam_rdp`) and the zCDP lines the release kinds
  account and export (:func:`ddg_zcdp`, :func:`skellam_zcdp`);
* the RDP -> (ε, δ) conversion (:func:`rdp_epsilon`, :func:`rdp_delta`);
* calibration of the per-client noise (:func:`calibrate_distributed_discrete_gaussian`,
  :func:`calibrate_distributed_skellam`);
* the number of honest contributors a secure-aggregation threshold guarantees
  (:func:`min_honest_contributors`) and the ring wrap-around bound
  (:func:`wrap_probability`, :func:`check_ring`).

Units and conventions
---------------------

Everything is in *grid units*: the integer lattice the fixed-point encoding of
secure aggregation works on.  ``noise_std`` (σ) is the parameter of each
client's discrete Gaussian ``N_Z(0, σ²)`` (its variance is slightly below σ²),
``poisson_mean`` (λ) the mean of each of the two Poissons of a client's Skellam
noise (variance 2λ).  ``l2_sensitivity`` Δ₂ and ``l1_sensitivity`` Δ₁ bound
``‖Σ(D) − Σ(D′)‖₂`` and ``‖·‖₁`` of the *integer* total over neighbouring
datasets under whatever adjacency the caller uses (replace-one or add/remove;
the formulas do not care, the caller's sensitivity does).  For an integer
vector ``‖v‖₁ ≤ min(√d·‖v‖₂, ‖v‖₂²)`` and ``‖v‖₂ ≤ ‖v‖₁``, so the effective
sensitivities used are ``Δ₁' = min(Δ₁, √d·Δ₂, Δ₂²)`` and ``Δ₂' = min(Δ₂, Δ₁)``
(``Δ₁ = None`` means ``min(√d·Δ₂, Δ₂²)``).  ``dimension`` d is the number of
noised coordinates.

Threat model
------------

Only clients whose masked input is summed contribute noise to the total, and
colluding (corrupted) clients know -- and can subtract -- their own noise.  The
privacy of an honest client's record therefore rests on the noise of the
*honest* clients in the sum only; ``num_clients`` in the accounting is the
minimum number of honest contributors, see :func:`min_honest_contributors`.
More honest noise than that is post-processing (the extra noise is
independent of the data), so every curve here is non-increasing in
``num_clients``.

Numerical direction
-------------------

Every accounting quantity errs on the side of privacy: RDP curves are scaled
up by ``1 + 1e-12`` to cover floating-point rounding, ε is rounded up, δ is
rounded up, calibrated noise is the safe end of a bisection, rounded *up* to a
17-bit mantissa and re-checked (also against dp-accounting's ``compute_delta``,
the ledger's own budget test).  The samplers are exact (see below).
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from privfed._checks import (
    check_choice,
    check_count,
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    check_float,
    check_int,
)
from privfed.dp.noise import Seed, check_shape, stream_key
from privfed.errors import CalibrationError, ParameterError, ParameterTypeError, RingOverflowError

__all__ = [
    "DDG_MIN_NOISE_STD",
    "EXACT_DISCRETE_GAUSSIAN_SAMPLER",
    "MAX_CONTRIBUTORS",
    "MAX_EXACT_DISCRETE_GAUSSIAN_SCALE",
    "MAX_POISSON_MEAN",
    "MIN_EXACT_DISCRETE_GAUSSIAN_SCALE",
    "MIN_POISSON_MEAN",
    "RDP_ORDERS",
    "SKELLAM_SAMPLER",
    "WRAP_PROBABILITY_LIMIT",
    "DistributedMechanism",
    "calibrate_distributed_discrete_gaussian",
    "calibrate_distributed_skellam",
    "check_orders",
    "check_ring",
    "ddg_rdp",
    "ddg_tau",
    "ddg_zcdp",
    "effective_sensitivities",
    "exact_discrete_gaussian",
    "exact_poisson",
    "min_honest_contributors",
    "rdp_delta",
    "rdp_epsilon",
    "skellam_noise",
    "skellam_rdp",
    "skellam_zcdp",
    "wrap_probability",
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
#: Smallest per-client σ the distributed discrete Gaussian accounting accepts.
#: Below it the τ term of Kairouz, Liu & Steinke is of order one and the bound
#: is useless anyway; the restriction keeps the analysis in its intended domain.
DDG_MIN_NOISE_STD: Final = 0.5
#: Largest number of contributors the accounting handles (arrays of this length).
MAX_CONTRIBUTORS: Final = 2**20
#: The wrap-around probability :func:`check_ring` accepts by default.
WRAP_PROBABILITY_LIMIT: Final = 2.0**-40

#: The Rényi orders of the conversions: dp-accounting's default RDP orders (the
#: orders :class:`privfed.dp.PrivacyLedger` uses), so a calibration here and the
#: ledger's figure are computed on the same grid.
RDP_ORDERS: Final[tuple[float, ...]] = tuple(
    [1.0 + x / 10.0 for x in range(1, 100)]
    + [float(a) for a in range(11, 64)]
    + [128.0, 256.0, 512.0, 1024.0]
)

#: ``"discrete-gaussian"`` or ``"skellam"``.
DistributedMechanism = Literal["discrete-gaussian", "skellam"]
_MECHANISMS: Final = ("discrete-gaussian", "skellam")

_DOMAIN = b"privfed.dp.distributed/v1/"
_U: Final = 2.0**-53  # unit roundoff of IEEE-754 binary64
_TINY: Final = 2.0**-900  # table weights below this are left to the tails
_UINT64_MAX: Final = np.uint64(np.iinfo(np.uint64).max)
_SAFE: Final = 1.0 + 1e-12  # relative margin for floating-point accounting
_ABOVE: Final = 1.0 + 2.0**-50  # keeps an exported line above a curve it bounds
_MANTISSA_BITS: Final = 17  # calibrated noise is rounded up to this many bits


# =========================================================================================
# The CSPRNG source and exact Bernoulli primitives
# =========================================================================================


class _Source:
    """A ChaCha20 keystream (fresh 256-bit key per stream) with exact uniform integers."""

    __slots__ = ("_encryptor",)

    def __init__(self, label: bytes, seed: Seed | None) -> None:
        # A fresh key per stream, so the fixed all-zero nonce is safe.
        cipher = Cipher(algorithms.ChaCha20(stream_key(_DOMAIN, label, seed), bytes(16)), mode=None)
        self._encryptor = cipher.encryptor()

    def __repr__(self) -> str:
        return "_Source(<redacted>)"

    def raw(self, count: int) -> bytes:
        return self._encryptor.update(bytes(count))

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
        :func:`ddg_rdp`, not that of the continuous Gaussian.
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
    source = _Source(b"exact-discrete-gaussian", seed)
    count = math.prod(dims)
    if count == 0:
        return np.zeros(dims, dtype=np.int64)
    magnitude = _gaussian_table(sigma, _half_width).draw(source, count)
    negative = (source.words(count) & np.uint64(1)).astype(bool)
    return np.where(negative, -magnitude, magnitude).reshape(dims)


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
    source = _Source(b"exact-poisson", seed)
    count = math.prod(dims)
    if count == 0:
        return np.zeros(dims, dtype=np.int64)
    return _poisson_table(lam, _half_width).draw(source, count).reshape(dims)


def skellam_noise(
    shape: int | Sequence[int], poisson_mean: float, *, seed: Seed | None = None
) -> npt.NDArray[np.int64]:
    """Draw i.i.d. symmetric Skellam noise ``Poisson(λ) − Poisson(λ)`` exactly from a CSPRNG.

    Mean 0, variance ``2λ`` (grid units²).  Sums of independent Skellams are
    Skellam: n honest clients with mean λ each give ``Skellam(nλ, nλ)`` with
    total variance ``μ = 2nλ``, which :func:`skellam_rdp` accounts.

    Args:
        shape: Output shape.
        poisson_mean: λ of each Poisson; finite, in ``[2**-30, 2**30]``.
        seed: See :func:`exact_discrete_gaussian`.

    Returns:
        int64 array of ``shape``.
    """
    dims = check_shape(shape)
    lam = _check_poisson_mean(poisson_mean)
    source = _Source(b"skellam", seed)
    count = math.prod(dims)
    if count == 0:
        return np.zeros(dims, dtype=np.int64)
    both = _poisson_table(lam, None).draw(source, 2 * count)
    return (both[:count] - both[count:]).reshape(dims)


# =========================================================================================
# Sensitivities and RDP curves
# =========================================================================================


def effective_sensitivities(
    l2_sensitivity: float, l1_sensitivity: float | None, dimension: int
) -> tuple[float, float]:
    """The (Δ₂, Δ₁) the formulas use for an integer-valued total (grid units).

    For an integer vector v: ``‖v‖₁ ≤ √d·‖v‖₂``, ``‖v‖₁ ≤ ‖v‖₂²`` and
    ``‖v‖₂ ≤ ‖v‖₁``, so the returned pair is ``(min(Δ₂, Δ₁), min(Δ₁, √d·Δ₂,
    Δ₂²))`` -- never larger than what was given, and valid whenever the given
    values are.  ``l1_sensitivity=None`` means "unknown" (``min(√d·Δ₂, Δ₂²)``).

    Args:
        l2_sensitivity: Δ₂ >= 0, finite.
        l1_sensitivity: Δ₁ >= 0, finite, or ``None``.
        dimension: d >= 1.

    Raises:
        ParameterError / ParameterTypeError: A value outside its domain.
    """
    d2 = check_finite_nonnegative("l2_sensitivity", l2_sensitivity)
    d = check_count("dimension", dimension, minimum=1)
    if l1_sensitivity is None:
        return d2, min(math.sqrt(d) * d2, d2 * d2)
    d1 = check_finite_nonnegative("l1_sensitivity", l1_sensitivity)
    d2 = min(d2, d1)
    return d2, min(d1, math.sqrt(d) * d2, d2 * d2)


def check_orders(orders: Sequence[float]) -> npt.NDArray[np.float64]:
    """Rényi orders as a float64 array after checking they are finite and > 1.

    Raises:
        ParameterTypeError: Not a sequence of numbers.
        ParameterError: Empty, not one-dimensional, or an order not finite or <= 1.
    """
    try:
        alpha = np.asarray(orders, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterTypeError("orders", "a sequence of floats > 1", orders) from None
    if alpha.ndim != 1 or alpha.size == 0 or not np.all(np.isfinite(alpha)):
        raise ParameterError("orders", "a non-empty sequence of finite floats > 1", orders)
    if not np.all(alpha > 1.0):
        raise ParameterError("orders", "a non-empty sequence of finite floats > 1", orders)
    return alpha


def _check_clients(num_clients: object) -> int:
    return check_int(
        "num_clients",
        num_clients,
        minimum=1,
        maximum=MAX_CONTRIBUTORS,
        numpy=True,
        expected="an int (not bool)",
    )


def _check_ddg_std(noise_std: object) -> float:
    return check_float(
        "noise_std",
        noise_std,
        low=DDG_MIN_NOISE_STD,
        domain=f"a finite float >= {DDG_MIN_NOISE_STD} (grid units)",
    )


def _tau_increments(num_clients: int, noise_std: float) -> npt.NDArray[np.float64]:
    """c_k = 10·exp(−2π²σ²·k/(k+1)) for k = 1..n−1 (so τ_n = Σ c_k)."""
    k = np.arange(1, num_clients, dtype=np.float64)
    return np.asarray(
        10.0 * np.exp(-2.0 * math.pi**2 * noise_std**2 * k / (k + 1.0)), dtype=np.float64
    )


#: Contributor counts n' searched exhaustively by :func:`_min_over_contributors`.
_EXHAUSTIVE_CONTRIBUTORS: Final = 2**12


def _min_over_contributors(
    alpha: npt.NDArray[np.float64], coefficient: float, offsets: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``min over n' of α·coefficient/n' + offsets[n' − 1]`` (a bound valid at every n').

    Each ``n'`` gives a valid RDP bound (more honest noise is post-processing),
    so the minimum over ANY subset of them is valid too.  The offsets' increments
    (the τ terms ``10·exp(−2π²σ²k/(k+1))``) *decrease* in k, so the increments of
    the objective need not change sign once and a bisection on them can miss the
    minimiser; the minimum is taken exhaustively over ``n' <= 2**12`` and over
    ``n' = n``, which is exact for every n up to 2**12 and an upper bound beyond.
    """
    count = offsets.size
    top = min(count, _EXHAUSTIVE_CONTRIBUTORS)
    counts = np.arange(1, top + 1, dtype=np.float64)
    best = np.full(alpha.shape, np.inf, dtype=np.float64)
    for start in range(0, alpha.size, 64):  # bounded memory: 64 orders x 4096 counts
        part = alpha[start : start + 64, None] * coefficient / counts[None, :]
        best[start : start + 64] = np.min(part + offsets[None, :top], axis=1)
    last = alpha * coefficient / float(count) + offsets[-1]
    return np.asarray(np.minimum(best, last), dtype=np.float64)


def ddg_tau(num_clients: int, noise_std: float) -> float:
    """The τ of Kairouz, Liu & Steinke (2021) for n clients of per-client σ.

    ``τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ²·k/(k+1))``; 0 for one client.  It bounds
    how far the sum of n discrete Gaussians is from a discrete Gaussian.
    Rounded up by a relative 1e-12.

    Args:
        num_clients: n, an int in ``[1, 2**20]``.
        noise_std: σ per client in grid units, finite, >= 0.5.
    """
    n = _check_clients(num_clients)
    sigma = _check_ddg_std(noise_std)
    return float(np.sum(_tau_increments(n, sigma))) * _SAFE


def ddg_rdp(
    orders: Sequence[float],
    *,
    num_clients: int,
    noise_std: float,
    l2_sensitivity: float,
    dimension: int,
    l1_sensitivity: float | None = None,
) -> npt.NDArray[np.float64]:
    """RDP of the distributed discrete Gaussian sum, for at least ``num_clients`` honest clients.

    Each of n honest clients adds ``N_Z(0, σ²)^d``; the total is released.  By
    Kairouz, Liu & Steinke (2021, arXiv:2102.06387, Thm 1 / Prop 14, as coded in
    google-research/federated ``distributed_dp``), with
    ``τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ²k/(k+1))``, ``a₂ = Δ₂/(√n σ)``,
    ``a₁ = Δ₁/(√n σ)``, the sum is (α, ε(α))-RDP for every α > 1 with::

        ε(α) = min{ α a₂²/2 + τd,  (α/2)(a₂² + 2a₁τ + τ²d),  (α/2)(a₂ + √d τ)² }.

    Because more honest noise is post-processing, the curve returned is the
    pointwise minimum of that bound over every n' <= n (the bound itself is not
    monotone in n: τ grows with n), so it never increases with ``num_clients``.
    The minimum is exhaustive over n' <= 2**12 and n' = n for the first term
    (exact for n <= 2**12; the minimum over any subset of valid bounds is
    valid), and exact for the other two, which are α times a function of n'.

    Args:
        orders: Rényi orders α, finite floats > 1.
        num_clients: Minimum number n of honest contributors, in ``[1, 2**20]``.
        noise_std: Per-client σ in grid units; finite, >= 0.5.
        l2_sensitivity: Δ₂ of the integer total in grid units (any adjacency).
        dimension: d, the number of noised coordinates.
        l1_sensitivity: Δ₁ in grid units, or ``None`` (see
            :func:`effective_sensitivities`).

    Returns:
        float64 array of ε(α), rounded up by a relative 1e-12 (never under).
    """
    alpha = check_orders(orders)
    n = _check_clients(num_clients)
    sigma = _check_ddg_std(noise_std)
    d = check_count("dimension", dimension, minimum=1)
    d2, d1 = effective_sensitivities(l2_sensitivity, l1_sensitivity, d)
    if d2 == 0.0 or d1 == 0.0:
        return np.zeros_like(alpha)
    big_a = d2 * d2 / (sigma * sigma)  # n'·a₂(n')²
    big_b = d1 / sigma  # √n'·a₁(n')
    inc = _tau_increments(n, sigma)
    tau = np.concatenate([np.zeros(1), np.cumsum(inc)])  # τ_{n'} for n' = 1..n
    counts = np.arange(1, n + 1, dtype=np.float64)
    # Terms two and three: α/2 times a function of n' only.
    h2 = big_a / counts + 2.0 * big_b * tau / np.sqrt(counts) + d * tau * tau
    h3 = (np.sqrt(big_a / counts) + math.sqrt(d) * tau) ** 2
    term23 = 0.5 * alpha * min(float(np.min(h2)), float(np.min(h3)))
    # Term one: g(n') = αA/(2n') + dτ_{n'}, valid at every n'.  The increments c_k of τ
    # decrease in k, so the minimiser is not found by bisection: exhaustive search.
    term1 = _min_over_contributors(alpha, 0.5 * big_a, d * tau)
    return np.asarray(np.minimum(term1, term23) * _SAFE, dtype=np.float64)


def ddg_zcdp(
    *,
    num_clients: int,
    noise_std: float,
    l2_sensitivity: float,
    dimension: int,
    l1_sensitivity: float | None = None,
) -> tuple[float, float]:
    """The (ρ, ξ)-zCDP line of the distributed discrete Gaussian: ``ε(α) <= ξ + ρα`` for all α.

    The first term of :func:`ddg_rdp` at n: ``ρ = Δ₂²/(2nσ²)``, ``ξ = τd``
    (both rounded up by 1e-12), what dp-accounting's RDP accountant takes as
    ``ZCDpEvent(rho, xi)``.  It is an upper bound on :func:`ddg_rdp` at every
    order, and equals it whenever τ·d is negligible against the Gaussian
    term's decrease with n -- in particular for any σ of a few grid units.

    Args: See :func:`ddg_rdp`.

    Returns:
        ``(rho, xi)``, both >= 0; ``(0, 0)`` when a sensitivity is 0.
    """
    n = _check_clients(num_clients)
    sigma = _check_ddg_std(noise_std)
    d = check_count("dimension", dimension, minimum=1)
    d2, d1 = effective_sensitivities(l2_sensitivity, l1_sensitivity, d)
    if d2 == 0.0 or d1 == 0.0:
        return 0.0, 0.0
    big_a = d2 * d2 / (sigma * sigma)
    inc = _tau_increments(n, sigma)
    # The curve's offset at n' = n is d·cumsum(inc)[-1] (sequential), which can exceed
    # the pairwise np.sum in the last bits: take the larger, so the line stays above.
    tau = max(float(np.sum(inc)), float(np.cumsum(inc)[-1])) if inc.size else 0.0
    # 2**-50 more than the curve's margin, so the line stays above ddg_rdp's rounding.
    return big_a / (2.0 * n) * _SAFE * _ABOVE, d * tau * _SAFE * _ABOVE


def _check_skellam_args(
    num_clients: object,
    poisson_mean: object,
    l2_sensitivity: float,
    l1_sensitivity: float | None,
    dimension: object,
) -> tuple[float, float, float]:
    n = _check_clients(num_clients)
    lam = check_finite_positive("poisson_mean", poisson_mean)
    d = check_count("dimension", dimension, minimum=1)
    d2, d1 = effective_sensitivities(l2_sensitivity, l1_sensitivity, d)
    return 2.0 * n * lam, d2, d1


def _skellam_integer(
    alpha: npt.NDArray[np.float64], mu: float, d2: float, d1: float
) -> npt.NDArray[np.float64]:
    gauss = alpha * d2 * d2 / (2.0 * mu)
    first = ((2.0 * alpha - 1.0) * d2 * d2 + 6.0 * d1) / (4.0 * mu * mu)
    return np.asarray(gauss + np.minimum(first, 3.0 * d1 / (2.0 * mu)), dtype=np.float64)


def skellam_rdp(
    orders: Sequence[float],
    *,
    num_clients: int,
    poisson_mean: float,
    l2_sensitivity: float,
    dimension: int,
    l1_sensitivity: float | None = None,
) -> npt.NDArray[np.float64]:
    """RDP of the distributed Skellam sum for at least ``num_clients`` honest clients.

    n honest clients each add ``Poisson(λ) − Poisson(λ)`` per coordinate; the
    total carries ``Skellam(nλ, nλ)`` with variance ``μ = 2nλ``.  By Agarwal,
    Kairouz & Liu (2021, "The Skellam Mechanism for Differentially Private
    Federated Learning", Thm 3.5), at every *integer* order α > 1::

        ε(α) = α Δ₂²/(2μ) + min( ((2α−1)Δ₂² + 6Δ₁)/(4μ²),  3Δ₁/(2μ) ).

    Between integers the bound is interpolated with the convexity of
    ``(α−1)·D_α`` in α (a log-moment-generating function), which is valid and
    tighter than rounding α up; on (1, 2) it is ε(2).  Non-increasing in n.

    Args:
        orders: Rényi orders, finite floats > 1.
        num_clients: n, in ``[1, 2**20]``.
        poisson_mean: λ per client (per Poisson), finite, > 0.
        l2_sensitivity: Δ₂ in grid units.
        dimension: d.
        l1_sensitivity: Δ₁ in grid units, or ``None``.

    Returns:
        float64 array of ε(α), rounded up by a relative 1e-12.
    """
    alpha = check_orders(orders)
    mu, d2, d1 = _check_skellam_args(
        num_clients, poisson_mean, l2_sensitivity, l1_sensitivity, dimension
    )
    if d2 == 0.0 or d1 == 0.0:
        return np.zeros_like(alpha)
    low = np.maximum(np.floor(alpha), 2.0)
    high = np.maximum(np.ceil(alpha), 2.0)
    e_low = _skellam_integer(low, mu, d2, d1)
    e_high = _skellam_integer(high, mu, d2, d1)
    t = np.where(high > low, alpha - low, 0.0)
    chord = (1.0 - t) * (low - 1.0) * e_low + t * (high - 1.0) * e_high
    interpolated = np.where(alpha < 2.0, e_high, chord / (alpha - 1.0))
    return np.asarray(interpolated * _SAFE, dtype=np.float64)


def skellam_zcdp(
    *,
    num_clients: int,
    poisson_mean: float,
    l2_sensitivity: float,
    dimension: int,
    l1_sensitivity: float | None = None,
) -> tuple[float, float]:
    """A (ρ, ξ)-zCDP line above :func:`skellam_rdp` at *every* real order α > 1.

    At integers ``ε(α) <= α·ρ + c`` with ``ρ = Δ₂²/(2μ)·(1 + 1/μ)`` and
    ``c = (6Δ₁ − Δ₂²)/(4μ²)`` (the first option of the min); since ``D_α`` is
    non-decreasing in α, ``D_α <= ε(⌈α⌉) < ρα + ρ + c`` everywhere, so
    ``ξ = ρ + c = Δ₂²/(2μ) + (Δ₂² + 6Δ₁)/(4μ²) > 0``.  This line is what the
    Skellam release kind accounts and exports (``ZCDpEvent(rho, xi)``): the
    integer-order restriction of the theorem costs the additive ρ.

    Args: See :func:`skellam_rdp`.

    Returns:
        ``(rho, xi)`` rounded up by 1e-12; ``(0, 0)`` when a sensitivity is 0.
    """
    mu, d2, d1 = _check_skellam_args(
        num_clients, poisson_mean, l2_sensitivity, l1_sensitivity, dimension
    )
    if d2 == 0.0 or d1 == 0.0:
        return 0.0, 0.0
    rho = d2 * d2 / (2.0 * mu) * (1.0 + 1.0 / mu)
    xi = d2 * d2 / (2.0 * mu) + (d2 * d2 + 6.0 * d1) / (4.0 * mu * mu)
    return rho * _SAFE, xi * _SAFE


# =========================================================================================
# RDP -> (ε, δ)
# =========================================================================================


def _curve(
    rdp: Sequence[float] | npt.NDArray[np.float64], orders: Sequence[float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    alpha = check_orders(orders)
    try:
        values = np.asarray(rdp, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterTypeError("rdp", "a sequence of floats >= 0", rdp) from None
    if values.shape != alpha.shape:
        raise ParameterError("rdp", f"a sequence of {alpha.size} values (one per order)", rdp)
    if np.any(np.isnan(values)) or np.any(values < 0.0):
        raise ParameterError("rdp", "a sequence of floats >= 0 (inf allowed)", rdp)
    return alpha, values


def rdp_epsilon(
    rdp: Sequence[float] | npt.NDArray[np.float64],
    delta: float,
    *,
    orders: Sequence[float] = RDP_ORDERS,
) -> float:
    """ε at ``delta`` of a mechanism with RDP curve ``rdp`` at ``orders`` (conservative).

    Conversion of Canonne, Kamath & Steinke (2020, arXiv:2004.00010, Prop. 12;
    also Asoodeh et al. 2021): (α, r)-RDP implies (ε, δ)-DP with
    ``ε = r + log((α−1)/α) − (log δ + log α)/(α−1)``, minimised over the grid;
    and ε = 0 when ``δ >= sqrt(1 − e^(−r))`` (Bretagnolle–Huber with KL <= r).
    This is the conversion dp-accounting uses; the result is rounded up by a
    relative 1e-12 plus 1e-15.

    Args:
        rdp: ε(α) >= 0 per order (``inf`` allowed).
        delta: In (0, 1).
        orders: The orders (default :data:`RDP_ORDERS`, the ledger's grid).

    Returns:
        ε >= 0 (``inf`` when no order gives a finite bound).
    """
    alpha, values = _curve(rdp, orders)
    dlt = check_delta(delta)
    log_delta = math.log(dlt)
    best = math.inf
    for a, r in zip(alpha.tolist(), values.tolist(), strict=True):
        if not math.isfinite(r):
            continue
        if dlt * dlt + math.expm1(-r) > 0.0:
            return 0.0
        eps = r + math.log1p(-1.0 / a) - (log_delta + math.log(a)) / (a - 1.0)
        best = min(best, eps)
    if not math.isfinite(best):
        return math.inf
    return max(0.0, best * _SAFE + 1e-15)


def rdp_delta(
    rdp: Sequence[float] | npt.NDArray[np.float64],
    epsilon: float,
    *,
    orders: Sequence[float] = RDP_ORDERS,
) -> float:
    """δ at ``epsilon`` of a mechanism with RDP curve ``rdp`` (conservative).

    The same conversion as :func:`rdp_epsilon`, solved for δ:
    ``δ = min_α exp((α−1)(r − ε + log(1 − 1/α)) − log α)``, and
    ``sqrt(1 − e^(−r))``; capped at 1, rounded up by a relative 1e-12.

    Args:
        rdp: ε(α) >= 0 per order.
        epsilon: ε >= 0, finite.
        orders: See :func:`rdp_epsilon`.
    """
    alpha, values = _curve(rdp, orders)
    eps = check_finite_nonnegative("epsilon", epsilon)
    best = math.inf
    for a, r in zip(alpha.tolist(), values.tolist(), strict=True):
        if not math.isfinite(r):
            continue
        log_delta = 0.5 * math.log1p(-math.exp(-r)) if r > 0.0 else -math.inf
        bound = (a - 1.0) * (r - eps + math.log1p(-1.0 / a)) - math.log(a)
        best = min(best, log_delta, bound)
    if best == -math.inf:
        return 0.0
    if not math.isfinite(best):
        return 1.0
    return min(1.0, math.exp(best) * _SAFE)


# =========================================================================================
# Calibration
# =========================================================================================


def _round_up(value: float) -> float:
    """``value`` rounded up to a 17-bit mantissa (relative increase < 2**-16)."""
    mantissa, exponent = math.frexp(value)
    return math.ldexp(math.ceil(mantissa * 2**_MANTISSA_BITS), exponent - _MANTISSA_BITS)


def _meets(curve: npt.NDArray[np.float64], epsilon: float, delta: float) -> bool:
    """Both our ε and dp-accounting's δ (the ledger's budget test) meet the target."""
    if rdp_epsilon(curve, delta) > epsilon:
        return False
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    spent, _ = rdp_lib.compute_delta(list(RDP_ORDERS), [float(v) for v in curve], epsilon)
    return float(spent) <= delta


def _calibrate(
    curve_of: Callable[[float], npt.NDArray[np.float64]],
    epsilon: float,
    delta: float,
    lower: float,
    upper: float,
    guess: float,
    name: str,
) -> float:
    """Smallest parameter p in [lower, upper] whose curve meets (ε, δ); safe end, rounded up."""

    def ok(p: float) -> bool:
        return rdp_epsilon(curve_of(p), delta) <= epsilon

    hi = min(max(guess, lower), upper)
    while not ok(hi):
        if hi >= upper:
            raise CalibrationError(
                f"no {name} up to {upper:g} meets epsilon={epsilon:g} at delta={delta:g}"
            )
        hi = min(hi * 2.0, upper)
    if ok(lower):
        hi = lower
    else:
        lo = hi
        while ok(lo):  # invariant: ok(hi)
            hi = lo
            lo = max(lo / 2.0, lower)
        for _ in range(200):
            if hi - lo <= 1e-10 * hi:
                break
            mid = math.sqrt(lo * hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
    value = _round_up(hi)
    for _ in range(10_000):
        if value <= upper and _meets(curve_of(value), epsilon, delta):
            return value
        value = _round_up(math.nextafter(value * (1.0 + 2.0**-16), math.inf))
    raise CalibrationError(f"could not certify the calibrated {name}")


def _check_calibration(
    epsilon: object,
    delta: object,
    l2_sensitivity: object,
    dimension: object,
    num_clients: object,
    l1_sensitivity: float | None,
) -> tuple[float, float, float, int, int]:
    """``(ε, δ, Δ₂, n, d)`` of a calibration, checked in this order (Δ₁ against them)."""
    eps = check_finite_positive("epsilon", epsilon)
    dlt = check_delta(delta)
    d2 = check_finite_positive("l2_sensitivity", l2_sensitivity)
    n = _check_clients(num_clients)
    d = check_count("dimension", dimension, minimum=1)
    effective_sensitivities(d2, l1_sensitivity, d)
    return eps, dlt, d2, n, d


def calibrate_distributed_discrete_gaussian(
    epsilon: float,
    delta: float,
    *,
    l2_sensitivity: float,
    dimension: int,
    num_clients: int,
    l1_sensitivity: float | None = None,
) -> float:
    """The smallest per-client σ (grid units) making the distributed discrete Gaussian (ε, δ)-DP.

    Bisection (relative 1e-10, safe end) on the :func:`ddg_rdp` curve converted
    with :func:`rdp_epsilon` on :data:`RDP_ORDERS`, then rounded *up* to a
    17-bit mantissa and re-checked against our ε and dp-accounting's
    ``compute_delta`` (what :class:`privfed.dp.PrivacyLedger` tests a budget
    with), nudging up until both hold.  So a
    :class:`~privfed.dp.releases.distributed_gaussian.DistributedDiscreteGaussianRelease`
    with this σ fits in a ledger with budget (ε, δ).

    Args:
        epsilon: Target ε, finite, > 0.
        delta: Target δ, in (0, 1).
        l2_sensitivity: Δ₂ of the integer total in grid units, > 0.
        dimension: d >= 1.
        num_clients: Minimum number of honest contributors n_min (see
            :func:`min_honest_contributors`), in ``[1, 2**20]``.
        l1_sensitivity: Δ₁ in grid units, or ``None``.

    Returns:
        σ >= 0.5, each client's ``N_Z(0, σ²)`` parameter.

    Raises:
        ParameterError: A value outside its domain (Δ₂ must be > 0).
        CalibrationError: No σ up to 2**40 meets the target.
    """
    eps, dlt, d2, n, d = _check_calibration(
        epsilon, delta, l2_sensitivity, dimension, num_clients, l1_sensitivity
    )

    def curve_of(sigma: float) -> npt.NDArray[np.float64]:
        return ddg_rdp(
            RDP_ORDERS,
            num_clients=n,
            noise_std=sigma,
            l2_sensitivity=d2,
            dimension=d,
            l1_sensitivity=l1_sensitivity,
        )

    guess = d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / (eps * math.sqrt(n))
    return _calibrate(curve_of, eps, dlt, DDG_MIN_NOISE_STD, 2.0**40, guess, "noise_std")


def calibrate_distributed_skellam(
    epsilon: float,
    delta: float,
    *,
    l2_sensitivity: float,
    dimension: int,
    num_clients: int,
    l1_sensitivity: float | None = None,
) -> float:
    """The smallest per-client Poisson mean λ making the distributed Skellam (ε, δ)-DP.

    Accounted on the :func:`skellam_zcdp` line (what the Skellam release kind
    records), bisected, rounded up to a 17-bit mantissa and re-checked like
    :func:`calibrate_distributed_discrete_gaussian`.

    Args: As :func:`calibrate_distributed_discrete_gaussian`.

    Returns:
        λ > 0: each client adds ``Poisson(λ) − Poisson(λ)`` (variance 2λ).

    Raises:
        ParameterError: A value outside its domain.
        CalibrationError: No λ up to 2**80 meets the target.
    """
    eps, dlt, d2, n, d = _check_calibration(
        epsilon, delta, l2_sensitivity, dimension, num_clients, l1_sensitivity
    )
    alpha = np.asarray(RDP_ORDERS, dtype=np.float64)

    def curve_of(lam: float) -> npt.NDArray[np.float64]:
        rho, xi = skellam_zcdp(
            num_clients=n,
            poisson_mean=lam,
            l2_sensitivity=d2,
            dimension=d,
            l1_sensitivity=l1_sensitivity,
        )
        return np.asarray(xi + rho * alpha, dtype=np.float64)

    sigma = d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    guess = sigma * sigma / (2.0 * n)
    return _calibrate(curve_of, eps, dlt, 2.0**-60, 2.0**80, guess, "poisson_mean")


# =========================================================================================
# Honest contributors and the ring
# =========================================================================================


def min_honest_contributors(
    threshold: int, corrupted: int, *, num_clients: int | None = None
) -> int:
    """The fewest honest clients whose noise a secure-aggregation total is guaranteed to hold.

    Threat model: privfed's secure aggregation (Bonawitz et al. / SecAgg+)
    releases a total only over a set of at least ``threshold`` surviving
    clients (every participating client checks that at least t of its
    neighbourhood survive before it helps unmask, see SECURITY.md), against a
    server that follows the protocol (or lies about dropouts, with ``t`` chosen
    as SECURITY.md says).  Only clients whose masked input is summed add noise
    to the total, and up to ``corrupted`` of those may collude with the server:
    they know (and can subtract) their own noise, or add none.  So at least
    ``t − c`` honest noise shares are in every released total, and the
    distributed accounting must use ``num_clients = t − c``.

    Args:
        threshold: t, the Shamir threshold (an int >= 1).
        corrupted: c, the number of clients assumed corrupted (an int >= 0).
        num_clients: The number of clients in the round, to check ``t`` and
            ``c`` against (optional).

    Returns:
        ``t − c`` (>= 1).

    Raises:
        ParameterError: ``t − c < 1`` (no honest noise is guaranteed: refused),
            or t or c exceeds ``num_clients``.
    """
    t = check_int("threshold", threshold, minimum=1, numpy=True)
    c = check_int("corrupted", corrupted, minimum=0, numpy=True)
    if num_clients is not None:
        total = check_int("num_clients", num_clients, minimum=1, numpy=True)
        if t > total:
            raise ParameterError("threshold", f"an int in [1, num_clients={total}]", t)
        if c > total:
            raise ParameterError("corrupted", f"an int in [0, num_clients={total}]", c)
    if t - c < 1:
        raise ParameterError(
            "corrupted",
            f"an int < threshold={t} (at least one honest noise share must be summed)",
            c,
            detail="the configuration guarantees no honest contributor",
        )
    return t - c


def _log_tail(mechanism: str, noise: float, summands: int, t: float) -> float:
    """log of a bound on P[S >= t] for S the sum of ``summands`` noise draws (t > 0)."""
    if mechanism == "discrete-gaussian":
        # N_Z(0, σ²) is σ²-subgaussian (Canonne, Kamath & Steinke 2020), so S is nσ²-subgaussian.
        return -(t * t) / (2.0 * summands * noise * noise)
    # Skellam(nλ, nλ): E e^{sS} = exp(M(cosh s − 1)), M = 2nλ; Chernoff at s = asinh(t/M).
    big_m = 2.0 * summands * noise
    ratio = t / big_m
    return -(t * math.asinh(ratio) - big_m * (math.hypot(1.0, ratio) - 1.0))


def wrap_probability(
    *,
    ring_bits: int,
    mechanism: DistributedMechanism,
    noise: float,
    num_summands: int,
    total_bound: int,
    dimension: int,
) -> float:
    """An upper bound on the probability that a noisy total wraps around ``Z_{2**k}``.

    The total of coordinate j is ``x_j + Σ_i Z_ij`` with ``|x_j| <= B`` (the
    exact integer total, grid units) and ``Z_ij`` the noise of the
    ``num_summands`` clients whose inputs are summed (every summed client, not
    only the honest ones, assumed to follow the protocol).  It decodes
    correctly iff it lies in the signed range ``[−2**(k−1), 2**(k−1))``, so a
    wrap needs ``|Σ_i Z_ij| >= t = 2**(k−1) − B`` for some j.  Union bound over
    the d coordinates and both signs, with the tail of the sum:

    * discrete Gaussian: each draw is σ²-subgaussian, so
      ``P[|S| >= t] <= 2·exp(−t²/(2nσ²))``;
    * Skellam: the exact Chernoff bound of ``Skellam(nλ, nλ)``,
      ``P[S >= t] <= exp(−(t·asinh(t/M) − (√(M² + t²) − M)))`` with ``M = 2nλ``.

    Args:
        ring_bits: k, an int in ``[2, 64]``.
        mechanism: ``"discrete-gaussian"`` (noise = σ) or ``"skellam"`` (noise = λ).
        noise: Per-client σ or λ, finite, > 0.
        num_summands: The most clients whose noisy inputs are summed, >= 1.
        total_bound: B >= 0, the bound on every coordinate of the exact total.
        dimension: d >= 1.

    Returns:
        The bound in [0, 1] (exponent rounded in the safe direction); it
        underflows to 0.0 below about ``exp(-745)``: write
        :func:`log_wrap_probability` instead.
    """
    return math.exp(
        log_wrap_probability(
            ring_bits=ring_bits,
            mechanism=mechanism,
            noise=noise,
            num_summands=num_summands,
            total_bound=total_bound,
            dimension=dimension,
        )
    )


def log_wrap_probability(
    *,
    ring_bits: int,
    mechanism: DistributedMechanism,
    noise: float,
    num_summands: int,
    total_bound: int,
    dimension: int,
) -> float:
    """The natural log of the :func:`wrap_probability` bound (<= 0; never underflows).

    Args: As :func:`wrap_probability`.

    Returns:
        ``log p`` in ``[-inf, 0]``: 0 when the bound is 1 (e.g. ``B >= 2**(k−1)``).
    """
    k = check_int("ring_bits", ring_bits, minimum=2, maximum=64, numpy=True)
    kind = check_choice("mechanism", mechanism, _MECHANISMS)
    value = check_finite_positive("noise", noise)
    n = check_count("num_summands", num_summands, minimum=1)
    bound = check_int("total_bound", total_bound, minimum=0, numpy=True)
    d = check_count("dimension", dimension, minimum=1)
    t = (1 << (k - 1)) - bound
    if t <= 0:
        return 0.0
    log_p = math.log(2.0 * d) + _log_tail(kind, value, n, float(t)) * (1.0 - 1e-12)
    return min(log_p, 0.0)


def check_ring(
    *,
    ring_bits: int,
    mechanism: DistributedMechanism,
    noise: float,
    num_summands: int,
    total_bound: int,
    dimension: int,
    limit: float = WRAP_PROBABILITY_LIMIT,
) -> float:
    """Refuse a ring too small for a noisy total; return the wrap bound otherwise.

    Args: As :func:`wrap_probability`, plus ``limit``: the largest acceptable
        wrap probability, in (0, 1) (default ``2**-40``).

    Returns:
        The :func:`wrap_probability` bound, <= ``limit``.

    Raises:
        RingOverflowError: The bound exceeds ``limit``: use more ring bits, a
            coarser grid (smaller B and σ in grid units) or less noise.
    """
    cap = _check_wrap_limit(limit)
    p = wrap_probability(
        ring_bits=ring_bits,
        mechanism=mechanism,
        noise=noise,
        num_summands=num_summands,
        total_bound=total_bound,
        dimension=dimension,
    )
    return _refuse_wrap(ring_bits, p, cap)


def _check_wrap_limit(limit: object) -> float:
    """``limit``: the largest acceptable wrap probability, a float in (0, 1)."""
    return check_float("limit", limit, low=0.0, high=1.0, open_low=True, open_high=True)


def _refuse_wrap(ring_bits: int, p: float, limit: float) -> float:
    """Return the wrap bound ``p``; refuse the ring when it exceeds ``limit``.

    Raises:
        RingOverflowError: ``p > limit``.
    """
    if p > limit:
        raise RingOverflowError(
            "ring_bits",
            f"enough bits for a wrap probability <= {limit:.3g}",
            ring_bits,
            detail=f"the noisy total wraps with probability up to {p:.3g}",
        )
    return p
