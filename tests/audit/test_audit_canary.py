"""Tests of the canary self-audit of privfed's Gaussian latent-statistic release."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.audit import (
    ReleaseComponent,
    SimulationMode,
    audit_gaussian_mechanism,
    audit_gaussian_release,
    audit_latent_release,
    self_audit,
    worst_case_latent_canary,
)
from privfed.dp import Adjacency, gaussian_noise, joint_mu_squared, plan_latent_release
from privfed.errors import AuditError, ParameterError


@pytest.mark.parametrize("adjacency", [Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE])
@pytest.mark.parametrize("epsilon", [0.5, 4.0, 10.0])
def test_worst_case_canary_attains_the_plan_mu(adjacency: Adjacency, epsilon: float) -> None:
    # An independent check of privfed.dp: the canary built here from first principles has
    # exactly the μ that the planner claims (which also equals dp.joint_mu_squared).
    plan = plan_latent_release(epsilon, 1e-5, clip_norm=2.5, dim=6, adjacency=adjacency)
    blocks = worst_case_latent_canary(
        clip_norm=plan.clip_norm,
        dim=plan.dim,
        noise_std_sum=plan.noise_std_sum,
        noise_std_second_moment=plan.noise_std_second_moment,
        noise_std_count=plan.noise_std_count,
        adjacency=adjacency,
    )
    mu = math.sqrt(sum(b.mu_squared for b in blocks))
    assert mu == pytest.approx(plan.mu, rel=1e-9)


@given(
    seed=st.integers(0, 2**32 - 1),
    ratio=st.floats(0.05, 20.0),
)
def test_no_random_replacement_beats_the_canary(seed: int, ratio: float) -> None:
    # Random neighbouring pairs inside the clip ball never exceed the worst-case canary's μ².
    rng = np.random.default_rng(seed)
    d, r, s_sum = 4, 1.5, 1.0
    s_m = ratio * s_sum * r
    blocks = worst_case_latent_canary(
        clip_norm=r,
        dim=d,
        noise_std_sum=s_sum,
        noise_std_second_moment=s_m,
        noise_std_count=None,
        adjacency=Adjacency.REPLACE_ONE,
    )
    best = sum(b.mu_squared for b in blocks)
    assert best == pytest.approx(joint_mu_squared(r, s_sum, s_m, Adjacency.REPLACE_ONE), rel=1e-9)
    for _ in range(50):
        z, zp = rng.normal(size=(2, d))
        z *= r * rng.uniform() ** 0.25 / np.linalg.norm(z)
        zp *= r * rng.uniform() ** 0.25 / np.linalg.norm(zp)
        value = (
            np.sum((z - zp) ** 2) / s_sum**2
            + np.sum((np.outer(z, z) - np.outer(zp, zp)) ** 2) / s_m**2
        )
        assert value <= best * (1 + 1e-12)


def test_calibrated_release_is_consistent_and_tight() -> None:
    # α = 0.05 per bound, fixed seed.  With 2·10⁵ evaluation trials μ_lb reaches ≥ 95 % of μ.
    result = self_audit(4.0, 1e-5, clip_norm=3.0, dim=8, seed=2024)
    assert not result.violation_detected
    assert result.mu_lower_bound <= result.claimed_mu
    assert result.epsilon_lower_bound <= result.claimed_epsilon
    assert 0.95 <= result.tightness <= 1.0
    assert result.canary_mu == pytest.approx(result.claimed_mu, rel=1e-9)
    json.dumps(result.to_dict(), allow_nan=False)


@pytest.mark.parametrize("epsilon", [1.0, 10.0])
def test_half_noise_release_is_detected(epsilon: float) -> None:
    # Halving the noise doubles the true μ; the held-out bound (α = 0.05) then lands near
    # 2μ·0.97, far above μ: missing it would need a > 20-sigma deviation at 2·10⁵ trials.
    plan = plan_latent_release(epsilon, 1e-5, clip_norm=3.0, dim=8, adjacency=Adjacency.REPLACE_ONE)
    result = audit_latent_release(plan, noise_scale=0.5, seed=7)
    assert result.violation_detected
    assert result.mu_lower_bound > result.claimed_mu
    assert result.canary_mu == pytest.approx(2 * plan.mu, rel=1e-9)


def test_audit_coverage_over_many_small_audits() -> None:
    # 100 independent audits of a correct release, 2000 trials each.  Each bound exceeds its
    # claim with probability ≤ α = 0.05, so each count is ≤ Bin(100, 0.05) in distribution;
    # P[Bin(100, 0.05) > 12] ≈ 0.0015, so this test fails falsely with probability < 0.3 %.
    # It catches a bound whose real exceedance rate is above ~20 %.
    component = ReleaseComponent("query", 1.0, np.array([1.0]))
    mu_exceed = eps_exceed = 0
    for seed in range(100):
        result = audit_gaussian_release(
            [component],
            claimed_mu=1.0,
            delta=1e-5,
            num_trials=2000,
            num_calibration_trials=500,
            seed=seed,
        )
        mu_exceed += result.mu_lower_bound > result.claimed_mu
        eps_exceed += result.epsilon_lower_bound > result.claimed_epsilon
    assert mu_exceed <= 12
    assert eps_exceed <= 12


def test_full_release_mode_audits_the_sampler() -> None:
    plan = plan_latent_release(2.0, 1e-5, clip_norm=1.0, dim=4, adjacency=Adjacency.ADD_REMOVE)
    calls: list[tuple[tuple[int, ...], float]] = []

    def good(shape: tuple[int, ...], noise_std: float, *, seed: int | None = None) -> np.ndarray:
        calls.append((shape, noise_std))
        return np.random.default_rng(seed).normal(0.0, noise_std, size=shape)

    def buggy(shape: tuple[int, ...], noise_std: float, *, seed: int | None = None) -> np.ndarray:
        return np.random.default_rng(seed).normal(0.0, 0.5 * noise_std, size=shape)

    # α = 0.01 per bound for the correct sampler (false-failure rate ≤ 2 %, fixed seed); the
    # buggy sampler doubles μ, which 20,000 trials detect with overwhelming probability.
    kwargs = {"mode": SimulationMode.FULL_RELEASE, "num_trials": 20_000,
              "num_calibration_trials": 5_000, "seed": 3, "significance": 0.01}  # fmt: skip
    ok = audit_latent_release(plan, noise_sampler=good, **kwargs)
    assert not ok.violation_detected and ok.tightness > 0.85
    assert {shape[1] for shape, _ in calls} == {4, 16, 1}  # sum, second moment, count blocks
    bad = audit_latent_release(plan, noise_sampler=buggy, **kwargs)
    assert bad.violation_detected


def test_privfed_noise_sampler_passes_the_full_release_audit() -> None:
    # privfed.dp.noise.gaussian_noise drives every coordinate of the simulated release.
    # α = 0.01 per bound with a fixed seed: false-failure rate ≤ 2 %.
    plan = plan_latent_release(4.0, 1e-5, clip_norm=2.0, dim=6, adjacency=Adjacency.REPLACE_ONE)
    result = audit_latent_release(
        plan,
        mode=SimulationMode.FULL_RELEASE,
        noise_sampler=gaussian_noise,
        num_trials=20_000,
        num_calibration_trials=5_000,
        significance=0.01,
        seed=11,
    )
    assert not result.violation_detected
    assert result.tightness > 0.85


def test_full_release_rejects_misshapen_sampler() -> None:
    def broken(shape: tuple[int, ...], noise_std: float, *, seed: int | None = None) -> np.ndarray:
        return np.zeros(3)

    with pytest.raises(AuditError, match="shape"):
        audit_gaussian_mechanism(
            1.0,
            1.0,
            delta=1e-5,
            mode=SimulationMode.FULL_RELEASE,
            noise_sampler=broken,
            num_trials=100,
            num_calibration_trials=100,
            seed=0,
        )


def test_gaussian_mechanism_audit_is_seeded() -> None:
    a = audit_gaussian_mechanism(2.0, 1.0, delta=1e-5, num_trials=1000, seed=5)
    b = audit_gaussian_mechanism(2.0, 1.0, delta=1e-5, num_trials=1000, seed=5)
    assert a == b
    assert a.claimed_mu == 2.0


def test_audit_rejects_bad_arguments() -> None:
    component = ReleaseComponent("q", 1.0, np.array([1.0]))
    with pytest.raises(ParameterError, match="noise_scale"):
        audit_gaussian_release([component], claimed_mu=1.0, delta=1e-5, noise_scale=0.0)
    with pytest.raises(ParameterError, match="noise_sampler"):
        audit_gaussian_release(
            [component], claimed_mu=1.0, delta=1e-5, noise_sampler=lambda *a, **k: None
        )
    with pytest.raises(ParameterError, match="components"):
        audit_gaussian_release([], claimed_mu=1.0, delta=1e-5)
    with pytest.raises(ParameterError, match="noise_std"):
        ReleaseComponent("q", -1.0, np.array([1.0]))
    with pytest.raises(ParameterError, match="noise_std_count"):
        worst_case_latent_canary(
            clip_norm=1.0,
            dim=2,
            noise_std_sum=1.0,
            noise_std_second_moment=1.0,
            noise_std_count=None,
            adjacency=Adjacency.ADD_REMOVE,
        )
