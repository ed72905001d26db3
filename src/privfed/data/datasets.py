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

import importlib.util
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from privfed._checks import (
    check_bool,
    check_int,
    check_optional_int,
    check_probability,
)
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

__all__ = [
    "DatasetSplit",
    "ImageDataset",
    "check_dataset_spec",
    "load_dataset",
    "load_digits",
    "load_image_folder",
    "load_npz",
    "require_classification_data",
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
        check_int("num_classes", self.num_classes, minimum=1)
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
    table = _bundled_digits_table()
    if table is None:  # a scikit-learn that keeps the file elsewhere: ask it
        from sklearn.datasets import load_digits as _sk_load_digits

        bunch = _sk_load_digits()
        pixels, target = np.asarray(bunch.data), np.asarray(bunch.target)
    else:
        pixels, target = table[:, :-1], table[:, -1]
    images = (np.asarray(pixels, dtype=np.float64) / 16.0).astype(np.float32).reshape(-1, 8, 8)
    return ImageDataset(
        images=np.ascontiguousarray(images[:, None, :, :]),
        labels=np.asarray(target, dtype=np.int64),
        num_classes=10,
        class_names=tuple(str(i) for i in range(10)),
        name="digits",
    )


def _bundled_digits_table() -> npt.NDArray[np.float64] | None:
    """scikit-learn's ``digits.csv.gz`` (64 pixel columns, then the label), read directly.

    Importing scikit-learn costs seconds (most of a small run's start-up); the digits
    are one small CSV file inside it, found here without importing the package.
    ``None`` when scikit-learn is not installed or keeps the file elsewhere.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            table = np.loadtxt(path, delimiter=",", dtype=np.float64)
            if table.ndim == 2 and table.shape[1] == 65:
                return table
    return None


def _shown(path: str | Path) -> str:
    """The path as the user typed it, shortened from the left to fit an error message."""
    text = str(path)
    return text if len(text) <= 70 else "..." + text[-67:]


def _dataset_error(path: str | Path, expected: str, problem: str) -> ParameterError:
    """A :class:`ParameterError` about the file or folder given as ``dataset``."""
    return ParameterError("dataset", expected, _shown(path), detail=problem)


def _describe_values(values: np.ndarray, limit: int = 6) -> str:
    """Sorted distinct integers as runs, e.g. ``"0..9, 255"``."""
    runs: list[str] = []
    start = prev = int(values[0])
    for v in (int(x) for x in values[1:]):
        if v != prev + 1:
            runs.append(str(start) if start == prev else f"{start}..{prev}")
            start = v
        prev = v
    runs.append(str(start) if start == prev else f"{start}..{prev}")
    if len(runs) > limit:
        runs = [*runs[: limit - 1], "...", runs[-1]]
    return ", ".join(runs)


def _check_num_classes(num_classes: object) -> int | None:
    return check_optional_int(
        "num_classes",
        num_classes,
        minimum=1,
        numpy=True,
        expected=None,
        domain="an int >= 1 or None",
    )


def _resolve_num_classes(labels: np.ndarray, num_classes: int | None, path: str | Path) -> int:
    """Check ``labels`` (non-empty ``int64``) against ``num_classes`` or infer it.

    Inference rule: without ``num_classes`` the number of classes is
    ``max(label) + 1`` only when every class ``0..max(label)`` has at least
    one record.  A label outside the intended range (a stray 255 among
    0..9) always leaves classes without records, so it is refused instead of
    silently multiplying the number of classes -- and with it the size of
    every client's statistics, which is linear in the number of classes.
    """
    low, high = int(labels.min()), int(labels.max())
    if low < 0:
        raise _dataset_error(
            path,
            "labelled with class indices >= 0",
            f"{int((labels < 0).sum())} labels are negative, the smallest is {low}",
        )
    if num_classes is not None:
        if high >= num_classes:
            outside = int((labels >= num_classes).sum())
            raise ParameterError(
                "num_classes",
                f"greater than every label of dataset {_shown(path)!r}",
                num_classes,
                detail=f"{outside} records have labels outside [0, {num_classes}), "
                f"the largest is {high}",
            )
        return num_classes
    present = np.unique(labels)
    implied = high + 1
    if present.size != implied:
        raise ParameterError(
            "num_classes",
            f"given explicitly when the labels of dataset {_shown(path)!r} "
            f"do not cover every class 0..{high}",
            None,
            detail=f"the labels take the values {_describe_values(present)}, so "
            f"{implied - present.size} of the {implied} classes that max(label) + 1 "
            "implies have no records",
        )
    return implied


def _npz_images(raw: np.ndarray, key: str, path: str | Path) -> np.ndarray:
    """Convert the stored image array to ``float32`` in ``[0, 1]`` or refuse it."""
    expected = f"an .npz archive whose {key!r} array is uint8 (0..255) or float in [0, 1]"
    if raw.dtype == np.uint8:
        return raw.astype(np.float32) / np.float32(255.0)
    if not np.issubdtype(raw.dtype, np.floating):
        raise _dataset_error(path, expected, f"the images have dtype {raw.dtype}")
    if raw.size and not np.isfinite(raw).all():
        raise _dataset_error(
            path, expected, f"{int((~np.isfinite(raw)).sum())} pixel values are NaN or infinite"
        )
    if raw.size and (raw.min() < 0.0 or raw.max() > 1.0):
        raise _dataset_error(
            path,
            expected,
            f"the {raw.dtype} images range over [{float(raw.min()):.6g}, {float(raw.max()):.6g}]",
        )
    return raw.astype(np.float32)


def _npz_layout(images: np.ndarray, layout: str, key: str, path: str | Path) -> np.ndarray:
    """Bring ``images`` to ``(N, C, H, W)``."""
    expected = (
        f"an .npz archive whose {key!r} array has shape (N, H, W), (N, C, H, W) or (N, H, W, C)"
    )
    if images.ndim == 3:
        out = images[:, None, :, :]
    elif images.ndim == 4:
        channels_first = images.shape[1] in (1, 3)
        channels_last = images.shape[3] in (1, 3)
        if layout == "NHWC" or (layout == "auto" and not channels_first and channels_last):
            out = images.transpose(0, 3, 1, 2)
        elif layout == "NCHW" or channels_first:
            out = images
        else:
            raise _dataset_error(
                path,
                expected + " with C = 1 or 3",
                f"the images have shape {images.shape}: neither axis 1 nor axis 3 has size 1 or 3",
            )
    else:
        raise _dataset_error(path, expected, f"the images have shape {images.shape}")
    if out.shape[0] == 0:
        raise _dataset_error(path, "an .npz archive holding at least one image", "it holds none")
    if 0 in out.shape[1:]:
        raise _dataset_error(path, expected, f"the images have shape {images.shape}")
    return out


def _npz_labels(raw: np.ndarray, key: str, count: int, path: str | Path) -> np.ndarray:
    expected = f"an .npz archive whose {key!r} array holds one integer label per image"
    if not np.issubdtype(raw.dtype, np.integer):
        hint = " (store integer class indices)" if np.issubdtype(raw.dtype, np.floating) else ""
        raise _dataset_error(path, expected, f"the labels have dtype {raw.dtype}{hint}")
    if raw.ndim != 1:
        hint = "; one-hot labels must be stored as class indices" if raw.ndim == 2 else ""
        raise _dataset_error(path, expected, f"the labels have shape {raw.shape}{hint}")
    if raw.shape[0] != count:
        raise _dataset_error(path, expected, f"it holds {count} images but {raw.shape[0]} labels")
    if np.issubdtype(raw.dtype, np.unsignedinteger) and raw.size and int(raw.max()) > 2**62:
        raise _dataset_error(path, expected, f"a label is as large as {int(raw.max())}")
    return raw.astype(np.int64)


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
        path: The archive (written by ``numpy.savez``; pickled objects are
            refused).  This is the user's ``dataset``: every problem with the
            file is reported as a :class:`ParameterError` named ``"dataset"``
            whose message shows the path.
        images_key: Name of the images array: ``uint8`` in 0..255 (divided by 255)
            or float in ``[0, 1]``; shape ``(N, H, W)``, ``(N, C, H, W)`` or
            ``(N, H, W, C)`` with ``N >= 1``.
        labels_key: Name of the integer labels array, shape ``(N,)``, values >= 0.
        layout: ``"NCHW"``, ``"NHWC"`` or ``"auto"``: a 4-D array whose axis 1 has
            size 1 or 3 is read as NCHW, otherwise one whose last axis does is
            read as NHWC; any other 4-D shape needs an explicit layout.
        num_classes: Number of classes ``K >= 1``; every label must lie in
            ``[0, K)``.  ``None`` infers ``K = max(label) + 1``, but only when
            every class ``0..K-1`` has at least one record (otherwise the labels
            hold a value outside the intended range, or the data lack a class,
            and the loader cannot tell which: pass ``num_classes``).

    Returns:
        The dataset, images ``float32`` ``(N, C, H, W)`` in ``[0, 1]``.

    Raises:
        ParameterError: Named ``"dataset"`` when the file is missing, not a
            readable ``.npz`` archive, lacks a key, or holds arrays of the wrong
            dtype, shape or range; named ``"num_classes"`` when a label is
            ``>= num_classes`` or ``num_classes`` cannot be inferred (see above);
            named ``"layout"`` for an unknown layout.
        ParameterTypeError: If ``num_classes`` or a key has the wrong type.
    """
    if layout not in ("auto", "NCHW", "NHWC"):
        raise ParameterError("layout", "one of 'auto', 'NCHW', 'NHWC'", layout)
    for key_name, key in (("images_key", images_key), ("labels_key", labels_key)):
        if not isinstance(key, str):
            raise ParameterTypeError(key_name, "a str", key)
    k = _check_num_classes(num_classes)
    file = Path(path)
    readable = "a readable .npz archive (numpy.savez)"
    if not file.exists():
        raise _dataset_error(path, "an existing .npz file", "no such file")
    if not file.is_file():
        raise _dataset_error(path, "an .npz file", "it is a directory, not a file")
    _check_npz_magic(file, path)
    try:
        archive = np.load(file, allow_pickle=False)
    except EOFError:
        raise _dataset_error(path, readable, "the file is empty") from None
    except (OSError, ValueError, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        raise _dataset_error(path, readable, f"numpy cannot read it: {_first_line(exc)}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise _dataset_error(path, readable, "it holds a single .npy array, not an archive")
    with archive:
        missing = [key for key in (images_key, labels_key) if key not in archive.files]
        if missing:
            held = ", ".join(repr(name) for name in archive.files[:8]) or "no arrays"
            raise _dataset_error(
                path,
                f"an .npz archive holding arrays {images_key!r} and {labels_key!r}",
                f"it holds {held}",
            )
        try:
            stored = {key: archive[key] for key in (images_key, labels_key)}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise _dataset_error(
                path, readable, f"an array cannot be read: {_first_line(exc)}"
            ) from None
    for key, value in stored.items():
        if not isinstance(value, np.ndarray) or value.dtype.kind in "OSUV":
            raise _dataset_error(path, readable, f"{key!r} is not a numeric numpy array")
    images = _npz_layout(
        _npz_images(stored[images_key], images_key, path), layout, images_key, path
    )
    labels = _npz_labels(stored[labels_key], labels_key, int(images.shape[0]), path)
    return ImageDataset(
        images=np.ascontiguousarray(images, dtype=np.float32),
        labels=labels,
        num_classes=_resolve_num_classes(labels, k, path),
        name=file.stem,
    )


def _check_npz_magic(file: Path, path: str | Path) -> None:
    """Refuse a file that is no numpy archive by its first bytes (before numpy's advice)."""
    readable = "a readable .npz archive (numpy.savez)"
    try:
        with file.open("rb") as handle:
            magic = handle.read(6)
    except OSError as exc:
        raise _dataset_error(path, readable, f"it cannot be read: {_first_line(exc)}") from None
    if magic and not magic.startswith((b"PK", b"\x93NUMPY")):
        raise _dataset_error(path, readable, "it is not a zip archive, which numpy.savez writes")


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_image_folder(
    root: str | Path,
    *,
    image_size: tuple[int, int] | None = None,
    grayscale: bool = False,
    num_classes: int | None = None,
) -> ImageDataset:
    """Load images laid out as ``root/<class name>/<image file>``.

    Classes are the sub-directories of ``root`` in sorted order; label ``i`` is
    the ``i``-th name.  Hidden entries (names starting with ``"."``, such as
    ``.ipynb_checkpoints``) are ignored, so they never become a class.  Files
    whose suffix is not an image suffix are skipped.  Needs Pillow (installed
    with matplotlib).

    Args:
        root: The directory (the user's ``dataset``; problems with it are
            reported as a :class:`ParameterError` named ``"dataset"``).
        image_size: ``(height, width)`` to resize every image to (bilinear);
            required when the files do not all have the same size.
        grayscale: Convert to one channel; otherwise RGB (three channels).
        num_classes: The expected number of classes; must equal the number of
            class directories.  ``None`` takes that number, but then every
            class directory must hold at least one image (an empty directory is
            more often a mistake than an intended empty class; pass
            ``num_classes`` to keep it as a class without records).

    Returns:
        The dataset, images ``float32`` ``(N, C, H, W)`` in ``[0, 1]``.

    Raises:
        ParameterError: Named ``"dataset"`` if ``root`` is missing, has no class
            directories or no images, holds an unreadable image, an empty class
            directory (without ``num_classes``), or images of different sizes
            (without ``image_size``); named ``"num_classes"`` if it differs from
            the number of class directories; ``"image_size"`` if that is malformed.
    """
    k = _check_num_classes(num_classes)
    if image_size is not None and (
        not isinstance(image_size, tuple | list)
        or len(image_size) != 2
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in image_size)
        or min(image_size) < 1
    ):
        raise ParameterError("image_size", "a (height, width) pair of ints >= 1", image_size)
    base = Path(root)
    class_dirs = _class_directories(root, base, k)
    arrays: list[np.ndarray] = []
    labels: list[int] = []
    sources: list[str] = []
    for label, directory in enumerate(class_dirs):
        files = [
            f
            for f in sorted(directory.iterdir())
            if f.is_file() and not f.name.startswith(".") and f.suffix.lower() in _IMAGE_SUFFIXES
        ]
        if not files and k is None:
            raise _dataset_error(
                root,
                "a folder whose every class directory holds at least one image",
                f"{directory.name!r} holds none; remove it, or give num_classes to keep it "
                "as a class without records",
            )
        for file in files:
            arrays.append(_read_image(root, file, image_size, grayscale))
            labels.append(label)
            sources.append(f"{directory.name}/{file.name}")
    if not arrays:
        raise _dataset_error(root, "a folder holding image files", "it holds none")
    _check_one_size(root, arrays, sources)
    stacked = np.stack(arrays).transpose(0, 3, 1, 2)
    return ImageDataset(
        images=(stacked.astype(np.float32) / np.float32(255.0)).astype(np.float32),
        labels=np.asarray(labels, dtype=np.int64),
        num_classes=len(class_dirs),
        class_names=tuple(p.name for p in class_dirs),
        name=base.name,
    )


def _class_directories(root: str | Path, base: Path, k: int | None) -> list[Path]:
    """The class directories of an image folder, sorted, hidden ones left out; ``k`` of them."""
    folder = "a directory with one sub-directory of images per class"
    if not base.exists():
        raise _dataset_error(root, "an existing directory", "no such directory")
    if not base.is_dir():
        raise _dataset_error(root, folder, "it is a file, not a directory")
    class_dirs = sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not class_dirs:
        raise _dataset_error(root, folder, "it has no sub-directories")
    if k is not None and k != len(class_dirs):
        names = ", ".join(repr(p.name) for p in class_dirs[:8])
        more = ", ..." if len(class_dirs) > 8 else ""
        raise ParameterError(
            "num_classes",
            f"the number of class directories of dataset {_shown(root)!r}, {len(class_dirs)}",
            k,
            detail=f"the class directories are {names}{more}",
        )
    return class_dirs


def _read_image(
    root: str | Path, file: Path, image_size: tuple[int, int] | None, grayscale: bool
) -> np.ndarray:
    """One image file as ``uint8`` ``(H, W, C)``, converted and resized as asked."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as img:
            converted = img.convert("L" if grayscale else "RGB")
            if image_size is not None:
                converted = converted.resize(
                    (image_size[1], image_size[0]), Image.Resampling.BILINEAR
                )
            array = np.asarray(converted, dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        raise _dataset_error(
            root,
            "a folder of readable image files",
            f"{file.parent.name}/{file.name} is not a readable image",
        ) from None
    return array[:, :, None] if array.ndim == 2 else array


def _check_one_size(root: str | Path, arrays: list[np.ndarray], sources: list[str]) -> None:
    """Refuse images of more than one (height, width), naming the first odd one."""
    first = arrays[0].shape[:2]
    odd = next((i for i, a in enumerate(arrays) if a.shape[:2] != first), None)
    if odd is not None:
        count = len({a.shape[:2] for a in arrays})
        other = arrays[odd].shape[:2]
        raise _dataset_error(
            root,
            "a folder of images that all have one size",
            f"{count} sizes, e.g. {first[0]}x{first[1]} ({sources[0]}) and "
            f"{other[0]}x{other[1]} ({sources[odd]}); resize them to one size",
        )


def load_dataset(spec: str | Path, *, num_classes: int | None = None) -> ImageDataset:
    """Load the dataset a user named: ``"digits"``, an ``.npz`` file or an image folder.

    This is the one entry point for a user-typed ``dataset`` (a CLI option or a
    job configuration); every problem is a :class:`ParameterError` named
    ``"dataset"`` (or ``"num_classes"``) that shows what was typed.

    Args:
        spec: ``"digits"`` (scikit-learn's bundled digits, 10 classes), the path
            of an ``.npz`` archive (:func:`load_npz`) or of a folder of class
            directories (:func:`load_image_folder`).
        num_classes: The number of classes, passed to the loader; for
            ``"digits"`` it must be 10 when given.

    Returns:
        The dataset.

    Raises:
        ParameterError: If ``spec`` names nothing loadable, or a loader refuses it.
        ParameterTypeError: If ``spec`` is not a str or path.
    """
    k = check_dataset_spec(spec, num_classes=num_classes)
    if str(spec) == "digits":
        return load_digits()
    path = Path(spec)
    if path.is_dir():
        return load_image_folder(path, num_classes=k)
    return load_npz(path, num_classes=k)


def check_dataset_spec(spec: str | Path, *, num_classes: int | None = None) -> int | None:
    """The cheap checks of :func:`load_dataset`, without loading: call before any work.

    Whether ``spec`` is ``"digits"``, an existing folder, or an existing file
    that is a numpy archive by its first bytes; and ``num_classes`` against
    ``"digits"``.

    Returns:
        ``num_classes`` checked (``None`` to infer).

    Raises:
        ParameterError: As :func:`load_dataset`, for what can be told without loading.
        ParameterTypeError: If ``spec`` is not a str or path.
    """
    if not isinstance(spec, str | Path):
        raise ParameterTypeError("dataset", "a str or path", spec)
    k = _check_num_classes(num_classes)
    expected = "'digits', an existing .npz file or a folder of class directories"
    if str(spec) == "digits":
        if k is not None and k != 10:
            raise ParameterError("num_classes", "10 (or not given) for dataset 'digits'", k)
        return k
    path = Path(spec)
    if str(spec) == "" or not path.exists():
        raise _dataset_error(spec, expected, "no such file or directory")
    if path.is_dir():
        return k
    if path.suffix.lower() != ".npz":
        raise _dataset_error(spec, expected, f"a {path.suffix or 'suffix-less'} file is neither")
    _check_npz_magic(path, spec)
    return k


def require_classification_data(dataset: ImageDataset, *, name: str = "dataset") -> None:
    """Refuse a dataset on which a classifier cannot meaningfully be trained or scored.

    A classifier needs at least two classes, each with records: on one class
    every prediction is right and the reported accuracy (1.0) means nothing.
    Call this before training a downstream classifier.

    Args:
        dataset: The labelled data (typically the full dataset, before the split).
        name: The parameter named in the error (the user's option).

    Raises:
        ParameterError: If ``num_classes < 2`` or fewer than two classes have records.
        ParameterTypeError: If ``dataset`` is not an :class:`ImageDataset`.
    """
    if not isinstance(dataset, ImageDataset):
        raise ParameterTypeError(name, "an ImageDataset", dataset)
    domain = "a dataset with at least 2 classes to train and evaluate a classifier"
    if dataset.num_classes < 2:
        raise ParameterError(
            name,
            domain,
            dataset.name,
            detail=f"it has {dataset.num_classes} class; on one class any classifier "
            "scores accuracy 1.0",
        )
    present = np.flatnonzero(dataset.class_counts())
    if present.size < 2:
        held = "no records" if present.size == 0 else f"records of class {int(present[0])} only"
        raise ParameterError(
            name,
            domain,
            dataset.name,
            detail=f"it declares {dataset.num_classes} classes but holds {held}",
        )


def _check_fraction(name: str, value: float) -> float:
    return check_probability(
        name, value, numpy=False, expected="a float", domain="a float strictly between 0 and 1"
    )


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
        seed: Seed of the shuffle, an int ``>= 0``.
        stratify: Split per class (default) or over the whole shuffled set.

    Returns:
        The split, with the source indices of each part; every part holds at
        least one record.

    Raises:
        ParameterError: If a fraction is out of range, the two leave nothing
            private, or the dataset is too small for a fraction to give its part
            at least one record (named after the fraction; ``"dataset"`` when the
            dataset is empty).
        ParameterTypeError: On a wrongly typed argument.
    """
    if not isinstance(dataset, ImageDataset):
        raise ParameterTypeError("dataset", "an ImageDataset", dataset)
    pub = _check_fraction("public_fraction", public_fraction)
    tst = _check_fraction("test_fraction", test_fraction)
    if pub + tst >= 1.0:
        raise ParameterError(
            "public_fraction + test_fraction", "< 1 (something must stay private)", pub + tst
        )
    check_int("seed", seed, minimum=0, numpy=True, expected=None)
    check_bool("stratify", stratify)
    if len(dataset) == 0:
        raise ParameterError("dataset", "a dataset with at least 3 records to split", dataset.name)
    rng = np.random.default_rng(int(seed))
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
    rounding = (
        f"dataset {dataset.name!r} has {len(dataset)} records"
        + (f", at most {max(g.size for g in groups)} per class" if stratify else "")
        + "; each part needs at least one"
    )
    if priv_idx.size == 0:
        raise ParameterError(
            "public_fraction",
            "small enough, with test_fraction, to leave private records",
            pub,
            detail=rounding,
        )
    for fraction, value, idx, part in (
        ("public_fraction", pub, pub_idx, "public"),
        ("test_fraction", tst, test_idx, "test"),
    ):
        if idx.size == 0:
            raise ParameterError(
                fraction,
                f"large enough to give the {part} part at least one record",
                value,
                detail=rounding,
            )
    return DatasetSplit(
        public=dataset.subset(pub_idx, name=f"{dataset.name}/public"),
        private=dataset.subset(priv_idx, name=f"{dataset.name}/private"),
        test=dataset.subset(test_idx, name=f"{dataset.name}/test"),
        public_indices=pub_idx,
        private_indices=priv_idx,
        test_indices=test_idx,
    )
