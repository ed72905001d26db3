"""Factory-matrix engine on digits: accuracy, communication, training cost, unlearning.

Usage:
    python benchmarks/factory.py                 # probabilistic-PCA factories (~1-2 min)
    python benchmarks/factory.py --edm-steps 300 # adds an EDM diffusion-factory row (slow on CPU)

Figures (written to benchmarks/results/factory.json and factory.png):

1. Single-class silos (10 clients, one digit each): test accuracy of a
   classifier trained on factory-synthetic data vs FedAvg on the same split
   (same SmallCNN, 20 rounds x 1 local epoch, SGD+momentum) vs centralized
   training on the pooled private data; bytes shipped per client; training
   seconds per factory.  Gaussian factories in the default public-PCA basis
   (codec fitted on the public split) and, as the baseline, the private-PCA
   basis fitted on each client's own images.
1b. Membership-inference audit of every factory (the pipeline's audit stage):
   members = the factory's training images, non-members = held-out test
   images of the class; AUC (mean and max over factories, DeLong 95 %
   interval of the worst one), TPR at 10 % FPR, and the largest held-out-
   threshold ε lower bound (δ = 1e-5, family-wise α = 0.05, Bonferroni over
   factories and attacks).
2. Unlearning (Dirichlet α=0.5, 10 clients): remove client 0 from the matrix
   (factories and their synthetic samples; affected classes are redrawn),
   retrain the classifier on the buffer, and compare with a matrix rebuilt
   from scratch without client 0 (same seeds).  Exactness is checked bit for
   bit; the accuracy and wall-clock of both routes are reported.

Torch runs on one intra-op thread: on a shared 2-core machine the default
(one thread per core) makes these tiny models many times slower.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from privfed.engines.classifier import evaluate_classifier, train_classifier
from privfed.engines.factory import EDMTrainingConfig, FactoryMatrix
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import make_factory, run_factory_pipeline
from privfed.progress import ProgressEvent

RESULTS = Path(__file__).resolve().parent / "results"


def _progress(prefix: str):  # type: ignore[no-untyped-def]
    last = {"stage": ""}

    def callback(event: ProgressEvent) -> None:
        stage, done, total = event.stage, event.done, event.total
        if stage != last["stage"] or done == total or stage == "factories":
            print(f"  [{prefix}] {stage}: {done}/{total}", file=sys.stderr, flush=True)
            last["stage"] = stage

    return callback


def _rebuild_without(report, client: int) -> tuple[FactoryMatrix, float]:  # type: ignore[no-untyped-def]
    """Retrain-from-scratch route: re-fit every other client's factories."""
    from privfed.data import load_digits, partition, split_public_private

    cfg = report.config
    data = load_digits()
    split = split_public_private(
        data, public_fraction=0.05, test_fraction=cfg.test_fraction, seed=cfg.seed
    )
    parts = partition(
        split.private.labels,
        scheme="dirichlet",
        num_clients=cfg.num_clients,
        seed=cfg.seed,
        alpha=cfg.dirichlet_alpha,
    )
    images = torch.tensor(split.private.images)
    labels = torch.tensor(split.private.labels)
    start = time.perf_counter()
    matrix = FactoryMatrix()
    for k, idx in enumerate(parts):
        if k == client:
            continue
        idx_t = torch.from_numpy(idx)
        for c in range(data.num_classes):
            cls_idx = idx_t[labels[idx_t] == c]
            if cls_idx.numel() >= cfg.min_records_per_factory:
                factory = make_factory(cfg, c, k).fit(images[cls_idx])
                matrix.register(c, k, factory, int(cls_idx.numel()))
    matrix.synthesize(cfg.synthetic_per_class, seed=cfg.seed)
    return matrix, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--edm-steps", type=int, default=0, help="train EDM factories too (0: skip)"
    )
    parser.add_argument("--epochs", type=int, default=20, help="downstream classifier epochs")
    parser.add_argument("--rounds", type=int, default=20, help="FedAvg rounds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    RESULTS.mkdir(parents=True, exist_ok=True)

    base = FactoryPipelineConfig(
        classifier_epochs=args.epochs, fedavg_rounds=args.rounds, seed=args.seed
    )
    rows = []
    print("single-class silos, probabilistic-PCA factories", file=sys.stderr)
    gauss = run_factory_pipeline(base, progress=_progress("pca"))
    rows.append(("Gaussian factories, public PCA", gauss))
    print("single-class silos, private-PCA factories (baseline basis)", file=sys.stderr)
    private = run_factory_pipeline(
        replace(base, gaussian_basis="private-pca", centralized=False, fedavg_rounds=1),
        progress=_progress("private-pca"),
    )
    rows.append(("Gaussian factories, private PCA", private))
    if args.edm_steps:
        print(f"single-class silos, EDM factories ({args.edm_steps} steps)", file=sys.stderr)
        edm_cfg = replace(
            base,
            factory="edm",
            centralized=False,
            edm_training=EDMTrainingConfig(steps=args.edm_steps, batch_size=64),
        )
        rows.append(
            ("EDM diffusion factories", run_factory_pipeline(edm_cfg, progress=_progress("edm")))
        )

    # Unlearning on a Dirichlet split (a client contributes to several classes).
    print("dirichlet split: unlearning client 0 vs retraining from scratch", file=sys.stderr)
    dcfg = replace(base, scenario="dirichlet", centralized=False, fedavg_rounds=1)
    drep = run_factory_pipeline(dcfg, progress=_progress("dirichlet"))
    matrix = drep.matrix
    start = time.perf_counter()
    cert = matrix.remove_client(0)
    buffer = matrix.buffer
    clf = train_classifier(
        buffer.images, buffer.labels, num_classes=10, epochs=args.epochs, seed=args.seed
    )
    unlearn_seconds = time.perf_counter() - start
    acc_unlearned = evaluate_classifier(clf, drep.test_images, drep.test_labels)
    rebuilt, rebuild_seconds = _rebuild_without(drep, 0)
    start = time.perf_counter()
    clf2 = train_classifier(
        rebuilt.buffer.images,
        rebuilt.buffer.labels,
        num_classes=10,
        epochs=args.epochs,
        seed=args.seed,
    )
    rebuild_seconds += time.perf_counter() - start
    acc_rebuilt = evaluate_classifier(clf2, drep.test_images, drep.test_labels)
    identical = torch.equal(buffer.images, rebuilt.buffer.images) and torch.equal(
        buffer.labels, rebuilt.buffer.labels
    )

    print()
    title = "single-class silos (digits, 10 clients)"
    print(f"{title:<34}{'accuracy':>10}{'bytes/client':>15}{'s/factory':>11}")
    print("-" * 70)
    for name, rep in rows:
        mean_s = sum(rep.factory_seconds) / len(rep.factory_seconds)
        print(
            f"{name:<34}{rep.factory_accuracy:>10.4f}{rep.factory_bytes_per_client:>15,.0f}{mean_s:>11.3f}"
        )
    fed_name = f"FedAvg ({args.rounds} rounds)"
    fed_bytes = gauss.fedavg_bytes_per_client
    print(f"{fed_name:<34}{gauss.fedavg_accuracy:>10.4f}{fed_bytes:>15,.0f}{'-':>11}")
    central = gauss.centralized_accuracy or 0.0
    print(f"{'centralized (pooled private data)':<34}{central:>10.4f}{'-':>15}{'-':>11}")
    print()
    print("membership-inference audit (members: training images; non-members: held-out test)")
    head = f"{'factories':<34}{'attack':<16}{'AUC mean':>9}{'AUC max [95% CI]':>26}"
    print(f"{head}{'TPR@10%FPR':>12}{'max eps_lb':>12}")
    print("-" * 109)
    for name, rep in rows:
        if rep.audit is None:
            continue
        for attack, summ in rep.audit.summary().items():
            worst = max(
                (a for f in rep.audit.factories for a in f.attacks if a.attack == attack),
                key=lambda a: a.metrics.auc.estimate,
            )
            auc = worst.metrics.auc
            tpr = worst.metrics.tpr_at_fpr[0].tpr.estimate
            ci = f"{auc.estimate:.3f} [{auc.lower:.3f}, {auc.upper:.3f}]"
            print(
                f"{name:<34}{attack:<16}{summ['mean_auc']:>9.3f}{ci:>26}{tpr:>12.3f}"
                f"{summ['max_epsilon_lower_bound']:>12.3f}"
            )
    print(
        "  (AUC max and TPR are of the worst factory; eps_lb at delta=1e-5, family-wise alpha=0.05)"
    )
    print()
    print("unlearning client 0 (Dirichlet α=0.5)")
    print(
        f"  factories removed: {len(cert.removed_cells)}, samples dropped: "
        f"{len(cert.dropped_sample_ids)}, redrawn: {len(cert.regenerated_sample_ids)}"
    )
    print(f"  accuracy before removal            {drep.factory_accuracy:.4f}")
    print(f"  accuracy after unlearning          {acc_unlearned:.4f}  ({unlearn_seconds:.1f} s)")
    print(f"  accuracy retrained from scratch    {acc_rebuilt:.4f}  ({rebuild_seconds:.1f} s)")
    print(f"  buffers bit-identical: {identical}")

    result = {
        "single_class": [{"method": name, **rep.to_dict()} for name, rep in rows],
        "fedavg_accuracy": gauss.fedavg_accuracy,
        "fedavg_bytes_per_client": gauss.fedavg_bytes_per_client,
        "centralized_accuracy": gauss.centralized_accuracy,
        "unlearning": {
            "config": dcfg.to_dict(),
            "accuracy_before": drep.factory_accuracy,
            "accuracy_after_unlearning": acc_unlearned,
            "accuracy_retrained_from_scratch": acc_rebuilt,
            "unlearning_seconds": unlearn_seconds,
            "retrain_from_scratch_seconds": rebuild_seconds,
            "buffers_bit_identical": identical,
            "certificate": cert.to_dict()
            | {
                "dropped_sample_ids": len(cert.dropped_sample_ids),
                "regenerated_sample_ids": len(cert.regenerated_sample_ids),
                "replacement_sample_ids": len(cert.replacement_sample_ids),
            },
        },
        "torch_threads": 1,
    }
    (RESULTS / "factory.json").write_text(json.dumps(result, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        names = [n for n, _ in rows] + ["FedAvg", "centralized"]
        accs = [r.factory_accuracy for _, r in rows] + [
            gauss.fedavg_accuracy,
            gauss.centralized_accuracy,
        ]
        ax1.bar(range(len(names)), accs, color=["tab:green"] * len(rows) + ["tab:red", "tab:gray"])
        ax1.set_xticks(range(len(names)), names, rotation=15, ha="right", fontsize=8)
        ax1.set_ylabel("test accuracy")
        ax1.set_ylim(0, 1)
        ax1.set_title("single-class silos (digits)")
        ax2.bar(
            ["before", "after unlearning", "retrained"],
            [drep.factory_accuracy, acc_unlearned, acc_rebuilt],
            color=["tab:blue", "tab:green", "tab:gray"],
        )
        ax2.set_ylim(0, 1)
        ax2.set_title("unlearning client 0 (Dirichlet 0.5)")
        fig.tight_layout()
        fig.savefig(RESULTS / "factory.png", dpi=120)
    except ImportError:  # matplotlib is optional (extra "plots")
        pass
    print(f"\nwrote {RESULTS / 'factory.json'}")


if __name__ == "__main__":
    main()
