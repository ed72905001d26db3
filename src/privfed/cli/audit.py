"""``privfed audit``: membership-inference audits from the command line.

Inputs (any combination, at least one):

``--scores FILE``
    Attack scores of members and non-members (higher = "member"), one attack or
    several per file.  ``.npz`` with arrays ``member_scores`` and
    ``nonmember_scores`` (or ``member`` and ``nonmember``; the attack is named
    ``scores``), or ``<attack>/member_scores`` and ``<attack>/nonmember_scores``
    for each of several attacks; or ``.csv`` with a header containing the
    columns ``score`` and ``member`` (1/0 or true/false) and optionally
    ``attack``.  Metrics use all scores; the ε/μ lower bound uses the
    ``--threshold-selection`` rule (default: a seeded held-out split,
    ``--calibration-fraction`` of each group choosing the threshold), repeated
    over ``--splits`` K seeds (median and spread reported; the bound quoted is
    the one of ``--seed``).  ``--score-trials`` says what the scores are:
    ``one-model`` (default; records scored against one trained model, which
    are NOT independent trials, so the bound's confidence is not guaranteed
    and a caveat is printed) or ``independent`` (each score from its own run).
    An AUC interval wholly below 0.5 (a flipped score) prints a warning.

``--one-run FILE``
    One-run audit (Steinke, Nasr & Jagielski 2023), valid for one trained
    model: ``.npz`` with ``canary_scores`` (m,) and ``canary_included`` (m,
    bools or 0/1 ints; each canary included independently with probability
    ½), or ``<name>/canary_scores`` and ``<name>/canary_included`` for several
    runs.  The guess rule (how many guesses, how many of them "in") is chosen
    by ``--one-run-selection``: ``held-out`` (default: on a seeded random half
    of the canaries, the bound on the other half) or ``bonferroni`` (best of
    the declared grid, each rule at α/k).

``--run-dir DIR``
    The output directory of ``privfed run``; reads ``DIR/audit_inputs.npz``
    with arrays ``member_latents`` (n1, d), ``nonmember_latents`` (n0, d),
    ``synthetic_latents`` (s, d) and optionally ``member_labels``,
    ``nonmember_labels``, ``synthetic_labels`` (int, one per row),
    ``reference_latents`` and ``reference_labels``; and, to add the noisy-sum
    likelihood-ratio attack, ``noisy_sums`` (C, d), ``counts`` (C,) and the
    scalar ``noise_std_sum`` (member latents must then be the clipped ones).
    Runs :func:`privfed.audit.audit_synthetic_release`.

``--self-audit``
    Canary audit of the latent-statistic release planned by
    ``privfed.engines.moments.planning.plan_latent_release`` at ``--epsilon`` (one or a comma list),
    ``--delta``, ``--clip-norm``, ``--dim``, ``--adjacency``.  By default
    (``--self-audit-mode real``) every trial runs privfed's real release code,
    ``release_latent_statistics`` with its own noise sampler, on worst-case
    neighbouring statistics
    (:func:`privfed.engines.latent.self_audit.self_audit_release`).
    ``--self-audit-mode simulated`` instead simulates the release from the
    plan's claimed noise stds
    (:func:`privfed.engines.latent.self_audit.simulated_self_audit`): it checks the
    accounting arithmetic only, not the release code.  The report says which.

``--config FILE.json`` supplies any option by its long name with underscores
(``{"scores": "s.npz", "delta": 1e-6}``); flags given on the command line win.

Outputs in ``--out`` (default ``./audit``): ``audit.json`` (every metric with
its interval, bounds, per-record scores unless ``--no-scores``), ``audit.md``
and ``roc.png`` (log–log ROC; skipped with ``--no-plot``).

Exit status: 0 on success, 2 on invalid input, 3 when a self-audit refutes the
claimed guarantee (its empirical lower bound exceeds the claim).
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

from privfed.cli._audit_files import load_canaries, load_scores
from privfed.cli._options import (
    FINITE,
    OPEN_UNIT,
    POSITIVE,
    Interval,
    OptionError,
    fail,
    option_message,
    options_of,
    parse_int,
    parse_number,
    parse_number_list,
)
from privfed.engines.job import AUDIT_INPUTS_FILENAME

__all__ = ["AUDIT_INPUTS_FILENAME", "DESCRIPTION", "HELP_FORMATTER", "add_options", "run"]


_DEFAULTS: dict[str, Any] = {
    "scores": None,
    "one_run": None,
    "run_dir": None,
    "self_audit": False,
    "out": "audit",
    "delta": 1e-5,
    "significance": 0.05,
    "confidence": 0.95,
    "fprs": "1e-1,1e-2,1e-3,1e-4,1e-5",
    "seed": 0,
    "threshold_selection": "held-out",
    "threshold": None,
    "thresholds": None,
    "calibration_fraction": 0.5,
    "splits": 1,
    "score_trials": "one-model",
    "one_run_selection": "held-out",
    "epsilon": "1,4,10",
    "clip_norm": 1.0,
    "dim": 16,
    "adjacency": "replace-one",
    "self_audit_mode": "real",
    "trials": None,  # per mode: the library's default AuditTrials of that mode
    "calibration_trials": None,
    "noise_scale": 1.0,
    "no_plot": False,
    "no_scores": False,
}


#: The self-audit modes.  Their default trials are the library's: RELEASE_CODE_TRIALS
#: ("real": the release code costs about 50 µs a trial at d = 16) and SIMULATION_TRIALS.
_SELF_AUDIT_MODES = ("real", "simulated")


class _UsageError(Exception):
    """Bad command-line input (reported on stderr, exit status 2)."""


class _TableDefaultsFormatter(argparse.HelpFormatter):
    """Help that states each option's default as :data:`_DEFAULTS` holds it.

    The parser's own defaults are ``None`` (so that ``--config`` values are not
    overridden by flags nobody typed); the defaults actually used live in
    :data:`_DEFAULTS`, and ``--help`` reads them from there, so the two cannot
    disagree.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        value = _DEFAULTS.get(action.dest)
        if value is None or isinstance(value, bool) or "(default" in text:
            return text
        return f"{text} (default: {str(value).replace('%', '%%')})"


#: The help formatter of ``privfed audit``.
HELP_FORMATTER = _TableDefaultsFormatter

#: Comma-list options -> the domain of each item.
_LIST_DOMAINS: dict[str, Interval] = {
    "fprs": OPEN_UNIT,
    "thresholds": FINITE,
    "epsilon": POSITIVE,
}
#: Library parameters -> the option that sets them (error messages name options).
_OPTION_OF = options_of(
    *("delta", "significance", "confidence", "seed", "threshold", "thresholds", "epsilon"),
    *("clip_norm", "dim", "adjacency", "noise_scale", "run_dir"),
    member_scores="--scores",
    nonmember_scores="--scores",
    num_trials="--trials",
    num_calibration_trials="--calibration-trials",
)


#: What ``privfed audit --help`` says first: this module's first paragraph.
DESCRIPTION = (__doc__ or "").split("\n\n", 1)[0].replace("``", "")


def add_options(p: argparse.ArgumentParser) -> None:
    """Add the ``audit`` options to its sub-parser."""
    add = p.add_argument
    add("--config", help="JSON file with options (long names, underscores)")
    add("--scores", help=".npz or .csv file with member / non-member scores (one or more attacks)")
    add("--one-run", help=".npz file with canary_scores and canary_included (one-run audit)")
    add(
        "--one-run-selection",
        choices=("held-out", "bonferroni"),
        help="how the one-run guess rule is chosen",
    )
    add(
        "--score-trials",
        choices=("one-model", "independent"),
        help="what --scores holds: records scored against one model (not independent trials; "
        "printed with a caveat) or independent runs",
    )
    add("--splits", type=int, help="held-out bound: repeat over K split seeds (median, spread)")
    add("--run-dir", help=f"privfed run output directory (reads {AUDIT_INPUTS_FILENAME})")
    add("--self-audit", action="store_true", default=None, help="canary audit of privfed's release")
    add("--out", help="output directory")
    add("--delta", type=float, help="δ of the ε lower bounds, in (0, 1)")
    add("--significance", type=float, help="α of every lower bound, in (0, 1)")
    add("--confidence", type=float, help="coverage of metric intervals, in (0, 1)")
    add("--fprs", help="comma list of FPRs for TPR reporting, each in (0, 1)")
    add("--seed", type=int, help="seed of splits, simulations and self-audit noise (>= 0)")
    add(
        "--threshold-selection",
        choices=("held-out", "fixed", "bonferroni"),
        help="threshold rule of the score-file bound",
    )
    add("--threshold", type=float, help="the threshold, for --threshold-selection fixed")
    add("--thresholds", help="comma list of thresholds, for bonferroni")
    add("--calibration-fraction", type=float, help="held-out calibration share, in (0, 1)")
    add("--epsilon", help="self-audit: ε (comma list, each > 0)")
    add("--clip-norm", type=float, help="self-audit: clip norm R")
    add("--dim", type=int, help="self-audit: latent dimension d")
    add("--adjacency", choices=("replace-one", "add-remove"), help="self-audit adjacency")
    add(
        "--self-audit-mode",
        choices=_SELF_AUDIT_MODES,
        help="self-audit: run the real release code, or simulate it from the claimed noise "
        "(checks the accounting arithmetic only, not the release code)",
    )
    add(
        "--trials",
        type=int,
        help="self-audit: evaluation trials per hypothesis (default: 50000 real, 200000 simulated)",
    )
    add(
        "--calibration-trials",
        type=int,
        help="self-audit: calibration trials (default: 12500 real, 50000 simulated)",
    )
    add("--noise-scale", type=float, help="self-audit: actual/claimed noise (tests the auditor)")
    add("--no-plot", action="store_true", default=None, help="do not write roc.png")
    add("--no-scores", action="store_true", default=None, help="omit per-record scores")


def _merge(args: argparse.Namespace) -> dict[str, Any]:
    options = dict(_DEFAULTS)
    if args.config:
        try:
            loaded = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:  # unreadable, not JSON, too deep
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise _UsageError(f"cannot read --config {args.config}: {why}") from None
        if not isinstance(loaded, dict):
            raise _UsageError("--config must hold a JSON object")
        unknown = sorted(set(loaded) - set(_DEFAULTS))
        if unknown:
            raise _UsageError(f"unknown keys in --config: {', '.join(unknown)}")
        options.update(loaded)
    for key in _DEFAULTS:
        value = getattr(args, key, None)
        if value is not None:
            options[key] = value
    return options


def _floats(text: Any, name: str) -> list[float]:
    """A comma-list option (or its JSON list) as floats; empty items, NaN and inf refused."""
    option = f"--{name.replace('_', '-')}"
    return list(parse_number_list(text, option, _LIST_DOMAINS.get(name, FINITE)))


def _check_options(options: dict[str, Any]) -> None:
    """Refuse a bad value of any option (flag or ``--config`` key) before any work.

    Raises:
        OptionError: The message names the option.
    """
    for key in ("config", "scores", "one_run", "run_dir", "out"):
        value = options.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise OptionError(f"--{key.replace('_', '-')} must be a path; got {value!r}")
    if not options.get("out"):
        raise OptionError("--out must be a path; got nothing")
    out = Path(options["out"])
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} exists and is not a directory")
    from privfed._atomic import unwritable_reason

    reason = unwritable_reason(out)
    if reason is not None:
        raise OptionError(f"--out {out} is not a writable location ({reason})")
    for key in ("self_audit", "no_plot", "no_scores"):
        flag = options.get(key, False)
        if not isinstance(flag, bool):
            raise OptionError(f"--{key.replace('_', '-')} must be true or false; got {flag!r}")
    for key in ("delta", "significance", "confidence", "calibration_fraction"):
        if key in options:
            parse_number(options[key], f"--{key.replace('_', '-')}", OPEN_UNIT)
    for key in ("clip_norm", "noise_scale"):
        if key in options:
            parse_number(options[key], f"--{key.replace('_', '-')}", POSITIVE)
    if options.get("threshold") is not None:
        parse_number(options["threshold"], "--threshold")
    for key in ("fprs", "epsilon", "thresholds"):
        if options.get(key) is not None:
            _floats(options[key], key)
    if "seed" in options:
        parse_int(options["seed"], "--seed", minimum=0)
    for key in ("dim", "trials", "calibration_trials", "splits"):
        if options.get(key) is not None:
            parse_int(options[key], f"--{key.replace('_', '-')}", minimum=1)
    choices = {
        "threshold_selection": ("held-out", "fixed", "bonferroni"),
        "adjacency": ("replace-one", "add-remove"),
        "self_audit_mode": _SELF_AUDIT_MODES,
        "score_trials": ("one-model", "independent"),
        "one_run_selection": ("held-out", "bonferroni"),
    }
    for key, allowed in choices.items():
        if key in options and options[key] not in allowed:
            raise OptionError(
                f"--{key.replace('_', '-')} must be one of {', '.join(allowed)}; "
                f"got {options[key]!r}"
            )


def _score_bound(members: Any, nonmembers: Any, options: dict[str, Any]) -> Any:
    from dataclasses import replace

    from privfed import audit

    rule = options["threshold_selection"]
    spec = audit.BoundSpec(float(options["delta"]), float(options["significance"]))
    trials = {"one-model": audit.TrialModel.ONE_MODEL, "independent": audit.TrialModel.INDEPENDENT}[
        options["score_trials"]
    ]
    if rule == "fixed":
        if options["threshold"] is None:
            raise _UsageError("--threshold-selection fixed needs --threshold")
        bound = audit.lower_bound_at_threshold(
            members, nonmembers, float(options["threshold"]), spec=spec
        )
        return replace(bound, trials=trials)
    if rule == "bonferroni":
        if options["thresholds"] is None:
            raise _UsageError("--threshold-selection bonferroni needs --thresholds")
        grid = _floats(options["thresholds"], "thresholds")
        bound = audit.lower_bound_bonferroni(members, nonmembers, grid, spec=spec)
        return replace(bound, trials=trials)
    if rule != "held-out":
        raise _UsageError(f"unknown threshold selection {rule!r}")
    fraction = float(options["calibration_fraction"])
    if not 0.0 < fraction < 1.0:
        raise _UsageError("--calibration-fraction must be in (0, 1)")
    cm, cn = int(members.size * fraction), int(nonmembers.size * fraction)
    if min(cm, cn, members.size - cm, nonmembers.size - cn) < 1:
        raise _UsageError("too few scores for a held-out split")
    return audit.repeated_split_bounds(
        members,
        nonmembers,
        num_splits=int(options["splits"]),
        spec=spec,
        split=audit.HeldOutSplit(fraction, int(options["seed"])),
        trials=trials,
    )


def _score_inputs(
    options: dict[str, Any], fprs: tuple[float, ...], confidence: float
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(metrics, bounds, repeated splits, scores) per attack of the ``--scores`` file."""
    from privfed import audit

    attacks: dict[str, Any] = {}
    bounds: dict[str, Any] = {}
    splits: dict[str, Any] = {}
    scores: dict[str, Any] = {}
    for name, (members, nonmembers) in load_scores(Path(options["scores"])).items():
        attacks[name] = audit.membership_metrics(
            members, nonmembers, fprs=fprs, confidence=confidence
        )
        result = _score_bound(members, nonmembers, options)
        if isinstance(result, audit.SplitBounds):
            bounds[name] = result.bounds[0]
            if len(result.bounds) > 1:
                splits[name] = result
        else:
            bounds[name] = result
        scores[name] = (members, nonmembers)
    return attacks, bounds, splits, scores


def _one_run_inputs(options: dict[str, Any]) -> dict[str, Any]:
    """One-run audit per run of the ``--one-run`` file."""
    from privfed import audit

    return {
        name: audit.one_run_audit_selected(
            canary_scores,
            included,
            spec=audit.BoundSpec(float(options["delta"]), float(options["significance"])),
            selection=options["one_run_selection"],
            split=audit.HeldOutSplit(seed=int(options["seed"])),
        )
        for name, (canary_scores, included) in load_canaries(Path(options["one_run"])).items()
    }


def _run_dir_inputs(directory: Path) -> Any:
    from privfed.engines.artifacts import AuditInputs
    from privfed.errors import ParameterError

    path = directory / AUDIT_INPUTS_FILENAME
    if not path.is_file():
        raise _UsageError(
            f"--run-dir {directory} holds no {AUDIT_INPUTS_FILENAME} (privfed run writes it)"
        )
    try:
        return AuditInputs.load(path)
    except ParameterError as exc:
        raise _UsageError(f"{path}: {exc}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise _UsageError(f"cannot read {path}: {exc}") from None


def _add_run_dir_results(
    options: dict[str, Any],
    fprs: tuple[float, ...],
    confidence: float,
    into: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
) -> None:
    """Run the attacks of ``--run-dir``'s audit inputs; add metrics, bounds and scores ``into``."""
    attacks, bounds, scores = into
    inputs = _run_dir_inputs(Path(options["run_dir"]))
    result = inputs.run(
        delta=float(options["delta"]),
        significance=float(options["significance"]),
        confidence=confidence,
        fprs=fprs,
        seed=int(options["seed"]),
    )
    for item in result.results:
        name = item.attack.value
        attacks[name] = item.metrics
        if item.bound is not None:
            bounds[name] = item.bound
        scores[name] = (item.member_scores, item.nonmember_scores)


def _self_audits(options: dict[str, Any], meta: dict[str, Any]) -> list[Any]:
    """The canary self-audits of ``--self-audit``, one per ε; their settings go into ``meta``."""
    from privfed.audit.canary import RELEASE_CODE_TRIALS, SIMULATION_TRIALS, AuditTrials
    from privfed.dp import Adjacency

    canary: list[Any] = []
    adjacency = Adjacency(options["adjacency"])
    mode = options["self_audit_mode"]
    if mode == "real":
        from privfed.engines.latent.self_audit import self_audit_release

        run_self_audit: Any = self_audit_release
        default = RELEASE_CODE_TRIALS
    else:
        from privfed.engines.latent.self_audit import simulated_self_audit

        run_self_audit = simulated_self_audit
        default = SIMULATION_TRIALS
    trials = AuditTrials(
        num_trials=int(options["trials"] or default.num_trials),
        num_calibration_trials=int(options["calibration_trials"] or default.num_calibration_trials),
        significance=float(options["significance"]),
        seed=int(options["seed"]),
    )
    for eps in _floats(options["epsilon"], "epsilon"):
        canary.append(
            run_self_audit(
                eps,
                float(options["delta"]),
                clip_norm=float(options["clip_norm"]),
                dim=int(options["dim"]),
                adjacency=adjacency,
                noise_scale=float(options["noise_scale"]),
                trials=trials,
            )
        )
    meta.update(
        clip_norm=options["clip_norm"],
        dim=options["dim"],
        adjacency=options["adjacency"],
        self_audit_mode=mode,
        self_audit_audits=canary[0].audited if canary else "",
    )
    return canary


def _execute(options: dict[str, Any]) -> int:
    from privfed._deps import require

    if not (options["scores"] or options["run_dir"] or options["self_audit"] or options["one_run"]):
        raise _UsageError("give at least one of --scores, --one-run, --run-dir, --self-audit")
    _check_options(options)
    if not options["no_plot"] and (options["scores"] or options["run_dir"]):
        # roc.png is drawn last; find out now, not after the work, that it cannot be.
        from privfed.errors import MissingDependencyError

        try:
            require("matplotlib", feature="privfed audit (roc.png)")
        except MissingDependencyError as exc:
            raise _UsageError(f"{exc}; or pass --no-plot to skip roc.png") from None

    from privfed import audit

    fprs = tuple(_floats(options["fprs"], "fprs"))
    confidence = float(options["confidence"])
    seed = int(options["seed"])
    attacks: dict[str, Any] = {}
    bounds: dict[str, Any] = {}
    splits: dict[str, Any] = {}
    scores: dict[str, Any] = {}
    one_run: dict[str, Any] = {}
    canary: list[Any] = []
    meta: dict[str, Any] = {"seed": seed, "delta": options["delta"]}

    if options["scores"]:
        attacks, bounds, splits, scores = _score_inputs(options, fprs, confidence)
        meta["scores_file"] = str(options["scores"])
        meta["score_trials"] = options["score_trials"]
    if options["one_run"]:
        one_run = _one_run_inputs(options)
        meta["one_run_file"] = str(options["one_run"])

    if options["run_dir"]:
        _add_run_dir_results(options, fprs, confidence, (attacks, bounds, scores))
        meta["run_dir"] = str(options["run_dir"])

    if options["self_audit"]:
        canary = _self_audits(options, meta)

    paths = audit.write_audit_report(
        options["out"],
        attacks=attacks,
        bounds=bounds,
        canary=canary,
        scores=None if options["no_scores"] else scores,
        metadata=meta,
        plot=not options["no_plot"],
        one_run=one_run,
        splits=splits,
    )
    _print_warnings(attacks, bounds)
    print(paths.markdown.read_text(encoding="utf-8"))
    print(
        f"wrote {paths.json}, {paths.markdown}" + (f", {paths.roc_plot}" if paths.roc_plot else "")
    )
    return 3 if any(c.violation_detected for c in canary) else 0


def _print_warnings(attacks: dict[str, Any], bounds: dict[str, Any]) -> None:
    """Flipped-score warnings and the one-model caveat, one line each, on stderr."""
    for name, metrics in attacks.items():
        for warning in metrics.warnings:
            print(f"privfed audit: warning: {name}: {warning}", file=sys.stderr)
    one_model = [name for name, b in bounds.items() if b.trials.value == "one-model"]
    if one_model:
        caveat = bounds[one_model[0]].statistical_model
        print(f"privfed audit: caveat: {', '.join(one_model)}: {caveat}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``privfed audit``; returns the exit status (see module docstring)."""
    from privfed.errors import PrivfedError

    try:
        return _execute(_merge(args))
    except (_UsageError, OptionError, PrivfedError, ValueError, OSError) as exc:
        text = option_message(exc, _OPTION_OF)
        if isinstance(exc, OSError) and exc.strerror:
            text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        return fail("privfed audit", text)
