"""``privfed audit``: membership-inference audits from the command line.

Inputs (any combination, at least one):

``--scores FILE``
    Attack scores of members and non-members (higher = "member").  ``.npz``
    with arrays ``member_scores`` and ``nonmember_scores`` (or ``member`` and
    ``nonmember``); or ``.csv`` with a header containing the columns ``score``
    and ``member`` (1/0 or true/false).  Metrics use all scores; the ε/μ lower
    bound uses the ``--threshold-selection`` rule (default: a seeded held-out
    split, ``--calibration-fraction`` of each group choosing the threshold).

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
    ``privfed.dp.plan_latent_release`` at ``--epsilon`` (one or a comma list),
    ``--delta``, ``--clip-norm``, ``--dim``, ``--adjacency``.

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
import csv
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["AUDIT_INPUTS_FILENAME", "register"]

#: File that ``privfed run`` writes into its output directory for ``--run-dir``.
AUDIT_INPUTS_FILENAME = "audit_inputs.npz"

_DEFAULTS: dict[str, Any] = {
    "scores": None,
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
    "epsilon": "1,4,10",
    "clip_norm": 1.0,
    "dim": 16,
    "adjacency": "replace-one",
    "trials": 200_000,
    "calibration_trials": 50_000,
    "noise_scale": 1.0,
    "no_plot": False,
    "no_scores": False,
}


class _UsageError(Exception):
    """Bad command-line input (reported on stderr, exit status 2)."""


def register(subparsers: Any) -> None:
    """Add the ``audit`` subcommand to ``subparsers`` (an argparse sub-parsers action)."""
    p = subparsers.add_parser(
        "audit",
        help="membership-inference audit: metrics, ε lower bounds, canary self-audit",
        description=(__doc__ or "").split("\n\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = p.add_argument
    add("--config", help="JSON file with options (long names, underscores)")
    add("--scores", help=".npz or .csv file with member / non-member scores")
    add("--run-dir", help=f"privfed run output directory (reads {AUDIT_INPUTS_FILENAME})")
    add("--self-audit", action="store_true", default=None, help="canary audit of privfed's release")
    add("--out", help="output directory [audit]")
    add("--delta", type=float, help="δ of the ε lower bounds [1e-5]")
    add("--significance", type=float, help="α of every lower bound [0.05]")
    add("--confidence", type=float, help="coverage of metric intervals [0.95]")
    add("--fprs", help="comma list of FPRs for TPR reporting [1e-1,...,1e-5]")
    add("--seed", type=int, help="seed of splits and simulations [0]")
    add(
        "--threshold-selection",
        choices=("held-out", "fixed", "bonferroni"),
        help="threshold rule of the score-file bound [held-out]",
    )
    add("--threshold", type=float, help="the threshold, for --threshold-selection fixed")
    add("--thresholds", help="comma list of thresholds, for bonferroni")
    add("--calibration-fraction", type=float, help="held-out calibration share [0.5]")
    add("--epsilon", help="self-audit: ε (comma list) [1,4,10]")
    add("--clip-norm", type=float, help="self-audit: clip norm R [1.0]")
    add("--dim", type=int, help="self-audit: latent dimension d [16]")
    add("--adjacency", choices=("replace-one", "add-remove"), help="self-audit adjacency")
    add("--trials", type=int, help="self-audit: evaluation trials per hypothesis [200000]")
    add("--calibration-trials", type=int, help="self-audit: calibration trials [50000]")
    add("--noise-scale", type=float, help="self-audit: actual/claimed noise (tests the auditor)")
    add("--no-plot", action="store_true", default=None, help="do not write roc.png")
    add("--no-scores", action="store_true", default=None, help="omit per-record scores")
    p.set_defaults(func=run_audit)


def _merge(args: argparse.Namespace) -> dict[str, Any]:
    options = dict(_DEFAULTS)
    if args.config:
        try:
            loaded = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise _UsageError(f"cannot read --config {args.config}: {exc}") from exc
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
    if isinstance(text, (int, float)):
        return [float(text)]
    if isinstance(text, list):
        return [float(x) for x in text]
    try:
        return [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError as exc:
        raise _UsageError(f"--{name.replace('_', '-')} must be a comma list of numbers") from exc


def _load_scores(path: Path) -> tuple[Any, Any]:
    import numpy as np

    if not path.is_file():
        raise _UsageError(f"score file not found: {path}")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            for m_key, n_key in (("member_scores", "nonmember_scores"), ("member", "nonmember")):
                if m_key in data and n_key in data:
                    return np.asarray(data[m_key], float), np.asarray(data[n_key], float)
        raise _UsageError(f"{path} needs arrays member_scores and nonmember_scores")
    if path.suffix == ".csv":
        members: list[float] = []
        nonmembers: list[float] = []
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames is None or not {"score", "member"} <= set(reader.fieldnames):
                raise _UsageError(f"{path} needs a header with columns 'score' and 'member'")
            for line, row in enumerate(reader, start=2):
                flag = row["member"].strip().lower()
                if flag not in ("1", "0", "true", "false"):
                    raise _UsageError(f"{path}:{line}: member must be 1/0/true/false")
                try:
                    score = float(row["score"])
                except ValueError as exc:
                    raise _UsageError(f"{path}:{line}: score is not a number") from exc
                (members if flag in ("1", "true") else nonmembers).append(score)
        return np.asarray(members, float), np.asarray(nonmembers, float)
    raise _UsageError(f"unsupported score file type {path.suffix!r} (use .npz or .csv)")


def _score_bound(members: Any, nonmembers: Any, options: dict[str, Any]) -> Any:
    import numpy as np

    from privfed import audit

    rule = options["threshold_selection"]
    delta, alpha = float(options["delta"]), float(options["significance"])
    if rule == "fixed":
        if options["threshold"] is None:
            raise _UsageError("--threshold-selection fixed needs --threshold")
        return audit.lower_bound_at_threshold(
            members, nonmembers, float(options["threshold"]), delta=delta, significance=alpha
        )
    if rule == "bonferroni":
        if options["thresholds"] is None:
            raise _UsageError("--threshold-selection bonferroni needs --thresholds")
        grid = _floats(options["thresholds"], "thresholds")
        return audit.lower_bound_bonferroni(
            members, nonmembers, grid, delta=delta, significance=alpha
        )
    if rule != "held-out":
        raise _UsageError(f"unknown threshold selection {rule!r}")
    fraction = float(options["calibration_fraction"])
    if not 0.0 < fraction < 1.0:
        raise _UsageError("--calibration-fraction must be in (0, 1)")
    rng = np.random.default_rng(int(options["seed"]))
    pm, pn = rng.permutation(members.size), rng.permutation(nonmembers.size)
    cm, cn = int(members.size * fraction), int(nonmembers.size * fraction)
    if min(cm, cn, members.size - cm, nonmembers.size - cn) < 1:
        raise _UsageError("too few scores for a held-out split")
    return audit.lower_bound_held_out(
        members[pm[:cm]],
        nonmembers[pn[:cn]],
        members[pm[cm:]],
        nonmembers[pn[cn:]],
        delta=delta,
        significance=alpha,
    )


def _run_dir_inputs(directory: Path) -> Any:
    from privfed.engines.latent.audit import AuditInputs
    from privfed.errors import ParameterError

    path = directory / AUDIT_INPUTS_FILENAME
    if not path.is_file():
        raise _UsageError(f"{path} not found (privfed run writes it)")
    try:
        return AuditInputs.load(path)
    except ParameterError as exc:
        raise _UsageError(f"{path}: {exc}") from None


def _execute(options: dict[str, Any]) -> int:
    from privfed import audit
    from privfed.dp import Adjacency

    if not (options["scores"] or options["run_dir"] or options["self_audit"]):
        raise _UsageError("give at least one of --scores, --run-dir, --self-audit")
    fprs = tuple(_floats(options["fprs"], "fprs"))
    confidence = float(options["confidence"])
    seed = int(options["seed"])
    attacks: dict[str, Any] = {}
    bounds: dict[str, Any] = {}
    scores: dict[str, Any] = {}
    canary: list[Any] = []
    meta: dict[str, Any] = {"seed": seed, "delta": options["delta"]}

    if options["scores"]:
        path = Path(options["scores"])
        members, nonmembers = _load_scores(path)
        attacks["scores"] = audit.membership_metrics(
            members, nonmembers, fprs=fprs, confidence=confidence
        )
        bounds["scores"] = _score_bound(members, nonmembers, options)
        scores["scores"] = (members, nonmembers)
        meta["scores_file"] = str(path)

    if options["run_dir"]:
        inputs = _run_dir_inputs(Path(options["run_dir"]))
        result = inputs.run(
            delta=float(options["delta"]),
            significance=float(options["significance"]),
            confidence=confidence,
            fprs=fprs,
            seed=seed,
        )
        for item in result.results:
            name = item.attack.value
            attacks[name] = item.metrics
            if item.bound is not None:
                bounds[name] = item.bound
            scores[name] = (item.member_scores, item.nonmember_scores)
        meta["run_dir"] = str(options["run_dir"])

    if options["self_audit"]:
        adjacency = Adjacency(options["adjacency"])
        for eps in _floats(options["epsilon"], "epsilon"):
            canary.append(
                audit.self_audit(
                    eps,
                    float(options["delta"]),
                    clip_norm=float(options["clip_norm"]),
                    dim=int(options["dim"]),
                    adjacency=adjacency,
                    noise_scale=float(options["noise_scale"]),
                    num_trials=int(options["trials"]),
                    num_calibration_trials=int(options["calibration_trials"]),
                    significance=float(options["significance"]),
                    seed=seed,
                )
            )
        meta.update(
            clip_norm=options["clip_norm"], dim=options["dim"], adjacency=options["adjacency"]
        )

    paths = audit.write_audit_report(
        options["out"],
        attacks=attacks,
        bounds=bounds,
        canary=canary,
        scores=None if options["no_scores"] else scores,
        metadata=meta,
        plot=not options["no_plot"],
    )
    print(paths.markdown.read_text(encoding="utf-8"))
    print(
        f"wrote {paths.json}, {paths.markdown}" + (f", {paths.roc_plot}" if paths.roc_plot else "")
    )
    return 3 if any(c.violation_detected for c in canary) else 0


def run_audit(args: argparse.Namespace) -> int:
    """Entry point of ``privfed audit``; returns the exit status (see module docstring)."""
    from privfed.errors import PrivfedError

    try:
        return _execute(_merge(args))
    except (_UsageError, PrivfedError, ValueError) as exc:
        print(f"privfed audit: error: {exc}", file=sys.stderr)
        return 2
