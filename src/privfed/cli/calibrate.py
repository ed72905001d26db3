"""``privfed calibrate``: print the noise plan of a latent-statistic release.

Example::

    privfed calibrate --epsilon 10 --delta 1e-5 --clip-norm 33.94 --dim 128
    privfed calibrate --epsilon 1 --delta 1e-6 --clip-norm 3 --dim 64 \\
        --adjacency add-remove --split balanced --json

The module imports only ``argparse`` at import time; :mod:`privfed.dp` (and
scipy) load when the command runs.
"""

from __future__ import annotations

import argparse
import json

from privfed.cli._options import (
    OPEN_UNIT,
    POSITIVE,
    OptionError,
    add_int,
    add_number,
    fail,
    option_message,
    options_of,
    parse_int,
    parse_number,
)

__all__ = ["DESCRIPTION", "add_options", "run"]

_PROG = "privfed calibrate"
#: Library parameters -> the option that sets them (error messages name options).
_OPTION_OF = options_of(
    "epsilon", "delta", "clip_norm", "dim", "adjacency", "split", "private_labels"
)


def _split(text: str) -> str | float:
    if text in ("balanced", "optimal"):
        return text
    try:
        return parse_number(text, "--split")  # the domain is checked when the command runs
    except OptionError:
        raise argparse.ArgumentTypeError(
            f"expected 'balanced', 'optimal' or a float in (0, 1), got {text!r}"
        ) from None


#: What ``privfed calibrate --help`` says first.
DESCRIPTION = (
    "Plan the Gaussian noise of a per-class (sum, second moment[, count]) release "
    "of L2-clipped latents for a target (epsilon, delta), and compare it with the "
    "reference paper's Proposition 4.1 calibration."
)


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the ``calibrate`` options to its sub-parser."""
    add = parser.add_argument
    # Domains are checked when the command runs (_check), so that every bad value,
    # typed or not, gets the same message.
    add_number(add, "--epsilon", required=True, help="target epsilon, one number (> 0)")
    add_number(add, "--delta", default=1e-5, help="target delta in (0, 1) (default %(default)s)")
    add_number(add, "--clip-norm", required=True, help="L2 clipping radius R of every latent (> 0)")
    add_int(add, "--dim", required=True, help="latent dimension d (>= 1)")
    add(
        "--adjacency",
        choices=("replace-one", "add-remove"),
        default="replace-one",
        help="neighbouring relation (default %(default)s: same-class replacement, public counts)",
    )
    add(
        "--split",
        type=_split,
        default="optimal",
        help="budget split: 'optimal', 'balanced' or a float weight in (0, 1) "
        "(default %(default)s)",
    )
    add(
        "--private-labels",
        action="store_true",
        help="under replace-one, a replaced record may change class (counts get noise)",
    )
    add("--json", action="store_true", help="print machine-readable JSON")


def _check(args: argparse.Namespace) -> None:
    """Refuse values outside their domains, naming the option (before any work)."""
    parse_number(args.epsilon, "--epsilon", POSITIVE)
    parse_number(args.delta, "--delta", OPEN_UNIT)
    parse_number(args.clip_norm, "--clip-norm", POSITIVE)
    parse_int(args.dim, "--dim", minimum=1)
    if not isinstance(args.split, str):
        parse_number(args.split, "--split", OPEN_UNIT)


def run(args: argparse.Namespace) -> int:
    """Execute ``privfed calibrate``; returns 0 on success, 2 on a bad parameter."""
    from privfed.dp import Adjacency
    from privfed.engines.moments.planning import paper_baseline_noise_stds, plan_latent_release
    from privfed.errors import PrivfedError

    try:
        _check(args)
    except OptionError as exc:
        return fail(_PROG, str(exc))
    try:
        plan = plan_latent_release(
            args.epsilon,
            args.delta,
            clip_norm=args.clip_norm,
            dim=args.dim,
            adjacency=Adjacency(args.adjacency),
            split=args.split,
            private_labels=args.private_labels,
        )
        baseline_sum, baseline_second = paper_baseline_noise_stds(
            args.epsilon, args.delta, clip_norm=args.clip_norm
        )
    except (PrivfedError, ValueError, TypeError, ArithmeticError) as exc:
        return fail(_PROG, option_message(exc, _OPTION_OF))

    result = {
        "epsilon": plan.epsilon,
        "delta_requested": args.delta,
        "delta_achieved": plan.delta,
        "mu": plan.mu,
        "adjacency": plan.adjacency.value,
        "private_labels": plan.private_labels,
        "clip_norm": plan.clip_norm,
        "dim": plan.dim,
        "split": plan.split,
        "noise_std_sum": plan.noise_std_sum,
        "noise_std_second_moment": plan.noise_std_second_moment,
        "noise_std_count": plan.noise_std_count,
        "sum_sensitivity": plan.sum_sensitivity,
        "second_moment_sensitivity": plan.second_moment_sensitivity,
        "count_sensitivity": plan.count_sensitivity,
        "paper_baseline": {
            "noise_std_sum": baseline_sum,
            "noise_std_second_moment": baseline_second,
            "adjacency": "replace-one",
        },
        "ratio_to_paper": {
            "noise_std_sum": plan.noise_std_sum / baseline_sum,
            "noise_std_second_moment": plan.noise_std_second_moment / baseline_second,
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0

    count = "public" if plan.noise_std_count == 0 else f"{plan.noise_std_count:.6g}"
    lines = [
        f"Latent-statistic release plan: ({plan.epsilon:g}, {args.delta:g})-DP target, "
        f"{plan.adjacency.value}" + (", private labels" if plan.private_labels else ""),
        f"  achieved: mu = {plan.mu:.6g} (GDP), delta = {plan.delta:.6g} at epsilon = "
        f"{plan.epsilon:g}",
        f"  clip norm R = {plan.clip_norm:g}, dim d = {plan.dim}, split = {plan.split}",
        "",
        f"  {'':24}{'noise std':>14}{'sensitivity':>14}{'paper':>14}{'ratio':>10}",
        f"  {'sum of z':24}{plan.noise_std_sum:>14.6g}{plan.sum_sensitivity:>14.6g}"
        f"{baseline_sum:>14.6g}{plan.noise_std_sum / baseline_sum:>10.3f}",
        f"  {'second moment (d x d)':24}{plan.noise_std_second_moment:>14.6g}"
        f"{plan.second_moment_sensitivity:>14.6g}{baseline_second:>14.6g}"
        f"{plan.noise_std_second_moment / baseline_second:>10.3f}",
        f"  {'count':24}{count:>14}{plan.count_sensitivity:>14.6g}",
        "",
        "  paper = Proposition 4.1 of the reference paper (epsilon/2, delta/2 each; "
        "sensitivities 2R and 2R^2; replace-one).",
        "  Second-moment noise is isotropic on the d x d matrix; symmetrising it afterwards "
        "is post-processing.",
    ]
    print("\n".join(lines))
    return 0
