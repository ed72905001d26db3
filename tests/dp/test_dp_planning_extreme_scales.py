"""Sensitivities and plans at extreme scales must never under-claim μ.

``joint_mu_squared`` once formed ``1/σ²`` and ``R⁴`` separately; for large R
the product underflowed/overflowed and the second-moment term silently vanished
(a plan at R = 1e100 then reported a μ about 6 % below the truth, and a ledger
fed with it under-counted).  The quantities only depend on ``R/σ_s`` and
``R²/σ_m``, so the results must be invariant under ``R → kR`` with the noise
scaled alike.
"""

from __future__ import annotations

import math

import pytest

from privfed.dp import gdp_delta
from privfed.dp.sensitivity import Adjacency, joint_mu_squared
from privfed.engines.moments.planning import plan_latent_release
from privfed.errors import ParameterError

CASES = [
    (Adjacency.REPLACE_ONE, False),
    (Adjacency.REPLACE_ONE, True),
    (Adjacency.ADD_REMOVE, False),
]


def _independent_mu(R: float, s: float, m: float, c: float, adj: Adjacency, pl: bool) -> float:
    """μ from the normalised precisions x = (R/σ_s)², y = (R²/σ_m)², computed apart."""
    x = (R / s) ** 2
    y = ((R / m) * R) ** 2
    v = (1.0 / c) ** 2 if c > 0 else 0.0
    if adj is Adjacency.ADD_REMOVE:
        return math.sqrt(x + y + v)
    same = 2 * x + 2 * y + x * x / (2 * y) if x <= 2 * y else 4 * x
    return math.sqrt(max(same, 2 * x + 2 * y + 2 * v) if pl else same)


@pytest.mark.parametrize(("adjacency", "private_labels"), CASES)
@pytest.mark.parametrize("radius", [1e-120, 1e-60, 1e-3, 1e3, 1e60, 1e120])
@pytest.mark.parametrize(("s", "m"), [(3.0, 0.5), (0.2, 7.0)])
def test_joint_mu_squared_is_scale_invariant(
    adjacency: Adjacency, private_labels: bool, radius: float, s: float, m: float
) -> None:
    count_std = 2.0 if adjacency is Adjacency.ADD_REMOVE or private_labels else None
    reference = joint_mu_squared(
        1.0, s, m, adjacency, noise_std_count=count_std, private_labels=private_labels
    )
    scaled = joint_mu_squared(
        radius,
        s * radius,
        m * radius * radius,
        adjacency,
        noise_std_count=count_std,
        private_labels=private_labels,
    )
    assert scaled == pytest.approx(reference, rel=1e-12)


@pytest.mark.parametrize(("adjacency", "private_labels"), CASES)
@pytest.mark.parametrize("radius", [1e-100, 1e-40, 1.0, 1e40, 1e100])
@pytest.mark.parametrize("split", ["balanced", "optimal", 0.3])
def test_plan_mu_is_never_under_reported(
    adjacency: Adjacency, private_labels: bool, radius: float, split: str | float
) -> None:
    epsilon, delta = 1.0, 1e-6
    plan = plan_latent_release(
        epsilon,
        delta,
        clip_norm=radius,
        dim=4,
        adjacency=adjacency,
        split=split,  # type: ignore[arg-type]
        private_labels=private_labels,
    )
    truth = _independent_mu(
        radius,
        plan.noise_std_sum,
        plan.noise_std_second_moment,
        plan.noise_std_count,
        adjacency,
        private_labels,
    )
    assert plan.mu >= truth
    assert gdp_delta(truth, epsilon) <= delta


@pytest.mark.parametrize("radius", [1e-170, 1e160])
def test_plan_refuses_unrepresentable_clip_norm(radius: float) -> None:
    # R² (the unit of the second-moment noise) is not a normal double here.
    with pytest.raises(ParameterError, match="clip_norm"):
        plan_latent_release(1.0, 1e-5, clip_norm=radius, dim=4, adjacency=Adjacency.ADD_REMOVE)


def test_plan_validation_refuses_any_over_claim() -> None:
    # A hand-built plan may not state a μ below the exact joint μ of its noise,
    # nor a δ below δ(μ, ε), not even by a rounding-sized amount.
    import dataclasses

    plan = plan_latent_release(1.0, 1e-5, clip_norm=2.0, dim=4, adjacency=Adjacency.REPLACE_ONE)
    with pytest.raises(ParameterError, match="mu"):
        dataclasses.replace(plan, mu=plan.mu * (1 - 1e-13))
    with pytest.raises(ParameterError, match="delta"):
        dataclasses.replace(plan, delta=plan.delta * (1 - 1e-10))
    assert dataclasses.replace(plan) == plan
