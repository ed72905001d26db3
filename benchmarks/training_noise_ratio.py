"""Distributed-DP training against central DP: delivered noise std over the central std.

For federated training with client-level DP (add/remove one client, R rounds,
δ = 1e-5, clip C = 1, t = ⌊2N/3⌋ + 1, n_C = 0) this plans the distributed Skellam
and discrete-Gaussian noise (:func:`privfed.dp.training.plan_training_noise`) at
ε = 1, 3, 8, N = 20 and 100 clients, b = 16 and 32 bits per coordinate, and reports
the delivered std of the decoded sum over the central Gaussian's (the analytic
Gaussian for the same budget over R rounds: the tightest central baseline), as the
maximum over the survivor sets ``u in [t, N]`` and at ``u = t``.  It also reports the
std an RDP-accounted central Gaussian needs (the conversion's own cost, the floor of
any RDP-accounted mechanism), the rounding inflation ``Δ₂/(C/γ)``, the grid and the
per-round wrap bound (as a natural log); and, for Skellam at 32 bits, what
adaptive clipping's noisy count (σ_b = N/20) costs the update noise.  Exact (from
the plans; no sampling).
Goal (issue 24): Skellam <= 1.1.

    python benchmarks/training_noise_ratio.py [--rounds 10] [--model-sizes 10000 8192]

Prints a table and writes benchmarks/results/training_noise_ratio.json.
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
DELTA = 1e-5


def _rdp_central_std(epsilon: float, rounds: int) -> float:
    """σ of R Gaussian rounds (sensitivity 1 each) accounted in RDP (ledger's conversion)."""
    import numpy as np

    from privfed.dp.rdp import RDP_ORDERS, rdp_epsilon

    orders = np.asarray(RDP_ORDERS)
    lo, hi = 1e-3, 1e3
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if rdp_epsilon(orders * rounds / (2.0 * mid * mid), DELTA) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


def rows(epsilons: list[float], rounds: int, sizes: list[int]) -> list[dict[str, Any]]:
    from privfed.dp.training import central_noise_std, plan_training_noise
    from privfed.dp.training_codec import noise_ratio

    out = []
    for size in sizes:
        for mechanism in ("skellam", "discrete-gaussian"):
            for n in (20, 100):
                for bits in (16, 32):
                    for eps in epsilons:
                        start = time.perf_counter()
                        plan = plan_training_noise(
                            eps, DELTA, rounds=rounds, clip_norm=1.0, model_size=size,
                            num_clients=n, threshold=(2 * n) // 3 + 1, mechanism=mechanism,
                            ring_bits=bits,
                        )  # fmt: skip
                        seconds = time.perf_counter() - start
                        ratios = [noise_ratio(plan, u) for u in range(plan.threshold, n + 1)]
                        central = central_noise_std(plan)
                        out.append(
                            {
                                "model_size": size,
                                "mechanism": mechanism,
                                "clients": n,
                                "threshold": plan.threshold,
                                "ring_bits": bits,
                                "epsilon": eps,
                                "layers": plan.layers,
                                "noise_vs_central_std": max(ratios),
                                "noise_vs_central_std_at_threshold": ratios[0],
                                "rdp_central_vs_central_std": _rdp_central_std(eps, rounds)
                                / central,
                                "rounding_inflation": plan.l2_bound / plan.norm_bound,
                                "log2_granularity": math.log2(plan.granularity),
                                "log_wrap_probability_per_round": plan.log_wrap_probability,
                                "accounted_epsilon": plan.accounted_epsilon,
                                "plan_seconds": seconds,
                            }
                        )
    return out


def adaptive_rows(epsilons: list[float], rounds: int, size: int) -> list[dict[str, Any]]:
    """Skellam with adaptive clipping (σ_b = N/20, the paper's choice) against without."""
    from privfed.dp.training import plan_training_noise
    from privfed.dp.training_codec import noise_ratio
    from privfed.errors import ParameterError

    out = []
    for n in (20, 100):
        for eps in epsilons:
            common: dict[str, Any] = {
                "rounds": rounds, "clip_norm": 1.0, "model_size": size, "num_clients": n,
                "threshold": (2 * n) // 3 + 1, "ring_bits": 32,
            }  # fmt: skip
            plain = plan_training_noise(eps, DELTA, **common)
            row: dict[str, Any] = {"clients": n, "epsilon": eps, "count_noise_std": n / 20.0}
            try:
                adaptive = plan_training_noise(eps, DELTA, count_noise_std=n / 20.0, **common)
            except ParameterError as exc:  # the count alone would spend the budget
                row["refused"] = str(exc)
            else:
                row["update_noise_vs_without"] = adaptive.delivered_std(
                    adaptive.threshold
                ) / plain.delivered_std(plain.threshold)
                row["noise_vs_central_std"] = noise_ratio(adaptive, adaptive.threshold)
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0, 8.0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--model-sizes", type=int, nargs="+", default=[10_000, 8192])
    args = parser.parse_args(argv)
    table = rows(args.epsilons, args.rounds, args.model_sizes)
    print(f"{'D':>6} {'mechanism':>17} {'N':>4} {'b':>3} {'eps':>4}  max/central  at-t  rdp-floor")
    for r in table:
        print(
            f"{r['model_size']:>6} {r['mechanism']:>17} {r['clients']:>4} {r['ring_bits']:>3} "
            f"{r['epsilon']:>4g}  {r['noise_vs_central_std']:.4f}  "
            f"{r['noise_vs_central_std_at_threshold']:.4f}  {r['rdp_central_vs_central_std']:.4f}"
        )
    doc = {
        "benchmark": "training_noise_ratio",
        "command": "python " + " ".join(["benchmarks/training_noise_ratio.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "settings": {"rounds": args.rounds, "delta": DELTA, "clip_norm": 1.0, "corrupted": 0},
        "rows": table,
        "adaptive_clipping_rows": adaptive_rows(args.epsilons, args.rounds, args.model_sizes[0]),
        "max_skellam_ratio": max(
            r["noise_vs_central_std"] for r in table if r["mechanism"] == "skellam"
        ),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "training_noise_ratio.json").write_text(json.dumps(doc, indent=2) + "\n")
    for r in doc["adaptive_clipping_rows"]:
        print("adaptive clipping:", r)
    print(f"max Skellam std/central: {doc['max_skellam_ratio']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
