"""Distributed block noise against central noise: std ratios of the latent job's plans.

For the default latent job (digits, PCA d = 8, its clip norm R = 1.8358, 10 classes,
20 clients, t = 11, no client assumed corrupted, δ = 1e-5) this plans the distributed
Skellam and discrete-Gaussian noise at ε = 1, 3, 8, 10, 25.9 under both adjacencies and
reports the calibrated noise std over the central std (``sqrt(κ)``, the same for every
block), the delivered sum std at the threshold over the central one, the grids and the
wrap bound (as a logarithm).  Exact (from the plans; no sampling).  Goal: <= 1.1.

    python benchmarks/skellam_blocks.py [--epsilons 1 3 8 10 25.9]

Prints a table and writes benchmarks/results/skellam_blocks.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
CLIP = 1.8357558252993813  # the digits job's PCA clip norm (release.json of `privfed run`)


def rows(epsilons: list[float]) -> list[dict[str, Any]]:
    from privfed.dp import Adjacency
    from privfed.engines.latent.distributed import plan_distributed_noise

    out = []
    for adjacency in (Adjacency.ADD_REMOVE, Adjacency.REPLACE_ONE):
        for model in ("distributed-skellam", "distributed-gaussian"):
            for eps in epsilons:
                start = time.perf_counter()
                plan = plan_distributed_noise(
                    model,
                    eps,
                    1e-5,
                    clip_norm=CLIP,
                    dim=8,
                    num_classes=10,
                    adjacency=adjacency,
                    num_clients=20,
                    threshold=11,
                )
                row = {
                    "adjacency": adjacency.value,
                    "model": model,
                    "epsilon": eps,
                    "noise_vs_central_std": math.sqrt(plan.noise.scale),
                    "sum_std_at_threshold_vs_central": plan.delivered_stds(plan.threshold)[0]
                    / plan.central.noise_std_sum,
                    "fractional_bits": plan.spec.bits,
                    "count_bits": plan.count_bits,
                    "log_wrap_probability_bound": plan.log_wrap_probability,
                    "plan_seconds": time.perf_counter() - start,
                }
                out.append(row)
                print(
                    f"  {adjacency.value:<11} {model:<21} eps={eps:<5g} "
                    f"std/central {row['noise_vs_central_std']:.4f}  f={plan.spec.bits} "
                    f"c={plan.count_bits}  {plan.wrap_probability_text}",
                    flush=True,
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0, 8.0, 10.0, 25.9])
    args = parser.parse_args(argv)
    table = rows(args.epsilons)
    doc = {
        "benchmark": "skellam_blocks",
        "command": "python " + " ".join(["benchmarks/skellam_blocks.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "settings": {
            "dataset": "digits",
            "latent_dim": 8,
            "clip_norm": CLIP,
            "num_classes": 10,
            "clients": 20,
            "threshold": 11,
            "delta": 1e-5,
        },
        "rows": table,
        "max_skellam_ratio": max(
            r["noise_vs_central_std"] for r in table if r["model"] == "distributed-skellam"
        ),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "skellam_blocks.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"max Skellam std/central: {doc['max_skellam_ratio']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
