"""Analytic Gaussian calibration and μ-GDP helpers."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import dp_accounting
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.dp import (
    calibrate_analytic_gaussian,
    compose_gdp,
    gaussian_delta,
    gaussian_epsilon,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    mu_for_epsilon_delta,
)
from privfed.errors import ParameterError, ParameterTypeError

DATA = (
    Path(__file__).resolve().parents[1] / "fixtures" / "dp" / "analytic_gaussian_known_answers.csv"
)


def _known_answers() -> list[tuple[float, float, float]]:
    with DATA.open() as handle:
        rows = [line for line in handle if not line.startswith("#")]
    return [
        (float(r["epsilon"]), float(r["delta"]), float(r["sigma"])) for r in csv.DictReader(rows)
    ]


KNOWN = _known_answers()


def test_known_answer_file_is_complete() -> None:
    assert len(KNOWN) == 11


@pytest.mark.parametrize(("epsilon", "delta", "sigma"), KNOWN)
def test_known_answers(epsilon: float, delta: float, sigma: float) -> None:
    got = calibrate_analytic_gaussian(epsilon, delta)
    assert got == pytest.approx(sigma, rel=1e-9)
    assert gaussian_delta(got, epsilon) <= delta


@pytest.mark.parametrize(("epsilon", "delta", "sigma"), KNOWN)
def test_known_answers_scale_with_sensitivity(epsilon: float, delta: float, sigma: float) -> None:
    got = calibrate_analytic_gaussian(epsilon, delta, l2_sensitivity=3.5)
    assert got == pytest.approx(3.5 * sigma, rel=1e-9)
    assert gaussian_delta(got, epsilon, l2_sensitivity=3.5) <= delta


@pytest.mark.parametrize("epsilon", [0.05, 0.3, 1.0, 3.0, 8.0, 10.0, 30.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-8])
def test_matches_dp_accounting_oracle(epsilon: float, delta: float) -> None:
    oracle = dp_accounting.get_sigma_gaussian(epsilon, delta)
    assert calibrate_analytic_gaussian(epsilon, delta) == pytest.approx(oracle, rel=1e-8)


@given(
    epsilon=st.floats(min_value=1e-3, max_value=1000.0),
    log10_delta=st.floats(min_value=-15.0, max_value=-1.0),
    sensitivity=st.floats(min_value=1e-3, max_value=1e3),
)
def test_conservative_and_tight(epsilon: float, log10_delta: float, sensitivity: float) -> None:
    delta = 10.0**log10_delta
    sigma = calibrate_analytic_gaussian(epsilon, delta, l2_sensitivity=sensitivity)
    assert math.isfinite(sigma) and sigma > 0
    # Conservative: the exact curve confirms the guarantee.
    assert gaussian_delta(sigma, epsilon, l2_sensitivity=sensitivity) <= delta
    # Tight: 1e-8 less noise already breaks it.
    assert gaussian_delta(sigma * (1 - 1e-8), epsilon, l2_sensitivity=sensitivity) > delta


@pytest.mark.parametrize("epsilon", [709.0, 710.0, 711.0, 1000.0, 5000.0])
def test_large_epsilon_does_not_overflow(epsilon: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sigma = calibrate_analytic_gaussian(epsilon, 1e-15)
        assert math.isfinite(sigma) and sigma > 0
        assert gaussian_delta(sigma, epsilon) <= 1e-15
        assert gaussian_epsilon(sigma, 1e-15) >= epsilon * (1 - 1e-9)


def test_tiny_delta_keeps_relative_precision() -> None:
    # The copied reference script's absolute tolerance is 41x over budget here.
    sigma = calibrate_analytic_gaussian(1.0, 1e-15)
    assert gaussian_delta(sigma, 1.0) == pytest.approx(1e-15, rel=1e-6)


def test_monotone_in_epsilon_and_delta() -> None:
    sigmas = [calibrate_analytic_gaussian(e, 1e-5) for e in (0.1, 0.5, 1, 2, 5, 10)]
    assert sigmas == sorted(sigmas, reverse=True)
    sigmas = [calibrate_analytic_gaussian(1.0, d) for d in (1e-12, 1e-9, 1e-6, 1e-3)]
    assert sigmas == sorted(sigmas, reverse=True)


def test_zero_sensitivity_needs_no_noise() -> None:
    assert calibrate_analytic_gaussian(1.0, 1e-5, l2_sensitivity=0.0) == 0.0
    assert gaussian_delta(1.0, 1.0, l2_sensitivity=0.0) == 0.0
    assert gaussian_epsilon(1.0, 1e-5, l2_sensitivity=0.0) == 0.0


@given(
    sigma=st.floats(min_value=0.05, max_value=200.0),
    log10_delta=st.floats(min_value=-14.0, max_value=-1.0),
)
def test_gaussian_epsilon_is_conservative_inverse(sigma: float, log10_delta: float) -> None:
    delta = 10.0**log10_delta
    eps = gaussian_epsilon(sigma, delta)
    assert gaussian_delta(sigma, eps) <= delta
    if eps > 0:
        # Never smaller than the truth: a slightly smaller ε is not enough.
        assert gaussian_delta(sigma, eps * (1 - 1e-9)) >= delta * (1 - 1e-9)


@pytest.mark.parametrize(("epsilon", "delta", "sigma"), KNOWN[:6])
def test_epsilon_round_trip(epsilon: float, delta: float, sigma: float) -> None:
    assert gaussian_epsilon(sigma, delta) == pytest.approx(epsilon, rel=1e-9)


def test_gdp_helpers_agree_with_gaussian_curves() -> None:
    mu = gdp_mu(2.0, 3.0)
    assert mu == 1.5
    assert gdp_delta(mu, 1.2) == gaussian_delta(2.0, 1.2, l2_sensitivity=3.0)
    assert gdp_epsilon(mu, 1e-6) == gaussian_epsilon(2.0, 1e-6, l2_sensitivity=3.0)
    assert compose_gdp([3.0, 4.0]) == 5.0
    assert compose_gdp([]) == 0.0
    assert compose_gdp([1e200, 1e200]) == pytest.approx(math.sqrt(2) * 1e200)
    assert gdp_delta(0.0, 1.0) == 0.0
    assert gdp_epsilon(0.0, 1e-5) == 0.0


def test_gdp_delta_at_zero_epsilon_is_total_variation() -> None:
    # δ(0) = 2Φ(μ/2) − 1.
    from scipy.stats import norm

    assert gdp_delta(1.3, 0.0) == pytest.approx(2 * norm.cdf(0.65) - 1, rel=1e-12)


@pytest.mark.parametrize(("epsilon", "delta", "sigma"), KNOWN)
def test_mu_for_epsilon_delta(epsilon: float, delta: float, sigma: float) -> None:
    mu = mu_for_epsilon_delta(epsilon, delta)
    assert mu == pytest.approx(1 / sigma, rel=1e-9)
    assert gdp_delta(mu, epsilon) <= delta


def test_two_release_mu_split_beats_epsilon_delta_split() -> None:
    # Two equal releases at (10, 1e-5): μ² split vs the (ε/2, δ/2) split.
    halves = calibrate_analytic_gaussian(5.0, 5e-6)
    mu_split = math.sqrt(2) / mu_for_epsilon_delta(10.0, 1e-5)
    assert halves == pytest.approx(0.9191, abs=1e-4)
    assert mu_split == pytest.approx(0.7069, abs=1e-4)


BAD_CALLS = [
    (calibrate_analytic_gaussian, (0.0, 1e-5), {}, "epsilon"),
    (calibrate_analytic_gaussian, (-1.0, 1e-5), {}, "epsilon"),
    (calibrate_analytic_gaussian, (math.inf, 1e-5), {}, "epsilon"),
    (calibrate_analytic_gaussian, (math.nan, 1e-5), {}, "epsilon"),
    (calibrate_analytic_gaussian, (1.0, 0.0), {}, "delta"),
    (calibrate_analytic_gaussian, (1.0, 1.0), {}, "delta"),
    (calibrate_analytic_gaussian, (1.0, math.nan), {}, "delta"),
    (calibrate_analytic_gaussian, (1.0, 1e-5), {"l2_sensitivity": -1.0}, "l2_sensitivity"),
    (calibrate_analytic_gaussian, (1.0, 1e-5), {"l2_sensitivity": math.nan}, "l2_sensitivity"),
    (gaussian_delta, (0.0, 1.0), {}, "noise_std"),
    (gaussian_delta, (1.0, -1.0), {}, "epsilon"),
    (gaussian_epsilon, (1.0, 2.0), {}, "delta"),
    (gdp_delta, (-1.0, 1.0), {}, "mu"),
    (gdp_epsilon, (1.0, 0.0), {}, "delta"),
    (mu_for_epsilon_delta, (0.0, 1e-5), {}, "epsilon"),
    (gdp_mu, (1.0, -2.0), {}, "l2_sensitivity"),
]


@pytest.mark.parametrize(("func", "args", "kwargs", "name"), BAD_CALLS)
def test_bad_parameters_name_the_parameter(func, args, kwargs, name) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError) as info:
        func(*args, **kwargs)
    assert info.value.parameter == name
    assert isinstance(info.value, ValueError)
    assert name in str(info.value)


def test_bool_and_non_numbers_are_type_errors() -> None:
    with pytest.raises(ParameterTypeError):
        calibrate_analytic_gaussian(True, 1e-5)
    with pytest.raises(ParameterTypeError):
        calibrate_analytic_gaussian(1.0, 1e-5, l2_sensitivity=True)
    with pytest.raises(ParameterTypeError):
        calibrate_analytic_gaussian("1", 1e-5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        compose_gdp([1.0, -1.0])
