"""Codecs (PCA, conv autoencoder, diffusers loaded from a local directory) and the classifier."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privfed.data import load_digits
from privfed.engines.classifier import evaluate_classifier, train_classifier
from privfed.engines.codecs import Codec, ConvAutoencoderCodec, DiffusersCodec, PCACodec
from privfed.errors import NonFiniteInputError, ParameterError


@pytest.fixture(scope="module")
def digits() -> torch.Tensor:
    return torch.from_numpy(np.array(load_digits().images))


def test_pca_round_trip_and_clip_norm(digits: torch.Tensor) -> None:
    public = digits[:300]
    full = PCACodec.fit(public, latent_dim=64)
    assert isinstance(full, Codec)
    z = full.encode(digits[300:310])
    assert z.shape == (10, 64) and z.dtype == torch.float32
    # all 64 components: decoding is exact up to float32 error
    torch.testing.assert_close(full.decode(z), digits[300:310], atol=1e-4, rtol=0)
    small = PCACodec.fit(public, latent_dim=8)
    norms = small.encode(public).norm(dim=1)
    assert small.default_clip_norm == pytest.approx(float(norms.median()), rel=0.05)
    assert float(small.encode(digits).norm(dim=1).max()) <= small.norm_bound
    with pytest.raises(ParameterError, match="latent_dim"):
        PCACodec.fit(public, latent_dim=65)
    bad = digits[:2].clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(NonFiniteInputError):
        small.encode(bad)


@pytest.mark.slow
def test_conv_autoencoder_learns_and_normalises(digits: torch.Tensor) -> None:
    torch.set_num_threads(1)
    codec = ConvAutoencoderCodec.fit(digits[:300], latent_dim=8, epochs=25)
    z = codec.encode(digits[:300])
    assert z.shape == (300, 8)
    torch.testing.assert_close(z.mean(0), torch.zeros(8), atol=1e-4, rtol=0)
    torch.testing.assert_close(z.std(0), torch.ones(8), atol=1e-3, rtol=0)
    assert codec.default_clip_norm == pytest.approx(8**0.5)
    baseline = float(((digits[300:] - digits[:300].mean(0)) ** 2).mean())
    error = float(((codec.decode(codec.encode(digits[300:])) - digits[300:]) ** 2).mean())
    assert error < 0.6 * baseline


def _tiny_kl(path) -> None:
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 8),
        layers_per_block=1,
        latent_channels=2,
        norm_num_groups=4,
        sample_size=8,
        scaling_factor=0.5,
    ).save_pretrained(path)


def _tiny_taesd(path) -> None:
    from diffusers import AutoencoderTiny

    torch.manual_seed(0)
    AutoencoderTiny(
        encoder_block_out_channels=(8, 8),
        decoder_block_out_channels=(8, 8),
        num_encoder_blocks=(1, 1),
        num_decoder_blocks=(1, 1),
        latent_channels=2,
    ).save_pretrained(path)


@pytest.mark.slow
@pytest.mark.parametrize(("builder", "kind"), [(_tiny_kl, "kl"), (_tiny_taesd, "tiny")])
def test_diffusers_codec_loads_from_local_directory(tmp_path, builder, kind, digits) -> None:
    builder(tmp_path / "vae")
    codec = DiffusersCodec.from_pretrained(tmp_path / "vae", image_shape=(1, 8, 8), kind=kind)
    assert codec.latent_shape == (2, 4, 4) and codec.latent_dim == 32
    assert codec.default_clip_norm == pytest.approx(2 * 32**0.5)
    z = codec.encode(digits[:5])
    assert z.shape == (5, 32) and torch.isfinite(z).all()
    images = codec.decode(z)
    assert images.shape == (5, 1, 8, 8) and 0.0 <= float(images.min()) <= float(images.max()) <= 1.0
    again = DiffusersCodec.from_pretrained(tmp_path / "vae", image_shape=(1, 8, 8), kind=kind)
    torch.testing.assert_close(again.encode(digits[:5]), z)


def test_diffusers_scaling_factor_is_applied(tmp_path, digits) -> None:
    _tiny_kl(tmp_path / "vae")
    from diffusers import AutoencoderKL

    model = AutoencoderKL.from_pretrained(tmp_path / "vae")
    codec = DiffusersCodec.from_pretrained(tmp_path / "vae", image_shape=(1, 8, 8), kind="kl")
    x = digits[:3].expand(-1, 3, -1, -1) * 2 - 1
    with torch.no_grad():
        raw = model.encode(x).latent_dist.mode().reshape(3, -1)
    torch.testing.assert_close(codec.encode(digits[:3]), raw * 0.5, atol=1e-5, rtol=1e-4)


# -- diffusers codec: refusals before any work ------------------------------------


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("diffusers")
    _tiny_kl(root / "kl")
    _tiny_taesd(root / "tiny")
    return {"kl": root / "kl", "tiny": root / "tiny"}


def _refusal(excinfo: pytest.ExceptionInfo[ParameterError], parameter: str) -> str:
    assert excinfo.value.parameter == parameter
    return str(excinfo.value)


@pytest.mark.parametrize("kind", ["kl", "tiny"])
def test_diffusers_refuses_an_image_size_it_cannot_round_trip(saved_models, kind) -> None:
    # Both models downsample by 2: 27x27 used to come back as 26x26 (KL) or 28x28 (tiny).
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(saved_models[kind], kind=kind, image_shape=(1, 27, 27))
    message = _refusal(excinfo, "image_shape")
    assert "(1, 27, 27)" in message and "multiples of 2" in message and "26x26 or 28x28" in message
    wide = DiffusersCodec.from_pretrained(saved_models[kind], kind=kind, image_shape=(1, 8, 12))
    assert wide.decode(wide.encode(torch.zeros(2, 1, 8, 12))).shape == (2, 1, 8, 12)
    import diffusers

    model_cls = getattr(diffusers, {"kl": "AutoencoderKL", "tiny": "AutoencoderTiny"}[kind])
    with pytest.raises(ParameterError) as excinfo:  # the constructor checks as well
        DiffusersCodec(model_cls.from_pretrained(saved_models[kind]), kind, (1, 27, 27))
    assert "multiples of 2" in _refusal(excinfo, "image_shape")


def test_diffusers_size_check_runs_before_the_weights_load(saved_models, monkeypatch) -> None:
    import diffusers

    def no_weights(*args, **kwargs):
        raise AssertionError("weights were loaded before the image size was checked")

    monkeypatch.setattr(diffusers.AutoencoderKL, "from_pretrained", no_weights)
    with pytest.raises(ParameterError, match="image_shape"):
        DiffusersCodec.from_pretrained(saved_models["kl"], kind="kl", image_shape=(1, 9, 8))


@pytest.mark.parametrize(("kind", "decoded"), [("kl", "26x26"), ("tiny", "28x28")])
def test_diffusers_probe_refuses_a_size_the_config_cannot_predict(
    saved_models, monkeypatch, kind, decoded
) -> None:
    # Without the config's downsampling entry, the blank-image probe is the check.
    from privfed.engines.codecs import pretrained

    monkeypatch.setitem(pretrained._DOWNSAMPLING_KEYS, pretrained.DiffusersKind(kind), "absent")
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(saved_models[kind], kind=kind, image_shape=(1, 27, 27))
    message = _refusal(excinfo, "image_shape")
    assert "decodes back to itself" in message and decoded in message


def test_diffusers_probe_turns_a_model_failure_into_a_parameter_error(
    saved_models, monkeypatch
) -> None:
    from privfed.engines.codecs import pretrained

    monkeypatch.setitem(pretrained._DOWNSAMPLING_KEYS, pretrained.DiffusersKind.KL, "absent")
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(saved_models["kl"], kind="kl", image_shape=(1, 1, 1))
    assert "probe" in _refusal(excinfo, "image_shape")


def test_diffusers_kind_is_explicit_and_checked_against_the_config(saved_models) -> None:
    with pytest.raises(TypeError, match="kind"):
        DiffusersCodec.from_pretrained(saved_models["kl"], image_shape=(1, 8, 8))  # type: ignore[call-arg]
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(saved_models["kl"], kind="auto", image_shape=(1, 8, 8))
    assert "never guessed" in _refusal(excinfo, "kind")
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(saved_models["tiny"], kind="kl", image_shape=(1, 8, 8))
    message = _refusal(excinfo, "kind")
    assert "'tiny'" in message and "AutoencoderTiny" in message
    by_class_name = DiffusersCodec.from_pretrained(
        saved_models["tiny"], kind="AutoencoderTiny", image_shape=(1, 8, 8)
    )
    assert by_class_name.kind == "tiny" and by_class_name.latent_dim == 32


def test_diffusers_refuses_channels_the_model_cannot_take(saved_models) -> None:
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(saved_models["tiny"], kind="tiny", image_shape=(4, 8, 8))
    assert "1 or 3 channels" in _refusal(excinfo, "image_shape")
    rgb = DiffusersCodec.from_pretrained(saved_models["tiny"], kind="tiny", image_shape=(3, 8, 8))
    assert rgb.decode(rgb.encode(torch.rand(2, 3, 8, 8))).shape == (2, 3, 8, 8)


def test_diffusers_unreadable_model_names_the_codec(tmp_path) -> None:
    deep = tmp_path.joinpath(*["nested-directory"] * 6, "no-model-here")
    deep.mkdir(parents=True)
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(deep, kind="kl", image_shape=(1, 8, 8))
    assert "nested-directory/no-model-here'" in _refusal(excinfo, "codec")


def test_missing_diffusers_says_which_extra_to_install(saved_models, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "diffusers", None)  # makes `import diffusers` fail
    with pytest.raises(ParameterError) as excinfo:
        DiffusersCodec.from_pretrained(saved_models["kl"], kind="kl", image_shape=(1, 8, 8))
    assert "pip install 'privfed[engines]'" in _refusal(excinfo, "codec")


@pytest.mark.slow
def test_classifier_learns_digits_and_is_deterministic() -> None:
    torch.set_num_threads(1)
    ds = load_digits()
    x, y = torch.from_numpy(np.array(ds.images)), torch.from_numpy(np.array(ds.labels))
    a = train_classifier(x[:1200], y[:1200], num_classes=10, epochs=8, seed=1)
    b = train_classifier(x[:1200], y[:1200], num_classes=10, epochs=8, seed=1)
    acc = evaluate_classifier(a, x[1200:], y[1200:])
    assert acc > 0.85
    assert acc == evaluate_classifier(b, x[1200:], y[1200:])
    with pytest.raises(ParameterError, match="labels"):
        train_classifier(x[:10], y[:10] + 10, num_classes=10)
