"""Canary self-audit of privfed's latent-statistic release at several ε.

For each ε the release is planned by ``privfed.engines.moments.planning.plan_latent_release`` and
audited with its worst-case canary and the optimal (likelihood-ratio) attack:

* ``privfed``      -- the REAL release code (``release_latent_statistics``
                      with its CSPRNG noise, grid placement) run on worst-case
                      neighbouring statistics in every trial: μ_lb must stay
                      ≤ μ, and the tightness μ_lb/μ shows how close it gets;
* ``half-noise``   -- the real release code with half the planned noise (a
                      deliberately broken release, audited against the plan's
                      claim): the audit must report a violation (μ_lb > μ);
* ``simulated``    -- the plan audited by simulation from its claimed noise
                      stds (checks the accounting arithmetic only, not the
                      release code), at ``--trials`` trials;
* ``paper-4.1``    -- the baseline: the reference paper's Proposition 4.1
                      calibration audited (simulated: a calibration question)
                      against the same (ε, δ) claim; its slack shows the noise
                      privfed's exact accounting saves.

A second baseline shows why the threshold rule matters: the "naive" bound
picks the best threshold on the evaluation data itself, uses raw rates with no
confidence interval and ignores δ (as TF Privacy's does); it can exceed the
claim of a correct release.  Also timed: throughput of the real release code
and of the sufficient-statistic and full-release simulations (full release
uses privfed's own CSPRNG noise sampler).

Run:  python benchmarks/self_audit.py [--trials N] [--real-trials N] [--dim D] [--quick]
Writes benchmarks/results/self_audit.json and self_audit.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from privfed.audit import (
    RELEASE_CODE_TRIALS,
    AuditTrials,
    LatentCanaryNoise,
    SimulationMode,
    audit_gaussian_release,
    audit_latent_release,
    worst_case_latent_canary,
)
from privfed.dp import Adjacency, gaussian_noise, mu_for_epsilon_delta
from privfed.engines.latent.self_audit import (
    PlannedRelease,
    audit_latent_release_code,
)
from privfed.engines.moments.planning import paper_baseline_noise_stds, plan_latent_release

RESULTS = Path(__file__).resolve().parent / "results"


def naive_bounds(mu: float, trials: int, seed: int) -> tuple[float, float]:
    """Best-threshold-on-the-same-data ε and μ with raw rates and δ ignored (the rivals' way)."""
    rng = np.random.default_rng(seed)
    members = rng.normal(mu, 1.0, trials)
    nonmembers = rng.normal(0.0, 1.0, trials)
    grid = np.quantile(np.r_[members, nonmembers], np.linspace(0.001, 0.999, 999))
    fpr = (nonmembers[None, :] >= grid[:, None]).mean(axis=1)
    fnr = (members[None, :] < grid[:, None]).mean(axis=1)
    ok = (fpr > 0) & (fnr > 0)
    eps = np.maximum(np.log((1 - fnr[ok]) / fpr[ok]), np.log((1 - fpr[ok]) / fnr[ok]))
    mus = stats.norm.isf(fpr[ok]) - stats.norm.ppf(fnr[ok])
    return float(eps.max()), float(mus.max())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epsilons", default="1,4,10")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--clip-norm", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=400_000)
    parser.add_argument("--calibration-trials", type=int, default=100_000)
    parser.add_argument(
        "--real-trials",
        type=int,
        default=RELEASE_CODE_TRIALS.num_trials,
        help="trials per hypothesis of the real release code (calibration: a quarter)",
    )
    parser.add_argument("--significance", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="10x fewer trials")
    args = parser.parse_args()
    trials = args.trials // 10 if args.quick else args.trials
    cal = args.calibration_trials // 10 if args.quick else args.calibration_trials
    real_trials = max(100, args.real_trials // 10 if args.quick else args.real_trials)
    default = RELEASE_CODE_TRIALS
    real_cal = max(100, real_trials * default.num_calibration_trials // default.num_trials)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    common = {"trials": AuditTrials(trials, cal, args.significance, args.seed)}
    real = {"trials": AuditTrials(real_trials, real_cal, args.significance, args.seed)}

    rows = []
    total = 4 * len(epsilons)
    step = 0
    started = time.perf_counter()
    for eps in epsilons:
        plan = plan_latent_release(
            eps, args.delta, clip_norm=args.clip_norm, dim=args.dim, adjacency=Adjacency.REPLACE_ONE
        )
        sigma_sum, sigma_m = paper_baseline_noise_stds(eps, args.delta, clip_norm=args.clip_norm)
        paper_blocks = worst_case_latent_canary(
            LatentCanaryNoise(args.clip_norm, args.dim, sigma_sum, sigma_m, Adjacency.REPLACE_ONE)
        )
        cases = [
            ("privfed", lambda plan=plan: audit_latent_release_code(plan, **real)),
            (
                "half-noise",
                lambda plan=plan: audit_latent_release_code(
                    plan, release=PlannedRelease(plan, noise_scale=0.5), **real
                ),
            ),
            ("simulated", lambda plan=plan: audit_latent_release(plan, **common)),
            (
                "paper-4.1",
                lambda eps=eps, blocks=paper_blocks: audit_gaussian_release(
                    blocks,
                    claimed_mu=mu_for_epsilon_delta(eps, args.delta),
                    delta=args.delta,
                    claimed_epsilon=eps,
                    **common,
                ),
            ),
        ]
        for name, run in cases:
            step += 1
            t0 = time.perf_counter()
            result = run()
            seconds = time.perf_counter() - t0
            b = result.mu_bound
            fpr_hat = b.false_positives / b.num_nonmembers
            fnr_hat = b.false_negatives / b.num_members
            mu_hat = float(stats.norm.isf(fpr_hat) - stats.norm.ppf(fnr_hat))
            row = {
                "epsilon": eps,
                "case": name,
                "claimed_mu": result.claimed_mu,
                "canary_mu": result.canary_mu,
                "mu_estimate": mu_hat,
                "mu_lower_bound": result.mu_lower_bound,
                "tightness": result.tightness,
                "claimed_epsilon": result.claimed_epsilon,
                "epsilon_lower_bound": result.epsilon_lower_bound,
                "violation_detected": result.violation_detected,
                "audited": result.audited,
                "trials": result.num_trials,
                "seconds": seconds,
                "detail": result.to_dict(),
            }
            rows.append(row)
            print(
                f"[{step}/{total}] ε={eps:g} {name}: μ_lb={result.mu_lower_bound:.4f} "
                f"(claimed {result.claimed_mu:.4f}) in {seconds:.2f} s",
                file=sys.stderr,
            )

    naive = []
    for eps in epsilons:
        mu = plan_latent_release(
            eps, args.delta, clip_norm=args.clip_norm, dim=args.dim, adjacency=Adjacency.REPLACE_ONE
        ).mu
        exceed_eps = exceed_mu = 0
        repeats = 20
        naive_trials = 2000
        for r in range(repeats):
            e, m = naive_bounds(mu, naive_trials, args.seed + 100 + r)
            exceed_mu += m > mu
            exceed_eps += e > eps
        naive.append(
            {
                "epsilon": eps,
                "claimed_mu": mu,
                "trials": naive_trials,
                "repeats": repeats,
                "naive_mu_exceeds_claim": exceed_mu,
                "naive_epsilon_exceeds_claim": exceed_eps,
            }
        )

    # Throughput of the real release code and of the two simulation modes at the first ε.
    plan = plan_latent_release(
        epsilons[0], args.delta, clip_norm=args.clip_norm, dim=args.dim,
        adjacency=Adjacency.REPLACE_ONE,
    )  # fmt: skip
    throughput = {}
    n = max(2000, real_trials // 10)
    t0 = time.perf_counter()
    audit_latent_release_code(plan, trials=AuditTrials(n, max(100, n // 4), seed=args.seed))
    seconds = time.perf_counter() - t0
    throughput[SimulationMode.RELEASE_CODE.value] = {
        "trials": 2 * (n + max(100, n // 4)),
        "seconds": seconds,
    }
    for mode, sampler, n in (
        (SimulationMode.SUFFICIENT_STATISTIC, None, trials),
        (SimulationMode.FULL_RELEASE, gaussian_noise, max(2000, trials // 40)),
    ):
        t0 = time.perf_counter()
        audit_latent_release(
            plan, mode=mode, noise_sampler=sampler,
            trials=AuditTrials(n, max(100, n // 4), seed=args.seed),
        )  # fmt: skip
        seconds = time.perf_counter() - t0
        throughput[mode.value] = {"trials": 2 * (n + max(100, n // 4)), "seconds": seconds}

    header = (
        f"{'ε':>5} {'case':<11} {'claimed μ':>9} {'μ̂':>7} {'μ_lb':>7} {'μ_lb/μ':>7} "
        f"{'claimed ε':>9} {'ε_lb':>7} {'verdict':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        verdict = "VIOLATION" if row["violation_detected"] else "ok"
        print(
            f"{row['epsilon']:>5g} {row['case']:<11} {row['claimed_mu']:>9.4f} "
            f"{row['mu_estimate']:>7.4f} {row['mu_lower_bound']:>7.4f} {row['tightness']:>7.3f} "
            f"{row['claimed_epsilon']:>9.3f} {row['epsilon_lower_bound']:>7.3f} {verdict:>10}"
        )
    print()
    for name in ("privfed", "half-noise", "simulated", "paper-4.1"):
        row = next(r for r in rows if r["case"] == name)
        print(f"{name} ({row['trials']} trials): {row['audited']}")
    print()
    print("Naive bound (best threshold on the evaluation data, raw rates, δ ignored):")
    for item in naive:
        print(
            f"  ε={item['epsilon']:g}: exceeds the correct claim in "
            f"{item['naive_mu_exceeds_claim']}/{item['repeats']} runs (μ), "
            f"{item['naive_epsilon_exceeds_claim']}/{item['repeats']} runs (ε), "
            f"{item['trials']} trials each"
        )
    print()
    for label, info in throughput.items():
        rate = info["trials"] / info["seconds"]
        kind = "real release" if label == SimulationMode.RELEASE_CODE.value else "simulation"
        print(f"{kind} {label}: {info['trials']} trials in {info['seconds']:.2f} s ({rate:,.0f}/s)")
    print(f"total {time.perf_counter() - started:.1f} s")

    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": "self_audit",
        "settings": {
            "epsilons": epsilons,
            "delta": args.delta,
            "dim": args.dim,
            "clip_norm": args.clip_norm,
            "trials": trials,
            "calibration_trials": cal,
            "real_trials": real_trials,
            "real_calibration_trials": real_cal,
            "significance": args.significance,
            "seed": args.seed,
            "adjacency": "replace-one",
        },
        "rows": rows,
        "naive_baseline": naive,
        "throughput": throughput,
    }
    (RESULTS / "self_audit.json").write_text(json.dumps(document, indent=2, allow_nan=False))
    _plot(rows, epsilons)
    print(f"wrote {RESULTS / 'self_audit.json'} and {RESULTS / 'self_audit.png'}")
    return 0


def _plot(rows: list[dict[str, object]], epsilons: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    x = np.arange(len(epsilons))
    width = 0.2
    claimed = [next(r["claimed_mu"] for r in rows if r["epsilon"] == e) for e in epsilons]
    ax.bar(x - 1.5 * width, claimed, width, label="claimed μ", color="0.6")
    for offset, case, colour in ((-0.5, "privfed", "C0"), (0.5, "half-noise", "C3"),
                                 (1.5, "paper-4.1", "C2")):  # fmt: skip
        values = [
            next(r["mu_lower_bound"] for r in rows if r["epsilon"] == e and r["case"] == case)
            for e in epsilons
        ]
        kind = "simulated" if case == "paper-4.1" else "real release code"
        ax.bar(x + offset * width, values, width, label=f"μ_lb ({case}, {kind})", color=colour)
    ax.set_xticks(x, [f"ε={e:g}" for e in epsilons])
    ax.set_ylabel("μ (GDP)")
    ax.set_title("Canary self-audit of the latent-statistic release")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(RESULTS / "self_audit.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
