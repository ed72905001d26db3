"""Noise plans for the latent-statistic release."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.dp import (
    Adjacency,
    calibrate_analytic_gaussian,
    gdp_delta,
    joint_mu_squared,
    mu_for_epsilon_delta,
)
from privfed.engines.moments.planning import (
    LatentReleasePlan,
    paper_baseline_noise_stds,
    plan_latent_release,
    release_error_objective,
)
from privfed.errors import ParameterError, ParameterTypeError


def _objective(plan: LatentReleasePlan) -> float:
    return release_error_objective(
        plan.noise_std_sum,
        plan.noise_std_second_moment,
        plan.noise_std_count,
        clip_norm=plan.clip_norm,
        dim=plan.dim,
    )


def test_balanced_plan_needs_under_062_of_the_paper_noise() -> None:
    R = 3.0 * math.sqrt(128)
    baseline_sum, baseline_second = paper_baseline_noise_stds(10.0, 1e-5, clip_norm=R)
    plan = plan_latent_release(
        10.0, 1e-5, clip_norm=R, dim=128, adjacency=Adjacency.REPLACE_ONE, split="balanced"
    )
    assert plan.noise_std_sum <= 0.62 * baseline_sum
    assert plan.noise_std_second_moment <= 0.62 * baseline_second
    assert plan.noise_std_sum / baseline_sum == pytest.approx(0.577, abs=0.005)


def test_paper_baseline_is_the_half_split() -> None:
    s, m = paper_baseline_noise_stds(10.0, 1e-5, clip_norm=2.0)
    assert s == calibrate_analytic_gaussian(5.0, 5e-6, l2_sensitivity=4.0)
    assert m == calibrate_analytic_gaussian(5.0, 5e-6, l2_sensitivity=8.0)


def test_balanced_means_equal_noise_multipliers() -> None:
    R = 2.5
    for adjacency in Adjacency:
        plan = plan_latent_release(
            2.0, 1e-6, clip_norm=R, dim=16, adjacency=adjacency, split="balanced"
        )
        assert plan.noise_std_sum / R == pytest.approx(plan.noise_std_second_moment / R**2)
        if adjacency is Adjacency.ADD_REMOVE:
            assert plan.noise_std_count == pytest.approx(plan.noise_std_sum / R)


def test_float_two_thirds_is_balanced_under_replace_one() -> None:
    kwargs = {"clip_norm": 1.7, "dim": 8, "adjacency": Adjacency.REPLACE_ONE}
    balanced = plan_latent_release(5.0, 1e-5, split="balanced", **kwargs)  # type: ignore[arg-type]
    weighted = plan_latent_release(5.0, 1e-5, split=2 / 3, **kwargs)  # type: ignore[arg-type]
    assert weighted.noise_std_sum == pytest.approx(balanced.noise_std_sum, rel=1e-12)
    assert weighted.noise_std_second_moment == pytest.approx(
        balanced.noise_std_second_moment, rel=1e-12
    )


def test_float_weight_moves_noise_between_parts() -> None:
    kwargs = {"clip_norm": 1.0, "dim": 8, "adjacency": Adjacency.REPLACE_ONE}
    low = plan_latent_release(5.0, 1e-5, split=0.2, **kwargs)  # type: ignore[arg-type]
    high = plan_latent_release(5.0, 1e-5, split=0.8, **kwargs)  # type: ignore[arg-type]
    assert high.noise_std_sum < low.noise_std_sum
    assert high.noise_std_second_moment > low.noise_std_second_moment


@pytest.mark.slow
@pytest.mark.parametrize("adjacency", list(Adjacency))
@pytest.mark.parametrize("private_labels", [False, True])
@pytest.mark.parametrize("dim", [1, 16, 128])
def test_optimal_beats_every_other_split(
    adjacency: Adjacency, private_labels: bool, dim: int
) -> None:
    kwargs = {
        "clip_norm": 2.0,
        "dim": dim,
        "adjacency": adjacency,
        "private_labels": private_labels,
    }
    best = _objective(plan_latent_release(10.0, 1e-5, split="optimal", **kwargs))  # type: ignore[arg-type]
    others = [plan_latent_release(10.0, 1e-5, split="balanced", **kwargs)]  # type: ignore[arg-type]
    others += [
        plan_latent_release(10.0, 1e-5, split=w, **kwargs) for w in np.linspace(0.05, 0.95, 19)
    ]  # type: ignore[arg-type]
    assert all(best <= _objective(p) * (1 + 1e-9) for p in others)


def test_optimal_is_a_local_minimum_on_the_constraint() -> None:
    R, d = 2.0, 32
    plan = plan_latent_release(4.0, 1e-5, clip_norm=R, dim=d, adjacency=Adjacency.REPLACE_ONE)
    base = _objective(plan)
    for factor in (0.98, 1.02):
        # Move noise between the parts and rescale to the same exact joint μ.
        s, m = plan.noise_std_sum * factor, plan.noise_std_second_moment / factor
        scale = math.sqrt(joint_mu_squared(R, s, m, Adjacency.REPLACE_ONE)) / plan.mu
        assert release_error_objective(s * scale, m * scale, 0.0, clip_norm=R, dim=d) >= base


def test_plan_is_deterministic() -> None:
    kwargs = {
        "clip_norm": 3.0,
        "dim": 64,
        "adjacency": Adjacency.REPLACE_ONE,
        "private_labels": True,
    }
    assert plan_latent_release(3.0, 1e-6, **kwargs) == plan_latent_release(3.0, 1e-6, **kwargs)  # type: ignore[arg-type]


@given(
    epsilon=st.floats(0.01, 100.0),
    log10_delta=st.floats(-12.0, -2.0),
    clip_norm=st.floats(0.01, 100.0),
    dim=st.integers(1, 512),
    adjacency=st.sampled_from(list(Adjacency)),
    split=st.one_of(st.sampled_from(["balanced", "optimal"]), st.floats(0.01, 0.99)),
    private_labels=st.booleans(),
)
@pytest.mark.slow
def test_plan_guarantee_is_conservative_and_tight(
    epsilon: float,
    log10_delta: float,
    clip_norm: float,
    dim: int,
    adjacency: Adjacency,
    split: str | float,
    private_labels: bool,
) -> None:
    delta = 10.0**log10_delta
    plan = plan_latent_release(
        epsilon,
        delta,
        clip_norm=clip_norm,
        dim=dim,
        adjacency=adjacency,
        split=split,  # type: ignore[arg-type]
        private_labels=private_labels,
    )
    counts_noised = adjacency is Adjacency.ADD_REMOVE or private_labels
    exact = math.sqrt(
        joint_mu_squared(
            clip_norm,
            plan.noise_std_sum,
            plan.noise_std_second_moment,
            adjacency,
            noise_std_count=plan.noise_std_count if counts_noised else None,
            private_labels=plan.private_labels,
        )
    )
    assert plan.mu == exact
    assert plan.delta <= delta
    assert gdp_delta(plan.mu, epsilon) <= delta
    # Tight: the plan uses the whole budget, up to rounding.
    assert plan.mu >= mu_for_epsilon_delta(epsilon, delta) * (1 - 1e-9)
    assert (plan.noise_std_count > 0) == counts_noised
    assert plan.epsilon == epsilon


def test_plan_records_its_sensitivities() -> None:
    plan = plan_latent_release(
        1.0, 1e-5, clip_norm=2.0, dim=4, adjacency=Adjacency.REPLACE_ONE, private_labels=True
    )
    assert plan.sum_sensitivity == 4.0
    assert plan.second_moment_sensitivity == pytest.approx(math.sqrt(2) * 4)
    assert plan.count_sensitivity == pytest.approx(math.sqrt(2))
    ar = plan_latent_release(
        1.0, 1e-5, clip_norm=2.0, dim=4, adjacency=Adjacency.ADD_REMOVE, private_labels=True
    )
    assert ar.private_labels is False  # no meaning under add/remove
    assert ar.count_sensitivity == 1.0


def test_plan_refuses_inconsistent_values() -> None:
    plan = plan_latent_release(1.0, 1e-5, clip_norm=2.0, dim=4, adjacency=Adjacency.REPLACE_ONE)
    with pytest.raises(ParameterError) as info:
        dataclasses.replace(plan, mu=plan.mu / 2)
    assert info.value.parameter == "mu"
    with pytest.raises(ParameterError):
        dataclasses.replace(plan, noise_std_sum=plan.noise_std_sum / 2)
    with pytest.raises(ParameterError):
        dataclasses.replace(plan, sum_sensitivity=1.0)
    with pytest.raises(ParameterError):
        dataclasses.replace(plan, delta=plan.delta / 10)
    with pytest.raises(ParameterTypeError):
        dataclasses.replace(plan, adjacency="replace-one")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.mu = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"split": "fast"}, "split"),
        ({"split": 0.0}, "split"),
        ({"split": 1.0}, "split"),
        ({"dim": 0}, "dim"),
        ({"clip_norm": -1.0}, "clip_norm"),
        ({"clip_norm": math.inf}, "clip_norm"),
    ],
)
def test_bad_plan_arguments(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {"clip_norm": 1.0, "dim": 4, "adjacency": Adjacency.REPLACE_ONE}
    args.update(kwargs)
    with pytest.raises(ParameterError) as info:
        plan_latent_release(1.0, 1e-5, **args)  # type: ignore[arg-type]
    assert info.value.parameter == name


def test_bad_plan_types() -> None:
    with pytest.raises(ParameterTypeError):
        plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=4, adjacency="add-remove")  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=4.0, adjacency=Adjacency.ADD_REMOVE)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError):
        plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=True, adjacency=Adjacency.ADD_REMOVE)  # type: ignore[arg-type]
