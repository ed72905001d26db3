"""A DP factory's manifest carries its serialized release event; format 1 still loads.

Deterministic (seeded noise, fixed images): no false-failure rate.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from privfed import dp
from privfed.data import load_digits
from privfed.engines.codecs import PCACodec
from privfed.engines.factory import LatentGaussianFactory, load_factory, read_manifest
from privfed.engines.factory.base import MANIFEST_FILENAME, MANIFEST_FORMAT_VERSION
from privfed.engines.factory.gaussian import LatentGaussianDP
from privfed.engines.factory.privacy import record_from_release
from privfed.errors import ArtifactIntegrityError


@pytest.fixture(scope="module")
def fitted() -> tuple[LatentGaussianFactory, PCACodec]:
    images = torch.tensor(np.asarray(load_digits().images[:160]), dtype=torch.float32)
    codec = PCACodec.fit(images[:80], latent_dim=4)
    dp_target = LatentGaussianDP(epsilon=2.0, delta=1e-5, seed=5)
    factory = LatentGaussianFactory(codec=codec, dp=dp_target, class_id=3, client_id=7)
    return factory.fit(images[80:]), codec


def _rewrite(directory: Path, body: dict[str, object]) -> None:
    body = dict(body)
    body.pop("manifest_sha256", None)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    body["manifest_sha256"] = hashlib.sha256(canonical.encode()).hexdigest()
    (directory / MANIFEST_FILENAME).write_text(json.dumps(body, indent=2, sort_keys=True))


def test_the_manifest_ships_the_event_and_loading_rebuilds_it(
    fitted: tuple[LatentGaussianFactory, PCACodec], tmp_path: Path
) -> None:
    factory, codec = fitted
    release = factory.release
    assert isinstance(release, dp.GaussianRelease)
    assert release.name == "factory class=3 client=7"
    assert release.partition == dp.PartitionKey("cell", "class=3/client=7")
    assert release.adjacency is dp.Adjacency.REPLACE_ONE and release.seeded
    directory = factory.save(tmp_path / "f")
    body = json.loads((directory / MANIFEST_FILENAME).read_text())
    assert body["format_version"] == MANIFEST_FORMAT_VERSION == 2
    assert "privacy" not in body
    assert body["release"] == release.to_dict()
    assert body["clip_norm"] == float(codec.default_clip_norm)
    loaded = load_factory(directory, codec=codec)
    assert loaded.release == release
    assert read_manifest(directory).release == release
    # The record view is unchanged: the clip norm travels beside the whitened event.
    assert loaded.privacy == factory.privacy
    assert factory.privacy == record_from_release(release, float(codec.default_clip_norm))
    assert factory.privacy.mechanism == "gaussian" and factory.privacy.steps == 1
    # The ledger records the shipped event itself.
    ledger = dp.PrivacyLedger()
    ledger.record(loaded.release)
    assert ledger.releases == (release,)


def test_a_format_1_manifest_loads_its_record_converted_once(
    fitted: tuple[LatentGaussianFactory, PCACodec], tmp_path: Path
) -> None:
    factory, codec = fitted
    directory = factory.save(tmp_path / "old")
    body = json.loads((directory / MANIFEST_FILENAME).read_text())
    clip_norm = body.pop("clip_norm")
    body.pop("release")
    body["format_version"] = 1
    body["privacy"] = factory.privacy.to_dict()
    _rewrite(directory, body)
    manifest = read_manifest(directory)
    assert manifest.format_version == MANIFEST_FORMAT_VERSION
    assert manifest.release == factory.release
    assert manifest.clip_norm == clip_norm
    assert manifest.privacy == factory.privacy
    assert load_factory(directory, codec=codec).release == factory.release


def test_a_format_1_manifest_without_dp_loads_without_an_event(tmp_path: Path) -> None:
    images = torch.tensor(np.asarray(load_digits().images[:40]), dtype=torch.float32)
    factory = LatentGaussianFactory(latent_dim=3, class_id=0, client_id=1).fit(images)
    directory = factory.save(tmp_path / "plain")
    body = json.loads((directory / MANIFEST_FILENAME).read_text())
    assert body["release"] is None
    body.pop("release")
    body.pop("clip_norm")
    body["format_version"] = 1
    body["privacy"] = {
        "mechanism": "none",
        "noise_multiplier": None,
        "clip_norm": None,
        "sampling_rate": None,
        "steps": None,
        "seeded": False,
        "sampler": None,
    }
    _rewrite(directory, body)
    loaded = load_factory(directory)
    assert loaded.release is None and loaded.privacy.mechanism == "none"


@pytest.mark.parametrize(
    "change",
    [
        {"format_version": 3},
        {"release": {"type": "distributed-skellam"}},
        {"release": {"type": "gaussian", "name": "x"}},
    ],
)
def test_unknown_formats_and_foreign_events_are_refused(
    fitted: tuple[LatentGaussianFactory, PCACodec], tmp_path: Path, change: dict[str, object]
) -> None:
    factory, _ = fitted
    directory = factory.save(tmp_path / "bad")
    body = json.loads((directory / MANIFEST_FILENAME).read_text())
    body.update(change)
    _rewrite(directory, body)
    with pytest.raises(ArtifactIntegrityError):
        read_manifest(directory)
