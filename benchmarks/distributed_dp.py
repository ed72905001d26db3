"""Distributed DP against central DP: noise in the delivered total, accuracy, client cost.

Three parts, all at δ = 1e-5 on digits (PCA d = 8, 10 classes, R = 3·√8, replace-one),
secure-aggregation threshold t = n//2 + 1, no client assumed corrupted:

1. **Noise** (exact, from the plans; no sampling error): the std of the noise in the
   delivered total relative to the central model's std at the same (ε, δ), for every
   survivor count u in [t, n] that secure aggregation accepts, for the distributed
   discrete Gaussian (independent noise) and the distributed Skellam (independent, and
   with secret-shared noise layers that remove the dropout excess).  Goal: <= 1.15 for
   every u with excess removal.
2. **Accuracy** of the classifier trained on the synthetic data, central /
   distributed-gaussian / distributed-skellam, whole ``privfed run`` jobs with and
   without the default dropouts (10 %: half before, half after the masked input).
   Goal: within 1 point of central at ε = 10.
3. **Client cost**: seconds a client spends drawing and adding its noise (its sampler
   tables built once, as in its own process), against its secure-aggregation seconds in
   the same round, at d = 8 (the default) and d = 32.  Goal: <= 10 %.

    python benchmarks/distributed_dp.py [--epsilons 1 3 10] [--clients 20 200]
        [--accuracy-clients 20] [--seeds 0 1] [--cost-dims 8 32] [--no-accuracy]

Prints a table per part and writes benchmarks/results/distributed_dp.json and .png.
The accuracy part runs whole jobs (about 2-5 s each at 20 clients); at 200 clients the
layered round shares L = n - t seeds per client with every peer, so it runs only with
``--accuracy-clients 200`` (minutes).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = ("central", "distributed-gaussian", "distributed-skellam")


def noise_part(epsilons: list[float], clients: list[int]) -> list[dict[str, Any]]:
    from privfed.dp import Adjacency
    from privfed.engines.latent.distributed import plan_distributed_noise

    rows = []
    clip = 3.0 * math.sqrt(8.0)
    for eps in epsilons:
        for n in clients:
            t = n // 2 + 1
            for model, layers in (
                ("distributed-gaussian", False),
                ("distributed-skellam", False),
                ("distributed-skellam", True),
            ):
                start = time.perf_counter()
                plan = plan_distributed_noise(
                    model,
                    eps,
                    1e-5,
                    clip_norm=clip,
                    dim=8,
                    num_classes=10,
                    adjacency=Adjacency.REPLACE_ONE,
                    num_clients=n,
                    threshold=t,
                    layers=layers,
                )
                central = plan.central.noise_std_sum
                ratios = {u: plan.delivered_stds(u)[0] / central for u in range(t, n + 1)}
                row = {
                    "epsilon": eps,
                    "clients": n,
                    "threshold": t,
                    "model": model,
                    "layers": plan.layers,
                    "fractional_bits": plan.spec.bits,
                    "ratio_at_threshold": ratios[t],
                    "ratio_no_dropout": ratios[n],
                    "ratio_max_over_survivor_sets": max(ratios.values()),
                    "calibration_vs_central": math.sqrt(plan.noise.scale),
                    "log_wrap_probability_bound": plan.log_wrap_probability,
                    "plan_seconds": time.perf_counter() - start,
                }
                rows.append(row)
                print(
                    f"  eps={eps:<4g} n={n:<4} {model:<21} layers={plan.layers:<3} "
                    f"std/central: at t {row['ratio_at_threshold']:.3f}, "
                    f"no dropout {row['ratio_no_dropout']:.3f}, "
                    f"max over u {row['ratio_max_over_survivor_sets']:.3f}",
                    flush=True,
                )
    return rows


def accuracy_part(
    epsilons: list[float], clients: list[int], seeds: list[int]
) -> list[dict[str, Any]]:
    from privfed.engines.latent.config import PipelineConfig
    from privfed.engines.latent.job import run_pipeline

    rows = []
    total = len(epsilons) * len(clients) * 2 * len(MODELS) * len(seeds)
    done = 0
    for n in clients:
        for eps in epsilons:
            for dropout in (0.0, 0.1):
                for model in MODELS:
                    for seed in seeds:
                        start = time.perf_counter()
                        config = PipelineConfig(
                            num_clients=n,
                            epsilon=eps,
                            dropout_rate=dropout,
                            noise=model,
                            seed=seed,
                            noise_seed=seed,
                            audit=False,
                            num_threads=1,
                        )
                        result = run_pipeline(config)
                        r = result.report
                        wall = time.perf_counter() - start
                        secs = r.seconds
                        per_client_stats = secs.get("clients", 0.0) / n
                        noise_s = secs.get("client_noise_mean", 0.0)
                        row: dict[str, Any] = {
                            "clients": n,
                            "epsilon": eps,
                            "dropout_rate": dropout,
                            "model": model,
                            "seed": seed,
                            "accuracy": r.accuracy_synthetic,
                            "noise_std_sum_delivered": result.release.noise_std_sum,
                            "layers": 0 if r.distributed is None else r.distributed["noise_layers"],
                            "client_noise_seconds": noise_s,
                            "client_stats_seconds": per_client_stats,
                            "secagg_seconds_total": secs.get("secagg", 0.0),
                            "wall_seconds": wall,
                        }
                        if r.distributed is not None:
                            row["delivered_vs_central_std"] = r.distributed[
                                "delivered_vs_central_std"
                            ]
                        rows.append(row)
                        done += 1
                        print(
                            f"  [{done}/{total}] n={n} eps={eps:g} dropout={dropout:g} "
                            f"{model:<21} seed={seed} acc={r.accuracy_synthetic:.4f} "
                            f"({wall:.1f}s)",
                            flush=True,
                        )
    return rows


def cost_part(clients: int, epsilon: float, dims: list[int]) -> list[dict[str, Any]]:
    """Client seconds: noise vs. protocol, from one instrumented round per model and dimension.

    Every client's first noise call includes building its sampler tables (once per client
    process), so the mean over clients here counts one build per client.
    """
    import numpy as np

    from privfed.dp import Adjacency
    from privfed.dp import samplers as dp_samplers
    from privfed.engines.latent.distributed import (
        add_client_noise,
        exact_ring_vector,
        plan_distributed_noise,
    )
    from privfed.engines.latent.statistics import LatentStatistics
    from privfed.secagg import run_protocol

    rows = []
    for dim, (model, layers) in (
        (d, m)
        for d in dims
        for m in (
            ("distributed-gaussian", False),
            ("distributed-skellam", False),
            ("distributed-skellam", True),
        )
    ):
        plan = plan_distributed_noise(
            model,
            epsilon,
            1e-5,
            clip_norm=3.0 * math.sqrt(dim),
            dim=dim,
            num_classes=10,
            adjacency=Adjacency.REPLACE_ONE,
            num_clients=clients,
            threshold=clients // 2 + 1,
            layers=layers,
        )
        zero = exact_ring_vector(LatentStatistics.zeros(plan.spec))
        seeds = [
            [bytes([i % 256, j % 256]) * 16 for j in range(plan.layers)] for i in range(clients)
        ]
        noise_seconds = []
        vectors = []
        for i in range(clients):
            # Each client is its own process: it builds its sampler tables once.
            dp_samplers._poisson_table.cache_clear()
            dp_samplers._gaussian_table.cache_clear()
            start = time.perf_counter()
            vectors.append(add_client_noise(zero, plan, layer_seeds=seeds[i]))
            noise_seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        report = run_protocol(
            vectors,
            threshold=plan.threshold,
            noise_layers=plan.layers,
            noise_seeds=seeds if plan.layers else None,
        )
        wall = time.perf_counter() - start
        protocol = report.mean_client_seconds
        noise = float(np.mean(noise_seconds))
        rows.append(
            {
                "model": model,
                "layers": plan.layers,
                "clients": clients,
                "latent_dim": dim,
                "values_per_client": plan.spec.num_values,
                "client_noise_seconds": noise,
                "client_protocol_seconds": protocol,
                "noise_share_of_client_seconds": noise / (noise + protocol),
                "round_wall_seconds": wall,
            }
        )
        print(
            f"  d={dim:<3} {model:<21} layers={plan.layers:<3} noise {noise * 1e3:.1f} ms, "
            f"protocol {protocol * 1e3:.1f} ms per client -> noise share "
            f"{100 * noise / (noise + protocol):.1f} %",
            flush=True,
        )
    return rows


def plot(noise: list[dict[str, Any]], accuracy: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    for n in sorted({r["clients"] for r in noise}):
        for model, layers, style in (
            ("distributed-gaussian", 0, "o-"),
            ("distributed-skellam", 0, "s--"),
            ("distributed-skellam", 1, "^-"),
        ):
            sel = [
                r
                for r in noise
                if r["clients"] == n and r["model"] == model and (r["layers"] > 0) == bool(layers)
            ]
            if not sel:
                continue
            label = f"{model.split('-')[1]}{' + layers' if layers else ''}, n={n}"
            ax.plot(
                [r["epsilon"] for r in sel],
                [r["ratio_max_over_survivor_sets"] for r in sel],
                style,
                label=label,
            )
    ax.axhline(1.15, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("max over accepted survivor sets of std / central std")
    ax.set_title("noise in the delivered total")
    ax.legend(fontsize=7)
    ax = axes[1]
    if accuracy:
        keys = sorted({(r["clients"], r["dropout_rate"]) for r in accuracy})
        for model, marker in zip(MODELS, "osv", strict=True):
            for n, dropout in keys:
                sel = [
                    r
                    for r in accuracy
                    if r["model"] == model and r["clients"] == n and r["dropout_rate"] == dropout
                ]
                eps = sorted({r["epsilon"] for r in sel})
                acc = [
                    statistics.mean(r["accuracy"] for r in sel if r["epsilon"] == e) for e in eps
                ]
                ax.plot(eps, acc, marker=marker, label=f"{model}, n={n}, dropout={dropout:g}")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("synthetic-trained accuracy")
        ax.legend(fontsize=6)
    ax.set_title("accuracy on real test data")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0, 10.0])
    parser.add_argument("--clients", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--accuracy-clients", type=int, nargs="+", default=[20])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--no-accuracy", action="store_true")
    parser.add_argument("--cost-dims", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--output", type=Path, default=RESULTS / "distributed_dp.json")
    args = parser.parse_args()

    print("1. noise in the delivered total (exact, from the plans)", flush=True)
    noise = noise_part(args.epsilons, args.clients)
    print("2. client cost of noise sampling (one round per model, 20 clients)", flush=True)
    cost = cost_part(20, 10.0, args.cost_dims)
    accuracy: list[dict[str, Any]] = []
    if not args.no_accuracy:
        print("3. accuracy of the synthetic-trained classifier (whole jobs)", flush=True)
        accuracy = accuracy_part(args.epsilons, args.accuracy_clients, args.seeds)
    layered = [r for r in noise if r["layers"] > 0]
    summary: dict[str, Any] = {
        "max_ratio_with_excess_removal": max(r["ratio_max_over_survivor_sets"] for r in layered)
        if layered
        else None,
        "max_noise_share_of_client_seconds": max(r["noise_share_of_client_seconds"] for r in cost),
    }
    if accuracy:
        gaps = {}
        for n in args.accuracy_clients:
            for dropout in (0.0, 0.1):
                at10 = [
                    r
                    for r in accuracy
                    if r["epsilon"] == 10.0 and r["clients"] == n and r["dropout_rate"] == dropout
                ]
                if not at10:
                    continue
                central = statistics.mean(r["accuracy"] for r in at10 if r["model"] == "central")
                for model in MODELS[1:]:
                    acc = statistics.mean(r["accuracy"] for r in at10 if r["model"] == model)
                    gaps[f"n={n},dropout={dropout:g},{model}"] = acc - central
        summary["accuracy_minus_central_at_eps10"] = gaps
    print("summary:", json.dumps(summary, indent=1), flush=True)
    out = {
        "benchmark": "distributed_dp",
        "command": " ".join(["python", *sys.argv]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "settings": {
            "dataset": "digits",
            "codec": "pca",
            "latent_dim": 8,
            "delta": 1e-5,
            "adjacency": "replace-one",
            "threshold": "n//2 + 1",
            "assumed_corrupted": 0,
            "seeds": args.seeds,
        },
        "noise": noise,
        "cost": cost,
        "accuracy": accuracy,
        "summary": summary,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=1) + "\n")
    plot(noise, accuracy, args.output.with_suffix(".png"))
    print(f"wrote {args.output} and {args.output.with_suffix('.png')}")


if __name__ == "__main__":
    main()
