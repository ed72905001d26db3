"""Canary self-audit: does privfed's latent-statistic release keep its promise?

For ε in (1, 4, 10) the release is planned by privfed.dp and a worst-case
canary pair of neighbouring statistics is built; privfed's REAL release code
(``release_latent_statistics``, with its own CSPRNG noise) then runs 125,000
times on them (50,000 + 12,500 trials with and without the canary), and the
optimal attack's error rates give μ and ε lower bounds at 95 % confidence.  A
correct release stays below its claim; the same code run with half the planned
noise (a deliberately broken release, noise 0.5) is caught.  About a minute.

Run:  python examples/audit_self.py
"""

from __future__ import annotations

from privfed.audit import AuditTrials
from privfed.dp import Adjacency
from privfed.engines.latent.self_audit import self_audit_release


def main() -> None:
    print(f"{'ε':>4} {'noise':>6} {'claimed μ':>10} {'μ_lb':>8} {'μ_lb/μ':>7} {'ε_lb':>7}  verdict")
    audited = set()
    for epsilon in (1.0, 4.0, 10.0):
        for noise_scale in (1.0, 0.5):
            result = self_audit_release(
                epsilon,
                1e-5,
                clip_norm=3.0,
                dim=16,
                adjacency=Adjacency.REPLACE_ONE,
                noise_scale=noise_scale,
                trials=AuditTrials(seed=0),
            )
            audited.add(result.audited)
            verdict = "VIOLATION" if result.violation_detected else "consistent"
            print(
                f"{epsilon:>4g} {noise_scale:>6g} {result.claimed_mu:>10.4f} "
                f"{result.mu_lower_bound:>8.4f} {result.tightness:>7.3f} "
                f"{result.epsilon_lower_bound:>7.3f}  {verdict}"
            )
    for line in sorted(audited):
        print(f"audited: {line}")


if __name__ == "__main__":
    main()
