"""Exact fixed-point latent statistics: bit identity, ring round trip, payload, refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from privfed.engines.latent.client import LatentStatisticsAccumulator, compute_latent_statistics
from privfed.engines.latent.statistics import LatentStatistics, LatentStatisticsConfig
from privfed.errors import NonFiniteInputError, ParameterError, RingOverflowError


def _data(seed: int, n: int = 400, d: int = 5, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * 2.0, rng.integers(0, k, size=n)


@pytest.mark.slow
@given(seed=st.integers(0, 2**32 - 1), clients=st.integers(1, 50), batch=st.integers(1, 64))
def test_any_partition_gives_bit_identical_aggregate(seed: int, clients: int, batch: int) -> None:
    z, y = _data(seed)
    whole = compute_latent_statistics(z, y, num_classes=4, clip_norm=3.0)
    owner = np.random.default_rng(seed + 1).integers(0, clients, size=y.size)
    total = LatentStatistics.zeros(whole.config)
    for c in range(clients):
        mine = owner == c
        total = total + compute_latent_statistics(
            z[mine], y[mine], num_classes=4, clip_norm=3.0, batch_size=batch
        )
    assert total == whole
    assert np.array_equal(total.second_moments, whole.second_moments)


def test_values_match_float_reference_within_grid_error() -> None:
    z, y = _data(0, n=300)
    stats = compute_latent_statistics(z, y, num_classes=4, clip_norm=3.0)
    f = stats.config.bits
    clipped = z * np.minimum(1.0, 3.0 / np.linalg.norm(z, axis=1, keepdims=True))
    for c in range(4):
        rows = clipped[y == c]
        n = rows.shape[0]
        assert stats.counts[c] == n
        # each record moves by at most sqrt(d) grid steps (rounding + re-clipping)
        np.testing.assert_allclose(stats.sums_float()[c], rows.sum(0), atol=n * 3 * 2.0**-f)
        np.testing.assert_allclose(
            stats.second_moment_matrices()[c], rows.T @ rows, atol=n * 20 * 3.0 * 2.0**-f
        )


def test_quantized_records_respect_clip_norm_exactly() -> None:
    cfg = LatentStatisticsConfig(dim=7, num_classes=1, clip_norm=1.5)
    acc = LatentStatisticsAccumulator(cfg)
    rng = np.random.default_rng(1)
    z = torch.from_numpy(rng.normal(size=(2000, 7)) * rng.choice([0.1, 1.0, 1e6], size=(2000, 1)))
    q = acc.quantize(z)
    assert int((q * q).sum(dim=1).max()) <= cfg.norm_bound_squared


def test_ring_round_trip_and_negative_values() -> None:
    z, y = _data(2)
    stats = compute_latent_statistics(z, y, num_classes=4, clip_norm=3.0)
    vector = stats.to_ring_vector()
    assert vector.dtype == np.uint64 and vector.shape == (stats.config.num_values,)
    assert (stats.sums < 0).any()  # exercises two's complement
    assert LatentStatistics.from_ring_vector(vector, stats.config) == stats
    # Ring addition of two vectors decodes to the sum of the statistics.
    other = compute_latent_statistics(-z, y, num_classes=4, clip_norm=3.0)
    summed = (vector + other.to_ring_vector()).astype(np.uint64)
    assert LatentStatistics.from_ring_vector(summed, stats.config) == stats + other


def test_payload_numbers_at_d128() -> None:
    cfg = LatentStatisticsConfig(dim=128, num_classes=10, clip_norm=3 * 128**0.5)
    assert cfg.values_per_class == 128 + 128 * 129 // 2 + 1 == 8385
    assert cfg.num_values == 83_850
    assert cfg.payload_bytes_at(4) == 335_400  # the reference paper's 327.5 KiB
    assert cfg.payload_bytes == 670_800  # 8-byte ring values on the wire
    stats = compute_latent_statistics(
        np.zeros((0, 128)), np.zeros(0, dtype=np.int64), num_classes=10, clip_norm=cfg.clip_norm
    )
    assert stats.to_ring_vector().size == 83_850 and stats.total_records == 0


def test_non_finite_latents_refused_and_accumulator_unchanged() -> None:
    cfg = LatentStatisticsConfig(dim=3, num_classes=2, clip_norm=1.0)
    acc = LatentStatisticsAccumulator(cfg)
    acc.update(np.ones((4, 3)), np.array([0, 1, 0, 1]))
    before = acc.result()
    bad = np.ones((2, 3))
    bad[1, 2] = np.inf
    with pytest.raises(NonFiniteInputError, match="latents"):
        acc.update(bad, np.array([0, 1]))
    with pytest.raises(ParameterError, match="labels"):
        acc.update(np.ones((2, 3)), np.array([0, 2]))
    assert acc.result() == before


def test_configs_that_could_wrap_are_refused() -> None:
    with pytest.raises(RingOverflowError):
        LatentStatisticsConfig(dim=4, num_classes=2, clip_norm=1.0, fractional_bits=30)
    with pytest.raises(RingOverflowError):
        LatentStatisticsConfig(dim=4, num_classes=2, clip_norm=1e9, max_records=2**40)
    cfg = LatentStatisticsConfig(dim=2, num_classes=1, clip_norm=1.0, max_records=3)
    acc = LatentStatisticsAccumulator(cfg)
    with pytest.raises(RingOverflowError):
        acc.update(np.zeros((4, 2)), np.zeros(4, dtype=np.int64))


def test_repr_hides_values() -> None:
    z, y = _data(3)
    stats = compute_latent_statistics(z, y, num_classes=4, clip_norm=3.0)
    assert "redacted" in repr(stats) and str(int(stats.sums[0, 0])) not in repr(stats)
