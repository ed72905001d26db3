"""privfed.data: loaders, the explicit split and client partitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.data import (
    ImageDataset,
    load_digits,
    load_image_folder,
    load_npz,
    partition,
    split_public_private,
)
from privfed.errors import NonFiniteInputError, ParameterError


def test_load_digits_shapes_and_ranges() -> None:
    ds = load_digits()
    assert ds.images.shape == (1797, 1, 8, 8)
    assert ds.images.dtype == np.float32 and ds.labels.dtype == np.int64
    assert ds.images.min() >= 0.0 and ds.images.max() <= 1.0
    assert ds.num_classes == 10 and set(ds.labels.tolist()) == set(range(10))


def test_load_digits_reads_the_bundled_file_bit_identically_to_scikit_learn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The direct read of ``digits.csv.gz`` equals scikit-learn's own loader, bit for bit.

    And when the file is not where it is looked for, the loader asks scikit-learn.
    """
    from sklearn.datasets import load_digits as sk_load_digits

    from privfed.data import datasets

    bunch = sk_load_digits()
    expected = (np.asarray(bunch.images, dtype=np.float64) / 16.0).astype(np.float32)[:, None]
    direct = load_digits()
    assert datasets._bundled_digits_table() is not None
    assert np.array_equal(direct.images, expected) and direct.images.flags.c_contiguous
    assert np.array_equal(direct.labels, bunch.target) and direct.labels.dtype == np.int64
    monkeypatch.setattr(datasets, "_bundled_digits_table", lambda: None)
    fallback = load_digits()
    assert np.array_equal(fallback.images, direct.images)
    assert np.array_equal(fallback.labels, direct.labels)


def test_split_is_disjoint_stratified_and_complete() -> None:
    ds = load_digits()
    split = split_public_private(ds, public_fraction=0.2, test_fraction=0.3, seed=3)
    together = np.concatenate([split.public_indices, split.private_indices, split.test_indices])
    assert np.array_equal(np.sort(together), np.arange(len(ds)))
    for part in (split.public, split.private, split.test):
        assert (part.class_counts() > 0).all()
    assert np.array_equal(split.private.labels, ds.labels[split.private_indices])


def test_split_refuses_fractions_leaving_nothing_private() -> None:
    with pytest.raises(ParameterError, match="public_fraction"):
        split_public_private(load_digits(), public_fraction=0.6, test_fraction=0.4)


def test_dataset_validation() -> None:
    images = np.zeros((2, 1, 2, 2), dtype=np.float32)
    with pytest.raises(ParameterError, match="labels"):
        ImageDataset(images, np.array([0, 5], dtype=np.int64), num_classes=2)
    bad = images.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(NonFiniteInputError):
        ImageDataset(bad, np.array([0, 1], dtype=np.int64), num_classes=2)
    ds = ImageDataset(images, np.array([0, 1], dtype=np.int64), num_classes=2)
    assert images.flags.writeable and not ds.images.flags.writeable


def test_npz_and_image_folder_loaders(tmp_path) -> None:
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(6, 5, 4, 3), dtype=np.uint8)  # NHWC
    np.savez(tmp_path / "set.npz", images=raw, labels=np.array([0, 1, 2, 0, 1, 2]))
    ds = load_npz(tmp_path / "set.npz")
    assert ds.images.shape == (6, 3, 5, 4) and ds.num_classes == 3
    np.testing.assert_allclose(ds.images[2, 1], raw[2, :, :, 1] / 255.0, rtol=1e-6)

    from PIL import Image

    for name in ("cat", "dog"):
        (tmp_path / "folder" / name).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(raw[i, :, :, 0]).save(tmp_path / "folder" / name / f"{i}.png")
    folder = load_image_folder(tmp_path / "folder", grayscale=True)
    assert folder.images.shape == (4, 1, 5, 4)
    assert folder.class_names == ("cat", "dog")
    assert folder.labels.tolist() == [0, 0, 1, 1]


SCHEMES = [
    ("iid", {}),
    ("dirichlet", {"alpha": 0.01}),
    ("dirichlet", {"alpha": 1.0}),
    ("pathological", {"classes_per_client": 2}),
    ("single-class", {}),
]


@pytest.mark.parametrize(("scheme", "options"), SCHEMES)
@given(seed=st.integers(0, 2**32 - 1), clients=st.integers(10, 60))
def test_partition_assigns_every_record_once(scheme, options, seed, clients) -> None:
    labels = np.random.default_rng(seed).integers(0, 10, size=300)
    parts = partition(labels, scheme=scheme, num_clients=clients, seed=seed, **options)
    assert len(parts) == clients
    together = np.concatenate(parts)
    assert np.array_equal(np.sort(together), np.arange(labels.size))
    if scheme == "single-class":
        assert all(np.unique(labels[p]).size <= 1 for p in parts)
    if scheme == "pathological":
        assert all(np.unique(labels[p]).size <= 2 for p in parts)


def test_partition_iid_sizes_and_option_checks() -> None:
    labels = np.arange(103) % 10
    sizes = [p.size for p in partition(labels, scheme="iid", num_clients=10, seed=0)]
    assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ParameterError, match="alpha"):
        partition(labels, scheme="dirichlet", num_clients=3, seed=0)
    with pytest.raises(ParameterError, match="alpha"):
        partition(labels, scheme="iid", num_clients=3, seed=0, alpha=0.5)
    with pytest.raises(ParameterError, match="num_clients"):
        partition(labels, scheme="single-class", num_clients=5, seed=0)
    with pytest.raises(ParameterError, match="scheme"):
        partition(labels, scheme="round-robin", num_clients=5, seed=0)


def test_dirichlet_small_alpha_keeps_empty_clients() -> None:
    labels = np.repeat(np.arange(2), 5)
    parts = partition(labels, scheme="dirichlet", num_clients=40, seed=1, alpha=0.01)
    assert len(parts) == 40 and sum(p.size == 0 for p in parts) >= 30
