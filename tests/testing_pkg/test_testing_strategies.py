"""privfed.testing: strategies and the sensitivity-bound assertion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from privfed.dp import (
    Adjacency,
    count_sensitivity,
    joint_mu_squared,
    second_moment_sensitivity,
    sum_sensitivity,
)
from privfed.engines.moments.planning import plan_latent_release
from privfed.errors import ParameterError, ParameterTypeError
from privfed.testing import (
    LabelledDataset,
    adjacent_pairs,
    assert_sensitivity_bound,
    clipped_vectors,
    labelled_datasets,
)

R = 1.5


def class_sums(data: LabelledDataset) -> np.ndarray:
    return np.stack([data.class_vectors(k).sum(axis=0) for k in range(data.num_classes)])


def class_second_moments(data: LabelledDataset) -> np.ndarray:
    return np.stack(
        [data.class_vectors(k).T @ data.class_vectors(k) for k in range(data.num_classes)]
    )


def class_counts(data: LabelledDataset) -> np.ndarray:
    return np.bincount(data.labels, minlength=data.num_classes).astype(float)


@given(clipped_vectors(4, R))
def test_clipped_vectors_respect_the_radius(v: np.ndarray) -> None:
    assert v.shape == (4,) and v.dtype == np.float64
    assert np.linalg.norm(v) <= R


@given(labelled_datasets(3, R, num_classes=4, min_size=2, max_size=6))
def test_labelled_datasets(data: LabelledDataset) -> None:
    assert 2 <= len(data) <= 6 and data.dim == 3
    assert data.labels.min() >= 0 and data.labels.max() < 4
    assert np.all(np.linalg.norm(data.vectors, axis=1) <= R)
    assert not data.vectors.flags.writeable


@given(adjacent_pairs(Adjacency.REPLACE_ONE, dim=3, clip_norm=R, num_classes=3))
def test_replace_one_pairs_differ_in_one_record_of_the_same_class(
    pair: tuple[LabelledDataset, LabelledDataset],
) -> None:
    a, b = pair
    assert len(a) == len(b)
    assert np.array_equal(a.labels, b.labels)
    differing = np.flatnonzero(np.any(a.vectors != b.vectors, axis=1))
    assert differing.size <= 1


@given(
    adjacent_pairs(Adjacency.REPLACE_ONE, dim=2, clip_norm=R, num_classes=3, private_labels=True)
)
def test_private_label_pairs_change_at_most_one_row(
    pair: tuple[LabelledDataset, LabelledDataset],
) -> None:
    a, b = pair
    changed = np.any(a.vectors != b.vectors, axis=1) | (a.labels != b.labels)
    assert changed.sum() <= 1
    assert np.abs(class_counts(a) - class_counts(b)).sum() in (0.0, 2.0)


@given(adjacent_pairs(Adjacency.ADD_REMOVE, dim=2, clip_norm=R, num_classes=2))
def test_add_remove_pairs_differ_by_one_record(
    pair: tuple[LabelledDataset, LabelledDataset],
) -> None:
    a, b = pair
    assert abs(len(a) - len(b)) == 1
    assert np.abs(class_counts(a) - class_counts(b)).sum() == 1.0


@pytest.mark.parametrize("adjacency", list(Adjacency))
def test_true_sum_bound_passes_and_is_reached(adjacency: Adjacency) -> None:
    bound = sum_sensitivity(R, adjacency)
    largest = assert_sensitivity_bound(
        class_sums, bound, adjacency=adjacency, dim=3, clip_norm=R, num_classes=2, max_examples=40
    )
    assert largest == pytest.approx(bound, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("adjacency", list(Adjacency))
def test_true_second_moment_bound_passes_and_is_reached(adjacency: Adjacency) -> None:
    bound = second_moment_sensitivity(R, adjacency)
    largest = assert_sensitivity_bound(
        class_second_moments, bound, adjacency=adjacency, dim=3, clip_norm=R, max_examples=60
    )
    assert largest == pytest.approx(bound, rel=1e-9)


def test_a_too_small_sum_bound_is_caught() -> None:
    with pytest.raises(AssertionError, match="over the claimed L2 sensitivity"):
        assert_sensitivity_bound(
            class_sums, 1.95 * R, adjacency=Adjacency.REPLACE_ONE, dim=3, clip_norm=R
        )


def test_a_too_small_second_moment_bound_is_caught() -> None:
    # R² would be right for add/remove but is too small for replace-one (√2·R²).
    with pytest.raises(AssertionError):
        assert_sensitivity_bound(
            class_second_moments, R * R, adjacency=Adjacency.REPLACE_ONE, dim=3, clip_norm=R
        )


def test_hypothesis_search_alone_catches_a_wrong_bound() -> None:
    # A query whose worst case is off the structured grid: it only counts
    # records of class 2 in a three-class dataset, which the grid never labels.
    def count_of_class_two(data: LabelledDataset) -> np.ndarray:
        return np.array([3.0 * np.sum(data.labels == 2)])

    with pytest.raises(AssertionError, match="Hypothesis"):
        assert_sensitivity_bound(
            count_of_class_two, 1.0, adjacency=Adjacency.ADD_REMOVE, dim=2, clip_norm=R,
            num_classes=3, max_examples=100,
        )  # fmt: skip


def whitened_release(plan_std: tuple[float, float, float], counts_noised: bool):  # type: ignore[no-untyped-def]
    s, m, c = plan_std

    def query(data: LabelledDataset) -> np.ndarray:
        parts = [class_sums(data).ravel() / s, class_second_moments(data).ravel() / m]
        if counts_noised:
            parts.append(class_counts(data) / c)
        return np.concatenate(parts)

    return query


@pytest.mark.slow
@pytest.mark.parametrize(
    ("adjacency", "private_labels"),
    [(Adjacency.REPLACE_ONE, False), (Adjacency.REPLACE_ONE, True), (Adjacency.ADD_REMOVE, False)],
)
def test_plan_mu_is_the_sensitivity_of_the_whitened_release(
    adjacency: Adjacency, private_labels: bool
) -> None:
    plan = plan_latent_release(
        2.0, 1e-5, clip_norm=R, dim=3, adjacency=adjacency, private_labels=private_labels
    )
    noised = plan.noise_std_count > 0
    query = whitened_release(
        (plan.noise_std_sum, plan.noise_std_second_moment, plan.noise_std_count), noised
    )
    largest = assert_sensitivity_bound(
        query, plan.mu, adjacency=adjacency, dim=3, clip_norm=R, num_classes=2,
        private_labels=private_labels, max_examples=40,
    )  # fmt: skip
    assert largest == pytest.approx(plan.mu, rel=1e-6)


def test_separate_sum_bound_alone_underestimates_the_joint_release() -> None:
    s, m = 1.0, 0.5
    query = whitened_release((s, m, 1.0), counts_noised=False)
    naive = 2 * R / s  # forgetting the second moment
    with pytest.raises(AssertionError):
        assert_sensitivity_bound(query, naive, adjacency=Adjacency.REPLACE_ONE, dim=3, clip_norm=R)
    exact = math.sqrt(joint_mu_squared(R, s, m, Adjacency.REPLACE_ONE))
    assert assert_sensitivity_bound(
        query, exact, adjacency=Adjacency.REPLACE_ONE, dim=3, clip_norm=R, max_examples=30
    ) == pytest.approx(exact, rel=1e-6)


def test_bad_arguments() -> None:
    with pytest.raises(ParameterError):
        clipped_vectors(0, 1.0)
    with pytest.raises(ParameterError):
        labelled_datasets(2, 1.0, min_size=3, max_size=2)
    with pytest.raises(ParameterTypeError):
        adjacent_pairs("replace-one", dim=2, clip_norm=1.0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        assert_sensitivity_bound(
            class_sums, -1.0, adjacency=Adjacency.ADD_REMOVE, dim=2, clip_norm=1.0
        )
    with pytest.raises(ParameterError):
        LabelledDataset(np.ones((2, 2)), np.zeros(2, dtype=np.int64), 1, 1.0)  # norms √2 > 1
    with pytest.raises(ParameterError):
        LabelledDataset(np.zeros((2, 2)), np.array([0, 3]), 2, 1.0)


def test_query_with_data_dependent_shape_is_refused() -> None:
    with pytest.raises(ParameterError) as info:
        assert_sensitivity_bound(
            lambda d: d.vectors, 10.0, adjacency=Adjacency.ADD_REMOVE, dim=2, clip_norm=1.0
        )
    assert info.value.parameter == "query"


@pytest.mark.parametrize(
    ("adjacency", "private_labels"),
    [(Adjacency.REPLACE_ONE, False), (Adjacency.REPLACE_ONE, True), (Adjacency.ADD_REMOVE, False)],
)
def test_count_sensitivity_holds_and_is_reached(adjacency: Adjacency, private_labels: bool) -> None:
    bound = count_sensitivity(adjacency, private_labels=private_labels)
    largest = assert_sensitivity_bound(
        class_counts, bound, adjacency=adjacency, dim=2, clip_norm=R, num_classes=3,
        private_labels=private_labels, max_examples=30,
    )  # fmt: skip
    assert largest == pytest.approx(bound, rel=1e-12)
