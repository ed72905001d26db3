"""Audit reports: ``audit.json``, ``audit.md`` and a log–log ``roc.png``.

The JSON holds every metric with its interval, every bound with its
significance and threshold rule, and (optionally) the per-record scores, so a
reviewer can recompute anything.  matplotlib is imported only when a plot is
written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from privfed._atomic import atomic_path, atomic_write_text
from privfed.audit.bounds import OneRunAudit, PrivacyLowerBound, TrialModel
from privfed.audit.canary import CanaryAuditResult
from privfed.audit.metrics import MembershipMetrics
from privfed.audit.splits import SplitBounds
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["ReportPaths", "render_markdown", "write_audit_report"]

_SCHEMA = "privfed.audit/1"


@dataclass(frozen=True)
class ReportPaths:
    """Files written by :func:`write_audit_report`.

    Attributes:
        json: Path of ``audit.json``.
        markdown: Path of ``audit.md``.
        roc_plot: Path of ``roc.png``, or None when no plot was written.
    """

    json: Path
    markdown: Path
    roc_plot: Path | None


def _fmt(x: float, digits: int = 3) -> str:
    if not math.isfinite(x):
        return "—"
    return f"{x:.{digits}f}"


def render_markdown(
    *,
    title: str,
    attacks: Mapping[str, MembershipMetrics],
    bounds: Mapping[str, PrivacyLowerBound],
    canary: Sequence[CanaryAuditResult],
    metadata: Mapping[str, Any],
    one_run: Mapping[str, OneRunAudit] | None = None,
    splits: Mapping[str, SplitBounds] | None = None,
) -> str:
    """Render the human-readable summary (markdown) of an audit.

    Every bound is printed with the statistical model it assumes.

    Args:
        title: Heading.
        attacks: Metrics per attack name.
        bounds: Lower bounds per attack name.
        canary: Canary self-audit results.
        metadata: Extra key/value lines shown under the heading.
        one_run: One-run audits per name.
        splits: Held-out bounds over repeated splits per attack name.

    Returns:
        The markdown text.
    """
    lines = [f"# {title}", ""]
    for key, value in metadata.items():
        lines.append(f"- **{key}**: {value}")
    if metadata:
        lines.append("")
    if attacks:
        lines += [
            "## Attacks",
            "",
            'Scores: higher means "member".  Intervals are two-sided; rates at a threshold use '
            "exact Clopper–Pearson intervals.",
            "",
            "| attack | members | non-members | AUC [interval] | TPR at FPR (interval) |",
            "|---|---|---|---|---|",
        ]
        for name, m in attacks.items():
            cells = []
            for row in m.tpr_at_fpr:
                mark = "" if row.supported else "†"
                cells.append(
                    f"{row.target_fpr:g}: {_fmt(row.tpr.estimate, 4)} "
                    f"({_fmt(row.tpr.lower, 4)}–{_fmt(row.tpr.upper, 4)}){mark}"
                )
            lines.append(
                f"| {name} | {m.num_members} | {m.num_nonmembers} | {_fmt(m.auc.estimate)} "
                f"[{_fmt(m.auc.lower)}, {_fmt(m.auc.upper)}] | {'; '.join(cells)} |"
            )
        lines += ["", "† too few non-members to resolve this FPR (fewer than 3/FPR).", ""]
        for name, m in attacks.items():
            lines += [f"**Warning ({name})**: {w}" for w in m.warnings]
        if any(m.warnings for m in attacks.values()):
            lines.append("")
    lines += _bound_lines(bounds, one_run or {}, splits or {})
    if canary:
        lines += [
            "## Canary self-audit of the Gaussian release",
            "",
            "| noise scale | claimed μ | μ_lb | μ_lb/μ | claimed ε | ε_lb | δ | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in canary:
            verdict = "VIOLATION" if c.violation_detected else "consistent"
            lines.append(
                f"| {c.noise_scale:g} | {_fmt(c.claimed_mu)} | {_fmt(c.mu_lower_bound)} | "
                f"{_fmt(c.tightness)} | {_fmt(c.claimed_epsilon)} | "
                f"{_fmt(c.epsilon_lower_bound)} | {c.delta:g} | {verdict} |"
            )
        lines += [
            "",
            "Each bound holds with probability at least 1 − significance "
            f"({canary[0].significance:g}); a bound above the claim refutes the claim. "
            f"Statistical model: {TrialModel.INDEPENDENT.statement} (one release per trial).",
            "",
        ]
    return "\n".join(lines)


def _bound_lines(
    bounds: Mapping[str, PrivacyLowerBound],
    one_run: Mapping[str, OneRunAudit],
    splits: Mapping[str, SplitBounds],
) -> list[str]:
    """The bound tables, each row naming its statistical model, then the models' statements."""
    lines: list[str] = []
    used: list[TrialModel] = []
    if bounds:
        lines += [
            "## Empirical privacy lower bounds",
            "",
            "| attack | ε_lb | μ_lb | δ | confidence | threshold rule | statistical model |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, b in bounds.items():
            used.append(b.trials)
            lines.append(
                f"| {name} | {_fmt(b.epsilon_lower_bound)} | {_fmt(b.mu_lower_bound)} | "
                f"{b.delta:g} | {b.confidence:.0%} | {b.selection.value} | {b.trials.value} |"
            )
        lines.append("")
    if splits:
        lines += [
            "Held-out bound over repeated splits (the median is a summary of K bounds, "
            "each at the stated confidence; not a bound of its own):",
            "",
            "| attack | splits | median ε_lb | min–max ε_lb | median μ_lb |",
            "|---|---|---|---|---|",
        ]
        for name, sb in splits.items():
            low, high = sb.epsilon_range
            lines.append(
                f"| {name} | {len(sb.bounds)} | {_fmt(sb.median_epsilon)} | "
                f"{_fmt(low)}–{_fmt(high)} | {_fmt(sb.median_mu)} |"
            )
        lines.append("")
    if one_run:
        used.append(TrialModel.ONE_RUN)
        lines += [
            "## One-run lower bounds (Steinke, Nasr & Jagielski 2023)",
            "",
            "| name | ε_lb | δ | confidence | canaries | guesses (in) | correct | rule |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, o in one_run.items():
            rule = o.selection
            if o.selection == "bonferroni":
                rule += f" (k = {o.num_configurations})"
            elif o.selection == "held-out":
                rule += f" ({o.calibration_canaries} calibration canaries)"
            lines.append(
                f"| {name} | {_fmt(o.epsilon_lower_bound)} | {o.delta:g} | "
                f"{1 - o.significance:.0%} | {o.num_canaries} | {o.num_guesses} "
                f"({o.num_guesses_in}) | {o.num_correct} | {rule} |"
            )
        lines.append("")
    for model in dict.fromkeys(used):
        lines.append(f"- statistical model **{model.value}**: {model.statement}.")
    if used:
        lines.append("")
    return lines


def _plot(path: Path, attacks: Mapping[str, MembershipMetrics], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.0, 4.5))
    floor = 1.0
    for name, m in attacks.items():
        fpr, tpr = m.roc.fpr, m.roc.tpr
        keep = (fpr > 0) & (tpr > 0)
        if np.any(keep):
            floor = min(floor, float(fpr[keep].min()), float(tpr[keep].min()))
            ax.plot(fpr[keep], tpr[keep], label=f"{name} (AUC {m.auc.estimate:.3f})")
    floor = max(min(floor, 1e-1), 1e-6)
    grid = np.geomspace(floor, 1.0, 50)
    ax.plot(grid, grid, "k--", linewidth=0.8, label="random guess")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(floor, 1.0)
    ax.set_ylim(floor, 1.0)
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    with atomic_path(path) as tmp:  # keeps the suffix: matplotlib's format
        fig.savefig(tmp, dpi=120)
    plt.close(fig)


def _check_values(name: str, values: Mapping[str, object], kind: type) -> None:
    """Refuse the first value of ``values`` that is not a ``kind``."""
    for key, value in values.items():
        if not isinstance(value, kind):
            raise ParameterTypeError(f"{name}[{key!r}]", f"a {kind.__name__}", value)


def write_audit_report(
    out_dir: str | Path,
    *,
    title: str = "privfed membership-inference audit",
    attacks: Mapping[str, MembershipMetrics] | None = None,
    bounds: Mapping[str, PrivacyLowerBound] | None = None,
    canary: Sequence[CanaryAuditResult] = (),
    scores: Mapping[str, tuple[ArrayLike, ArrayLike]] | None = None,
    metadata: Mapping[str, Any] | None = None,
    plot: bool = True,
    one_run: Mapping[str, OneRunAudit] | None = None,
    splits: Mapping[str, SplitBounds] | None = None,
) -> ReportPaths:
    """Write ``audit.json``, ``audit.md`` and (if there are attacks and ``plot``) ``roc.png``.

    Everything is validated and rendered before the first file is written.

    Args:
        out_dir: Directory (created if missing).
        title: Report heading.
        attacks: Metrics per attack name.
        bounds: Lower bounds per attack name.
        canary: Canary self-audit results.
        scores: Per attack name, (member scores, non-member scores) to store.
        metadata: JSON-serialisable key/values (inputs, seeds policy, versions).
        plot: Write the log–log ROC plot (needs matplotlib).
        one_run: One-run audits per name.
        splits: Held-out bounds over repeated splits per attack name.

    Returns:
        The :class:`ReportPaths`.
    """
    attacks = dict(attacks or {})
    bounds = dict(bounds or {})
    meta = dict(metadata or {})
    _check_values("attacks", attacks, MembershipMetrics)
    _check_values("bounds", bounds, PrivacyLowerBound)
    one_run = dict(one_run or {})
    splits = dict(splits or {})
    _check_values("one_run", one_run, OneRunAudit)
    _check_values("splits", splits, SplitBounds)
    canary = tuple(canary)
    for c in canary:
        if not isinstance(c, CanaryAuditResult):
            raise ParameterTypeError("canary", "a sequence of CanaryAuditResult", c)
    if not (attacks or bounds or canary or one_run):
        raise ParameterError("attacks/bounds/canary/one_run", "at least one non-empty", "all empty")
    score_json: dict[str, Any] = {}
    for name, pair in (scores or {}).items():
        member, nonmember = pair
        score_json[name] = {
            "member": np.asarray(member, dtype=np.float64).tolist(),
            "nonmember": np.asarray(nonmember, dtype=np.float64).tolist(),
        }
    document = {
        "schema": _SCHEMA,
        "title": title,
        "metadata": meta,
        "attacks": {k: v.to_dict() for k, v in attacks.items()},
        "bounds": {k: v.to_dict() for k, v in bounds.items()},
        "canary": [c.to_dict() for c in canary],
        "one_run": {k: v.to_dict() for k, v in one_run.items()},
        "splits": {k: v.to_dict() for k, v in splits.items()},
        "scores": score_json,
    }
    text = json.dumps(document, indent=2, allow_nan=False)
    markdown = render_markdown(
        title=title,
        attacks=attacks,
        bounds=bounds,
        canary=canary,
        metadata=meta,
        one_run=one_run,
        splits=splits,
    )
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "audit.json"
    md_path = directory / "audit.md"
    atomic_write_text(json_path, text + "\n")
    atomic_write_text(md_path, markdown)
    roc_path = None
    if plot and attacks:
        roc_path = directory / "roc.png"
        _plot(roc_path, attacks, title)
    return ReportPaths(json=json_path, markdown=md_path, roc_plot=roc_path)
