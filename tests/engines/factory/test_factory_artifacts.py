"""Factory persistence: safetensors + checksummed manifest; tampering is detected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import privfed
from privfed.engines.factory import (
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    LatentGaussianFactory,
    PrivacyRecord,
    UNetConfig,
    load_factory,
    read_manifest,
)
from privfed.errors import ArtifactIntegrityError, ParameterError

TINY_UNET = UNetConfig(block_out_channels=(8, 16), norm_num_groups=4)


def _digits_like(n: int, seed: int) -> torch.Tensor:
    return torch.rand((n, 1, 8, 8), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def gaussian_factory() -> LatentGaussianFactory:
    return LatentGaussianFactory(latent_dim=5, class_id=3, client_id="hospital-a").fit(
        _digits_like(30, 0)
    )


@pytest.fixture(scope="module")
def edm_factory() -> EDMDiffusionFactory:
    return EDMDiffusionFactory(
        unet=TINY_UNET,
        edm=EDMConfig(sampling_steps=3),
        training=EDMTrainingConfig(steps=2, batch_size=8, seed=0),
        class_id=1,
        client_id=4,
    ).fit(_digits_like(12, 1))


@pytest.mark.parametrize("which", ["gaussian_factory", "edm_factory"])
def test_round_trip_reproduces_samples_and_manifest(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    factory = request.getfixturevalue(which)
    factory.save(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest.factory_type == factory.factory_type
    assert manifest.class_id == factory.class_id
    assert manifest.client_id == factory.client_id
    assert manifest.sample_count == factory.sample_count
    assert manifest.image_shape == (1, 8, 8)
    assert manifest.library_version == privfed.__version__
    assert manifest.privacy == PrivacyRecord()
    loaded = load_factory(tmp_path)
    assert type(loaded) is type(factory)
    assert loaded.weights_sha256() == factory.weights_sha256()
    assert loaded.num_parameters == factory.num_parameters
    a = factory.sample(4, torch.Generator().manual_seed(9))
    b = loaded.sample(4, torch.Generator().manual_seed(9))
    assert torch.equal(a, b)


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("which", ["gaussian_factory", "edm_factory"])
def test_tampered_weights_are_rejected(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    request.getfixturevalue(which).save(tmp_path)
    weights = tmp_path / "weights.safetensors"
    _flip_byte(weights, weights.stat().st_size - 3)  # inside the last tensor's data
    with pytest.raises(ArtifactIntegrityError, match="weights"):
        load_factory(tmp_path)


def test_tampered_manifest_is_rejected(
    gaussian_factory: LatentGaussianFactory, tmp_path: Path
) -> None:
    gaussian_factory.save(tmp_path)
    path = tmp_path / "manifest.json"
    body = json.loads(path.read_text())
    body["sample_count"] = body["sample_count"] + 100  # inflate the quota share
    path.write_text(json.dumps(body))
    with pytest.raises(ArtifactIntegrityError, match="manifest"):
        load_factory(tmp_path)


def test_manifest_rewritten_to_match_new_weights_still_needs_its_own_checksum(
    gaussian_factory: LatentGaussianFactory, tmp_path: Path
) -> None:
    import hashlib

    gaussian_factory.save(tmp_path)
    weights = tmp_path / "weights.safetensors"
    _flip_byte(weights, weights.stat().st_size - 3)
    path = tmp_path / "manifest.json"
    body = json.loads(path.read_text())
    body["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    path.write_text(json.dumps(body))
    with pytest.raises(ArtifactIntegrityError, match="manifest"):
        load_factory(tmp_path)


def test_missing_files_and_garbage_are_rejected(
    gaussian_factory: LatentGaussianFactory, tmp_path: Path
) -> None:
    with pytest.raises(ArtifactIntegrityError):
        load_factory(tmp_path)
    gaussian_factory.save(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ArtifactIntegrityError):
        load_factory(tmp_path)
    gaussian_factory.save(tmp_path)
    (tmp_path / "weights.safetensors").unlink()
    with pytest.raises(ArtifactIntegrityError):
        load_factory(tmp_path)


def test_loading_with_the_wrong_class_is_rejected(
    gaussian_factory: LatentGaussianFactory, tmp_path: Path
) -> None:
    gaussian_factory.save(tmp_path)
    with pytest.raises(ArtifactIntegrityError, match="type"):
        EDMDiffusionFactory.load(tmp_path)


def test_unfitted_factory_cannot_be_saved_or_sampled(tmp_path: Path) -> None:
    for factory in (LatentGaussianFactory(), EDMDiffusionFactory()):
        assert not factory.is_fitted and factory.num_parameters == 0
        with pytest.raises(ParameterError):
            factory.save(tmp_path)
        with pytest.raises(ParameterError):
            factory.sample(2)
    assert not any(tmp_path.iterdir())


def test_privacy_record_validation() -> None:
    with pytest.raises(ParameterError):
        PrivacyRecord(mechanism="none", noise_multiplier=1.0)
    with pytest.raises(ParameterError):
        PrivacyRecord(mechanism="dp-sgd")  # parameters missing
    with pytest.raises(ParameterError):
        PrivacyRecord(
            mechanism="dp-sgd",
            noise_multiplier=1.0,
            clip_norm=1.0,
            sampling_rate=1.5,
            steps=3,
            sampler="x",
        )
    with pytest.raises(ParameterError):
        PrivacyRecord(mechanism="laplace")  # type: ignore[arg-type]


def _reseal(directory: Path) -> None:
    """Recompute both checksums, as a node that ships its own factory can."""
    import hashlib

    from privfed.engines.factory.base import _canonical_json

    path = directory / "manifest.json"
    body = json.loads(path.read_text())
    body["weights_sha256"] = hashlib.sha256(
        (directory / "weights.safetensors").read_bytes()
    ).hexdigest()
    del body["manifest_sha256"]
    body["manifest_sha256"] = hashlib.sha256(_canonical_json(body)).hexdigest()
    path.write_text(json.dumps(body))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_weights_are_refused_even_with_matching_checksums(
    gaussian_factory: LatentGaussianFactory, tmp_path: Path, value: float
) -> None:
    from safetensors.torch import load_file, save_file

    gaussian_factory.save(tmp_path)
    tensors = load_file(tmp_path / "weights.safetensors")
    tensors["mean"][0] = value
    save_file(tensors, tmp_path / "weights.safetensors")
    _reseal(tmp_path)
    with pytest.raises(ArtifactIntegrityError, match="not all finite"):
        load_factory(tmp_path)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' + "1" * 5_000 + "}"])
def test_a_manifest_python_cannot_parse_is_an_integrity_error(
    gaussian_factory: LatentGaussianFactory, tmp_path: Path, text: str
) -> None:
    gaussian_factory.save(tmp_path)
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ArtifactIntegrityError, match="not valid JSON"):
        load_factory(tmp_path)
