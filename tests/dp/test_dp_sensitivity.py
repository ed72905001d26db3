"""Exact sensitivities and the joint μ² of the latent-statistic release.

The closed forms are checked three ways: against a numerical maximisation over
the only free parameters of the worst case (the two norms and the angle), by
building the attaining datasets explicitly, and by an adversarial Hypothesis
search over whole adjacent datasets that must never exceed them.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, target
from hypothesis import strategies as st
from scipy.optimize import minimize

from privfed.dp import (
    Adjacency,
    count_sensitivity,
    joint_mu_squared,
    second_moment_sensitivity,
    sum_sensitivity,
)
from privfed.errors import ParameterError, ParameterTypeError

Array = npt.NDArray[np.float64]


def whitened_release(
    vectors: Array,
    labels: npt.NDArray[np.int64],
    num_classes: int,
    a: float,
    b: float,
    c: float,
) -> Array:
    """Concatenate (a·Σz, b·Σzzᵀ, c·n) for every class: the release divided by its noise std."""
    parts = []
    for k in range(num_classes):
        zs = vectors[labels == k]
        parts.append(a * zs.sum(axis=0))
        parts.append(b * (zs.T @ zs).ravel())
        parts.append(np.array([c * len(zs)]))
    return np.concatenate(parts)


def change_squared(
    before: tuple[Array, npt.NDArray[np.int64]],
    after: tuple[Array, npt.NDArray[np.int64]],
    num_classes: int,
    a: float,
    b: float,
    c: float,
) -> float:
    diff = whitened_release(*before, num_classes, a, b, c) - whitened_release(
        *after, num_classes, a, b, c
    )
    return float(diff @ diff)


# -- single sensitivities ---------------------------------------------------------


def test_table_of_sensitivities() -> None:
    R = 3.0
    assert sum_sensitivity(R, Adjacency.REPLACE_ONE) == 6.0
    assert sum_sensitivity(R, Adjacency.ADD_REMOVE) == 3.0
    assert second_moment_sensitivity(R, Adjacency.REPLACE_ONE) == pytest.approx(math.sqrt(2) * 9)
    assert second_moment_sensitivity(R, Adjacency.ADD_REMOVE) == 9.0
    assert count_sensitivity(Adjacency.REPLACE_ONE) == 0.0
    assert count_sensitivity(Adjacency.REPLACE_ONE, private_labels=True) == math.sqrt(2)
    assert count_sensitivity(Adjacency.ADD_REMOVE) == 1.0


def test_second_moment_bound_is_attained_at_orthogonal_records() -> None:
    R = 2.0
    z, z2 = np.array([R, 0.0, 0.0]), np.array([0.0, R, 0.0])
    change = np.linalg.norm(np.outer(z, z) - np.outer(z2, z2))
    assert change == pytest.approx(second_moment_sensitivity(R, Adjacency.REPLACE_ONE), rel=1e-15)
    # The triangle-inequality bound 2R² is loose: antipodal records change nothing.
    assert np.linalg.norm(np.outer(z, z) - np.outer(-z, -z)) == 0.0


def test_sum_bound_is_attained_at_antipodal_records() -> None:
    R = 2.0
    z = np.array([R, 0.0])
    assert np.linalg.norm(z - (-z)) == sum_sensitivity(R, Adjacency.REPLACE_ONE)


@given(seed=st.integers(0, 2**32 - 1), dim=st.integers(1, 6))
def test_single_sensitivities_never_exceeded(seed: int, dim: int) -> None:
    rng = np.random.default_rng(seed)
    R = float(rng.uniform(0.1, 5.0))
    z, z2 = rng.normal(size=(2, dim))
    z *= R * rng.uniform(0, 1) ** (1 / dim) / np.linalg.norm(z)
    z2 *= R * rng.uniform(0, 1) ** (1 / dim) / np.linalg.norm(z2)
    assert np.linalg.norm(z - z2) <= sum_sensitivity(R, Adjacency.REPLACE_ONE) * (1 + 1e-12)
    assert np.linalg.norm(np.outer(z, z) - np.outer(z2, z2)) <= second_moment_sensitivity(
        R, Adjacency.REPLACE_ONE
    ) * (1 + 1e-12)
    assert np.linalg.norm(z) <= sum_sensitivity(R, Adjacency.ADD_REMOVE) * (1 + 1e-12)


# -- the joint closed form --------------------------------------------------------


def _numeric_max(a: float, b: float, R: float) -> float:
    """Maximise a²‖z−z′‖² + b²‖zzᵀ−z′z′ᵀ‖² over the norms r, s ≤ R and the angle's cosine."""

    def value(params: Array) -> float:
        r, s, cos = params
        return a * a * (r * r + s * s - 2 * r * s * cos) + b * b * (
            r**4 + s**4 - 2 * (r * s * cos) ** 2
        )

    grid_r = np.linspace(0, R, 21)
    grid_c = np.linspace(-1, 1, 201)
    r, s, cos = np.meshgrid(grid_r, grid_r, grid_c, indexing="ij")
    values = a * a * (r * r + s * s - 2 * r * s * cos) + b * b * (
        r**4 + s**4 - 2 * (r * s * cos) ** 2
    )
    start = np.unravel_index(np.argmax(values), values.shape)
    x0 = np.array([grid_r[start[0]], grid_r[start[1]], grid_c[start[2]]])
    result = minimize(
        lambda p: -value(p),
        x0,
        method="L-BFGS-B",
        bounds=[(0, R), (0, R), (-1, 1)],
        options={"ftol": 1e-15, "gtol": 1e-12},
    )
    return max(float(values.max()), -float(result.fun))


@pytest.mark.parametrize(
    ("sigma_sum", "sigma_second", "R"),
    [
        (1.0, 1.0, 1.0),
        (0.5, 3.0, 1.0),  # a² > 2b²R²: the antipodal branch
        (3.0, 0.2, 1.0),
        (6.36, 19.09, 3.0),  # the balanced plan at (10, 1e-5), R = 3
        (1.0, 1.0, 0.3),
        (2.0, 0.7, 2.5),
    ],
)
def test_joint_closed_form_matches_numerical_maximum(
    sigma_sum: float, sigma_second: float, R: float
) -> None:
    bound = joint_mu_squared(R, sigma_sum, sigma_second, Adjacency.REPLACE_ONE)
    numeric = _numeric_max(1 / sigma_sum, 1 / sigma_second, R)
    assert numeric <= bound * (1 + 1e-12)
    assert numeric >= bound * (1 - 1e-9)
    # Always below the sum of the separate worst cases.
    separate = (2 * R / sigma_sum) ** 2 + (math.sqrt(2) * R * R / sigma_second) ** 2
    assert bound <= separate * (1 + 1e-15)


@pytest.mark.parametrize(
    ("sigma_sum", "sigma_second", "R"), [(1.0, 1.0, 1.0), (0.5, 3.0, 1.0), (6.36, 19.09, 3.0)]
)
def test_joint_bound_attained_by_explicit_datasets(
    sigma_sum: float, sigma_second: float, R: float
) -> None:
    a, b = 1 / sigma_sum, 1 / sigma_second
    cos = max(-(a * a) / (2 * b * b * R * R), -1.0)
    z = np.array([R, 0.0, 0.0])
    z2 = R * np.array([cos, math.sqrt(1 - cos * cos), 0.0])
    others = np.array([[0.1, 0.2, -0.3], [1e-3, 0.0, 0.5]]) * R
    labels = np.zeros(3, dtype=np.int64)
    before = (np.vstack([others, z]), labels)
    after = (np.vstack([others, z2]), labels)
    got = change_squared(before, after, 1, a, b, 0.0)
    assert got == pytest.approx(
        joint_mu_squared(R, sigma_sum, sigma_second, Adjacency.REPLACE_ONE), rel=1e-12
    )


def test_add_remove_joint_is_attained_at_the_boundary() -> None:
    R, s1, s2, s3 = 2.0, 1.5, 4.0, 0.8
    z = np.array([0.0, R])
    base = np.array([[0.3, 0.1]])
    got = change_squared(
        (np.vstack([base, z]), np.zeros(2, dtype=np.int64)),
        (base, np.zeros(1, dtype=np.int64)),
        1,
        1 / s1,
        1 / s2,
        1 / s3,
    )
    bound = joint_mu_squared(R, s1, s2, Adjacency.ADD_REMOVE, noise_std_count=s3)
    assert got == pytest.approx(bound, rel=1e-12)
    assert bound == pytest.approx((R / s1) ** 2 + (R * R / s2) ** 2 + 1 / s3**2)


def test_private_labels_cross_class_case_is_attained() -> None:
    R, s1, s2, s3 = 1.0, 1.0, 1.0, 0.3  # small count noise: the cross-class case dominates
    z, z2 = np.array([R, 0.0]), np.array([0.0, R])
    base = np.array([[0.2, 0.2], [-0.1, 0.4]])
    base_labels = np.array([0, 1], dtype=np.int64)
    before = (np.vstack([base, z]), np.append(base_labels, 0))
    after = (np.vstack([base, z2]), np.append(base_labels, 1))
    got = change_squared(before, after, 2, 1 / s1, 1 / s2, 1 / s3)
    bound = joint_mu_squared(
        R, s1, s2, Adjacency.REPLACE_ONE, noise_std_count=s3, private_labels=True
    )
    assert got == pytest.approx(bound, rel=1e-12)
    same_class = joint_mu_squared(R, s1, s2, Adjacency.REPLACE_ONE)
    assert bound > same_class


def test_private_labels_same_class_case_can_dominate() -> None:
    bound = joint_mu_squared(1.0, 0.5, 3.0, Adjacency.REPLACE_ONE, noise_std_count=100.0,
                             private_labels=True)  # fmt: skip
    assert bound == joint_mu_squared(1.0, 0.5, 3.0, Adjacency.REPLACE_ONE)


def test_unnoised_private_counts_are_infinitely_revealing() -> None:
    assert joint_mu_squared(1.0, 1.0, 1.0, Adjacency.ADD_REMOVE) == math.inf
    assert joint_mu_squared(1.0, 1.0, 1.0, Adjacency.REPLACE_ONE, private_labels=True) == math.inf


def test_parts_not_released() -> None:
    R = 2.0
    assert joint_mu_squared(R, 1.0, None, Adjacency.REPLACE_ONE) == pytest.approx(4 * R * R)
    assert joint_mu_squared(R, None, 1.0, Adjacency.REPLACE_ONE) == 0.0 + 2 * R**4 + 0.0
    assert joint_mu_squared(R, math.inf, 1.0, Adjacency.ADD_REMOVE, noise_std_count=math.inf) == (
        R**4
    )


def _adversarial_pair(rng: np.random.Generator, dim: int, R: float, a: float, b: float, mode: int):  # type: ignore[no-untyped-def]
    z = rng.normal(size=dim)
    z *= R / np.linalg.norm(z)
    if mode == 0:  # random inside the ball
        z2 = rng.normal(size=dim)
        z2 *= R * rng.uniform() / np.linalg.norm(z2)
        z *= rng.uniform()
    elif mode == 1:  # antipodal
        z2 = -z
    elif mode == 2:  # orthogonal
        w = rng.normal(size=dim)
        w -= (w @ z) / (z @ z) * z
        z2 = R * w / np.linalg.norm(w)
    else:  # near the analytic worst angle, jittered
        cos = float(np.clip(-(a * a) / (2 * b * b * R * R) + rng.normal(scale=0.05), -1, 1))
        w = rng.normal(size=dim)
        w -= (w @ z) / (z @ z) * z
        w /= np.linalg.norm(w)
        z2 = R * (cos * z / R + math.sqrt(1 - cos * cos) * w)
    for v in (z, z2):
        n = np.linalg.norm(v)
        if n > R:
            v *= R / n
    return z, z2


@given(
    seed=st.integers(0, 2**32 - 1),
    dim=st.integers(2, 5),
    mode=st.integers(0, 3),
    log_sigma_sum=st.floats(-2.0, 2.0),
    log_sigma_second=st.floats(-2.0, 2.0),
    log_sigma_count=st.floats(-2.0, 2.0),
    private_labels=st.booleans(),
)
def test_adversarial_search_never_exceeds_joint_bound(
    seed: int,
    dim: int,
    mode: int,
    log_sigma_sum: float,
    log_sigma_second: float,
    log_sigma_count: float,
    private_labels: bool,
) -> None:
    rng = np.random.default_rng(seed)
    R = float(rng.uniform(0.2, 4.0))
    s1, s2, s3 = (math.exp(v) for v in (log_sigma_sum, log_sigma_second, log_sigma_count))
    a, b, c = 1 / s1, 1 / s2, 1 / s3
    z, z2 = _adversarial_pair(rng, dim, R, a, b, mode)
    base = rng.normal(size=(3, dim)) * 0.1
    base_labels = rng.integers(0, 2, size=3)
    new_label = int(rng.integers(0, 2)) if private_labels else 0
    before = (np.vstack([base, z]), np.append(base_labels, 0))
    after = (np.vstack([base, z2]), np.append(base_labels, new_label))
    got = change_squared(before, after, 2, a, b, c)
    bound = joint_mu_squared(
        R, s1, s2, Adjacency.REPLACE_ONE, noise_std_count=s3, private_labels=private_labels
    )
    target(got / bound)
    assert got <= bound * (1 + 1e-9)
    # Add/remove of the same record.
    added = change_squared(before, (base, base_labels), 2, a, b, c)
    bound_ar = joint_mu_squared(R, s1, s2, Adjacency.ADD_REMOVE, noise_std_count=s3)
    assert added <= bound_ar * (1 + 1e-9)


def test_bad_arguments() -> None:
    with pytest.raises(ParameterError) as info:
        sum_sensitivity(0.0, Adjacency.REPLACE_ONE)
    assert info.value.parameter == "clip_norm"
    with pytest.raises(ParameterTypeError):
        sum_sensitivity(1.0, "replace-one")  # type: ignore[arg-type]
    with pytest.raises(ParameterError) as info:
        joint_mu_squared(1.0, -1.0, 1.0, Adjacency.REPLACE_ONE)
    assert info.value.parameter == "noise_std_sum"
    with pytest.raises(ParameterError):
        joint_mu_squared(1.0, 1.0, math.nan, Adjacency.REPLACE_ONE)
    with pytest.raises(ParameterTypeError):
        count_sensitivity(Adjacency.REPLACE_ONE, private_labels=1)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        joint_mu_squared(1.0, True, 1.0, Adjacency.REPLACE_ONE)
