"""Where the factory engine's synthetic-to-real gap comes from, on the 28×28 MNIST-like file.

Usage:
    python benchmarks/factory_gap.py            # the grid below, one seed
    python benchmarks/factory_gap.py --quick    # no CNN rows

Single-class silos (client k holds class k, so one factory per class), the
factory job's own split, public PCA codec and factories
(:func:`privfed.engines.factory.job.make_factory`).  For every setting the
downstream classifier is trained on the synthetic images and evaluated twice
on the real test split: as it is (``plain``) and after a test-time
projection through the public codec (``projected``: decode∘encode of the
test images, so train and test inputs lie on the codec's manifold).  The
centralized rows train the same classifier on the pooled private images,
plain and projected (train and test both projected).  Settings vary the
synthetic images per class (200, the job's old benchmark value, against the
pooled private count), the classifier (CNN, MLP), the latent dimension and
the mixture components, without DP and at ε = 10 and 3 (noise seeded by the
seed).  Output: a table and ``benchmarks/results/factory_gap.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

RESULTS = Path(__file__).resolve().parent / "results"


def _setting(source: str, **kw: Any) -> dict[str, Any]:
    from privfed.engines.classifier import evaluate_classifier, train_classifier
    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.engines.factory.job import load_partitions, make_factory, public_codec

    eps, seed, arch, per_class = kw["epsilon"], kw.get("seed", 0), kw["arch"], kw["per_class"]
    cfg = FactoryPipelineConfig(
        dataset=source,
        factory=kw["kind"],
        latent_dim=kw["dim"],
        epsilon=eps,
        noise_seed=None if eps is None else seed,
        mixture_components=kw.get("components", 8),
        audit=False,
        seed=seed,
    )
    start = time.perf_counter()
    classes, split, _ = load_partitions(cfg)
    x = torch.from_numpy(np.array(split.private.images))
    y = torch.from_numpy(np.array(split.private.labels))
    tx = torch.from_numpy(np.array(split.test.images))
    ty = torch.from_numpy(np.array(split.test.labels))
    codec = public_codec(cfg)
    assert codec is not None
    generator = torch.Generator().manual_seed(seed)
    images, labels = [], []
    for c in range(classes):
        factory = make_factory(cfg, c, c, codec=codec, sample_count=int((y == c).sum()))
        factory.fit(x[y == c])
        images.append(factory.sample(per_class, generator))
        labels.append(torch.full((per_class,), c))
    clf = train_classifier(
        torch.cat(images), torch.cat(labels), num_classes=classes, epochs=10, seed=seed,
        architecture=arch,
    )

    def project(v: torch.Tensor) -> torch.Tensor:
        return codec.decode(codec.encode(v))

    out = {
        **kw,
        "plain": evaluate_classifier(clf, tx, ty),
        "projected": evaluate_classifier(clf, project(tx), ty),
    }
    if kw.get("centralized"):
        for name, train, test in (("plain", x, tx), ("projected", project(x), project(tx))):
            model = train_classifier(
                train, y, num_classes=classes, epochs=10, seed=seed, architecture=arch
            )
            out[f"centralized_{name}"] = evaluate_classifier(model, test, ty)
        out["private_per_class"] = round(len(y) / classes)
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="MLP rows only")
    parser.add_argument("--npz", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from classifier_speed import make_mnist_like

    torch.set_num_threads(1)
    grid: list[dict[str, Any]] = [
        {"kind": "mixture", "dim": 64, "epsilon": None, "arch": "mlp", "per_class": 200,
         "centralized": True},
        {"kind": "mixture", "dim": 64, "epsilon": None, "arch": "mlp", "per_class": 650},
        {"kind": "mixture", "dim": 32, "epsilon": None, "arch": "mlp", "per_class": 650,
         "components": 3},
        {"kind": "mixture", "dim": 32, "epsilon": 10.0, "arch": "mlp", "per_class": 650,
         "components": 3},
        {"kind": "mixture", "dim": 32, "epsilon": 3.0, "arch": "mlp", "per_class": 650,
         "components": 3},
        {"kind": "mixture", "dim": 32, "epsilon": 3.0, "arch": "mlp", "per_class": 650,
         "components": 8},
        {"kind": "gaussian", "dim": 32, "epsilon": None, "arch": "mlp", "per_class": 650},
        {"kind": "gaussian", "dim": 32, "epsilon": 3.0, "arch": "mlp", "per_class": 650},
    ]
    if not args.quick:
        grid += [
            {"kind": "mixture", "dim": 64, "epsilon": None, "arch": "cnn", "per_class": 200},
            {"kind": "mixture", "dim": 64, "epsilon": None, "arch": "cnn", "per_class": 650},
        ]
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source = str(args.npz or make_mnist_like(Path(tmp) / "mnist_like.npz"))
        for setting in grid:
            row = _setting(source, **setting)
            rows.append(row)
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "setting": {
            "scenario": "single-class",
            "npz": "classifier_speed.make_mnist_like (10,000 28x28, from the bundled digits)",
            "classifier_epochs": 10,
            "seed": 0,
        },
        "rows": rows,
        "max_abs_projection_effect": max(abs(r["projected"] - r["plain"]) for r in rows),
        "seconds_total": round(time.perf_counter() - started, 1),
        "machine": {"platform": platform.platform(), "torch_threads": 1},
    }
    (RESULTS / "factory_gap.json").write_text(json.dumps(out, indent=2))
    print(f"max |projected - plain| = {out['max_abs_projection_effect']:.4f}")


if __name__ == "__main__":
    main()
