"""Noise multipliers for DP-SGD to a target (ε, δ), on the ledger's own accounting.

:func:`calibrate_noise_multiplier` returns the smallest noise multiplier ``σ/C``
for which ``steps`` Poisson-subsampled Gaussian steps at rate ``q`` are
(ε, δ)-DP *as the ledger certifies them*: the predicate it solves is exactly the
budget check that :class:`~privfed.dp.PrivacyLedger` applies when a
:class:`~privfed.dp.SubsampledGaussianRelease` is recorded -- the release's own
dp-accounting PLD (:meth:`SubsampledGaussianRelease.pld
<privfed.dp.SubsampledGaussianRelease.pld>`, pessimistic connect-the-dots
discretisation at the ledger's interval, self-composed ``steps`` times) and the
test ``δ(ε) <= δ``.  A release recorded with the returned multiplier therefore
fits a ledger whose budget is the target; the function checks exactly that
before it returns.

How it solves
-------------

PLDs are costly at the ledger's interval (1e-4): one evaluation takes from a
few milliseconds (large σ, few steps) to seconds (σ below 1, hundreds of
steps).  So the search runs on coarser grids first and refines:

1. A guess that needs no PLD: the multiplier of the same number of steps
   *without* subsampling (``steps`` Gaussian steps compose to μ-GDP with
   ``μ = Δ √steps / (σ/C)``, ``Δ = 1`` for add/remove and ``2`` for
   replace-one in units of ``C``), which subsampling can only improve on.
2. At each interval (1e-2, 1e-3, then the ledger's), a bracket
   ``lo < hi`` around the previous level's answer with ``lo`` refused and
   ``hi`` certified at that interval (expanding by factors of up to 2), then
   bisection in log space until ``hi / lo <= 1 + rtol`` (1e-2, 1e-3, then
   :data:`RELATIVE_TOLERANCE`).  The upper end is kept: it is certified.
3. The final ``hi`` is recorded in a fresh ledger with the target as budget;
   should the ledger refuse it (it cannot, as the predicate is the ledger's,
   but the check costs one cached PLD), the multiplier is raised by factors of
   ``1 + rtol`` until it is accepted.

So the result is certified by construction and within a factor
``1 + RELATIVE_TOLERANCE`` of the smallest multiplier the ledger certifies
(the certified set is an interval above that multiplier as long as the
pessimistic PLD's δ(ε) decreases with σ, which it does up to discretisation
effects far below this tolerance).

Limits
------

* Targets whose multiplier would lie below :data:`MIN_NOISE_MULTIPLIER` are
  refused (:class:`~privfed.errors.CalibrationError`): their privacy losses
  are so spread out that one PLD costs minutes and gigabytes at the ledger's
  interval, and the guarantee (ε in the tens or more, or a record sampled
  with probability below δ) calls for no calibration.
* Targets that no multiplier up to :data:`MAX_NOISE_MULTIPLIER` reaches are
  refused too.  No finite multiplier reaches a δ below the tail mass that
  dp-accounting truncates when it self-composes a PLD (1e-15): the ledger
  cannot certify such a δ whatever the noise.  An ε so small that it needs
  more noise than the cap (the multiplier grows like 1/ε for small ε; one
  full-batch step at ε = 1e-7, δ = 1e-5 already needs about 4e4) is refused
  as well.

The rate is the one the release will record.  A sampler that realises a rate
slightly above the requested one (the DP-SGD sampler rounds ``q`` up to a
multiple of ``2**-64``) must be calibrated at the realised rate: the loss
grows with the rate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from privfed._checks import (
    check_count,
    check_delta,
    check_finite_positive,
    check_float,
)
from privfed.dp.calibration import calibrate_analytic_gaussian
from privfed.dp.calibrator import Bisection, Bracket, bracket_and_bisect, raise_until
from privfed.dp.events import Partition, check_adjacency
from privfed.dp.ledger import _PLD_INTERVAL, PrivacyLedger
from privfed.dp.releases import SubsampledGaussianRelease
from privfed.dp.sensitivity import Adjacency
from privfed.errors import BudgetExceededError, CalibrationError

__all__ = [
    "MAX_NOISE_MULTIPLIER",
    "MIN_NOISE_MULTIPLIER",
    "MIN_SAMPLING_RATE",
    "RELATIVE_TOLERANCE",
    "DPSGDCalibration",
    "calibrate_dpsgd",
    "calibrate_noise_multiplier",
]

#: Smallest Poisson inclusion probability accepted: ``2**-64``, the smallest rate a
#: sampler comparing uniform 64-bit words with a threshold can realise (the
#: DP-SGD sampler of the factory engine).
MIN_SAMPLING_RATE: Final = 2.0**-64

#: Targets whose smallest multiplier lies below this are refused (see the module notes).
MIN_NOISE_MULTIPLIER: Final = 0.2

#: Targets not reached at this multiplier are refused as unreachable.
MAX_NOISE_MULTIPLIER: Final = 1e6

#: The returned multiplier is within a factor ``1 + RELATIVE_TOLERANCE`` of the smallest
#: multiplier the ledger certifies (and never below it).
RELATIVE_TOLERANCE: Final = 1e-4

_RATE_DOMAIN: Final = (
    "a float in [2**-64, 1] (2**-64 ≈ 5.42e-20 is the smallest rate a 64-bit "
    "Poisson sampler realises)"
)
#: Coarser PLD intervals searched before the ledger's, each with its own tolerance.
_COARSE_LEVELS: Final = ((1e-2, 1e-2), (1e-3, 1e-3))
#: Relative width of the first bracket around the PLD-free guess (before any expansion).
_FIRST_SPREAD: Final = 0.25
_MAX_NUDGES: Final = 64
#: The name of the release recorded by the final ledger check.
_CHECK_NAME: Final = "calibrate_noise_multiplier check"


def _release(
    multiplier: float, rate: float, steps: int, adjacency: Adjacency
) -> SubsampledGaussianRelease:
    return SubsampledGaussianRelease(
        name=_CHECK_NAME,
        partition=None,
        noise_multiplier=multiplier,
        sampling_rate=rate,
        steps=steps,
        adjacency=adjacency,
        sampler="calibration",
        seeded=False,
    )


def _certifier(
    epsilon: float, delta: float, rate: float, steps: int, adjacency: Adjacency, interval: float
) -> Callable[[float], bool]:
    """``multiplier -> δ(ε) <= δ`` on the release's PLD at ``interval`` (the ledger's test)."""

    def certified(multiplier: float) -> bool:
        pld = _release(multiplier, rate, steps, adjacency).pld(interval)
        return bool(float(pld.get_delta_for_epsilon(epsilon)) <= delta)

    return certified


def _full_batch_guess(epsilon: float, delta: float, steps: int, adjacency: Adjacency) -> float:
    """The multiplier of ``steps`` Gaussian steps without subsampling (an exact upper bound)."""
    spread = 2.0 if adjacency is Adjacency.REPLACE_ONE else 1.0
    return calibrate_analytic_gaussian(
        epsilon, delta, l2_sensitivity=spread * math.sqrt(float(steps))
    )


def _ledger_accepts(
    multiplier: float, epsilon: float, delta: float, rate: float, steps: int, adjacency: Adjacency
) -> bool:
    ledger = PrivacyLedger(budget_epsilon=epsilon, budget_delta=delta)
    try:
        ledger.record(_release(multiplier, rate, steps, adjacency))
    except BudgetExceededError:
        return False
    return True


@functools.lru_cache(maxsize=128)
def _calibrate(
    epsilon: float, delta: float, rate: float, steps: int, adjacency: Adjacency
) -> float:
    levels = [level for level in _COARSE_LEVELS if level[0] > _PLD_INTERVAL]
    levels.append((_PLD_INTERVAL, RELATIVE_TOLERANCE))
    guess = _full_batch_guess(epsilon, delta, steps, adjacency)
    spread = _FIRST_SPREAD
    target = f"(epsilon={epsilon:.6g}, delta={delta:.3g})"
    setting = f"{steps} step(s) at sampling_rate={rate:.6g} under {adjacency.value!r}"
    sampled = -math.expm1(steps * math.log1p(-rate)) if rate < 1.0 else 1.0
    hint = (
        f"; the record enters any step with probability {sampled:.3g} <= delta, so the "
        "target holds with no noise at all"
        if sampled <= delta
        else ""
    )
    below = (
        f"the target {target} for {setting} is met with noise multipliers below "
        f"{MIN_NOISE_MULTIPLIER}, which calibrate_noise_multiplier does not return (their "
        f"privacy-loss distributions are too costly to account){hint}"
    )
    above = (
        f"no noise multiplier up to {MAX_NOISE_MULTIPLIER:.0e} makes {setting} "
        f"{target}-DP under the ledger's PLD accounting (interval {_PLD_INTERVAL}, "
        "pessimistic): no finite multiplier reaches a delta below the tail mass "
        "dp-accounting truncates when composing (about 1e-15), and an epsilon this "
        f"small may need more than {MAX_NOISE_MULTIPLIER:.0e}"
    )
    if guess <= MIN_NOISE_MULTIPLIER:
        # The full batch is never less private than a Poisson subsample of it (each
        # subsample of neighbours is a pair of neighbours or equal), so the target is
        # already met at the floor: refuse at once rather than account a PLD at the
        # floor, which can take minutes for such spread-out losses.
        raise CalibrationError(below)
    for interval, rtol in levels:
        certified = _certifier(epsilon, delta, rate, steps, adjacency, interval)
        bracket = Bracket(
            guess, MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER, spread, below=below, above=above
        )
        guess = bracket_and_bisect(certified, bracket, Bisection(rtol))
        # The next, finer level starts from a bracket as wide as this tolerance
        # (a coarser pessimistic grid overstates the loss a little, so this level's
        # answer is usually certified at the next and the bracket expands downwards).
        spread = rtol
    return raise_until(  # the search used the ledger's own test: not expected to nudge
        guess,
        lambda multiplier: _ledger_accepts(multiplier, epsilon, delta, rate, steps, adjacency),
        lambda multiplier: multiplier * (1.0 + RELATIVE_TOLERANCE),
        max_steps=_MAX_NUDGES,
        failure=lambda multiplier: (
            f"the ledger refuses the calibrated noise multiplier {multiplier:.6g} for "
            f"{setting} at {target}"
        ),
    )


@dataclass(frozen=True)
class DPSGDCalibration:
    """A DP-SGD plan: the noise multiplier calibrated to a target, and that target.

    Made by :func:`calibrate_dpsgd`; like the latent-moment plan it yields the
    ledger events its release spends (:meth:`events`) and a ledger budgeted
    at the target it was made for (:meth:`ledger`), so ε travels one lane.

    Attributes:
        target_epsilon: The target ε.
        delta: The target δ.
        sampling_rate: The Poisson rate the release records.
        steps: The number of steps.
        adjacency: The neighbouring relation.
        noise_multiplier: σ/C, the result of :func:`calibrate_noise_multiplier`.
    """

    target_epsilon: float
    delta: float
    sampling_rate: float
    steps: int
    adjacency: Adjacency
    noise_multiplier: float

    def events(
        self, *, name: str, partition: Partition, sampler: str, seeded: bool
    ) -> tuple[SubsampledGaussianRelease]:
        """The one event a run with these parameters spends.

        It is the release the calibration certified, under the run's own name,
        partition and sampler.
        """
        certified = _release(self.noise_multiplier, self.sampling_rate, self.steps, self.adjacency)
        return (replace(certified, name=name, partition=partition, sampler=sampler, seeded=seeded),)

    def ledger(self) -> PrivacyLedger:
        """A fresh ledger whose budget is the target this plan was made for."""
        return PrivacyLedger(budget_epsilon=self.target_epsilon, budget_delta=self.delta)


def calibrate_dpsgd(
    target_epsilon: float,
    delta: float,
    *,
    sampling_rate: float,
    steps: int,
    adjacency: Adjacency = Adjacency.REPLACE_ONE,
) -> DPSGDCalibration:
    """:func:`calibrate_noise_multiplier` as a plan: the multiplier with its target.

    Arguments, checks and errors as :func:`calibrate_noise_multiplier`.
    """
    epsilon = check_finite_positive("target_epsilon", target_epsilon)
    dlt = check_delta(delta)
    rate = check_float(
        "sampling_rate",
        sampling_rate,
        low=MIN_SAMPLING_RATE,
        high=1.0,
        expected="a real number (not bool)",
        nan="a number (not NaN)",
        domain=_RATE_DOMAIN,
    )
    count = check_count("steps", steps, minimum=1)
    relation = check_adjacency(adjacency)
    multiplier = _calibrate(epsilon, dlt, rate, count, relation)
    return DPSGDCalibration(epsilon, dlt, rate, count, relation, multiplier)


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    *,
    sampling_rate: float,
    steps: int,
    adjacency: Adjacency = Adjacency.REPLACE_ONE,
) -> float:
    """Return the smallest noise multiplier σ/C making DP-SGD (ε, δ)-DP per the ledger.

    The mechanism is ``steps`` steps, each adding ``N(0, σ² I)`` to the sum of
    per-example gradients clipped to L2 norm ``C`` over a Poisson sample (each
    record included independently with probability ``sampling_rate``), as
    accounted by :class:`~privfed.dp.SubsampledGaussianRelease` in a
    :class:`~privfed.dp.PrivacyLedger`.

    Args:
        target_epsilon: Target ε; finite, > 0.
        delta: Target δ; in (0, 1).
        sampling_rate: Poisson inclusion probability ``q`` per step, the rate
            the release will record; in ``[2**-64, 1]``
            (:data:`MIN_SAMPLING_RATE`).
        steps: Number of steps; int >= 1.
        adjacency: The neighbouring relation (default replace-one, under which
            a replaced record moves the gradient sum by up to ``2C``).

    Returns:
        σ/C (unitless; the noise std of each step is this times ``C``).  A
        :class:`~privfed.dp.SubsampledGaussianRelease` with this multiplier
        and the same rate, steps and adjacency is accepted by a
        ``PrivacyLedger(budget_epsilon=target_epsilon, budget_delta=delta)``
        (checked before returning), and the multiplier exceeds the smallest
        one the ledger accepts by a factor of at most ``1 +``
        :data:`RELATIVE_TOLERANCE`.  Results are cached.

    Raises:
        ParameterTypeError: A bool or non-number was passed, or ``adjacency``
            is not an :class:`~privfed.dp.Adjacency`.
        ParameterError: A value outside its domain (the message names it).
        CalibrationError: No multiplier up to :data:`MAX_NOISE_MULTIPLIER`
            reaches the target under the ledger's accounting (no finite one
            reaches a δ below about 1e-15, the tail mass dp-accounting
            truncates; a tiny ε may need more than the cap), or the target is
            met with multipliers below :data:`MIN_NOISE_MULTIPLIER` (no noise
            worth calibrating).
    """
    return calibrate_dpsgd(
        target_epsilon, delta, sampling_rate=sampling_rate, steps=steps, adjacency=adjacency
    ).noise_multiplier
