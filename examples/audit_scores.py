"""Audit two arrays of membership-inference scores.

Replace the simulated scores below by your attack's outputs (higher = "member").
The script prints AUC and TPR at low FPRs with confidence intervals, then an ε
lower bound whose threshold is chosen on a held-out half of the scores, and
writes audit.json / audit.md / roc.png into a fresh temporary directory.

Run:  python examples/audit_scores.py
"""

from __future__ import annotations

import tempfile

import numpy as np

from privfed.audit import BoundSpec, lower_bound_held_out, membership_metrics, write_audit_report


def main() -> None:
    rng = np.random.default_rng(0)
    # Stand-in for a real attack: members score ~N(0.8, 1), non-members ~N(0, 1).
    member_scores = rng.normal(0.8, 1.0, 5_000)
    nonmember_scores = rng.normal(0.0, 1.0, 20_000)

    metrics = membership_metrics(member_scores, nonmember_scores, confidence=0.95)
    auc = metrics.auc
    print(f"AUC {auc.estimate:.3f}  (95 % interval {auc.lower:.3f}–{auc.upper:.3f})")
    for row in metrics.tpr_at_fpr:
        flag = "" if row.supported else "   <- too few non-members for this FPR"
        print(
            f"TPR at FPR {row.target_fpr:g}: {row.tpr.estimate:.4f} "
            f"({row.tpr.lower:.4f}–{row.tpr.upper:.4f}){flag}"
        )

    # The threshold is chosen on one half and evaluated on the other: never on the same data.
    half_m, half_n = member_scores.size // 2, nonmember_scores.size // 2
    bound = lower_bound_held_out(
        member_scores[:half_m],
        nonmember_scores[:half_n],
        member_scores[half_m:],
        nonmember_scores[half_n:],
        spec=BoundSpec(1e-5, 0.05),
    )
    print(
        f"with 95 % confidence: ε ≥ {bound.epsilon_lower_bound:.3f} at δ = 1e-5, "
        f"μ ≥ {bound.mu_lower_bound:.3f}"
    )

    paths = write_audit_report(
        tempfile.mkdtemp(prefix="privfed-audit-scores-"),
        attacks={"my-attack": metrics},
        bounds={"my-attack": bound},
        scores={"my-attack": (member_scores, nonmember_scores)},
    )
    print(f"report: {paths.markdown}")


if __name__ == "__main__":
    main()
