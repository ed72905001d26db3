"""EDM diffusion factory: schedule, preconditioning, sampler, padding, training."""

from __future__ import annotations

import math

import pytest
import torch

from privfed.engines.factory import (
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    UNetConfig,
    edm_sigmas,
)
from privfed.errors import ParameterError, ParameterTypeError

TINY_UNET = UNetConfig(block_out_channels=(8, 16), norm_num_groups=4)
FAST_EDM = EDMConfig(sampling_steps=3)


def test_sigma_schedule_matches_karras_table_1() -> None:
    cfg = EDMConfig(sampling_steps=18)
    sig = edm_sigmas(cfg)
    assert sig.shape == (19,)
    assert sig[0].item() == pytest.approx(80.0, rel=1e-12)
    assert sig[17].item() == pytest.approx(0.002, rel=1e-12)
    assert sig[18].item() == 0.0
    assert bool((sig[:-1][1:] < sig[:-1][:-1]).all())
    # Hand-computed middle level: (80^(1/7) + 9/17 (0.002^(1/7) - 80^(1/7)))^7.
    a, b = 80.0 ** (1 / 7), 0.002 ** (1 / 7)
    assert sig[9].item() == pytest.approx((a + 9 / 17 * (b - a)) ** 7, rel=1e-12)


class _Identity(torch.nn.Module):
    """F(x; c_noise) = x: makes the preconditioning visible."""

    def forward(self, x: torch.Tensor, c_noise: torch.Tensor, return_dict: bool = False):
        return (x,)


class _Recorder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, c_noise: torch.Tensor, return_dict: bool = False):
        self.seen.append(c_noise.clone())
        return (torch.zeros_like(x),)


def test_preconditioning_coefficients() -> None:
    factory = EDMDiffusionFactory(edm=EDMConfig(sigma_data=0.5))
    x = torch.ones(2, 1, 2, 2)
    sigma = torch.tensor([0.5, 2.0])
    out = factory._denoise(_Identity(), x, sigma)
    for i, s in enumerate(sigma.tolist()):
        c_skip = 0.25 / (s**2 + 0.25)
        c_out = s * 0.5 / math.sqrt(s**2 + 0.25)
        c_in = 1 / math.sqrt(s**2 + 0.25)
        assert out[i].flatten()[0].item() == pytest.approx(c_skip + c_out * c_in, rel=1e-6)
    rec = _Recorder()
    factory._denoise(rec, x, sigma)
    assert rec.seen[0].tolist() == pytest.approx([math.log(0.5) / 4, math.log(2.0) / 4])
    # λ(σ) = (σ² + σ_d²) / (σ σ_d)².
    assert factory._loss_weight(torch.tensor(0.5)).item() == pytest.approx(0.5 / 0.0625)


def _scalar_heun(n_steps: int) -> float:
    """Independent scalar Heun solve of dx/dσ = x σ/(σ² + σ_d²) from σ_max to 0."""
    rho, s_min, s_max = 7.0, 0.002, 80.0
    sig = [
        (s_max ** (1 / rho) + i / (n_steps - 1) * (s_min ** (1 / rho) - s_max ** (1 / rho))) ** rho
        for i in range(n_steps)
    ] + [0.0]

    def slope(x: float, s: float) -> float:
        return x * s / (s * s + 0.25)

    x = 1.0
    for i in range(n_steps):
        t, tn = sig[i], sig[i + 1]
        d = slope(x, t)
        xn = x + (tn - t) * d
        if i < n_steps - 1:
            xn = x + (tn - t) * 0.5 * (d + slope(xn, tn))
        x = xn
    return x


def test_heun_sampler_on_gaussian_data() -> None:
    # For data N(0, σ_d²) per pixel the ideal denoiser is D(x; σ) = σ_d²/(σ²+σ_d²)·x,
    # i.e. F ≡ 0 under EDM preconditioning, and the probability-flow ODE is linear:
    # x(0) = x(σ_max)·σ_d/sqrt(σ_max² + σ_d²).  The sampler must reproduce an
    # independent scalar Heun recurrence, which converges to that value.
    assert _scalar_heun(400) == pytest.approx(0.5 / math.sqrt(80.0**2 + 0.25), rel=1e-4)
    factory = EDMDiffusionFactory(edm=EDMConfig(sampling_steps=40))
    factory._model = _Recorder()
    factory._image_shape = (1, 2, 2)
    out = factory.sample(64, torch.Generator().manual_seed(0))
    x0 = torch.randn((64, 1, 2, 2), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = x0 * 80.0 * _scalar_heun(40)
    # sample() maps [-1, 1] back to [0, 1] and clamps.
    assert torch.allclose(out.double(), ((expected + 1) / 2).clamp(0, 1), atol=1e-5)


@pytest.mark.slow
def test_fit_sample_shapes_determinism_and_rng_isolation() -> None:
    images = torch.rand((10, 1, 8, 8), generator=torch.Generator().manual_seed(0))
    cfg = EDMTrainingConfig(steps=3, batch_size=4, seed=5)
    state = torch.get_rng_state()
    a = EDMDiffusionFactory(unet=TINY_UNET, edm=FAST_EDM, training=cfg).fit(images)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched
    b = EDMDiffusionFactory(unet=TINY_UNET, edm=FAST_EDM, training=cfg).fit(images)
    assert a.weights_sha256() == b.weights_sha256()
    assert len(a.loss_history) == 3 and all(math.isfinite(v) for v in a.loss_history)
    out = a.sample(5, torch.Generator().manual_seed(1))
    assert out.shape == (5, 1, 8, 8) and out.dtype == torch.float32
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    assert torch.equal(out, b.sample(5, torch.Generator().manual_seed(1)))
    assert a.sample(0).shape == (0, 1, 8, 8)
    # Chunked sampling gives the same images as one batch.
    small = EDMDiffusionFactory(
        unet=TINY_UNET,
        edm=FAST_EDM,
        training=EDMTrainingConfig(steps=3, batch_size=4, seed=5, sample_batch_size=2),
    ).fit(images)
    # (float32 convolutions on other batch shapes round differently: ~1e-6.)
    assert torch.allclose(small.sample(5, torch.Generator().manual_seed(1)), out, atol=1e-4)


def test_odd_sizes_are_padded_and_cropped() -> None:
    unet = UNetConfig(block_out_channels=(8, 8, 16), norm_num_groups=4)
    assert unet.size_multiple == 4
    images = torch.rand((6, 3, 6, 7), generator=torch.Generator().manual_seed(0))
    f = EDMDiffusionFactory(
        unet=unet, edm=FAST_EDM, training=EDMTrainingConfig(steps=1, batch_size=3, seed=0)
    ).fit(images)
    assert f._model.config.sample_size == [8, 8] or tuple(f._model.config.sample_size) == (8, 8)
    assert f.sample(2, torch.Generator().manual_seed(0)).shape == (2, 3, 6, 7)


@pytest.mark.slow
def test_training_reduces_the_denoising_loss() -> None:
    # Fixed seed; a failure means the optimiser does not learn at all.
    gen = torch.Generator().manual_seed(0)
    base = torch.zeros(1, 1, 8, 8)
    base[..., 2:6, 3:5] = 1.0
    images = (base + 0.05 * torch.rand((64, 1, 8, 8), generator=gen)).clamp(0, 1)
    f = EDMDiffusionFactory(
        unet=TINY_UNET,
        edm=FAST_EDM,
        training=EDMTrainingConfig(steps=80, batch_size=16, learning_rate=3e-3, seed=0),
    ).fit(images)
    first = sum(f.loss_history[:20]) / 20
    last = sum(f.loss_history[-20:]) / 20
    assert last < 0.6 * first


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: UNetConfig(block_out_channels=()), ParameterError),
        (lambda: UNetConfig(block_out_channels=(8, 12), norm_num_groups=8), ParameterError),
        (lambda: UNetConfig(layers_per_block=0), ParameterError),
        (lambda: EDMConfig(sigma_min=1.0, sigma_max=0.5), ParameterError),
        (lambda: EDMConfig(sampling_steps=1), ParameterError),
        (lambda: EDMConfig(sigma_data=float("nan")), ParameterError),
        (lambda: EDMTrainingConfig(steps=0), ParameterError),
        (lambda: EDMTrainingConfig(learning_rate=-1.0), ParameterError),
        (lambda: EDMTrainingConfig(device="not-a-device"), ParameterError),
        (lambda: EDMTrainingConfig(dp="yes"), ParameterTypeError),
        (lambda: EDMDiffusionFactory(unet="big"), ParameterTypeError),
        (lambda: EDMDiffusionFactory(class_id=-2), ParameterError),
    ],
)
def test_configuration_is_validated(build: object, error: type) -> None:
    with pytest.raises(error):
        build()  # type: ignore[operator]


def test_failed_fit_leaves_factory_unchanged() -> None:
    images = torch.rand((4, 1, 8, 8), generator=torch.Generator().manual_seed(0))
    f = EDMDiffusionFactory(
        unet=TINY_UNET, edm=FAST_EDM, training=EDMTrainingConfig(steps=1, seed=0)
    ).fit(images)
    digest = f.weights_sha256()
    with pytest.raises(ParameterError):
        f.fit(images * 3)
    assert f.weights_sha256() == digest and f.sample_count == 4
