"""Exact log-pmfs of the distributed noise, shared by the sampler and accounting tests."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp


def log_dg(sigma: float, half: int) -> np.ndarray:
    x = np.arange(-half, half + 1, dtype=np.float64)
    lw = -(x * x) / (2.0 * sigma * sigma)
    return np.asarray(lw - logsumexp(lw))


def log_convolve(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """Log-pmf of the sum of two independent symmetric integer variables (log space)."""
    size = la.size + lb.size - 1
    grid = np.full((la.size, size), -np.inf)
    for i in range(la.size):
        grid[i, i : i + lb.size] = la[i] + lb
    return np.asarray(logsumexp(grid, axis=0))


def log_dg_sum(sigma: float, n: int, half: int = 80) -> np.ndarray:
    one = log_dg(sigma, half)
    out = one
    for _ in range(n - 1):
        out = log_convolve(out, one)
    return out


def log_skellam(m: float, half: int = 300, terms: int = 900) -> np.ndarray:
    """log P[K = k] for K ~ Skellam(m, m), k in [-half, half] (exact series, log space)."""
    k = np.abs(np.arange(-half, half + 1))[:, None]
    j = np.arange(terms)[None, :]
    log_terms = (2 * j + k) * math.log(m) - 2 * m - gammaln(j + k + 1) - gammaln(j + 1)
    return np.asarray(logsumexp(log_terms, axis=1))
