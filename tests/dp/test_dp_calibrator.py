"""The one calibrator: bracket, bisect, certify -- always on the safe side."""

from __future__ import annotations

import math

import pytest

from privfed.dp import Bisection, Bracket, Nudge, calibrate
from privfed.dp.calibration import calibrate_analytic_gaussian, gaussian_delta
from privfed.dp.calibrator import bracket_and_bisect, raise_until
from privfed.errors import CalibrationError, ParameterError


def _threshold(value: float) -> tuple[list[float], object]:
    """A monotone predicate ``p >= value`` that records the points it was asked about."""
    asked: list[float] = []

    def meets(p: float) -> bool:
        asked.append(p)
        return p >= value

    return asked, meets


@pytest.mark.parametrize("rule", ["ratio", "span", "log-span"])
@pytest.mark.parametrize("restart", ["last", "guess", "top"])
@pytest.mark.parametrize("guess", [1e-3, 0.9, 1.0, 37.0, 1e6])
def test_result_meets_the_target_within_the_tolerance(
    rule: str, restart: str, guess: float
) -> None:
    threshold = 3.7
    _, meets = _threshold(threshold)
    found = bracket_and_bisect(
        meets,
        Bracket(guess, 1e-9, 1e9, restart=restart),  # type: ignore[arg-type]
        Bisection(1e-9, rule),  # type: ignore[arg-type]
    )
    assert threshold <= found <= threshold * (1 + 2e-9)


def test_the_bracket_walks_by_growing_steps() -> None:
    asked, meets = _threshold(10.0)
    bracket_and_bisect(meets, Bracket(1.0, 1e-3, 1e3, step=0.25), Bisection(0.5))
    # 1, 1.25, 1.25 * 1.5, then factors of 2 until 10 is passed.
    assert asked[:4] == [1.0, 1.25, 1.25 * 1.5, 1.25 * 1.5 * 2.0]


def test_lower_end_is_returned_or_refused_as_asked() -> None:
    _, meets = _threshold(0.0)
    assert bracket_and_bisect(meets, Bracket(5.0, 0.5, 10.0), Bisection(1e-6)) == 0.5
    with pytest.raises(CalibrationError, match="below the floor"):
        bracket_and_bisect(
            meets, Bracket(5.0, 0.5, 10.0, below="below the floor"), Bisection(1e-6)
        )


def test_a_target_above_the_bracket_is_refused() -> None:
    _, meets = _threshold(100.0)
    with pytest.raises(CalibrationError, match="out of reach"):
        bracket_and_bisect(meets, Bracket(1.0, 0.5, 10.0, above="out of reach"), Bisection(1e-6))


def test_certification_raises_until_accepted() -> None:
    calls: list[float] = []

    def accepts(p: float) -> bool:
        calls.append(p)
        return p >= 4.0

    found = calibrate(
        lambda p: p,
        lambda p: p >= 3.0,
        Bracket(1.0, 1e-3, 1e3),
        bisection=Bisection(1e-12),
        nudge=Nudge(lambda p: p * 1.1, 100, "never", accepts=accepts),
    )
    assert found >= 4.0 and calls[-1] == found
    with pytest.raises(CalibrationError, match=r"gave up at 1\.5"):
        raise_until(
            1.0, lambda p: False, lambda p: p + 0.25, max_steps=2, failure="gave up at {}".format
        )


def test_analytic_gaussian_is_the_calibrator_on_the_exact_curve() -> None:
    sigma = calibrate_analytic_gaussian(1.0, 1e-5, l2_sensitivity=2.0)
    assert gaussian_delta(sigma, 1.0, l2_sensitivity=2.0) <= 1e-5
    assert gaussian_delta(sigma * (1 - 1e-9), 1.0, l2_sensitivity=2.0) > 1e-5


def test_bracket_and_bisection_arguments_are_checked() -> None:
    with pytest.raises(ParameterError, match="upper"):
        Bracket(1.0, 2.0, 1.0)
    with pytest.raises(ParameterError, match="lower"):
        Bracket(1.0, 0.0, 1.0)
    with pytest.raises(ParameterError, match="guess"):
        Bracket(math.nan, 1.0, 2.0)
    with pytest.raises(ParameterError, match="step"):
        Bracket(1.0, 1.0, 2.0, step=2.0)
    with pytest.raises(ParameterError, match="restart"):
        Bracket(1.0, 1.0, 2.0, restart="nowhere")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="rule"):
        Bisection(1e-3, "linear")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="rtol"):
        Bisection(0.0)
    assert Bracket(math.inf, 1.0, 2.0).guess == math.inf  # clipped to the bracket
