"""The probabilistic-PCA Gaussian factory."""

from __future__ import annotations

import math

import pytest
import torch

from privfed.engines.factory import LatentGaussianFactory
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError


def test_fit_recovers_a_planted_low_rank_gaussian() -> None:
    # Data: mean image 0.5 plus 2 orthogonal directions with std 0.08 and 0.04,
    # plus isotropic noise std 0.005 (values stay inside [0, 1] with
    # overwhelming probability, so clamping does not bias the check).
    gen = torch.Generator().manual_seed(0)
    d = 64
    basis, _ = torch.linalg.qr(torch.randn(d, 2, generator=gen, dtype=torch.float64))
    z = torch.randn(4000, 2, generator=gen, dtype=torch.float64) * torch.tensor([0.08, 0.04])
    x = 0.5 + z @ basis.T + 0.005 * torch.randn(4000, d, generator=gen, dtype=torch.float64)
    images = x.float().reshape(-1, 1, 8, 8)
    factory = LatentGaussianFactory(latent_dim=2).fit(images)
    t = factory.state_tensors()
    assert t["residual_std"].item() == pytest.approx(0.005, rel=0.05)
    assert torch.sqrt(t["scales"] ** 2 + t["residual_std"] ** 2).tolist() == pytest.approx(
        [0.08, 0.04], rel=0.05
    )
    # Samples: per-pixel mean within 6 standard errors of 0.5.  With 20,000
    # samples and a per-pixel std <= 0.09 the standard error is <= 6.4e-4;
    # a false failure (α) has probability < 64 * 2e-9 ~ 1e-7 (fixed seed anyway).
    samples = factory.sample(20_000, torch.Generator().manual_seed(1)).reshape(20_000, -1)
    assert (samples.mean(0) - 0.5).abs().max().item() < 6 * 0.09 / math.sqrt(20_000)
    # Variance along the first planted direction (~0.08²).
    proj = (samples.double() - 0.5) @ basis[:, 0]
    assert proj.std().item() == pytest.approx(0.08, rel=0.05)


def test_single_image_and_tiny_sets() -> None:
    one = torch.full((1, 1, 4, 4), 0.25)
    factory = LatentGaussianFactory(latent_dim=8).fit(one)
    assert torch.equal(factory.sample(3), torch.full((3, 1, 4, 4), 0.25))
    two = torch.stack([torch.zeros(1, 4, 4), torch.ones(1, 4, 4)])
    f2 = LatentGaussianFactory(latent_dim=8).fit(two)
    assert f2.state_tensors()["scales"].numel() == 1  # rank N - 1
    out = f2.sample(50, torch.Generator().manual_seed(0))
    assert out.shape == (50, 1, 4, 4) and out.min() >= 0 and out.max() <= 1


def test_sampling_is_reproducible_with_a_generator() -> None:
    f = LatentGaussianFactory(latent_dim=3).fit(torch.rand(10, 1, 4, 4))
    a = f.sample(5, torch.Generator().manual_seed(3))
    b = f.sample(5, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert f.sample(0).shape == (0, 1, 4, 4)


def test_bad_inputs() -> None:
    with pytest.raises(ParameterError):
        LatentGaussianFactory(latent_dim=0)
    with pytest.raises(ParameterTypeError):
        LatentGaussianFactory(latent_dim=2.0)  # type: ignore[arg-type]
    f = LatentGaussianFactory()
    with pytest.raises(ParameterError):
        f.fit(torch.rand(3, 8, 8))
    with pytest.raises(ParameterError):
        f.fit(torch.rand(0, 1, 8, 8))
    with pytest.raises(ParameterError):
        f.fit(torch.rand(3, 1, 8, 8) * 2)
    with pytest.raises(NonFiniteInputError):
        f.fit(torch.full((3, 1, 2, 2), float("nan")))
    with pytest.raises(ParameterTypeError):
        f.fit([[0.0]])  # type: ignore[arg-type]
    assert not f.is_fitted
    f.fit(torch.rand(3, 1, 2, 2))
    with pytest.raises(ParameterError):
        f.sample(-1)
    with pytest.raises(ParameterTypeError):
        f.sample(1, generator=3)  # type: ignore[arg-type]
