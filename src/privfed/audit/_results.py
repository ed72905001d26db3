"""The JSON form shared by the attack results of :mod:`~privfed.audit.reference` and
:mod:`~privfed.audit.synthetic`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from privfed.audit.bounds import PrivacyLowerBound
    from privfed.audit.metrics import MembershipMetrics


def attack_result_dict(
    head: dict[str, Any],
    metrics: MembershipMetrics,
    bound: PrivacyLowerBound | None,
    scores: tuple[NDArray[np.float64], NDArray[np.float64]] | None,
) -> dict[str, Any]:
    """``head``, then the metrics and the bound, then the (member, non-member) scores if given."""
    out: dict[str, Any] = {
        **head,
        "metrics": metrics.to_dict(),
        "bound": None if bound is None else bound.to_dict(),
    }
    if scores is not None:
        out["member_scores"] = scores[0].tolist()
        out["nonmember_scores"] = scores[1].tolist()
    return out
