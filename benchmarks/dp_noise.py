"""Privacy–noise trade-off of privfed's latent-release plans, and noise-sampler speed.

Run:  python benchmarks/dp_noise.py [--dim 128] [--repeats 5]

Part 1 prints, for ε in {0.5, 1, 2, 5, 10, 20} at δ = 1e-5 (REPLACE_ONE, the
paper's setting, R = 3·sqrt(d)), the noise stds of the sum and of the second
moment under our plans ("balanced" and "optimal" splits, exact joint
sensitivity, μ-GDP budget split) against the baseline: the reference paper's
Proposition 4.1 calibration (ε/2, δ/2 each, sensitivities 2R and 2R²).  It also
reports the error objective that ``split="optimal"`` minimises.

Part 2 times 838,500 draws (= 10 classes × (128 + 128² + 1) values ÷ 2, the
size of one latent release) from each CSPRNG sampler against numpy's
``default_rng().normal`` (a fast, non-cryptographic baseline).

Writes benchmarks/results/dp_noise.json and benchmarks/results/dp_noise.png.
Timings are provisional on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from privfed.dp import Adjacency, discrete_gaussian, gaussian_noise, rounded_gaussian
from privfed.engines.moments.planning import (
    paper_baseline_noise_stds,
    plan_latent_release,
    release_error_objective,
)

EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
DELTA = 1e-5
NUM_VALUES = 838_500
RESULTS = Path(__file__).resolve().parent / "results"


def noise_table(dim: int) -> list[dict[str, float]]:
    R = 3.0 * math.sqrt(dim)
    rows = []
    for eps in EPSILONS:
        base_s, base_m = paper_baseline_noise_stds(eps, DELTA, clip_norm=R)
        row: dict[str, float] = {"epsilon": eps, "baseline_sum": base_s, "baseline_second": base_m}
        row["baseline_objective"] = release_error_objective(
            base_s, base_m, 0.0, clip_norm=R, dim=dim
        )
        for split in ("balanced", "optimal"):
            plan = plan_latent_release(
                eps, DELTA, clip_norm=R, dim=dim, adjacency=Adjacency.REPLACE_ONE, split=split
            )
            row[f"{split}_sum"] = plan.noise_std_sum
            row[f"{split}_second"] = plan.noise_std_second_moment
            row[f"{split}_mu"] = plan.mu
            row[f"{split}_objective"] = release_error_objective(
                plan.noise_std_sum, plan.noise_std_second_moment, 0.0, clip_norm=R, dim=dim
            )
        rows.append(row)
        print(f"  planned epsilon={eps:g}", flush=True)
    return rows


def time_samplers(repeats: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(0)
    candidates = {
        "numpy default_rng().normal (baseline, not a CSPRNG)": lambda: rng.normal(
            scale=100.0, size=NUM_VALUES
        ),
        "gaussian_noise (ChaCha20)": lambda: gaussian_noise(NUM_VALUES, 100.0),
        "rounded_gaussian (ChaCha20)": lambda: rounded_gaussian(NUM_VALUES, 100.0),
        "discrete_gaussian (ChaCha20, CKS rejection)": lambda: discrete_gaussian(NUM_VALUES, 100.0),
        "discrete_gaussian, scale 1.0": lambda: discrete_gaussian(NUM_VALUES, 1.0),
    }
    out: dict[str, dict[str, float]] = {}
    for name, func in candidates.items():
        func()  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            func()
            times.append(time.perf_counter() - start)
        out[name] = {"median_s": statistics.median(times), "min_s": min(times)}
        print(f"  timed {name}: {out[name]['median_s'] * 1e3:.1f} ms", flush=True)
    return out


def plot(rows: list[dict[str, float]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are an optional extra
        return False
    eps = [r["epsilon"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, part, title in ((axes[0], "sum", "sum of z"), (axes[1], "second", "second moment")):
        ax.plot(eps, [r[f"baseline_{part}"] for r in rows], "k--o", label="paper Prop. 4.1")
        ax.plot(eps, [r[f"balanced_{part}"] for r in rows], "-o", label="privfed balanced")
        ax.plot(eps, [r[f"optimal_{part}"] for r in rows], "-s", label="privfed optimal")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε (δ = 1e-5, replace-one)")
        ax.set_ylabel("noise std")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=128, help="latent dimension d (default 128)")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    args = parser.parse_args()

    print(f"[1/2] noise plans, d={args.dim}, R=3*sqrt(d), delta={DELTA:g}")
    rows = noise_table(args.dim)
    print(f"[2/2] sampler timings, {NUM_VALUES:,} values, median of {args.repeats}")
    timings = time_samplers(args.repeats)

    print()
    header = (
        f"{'eps':>5} | {'paper sum':>10} {'bal sum':>10} {'ratio':>6} {'opt sum':>10} "
        f"{'ratio':>6} | {'paper M':>10} {'bal M':>10} {'ratio':>6} {'opt M':>10} {'ratio':>6} "
        f"| {'obj opt/paper':>13}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['epsilon']:>5g} | {r['baseline_sum']:>10.4g} {r['balanced_sum']:>10.4g} "
            f"{r['balanced_sum'] / r['baseline_sum']:>6.3f} {r['optimal_sum']:>10.4g} "
            f"{r['optimal_sum'] / r['baseline_sum']:>6.3f} | {r['baseline_second']:>10.4g} "
            f"{r['balanced_second']:>10.4g} {r['balanced_second'] / r['baseline_second']:>6.3f} "
            f"{r['optimal_second']:>10.4g} {r['optimal_second'] / r['baseline_second']:>6.3f} "
            f"| {r['optimal_objective'] / r['baseline_objective']:>13.3f}"
        )
    print()
    baseline_name = next(iter(timings))
    base = timings[baseline_name]["median_s"]
    print(f"{'sampler':<52} {'median ms':>10} {'x baseline':>11}")
    for name, t in timings.items():
        print(f"{name:<52} {t['median_s'] * 1e3:>10.1f} {t['median_s'] / base:>11.2f}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "dp_noise",
        "delta": DELTA,
        "dim": args.dim,
        "clip_norm": 3.0 * math.sqrt(args.dim),
        "adjacency": "replace-one",
        "noise": rows,
        "num_values": NUM_VALUES,
        "timings": timings,
        "machine": {"python": platform.python_version(), "processor": platform.processor()},
    }
    (RESULTS / "dp_noise.json").write_text(json.dumps(payload, indent=2))
    drew = plot(rows, RESULTS / "dp_noise.png")
    print(f"\nwrote {RESULTS / 'dp_noise.json'}" + (" and dp_noise.png" if drew else ""))


if __name__ == "__main__":
    main()
