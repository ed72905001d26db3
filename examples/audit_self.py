"""Canary self-audit: does privfed's latent-statistic release keep its promise?

For ε in (1, 4, 10) the release is planned by privfed.dp, a worst-case canary is
inserted, the release is simulated 200,000 times with and without it, and the
optimal attack's error rates give μ and ε lower bounds at 95 % confidence.  A
correct release stays below its claim; the same release with half the noise is
caught.

Run:  python examples/audit_self.py
"""

from __future__ import annotations

from privfed.audit import self_audit
from privfed.dp import Adjacency


def main() -> None:
    print(f"{'ε':>4} {'noise':>6} {'claimed μ':>10} {'μ_lb':>8} {'μ_lb/μ':>7} {'ε_lb':>7}  verdict")
    for epsilon in (1.0, 4.0, 10.0):
        for noise_scale in (1.0, 0.5):
            result = self_audit(
                epsilon,
                1e-5,
                clip_norm=3.0,
                dim=32,
                adjacency=Adjacency.REPLACE_ONE,
                noise_scale=noise_scale,
                seed=0,
            )
            verdict = "VIOLATION" if result.violation_detected else "consistent"
            print(
                f"{epsilon:>4g} {noise_scale:>6g} {result.claimed_mu:>10.4f} "
                f"{result.mu_lower_bound:>8.4f} {result.tightness:>7.3f} "
                f"{result.epsilon_lower_bound:>7.3f}  {verdict}"
            )


if __name__ == "__main__":
    main()
