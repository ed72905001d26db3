"""The spread of an evaluation repeated over seeds (``repeats``), as ``evaluation.json`` has it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["accuracy_spread"]


def accuracy_spread(seeds: Sequence[int], values: Sequence[float]) -> dict[str, Any]:
    """``{"repeats", "seeds", "values", "mean", "std", "min", "max", "note"}`` of ``values``.

    ``std`` is the sample standard deviation (``n - 1`` in the denominator);
    with one value it is ``None`` and ``note`` says "one run, no spread".
    """
    numbers = [float(v) for v in values]
    n = len(numbers)
    mean = math.fsum(numbers) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in numbers) / (n - 1)) if n > 1 else None
    return {
        "repeats": n,
        "seeds": [int(s) for s in seeds],
        "values": numbers,
        "mean": mean,
        "std": std,
        "min": min(numbers),
        "max": max(numbers),
        "note": (
            "one run, no spread (repeats=1)"
            if n == 1
            else f"{n} classifier trainings on the same release, one seed each; std is the "
            "sample standard deviation"
        ),
    }
