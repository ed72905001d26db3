"""Property-test your own DP query's sensitivity with privfed.testing.

Run:  python examples/dp_property_test.py

A user writes a query over labelled, L2-clipped records -- here the per-class
sums together with a scaled per-class count, released with one Gaussian -- and
claims an L2 sensitivity for it.  ``assert_sensitivity_bound`` searches for
neighbouring datasets that move the query further than the claim; the script
shows the correct claim passing (and reached) and a plausible wrong one caught.
The same strategies also drive ordinary ``@given`` property tests.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings

from privfed.dp import Adjacency, calibrate_analytic_gaussian
from privfed.testing import LabelledDataset, adjacent_pairs, assert_sensitivity_bound

CLIP_NORM = 2.0
DIM = 4
NUM_CLASSES = 3
COUNT_WEIGHT = 0.5  # the count is scaled so it shares one noise std with the sums


def my_query(data: LabelledDataset) -> np.ndarray:
    """Per-class sums (3 × 4 values) and weighted per-class counts (3 values)."""
    sums = np.stack([data.class_vectors(k).sum(axis=0) for k in range(NUM_CLASSES)])
    counts = np.bincount(data.labels, minlength=NUM_CLASSES) * COUNT_WEIGHT
    return np.concatenate([sums.ravel(), counts])


def main() -> None:
    # Adding or removing one record changes one class sum by at most R and one
    # count by COUNT_WEIGHT: sensitivity sqrt(R² + w²).
    claim = math.hypot(CLIP_NORM, COUNT_WEIGHT)
    largest = assert_sensitivity_bound(
        my_query,
        claim,
        adjacency=Adjacency.ADD_REMOVE,
        dim=DIM,
        clip_norm=CLIP_NORM,
        num_classes=NUM_CLASSES,
    )
    print(f"add/remove: claimed {claim:.6f}, largest change found {largest:.6f}  -> OK")
    sigma = calibrate_analytic_gaussian(1.0, 1e-6, l2_sensitivity=claim)
    print(f"  noise std for (1, 1e-6)-DP with this sensitivity: {sigma:.4f}")

    # Under replace-one with private labels the add/remove figure is too small.
    # The check finds out.
    try:
        assert_sensitivity_bound(
            my_query,
            claim,
            adjacency=Adjacency.REPLACE_ONE,
            dim=DIM,
            clip_norm=CLIP_NORM,
            num_classes=NUM_CLASSES,
            private_labels=True,
        )
    except AssertionError as exc:
        print(f"replace-one, private labels, same claim -> caught:\n  {exc}")
    # A tempting fix is sqrt(2)·sqrt(R² + w²) (a record moves between classes: two
    # sums and two counts change) -- but a replacement *within* a class moves one
    # sum by up to 2R, which is larger here.  The right bound is the worse case.
    tempting = math.sqrt(2) * claim
    try:
        assert_sensitivity_bound(
            my_query,
            tempting,
            adjacency=Adjacency.REPLACE_ONE,
            dim=DIM,
            clip_norm=CLIP_NORM,
            num_classes=NUM_CLASSES,
            private_labels=True,
        )
    except AssertionError as exc:
        print(f"replace-one, private labels, cross-class-only claim -> caught:\n  {exc}")
    right = max(2 * CLIP_NORM, tempting)
    largest = assert_sensitivity_bound(
        my_query,
        right,
        adjacency=Adjacency.REPLACE_ONE,
        dim=DIM,
        clip_norm=CLIP_NORM,
        num_classes=NUM_CLASSES,
        private_labels=True,
    )
    print(f"replace-one, private labels: claimed {right:.6f}, largest found {largest:.6f} -> OK")

    # The strategies work in plain property tests too.
    @settings(max_examples=50, derandomize=True, database=None)
    @given(adjacent_pairs(Adjacency.ADD_REMOVE, dim=DIM, clip_norm=CLIP_NORM, num_classes=3))
    def counts_move_by_one(pair: tuple[LabelledDataset, LabelledDataset]) -> None:
        a, b = pair
        diff = np.bincount(a.labels, minlength=3) - np.bincount(b.labels, minlength=3)
        if np.abs(diff).sum() != 1:
            raise AssertionError(f"counts moved by {diff}")

    counts_move_by_one()
    print("property 'counts move by exactly one under add/remove' holds on 50 examples")


if __name__ == "__main__":
    main()
