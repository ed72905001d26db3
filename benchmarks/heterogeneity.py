"""Heterogeneity and client-count invariance of the latent-statistic engine.

For each partition scheme (IID, Dirichlet α ∈ {0.01, 0.1, 1}, pathological with
2 classes per client, single-class) and each client count (2 to 200), the
private digits split is spread over the clients, every client computes its
exact fixed-point statistics, the ring vectors are summed modulo 2**64 (what
secure aggregation delivers; ``--secagg`` runs the real protocol instead, which
is slower), and the aggregate is compared BIT FOR BIT with the statistics of
all records computed at once (the baseline, same run).  With a fixed noise
seed the synthetic dataset (release, Gaussians, samples, decoded images) is
compared too.

    python benchmarks/heterogeneity.py [--clients 2 20 200] [--secagg]

Writes benchmarks/results/heterogeneity.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch

from privfed.data import load_digits, partition, split_public_private
from privfed.dp import Adjacency, PrivacyLedger
from privfed.engines.codecs import PCACodec
from privfed.engines.latent import (
    LatentStatistics,
    LatentStatisticsConfig,
    compute_latent_statistics,
    fit_class_gaussians,
    release_latent_statistics,
)
from privfed.engines.moments.planning import plan_latent_release
from privfed.secagg import run_in_memory
from privfed.secagg.primitives.fixedpoint import ring_sum

RESULTS = Path(__file__).resolve().parent / "results"
SCHEMES = [
    ("iid", {}),
    ("dirichlet-0.01", {"alpha": 0.01}),
    ("dirichlet-0.1", {"alpha": 0.1}),
    ("dirichlet-1", {"alpha": 1.0}),
    ("pathological-2", {"classes_per_client": 2}),
    ("single-class", {}),
]
NOISE_SEED = 1234


def _synthetic_digest(stats: LatentStatistics, codec: PCACodec) -> str:
    plan = plan_latent_release(
        10.0,
        1e-5,
        clip_norm=stats.config.clip_norm,
        dim=stats.config.dim,
        adjacency=Adjacency.REPLACE_ONE,
    )
    release = release_latent_statistics(stats, plan, ledger=PrivacyLedger(), seed=NOISE_SEED)
    latents, labels = fit_class_gaussians(release).sample(50, seed=0)
    images = codec.decode(torch.from_numpy(latents)).numpy()
    return hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[2, 20, 200])
    parser.add_argument("--secagg", action="store_true", help="run the real SecAgg protocol")
    args = parser.parse_args()
    torch.set_num_threads(1)
    split = split_public_private(load_digits(), public_fraction=0.15, test_fraction=0.25, seed=0)
    codec = PCACodec.fit(torch.from_numpy(np.array(split.public.images)), latent_dim=8)
    latents = codec.encode(torch.from_numpy(np.array(split.private.images))).double().numpy()
    labels = np.array(split.private.labels)
    config = LatentStatisticsConfig(
        dim=8, num_classes=10, clip_norm=codec.default_clip_norm, max_records=len(labels)
    )
    start = time.perf_counter()
    reference = compute_latent_statistics(
        latents, labels, num_classes=10, clip_norm=config.clip_norm, config=config
    )
    reference_digest = _synthetic_digest(reference, codec)
    print(f"baseline: all {len(labels)} records at once ({time.perf_counter() - start:.3f} s)")
    rows = []
    total = len(SCHEMES) * len(args.clients)
    for scheme, options in SCHEMES:
        name = scheme if scheme == "single-class" else scheme.split("-")[0]
        for n_clients in args.clients:
            if (
                name in ("pathological", "single-class")
                and n_clients * options.get("classes_per_client", 1) < 10
            ):
                continue
            t0 = time.perf_counter()
            parts = partition(labels, scheme=name, num_clients=n_clients, seed=7, **options)
            vectors = [
                compute_latent_statistics(
                    latents[p],
                    labels[p],
                    num_classes=10,
                    clip_norm=config.clip_norm,
                    config=config,
                ).to_ring_vector()
                for p in parts
            ]
            summed = (
                run_in_memory(vectors, threshold=n_clients // 2 + 1)
                if args.secagg
                else ring_sum(vectors)
            )
            aggregate = LatentStatistics.from_ring_vector(summed, config)
            row = {
                "scheme": scheme,
                "clients": n_clients,
                "empty_clients": int(sum(p.size == 0 for p in parts)),
                "bit_identical": aggregate == reference,
                "synthetic_identical": _synthetic_digest(aggregate, codec) == reference_digest,
                "seconds": time.perf_counter() - t0,
            }
            rows.append(row)
            print(f"  [{len(rows)}/{total}] {scheme} x {n_clients} done")
    print(
        f"\n{'scheme':<16} {'clients':>7} {'empty':>6} {'stats identical':>16} "
        f"{'synthetic identical':>20} {'seconds':>8}"
    )
    for r in rows:
        print(
            f"{r['scheme']:<16} {r['clients']:>7} {r['empty_clients']:>6} "
            f"{r['bit_identical']!s:>16} {r['synthetic_identical']!s:>20} {r['seconds']:8.2f}"
        )
    ok = all(r["bit_identical"] and r["synthetic_identical"] for r in rows)
    print(f"\nall identical: {ok}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "heterogeneity.json"
    out.write_text(json.dumps({"secagg": args.secagg, "rows": rows, "all_identical": ok}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
