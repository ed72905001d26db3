"""Hypothesis strategies and assertions for property tests of differentially private code.

Use these to test *your own* queries against the sensitivity you claim for
them: :func:`assert_sensitivity_bound` runs a structured adversarial search
(boundary, antipodal and orthogonal records, a sweep over angles) followed by a
targeted Hypothesis search over adjacent datasets, and fails with the largest
change it found if that exceeds the claimed bound.

Randomness enters the strategies only through drawn integer seeds, so every
failing example shrinks and replays exactly.  Requires the ``testing`` extra
(``hypothesis``), which is imported when a strategy is first built or a search
first runs; importing this package loads nothing heavier than numpy.
"""

from __future__ import annotations

from privfed.testing.strategies import (
    LabelledDataset,
    adjacent_pairs,
    assert_sensitivity_bound,
    clipped_vectors,
    labelled_datasets,
)

__all__ = [
    "LabelledDataset",
    "adjacent_pairs",
    "assert_sensitivity_bound",
    "clipped_vectors",
    "labelled_datasets",
]
