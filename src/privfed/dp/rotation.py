"""The randomized Walsh–Hadamard rotation of distributed DP training (pure numpy).

A client's clipped update ``x`` (``D`` values) is padded with zeros to
``d = 2**k >= D`` and rotated to ``y = H·S·x / √d``: ``S`` a diagonal of random
signs, ``H`` the ``d × d`` Sylvester–Hadamard matrix (entries ±1).  ``H/√d`` is
orthogonal and its own inverse, so the rotation keeps the L2 norm (the clip
bound holds after it) and the server undoes it on the noisy sum with
``x = S·H·y / √d`` (then drops the padding).  Kairouz, Liu & Steinke (2021)
and Agarwal, Kairouz & Liu (2021) rotate so that each coordinate of ``y`` is
small with high probability: for a fixed ``x`` and uniform signs,
``y_i = Σ_j H_ij s_j x_j / √d`` is a Rademacher sum, sub-Gaussian with
variance proxy ``‖x‖²/d`` (Hoeffding), whatever ``x`` looks like.  That is what
bounds the wrap-around of a small ring (:mod:`privfed.dp.training`).

The signs come from a *public* per-round seed (the server's session nonce):
they need not be secret -- privacy rests on the noise -- but they must not be
known to whoever computes the update before it is computed, or the
sub-Gaussian bound (a utility statement, never a privacy one) would not hold.
The sign stream is SHAKE-256 of a domain tag and the seed: any party derives
the same signs from the same seed.
"""

from __future__ import annotations

import hashlib
from typing import Final

import numpy as np
import numpy.typing as npt

from privfed._checks import check_bytes, check_count
from privfed.errors import ParameterError

__all__ = [
    "MAX_ROTATION_DIMENSION",
    "hadamard_dimension",
    "random_signs",
    "rotate",
    "unrotate",
    "walsh_hadamard",
]

#: The largest padded dimension (``2**26`` values, 512 MiB of float64).
MAX_ROTATION_DIMENSION: Final = 2**26
_DOMAIN: Final = b"privfed.dp.rotation/signs/v1/"


def hadamard_dimension(size: int) -> int:
    """The padded dimension ``d``: the smallest power of two ``>= size`` (``size >= 1``).

    Raises:
        ParameterError: ``size`` is not an int in ``[1, 2**26]``.
    """
    n = check_count("size", size, minimum=1)
    if n > MAX_ROTATION_DIMENSION:
        raise ParameterError("size", f"an int in [1, {MAX_ROTATION_DIMENSION}]", n)
    return 1 << (n - 1).bit_length()


def random_signs(seed: bytes, dimension: int) -> npt.NDArray[np.float64]:
    """``dimension`` signs ±1 (float64) from the public ``seed`` (deterministic).

    Args:
        seed: The round's public seed, 16 to 64 bytes.
        dimension: ``d``, a power of two.
    """
    key = check_bytes("seed", seed, min_size=16, max_size=64)
    d = _check_power_of_two(dimension)
    stream = hashlib.shake_256(_DOMAIN + len(key).to_bytes(1, "big") + key).digest((d + 7) // 8)
    bits = np.unpackbits(np.frombuffer(stream, dtype=np.uint8))[:d]
    return 1.0 - 2.0 * bits.astype(np.float64)


def _check_power_of_two(dimension: object) -> int:
    d = check_count("dimension", dimension, minimum=1)
    if d & (d - 1) or d > MAX_ROTATION_DIMENSION:
        raise ParameterError("dimension", f"a power of two in [1, {MAX_ROTATION_DIMENSION}]", d)
    return d


def walsh_hadamard(values: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """``H·v`` for the Sylvester–Hadamard matrix ``H`` (unnormalised), in ``O(d log d)``.

    Args:
        values: A 1-D array whose length is a power of two.

    Returns:
        A fresh float64 array (``H·H = d·I``).
    """
    out = np.array(values, dtype=np.float64, copy=True)
    if out.ndim != 1:
        raise ParameterError("values", "a 1-D array", out.shape)
    d = _check_power_of_two(out.size)
    h = 1
    while h < d:
        pairs = out.reshape(-1, 2, h)
        first = pairs[:, 0, :].copy()
        pairs[:, 0, :] += pairs[:, 1, :]
        pairs[:, 1, :] = first - pairs[:, 1, :]
        h *= 2
    return out


def rotate(values: npt.NDArray[np.floating], seed: bytes) -> npt.NDArray[np.float64]:
    """``H·S·pad(x) / √d``: the rotated update (same L2 norm, ``d`` values).

    Args:
        values: The 1-D update ``x`` (finite floats).
        seed: The round's public seed (:func:`random_signs`).
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    d = hadamard_dimension(x.size)
    padded = np.zeros(d, dtype=np.float64)
    padded[: x.size] = x
    padded *= random_signs(seed, d)
    out: npt.NDArray[np.float64] = walsh_hadamard(padded) / np.sqrt(d)
    return out


def unrotate(values: npt.NDArray[np.floating], seed: bytes, size: int) -> npt.NDArray[np.float64]:
    """The inverse of :func:`rotate`: ``S·H·y / √d``, truncated to the first ``size`` values.

    Args:
        values: The rotated vector (``d`` values, a power of two).
        seed: The seed it was rotated with.
        size: ``D``, the length of the original update (``<= d``).
    """
    y = np.asarray(values, dtype=np.float64).reshape(-1)
    d = _check_power_of_two(y.size)
    n = check_count("size", size, minimum=1)
    if n > d:
        raise ParameterError("size", f"an int in [1, {d}]", n)
    x = walsh_hadamard(y) / np.sqrt(d)
    x *= random_signs(seed, d)
    out: npt.NDArray[np.float64] = x[:n]
    return out
