"""Register per-(class, client) factories, synthesize with provenance, unlearn a client.

Run:  python examples/factory_unlearning.py   (about half a minute on a CPU)

Three hospitals hold handwritten digits with skewed labels.  A small public
set of digits gives everyone the same frozen PCA codec; each hospital fits one
Gaussian factory per digit it holds *in that public latent space* (so no
basis fitted on private images is released) and ships it once, with a
checksummed manifest that records the codec's fingerprint.  The server registers the factories in a
FactoryMatrix, synthesizes a class-balanced training set, and trains a
classifier.  Then hospital "st-anne" withdraws consent: the matrix removes its
factories and every synthetic sample they produced, redraws the affected
classes from the remaining factories, and issues a JSON certificate naming
what was removed (with weight digests) and what must be retrained.  Before
that, the server audits a few factories for membership leakage (members: the
hospital's images of that digit; non-members: held-out test images).

The removal is also verified empirically, as regulators ask: a
membership-inference adversary (distance of each record to the closest
synthetic image of its class) scores st-anne's images (members) and held-out
images of the same digits (non-members) against the original synthetic data,
the unlearned buffer and the output of a matrix retrained from scratch without
st-anne; the removal is accepted when the unlearned and retrained AUCs agree
within 0.05.  The check costs a retrain, so it is optional; its result goes
into the certificate.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

from privfed.data import load_digits, partition, split_public_private
from privfed.engines.classifier import evaluate_classifier, train_classifier
from privfed.engines.codecs import PCACodec
from privfed.engines.factory import (
    FactoryAuditConfig,
    FactoryMatrix,
    LatentGaussianFactory,
    MembershipProbe,
    audit_factories,
    load_factory,
    remove_client_verified,
)


def main() -> None:
    torch.set_num_threads(1)
    digits = load_digits()
    split = split_public_private(digits, public_fraction=0.05, test_fraction=0.3, seed=0)
    hospitals = ["city-general", "st-anne", "university"]
    parts = partition(
        split.private.labels, scheme="dirichlet", num_clients=len(hospitals), seed=0, alpha=0.5
    )
    images = torch.tensor(split.private.images)
    # Public data only: the codec every hospital and the server share.
    codec = PCACodec.fit(torch.tensor(split.public.images), latent_dim=12)

    matrix = FactoryMatrix()
    training_sets = {}
    with tempfile.TemporaryDirectory() as shipping:
        for name, idx in zip(hospitals, parts, strict=True):
            for digit in range(10):
                own = idx[split.private.labels[idx] == digit]
                if own.size < 2:
                    continue
                # Client side: fit and ship (weights + checksummed manifest).
                factory = LatentGaussianFactory(codec=codec, class_id=digit, client_id=name)
                factory.fit(images[torch.from_numpy(own)])
                folder = factory.save(Path(shipping) / f"{name}-{digit}")
                # Server side: verify (checksums, codec fingerprint) and register.
                received = load_factory(folder, codec=codec)
                matrix.register(digit, name, received, received.sample_count)
                training_sets[digit, name] = images[torch.from_numpy(own)]

    table, classes, clients = matrix.counts()
    print("samples per (class, client); 0 = empty cell")
    print("      " + "".join(f"{c:>14}" for c in clients))
    for c, row in zip(classes, table, strict=True):
        print(f"{c:>6}" + "".join(f"{v:>14}" for v in row))
    print(
        "quotas for 100 samples of class 0:",
        {k: q for (c, k), q in matrix.quotas(100).items() if c == 0},
    )

    test_x, test_y = torch.tensor(split.test.images), torch.tensor(split.test.labels)
    targets = [
        (c, k, matrix.factory(c, k), training_sets[c, k], test_x[test_y == c])
        for c, k in matrix.cells
        if training_sets[c, k].shape[0] >= 20
    ]
    audit = audit_factories(targets, config=FactoryAuditConfig(max_factories=4))
    print("\nmembership audit (likelihood attack; members vs held-out test digits):")
    for f in audit.factories:
        a = f.attacks[0]
        auc = a.metrics.auc
        print(
            f"  digit {f.class_id} @ {f.client_id:<13} AUC {auc.estimate:.3f} "
            f"[{auc.lower:.3f}, {auc.upper:.3f}]  eps_lb {a.bound.epsilon_lower_bound:.2f} "
            f"({f.num_members} members, {f.num_nonmembers} non-members)"
        )
    print(f"  (each bound at significance {audit.per_test_significance:.4f}, family-wise 0.05)")

    data = matrix.synthesize(200, seed=7)
    first = data.provenance[0]
    print(
        f"\nsynthesized {len(data)} samples; sample 0 came from cell "
        f"{first.cell} (run {first.run}, index {first.index})"
    )
    clf = train_classifier(data.images, data.labels, num_classes=10, epochs=15, seed=0)
    matrix.record_consumer("digit-classifier-v1", data)
    print(f"accuracy on real test data: {evaluate_classifier(clf, test_x, test_y):.3f}")

    def retrain_without_st_anne() -> FactoryMatrix:
        # The server's from-scratch route: every other hospital's factories refitted.
        fresh = FactoryMatrix()
        for (digit, name), own in sorted(training_sets.items()):
            if name != "st-anne":
                factory = LatentGaussianFactory(codec=codec, class_id=digit, client_id=name)
                fresh.register(digit, name, factory.fit(own), int(own.shape[0]))
        return fresh

    forgotten = [(d, x) for (d, name), x in sorted(training_sets.items()) if name == "st-anne"]
    members = torch.cat([x for _, x in forgotten])
    member_labels = torch.cat([torch.full((x.shape[0],), d) for d, x in forgotten])
    same_digits = torch.isin(test_y, torch.tensor([d for d, _ in forgotten]))
    certificate, check = remove_client_verified(
        matrix,
        "st-anne",
        retrain=retrain_without_st_anne,
        probe=MembershipProbe(members, member_labels, test_x[same_digits], test_y[same_digits]),
    )
    print("\nunlearning verified by membership inference (distance to closest synthetic record):")
    for name, auc in (
        ("original", check.auc_original),
        ("unlearned", check.auc_unlearned),
        ("retrained", check.auc_retrained),
    ):
        print(f"  AUC vs {name:<9} {auc.estimate:.3f} [{auc.lower:.3f}, {auc.upper:.3f}]")
    diff = check.difference
    print(
        f"  |unlearned - retrained| = {abs(diff.estimate):.3f} (paired 95 % interval "
        f"[{diff.lower:.3f}, {diff.upper:.3f}]); tolerance {check.tolerance}: "
        f"{'accepted' if check.accepted else 'REJECTED'}"
        f" ({check.num_members} members, {check.num_nonmembers} non-members)"
    )
    if not check.detects_original:
        print(
            "  note: the adversary did not detect st-anne in the original matrix either, so "
            "the check had no power here; exactness rests on the certificate"
        )
    leftovers = [p for p in matrix.buffer.provenance if p.client_id == "st-anne"]
    if not matrix.verify(certificate) or leftovers:
        raise SystemExit("unlearning check failed")
    summary = certificate.to_dict()
    summary["dropped_sample_ids"] = f"{len(certificate.dropped_sample_ids)} ids"
    summary["regenerated_sample_ids"] = f"{len(certificate.regenerated_sample_ids)} ids"
    summary["replacement_sample_ids"] = f"{len(certificate.replacement_sample_ids)} ids"
    if not check.accepted:
        raise SystemExit("membership-inference unlearning check failed")
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
