"""LatentMixtureFactory: sensitivity against a brute-force oracle, unlearning, ledger, files."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from privfed.dp import Adjacency, PrivacyLedger, mu_for_epsilon_delta
from privfed.engines.codecs import PCACodec
from privfed.engines.factory import FactoryMatrix, LatentGaussianDP, load_factory, record_in_ledger
from privfed.engines.factory.mixture import (
    LatentMixtureFactory,
    anchor_count,
    assign_to_anchors,
    clip_latents,
    mixture_statistics,
    public_anchors,
)
from privfed.engines.moments.planning import plan_latent_release
from privfed.errors import ArtifactIntegrityError, ParameterError


def _images(n: int, seed: int) -> torch.Tensor:
    return torch.rand((n, 1, 8, 8), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def codec() -> PCACodec:
    return PCACodec.fit(_images(60, 100), latent_dim=4)


@pytest.fixture(scope="module")
def anchors(codec: PCACodec) -> torch.Tensor:
    return public_anchors(codec, _images(18, 101), max_components=3)


def _oracle_stats(points: list[np.ndarray], anchors: np.ndarray) -> np.ndarray:
    """Counts, sums and second moments per component by a per-record loop (no module code)."""
    k, d = anchors.shape
    out = np.zeros((k, 1 + d + d * d))
    for z in points:
        j = int(np.argmin([float(np.sum((z - a) ** 2)) for a in anchors]))
        out[j] += np.concatenate([[1.0], z, np.outer(z, z).ravel()])
    return out


def test_release_sensitivity_never_exceeds_the_plan_and_is_nearly_attained() -> None:
    # Brute force over neighbouring datasets: d = 2, k = 3 anchors, R = 1, records on a
    # grid of the disc (boundary included).  Every dataset of 3 records and every
    # replacement of its first record is tried; the whitened change must stay <= mu.
    radius, d = 1.0, 2
    plan = plan_latent_release(
        3.0, 1e-5, clip_norm=radius, dim=d, adjacency=Adjacency.REPLACE_ONE, private_labels=True
    )
    anchors = np.array([[0.6, 0.0], [-0.3, 0.5], [-0.3, -0.5]])
    angles = np.linspace(0.0, 2.0 * math.pi, 16, endpoint=False)
    grid = [r * np.array([math.cos(a), math.sin(a)]) for r in (0.5, 1.0) for a in angles]
    grid.append(np.zeros(2))
    scale = np.concatenate(
        [[1.0 / plan.noise_std_count], np.full(d, 1.0 / plan.noise_std_sum),
         np.full(d * d, 1.0 / plan.noise_std_second_moment)]
    )
    worst = 0.0
    rest = [grid[3], grid[20]]
    for x, x_new in itertools.product(grid, grid):
        a = _oracle_stats([x, *rest], anchors)
        b = _oracle_stats([x_new, *rest], anchors)
        worst = max(worst, float(np.sqrt((((a - b) * scale) ** 2).sum())))
    assert worst <= plan.mu * (1 + 1e-12)
    assert worst >= 0.9 * plan.mu  # the bound is tight on this grid (not loose by design)


def test_module_statistics_match_the_oracle(anchors: torch.Tensor) -> None:
    rng = np.random.default_rng(0)
    z = clip_latents(rng.normal(size=(25, 4)) * 3.0, 2.0)
    assert np.all(np.linalg.norm(z, axis=1) < 2.0)
    a = anchors.numpy()
    counts, sums, second = mixture_statistics(z, assign_to_anchors(z, a), a.shape[0])
    expected = _oracle_stats(list(z), a)
    got = np.concatenate([counts[:, None], sums, second.reshape(a.shape[0], -1)], axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_anchor_rule_is_public_and_bounded() -> None:
    assert anchor_count(5, 8) == 1 and anchor_count(18, 8) == 3 and anchor_count(600, 8) == 8
    with pytest.raises(ParameterError, match="max_components"):
        anchor_count(10, 0)


def test_unlearning_is_bit_identical_to_never_training(
    codec: PCACodec, anchors: torch.Tensor
) -> None:
    def fitted(client: int, seed: int, dp: bool) -> LatentMixtureFactory:
        target = LatentGaussianDP(epsilon=3.0, delta=1e-5, seed=seed) if dp else None
        return LatentMixtureFactory(
            codec=codec, anchors=anchors, class_id=0, client_id=client, dp=target
        ).fit(_images(30, seed))

    for dp in (False, True):
        full, never = FactoryMatrix(), FactoryMatrix()
        for client in (0, 1, 2):
            full.register(0, client, fitted(client, 10 + client, dp), 30)
            if client != 1:
                never.register(0, client, fitted(client, 10 + client, dp), 30)
        full.remove_client(1)
        a = full.synthesize(40, seed=5)
        b = never.synthesize(40, seed=5)
        assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)


def test_dp_fit_enters_the_ledger_as_one_cell_release(
    codec: PCACodec, anchors: torch.Tensor
) -> None:
    factory = LatentMixtureFactory(
        codec=codec, anchors=anchors, class_id=1, client_id=4,
        dp=LatentGaussianDP(epsilon=3.0, delta=1e-5, seed=1),
    ).fit(_images(40, 2))
    record = factory.privacy
    assert record.mechanism == "gaussian" and record.steps == 1 and record.seeded
    plan = plan_latent_release(
        3.0, 1e-5, clip_norm=codec.default_clip_norm, dim=4,
        adjacency=Adjacency.REPLACE_ONE, private_labels=True,
    )
    assert 1.0 / record.noise_multiplier <= plan.mu <= mu_for_epsilon_delta(3.0, 1e-5)
    ledger = PrivacyLedger(budget_epsilon=3.0, budget_delta=1e-5)
    for client in (4, 5):  # two cells compose in parallel: the run's epsilon is one cell's
        record_in_ledger(ledger, record, name=f"c{client}", partition=f"class=1/client={client}")
    assert ledger.epsilon(1e-5) <= 3.0 + 1e-9
    assert ledger.epsilon(1e-5) > 2.5


def test_no_dp_fit_is_deterministic_and_round_trips(
    tmp_path: Path, codec: PCACodec, anchors: torch.Tensor
) -> None:
    a = LatentMixtureFactory(codec=codec, anchors=anchors, class_id=3, client_id=0)
    b = LatentMixtureFactory(codec=codec, anchors=anchors, class_id=3, client_id=0)
    a.fit(_images(50, 7))
    b.fit(_images(50, 7))
    assert a.weights_sha256() == b.weights_sha256()
    assert a.privacy.mechanism == "none"
    assert a.num_parameters == 3 + 3 * 4 + 3 * 16
    assert math.isclose(float(a.state_tensors()["weights"].sum()), 1.0, rel_tol=1e-6)
    a.save(tmp_path / "f")
    loaded = load_factory(tmp_path / "f", codec=codec)
    assert isinstance(loaded, LatentMixtureFactory)
    assert loaded.weights_sha256() == a.weights_sha256()
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(a.sample(7, g1), loaded.sample(7, g2))
    scores = loaded.log_likelihood(_images(5, 8))
    assert scores.shape == (5,) and bool(torch.isfinite(scores).all())
    other = PCACodec.fit(_images(60, 200), latent_dim=4)
    with pytest.raises(ArtifactIntegrityError, match="codec"):
        load_factory(tmp_path / "f", codec=other)


def test_bad_anchors_are_refused(codec: PCACodec) -> None:
    with pytest.raises(ParameterError, match="anchors"):
        LatentMixtureFactory(codec=codec, anchors=torch.zeros((2, 3)))
