"""Unlearning verified by membership inference: a leak fails the check, exactness passes.

Setup (digits, private-PCA Gaussian factories, milliseconds each): clients
"a" and "b" hold 20 images each of digits 0 and 1; client "leaky" holds 4 of
each.  A private-PCA factory fitted on 4 images keeps k = 3 directions and a
zero residual, so its samples lie in the 3-dimensional affine span of its
training images, a memorising factory: the leaky client's images are near its
samples, held-out images are not, and the distance-to-closest-record adversary
sees it (measured original AUC 0.97, interval [0.93, 1]).

Every draw is seeded (split, fits, synthesis), so each check is a fixed
computation with no false-failure rate of its own.  The margins say how far
the fixed numbers are from the thresholds: measured, the incomplete removal
(digit 1's cell of the leaky client kept) gives AUC_unlearned −
AUC_retrained = 0.32 (paired 95 % interval [0.06, 0.59]), six times the 0.05
tolerance; the complete removal gives
exactly 0, because exact unlearning makes the unlearned and retrained outputs
identical.  (Had the factories been retrained with fresh randomness, the
result's ``false_failure_rate`` would estimate how often a correct removal
fails; it is 0 here, and the test checks that it is.)
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from privfed.engines.factory import (
    FactoryMatrix,
    LatentGaussianFactory,
    MembershipProbe,
    UnlearningCertificate,
    membership_unlearning_check,
    remove_client_verified,
)
from privfed.errors import ParameterError, ParameterTypeError

SEED = 5
N_PER_CLASS = 300
HOLDINGS = {"a": 20, "b": 20, "leaky": 4}


@pytest.fixture(scope="module")
def records() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Disjoint images of digits 0 and 1 per client, and held-out non-members."""
    from privfed.data import load_digits

    digits = load_digits()
    images = torch.tensor(np.asarray(digits.images), dtype=torch.float32)
    labels = torch.tensor(np.asarray(digits.labels), dtype=torch.int64)
    rng = np.random.default_rng(SEED)
    pools = {c: rng.permutation(np.flatnonzero(labels.numpy() == c)) for c in (0, 1)}
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    start = 0
    for client, count in [*HOLDINGS.items(), ("held-out", 50)]:
        idx = np.concatenate([pools[c][start : start + count] for c in (0, 1)])
        out[client] = (images[torch.from_numpy(idx)], labels[torch.from_numpy(idx)])
        start += count
    return out


def _matrix(
    records: dict[str, tuple[torch.Tensor, torch.Tensor]], clients: list[str]
) -> FactoryMatrix:
    matrix = FactoryMatrix()
    for client in clients:
        x, y = records[client]
        for c in (0, 1):
            own = x[y == c]
            factory = LatentGaussianFactory(latent_dim=16, class_id=c, client_id=client)
            matrix.register(c, client, factory.fit(own), int(own.shape[0]))
    return matrix


def _check_args(records: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> dict[str, object]:
    members, member_labels = records["leaky"]
    nonmembers, nonmember_labels = records["held-out"]
    return {
        "members": members,
        "member_labels": member_labels,
        "nonmembers": nonmembers,
        "nonmember_labels": nonmember_labels,
    }


def test_an_incomplete_removal_fails_the_check(
    records: dict[str, tuple[torch.Tensor, torch.Tensor]],
) -> None:
    everyone = ["a", "b", "leaky"]
    original = _matrix(records, everyone)
    original.synthesize(N_PER_CLASS, seed=SEED)
    before = original.buffer
    # Deliberately incomplete: only digit 0's cell of the leaky client goes.
    original.remove_cell(0, "leaky")
    retrained = _matrix(records, ["a", "b"])
    retrained.synthesize(N_PER_CLASS, seed=SEED)
    check = membership_unlearning_check(
        before,
        original.buffer,
        retrained.buffer,
        MembershipProbe(**_check_args(records)),
    )
    assert check.detects_original  # the adversary sees the client in the original
    assert check.auc_original.lower > 0.75
    assert not check.accepted
    assert check.difference.estimate > 3 * check.tolerance  # far from the tolerance
    assert check.difference.lower > 0.0  # and its paired interval excludes 0
    # The kept cell still leaks: the unlearned AUC sits between retrained and original.
    assert check.auc_retrained.estimate < check.auc_unlearned.estimate
    assert check.auc_unlearned.estimate < check.auc_original.estimate
    assert check.num_members == 8 and check.num_nonmembers == 100


def test_a_complete_removal_passes_and_enters_the_certificate(
    records: dict[str, tuple[torch.Tensor, torch.Tensor]],
) -> None:
    matrix = _matrix(records, ["a", "b", "leaky"])
    matrix.synthesize(N_PER_CLASS, seed=SEED)
    matrix.synthesize(50, seed=SEED + 1)  # two runs: both are replayed on the retrain
    certificate, check = remove_client_verified(
        matrix,
        "leaky",
        retrain=lambda: _matrix(records, ["a", "b"]),
        probe=MembershipProbe(**_check_args(records)),
    )
    assert "leaky" not in matrix.clients and matrix.verify(certificate)
    assert check.detects_original and check.accepted
    # Exact unlearning: the two outputs are identical, so the AUCs are equal.
    assert check.difference.estimate == 0.0
    assert check.auc_unlearned == check.auc_retrained
    assert check.false_failure_rate == 0.0
    assert certificate.membership_check == check.to_dict()
    restored = UnlearningCertificate.from_dict(json.loads(certificate.to_json()))
    assert restored.membership_check is not None
    assert restored.membership_check["accepted"] is True


def test_bad_calls_leave_the_matrix_unchanged(
    records: dict[str, tuple[torch.Tensor, torch.Tensor]],
) -> None:
    matrix = _matrix(records, ["a", "leaky"])
    args = _check_args(records)
    probe = MembershipProbe(**args)
    with pytest.raises(ParameterError, match="synthesized"):
        remove_client_verified(
            matrix, "leaky", retrain=lambda: _matrix(records, ["a"]), probe=probe
        )
    matrix.synthesize(20, seed=SEED)
    digest = matrix.digest()
    with pytest.raises(ParameterError, match="without the removed client"):
        remove_client_verified(matrix, "leaky", retrain=lambda: matrix, probe=probe)
    bad = {**args, "member_labels": torch.zeros(3, dtype=torch.int64)}
    with pytest.raises(ParameterError, match="member_labels"):
        remove_client_verified(
            matrix, "leaky", retrain=lambda: _matrix(records, ["a"]), probe=MembershipProbe(**bad)
        )
    with pytest.raises(ParameterTypeError, match="probe"):
        remove_client_verified(matrix, "leaky", retrain=lambda: _matrix(records, ["a"]), probe=args)  # type: ignore[arg-type]
    assert matrix.digest() == digest and "leaky" in matrix.clients
    with pytest.raises(ParameterError, match="tolerance"):
        membership_unlearning_check(
            matrix.buffer,
            matrix.buffer,
            matrix.buffer,
            MembershipProbe(**args, tolerance=0.0),
        )
    with pytest.raises(ParameterError, match="confidence"):
        MembershipProbe(**args, confidence=1.5)
    few = {**args, "members": args["members"][:1], "member_labels": args["member_labels"][:1]}
    with pytest.raises(ParameterError, match="members"):
        MembershipProbe(**few)
    with pytest.raises(ParameterTypeError, match="probe"):
        membership_unlearning_check(matrix.buffer, matrix.buffer, matrix.buffer, args)  # type: ignore[arg-type]
