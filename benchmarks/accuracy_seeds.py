"""Accuracy of both engines' default jobs over seeds: medians and spread, not one run.

Each seed is a whole run of the default configuration (the experimental design --
split, partition, codec fit, dropouts, sampling, classifier -- and the DP noise are
seeded by it), with the audit off to save time (it does not change any accuracy)
and the latent engine's baselines on (``privfed run --baselines``):

* latent engine (``privfed run`` defaults: digits, 20 clients, Dirichlet 0.1, PCA
  d = 8, ε = 10, δ = 1e-5, replace-one): synthetic (DP), real private data, noiseless
  synthetic;
* factory engine (``privfed run --engine factory`` defaults: single-class silos,
  Gaussian factories on a public PCA basis): factories, FedAvg, centralized.

    python benchmarks/accuracy_seeds.py [--seeds 0 1 2 3 4] [--skip-factory]

Prints median [min, max] per accuracy and writes benchmarks/results/accuracy_seeds.json
and accuracy_seeds.png.  These are the figures the README quotes.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": values,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--skip-factory", action="store_true")
    parser.add_argument("--output", type=Path, default=RESULTS / "accuracy_seeds.json")
    args = parser.parse_args()

    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.engines.factory.job import run_factory_pipeline
    from privfed.engines.latent.config import PipelineConfig
    from privfed.engines.latent.job import run_pipeline

    latent: dict[str, list[float]] = {"synthetic_dp": [], "real": [], "synthetic_nondp": []}
    factory: dict[str, list[float]] = {"factories": [], "fedavg": [], "centralized": []}
    seconds: dict[str, list[float]] = {"latent": [], "factory": []}
    for seed in args.seeds:
        start = time.perf_counter()
        config = PipelineConfig(seed=seed, noise_seed=seed, audit=False, baselines=True)
        r = run_pipeline(config).report
        seconds["latent"].append(time.perf_counter() - start)
        latent["synthetic_dp"].append(r.accuracy_synthetic)
        latent["real"].append(float(r.accuracy_real or 0.0))
        latent["synthetic_nondp"].append(float(r.accuracy_nondp_synthetic or 0.0))
        print(
            f"latent  seed {seed}: synthetic (DP) {r.accuracy_synthetic:.4f}, real "
            f"{r.accuracy_real:.4f}, noiseless synthetic {r.accuracy_nondp_synthetic:.4f} "
            f"({seconds['latent'][-1]:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        if args.skip_factory:
            continue
        start = time.perf_counter()
        f = run_factory_pipeline(FactoryPipelineConfig(seed=seed, audit=False))
        seconds["factory"].append(time.perf_counter() - start)
        factory["factories"].append(f.factory_accuracy)
        factory["fedavg"].append(f.fedavg_accuracy)
        factory["centralized"].append(float(f.centralized_accuracy or 0.0))
        print(
            f"factory seed {seed}: factories {f.factory_accuracy:.4f}, FedAvg "
            f"{f.fedavg_accuracy:.4f}, centralized {f.centralized_accuracy:.4f} "
            f"({seconds['factory'][-1]:.1f} s)",
            file=sys.stderr,
            flush=True,
        )

    out: dict[str, Any] = {
        "meta": {
            "command": "python benchmarks/accuracy_seeds.py " + " ".join(sys.argv[1:]),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(),
            "seeds": args.seeds,
            "note": "default configurations, audit off; seed = design seed = noise seed",
        },
        "latent": {k: _summary(v) for k, v in latent.items()},
        "factory": {k: _summary(v) for k, v in factory.items() if v},
        "seconds": {k: _summary(v) for k, v in seconds.items() if v},
    }
    print(f"\n{'engine / accuracy':<28} {'median':>7}  [min, max] over {len(args.seeds)} seeds")
    for engine in ("latent", "factory"):
        for name, s in out[engine].items():
            label = f"{engine} / {name}"
            print(f"{label:<28} {s['median']:>7.4f}  [{s['min']:.4f}, {s['max']:.4f}]")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    _plot(out, args.output.with_suffix(".png"))
    print(f"wrote {args.output} and {args.output.with_suffix('.png')}")


def _plot(out: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(f"{e}\n{n}", s) for e in ("latent", "factory") for n, s in out[e].items()]
    fig, ax = plt.subplots(figsize=(1.2 * len(rows) + 1, 3.2))
    for i, (_, s) in enumerate(rows):
        ax.scatter([i] * len(s["values"]), s["values"], s=12, alpha=0.6)
        ax.hlines(s["median"], i - 0.3, i + 0.3)
    ax.set_xticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.set_ylabel("test accuracy (real digits)")
    ax.set_title("accuracy over seeds (bar: median)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
