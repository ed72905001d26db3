"""One-run audits whose guess rule is chosen from the data, validly (pure: numpy + scipy).

:func:`privfed.audit.one_run_audit` takes the number of guesses r and the
share of "in" guesses as given.  Choosing them after looking at the scores
and the inclusion bits of the same canaries inflates the bound, so
:func:`one_run_audit_selected` offers the two valid ways:

* ``"held-out"``: a random half of the canaries (drawn from ``split.seed``,
  independently of the inclusion bits) chooses the rule; the bound is
  computed on the other half with the full α.  This is valid because the
  calibration canaries' bits may be treated as known (fixed) data: the
  evaluation canaries are still included independently with probability ½,
  and the guesses are a function of the run's output and of known data.
* ``"bonferroni"``: every rule of a declared grid is evaluated on all
  canaries at α/k (union bound over the k rules) and the best is reported.

Both return a :class:`~privfed.audit.bounds.OneRunAudit` that states the rule
(``selection``, ``num_configurations``, ``calibration_canaries``).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import check_instance, check_probability
from privfed.audit.bounds import (
    HALF_SPLIT,
    BoundSpec,
    HeldOutSplit,
    OneRunAudit,
    _check_canaries,
    _correct_guesses,
    one_run_epsilon_lower_bound,
)
from privfed.errors import ParameterError

__all__ = [
    "DEFAULT_GUESS_FRACTIONS",
    "DEFAULT_IN_FRACTIONS",
    "OneRunSelection",
    "one_run_audit_selected",
]

#: How :func:`one_run_audit_selected` chooses the guess rule.
OneRunSelection = Literal["held-out", "bonferroni"]

#: Declared numbers of guesses, as shares r/m of the canaries.
DEFAULT_GUESS_FRACTIONS: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: Declared shares of "in" guesses among the r guesses.
DEFAULT_IN_FRACTIONS: tuple[float, ...] = (0.5, 1.0)


def _rules(
    guess_fractions: tuple[float, ...], in_fractions: tuple[float, ...]
) -> list[tuple[float, float]]:
    if not guess_fractions or not in_fractions:
        raise ParameterError("guess_fractions/in_fractions", "non-empty tuples", "empty")
    for g in guess_fractions:
        check_probability("guess_fractions", g, open_low=True, open_high=False)
    for f in in_fractions:
        check_probability("in_fractions", f, open_low=False, open_high=False)
    return [(g, f) for g in guess_fractions for f in in_fractions]


def _evaluate(
    scores: NDArray[np.float64],
    included: NDArray[np.bool_],
    rule: tuple[float, float],
    delta: float,
    alpha: float,
) -> tuple[float, float, int, int, int]:
    """(ε_lb, z of the correct count, r, r_in, v) of one rule on these canaries."""
    m = scores.size
    r = max(1, min(m, round(rule[0] * m)))
    r_in = math.floor(rule[1] * r)
    v = _correct_guesses(scores, included, r, r_in)
    eps = one_run_epsilon_lower_bound(m, r, v, delta=delta, significance=alpha)
    return eps, (v - r / 2) / math.sqrt(r / 4), r, r_in, v


def one_run_audit_selected(
    canary_scores: ArrayLike,
    canary_included: ArrayLike,
    *,
    spec: BoundSpec,
    selection: OneRunSelection = "held-out",
    guess_fractions: tuple[float, ...] = DEFAULT_GUESS_FRACTIONS,
    in_fractions: tuple[float, ...] = DEFAULT_IN_FRACTIONS,
    split: HeldOutSplit = HALF_SPLIT,
) -> OneRunAudit:
    """One-run ε lower bound with the guess rule (r and the in/out split) chosen validly.

    A rule is a pair (g, f): guess on r = round(g·m) canaries, "in" for the
    ⌊f·r⌋ highest scores and "out" for the rest of the r, taken from the lowest.

    Args:
        canary_scores: Scores of the m canaries, shape (m,), higher ⇒ "in".
        canary_included: The inclusion bits, bool (m,); each canary must have been
            included independently with probability ½.
        spec: δ and α, the whole α of the reported bound
            (:class:`~privfed.audit.bounds.BoundSpec`).
        selection: ``"held-out"`` (choose on a random ``split.calibration_fraction`` of the
            canaries, bound on the rest) or ``"bonferroni"`` (best of the k rules on
            all canaries, each at α/k).
        guess_fractions: The declared g values, each in (0, 1].
        in_fractions: The declared f values, each in [0, 1].
        split: The held-out share of canaries choosing the rule and the seed of
            that split, drawn independently of the bits
            (:class:`~privfed.audit.bounds.HeldOutSplit`; ``"held-out"`` only).

    Returns:
        A :class:`~privfed.audit.bounds.OneRunAudit` stating the rule chosen.

    Raises:
        ParameterError: Bad arguments, or too few canaries for a held-out split.
    """
    scores, included = _check_canaries(canary_scores, canary_included)
    level = check_instance("spec", spec, BoundSpec)
    d, alpha = level.delta, level.significance
    rules = _rules(tuple(guess_fractions), tuple(in_fractions))
    if selection == "bonferroni":
        per_rule = alpha / len(rules)
        results = [_evaluate(scores, included, rule, d, per_rule) for rule in rules]
        evaluated = max(results, key=lambda item: (item[0], item[1]))
        m, k, c = scores.size, len(rules), 0
    elif selection == "held-out":
        share = check_instance("split", split, HeldOutSplit).calibration_fraction
        order = np.random.default_rng(split.seed).permutation(scores.size)
        c = int(scores.size * share)
        if c < 1 or scores.size - c < 1:
            raise ParameterError("canary_scores", "at least 2 canaries for a held-out split", c)
        cal, ev = order[:c], order[c:]
        ranked = [
            (_evaluate(scores[cal], included[cal], rule, d, alpha)[:2], rule) for rule in rules
        ]
        best_rule = max(ranked, key=lambda item: item[0])[1]
        evaluated = _evaluate(scores[ev], included[ev], best_rule, d, alpha)
        m, k = int(ev.size), 1
    else:
        raise ParameterError("selection", "'held-out' or 'bonferroni'", selection)
    eps, _, r, r_in, v = evaluated
    return OneRunAudit(
        epsilon_lower_bound=eps,
        num_canaries=m,
        num_guesses=r,
        num_correct=v,
        delta=d,
        significance=alpha,
        num_guesses_in=r_in,
        selection=selection,
        num_configurations=k,
        calibration_canaries=c,
    )
