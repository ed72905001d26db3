"""What the release scans of the engine tests share: numbers in JSON, a run's private numbers."""

from __future__ import annotations

from typing import Any

import numpy as np


def json_numbers(data: Any) -> set[float]:
    """Every number in a JSON document (bools excluded)."""
    found: set[float] = set()
    if isinstance(data, dict):
        for value in data.values():
            found |= json_numbers(value)
    elif isinstance(data, list):
        for value in data:
            found |= json_numbers(value)
    elif isinstance(data, int | float) and not isinstance(data, bool):
        found.add(float(data))
    return found


def latent_private_numbers(result: Any, *, empty_class_flags: bool = True) -> dict[str, list[int]]:
    """Numbers of a latent run derived from private data without noise (values > 1).

    Args:
        result: A :class:`privfed.engines.latent.report.PipelineResult`.
        empty_class_flags: Also list how many classes each client lacks.
    """
    r = result.report
    labels = np.asarray(result.split.private.labels)
    per_client = [np.bincount(labels[c], minlength=10) for c in result.client_indices]
    private = {
        # The public split's size is derived from the dataset's size too.
        "totals": [r.records_private, r.records_aggregated, r.records_test, r.records_public],
        "client sizes": [int(c.size) for c in result.client_indices if c.size > 1],
        "exact class counts": [int(c) for c in result.aggregate.counts if c > 1],
        "per-client class counts": sorted({int(v) for row in per_client for v in row if v > 1}),
    }
    if empty_class_flags:
        private["empty classes per client"] = [
            int((row == 0).sum()) for row in per_client if (row == 0).sum() > 1
        ]
    return private
