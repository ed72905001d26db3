"""LatentGaussianFactory with a public codec; log-likelihood and reconstruction hooks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from privfed.engines.codecs import PCACodec
from privfed.engines.factory import LatentGaussianFactory, codec_fingerprint, load_factory
from privfed.engines.factory.gaussian import LIKELIHOOD_VARIANCE_FLOOR
from privfed.errors import ArtifactIntegrityError, ParameterError, ParameterTypeError


def _images(n: int, seed: int, shape: tuple[int, int, int] = (1, 8, 8)) -> torch.Tensor:
    return torch.rand((n, *shape), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def codec() -> PCACodec:
    return PCACodec.fit(_images(60, 100), latent_dim=6)


@pytest.fixture(scope="module")
def fitted(codec: PCACodec) -> LatentGaussianFactory:
    return LatentGaussianFactory(codec=codec, class_id=2, client_id=7).fit(_images(40, 1))


def test_codec_mode_fits_the_latent_mean_and_covariance(
    codec: PCACodec, fitted: LatentGaussianFactory
) -> None:
    assert fitted.basis == "public-codec"
    assert fitted.latent_dim == 6 and fitted.codec is codec
    t = fitted.state_tensors()
    # Only the latent Gaussian is shipped: d + d² values, no basis.
    assert set(t) == {"latent_mean", "latent_factor"}
    assert fitted.num_parameters == 6 + 36
    z = codec.encode(_images(40, 1)).double()
    assert torch.allclose(t["latent_mean"].double(), z.mean(0), atol=1e-5)
    cov = torch.cov(z.T)
    factor = t["latent_factor"].double()
    # Eigenvalues are floored at 1e-3 R²/d; all the fitted ones are far above it here.
    floor = 1e-3 * codec.default_clip_norm**2 / 6
    assert float(torch.linalg.eigvalsh(cov).min()) > floor
    assert torch.allclose(factor @ factor.T, cov, atol=1e-5)


def test_codec_mode_samples_decode_through_the_codec(
    codec: PCACodec, fitted: LatentGaussianFactory
) -> None:
    a = fitted.sample(300, torch.Generator().manual_seed(3))
    b = fitted.sample(300, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert a.shape == (300, 1, 8, 8) and a.dtype == torch.float32
    assert float(a.min()) >= 0.0 and float(a.max()) <= 1.0
    # Sampling is decode(m + F e) with e ~ N(0, I_d) from the generator.
    t = fitted.state_tensors()
    e = torch.randn((300, 6), generator=torch.Generator().manual_seed(3))
    expected = codec.decode(t["latent_mean"] + e @ t["latent_factor"].T)
    assert torch.equal(a, expected)
    assert fitted.sample(0).shape == (0, 1, 8, 8)


def test_single_image_fit_has_floored_covariance(codec: PCACodec) -> None:
    f = LatentGaussianFactory(codec=codec).fit(_images(1, 5))
    factor = f.state_tensors()["latent_factor"].double()
    eig = torch.linalg.eigvalsh(factor @ factor.T)
    floor = 1e-3 * codec.default_clip_norm**2 / 6
    assert torch.allclose(eig, torch.full_like(eig, floor), rtol=1e-4)


def test_construction_and_fit_are_validated(codec: PCACodec) -> None:
    with pytest.raises(ParameterError):
        LatentGaussianFactory(codec=codec, latent_dim=5)  # codec has d = 6
    assert LatentGaussianFactory(codec=codec, latent_dim=6).latent_dim == 6
    with pytest.raises(ParameterTypeError):
        LatentGaussianFactory(codec="pca")  # type: ignore[arg-type]
    f = LatentGaussianFactory(codec=codec)
    with pytest.raises(ParameterError):
        f.fit(_images(5, 0, shape=(1, 4, 4)))  # not the codec's image shape
    assert not f.is_fitted
    with pytest.raises(ParameterError):
        f.log_likelihood(_images(2, 0))  # unfitted
    # The default of the private mode is unchanged.
    assert LatentGaussianFactory().latent_dim == 16
    assert LatentGaussianFactory().basis == "private-pca"


def test_round_trip_needs_the_same_codec(
    codec: PCACodec, fitted: LatentGaussianFactory, tmp_path: Path
) -> None:
    fitted.save(tmp_path)
    loaded = LatentGaussianFactory.load(tmp_path, codec=codec)
    gen = torch.Generator
    assert torch.equal(
        loaded.sample(20, gen().manual_seed(1)), fitted.sample(20, gen().manual_seed(1))
    )
    assert loaded.manifest() == fitted.manifest()
    assert load_factory(tmp_path, codec=codec).weights_sha256() == fitted.weights_sha256()
    with pytest.raises(ParameterError):
        LatentGaussianFactory.load(tmp_path)  # codec missing
    with pytest.raises(ParameterError):
        load_factory(tmp_path)
    other = PCACodec.fit(_images(60, 200), latent_dim=6)
    with pytest.raises(ArtifactIntegrityError):
        LatentGaussianFactory.load(tmp_path, codec=other)


def test_private_factory_refuses_a_codec_on_load(codec: PCACodec, tmp_path: Path) -> None:
    LatentGaussianFactory(latent_dim=3).fit(_images(10, 0)).save(tmp_path)
    with pytest.raises(ParameterError):
        LatentGaussianFactory.load(tmp_path, codec=codec)
    assert LatentGaussianFactory.load(tmp_path).basis == "private-pca"


def test_codec_fingerprint_is_deterministic_and_discriminating(codec: PCACodec) -> None:
    same = PCACodec.fit(_images(60, 100), latent_dim=6)
    assert codec_fingerprint(codec) == codec_fingerprint(same)
    assert codec_fingerprint(codec) != codec_fingerprint(
        PCACodec.fit(_images(60, 100), latent_dim=5)
    )
    with pytest.raises(ParameterTypeError):
        codec_fingerprint(object())  # type: ignore[arg-type]


def test_private_pca_log_likelihood_matches_scipy() -> None:
    # Known answer: the PPCA density is N(μ, Vᵀ diag(scales²) V + s² I).
    images = _images(30, 11, shape=(1, 2, 3))
    f = LatentGaussianFactory(latent_dim=2).fit(images)
    t = {k: v.double() for k, v in f.state_tensors().items()}
    s2 = float(t["residual_std"]) ** 2
    assert s2 > LIKELIHOOD_VARIANCE_FLOOR
    cov = t["components"].T @ torch.diag(t["scales"] ** 2) @ t["components"] + s2 * torch.eye(6)
    queries = _images(7, 12, shape=(1, 2, 3))
    expected = stats.multivariate_normal(t["mean"].numpy(), cov.numpy()).logpdf(
        queries.reshape(7, -1).double().numpy()
    )
    # The shipped directions are float32, orthonormal to ~1e-7; the closed form
    # assumes exact orthonormality, hence the 1e-6 tolerance.
    assert np.allclose(f.log_likelihood(queries).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_codec_log_likelihood_matches_scipy(codec: PCACodec, fitted: LatentGaussianFactory) -> None:
    t = {k: v.double() for k, v in fitted.state_tensors().items()}
    cov = t["latent_factor"] @ t["latent_factor"].T
    queries = _images(9, 13)
    z = codec.encode(queries).double().numpy()
    expected = stats.multivariate_normal(t["latent_mean"].numpy(), cov.numpy()).logpdf(z)
    assert np.allclose(fitted.log_likelihood(queries).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_rank_deficient_fit_has_a_finite_likelihood() -> None:
    two = torch.stack([torch.zeros(1, 4, 4), torch.ones(1, 4, 4)])
    f = LatentGaussianFactory(latent_dim=8).fit(two)
    ll = f.log_likelihood(_images(3, 0, shape=(1, 4, 4)))
    assert bool(torch.isfinite(ll).all())
    # A training image is far more likely than a random one (s² = 0 is floored).
    assert float(f.log_likelihood(two).min()) > float(ll.max())


def test_reconstruct_in_both_modes(codec: PCACodec, fitted: LatentGaussianFactory) -> None:
    images = _images(12, 21)
    private = LatentGaussianFactory(latent_dim=11).fit(images)
    # With k = N − 1 directions the private basis spans every training image.
    assert torch.allclose(private.reconstruct(images), images, atol=1e-5)
    fresh = _images(12, 22)
    assert float((private.reconstruct(fresh) - fresh).abs().max()) > 0.05
    # Codec mode reconstructs through the public codec, independent of the fit.
    assert torch.equal(fitted.reconstruct(fresh), codec.decode(codec.encode(fresh)))
    with pytest.raises(ParameterError):
        private.reconstruct(_images(2, 0, shape=(1, 4, 4)))


def test_autoencoder_codec_mode_round_trip(tmp_path: Path) -> None:
    from privfed.engines.codecs import ConvAutoencoderCodec

    codec = ConvAutoencoderCodec.fit(_images(32, 60), latent_dim=3, epochs=2, seed=0)
    f = LatentGaussianFactory(codec=codec, class_id=0, client_id=0).fit(_images(10, 61))
    assert f.num_parameters == 3 + 9
    out = f.sample(4, torch.Generator().manual_seed(0))
    assert out.shape == (4, 1, 8, 8) and float(out.min()) >= 0 and float(out.max()) <= 1
    assert f.log_likelihood(_images(4, 62)).shape == (4,)
    f.save(tmp_path)
    back = LatentGaussianFactory.load(tmp_path, codec=codec)
    assert torch.equal(back.sample(4, torch.Generator().manual_seed(0)), out)
