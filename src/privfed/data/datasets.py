"""Labelled image datasets: a validated container, loaders and an explicit split.

Images are held as numpy ``float32`` arrays of shape ``(N, C, H, W)`` with values
in ``[0, 1]``; labels are ``int64`` arrays of shape ``(N,)`` with values in
``[0, num_classes)``.  Nothing here imports torch, so the data layer can be used
by clients that only compute statistics from precomputed latents.

The split into *public*, *private* and *test* parts is explicit
(:func:`split_public_private`): codecs and every data-dependent hyper-parameter
(clip norm, latent dimension) may be fitted on the public part only; the private
part is what the clients hold and what the privacy guarantee protects; the test
part is held-out real data used only for evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

__all__ = [
    "DatasetSplit",
    "ImageDataset",
    "load_digits",
    "load_image_folder",
    "load_npz",
    "split_public_private",
]

_IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"})


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """A labelled image dataset held in memory.

    Attributes:
        images: ``float32`` array of shape ``(N, C, H, W)``, values in ``[0, 1]``.
        labels: ``int64`` array of shape ``(N,)``, values in ``[0, num_classes)``.
        num_classes: Number of classes ``K >= 1`` (classes may be absent from a
            subset; ``K`` is a property of the task, not of the sample).
        class_names: Optional names, one per class.
        name: A short human-readable name used in reports.

    Raises:
        ParameterTypeError: If an array has the wrong dtype or type.
        ParameterError: If a shape, range or class index is invalid.
        NonFiniteInputError: If ``images`` holds NaN or inf.
    """

    images: np.ndarray
    labels: np.ndarray
    num_classes: int
    class_names: tuple[str, ...] | None = None
    name: str = "dataset"

    def __post_init__(self) -> None:
        images, labels = self.images, self.labels
        if not isinstance(images, np.ndarray) or images.dtype != np.float32:
            raise ParameterTypeError("images", "a numpy float32 array", images)
        if not isinstance(labels, np.ndarray) or labels.dtype != np.int64:
            raise ParameterTypeError("labels", "a numpy int64 array", labels)
        if images.ndim != 4:
            raise ParameterError("images", "an array of shape (N, C, H, W)", images.shape)
        if labels.shape != (images.shape[0],):
            raise ParameterError("labels", f"an array of shape ({images.shape[0]},)", labels.shape)
        if isinstance(self.num_classes, bool) or not isinstance(self.num_classes, int):
            raise ParameterTypeError("num_classes", "an int", self.num_classes)
        if self.num_classes < 1:
            raise ParameterError("num_classes", "an int >= 1", self.num_classes)
        if images.size and not np.isfinite(images).all():
            raise NonFiniteInputError("images", count=int((~np.isfinite(images)).sum()))
        if images.size and (images.min() < 0.0 or images.max() > 1.0):
            raise ParameterError(
                "images",
                "values in [0, 1]",
                (float(images.min()), float(images.max())),
            )
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise ParameterError(
                "labels",
                f"values in [0, {self.num_classes})",
                (int(labels.min()), int(labels.max())),
            )
        if self.class_names is not None and len(self.class_names) != self.num_classes:
            raise ParameterError(
                "class_names", f"a tuple of {self.num_classes} names", self.class_names
            )
        # Datasets are values: hold read-only views so that nobody can change a
        # dataset through it (the caller's own arrays keep their flags).
        for attr, array in (("images", images), ("labels", labels)):
            view = array.view()
            view.setflags(write=False)
            object.__setattr__(self, attr, view)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """The ``(C, H, W)`` shape of one image."""
        _, c, h, w = self.images.shape
        return (int(c), int(h), int(w))

    def class_counts(self) -> np.ndarray:
        """Return the number of records per class, ``int64`` of shape ``(num_classes,)``."""
        return np.bincount(self.labels, minlength=self.num_classes).astype(np.int64)

    def subset(self, indices: np.ndarray, *, name: str | None = None) -> ImageDataset:
        """Return the records at ``indices`` (an integer array) as a new dataset."""
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise ParameterError("indices", "a 1-D integer array", idx.shape)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise ParameterError("indices", f"indices into a dataset of {len(self)}", None)
        idx = idx.astype(np.int64, copy=False)
        return ImageDataset(
            images=np.ascontiguousarray(self.images[idx]),
            labels=np.ascontiguousarray(self.labels[idx]),
            num_classes=self.num_classes,
            class_names=self.class_names,
            name=self.name if name is None else name,
        )


@dataclass(frozen=True, eq=False)
class DatasetSplit:
    """An explicit public / private / test split of one dataset.

    Attributes:
        public: Data that may be used freely: codec fitting, clip-norm choice,
            hyper-parameters.  Not protected by any privacy guarantee.
        private: The clients' data; the only part the DP guarantee covers.
        test: Held-out real data, used only to evaluate downstream models.
        public_indices: Indices of ``public`` in the source dataset (``int64``).
        private_indices: Indices of ``private`` in the source dataset.
        test_indices: Indices of ``test`` in the source dataset.
    """

    public: ImageDataset
    private: ImageDataset
    test: ImageDataset
    public_indices: np.ndarray
    private_indices: np.ndarray
    test_indices: np.ndarray

    def __post_init__(self) -> None:
        for part, idx, label in (
            (self.public, self.public_indices, "public_indices"),
            (self.private, self.private_indices, "private_indices"),
            (self.test, self.test_indices, "test_indices"),
        ):
            if idx.shape != (len(part),):
                raise ParameterError(label, f"an array of shape ({len(part)},)", idx.shape)
        together = np.concatenate([self.public_indices, self.private_indices, self.test_indices])
        if np.unique(together).size != together.size:
            raise ParameterError("indices", "pairwise disjoint index sets", None)


def load_digits() -> ImageDataset:
    """Load scikit-learn's bundled handwritten digits (no download).

    Returns:
        1797 images of shape ``(1, 8, 8)``, ``float32`` in ``[0, 1]`` (the original
        4-bit intensities 0..16 divided by 16), ``int64`` labels 0..9.
    """
    from sklearn.datasets import load_digits as _sk_load_digits

    bunch = _sk_load_digits()
    images = (np.asarray(bunch.images, dtype=np.float64) / 16.0).astype(np.float32)
    return ImageDataset(
        images=np.ascontiguousarray(images[:, None, :, :]),
        labels=np.asarray(bunch.target, dtype=np.int64),
        num_classes=10,
        class_names=tuple(str(i) for i in range(10)),
        name="digits",
    )


def _to_unit_float(array: np.ndarray, name: str) -> np.ndarray:
    if array.dtype == np.uint8:
        return (array.astype(np.float32) / np.float32(255.0)).astype(np.float32)
    if np.issubdtype(array.dtype, np.floating):
        out = array.astype(np.float32)
        if out.size and not np.isfinite(out).all():
            raise NonFiniteInputError(name, count=int((~np.isfinite(out)).sum()))
        return out
    raise ParameterTypeError(name, "a uint8 array (0..255) or a float array in [0, 1]", array)


def load_npz(
    path: str | Path,
    *,
    images_key: str = "images",
    labels_key: str = "labels",
    layout: Literal["auto", "NCHW", "NHWC"] = "auto",
    num_classes: int | None = None,
) -> ImageDataset:
    """Load a labelled image set from a ``.npz`` archive.

    Args:
        path: The archive.
        images_key: Name of the images array: ``uint8`` in 0..255 (divided by 255)
            or float in ``[0, 1]``; shape ``(N, H, W)``, ``(N, C, H, W)`` or
            ``(N, H, W, C)``.
        labels_key: Name of the integer labels array, shape ``(N,)``, values >= 0.
        layout: ``"NCHW"``, ``"NHWC"`` or ``"auto"``: a 4-D array whose axis 1 has
            size 1 or 3 is read as NCHW, otherwise one whose last axis does is
            read as NHWC.
        num_classes: Number of classes; default ``max(label) + 1``.

    Returns:
        The dataset, images ``float32`` ``(N, C, H, W)`` in ``[0, 1]``.

    Raises:
        ParameterError: On a missing key, an unreadable layout or out-of-range values.
    """
    if layout not in ("auto", "NCHW", "NHWC"):
        raise ParameterError("layout", "one of 'auto', 'NCHW', 'NHWC'", layout)
    with np.load(Path(path), allow_pickle=False) as archive:
        for key in (images_key, labels_key):
            if key not in archive:
                raise ParameterError(
                    "path", f"an .npz archive holding {key!r}", str(path), detail=None
                )
        raw_images = np.asarray(archive[images_key])
        raw_labels = np.asarray(archive[labels_key])
    images = _to_unit_float(raw_images, images_key)
    if images.ndim == 3:
        images = images[:, None, :, :]
    elif images.ndim == 4:
        channels_first = images.shape[1] in (1, 3)
        channels_last = images.shape[3] in (1, 3)
        if layout == "NHWC" or (layout == "auto" and not channels_first and channels_last):
            images = images.transpose(0, 3, 1, 2)
        elif layout == "auto" and not channels_first:
            raise ParameterError("layout", "'NCHW' or 'NHWC' for this array", images.shape)
    else:
        raise ParameterError(images_key, "a 3-D or 4-D image array", images.shape)
    if not np.issubdtype(raw_labels.dtype, np.integer) or raw_labels.ndim != 1:
        raise ParameterError(labels_key, "a 1-D integer array", raw_labels.shape)
    labels = raw_labels.astype(np.int64)
    k = int(labels.max()) + 1 if num_classes is None and labels.size else num_classes
    return ImageDataset(
        images=np.ascontiguousarray(images, dtype=np.float32),
        labels=labels,
        num_classes=int(k if k is not None else 1),
        name=Path(path).stem,
    )


def load_image_folder(
    root: str | Path,
    *,
    image_size: tuple[int, int] | None = None,
    grayscale: bool = False,
) -> ImageDataset:
    """Load images laid out as ``root/<class name>/<image file>``.

    Classes are the sub-directories of ``root`` in sorted order; label ``i`` is
    the ``i``-th name.  Needs Pillow (installed with matplotlib).

    Args:
        root: The directory.
        image_size: ``(height, width)`` to resize every image to (bilinear);
            required when the files do not all have the same size.
        grayscale: Convert to one channel; otherwise RGB (three channels).

    Returns:
        The dataset, images ``float32`` ``(N, C, H, W)`` in ``[0, 1]``.

    Raises:
        ParameterError: If ``root`` has no class directories or no images, or the
            sizes differ and ``image_size`` is not given.
    """
    from PIL import Image

    base = Path(root)
    if not base.is_dir():
        raise ParameterError("root", "an existing directory", str(root))
    class_dirs = sorted(p for p in base.iterdir() if p.is_dir())
    if not class_dirs:
        raise ParameterError("root", "a directory with one sub-directory per class", str(root))
    if image_size is not None and (
        len(image_size) != 2
        or min(image_size) < 1
        or not all(isinstance(s, int) for s in image_size)
    ):
        raise ParameterError("image_size", "a (height, width) pair of ints >= 1", image_size)
    arrays: list[np.ndarray] = []
    labels: list[int] = []
    for label, directory in enumerate(class_dirs):
        for file in sorted(directory.iterdir()):
            if file.suffix.lower() not in _IMAGE_SUFFIXES:
                continue
            with Image.open(file) as img:
                converted = img.convert("L" if grayscale else "RGB")
                if image_size is not None:
                    converted = converted.resize(
                        (image_size[1], image_size[0]), Image.Resampling.BILINEAR
                    )
                array = np.asarray(converted, dtype=np.uint8)
            arrays.append(array[:, :, None] if array.ndim == 2 else array)
            labels.append(label)
    if not arrays:
        raise ParameterError("root", "a directory holding image files", str(root))
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ParameterError(
            "image_size",
            "given when the images differ in size",
            None,
            detail=f"{len(shapes)} sizes",
        )
    stacked = np.stack(arrays).transpose(0, 3, 1, 2)
    return ImageDataset(
        images=(stacked.astype(np.float32) / np.float32(255.0)).astype(np.float32),
        labels=np.asarray(labels, dtype=np.int64),
        num_classes=len(class_dirs),
        class_names=tuple(p.name for p in class_dirs),
        name=base.name,
    )


def _check_fraction(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterTypeError(name, "a float", value)
    if not math.isfinite(value) or not 0.0 < value < 1.0:
        raise ParameterError(name, "a float in (0, 1)", value)
    return float(value)


def split_public_private(
    dataset: ImageDataset,
    *,
    public_fraction: float,
    test_fraction: float,
    seed: int = 0,
    stratify: bool = True,
) -> DatasetSplit:
    """Split a dataset into disjoint public, private and test parts.

    Every record lands in exactly one part.  With ``stratify`` (the default) the
    split is done class by class, so every part keeps the class proportions (up
    to rounding: per class, ``round(fraction * n_c)`` records go to public and to
    test, the rest to private).  The split is an experimental-design choice, not
    a privacy mechanism, so it uses a seeded numpy generator.

    Args:
        dataset: The source dataset.
        public_fraction: Fraction in ``(0, 1)`` given to the public part.
        test_fraction: Fraction in ``(0, 1)`` given to the test part;
            ``public_fraction + test_fraction < 1``.
        seed: Seed of the shuffle.
        stratify: Split per class (default) or over the whole shuffled set.

    Returns:
        The split, with the source indices of each part.

    Raises:
        ParameterError: If the fractions are out of range or leave no private data.
    """
    pub = _check_fraction("public_fraction", public_fraction)
    tst = _check_fraction("test_fraction", test_fraction)
    if pub + tst >= 1.0:
        raise ParameterError(
            "public_fraction + test_fraction", "< 1 (something must stay private)", pub + tst
        )
    rng = np.random.default_rng(seed)
    groups = (
        [np.flatnonzero(dataset.labels == c) for c in range(dataset.num_classes)]
        if stratify
        else [np.arange(len(dataset), dtype=np.int64)]
    )
    public, private, test = [], [], []
    for group in groups:
        shuffled = rng.permutation(group)
        n_pub = round(pub * shuffled.size)
        n_test = round(tst * shuffled.size)
        public.append(shuffled[:n_pub])
        test.append(shuffled[n_pub : n_pub + n_test])
        private.append(shuffled[n_pub + n_test :])
    pub_idx, priv_idx, test_idx = (
        np.sort(np.concatenate(parts)).astype(np.int64) for parts in (public, private, test)
    )
    if priv_idx.size == 0:
        raise ParameterError("public_fraction", "small enough to leave private records", pub)
    return DatasetSplit(
        public=dataset.subset(pub_idx, name=f"{dataset.name}/public"),
        private=dataset.subset(priv_idx, name=f"{dataset.name}/private"),
        test=dataset.subset(test_idx, name=f"{dataset.name}/test"),
        public_indices=pub_idx,
        private_indices=priv_idx,
        test_indices=test_idx,
    )
