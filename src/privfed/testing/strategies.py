"""Strategies for clipped records, labelled datasets and adjacent dataset pairs."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from privfed._checks import check_bool, check_count, check_finite_nonnegative, check_finite_positive
from privfed.dp.sensitivity import Adjacency
from privfed.errors import ParameterError, ParameterTypeError

if TYPE_CHECKING:  # pragma: no cover
    from hypothesis import strategies as st

__all__ = [
    "LabelledDataset",
    "adjacent_pairs",
    "assert_sensitivity_bound",
    "clipped_vectors",
    "labelled_datasets",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Query = Callable[["LabelledDataset"], npt.ArrayLike]


def _require_hypothesis() -> None:
    """Fail with the install hint (``pip install 'privfed[testing]'``) if hypothesis is missing.

    Raises:
        MissingDependencyError: hypothesis cannot be imported.
    """
    from privfed._deps import require

    require("hypothesis", feature="privfed.testing strategies")


def _rounded_norm(vector: FloatArray) -> float:
    """The larger of the two float64 L2 norms numpy gives ``vector``.

    ``np.linalg.norm(v)`` of a 1-D array and the row norm
    ``np.linalg.norm(rows, axis=1)`` (which :class:`LabelledDataset` checks)
    round differently and can disagree in the last bit.
    """
    return max(float(np.linalg.norm(vector)), float(np.linalg.norm(vector[None, :], axis=1)[0]))


def _clip(vector: FloatArray, clip_norm: float) -> FloatArray:
    """Scale ``vector`` so its L2 norm is at most ``clip_norm`` (exactly, after rounding).

    Both ways numpy rounds the norm (as a vector and as a row) end up within
    ``clip_norm``.
    """
    norm = float(np.linalg.norm(vector))
    if norm > clip_norm:
        vector = vector * (clip_norm / norm)
    while _rounded_norm(vector) > clip_norm:
        vector = vector * (1.0 - 2.0**-52)
    return vector


def _check_setup(dim: int, clip_norm: float, num_classes: int) -> tuple[int, float, int]:
    return (
        check_count("dim", dim, minimum=1),
        check_finite_positive("clip_norm", clip_norm),
        check_count("num_classes", num_classes, minimum=1),
    )


@dataclass(frozen=True, eq=False)
class LabelledDataset:
    """A dataset of L2-clipped records with class labels (read-only arrays).

    Attributes:
        vectors: float64 array of shape ``(n, dim)``; every row has L2 norm
            ``<= clip_norm``.
        labels: int64 array of shape ``(n,)`` with values in
            ``[0, num_classes)``.
        num_classes: Number of classes (>= 1).
        clip_norm: The clipping radius R the records respect.
    """

    vectors: FloatArray
    labels: IntArray
    num_classes: int
    clip_norm: float

    def __post_init__(self) -> None:
        vectors = np.array(self.vectors, dtype=np.float64)
        labels = np.array(self.labels, dtype=np.int64)
        check_count("num_classes", self.num_classes, minimum=1)
        radius = check_finite_positive("clip_norm", self.clip_norm)
        if vectors.ndim != 2:
            raise ParameterError("vectors", "a 2-D array (n, dim)", vectors.shape)
        if labels.shape != (vectors.shape[0],):
            raise ParameterError("labels", f"shape ({vectors.shape[0]},)", labels.shape)
        if not np.all(np.isfinite(vectors)):
            raise ParameterError("vectors", "finite values", "array")
        if vectors.size and float(np.max(np.linalg.norm(vectors, axis=1))) > radius:
            raise ParameterError("vectors", f"rows of L2 norm <= {radius!r}", "array")
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise ParameterError("labels", f"values in [0, {self.num_classes})", "array")
        vectors.setflags(write=False)
        labels.setflags(write=False)
        object.__setattr__(self, "vectors", vectors)
        object.__setattr__(self, "labels", labels)

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        """Record dimension."""
        return int(self.vectors.shape[1])

    def class_vectors(self, label: int) -> FloatArray:
        """The records of one class, shape ``(n_label, dim)``."""
        return np.asarray(self.vectors[self.labels == label], dtype=np.float64)


def _vector_from_seed(seed: int, mode: int, dim: int, clip_norm: float) -> FloatArray:
    rng = np.random.default_rng(seed)
    if mode == 0:  # uniform in the ball
        v = rng.normal(size=dim)
        v *= clip_norm * rng.uniform() ** (1.0 / dim) / max(float(np.linalg.norm(v)), 1e-300)
    elif mode == 1:  # on the sphere
        v = rng.normal(size=dim)
        v *= clip_norm / max(float(np.linalg.norm(v)), 1e-300)
    elif mode == 2:  # a signed axis vector on the sphere
        v = np.zeros(dim)
        v[int(rng.integers(dim))] = clip_norm * (1.0 if rng.integers(2) else -1.0)
    else:  # the origin
        v = np.zeros(dim)
    return _clip(v, clip_norm)


def clipped_vectors(dim: int, clip_norm: float) -> st.SearchStrategy[FloatArray]:
    """Strategy for float64 vectors of shape ``(dim,)`` with L2 norm ``<= clip_norm``.

    Draws a mix of points uniform in the ball, points on the sphere (where
    sensitivities are usually attained), signed axis vectors and the origin.
    Randomness comes from a drawn seed only.

    Args:
        dim: Vector dimension (int >= 1).
        clip_norm: Clipping radius R (finite, > 0).
    """
    d, radius, _ = _check_setup(dim, clip_norm, 1)
    _require_hypothesis()
    from hypothesis import strategies as st  # imported on use: hypothesis takes ~0.2 s

    return st.builds(
        _vector_from_seed,
        st.integers(0, 2**63 - 1),
        st.integers(0, 3),
        st.just(d),
        st.just(radius),
    )


def labelled_datasets(
    dim: int,
    clip_norm: float,
    *,
    num_classes: int = 1,
    min_size: int = 0,
    max_size: int = 12,
) -> st.SearchStrategy[LabelledDataset]:
    """Strategy for :class:`LabelledDataset` values of ``min_size..max_size`` records.

    Args:
        dim: Record dimension (>= 1).
        clip_norm: Clipping radius R (> 0).
        num_classes: Number of classes (>= 1); labels are drawn uniformly.
        min_size: Fewest records (>= 0).
        max_size: Most records (>= min_size).
    """
    d, radius, k = _check_setup(dim, clip_norm, num_classes)
    low = check_count("min_size", min_size, minimum=0)
    high = check_count("max_size", max_size, minimum=low)
    _require_hypothesis()
    from hypothesis import strategies as st  # imported on use: hypothesis takes ~0.2 s

    @st.composite
    def build(draw: st.DrawFn) -> LabelledDataset:
        vectors = draw(st.lists(clipped_vectors(d, radius), min_size=low, max_size=high))
        labels = draw(st.lists(st.integers(0, k - 1), min_size=len(vectors), max_size=len(vectors)))
        stacked = np.array(vectors, dtype=np.float64).reshape(len(vectors), d)
        return LabelledDataset(stacked, np.array(labels, dtype=np.int64), k, radius)

    return build()


def _replacement(old: FloatArray, seed: int, mode: int, clip_norm: float) -> FloatArray:
    """A record to replace ``old`` with: antipodal, orthogonal, or an independent draw."""
    rng = np.random.default_rng(seed)
    dim = old.shape[0]
    norm = float(np.linalg.norm(old))
    if mode == 0 and norm > 0:
        return _clip(-old, clip_norm)
    if mode == 1 and dim >= 2:
        w: FloatArray = np.asarray(rng.normal(size=dim), dtype=np.float64)
        if norm > 0:
            w = w - float(w @ old) / (norm * norm) * old
        scale = norm if norm > 0 else clip_norm
        return _clip(w * (scale / max(float(np.linalg.norm(w)), 1e-300)), clip_norm)
    return _vector_from_seed(seed, int(rng.integers(3)), dim, clip_norm)


def _with_row(data: LabelledDataset, index: int, vector: FloatArray, label: int) -> LabelledDataset:
    vectors = np.array(data.vectors)
    labels = np.array(data.labels)
    vectors[index] = vector
    labels[index] = label
    return LabelledDataset(vectors, labels, data.num_classes, data.clip_norm)


def _without_row(data: LabelledDataset, index: int) -> LabelledDataset:
    keep = np.arange(len(data)) != index
    return LabelledDataset(data.vectors[keep], data.labels[keep], data.num_classes, data.clip_norm)


def adjacent_pairs(
    adjacency: Adjacency,
    *,
    dim: int,
    clip_norm: float,
    num_classes: int = 1,
    private_labels: bool = False,
    max_size: int = 8,
) -> st.SearchStrategy[tuple[LabelledDataset, LabelledDataset]]:
    """Strategy for pairs of datasets that are neighbours under ``adjacency``.

    * REPLACE_ONE: the same dataset with one record replaced -- by its
      antipode, by an orthogonal record of the same norm, or by an independent
      draw; the label is kept, unless ``private_labels`` is true, in which case
      the new record may carry any label.
    * ADD_REMOVE: a dataset and the same dataset with one record removed, in
      either order.

    Args:
        adjacency: The neighbouring relation.
        dim: Record dimension (>= 1).
        clip_norm: Clipping radius R (> 0).
        num_classes: Number of classes (>= 1).
        private_labels: Under REPLACE_ONE, let the replaced record change class.
        max_size: Most records in the larger dataset (>= 1).
    """
    if not isinstance(adjacency, Adjacency):
        raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", adjacency)
    check_bool("private_labels", private_labels)
    d, radius, k = _check_setup(dim, clip_norm, num_classes)
    high = check_count("max_size", max_size, minimum=1)

    _require_hypothesis()
    from hypothesis import strategies as st  # imported on use: hypothesis takes ~0.2 s

    @st.composite
    def build(draw: st.DrawFn) -> tuple[LabelledDataset, LabelledDataset]:
        data = draw(labelled_datasets(d, radius, num_classes=k, min_size=1, max_size=high))
        index = draw(st.integers(0, len(data) - 1))
        if adjacency is Adjacency.ADD_REMOVE:
            smaller = _without_row(data, index)
            return (data, smaller) if draw(st.booleans()) else (smaller, data)
        seed = draw(st.integers(0, 2**63 - 1))
        mode = draw(st.integers(0, 2))
        new = _replacement(data.vectors[index], seed, mode, radius)
        label = draw(st.integers(0, k - 1)) if private_labels else int(data.labels[index])
        return data, _with_row(data, index, new, label)

    return build()


def _appended(
    base: FloatArray,
    base_labels: IntArray,
    row: FloatArray,
    label: int,
    num_classes: int,
    clip_norm: float,
) -> LabelledDataset:
    return LabelledDataset(
        np.vstack([base, row[None, :]]), np.append(base_labels, label), num_classes, clip_norm
    )


def _structured_search(
    query: Query,
    adjacency: Adjacency,
    dim: int,
    clip_norm: float,
    num_classes: int,
    private_labels: bool,
    check: Callable[[float], None],
) -> float:
    """Deterministic adversarial neighbours: boundary records at swept angles and norms.

    Under REPLACE_ONE the angle between the old and the new record is swept on
    a grid, and the best grid point is then refined by successive zooming, so
    worst cases at angles off the grid are still found to ~1e-12 in cosine.
    Calls ``check`` on every change and returns the largest.
    """
    rng = np.random.default_rng(0x5EED)
    e1 = np.zeros(dim)
    e1[0] = 1.0
    e2 = np.zeros(dim)
    if dim >= 2:
        e2[1] = 1.0
    fillers = [_vector_from_seed(int(s), 0, dim, clip_norm) for s in rng.integers(0, 2**62, 3)]
    bases = [np.zeros((0, dim)), np.array(fillers)]
    label_pairs = [(0, 0)]
    if num_classes > 1:
        label_pairs.append((0, num_classes - 1) if private_labels else (1, 1))
    norms = [clip_norm, 0.5 * clip_norm, 0.0]
    largest = 0.0
    best: tuple[FloatArray, IntArray, int, int, float, float, float] | None = None

    def replaced(
        base: FloatArray, labels: IntArray, old: int, new: int, r: float, s: float, cos: float
    ) -> float:
        sin = math.sqrt(max(0.0, 1.0 - cos * cos))
        z = _clip(r * e1, clip_norm)
        z2 = _clip(s * (cos * e1 + sin * e2), clip_norm)
        change = _change(
            query,
            _appended(base, labels, z, old, num_classes, clip_norm),
            _appended(base, labels, z2, new, num_classes, clip_norm),
        )
        check(change)
        return change

    for base in bases:
        base_labels = np.arange(len(base), dtype=np.int64) % num_classes
        for old_label, new_label in label_pairs:
            if adjacency is Adjacency.ADD_REMOVE:
                removed = LabelledDataset(base, base_labels, num_classes, clip_norm)
                for norm in norms:
                    row = _clip(norm * e1, clip_norm)
                    added = _appended(base, base_labels, row, old_label, num_classes, clip_norm)
                    change = _change(query, added, removed)
                    check(change)
                    largest = max(largest, change)
                continue
            cosines = np.linspace(-1.0, 1.0, 41) if dim >= 2 else np.array([-1.0, 1.0])
            for r in norms:
                for s in norms:
                    for cos in cosines:
                        change = replaced(base, base_labels, old_label, new_label, r, s, cos)
                        if change > largest:
                            largest = change
                            best = (base, base_labels, old_label, new_label, r, s, float(cos))
    if best is not None and dim >= 2:
        base, base_labels, old_label, new_label, r, s, centre = best
        step = 0.05
        for _ in range(11):
            step /= 10.0
            for cos in np.clip(centre + step * np.linspace(-10.0, 10.0, 21), -1.0, 1.0):
                change = replaced(base, base_labels, old_label, new_label, r, s, float(cos))
                if change > largest:
                    largest, centre = change, float(cos)
    return largest


def _change(query: Query, first: LabelledDataset, second: LabelledDataset) -> float:
    a = np.asarray(query(first), dtype=np.float64).ravel()
    b = np.asarray(query(second), dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ParameterError(
            "query", "a function whose output shape does not depend on the data", (a.shape, b.shape)
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ParameterError("query", "a function with finite outputs", "non-finite output")
    return float(np.linalg.norm(a - b))


def assert_sensitivity_bound(
    query: Query,
    bound: float,
    *,
    adjacency: Adjacency,
    dim: int,
    clip_norm: float,
    num_classes: int = 1,
    private_labels: bool = False,
    max_examples: int = 100,
    rtol: float = 1e-9,
    derandomize: bool = True,
) -> float:
    """Check that ``query`` never moves by more than ``bound`` (L2) between neighbours.

    Two searches run in turn and stop at the first violation:

    1. A structured adversarial sweep: records on the clipping sphere, at half
       radius and at the origin, at 41 angles from antipodal through
       orthogonal to identical, alone and beside filler records, within a
       class and (with ``private_labels``) across classes.
    2. A Hypothesis search over :func:`adjacent_pairs` (random datasets, with
       antipodal and orthogonal replacements mixed in), shrunk to a minimal
       counterexample on failure.  Hypothesis' target phase is left off: its
       hill climbing is not bounded by ``max_examples``.

    Passing is evidence, not proof: it cannot exclude a worst case that
    neither search reaches.  Do not call it from inside an ``@given`` test.

    Args:
        query: Maps a :class:`LabelledDataset` to an array of fixed shape.
        bound: The claimed L2 sensitivity under ``adjacency`` (finite, >= 0).
        adjacency: The neighbouring relation.
        dim: Record dimension (>= 1).
        clip_norm: Clipping radius R of the records (> 0).
        num_classes: Number of classes (>= 1).
        private_labels: Under REPLACE_ONE, whether records may change class.
        max_examples: Hypothesis examples (>= 1).
        rtol: Relative slack for floating-point rounding (>= 0).
        derandomize: Make the Hypothesis search deterministic (default).

    Returns:
        The largest change observed (compare it with ``bound`` to judge
        tightness).

    Raises:
        AssertionError: A pair of neighbours moves the query by more than
            ``bound · (1 + rtol)``; the message gives both numbers.
    """
    if not isinstance(adjacency, Adjacency):
        raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", adjacency)
    claimed = check_finite_nonnegative("bound", bound)
    d, radius, k = _check_setup(dim, clip_norm, num_classes)
    examples = check_count("max_examples", max_examples, minimum=1)
    slack = check_finite_nonnegative("rtol", rtol)
    _require_hypothesis()  # before the structured search, not after it
    limit = claimed * (1.0 + slack) + 1e-300
    largest = 0.0

    def fail(change: float, how: str) -> AssertionError:
        return AssertionError(
            f"query changed by {change!r} between {adjacency.value} neighbours, over the "
            f"claimed L2 sensitivity {claimed!r} (found by the {how} search)"
        )

    def check_structured(change: float) -> None:
        if change > limit:
            raise fail(change, "structured")

    largest = _structured_search(query, adjacency, d, radius, k, private_labels, check_structured)

    from hypothesis import HealthCheck, Phase, given, settings  # imported on use (~0.2 s)

    @settings(
        max_examples=examples,
        derandomize=derandomize,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
    )
    @given(
        adjacent_pairs(
            adjacency,
            dim=d,
            clip_norm=radius,
            num_classes=k,
            private_labels=private_labels,
        )
    )
    def search(pair: tuple[LabelledDataset, LabelledDataset]) -> None:
        nonlocal largest
        change = _change(query, *pair)
        largest = max(largest, change)
        if change > limit:
            raise fail(change, "Hypothesis")

    search()
    return largest
