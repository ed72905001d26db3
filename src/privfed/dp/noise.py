"""Privacy noise drawn from a cryptographically secure stream.

Every sampler here reads its randomness from a ChaCha20 keystream
(:mod:`cryptography`).  By default the 256-bit key comes from
:func:`os.urandom`, so the noise is unpredictable even to someone who knows
every previous output.  A ``seed`` (an ``int >= 0`` or ``bytes``) may be passed
*explicitly* for reproducible experiments and tests; it is stretched with
SHA-256 under a domain-separation label into the key, and the caller must
record that the release was seeded (see :class:`privfed.dp.ledger.GaussianRelease`).
Seeds never appear in messages or reprs.

How each sampler is accounted, for a trusted server that adds noise to exact
totals:

* :func:`gaussian_noise` -- continuous ``N(0, σ²)`` in float64.  The analytic
  Gaussian accounting applies to the real-valued mechanism; adding it to
  floating-point data is exposed to the floating-point attacks of Mironov
  (CCS 2012), so prefer the rounded sampler on integer totals when the data
  are fixed-point.
* :func:`rounded_gaussian` -- ``round(σ·N)`` as int64.  For an integer total x,
  ``x + round(σN) = round(x + σN)``: the release is post-processing of the
  continuous Gaussian mechanism, so it is accounted *exactly* like
  :func:`gaussian_noise` with noise std σ in grid units (sensitivity in grid
  units too), and the output carries no data-dependent float representation.
* :func:`discrete_gaussian` -- the discrete Gaussian ``N_Z(0, σ²)``
  (Canonne, Kamath & Steinke 2020, arXiv:2004.00010, Algorithm 3).  Its
  guarantee is *not* the continuous one: it is ``Δ²/(2σ²)``-zCDP (ibid.,
  Theorem 14) and, in one dimension, exactly accounted by dp-accounting's
  ``pld.from_discrete_gaussian_mechanism``.  Sums of discrete or rounded
  Gaussians from several clients are not Gaussian and need their own analysis
  (Kairouz, Liu & Steinke 2021, arXiv:2102.06387).

Unit conversion: all samplers return values with mean 0; ``noise_std`` and
``scale`` are standard deviations in the units of the array the noise is added
to (grid units for the integer samplers).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from privfed._checks import check_finite_nonnegative, check_finite_positive
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "DISCRETE_GAUSSIAN_SAMPLER",
    "GAUSSIAN_SAMPLER",
    "MAX_INTEGER_SCALE",
    "ROUNDED_GAUSSIAN_SAMPLER",
    "Seed",
    "discrete_gaussian",
    "gaussian_noise",
    "rounded_gaussian",
]

#: Sampler names to record in a ledger, one per function of this module.
GAUSSIAN_SAMPLER: Final = "chacha20-gaussian"
ROUNDED_GAUSSIAN_SAMPLER: Final = "chacha20-rounded-gaussian"
DISCRETE_GAUSSIAN_SAMPLER: Final = "chacha20-discrete-gaussian"

#: Largest ``scale`` accepted by the integer samplers: keeps every draw far
#: inside int64 and the grid arithmetic exact in float64.
MAX_INTEGER_SCALE: Final = float(2**40)

#: A seed for reproducible noise: a non-negative int or bytes.
Seed = int | bytes

_DOMAIN = b"privfed.dp.noise/v1/"
_TWO_POW_MINUS_53: Final = 2.0**-53
_LN2: Final = math.log(2.0)
_53_LN2: Final = 53.0 * math.log(2.0)


def check_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    """``shape``: an int or a sequence of ints, every dimension >= 0 (shared with
    :mod:`privfed.dp.samplers`)."""
    if isinstance(shape, bool):
        raise ParameterTypeError("shape", "an int or a sequence of ints", shape)
    if isinstance(shape, int | np.integer):
        dims: tuple[int, ...] = (int(shape),)
    else:
        try:
            items = tuple(shape)
        except TypeError:
            raise ParameterTypeError("shape", "an int or a sequence of ints", shape) from None
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int | np.integer):
                raise ParameterTypeError("shape", "an int or a sequence of ints", shape)
        dims = tuple(int(item) for item in items)
    if any(dim < 0 for dim in dims):
        raise ParameterError("shape", "non-negative dimensions", dims)
    return dims


def stream_key(domain: bytes, label: bytes, seed: Seed | None) -> bytes:
    """The 256-bit ChaCha20 key of one stream: SHA-256 of ``domain``, ``label``, ``seed``.

    ``seed=None`` gives a fresh key from :func:`os.urandom`.  Shared with
    :mod:`privfed.dp.samplers`, which passes its own ``domain``.
    """
    if seed is None:
        return os.urandom(32)
    if isinstance(seed, bool):
        raise ParameterTypeError("seed", "an int >= 0, bytes or None", seed)
    if isinstance(seed, int):
        if seed < 0:
            raise ParameterError("seed", "an int >= 0, bytes or None", None, secret=True)
        material = b"int:" + seed.to_bytes((seed.bit_length() + 7) // 8 or 1, "big")
    elif isinstance(seed, bytes):
        material = b"bytes:" + seed
    else:
        raise ParameterTypeError("seed", "an int >= 0, bytes or None", seed)
    return hashlib.sha256(domain + label + b"/" + material).digest()


class _KeyStream:
    """A ChaCha20 keystream keyed by :func:`stream_key` under ``domain`` (never shows its key).

    Shared with :mod:`privfed.dp.samplers`, whose streams pass their own domain.
    """

    __slots__ = ("_encryptor",)

    def __init__(self, label: bytes, seed: Seed | None, domain: bytes = _DOMAIN) -> None:
        # A fresh key per stream, so a fixed all-zero nonce is safe.
        cipher = Cipher(algorithms.ChaCha20(stream_key(domain, label, seed), bytes(16)), mode=None)
        self._encryptor = cipher.encryptor()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<redacted>)"

    def raw(self, count: int) -> bytes:
        """The next ``count`` bytes of the keystream."""
        return self._encryptor.update(bytes(count))


class _Stream(_KeyStream):
    """A ChaCha20 keystream read as uint64 words."""

    __slots__ = ()

    def words(self, count: int) -> npt.NDArray[np.uint64]:
        data = self._encryptor.update(bytes(8 * count))
        return np.frombuffer(data, dtype="<u8").astype(np.uint64, copy=False)

    def uniform(self, count: int) -> npt.NDArray[np.float64]:
        """Uniforms on the open interval (0, 1), 53-bit resolution."""
        top = (self.words(count) >> np.uint64(11)).astype(np.float64)
        return (top + 0.5) * _TWO_POW_MINUS_53

    def exponential(self, count: int) -> npt.NDArray[np.float64]:
        """Standard exponentials ``−ln U`` with *unbounded* support.

        ``U`` is built as ``(J + U′)·2^-53`` with ``J`` a 53-bit integer and
        ``U′`` an independent uniform; when ``J == 0`` (probability 2^-53) the
        result is ``53·ln 2`` plus a fresh exponential, by memorylessness.  So
        every tail value is reachable with its exact probability instead of
        stopping at ``−ln(2^-54) ≈ 37.4``, and the uniform keeps about 53
        significant bits however close to 0 it is.
        """
        out = np.zeros(count, dtype=np.float64)
        pending = np.arange(count)
        while pending.size:
            j = (self.words(pending.size) >> np.uint64(11)).astype(np.float64)
            zero = j == 0.0
            out[pending[zero]] += _53_LN2
            done = pending[~zero]
            fine = self.uniform(done.size)
            out[done] -= np.log((j[~zero] + fine) * _TWO_POW_MINUS_53)
            pending = pending[zero]
        return np.maximum(out, 0.0)

    def normal(self, count: int) -> npt.NDArray[np.float64]:
        """Standard normals by inversion of a half-normal plus an independent sign.

        The magnitude is ``−Φ⁻¹(U/2)`` evaluated as ``−ndtri_exp(−E − ln 2)``
        with ``E = −ln U`` from :meth:`exponential`, so the support is
        unbounded and the tail keeps full relative resolution at any depth.
        A sampler whose tail stopped at a fixed ``z_max`` (about 8.3 for a
        53-bit uniform) would add ``Φ(μ − z_max)`` to the δ of a release with
        GDP parameter μ -- far over budget at large ε or tiny δ.
        """
        # Imported here, not with the module: scipy.special takes ~0.4 s to import.
        from scipy.special import ndtri_exp

        magnitude = -ndtri_exp(-self.exponential(count) - _LN2)
        sign = 1.0 - 2.0 * (self.words(count) & np.uint64(1)).astype(np.float64)
        return np.asarray(sign * magnitude, dtype=np.float64)


def gaussian_noise(
    shape: int | Sequence[int], noise_std: float, *, seed: Seed | None = None
) -> npt.NDArray[np.float64]:
    """Draw i.i.d. ``N(0, noise_std²)`` noise from a CSPRNG.

    Args:
        shape: Output shape (an int or a sequence of non-negative ints).
        noise_std: Standard deviation σ in the units of the data; finite, >= 0.
        seed: ``None`` (default) for fresh OS randomness; an ``int >= 0`` or
            ``bytes`` for a reproducible stream -- record ``seeded=True`` in
            the ledger when you pass one.

    Returns:
        float64 array of ``shape``.  Accounted as the continuous Gaussian
        mechanism with std σ (see the module notes on floating point).
    """
    dims = check_shape(shape)
    sigma = check_finite_nonnegative("noise_std", noise_std)
    stream = _Stream(b"gaussian", seed)
    count = math.prod(dims)
    return (sigma * stream.normal(count)).reshape(dims)


def _integer_noise_setup(
    shape: int | Sequence[int], scale: float, label: bytes, seed: Seed | None
) -> tuple[tuple[int, ...], float, _Stream, int]:
    """Checked shape and scale of an integer sampler, its stream, and the draw count."""
    dims = check_shape(shape)
    sigma = check_finite_positive("scale", scale)
    if sigma > MAX_INTEGER_SCALE:
        raise ParameterError("scale", f"a finite float in (0, {MAX_INTEGER_SCALE:.0f}]", scale)
    return dims, sigma, _Stream(label, seed), math.prod(dims)


def rounded_gaussian(
    shape: int | Sequence[int], scale: float, *, seed: Seed | None = None
) -> npt.NDArray[np.int64]:
    """Draw ``round(scale · N(0, 1))`` as int64 (ties to even) from a CSPRNG.

    Adding this to an exact integer total is post-processing of the continuous
    Gaussian mechanism with std ``scale`` (in grid units), so the analytic
    Gaussian accounting applies unchanged.  For ``scale >= 1`` the variance
    is ``scale² + 1/12`` up to exponentially small terms; for small scales
    most draws round to 0 and the variance is smaller.

    Args:
        shape: Output shape.
        scale: σ in grid units; finite, in (0, 2**40].
        seed: See :func:`gaussian_noise`.

    Returns:
        int64 array of ``shape``.
    """
    dims, sigma, stream, count = _integer_noise_setup(shape, scale, b"rounded-gaussian", seed)
    return np.rint(sigma * stream.normal(count)).astype(np.int64).reshape(dims)


def discrete_gaussian(
    shape: int | Sequence[int], scale: float, *, seed: Seed | None = None
) -> npt.NDArray[np.int64]:
    """Draw i.i.d. discrete Gaussians ``N_Z(0, scale²)`` from a CSPRNG.

    ``P[X = x] ∝ exp(−x²/(2·scale²))`` on the integers.  The algorithm is the
    rejection sampler of Canonne, Kamath & Steinke (2020, arXiv:2004.00010,
    Algorithm 3): a discrete Laplace proposal with parameter
    ``t = floor(scale) + 1`` (a signed geometric ``floor(t·E)``, with ``E`` an
    exponential of unbounded support, so the proposal's tail is not cut off),
    accepted with probability ``exp(−(|Y| − scale²/t)²/(2·scale²))``; whole
    batches are drawn and tested at once.  The acceptance tests and the
    geometric draw are evaluated in double precision against 53-bit
    uniforms, so each test errs by at most a few units of 2^-53 in
    probability; the output law is within that order of the exact discrete
    Gaussian per draw (the paper's sampler is exact with rational arithmetic,
    at far higher cost).

    Its variance is slightly below ``scale²``.  Accounting: see the module
    notes -- it is *not* accounted as the continuous Gaussian.  Arguments and
    result as :func:`rounded_gaussian` (``scale`` is the σ parameter).
    """
    dims, sigma, stream, count = _integer_noise_setup(shape, scale, b"discrete-gaussian", seed)
    t = math.floor(sigma) + 1.0
    sigma2 = sigma * sigma
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        need = count - filled
        batch = int(need * 1.7) + 64
        # Geometric with P[X >= k] = exp(-k/t): floor(t·E), E ~ Exp(1) with
        # unbounded support (a 53-bit uniform would cut the proposal at ~37t).
        geometric = np.floor(t * stream.exponential(batch))
        negative = (stream.words(batch) & np.uint64(1)).astype(bool)
        valid = ~(negative & (geometric == 0.0))
        deviation = geometric - sigma2 / t
        accept_prob = np.exp(-(deviation * deviation) / (2.0 * sigma2))
        accepted = valid & (stream.uniform(batch) < accept_prob)
        values = np.where(negative, -geometric, geometric)[accepted]
        take = min(values.size, need)
        out[filled : filled + take] = values[:take].astype(np.int64)
        filled += take
    return out.reshape(dims)
