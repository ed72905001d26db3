"""DP-SGD noise multipliers to a target (ε, δ): ``calibrate_noise_multiplier``.

Every check is deterministic (dp-accounting's PLDs and RDP curves are exact
computations, no sampling), so none has a false-failure rate; the margins below
are sized from the numbers each case produces and say why.

The reference is dp-accounting itself, used independently of privfed's ledger:
its ``PLDAccountant`` (same relation, its default interval 1e-4) composing
``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ/C)), steps)``,
and for add/remove its ``RdpAccountant`` as a looser cross-check.

The cases use ε <= 0.25 and tens of steps on purpose: the multipliers are then
>= 5, where one PLD at the ledger's interval costs a fraction of a second
(multipliers near 1 cost seconds per PLD), so the module stays cheap.
"""

from __future__ import annotations

import functools
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from privfed.dp import (
    Adjacency,
    PrivacyLedger,
    SubsampledGaussianRelease,
    calibrate_analytic_gaussian,
    calibrate_noise_multiplier,
)
from privfed.dp import dpsgd_calibration as calibration_module
from privfed.errors import (
    BudgetExceededError,
    CalibrationError,
    ParameterError,
    ParameterTypeError,
)

REPLACE = Adjacency.REPLACE_ONE
ADD_REMOVE = Adjacency.ADD_REMOVE
DELTA = 1e-5

#: (ε, q, steps, adjacency) of the cases.  BASE and one argument changed at a time.
BASE = (0.25, 0.05, 20, REPLACE)
MORE_STEPS = (0.25, 0.05, 40, REPLACE)
HIGHER_RATE = (0.25, 0.1, 20, REPLACE)
SMALLER_EPSILON = (0.125, 0.05, 20, REPLACE)
ADD_REMOVE_CASE = (0.25, 0.1, 20, ADD_REMOVE)
CASES = (BASE, MORE_STEPS, HIGHER_RATE, SMALLER_EPSILON, ADD_REMOVE_CASE)


@functools.cache
def multiplier(epsilon: float, rate: float, steps: int, adjacency: Adjacency) -> float:
    return calibrate_noise_multiplier(
        epsilon, DELTA, sampling_rate=rate, steps=steps, adjacency=adjacency
    )


def _event(sigma: float, rate: float, steps: int) -> dp_accounting.DpEvent:
    step = dp_accounting.PoissonSampledDpEvent(
        sampling_probability=rate, event=dp_accounting.GaussianDpEvent(noise_multiplier=sigma)
    )
    return dp_accounting.SelfComposedDpEvent(event=step, count=steps)


def pld_accountant(sigma: float, rate: float, steps: int, adjacency: Adjacency) -> PLDAccountant:
    """dp-accounting's own PLD accountant, built without privfed's ledger or releases."""
    relation = (
        dp_accounting.NeighboringRelation.REPLACE_ONE
        if adjacency is REPLACE
        else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    accountant = PLDAccountant(neighboring_relation=relation)
    accountant.compose(_event(sigma, rate, steps))
    return accountant


def rdp_epsilon(sigma: float, rate: float, steps: int) -> float:
    accountant = RdpAccountant()  # add-or-remove-one: its only relation for Poisson sampling
    accountant.compose(_event(sigma, rate, steps))
    return float(accountant.get_epsilon(DELTA))


def budget_ledger(epsilon: float) -> PrivacyLedger:
    return PrivacyLedger(budget_epsilon=epsilon, budget_delta=DELTA)


def release(
    sigma: float, rate: float, steps: int, adjacency: Adjacency
) -> SubsampledGaussianRelease:
    return SubsampledGaussianRelease(
        name="dp-sgd",
        partition=None,
        noise_multiplier=sigma,
        sampling_rate=rate,
        steps=steps,
        adjacency=adjacency,
        sampler="torch-normal",
        seeded=False,
    )


# -- the target is met, tightly, by dp-accounting's own accountant ------------------------


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"eps={c[0]}-q={c[1]}-T={c[2]}-{c[3].value}")
def test_multiplier_meets_the_target_and_is_tight(
    case: tuple[float, float, int, Adjacency],
) -> None:
    epsilon, rate, steps, adjacency = case
    sigma = multiplier(*case)
    at = pld_accountant(sigma, rate, steps, adjacency)
    # Met: δ(ε) <= δ is the ledger's own test; ε(δ) is its inverse on the same PLD.
    assert at.get_delta(epsilon) <= DELTA
    assert at.get_epsilon(DELTA) <= epsilon
    # Tight: 0.1% less noise misses the target (the solver's tolerance is 1e-4, and
    # 0.1% less noise raises ε by ~0.1-0.2% at these settings, far above rounding).
    below = pld_accountant(sigma * (1.0 - 1e-3), rate, steps, adjacency)
    assert below.get_epsilon(DELTA) > epsilon
    assert below.get_delta(epsilon) > DELTA


def test_rdp_cross_check_under_add_remove() -> None:
    """RDP (a looser upper bound) at the multiplier is near the target, never far below.

    The true ε at the multiplier is the target up to the PLD's pessimism (~1e-4
    relative), and RDP upper-bounds the true ε, so RDP's ε below 0.99 × target
    would mean the multiplier overshoots.  RDP's slack over the exact ε is
    ~10-20% at these settings; more than 50% would mean a multiplier far below
    what any accountant certifies.
    """
    epsilon, rate, steps, _ = ADD_REMOVE_CASE
    sigma = multiplier(*ADD_REMOVE_CASE)
    rdp = rdp_epsilon(sigma, rate, steps)
    assert 0.99 * epsilon <= rdp <= 1.5 * epsilon


# -- monotone in each argument -----------------------------------------------------------


def test_more_steps_need_more_noise() -> None:
    assert multiplier(*MORE_STEPS) > multiplier(*BASE) * 1.1


def test_a_higher_rate_needs_more_noise() -> None:
    assert multiplier(*HIGHER_RATE) > multiplier(*BASE) * 1.1


def test_a_larger_epsilon_needs_less_noise() -> None:
    assert multiplier(*BASE) < multiplier(*SMALLER_EPSILON) / 1.1


def test_replace_one_needs_more_noise_than_add_remove() -> None:
    # HIGHER_RATE and ADD_REMOVE_CASE differ in the adjacency only.
    assert HIGHER_RATE[:3] == ADD_REMOVE_CASE[:3]
    assert multiplier(*HIGHER_RATE) > multiplier(*ADD_REMOVE_CASE) * 1.1


# -- the ledger certifies the result ------------------------------------------------------


@pytest.mark.parametrize("case", [BASE, ADD_REMOVE_CASE], ids=["replace-one", "add-remove"])
def test_ledger_records_the_result_within_budget(
    case: tuple[float, float, int, Adjacency],
) -> None:
    epsilon, rate, steps, adjacency = case
    sigma = multiplier(*case)
    ledger = budget_ledger(epsilon)
    ledger.record(release(sigma, rate, steps, adjacency))
    assert ledger.method() == "pld"
    assert ledger.epsilon(DELTA) <= epsilon
    # The ledger refuses 0.1% less noise: the result is the ledger's threshold.
    with pytest.raises(BudgetExceededError):
        budget_ledger(epsilon).record(release(sigma * (1.0 - 1e-3), rate, steps, adjacency))


def test_the_plan_carries_its_target_events_and_ledger() -> None:
    epsilon, rate, steps, adjacency = BASE
    plan = calibration_module.calibrate_dpsgd(
        epsilon, DELTA, sampling_rate=rate, steps=steps, adjacency=adjacency
    )
    assert plan.noise_multiplier == multiplier(*BASE)
    assert (plan.target_epsilon, plan.delta, plan.sampling_rate, plan.steps) == (
        epsilon,
        DELTA,
        rate,
        steps,
    )
    (event,) = plan.events(name="cell", partition=None, sampler="s", seeded=True)
    assert event == SubsampledGaussianRelease(
        name="cell",
        partition=None,
        noise_multiplier=plan.noise_multiplier,
        sampling_rate=rate,
        steps=steps,
        adjacency=adjacency,
        sampler="s",
        seeded=True,
    )
    # The plan's ledger is budgeted at the target it was made for, and accepts its event.
    ledger = plan.ledger()
    assert (ledger.budget_epsilon, ledger.budget_delta) == (epsilon, DELTA)
    assert ledger.to_json() == budget_ledger(epsilon).to_json()
    ledger.record(event)
    assert ledger.epsilon(DELTA) <= epsilon


def test_results_are_cached_and_accept_numpy_scalars() -> None:
    epsilon, rate, steps, adjacency = BASE
    again = calibrate_noise_multiplier(
        np.float64(epsilon),
        np.float64(DELTA),
        sampling_rate=np.float64(rate),
        steps=np.int64(steps),  # type: ignore[arg-type]  # numpy ints are accepted on purpose
        adjacency=adjacency,
    )
    assert again == multiplier(*BASE)
    assert isinstance(again, float)


# -- known answer: one full-batch step is the plain Gaussian mechanism --------------------


@pytest.mark.parametrize(
    ("adjacency", "sensitivity"), [(ADD_REMOVE, 1.0), (REPLACE, 2.0)], ids=["add-remove", "replace"]
)
def test_one_full_batch_step_is_the_analytic_gaussian(
    adjacency: Adjacency, sensitivity: float
) -> None:
    """q = 1, steps = 1: ``N(0, σ²)`` on a sum moved by ``C`` (add/remove) or ``2C``.

    dp-accounting models a replaced record as contributions at ``±C``, so the
    sensitivity is 2 in units of C under replace-one.  The exact (analytic)
    multiplier is a lower bound (the ledger's PLD is pessimistic, so it can only
    ask for more noise); the discretisation at interval 1e-4 costs ~6e-5
    relative here, plus the solver's 1e-4, so 1e-3 is a generous ceiling.
    """
    epsilon = 0.25
    sigma = calibrate_noise_multiplier(
        epsilon, DELTA, sampling_rate=1.0, steps=1, adjacency=adjacency
    )
    exact = calibrate_analytic_gaussian(epsilon, DELTA, l2_sensitivity=sensitivity)
    assert exact <= sigma <= exact * (1.0 + 1e-3)


# -- refusals ------------------------------------------------------------------------------


def _call(**changes: object) -> float:
    arguments: dict[str, object] = {
        "target_epsilon": 0.25,
        "delta": DELTA,
        "sampling_rate": 0.05,
        "steps": 20,
        "adjacency": REPLACE,
    }
    arguments.update(changes)
    epsilon = arguments.pop("target_epsilon")
    delta = arguments.pop("delta")
    return calibrate_noise_multiplier(epsilon, delta, **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "value", "domain"),
    [
        ("target_epsilon", 0.0, "> 0"),
        ("target_epsilon", -1.0, "> 0"),
        ("target_epsilon", math.inf, "finite"),
        ("target_epsilon", math.nan, "not NaN"),
        ("delta", 0.0, "(0, 1)"),
        ("delta", 1.0, "(0, 1)"),
        ("delta", 1.5, "(0, 1)"),
        ("delta", math.nan, "not NaN"),
        ("sampling_rate", 0.0, "[2**-64, 1]"),
        ("sampling_rate", 2.0**-65, "[2**-64, 1]"),
        ("sampling_rate", 1.0 + 1e-12, "[2**-64, 1]"),
        ("sampling_rate", math.nan, "not NaN"),
        ("steps", 0, ">= 1"),
        ("steps", -3, ">= 1"),
    ],
)
def test_values_outside_their_domain_are_refused(name: str, value: object, domain: str) -> None:
    with pytest.raises(ParameterError, match=name) as info:
        _call(**{name: value})
    assert info.value.parameter == name
    assert domain in str(info.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("target_epsilon", True),
        ("target_epsilon", "1"),
        ("delta", None),
        ("sampling_rate", False),
        ("steps", 2.0),
        ("steps", True),
        ("adjacency", "replace-one"),
    ],
)
def test_wrong_types_are_refused(name: str, value: object) -> None:
    with pytest.raises(ParameterTypeError, match=name) as info:
        _call(**{name: value})
    assert info.value.parameter == name


def test_the_smallest_sampler_rate_is_accepted() -> None:
    """``2**-64`` is in the domain; at that rate the target needs no noise, which is refused."""
    assert calibration_module.MIN_SAMPLING_RATE == 2.0**-64
    with pytest.raises(CalibrationError, match="no noise at all"):
        _call(sampling_rate=2.0**-64, steps=1)


def test_a_delta_no_finite_multiplier_reaches_is_refused() -> None:
    """dp-accounting truncates 1e-15 of tail mass when composing: δ = 1e-20 is never met."""
    with pytest.raises(CalibrationError, match="no finite multiplier"):
        _call(delta=1e-20)


def test_a_target_needing_less_than_the_floor_is_refused() -> None:
    """ε = 200 for one full-batch step needs σ/C < 0.2, which is not calibrated."""
    with pytest.raises(CalibrationError, match=r"below 0\.2"):
        _call(target_epsilon=200.0, sampling_rate=1.0, steps=1)


def test_a_large_target_is_refused_before_any_pld_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """ε = 1000 over 10 subsampled steps: the full batch already meets it below the floor.

    The refusal comes from the full-batch bound (a Poisson subsample is never less
    private than the full batch), without accounting a PLD at the floor -- which for
    such spread-out losses took minutes.  The test makes any PLD construction fail.
    """

    def no_pld(self: object, interval: float) -> None:
        raise AssertionError("a PLD was built for a target met below the floor")

    monkeypatch.setattr(calibration_module.SubsampledGaussianRelease, "pld", no_pld)
    with pytest.raises(CalibrationError, match=r"below 0\.2"):
        calibration_module.calibrate_noise_multiplier(1000.0, 1e-5, sampling_rate=0.25, steps=10)
