"""One calibrator: the smallest parameter of a release that meets a privacy target.

Every noise calibration of :mod:`privfed.dp` solves one problem: a release is
built from one positive parameter ``p`` (a noise std, a Poisson mean, a noise
multiplier, a variance scale), more ``p`` is more private, and the answer is the
smallest ``p`` whose release meets a target (ε, δ) as the accounting that will
certify it tests it.  :func:`calibrate` solves it in the manner of
dp-accounting's ``calibrate_dp_mechanism``: ``make_release(p)`` builds the
release (or whatever the target reads of it: an RDP curve, a μ), ``target``
tests it, a :class:`Bracket` says where to look.  It

1. brackets the threshold: a point ``hi`` that meets the target and a point
   ``lo`` that does not, walking from the guess by factors ``1 + step`` (the
   step doubling up to 1, so the factor up to 2);
2. narrows the bracket (:class:`Bisection`) keeping ``hi`` -- the safe end;
3. certifies ``hi`` (:class:`Nudge`): optionally rounded, tested again
   (optionally by a stricter final test, e.g. a fresh ledger) and raised step
   by step until it passes.

So numerical error only ever adds noise; a predicate that is monotone in ``p``
(every accounting here is) makes the result within the bisection's tolerance of
the threshold.  The iteration rules are parameters, so each calibration keeps
the exact rule (tolerance, end chosen, number of steps) its results were
certified with; :func:`bracket_and_bisect` and :func:`raise_until` are the two
halves, for solvers that narrow on a sequence of coarser targets first
(:mod:`privfed.dp.dpsgd_calibration`) or certify a tuple of parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, Literal, TypeVar

from privfed._checks import check_choice, check_finite_positive, check_float
from privfed.errors import CalibrationError, ParameterError

__all__ = [
    "Bisection",
    "Bracket",
    "Nudge",
    "bracket_and_bisect",
    "calibrate",
    "raise_until",
]

R = TypeVar("R")
T = TypeVar("T")

#: How the lower end is found once the bracket had to grow above the guess:
#: ``"last"`` the last point refused on the way up (the tightest), ``"guess"``
#: the guess itself, ``"top"`` a fresh walk down from the point found.
Restart = Literal["last", "guess", "top"]
#: How a bracket is narrowed: ``"ratio"`` geometric midpoints until
#: ``hi <= lo·(1 + rtol)``; ``"span"`` geometric midpoints until
#: ``hi − lo <= rtol·hi``; ``"log-span"`` midpoints of ``log p`` until
#: ``log hi − log lo <= rtol``, returning ``exp(log hi)``.
Narrowing = Literal["ratio", "span", "log-span"]

_RESTARTS: Final = ("last", "guess", "top")
_NARROWINGS: Final = ("ratio", "span", "log-span")
#: Guard on the number of bisection steps (every rule stops far earlier).
_MAX_BISECTIONS: Final = 4000


@dataclass(frozen=True)
class Bracket:
    """Where the threshold parameter is looked for.

    Attributes:
        guess: The first point tested, clipped to ``[lower, upper]`` (so any
            number but NaN).
        lower: The smallest parameter considered, > 0.
        upper: The largest parameter considered, >= ``lower``.
        step: The first walk moves by a factor ``1 + step``; each further move
            doubles the step, up to 1 (factor 2).  In (0, 1].
        restart: See :data:`Restart` (default ``"last"``).
        below: The :class:`~privfed.errors.CalibrationError` message when even
            ``lower`` meets the target; ``None`` returns ``lower`` instead.
        above: The message when ``upper`` does not meet the target.
    """

    guess: float
    lower: float
    upper: float
    step: float = 1.0
    restart: Restart = "last"
    below: str | None = None
    above: str = "no parameter in the bracket meets the target"

    def __post_init__(self) -> None:
        check_float("guess", self.guess, finite=False, nan="a number (clipped to [lower, upper])")
        low = check_finite_positive("lower", self.lower)
        if not check_finite_positive("upper", self.upper) >= low:
            raise ParameterError("upper", f"a finite float >= lower={low:g}", self.upper)
        check_float("step", self.step, low=0.0, high=1.0, open_low=True)
        check_choice("restart", self.restart, _RESTARTS)


@dataclass(frozen=True)
class Bisection:
    """How a bracket is narrowed: the rule (:data:`Narrowing`) and its tolerance ``rtol`` > 0."""

    rtol: float
    rule: Narrowing = "ratio"

    def __post_init__(self) -> None:
        check_finite_positive("rtol", self.rtol)
        check_choice("rule", self.rule, _NARROWINGS)


def _same(value: float) -> float:
    return value


@dataclass(frozen=True)
class Nudge(Generic[T]):
    """How the narrowed safe end is certified: tested, and raised by ``step`` until it passes.

    Attributes:
        step: The next, more private, parameter.
        max_steps: Tests before giving up, >= 1.
        failure: The :class:`~privfed.errors.CalibrationError` message then,
            or a function of the last parameter tried that returns it.
        start: Applied to the safe end first (e.g. rounding it up).
        accepts: The final test of a parameter; ``None`` reuses the target.
    """

    step: Callable[[T], T]
    max_steps: int
    failure: str | Callable[[T], str]
    start: Callable[[T], T] | None = None
    accepts: Callable[[T], bool] | None = None


def raise_until(
    value: T,
    accepts: Callable[[T], bool],
    step: Callable[[T], T],
    *,
    max_steps: int,
    failure: str | Callable[[T], str],
) -> T:
    """Return the first of ``value, step(value), step(step(value)), ...`` that ``accepts`` passes.

    Raises:
        CalibrationError: None of the first ``max_steps`` passes (``failure``).
    """
    for _ in range(max_steps):
        if accepts(value):
            return value
        value = step(value)
    raise CalibrationError(failure if isinstance(failure, str) else failure(value))


def _walk_down(
    meets: Callable[[float], bool], hi: float, step: float, bracket: Bracket
) -> tuple[float, float] | None:
    """From ``hi`` (meets) down to a refused ``lo``: ``(lo, hi)``, or ``None`` at the floor."""
    while True:
        lo = max(hi / (1.0 + step), bracket.lower)
        if lo >= hi:
            return None
        if not meets(lo):
            return lo, hi
        hi, step = lo, min(2.0 * step, 1.0)


def _walk_up(
    meets: Callable[[float], bool], lo: float, step: float, bracket: Bracket
) -> tuple[float, float]:
    """From ``lo`` (refused) up to an ``hi`` that meets: ``(last refused, hi)``."""
    while True:
        hi = min(lo * (1.0 + step), bracket.upper)
        if hi <= lo:
            raise CalibrationError(bracket.above)
        if meets(hi):
            return lo, hi
        lo, step = hi, min(2.0 * step, 1.0)


def _find(meets: Callable[[float], bool], bracket: Bracket) -> tuple[float, float] | None:
    """``(lo, hi)``: ``hi`` meets the target, ``lo`` does not; ``None`` if ``lower`` meets it."""
    start = min(max(bracket.guess, bracket.lower), bracket.upper)
    if meets(start):
        return _walk_down(meets, start, bracket.step, bracket)
    lo, hi = _walk_up(meets, start, bracket.step, bracket)
    if bracket.restart == "guess":
        return start, hi
    if bracket.restart == "top":
        return _walk_down(meets, hi, bracket.step, bracket)
    return lo, hi


def _narrow(meets: Callable[[float], bool], lo: float, hi: float, how: Bisection) -> float:
    """The safe end of ``[lo, hi]`` narrowed by ``how``."""
    if how.rule == "log-span":
        log_lo, log_hi = math.log(lo), math.log(hi)
        for _ in range(_MAX_BISECTIONS):
            if log_hi - log_lo <= how.rtol:
                break
            log_mid = 0.5 * (log_lo + log_hi)
            if log_mid in (log_lo, log_hi):
                break
            if meets(math.exp(log_mid)):
                log_hi = log_mid
            else:
                log_lo = log_mid
        return math.exp(log_hi)
    span = how.rule == "span"
    for _ in range(_MAX_BISECTIONS):
        if (hi - lo <= how.rtol * hi) if span else (hi <= lo * (1.0 + how.rtol)):
            break
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
            break
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


def bracket_and_bisect(
    meets: Callable[[float], bool], bracket: Bracket, bisection: Bisection
) -> float:
    """The safe end of the narrowed bracket around the threshold of ``meets`` (not certified).

    Args:
        meets: ``p -> whether the release built from p meets the target``,
            monotone (false below a threshold, true above).
        bracket: Where to look.
        bisection: How far to narrow.

    Returns:
        A parameter that ``meets`` (``bracket.lower`` when it meets already and
        ``bracket.below`` is ``None``).

    Raises:
        CalibrationError: ``bracket.upper`` is refused (``bracket.above``), or
            ``bracket.lower`` meets the target and ``bracket.below`` is a message.
    """
    ends = _find(meets, bracket)
    if ends is None:
        if bracket.below is not None:
            raise CalibrationError(bracket.below)
        return bracket.lower
    return _narrow(meets, ends[0], ends[1], bisection)


def calibrate(
    make_release: Callable[[float], R],
    target: Callable[[R], bool],
    bracket: Bracket,
    *,
    bisection: Bisection,
    nudge: Nudge[float],
) -> float:
    """The smallest parameter whose release meets ``target``, on its safe side.

    Args:
        make_release: ``p -> release`` (or the part of it the target reads).
        target: ``release -> whether it meets the privacy target`` (e.g. its
            ε at δ against the target ε, or a ledger's budget test).
        bracket: Where to look (:class:`Bracket`).
        bisection: How far to narrow (:class:`Bisection`).
        nudge: How the result is certified (:class:`Nudge`).

    Returns:
        ``p`` such that ``nudge.accepts(p)`` (or ``target(make_release(p))``)
        holds, within the bisection's tolerance of the threshold and then the
        nudges it took.

    Raises:
        CalibrationError: The target lies outside the bracket, or the result
            could not be certified within ``nudge.max_steps``.
    """

    def meets(parameter: float) -> bool:
        return bool(target(make_release(parameter)))

    found = bracket_and_bisect(meets, bracket, bisection)
    start = nudge.start or _same
    return raise_until(
        start(found),
        nudge.accepts or meets,
        nudge.step,
        max_steps=nudge.max_steps,
        failure=nudge.failure,
    )
