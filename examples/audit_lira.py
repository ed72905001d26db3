"""LiRA and RMIA against a small CNN trained on scikit-learn's digits.

The target trains on a random half of the 1,797 digits; reference models train
on complementary random halves.  ``classifier_train_fn`` turns any
``fit(images, labels, seed) -> model`` into the ``train_fn(indices) ->
probabilities`` the attacks need, so the same script audits any pipeline.

Run:  python examples/audit_lira.py [--reference-models 4] [--epochs 30] [--device cpu]
(a few minutes on an idle CPU with the defaults; use --device cuda on a GPU.)
"""

from __future__ import annotations

import argparse

import torch

from privfed.audit import ReferenceAttack, classifier_train_fn, reference_model_attack
from privfed.data import load_digits
from privfed.engines.classifier import train_classifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-models", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    data = load_digits()
    images = torch.tensor(data.images)
    labels = torch.tensor(data.labels)

    def fit(x: torch.Tensor, y: torch.Tensor, seed: int) -> torch.nn.Module:
        return train_classifier(
            x, y, num_classes=data.num_classes, epochs=args.epochs, seed=seed, device=args.device
        )

    train_fn = classifier_train_fn(fit, images, labels, device=args.device)
    results = reference_model_attack(
        train_fn,
        images.shape[0],
        attacks=tuple(ReferenceAttack),
        num_reference_models=args.reference_models,
        seed=0,
        progress=True,
    )
    print(f"{'attack':<14} {'AUC [95 % interval]':<24} TPR at 1 % FPR [95 % interval]")
    for r in results:
        auc = r.metrics.auc
        row = next(t for t in r.metrics.tpr_at_fpr if t.target_fpr == 1e-2)
        print(
            f"{r.attack.value:<14} {auc.estimate:.3f} [{auc.lower:.3f}, {auc.upper:.3f}]     "
            f"{row.tpr.estimate:.3f} [{row.tpr.lower:.3f}, {row.tpr.upper:.3f}]"
        )


if __name__ == "__main__":
    main()
