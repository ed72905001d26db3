"""The float64 norm screen of the client quantizer never changes a quantized bit.

The client computes every row's float64 norm in one pass and runs the exact
peak and integer-norm tests only on rows the norm cannot settle (module
docstring of :mod:`privfed.engines.latent.statistics`, "Screening").  These
tests aim records at both screen boundaries -- norms within a few ulps of the
clip norm ``R``, quantized norms within a grid step of ``sqrt(L)`` -- and check
every quantized value against an independent integer reference (numpy, every
row through the exact steps), for several dimensions and grids.  Deterministic
(fixed seeds), so no false failures.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privfed.engines.latent.client import LatentStatisticsAccumulator, compute_latent_statistics
from privfed.engines.latent.statistics import LatentStatisticsConfig


def _exact_quantize(z: np.ndarray, cfg: LatentStatisticsConfig) -> np.ndarray:
    """The exact steps on every row, with Python integers for the norms."""
    f, radius, limit = cfg.bits, cfg.clip_norm, cfg.norm_bound_squared
    out = np.empty(z.shape, dtype=np.int64)
    for i, row in enumerate(np.asarray(z, dtype=np.float64)):
        peak = float(np.abs(row).max())
        q = row * math.ldexp(1.0, f)
        if peak > radius:
            q = q * (radius / peak)
        q = np.rint(q)
        norm = sum(int(v) * int(v) for v in q)
        if norm > limit:
            target = math.ldexp(radius, f) * (1.0 - 2.0**-40)
            q = np.trunc(q * (target / math.sqrt(float(norm))))
        out[i] = q.astype(np.int64)
    return out


def _boundary_records(cfg: LatentStatisticsConfig, seed: int) -> np.ndarray:
    d, radius, f = cfg.dim, cfg.clip_norm, cfg.bits
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(64, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    # Around the clip norm R: the peak test's screen.
    offsets = np.array([0.0, 2.0**-52, -(2.0**-52), 1e-14, -1e-14, 1e-12, -1e-12, 1e-9, -1e-9])
    near_r = [directions[i % 64] * radius * (1.0 + o) for i, o in enumerate(offsets)]
    # Around sqrt(L) / 2**f, where the quantized norm meets L: the integer test's screen.
    edge = math.sqrt(cfg.norm_bound_squared) / math.ldexp(1.0, f)
    steps = np.linspace(-2.0 * math.sqrt(d), 2.0 * math.sqrt(d), 41) / math.ldexp(1.0, f)
    near_l = [directions[i % 64] * (edge + s) for i, s in enumerate(steps)]
    # One coordinate exactly at, just above and just below R (others zero or tiny).
    axis = np.zeros((3, d))
    axis[:, 0] = [radius, np.nextafter(radius, np.inf), np.nextafter(radius, 0.0)]
    axis[:, -1] = 1e-300
    typical = rng.normal(size=(50, d)) * (radius / (2.0 * math.sqrt(d)))
    return np.concatenate([np.array(near_r), np.array(near_l), axis, typical])


@pytest.mark.parametrize(
    ("d", "radius", "bits"),
    [
        (1, 1.0, None),
        (3, 2.5, None),
        (16, 12.0, None),
        (128, 3.0 * math.sqrt(128), None),
        (5, 0.75, 4),
        (9, 1e3, 0),
    ],
)
def test_records_at_the_screen_boundaries_quantize_exactly(
    d: int, radius: float, bits: int | None
) -> None:
    cfg = LatentStatisticsConfig(dim=d, num_classes=2, clip_norm=radius, fractional_bits=bits)
    z = _boundary_records(cfg, seed=d)
    expected = _exact_quantize(z, cfg)
    got = LatentStatisticsAccumulator(cfg).quantize(torch.from_numpy(z)).numpy()
    np.testing.assert_array_equal(got, expected)
    assert int((got * got).sum(axis=1).max()) <= cfg.norm_bound_squared
    # And through the batched statistics (sums and second moments from those rows).
    labels = np.arange(z.shape[0]) % 2
    stats = compute_latent_statistics(
        z, labels, num_classes=2, clip_norm=radius, config=cfg, batch_size=7
    )
    rows, cols = np.triu_indices(d)
    for c in range(2):
        mine = expected[labels == c]
        np.testing.assert_array_equal(stats.sums[c], mine.sum(axis=0))
        np.testing.assert_array_equal(stats.second_moments[c], (mine.T @ mine)[rows, cols])


@pytest.mark.parametrize("d", [1, 8, 128, 4096])
def test_screen_thresholds_sit_inside_the_exact_bounds(d: int) -> None:
    # The soundness conditions of the screen: a row it lets through has norm <= R,
    # and its quantized norm provably stays within sqrt(L).
    cfg = LatentStatisticsConfig(dim=d, num_classes=1, clip_norm=3.0 * math.sqrt(d))
    acc = LatentStatisticsAccumulator(cfg)
    slack = (d + 8) * 2.0**-50
    assert acc._radius_screen <= cfg.clip_norm * (1.0 - (d + 1) * 2.0**-53)
    bound = acc._norm_screen * (1.0 + slack) * math.ldexp(1.0, cfg.bits) + math.sqrt(d) / 2
    assert bound < math.sqrt(cfg.norm_bound_squared)
