"""Register per-(class, client) factories, synthesize with provenance, unlearn a client.

Run:  python examples/factory_unlearning.py   (about half a minute on a CPU)

Three hospitals hold handwritten digits with skewed labels.  Each trains one
small generative factory per digit it holds and ships it once, with a
checksummed manifest.  The server registers the factories in a
FactoryMatrix, synthesizes a class-balanced training set, and trains a
classifier.  Then hospital "st-anne" withdraws consent: the matrix removes its
factories and every synthetic sample they produced, redraws the affected
classes from the remaining factories, and issues a JSON certificate naming
what was removed (with weight digests) and what must be retrained.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

from privfed.data import load_digits, partition, split_public_private
from privfed.models.classifier import evaluate_classifier, train_classifier
from privfed.models.factories import FactoryMatrix, LatentGaussianFactory, load_factory


def main() -> None:
    torch.set_num_threads(1)
    digits = load_digits()
    split = split_public_private(digits, public_fraction=0.05, test_fraction=0.3, seed=0)
    hospitals = ["city-general", "st-anne", "university"]
    parts = partition(
        split.private.labels, scheme="dirichlet", num_clients=len(hospitals), seed=0, alpha=0.5
    )
    images = torch.tensor(split.private.images)

    matrix = FactoryMatrix()
    with tempfile.TemporaryDirectory() as shipping:
        for name, idx in zip(hospitals, parts, strict=True):
            for digit in range(10):
                own = idx[split.private.labels[idx] == digit]
                if own.size < 2:
                    continue
                # Client side: fit and ship (weights + checksummed manifest).
                factory = LatentGaussianFactory(latent_dim=12, class_id=digit, client_id=name)
                factory.fit(images[torch.from_numpy(own)])
                folder = factory.save(Path(shipping) / f"{name}-{digit}")
                # Server side: verify and register.
                received = load_factory(folder)
                matrix.register(digit, name, received, received.sample_count)

    table, classes, clients = matrix.counts()
    print("samples per (class, client); 0 = empty cell")
    print("      " + "".join(f"{c:>14}" for c in clients))
    for c, row in zip(classes, table, strict=True):
        print(f"{c:>6}" + "".join(f"{v:>14}" for v in row))
    print(
        "quotas for 100 samples of class 0:",
        {k: q for (c, k), q in matrix.quotas(100).items() if c == 0},
    )

    data = matrix.synthesize(200, seed=7)
    first = data.provenance[0]
    print(
        f"\nsynthesized {len(data)} samples; sample 0 came from cell "
        f"{first.cell} (run {first.run}, index {first.index})"
    )
    test_x, test_y = torch.tensor(split.test.images), torch.tensor(split.test.labels)
    clf = train_classifier(data.images, data.labels, num_classes=10, epochs=15, seed=0)
    matrix.record_consumer("digit-classifier-v1", data)
    print(f"accuracy on real test data: {evaluate_classifier(clf, test_x, test_y):.3f}")

    certificate = matrix.remove_client("st-anne")
    leftovers = [p for p in matrix.buffer.provenance if p.client_id == "st-anne"]
    if not matrix.verify(certificate) or leftovers:
        raise SystemExit("unlearning check failed")
    summary = certificate.to_dict()
    summary["dropped_sample_ids"] = f"{len(certificate.dropped_sample_ids)} ids"
    summary["regenerated_sample_ids"] = f"{len(certificate.regenerated_sample_ids)} ids"
    summary["replacement_sample_ids"] = f"{len(certificate.replacement_sample_ids)} ids"
    print("\nunlearning certificate (id lists abbreviated):")
    print(json.dumps(summary, indent=2))

    buffer = matrix.buffer
    clf2 = train_classifier(buffer.images, buffer.labels, num_classes=10, epochs=15, seed=0)
    matrix.record_consumer("digit-classifier-v2", buffer)
    print(f"class counts after unlearning: {buffer.class_counts()}")
    print(f"retrained accuracy without st-anne: {evaluate_classifier(clf2, test_x, test_y):.3f}")
    print("clients left in the matrix:", list(matrix.clients))


if __name__ == "__main__":
    main()
