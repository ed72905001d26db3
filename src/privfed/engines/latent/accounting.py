"""Privacy accounting of the latent-statistic release (numpy and privfed.dp only; no torch).

The latent engine releases, per class, the noisy (sum, second moment[, count])
of the clipped latents of that class.  :func:`record_latent_release` records
that release in a :class:`privfed.dp.PrivacyLedger` as whitened Gaussian
events in the partition scheme :data:`LATENT_SCHEME` (``"class"``): the
classes are disjoint, so they compose in parallel with each other, and
sequentially with releases of any other scheme (e.g. factory cells) that may
read the same records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from privfed.dp import GaussianRelease, PartitionKey, PrivacyLedger
from privfed.engines.moments.planning import LatentReleasePlan
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["LATENT_SCHEME", "record_latent_release"]

#: The partition scheme of the latent engine's per-class releases.
LATENT_SCHEME: Final = "class"


def _check_label(value: object) -> None:
    if isinstance(value, str):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterTypeError("partition", "an int, a str or None", value)


def record_latent_release(
    ledger: PrivacyLedger,
    plan: LatentReleasePlan,
    *,
    partitions: Sequence[int | str],
    sampler: str,
    seeded: bool,
    name: str = "latent-statistics",
) -> tuple[GaussianRelease, ...]:
    """Record the per-class releases of a latent-statistic plan, atomically.

    Each class's (sum, second moment[, count]) release is recorded in
    whitened form (``noise_std = 1``, ``l2_sensitivity = plan.mu``), one per
    class, on partition ``PartitionKey("class", c)``.  With
    ``plan.private_labels`` a record may change class, so the classes are not
    disjoint partitions: a single release on ``None`` (all records) is
    recorded instead, whose μ already covers both classes a replacement
    touches.

    Args:
        ledger: Where the releases are recorded (budget checked first).
        plan: The plan whose noise was added.
        partitions: The class ids released (at least one, no repeats).
        sampler: Noise sampler name.
        seeded: Whether the noise was seeded.
        name: Release name.

    Returns:
        The releases recorded.

    Raises:
        ParameterTypeError: ``ledger`` or ``plan`` of the wrong type, or a
            class id that is not an int or a str.
        ParameterError: No class ids, or repeated ones.
        BudgetExceededError, LedgerError: From the ledger; nothing recorded.
    """
    if not isinstance(ledger, PrivacyLedger):
        raise ParameterTypeError("ledger", "a privfed.dp.PrivacyLedger", ledger)
    if not isinstance(plan, LatentReleasePlan):
        raise ParameterTypeError("plan", "a LatentReleasePlan", plan)
    labels = list(partitions)
    if not labels:
        raise ParameterError("partitions", "a non-empty sequence of class ids", labels)
    if len(set(labels)) != len(labels):
        raise ParameterError("partitions", "class ids without repeats", labels)
    for label in labels:
        if label is None:
            raise ParameterTypeError("partitions", "a sequence of ints or strs", label)
        _check_label(label)
    d = plan.dim
    dimension = d + d * d + (1 if plan.noise_std_count > 0 else 0)
    targets: list[PartitionKey | None] = (
        [None] if plan.private_labels else [PartitionKey(LATENT_SCHEME, c) for c in labels]
    )
    new = tuple(
        GaussianRelease(
            name=name,
            partition=target,
            l2_sensitivity=plan.mu,
            noise_std=1.0,
            adjacency=plan.adjacency,
            sampler=sampler,
            seeded=seeded,
            dimension=dimension,
        )
        for target in targets
    )
    ledger.record_all(new)
    return new
