"""The latent job's per-block Skellam caps and count grid: valid for adversarial records, tight.

The caps (``_block_mu_squared``) must bound every block's whitened change for every pair
of neighbouring datasets; the adversarial pairs here are the extremes of both relations
(a record on the clip sphere added or removed; replaced by its negative, by an
orthogonal record, by itself rotated), checked block by block in grid units on real
plans.  Deterministic, no statistical tests.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.dp import Adjacency
from privfed.engines.latent.distributed import _block_mu_squared, plan_distributed_noise

CLIP = 1.8357558252993813  # the digits job's PCA clip norm (d = 8)


def _plan(adjacency: Adjacency, epsilon: float, model: str = "distributed-skellam"):  # type: ignore[no-untyped-def]
    return plan_distributed_noise(
        model,
        epsilon,
        1e-5,
        clip_norm=CLIP,
        dim=8,
        num_classes=10,
        adjacency=adjacency,
        num_clients=20,
        threshold=11,
    )


def _parts(z: np.ndarray, f: int, count_bits: int) -> dict[str, np.ndarray]:
    q = np.ldexp(z, f)  # grid units, ‖q‖ <= R·2**f
    outer = np.outer(q, q)
    rows, cols = np.triu_indices(q.size)
    return {
        "sum": q,
        "diagonal": np.diag(outer),
        "off-diagonal": outer[rows, cols][rows != cols],
        "count": np.array([float(1 << count_bits)]),
    }


def _pairs(adjacency: Adjacency, dim: int) -> list[tuple[np.ndarray, np.ndarray | None]]:
    rng = np.random.default_rng(7)
    e = np.eye(dim)
    ones = np.ones(dim) / math.sqrt(dim)
    random = [CLIP * v / np.linalg.norm(v) for v in rng.normal(size=(20, dim))]
    sphere = [CLIP * e[0], CLIP * ones, *random]
    if adjacency is Adjacency.ADD_REMOVE:
        return [(z, None) for z in sphere]
    return [(z, -z) for z in sphere] + [(CLIP * e[0], CLIP * e[1]), (CLIP * ones, CLIP * e[3])]


@pytest.mark.parametrize("adjacency", [Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE])
@pytest.mark.parametrize("epsilon", [1.0, 10.0, 25.9])
def test_caps_bound_every_adversarial_pair_block_by_block(
    adjacency: Adjacency, epsilon: float
) -> None:
    plan = _plan(adjacency, epsilon)
    n = plan.min_honest
    caps = dict(zip(plan.block_names, plan.noise.block_mu_squared or (), strict=True))
    assert set(caps) == set(plan.block_names)
    per_client = dict(zip(plan.block_names, (2 * lam for lam in plan.noise.noise), strict=True))
    f = plan.spec.bits
    for z, other in _pairs(adjacency, 8):
        a = _parts(z, f, plan.count_bits)
        b = _parts(other, f, plan.count_bits) if other is not None else None
        total = 0.0
        for name in plan.block_names:
            delta = a[name] - (b[name] if b is not None else 0.0)
            w = float(delta @ delta) / per_client[name]  # ‖Δ_b‖²/v_b for ONE client's noise
            assert w <= caps[name] * (1 + 1e-9) + 1e-12, (name, w, caps[name])
            total += w
        assert total <= plan.noise.unit_mu_squared * (1 + 1e-9)
    assert n >= 1


@pytest.mark.parametrize("adjacency", [Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE])
@pytest.mark.parametrize("epsilon", [1.0, 3.0, 8.0, 10.0, 25.9])
def test_skellam_noise_is_within_ten_percent_of_central(
    adjacency: Adjacency, epsilon: float
) -> None:
    plan = _plan(adjacency, epsilon)
    assert math.sqrt(plan.noise.scale) <= 1.1
    # The delivered sum std at the threshold is the calibrated one (no dropout excess).
    ratio = plan.delivered_stds(plan.threshold)[0] / plan.central.noise_std_sum
    assert ratio == pytest.approx(math.sqrt(plan.noise.scale), rel=1e-4)


@pytest.mark.slow
def test_counts_ride_their_own_grid_only_when_noised() -> None:
    add = _plan(Adjacency.ADD_REMOVE, 10.0)
    assert add.count_bits >= 1
    # the central count std is at least 64 units of the count grid
    assert math.ldexp(add.central.noise_std_count, add.count_bits) >= 64.0
    assert _plan(Adjacency.REPLACE_ONE, 10.0).count_bits == 0
    caps = _block_mu_squared(add.central)
    assert caps["count"] == pytest.approx(1.0 / add.central.noise_std_count**2)
