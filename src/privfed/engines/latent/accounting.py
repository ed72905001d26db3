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

from privfed.dp import GaussianRelease, PrivacyLedger
from privfed.engines.moments.planning import LatentReleasePlan
from privfed.errors import ParameterTypeError

__all__ = ["LATENT_SCHEME", "record_latent_release"]

#: The partition scheme of the latent engine's per-class releases.
LATENT_SCHEME: Final = "class"


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

    The events are the plan's own (:meth:`LatentReleasePlan.events` in the
    ``"class"`` scheme): one whitened Gaussian event per class, or a single
    one on all records when ``plan.private_labels``.

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
    new = plan.events(partitions, scheme=LATENT_SCHEME, sampler=sampler, seeded=seeded, name=name)
    ledger.record_all(new)
    return new
