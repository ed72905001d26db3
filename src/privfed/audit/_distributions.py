"""Light replacements for the scipy.stats (and one scipy.special) calls of the audit.

Importing ``scipy.stats`` takes about a second (it loads scipy.optimize,
scipy.integrate, scipy.interpolate and scipy.ndimage on the way), a large
share of a default ``privfed run``.  The audit only needs mid-ranks, normal
quantiles and beta quantiles, and ``scipy.stats`` computes the latter two with
ufuncs from ``scipy.special`` (which :mod:`privfed.dp` loads anyway).  This
module calls those ufuncs directly, with the same arguments, so each function
returns the same floats as the call it replaces
(tests/audit/test_audit_distributions.py compares them with ``==``):

* :func:`midranks` is ``scipy.stats.rankdata(x)`` (``method="average"``);
  mid-ranks are half-integers, exact in float64, so any correct algorithm
  gives identical bits.
* :func:`normal_ppf` / :func:`normal_isf` are ``stats.norm.ppf`` / ``isf``,
  which are ``ndtri(q)`` and ``-ndtri(q)``; :func:`normal_logpdf` is
  ``stats.norm.logpdf(x, loc, scale)`` for finite x and loc and scale > 0
  (the same arithmetic, in numpy alone).
* :func:`beta_isf` is ``stats.beta.isf``, which is ``betainccinv(a, b, q)``.
* :func:`beta_ppf` is ``stats.beta.ppf``.  scipy evaluates that with a private
  ufunc (``scipy.special._ufuncs._beta_ppf``); the public ``betaincinv`` runs
  the same inversion and returned the same bits for every lower tail from
  ``1e-60`` to 1 tried (about 3·10⁶ random shapes with scipy 1.17; the tests
  repeat 5·10⁴ of them), far below ``2**-54``, the smallest tail a confidence
  level in (0, 1) gives.  From ``q ~ 1e-100`` down the two part: the private
  ufunc's root search gives up there and can return a wrong finite value
  where ``betaincinv`` returns NaN.
* :func:`logsumexp_rows` is ``scipy.special.logsumexp(a, axis=1)``: the same
  operations in the same order, without scipy's array-API layers (which
  evaluate every exponential twice).

``scipy.stats`` adds ``0.0`` (``loc``) to every quantile, turning ``-0.0`` into
``0.0``; these functions do the same.  The arguments are not validated: the
callers pass probabilities in [0, 1] and shapes > 0.  scipy.special is
imported on first call, not with the module (``import privfed.audit`` stays
free of it).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "beta_isf",
    "beta_ppf",
    "logsumexp_rows",
    "midranks",
    "normal_isf",
    "normal_logpdf",
    "normal_ppf",
]

#: log √(2π), computed as scipy.stats computes its normal density's constant.
_LOG_SQRT_2PI = float(np.log(np.sqrt(2 * np.pi)))


def midranks(values: ArrayLike) -> NDArray[np.float64]:
    """Ranks 1..n of a 1-D array, ties sharing the mean of their ranks.

    Args:
        values: Shape (n,), no NaN (NaN never compares equal, so each NaN
            would get its own rank; scipy would return all-NaN instead).

    Returns:
        Float64 ranks in the input's order, equal bit for bit to
        ``scipy.stats.rankdata(values)``.
    """
    x = np.asarray(values).ravel()
    n = x.size
    if n == 0:
        return np.empty(0, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    # Start index of every run of equal values in sorted order, then the end.
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    bounds = np.append(starts, n)
    counts = np.diff(bounds)
    # Ranks start..start+count-1 (1-based: start+1 ..start+count) average to this.
    mean_rank = (starts + 1).astype(np.float64) + (counts.astype(np.float64) - 1.0) / 2.0
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, counts)
    return ranks


def normal_ppf(q: ArrayLike) -> NDArray[np.float64]:
    """Standard normal quantile Φ⁻¹(q), as ``scipy.stats.norm.ppf(q)``.

    Args:
        q: Probabilities in [0, 1] (0 gives -inf, 1 gives +inf).

    Returns:
        Float64 array (0-d for a scalar input).
    """
    from scipy import special  # imported here: loading scipy.special costs ~0.3 s

    return np.asarray(special.ndtri(q) + 0.0, dtype=np.float64)


def normal_isf(q: ArrayLike) -> NDArray[np.float64]:
    """Standard normal upper quantile Φ⁻¹(1 − q), as ``scipy.stats.norm.isf(q)``.

    Args:
        q: Upper-tail probabilities in [0, 1] (0 gives +inf, 1 gives -inf).

    Returns:
        Float64 array (0-d for a scalar input).
    """
    from scipy import special  # imported here: loading scipy.special costs ~0.3 s

    return np.asarray(-special.ndtri(q) + 0.0, dtype=np.float64)


def normal_logpdf(x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> NDArray[np.float64]:
    """Log density of N(loc, scale²) at x, as ``scipy.stats.norm.logpdf(x, loc, scale)``.

    Args:
        x: Finite points.
        loc: Finite means, broadcast against x.
        scale: Standard deviations, finite and > 0 (scipy would give NaN for
            scale <= 0; this function does not check).

    Returns:
        Float64 array of the broadcast shape: ``−z²/2 − log √(2π) − log scale``
        with ``z = (x − loc)/scale``, evaluated in scipy's order.
    """
    z = np.asarray((np.asarray(x) - np.asarray(loc)) / np.asarray(scale), dtype=np.float64)
    sd = np.broadcast_to(np.asarray(scale, dtype=np.float64), z.shape)
    return np.asarray(-(z**2) / 2.0 - _LOG_SQRT_2PI - np.log(sd), dtype=np.float64)


def beta_ppf(q: ArrayLike, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Quantile of Beta(a, b) at lower tail q, as ``scipy.stats.beta.ppf(q, a, b)``.

    Args:
        q: Lower-tail probabilities in [0, 1]; identical to scipy for q >= 1e-60.
        a: First shape, > 0.
        b: Second shape, > 0.

    Returns:
        Float64 array (0-d for scalar inputs), broadcast over the arguments.
    """
    from scipy import special  # imported here: loading scipy.special costs ~0.3 s

    return np.asarray(special.betaincinv(a, b, q) + 0.0, dtype=np.float64)


def beta_isf(q: ArrayLike, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Quantile of Beta(a, b) at upper tail q, as ``scipy.stats.beta.isf(q, a, b)``.

    Args:
        q: Upper-tail probabilities in [0, 1].
        a: First shape, > 0.
        b: Second shape, > 0.

    Returns:
        Float64 array (0-d for scalar inputs), broadcast over the arguments.
    """
    from scipy import special  # imported here: loading scipy.special costs ~0.3 s

    return np.asarray(special.betainccinv(a, b, q) + 0.0, dtype=np.float64)


def logsumexp_rows(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log Σ_j exp(a[i, j])`` for every row, as ``scipy.special.logsumexp(a, axis=1)``.

    scipy's algorithm, step by step: the row maximum is taken out, the
    maxima themselves are counted instead of summed (``m``), the rest are
    summed as ``s = Σ exp(a − max)``, and the result is
    ``log1p(s/m) + log(m) + max``.  Rows where that is not finite (a row of
    -inf, an inf or NaN entry) take ``log(Σ exp(a))`` as scipy does.

    Args:
        a: Float64, shape (n, k) with k >= 1.

    Returns:
        Float64, shape (n,), equal bit for bit to scipy's result.
    """
    row_max = np.max(a, axis=1, keepdims=True)
    is_max = a == row_max
    count = np.sum(is_max, axis=1, keepdims=True, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rest = np.exp(np.where(is_max, -np.inf, a) - row_max)
        total = np.sum(rest, axis=1, keepdims=True, dtype=np.float64)
        total = np.where(total == 0, total, total / count)
        out = (np.log1p(total) + np.log(count) + row_max)[:, 0]
        bad = ~np.isfinite(out)
        if bad.any():
            out[bad] = np.log(np.sum(np.exp(a[bad]), axis=1))
    return np.asarray(out, dtype=np.float64)
