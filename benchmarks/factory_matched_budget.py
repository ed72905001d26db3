"""The centralized bound at the synthetic side's optimizer budget (issue #28's item 2).

Usage:
    python benchmarks/factory_matched_budget.py            # seeds 0, 1, 2
    python benchmarks/factory_matched_budget.py --seeds 0  # one seed

``factory_privacy.py`` trains the downstream MLP 10 epochs on 2,600 synthetic
images per class, while its centralized baseline trains the same MLP 10 epochs
on the pooled private records (about 650 per class): the synthetic side takes
about four times the optimizer steps.  This script trains the centralized MLP
on the same split (``load_partitions`` of the factory job, single-class silos,
the seed's split) for 10 epochs and for the epochs that give the synthetic
side's step count (``epochs × 2,600 × classes / private records``, rounded
up), so the synthetic-to-real gap can be read at equal epochs and at equal
steps.

Output: stdout and ``benchmarks/results/factory_matched_budget.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from classifier_speed import make_mnist_like

RESULTS = Path(__file__).resolve().parent / "results"
SYNTHETIC_PER_CLASS = 2600
EPOCHS = 10


def _run(npz: Path, seed: int) -> dict[str, object]:
    import torch

    from privfed.engines.classifier import evaluate_classifier
    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.engines.factory.job import load_partitions, train_downstream

    base = FactoryPipelineConfig(
        dataset=str(npz), scenario="single-class", classifier="mlp",
        classifier_epochs=EPOCHS, seed=seed, num_threads=1,
    )  # fmt: skip
    num_classes, split, _parts = load_partitions(base)
    images = torch.from_numpy(np.array(split.private.images))
    labels = torch.from_numpy(np.array(split.private.labels))
    test_x = torch.from_numpy(np.array(split.test.images))
    test_y = torch.from_numpy(np.array(split.test.labels))
    matched = math.ceil(EPOCHS * SYNTHETIC_PER_CLASS * num_classes / len(labels))
    row: dict[str, object] = {"seed": seed, "private_records": len(labels)}
    for name, epochs in (("equal_epochs", EPOCHS), ("equal_steps", matched)):
        config = FactoryPipelineConfig(
            dataset=str(npz), scenario="single-class", classifier="mlp",
            classifier_epochs=epochs, seed=seed, num_threads=1,
        )  # fmt: skip
        start = time.perf_counter()
        model = train_downstream(config, images, labels, num_classes)
        accuracy = evaluate_classifier(model, test_x, test_y)
        row[name] = {"epochs": epochs, "accuracy": accuracy,
                     "seconds": round(time.perf_counter() - start, 1)}  # fmt: skip
        print(f"seed {seed} centralized {name} ({epochs} epochs): {accuracy:.4f}", file=sys.stderr)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--tag", default="factory_matched_budget")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        npz = make_mnist_like(Path(tmp) / "mnist_like.npz")
        rows = [_run(npz, seed) for seed in seeds]
    summary = {}
    for name in ("equal_epochs", "equal_steps"):
        values = [float(r[name]["accuracy"]) for r in rows]  # type: ignore[index]
        summary[name] = {"mean": float(np.mean(values)), "min": min(values),
                         "max": max(values), "n": len(values)}  # fmt: skip
    result = {
        "setting": {
            "dataset": "classifier_speed.make_mnist_like: 10,000 28x28 images from the bundled "
            "8x8 digits (MNIST-like, not MNIST)",
            "classifier": "mlp",
            "synthetic_per_class": SYNTHETIC_PER_CLASS,
            "synthetic_epochs": EPOCHS,
            "partition": "single-class (the pooled data is the same for every partition)",
            "seeds": seeds,
        },
        "rows": rows,
        "summary": summary,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": 1},
    }
    print(json.dumps(summary, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
