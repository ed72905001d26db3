"""privfed.data refuses bad user input with a ParameterError naming what the user typed."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from privfed.data import (
    ImageDataset,
    load_dataset,
    load_digits,
    load_image_folder,
    load_npz,
    require_classification_data,
    split_public_private,
)
from privfed.errors import ParameterError, ParameterTypeError


def _refusal(excinfo: pytest.ExceptionInfo[ParameterError], parameter: str) -> str:
    assert excinfo.value.parameter == parameter
    return str(excinfo.value)


def _save(path: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    np.savez(path, images=images, labels=labels)
    return path


def _gray(n: int) -> np.ndarray:
    return np.zeros((n, 4, 4), dtype=np.uint8)


# -- number of classes ---------------------------------------------------------


def test_a_stray_label_is_refused_instead_of_multiplying_the_classes(tmp_path) -> None:
    labels = np.array([*range(10), 255] * 2)
    path = _save(tmp_path / "stray.npz", _gray(labels.size), labels)
    with pytest.raises(ParameterError) as excinfo:
        load_npz(path)  # used to give num_classes == 256
    message = _refusal(excinfo, "num_classes")
    assert "0..9, 255" in message and "245 of the 256 classes" in message
    assert "stray.npz" in message
    with pytest.raises(ParameterError) as excinfo:
        load_npz(path, num_classes=10)
    message = _refusal(excinfo, "num_classes")
    assert "2 records have labels outside [0, 10)" in message and "255" in message
    assert load_npz(path, num_classes=256).num_classes == 256


def test_num_classes_is_validated_and_may_exceed_the_labels(tmp_path) -> None:
    path = _save(tmp_path / "set.npz", _gray(4), np.array([0, 1, 1, 0]))
    assert load_npz(path).num_classes == 2
    assert load_npz(path, num_classes=5).class_counts().tolist() == [2, 2, 0, 0, 0]
    with pytest.raises(ParameterError, match="num_classes"):
        load_npz(path, num_classes=0)
    with pytest.raises(ParameterTypeError, match="num_classes"):
        load_npz(path, num_classes=2.0)  # type: ignore[arg-type]
    negative = _save(tmp_path / "neg.npz", _gray(2), np.array([0, -1]))
    with pytest.raises(ParameterError) as excinfo:
        load_npz(negative, num_classes=2)
    assert "negative" in _refusal(excinfo, "dataset")


def test_require_classification_data_refuses_one_class(tmp_path) -> None:
    one = load_npz(_save(tmp_path / "one.npz", _gray(3), np.zeros(3, dtype=np.int64)))
    assert one.num_classes == 1
    with pytest.raises(ParameterError) as excinfo:
        require_classification_data(one)
    assert "at least 2 classes" in _refusal(excinfo, "dataset")
    declared = load_npz(tmp_path / "one.npz", num_classes=3)
    with pytest.raises(ParameterError) as excinfo:
        require_classification_data(declared)
    assert "records of class 0 only" in _refusal(excinfo, "dataset")
    require_classification_data(load_digits())  # two or more classes: no error
    with pytest.raises(ParameterTypeError):
        require_classification_data("digits")  # type: ignore[arg-type]


# -- unreadable or malformed .npz files ------------------------------------------


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _text(path: Path) -> None:
    path.write_text("images,labels\n1,2\n")


def _npy(path: Path) -> None:
    with path.open("wb") as f:
        np.save(f, np.zeros(3))


def _truncated(path: Path) -> None:
    _save(path, _gray(4), np.array([0, 1, 0, 1]))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _objects(path: Path) -> None:
    np.savez(path, images=np.array([None, 1], dtype=object), labels=np.array([0, 1]))


def _not_arrays(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("images.npy", b"not an array")
        archive.writestr("labels.npy", b"not an array")


def _directory(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (None, "no such file"),
        (_empty, "the file is empty"),
        (_text, "not a zip archive"),
        (_npy, "single .npy array"),
        (_truncated, "numpy cannot read it"),
        (_objects, "cannot be read"),
        (_not_arrays, "not a numeric numpy array"),
        (_directory, "directory"),
    ],
)
def test_unreadable_npz_names_the_file(tmp_path, make, problem) -> None:
    path = tmp_path / "broken.npz"
    if make is not None:
        make(path)
    with pytest.raises(ParameterError) as excinfo:
        load_npz(path)
    message = _refusal(excinfo, "dataset")
    assert "test_unreadable_npz_names_the" in message and "broken.npz" in message
    assert problem in message


@pytest.mark.parametrize(
    ("images", "labels", "fragment"),
    [
        (np.zeros((2, 4, 4), np.int16), [0, 1], "dtype int16"),
        (np.full((2, 4, 4), 255.0), [0, 1], "range over [255, 255]"),
        (np.array([[[0.5, np.nan]]] * 2), [0, 1], "NaN or infinite"),
        (np.zeros((2, 5, 4, 7), np.uint8), [0, 1], "neither axis 1 nor axis 3"),
        (np.zeros((2, 4), np.uint8), [0, 1], "shape (2, 4)"),
        (np.zeros((0, 4, 4), np.uint8), np.zeros(0, np.int64), "at least one image"),
        (_gray(2), [0.0, 1.0], "dtype float64"),
        (_gray(2), [[1, 0], [0, 1]], "one-hot"),
        (_gray(3), [0, 1], "3 images but 2 labels"),
    ],
)
def test_malformed_npz_contents_name_the_file_and_the_problem(
    tmp_path, images, labels, fragment
) -> None:
    path = _save(tmp_path / "bad.npz", images, np.asarray(labels))
    with pytest.raises(ParameterError) as excinfo:
        load_npz(path)
    message = _refusal(excinfo, "dataset")
    assert "bad.npz" in message and fragment in message
    assert "layout" not in message and "image_size" not in message


def test_npz_missing_key_lists_what_the_archive_holds(tmp_path) -> None:
    np.savez(tmp_path / "keys.npz", x=np.zeros(3), y=np.zeros(3))
    with pytest.raises(ParameterError) as excinfo:
        load_npz(tmp_path / "keys.npz")
    message = _refusal(excinfo, "dataset")
    assert "'images' and 'labels'" in message and "'x', 'y'" in message


def test_a_long_path_keeps_its_file_name_in_the_message(tmp_path) -> None:
    deep = tmp_path.joinpath(*["long-directory-name"] * 6)
    deep.mkdir(parents=True)
    with pytest.raises(ParameterError) as excinfo:
        load_npz(deep / "my-data.npz")
    assert "my-data.npz" in _refusal(excinfo, "dataset")


# -- image folders ----------------------------------------------------------------


def _folder(root: Path, classes: dict[str, list[tuple[int, int]]]) -> Path:
    from PIL import Image

    for name, sizes in classes.items():
        (root / name).mkdir(parents=True)
        for i, (h, w) in enumerate(sizes):
            Image.fromarray(np.full((h, w), 40 * i, dtype=np.uint8)).save(root / name / f"{i}.png")
    return root


def test_image_folder_ignores_hidden_directories(tmp_path) -> None:
    root = _folder(tmp_path / "f", {"cat": [(5, 4)], "dog": [(5, 4)], ".ipynb_checkpoints": []})
    (root / ".ipynb_checkpoints" / "x.png").write_bytes((root / "cat" / "0.png").read_bytes())
    ds = load_image_folder(root)
    assert ds.num_classes == 2 and ds.class_names == ("cat", "dog")


def test_image_folder_num_classes_and_empty_class_directories(tmp_path) -> None:
    root = _folder(tmp_path / "f", {"cat": [(5, 4)], "dog": [(5, 4)], "empty": []})
    with pytest.raises(ParameterError) as excinfo:
        load_image_folder(root)  # used to count 'empty' as a class silently
    assert "'empty' holds none" in _refusal(excinfo, "dataset")
    kept = load_image_folder(root, num_classes=3)
    assert kept.num_classes == 3 and kept.class_counts().tolist() == [1, 1, 0]
    with pytest.raises(ParameterError) as excinfo:
        load_image_folder(root, num_classes=2)
    message = _refusal(excinfo, "num_classes")
    assert "'cat', 'dog', 'empty'" in message


def test_image_folder_refusals_name_the_folder(tmp_path) -> None:
    with pytest.raises(ParameterError) as excinfo:
        load_image_folder(tmp_path / "missing")
    assert "no such directory" in _refusal(excinfo, "dataset")
    root = _folder(tmp_path / "f", {"cat": [(5, 4)], "dog": [(8, 8)]})
    with pytest.raises(ParameterError) as excinfo:
        load_image_folder(root)
    message = _refusal(excinfo, "dataset")
    assert "5x4 (cat/0.png) and 8x8 (dog/0.png)" in message and "image_size" not in message
    assert load_image_folder(root, image_size=(4, 4)).images.shape == (2, 3, 4, 4)
    (root / "cat" / "1.png").write_text("not a png")
    with pytest.raises(ParameterError) as excinfo:
        load_image_folder(root, image_size=(4, 4))
    assert "cat/1.png is not a readable image" in _refusal(excinfo, "dataset")
    with pytest.raises(ParameterError, match="image_size"):
        load_image_folder(root, image_size=(0, 4))


# -- load_dataset ------------------------------------------------------------------


def test_load_dataset_dispatches_and_names_what_was_typed(tmp_path) -> None:
    assert load_dataset("digits").num_classes == 10
    with pytest.raises(ParameterError, match="num_classes"):
        load_dataset("digits", num_classes=3)
    npz = _save(tmp_path / "set.npz", _gray(4), np.array([0, 1, 2, 0]))
    assert load_dataset(str(npz)).num_classes == 3
    assert load_dataset(npz, num_classes=4).num_classes == 4
    folder = _folder(tmp_path / "f", {"a": [(3, 3)], "b": [(3, 3)]})
    assert load_dataset(folder).class_names == ("a", "b")
    with pytest.raises(ParameterError) as excinfo:
        load_dataset("digts")
    assert "'digts'" in _refusal(excinfo, "dataset")
    (tmp_path / "set.csv").write_text("1,2\n")
    with pytest.raises(ParameterError) as excinfo:
        load_dataset(tmp_path / "set.csv")
    assert ".csv" in _refusal(excinfo, "dataset")


# -- the split -----------------------------------------------------------------------


def _small(n_per_class: int, classes: int = 2) -> ImageDataset:
    labels = np.repeat(np.arange(classes), n_per_class).astype(np.int64)
    return ImageDataset(np.zeros((labels.size, 1, 2, 2), np.float32), labels, classes)


def test_split_refuses_a_fraction_that_leaves_its_part_empty() -> None:
    # 2 x 2 records: round(0.2 * 2) = 0 per class, so public would be empty.
    with pytest.raises(ParameterError) as excinfo:
        split_public_private(_small(2), public_fraction=0.2, test_fraction=0.3)
    message = _refusal(excinfo, "public_fraction")
    assert "at least one record" in message and "4 records" in message
    with pytest.raises(ParameterError) as excinfo:
        split_public_private(_small(2), public_fraction=0.3, test_fraction=0.2)
    _refusal(excinfo, "test_fraction")
    # 2 x 5 records: one per class to public and to test, three per class private.
    split = split_public_private(_small(5), public_fraction=0.2, test_fraction=0.2)
    assert (len(split.public), len(split.private), len(split.test)) == (2, 6, 2)


def test_split_never_returns_an_empty_part() -> None:
    for n in range(1, 12):
        for pub, tst in ((0.1, 0.1), (0.3, 0.3), (0.45, 0.45)):
            try:
                split = split_public_private(_small(n), public_fraction=pub, test_fraction=tst)
            except ParameterError as exc:
                assert exc.parameter in ("public_fraction", "test_fraction")
                continue
            assert min(len(split.public), len(split.private), len(split.test)) >= 1


@pytest.mark.parametrize(
    ("options", "parameter"),
    [
        ({"public_fraction": 0.0, "test_fraction": 0.2}, "public_fraction"),
        ({"public_fraction": 0.2, "test_fraction": 1.0}, "test_fraction"),
        ({"public_fraction": float("nan"), "test_fraction": 0.2}, "public_fraction"),
        ({"public_fraction": 0.5, "test_fraction": 0.5}, "public_fraction + test_fraction"),
        ({"public_fraction": 0.2, "test_fraction": 0.2, "seed": -1}, "seed"),
    ],
)
def test_split_fraction_and_seed_checks(options, parameter) -> None:
    with pytest.raises(ParameterError) as excinfo:
        split_public_private(_small(10), **options)
    _refusal(excinfo, parameter)


def test_split_refuses_an_empty_dataset() -> None:
    with pytest.raises(ParameterError) as excinfo:
        split_public_private(_small(0), public_fraction=0.2, test_fraction=0.2)
    _refusal(excinfo, "dataset")
