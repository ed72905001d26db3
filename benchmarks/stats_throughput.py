"""Throughput of compute_latent_statistics vs a bare float64 matrix product.

Records per second of the exact fixed-point client statistics at d=128 and
10 classes on the CPU, against the floor any implementation must pay: one
float64 Gram matrix product per class on the same rows (no clipping,
quantization, integer conversion or validation).  Both run in the same process,
one after another, best of ``--repeats``.  Target: ratio >= 0.5.

    python benchmarks/stats_throughput.py [--records 50000] [--dim 128] [--threads 1]

Writes benchmarks/results/stats_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np
import torch

from privfed.models import compute_latent_statistics

RESULTS = Path(__file__).resolve().parent / "results"


def _best(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    latents = rng.normal(size=(args.records, args.dim))
    labels = rng.integers(0, args.classes, size=args.records)
    clip = 3.0 * math.sqrt(args.dim)
    z_t = torch.from_numpy(latents)
    groups = [z_t[torch.from_numpy(labels == c)] for c in range(args.classes)]

    def ours() -> None:
        compute_latent_statistics(latents, labels, num_classes=args.classes, clip_norm=clip)

    def bare() -> None:
        for rows in groups:
            _ = rows.T @ rows

    print(f"warming up ({args.records} records, d={args.dim}, {args.threads} thread(s)) ...")
    ours()
    bare()
    rows = []
    for name, fn in (("compute_latent_statistics", ours), ("bare float64 Gram per class", bare)):
        seconds = _best(fn, args.repeats)
        rows.append({"method": name, "seconds": seconds, "records_per_s": args.records / seconds})
        print(f"  measured {name}")
    ratio = rows[0]["records_per_s"] / rows[1]["records_per_s"]
    print(f"\n{'method':<30} {'seconds':>9} {'records/s':>12}")
    for r in rows:
        print(f"{r['method']:<30} {r['seconds']:9.4f} {r['records_per_s']:12.0f}")
    print(f"\nratio ours / bare = {ratio:.2f} (target >= 0.5)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "stats_throughput.json"
    out.write_text(
        json.dumps(
            {
                "records": args.records,
                "dim": args.dim,
                "classes": args.classes,
                "threads": args.threads,
                "machine": platform.machine(),
                "torch": torch.__version__,
                "rows": rows,
                "ratio": ratio,
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
