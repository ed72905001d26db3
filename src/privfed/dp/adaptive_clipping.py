"""Adaptive clipping for distributed-DP training (Andrew, Thakkar, McMahan & Ramaswamy 2021).

Each round every sampled client also reports one bit, ``b_i = [‖x_i‖₂ <= C_t]``,
as one more coordinate of its masked vector, encoded ``2·b_i − 1 ∈ {−1, +1}``
and noised by the client with its own share of the count noise (Skellam or the
discrete Gaussian, like the update), so the server only ever sees the noisy
count.  With ``u`` survivors it estimates the fraction under the clip
``b̄ = (S/u + 1)/2`` (``S`` the noisy sum of the ``±1`` coordinate) and moves the
clip geometrically toward the ``γ`` quantile of the update norms::

    C_{t+1} = C_t · exp(−η_C · (b̄ − γ)).

Accounting.  Adding or removing one client changes ``S`` by 1, so the count is
one more release per round (sensitivity 1 in ``±1`` units; its noise std on
``S`` is ``2σ_b`` when ``σ_b`` is the std on the count ``Σ b_i``), charged in the
same ledger.  The update stays calibrated in normalized units: a client divides
its update by ``C_t / C_0`` and clips it to ``C_0`` (the plan's clip), the server
multiplies the decoded average back, so the update's sensitivity, grid, noise
and wrap bound are those of the plan whatever ``C_t`` is (the noise in model
units scales with ``C_t``, as in the paper).  The update noise is calibrated so
that both releases together meet the budget -- the exact counterpart of the
paper's Gaussian split ``z_Δ = (z^−2 − (2σ_b)^−2)^−1/2``
(:func:`update_noise_multiplier`).  ``C_t`` is public and does not enter the
privacy claim (post-processing of noisy counts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from privfed._checks import check_finite_positive, check_float
from privfed.errors import ParameterError

__all__ = [
    "MAX_CLIP_SCALE",
    "AdaptiveClipping",
    "next_clip_scale",
    "update_noise_multiplier",
]

#: The clip stays within ``[C_0 / 2**20, C_0 · 2**20]`` (a guard against runaway steps).
MAX_CLIP_SCALE: Final = 2.0**20


@dataclass(frozen=True)
class AdaptiveClipping:
    """The adaptive-clipping settings of a run (public).

    Attributes:
        target_quantile: ``γ`` in (0, 1): the fraction of clients whose update
            norm should stay under the clip (the paper's default 0.5).
        learning_rate: ``η_C`` in (0, 10]: the geometric step (default 0.2).
        count_noise_std: ``σ_b`` > 0, the std of the noise on the count of
            clients under the clip (the paper suggests the expected clients
            per round / 20); ``None``: ``num_clients / 20``, at least 1.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    target_quantile: float = 0.5
    learning_rate: float = 0.2
    count_noise_std: float | None = None

    def __post_init__(self) -> None:
        check_float(
            "target_quantile", self.target_quantile, low=0.0, high=1.0,
            open_low=True, open_high=True,
        )  # fmt: skip
        check_float("learning_rate", self.learning_rate, low=0.0, high=10.0, open_low=True)
        if self.count_noise_std is not None:
            check_finite_positive("count_noise_std", self.count_noise_std)

    def count_std(self, num_clients: int) -> float:
        """``σ_b`` for ``num_clients`` clients per round."""
        if self.count_noise_std is not None:
            return float(self.count_noise_std)
        return max(1.0, num_clients / 20.0)


def next_clip_scale(scale: float, under_fraction: float, settings: AdaptiveClipping) -> float:
    """``C_{t+1}/C_0`` from ``C_t/C_0`` and the noisy fraction ``b̄`` (clamped to [0, 1]).

    Raises:
        ParameterError: ``scale`` not finite > 0, or ``under_fraction`` not finite.
    """
    s = check_finite_positive("scale", scale)
    b = check_float("under_fraction", under_fraction)
    b = min(1.0, max(0.0, b))
    step = s * math.exp(-settings.learning_rate * (b - settings.target_quantile))
    return min(MAX_CLIP_SCALE, max(1.0 / MAX_CLIP_SCALE, step))


def update_noise_multiplier(noise_multiplier: float, count_noise_std: float) -> float:
    """The paper's split: ``z_Δ = (z^−2 − (2σ_b)^−2)^−1/2`` keeps the Gaussian total at ``z``.

    Raises:
        ParameterError: ``2σ_b <= z`` (the count alone would spend the budget).
    """
    z = check_finite_positive("noise_multiplier", noise_multiplier)
    sb = check_finite_positive("count_noise_std", count_noise_std)
    rest = z**-2 - (2.0 * sb) ** -2
    if rest <= 0.0:
        raise ParameterError(
            "count_noise_std", f"a float > noise_multiplier/2 = {z / 2:g}", count_noise_std
        )
    return float(rest**-0.5)
