"""Tests of the canary self-audit of privfed's Gaussian latent-statistic release."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

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
    worst_case_latent_canary,
)
from privfed.audit.canary import (
    RELEASE_CODE_TRIALS,
    SIMULATED_LABEL,
    SIMULATION_TRIALS,
    AuditTrials,
    CanaryGame,
    LatentCanaryNoise,
    audit_canary_game,
    worst_case_latent_records,
)
from privfed.dp import Adjacency, gaussian_noise, gdp_epsilon, joint_mu_squared
from privfed.engines.latent.self_audit import simulated_self_audit
from privfed.engines.moments.planning import plan_latent_release
from privfed.errors import AuditError, ParameterError, ParameterTypeError


@pytest.mark.parametrize("adjacency", [Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE])
@pytest.mark.parametrize("epsilon", [0.5, 4.0, 10.0])
def test_worst_case_canary_attains_the_plan_mu(adjacency: Adjacency, epsilon: float) -> None:
    # An independent check of privfed.dp: the canary built here from first principles has
    # exactly the μ that the planner claims (which also equals dp.joint_mu_squared).
    plan = plan_latent_release(epsilon, 1e-5, clip_norm=2.5, dim=6, adjacency=adjacency)
    assert plan.adjacency is adjacency
    blocks = worst_case_latent_canary(LatentCanaryNoise.of(plan))
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
    blocks = worst_case_latent_canary(LatentCanaryNoise(r, d, s_sum, s_m, Adjacency.REPLACE_ONE))
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
    result = simulated_self_audit(
        4.0, 1e-5, clip_norm=3.0, dim=8, trials=dataclasses.replace(SIMULATION_TRIALS, seed=2024)
    )
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
    result = audit_latent_release(
        plan, noise_scale=0.5, trials=dataclasses.replace(SIMULATION_TRIALS, seed=7)
    )
    assert result.violation_detected
    assert result.mu_lower_bound > result.claimed_mu
    assert result.canary_mu == pytest.approx(2 * plan.mu, rel=1e-9)


@pytest.mark.slow
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
            trials=AuditTrials(num_trials=2000, num_calibration_trials=500, seed=seed),
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
    trials = AuditTrials(num_trials=20_000, num_calibration_trials=5_000, significance=0.01, seed=3)
    kwargs = {"mode": SimulationMode.FULL_RELEASE, "trials": trials}
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
        trials=AuditTrials(
            num_trials=20_000, num_calibration_trials=5_000, significance=0.01, seed=11
        ),
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
            trials=AuditTrials(num_trials=100, num_calibration_trials=100, seed=0),
        )


def test_gaussian_mechanism_audit_is_seeded() -> None:
    trials = dataclasses.replace(SIMULATION_TRIALS, num_trials=1000, seed=5)
    a = audit_gaussian_mechanism(2.0, 1.0, delta=1e-5, trials=trials)
    b = audit_gaussian_mechanism(2.0, 1.0, delta=1e-5, trials=trials)
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
        worst_case_latent_canary(LatentCanaryNoise(1.0, 2, 1.0, 1.0, Adjacency.ADD_REMOVE))
    good = (1.0, 2, 1.0, 1.0, Adjacency.REPLACE_ONE)
    for index, name, bad in [
        (0, "clip_norm", 0.0),
        (1, "dim", 0),
        (2, "noise_std_sum", -1.0),
        (3, "noise_std_second_moment", float("nan")),
    ]:
        with pytest.raises(ParameterError, match=name):
            LatentCanaryNoise(*good[:index], bad, *good[index + 1 :])  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="noise_std_count"):
        LatentCanaryNoise(*good, noise_std_count=-0.5)
    with pytest.raises(ParameterTypeError, match="adjacency"):
        LatentCanaryNoise(1.0, 2, 1.0, 1.0, "replace-one")
    with pytest.raises(ParameterTypeError, match="dim"):
        LatentCanaryNoise(1.0, 2.5, 1.0, 1.0, Adjacency.REPLACE_ONE)  # type: ignore[arg-type]
    assert LatentCanaryNoise(*good, noise_std_count=0.0).noise_std_count is None
    with pytest.raises(ParameterTypeError, match="noise"):
        worst_case_latent_canary(good)  # type: ignore[arg-type]


# -- the real-release game with an injected mechanism -----------------------------------

# The machinery of audit_canary_game, driven by a small numpy mechanism: a 3-value
# release x + N(0, σ²) whose canary moves two values.  (The latent engine's adapter
# that runs privfed's real release is tested in tests/engines/latent.)
_SHIFT = np.array([1.0, -0.5, 0.0])
_BASE = np.array([2.0, 1.0, -3.0])


def _gaussian_game(
    noise_std: float = 1.0, *, batch: int = 500, seen: list[int | None] | None = None
) -> CanaryGame:
    def release(with_canary: bool, seed: int | None) -> np.ndarray:
        if seen is not None:
            seen.append(seed)
        exact = _BASE + (_SHIFT if with_canary else 0.0)
        return exact + np.random.default_rng(seed).normal(0.0, noise_std, (batch, 3))

    mu = float(np.linalg.norm(_SHIFT))  # claimed: σ = 1
    return CanaryGame(
        release=release,
        components=(ReleaseComponent("a", 1.0, _SHIFT[:2]), ReleaseComponent("b", 1.0, _SHIFT[2:])),
        baseline=_BASE,
        claimed_mu=mu,
        claimed_epsilon=gdp_epsilon(mu, 1e-5),
        delta=1e-5,
        mechanism="a numpy Gaussian mechanism",
        noise_scale=noise_std,
    )


def test_canary_game_runs_the_injected_release() -> None:
    # α = 0.01 per bound, fixed seed: the correct mechanism fails with probability ≤ 2 %.
    # With half the noise the true μ doubles (2.24 vs 1.12 claimed): at 20,000 trials the
    # bound lands near 2.2, a miss would take a > 30-sigma deviation.
    trials = AuditTrials(num_trials=20_000, num_calibration_trials=5_000, significance=0.01, seed=1)
    ok = audit_canary_game(_gaussian_game(), trials=trials)
    assert ok.mode is SimulationMode.RELEASE_CODE and not ok.simulated
    assert ok.audited == "release code: a numpy Gaussian mechanism"
    assert not ok.violation_detected and ok.tightness > 0.85
    assert ok.mu_attack == ok.epsilon_attack == "joint"  # only one informative block
    assert ok.canary_mu == pytest.approx(ok.claimed_mu)
    bad = audit_canary_game(_gaussian_game(0.5), trials=trials)
    assert bad.violation_detected and bad.mu_lower_bound > 1.5 * bad.claimed_mu
    assert bad.canary_mu == pytest.approx(2 * bad.claimed_mu)
    document = bad.to_dict()
    assert document["mode"] == "release-code" and document["simulated"] is False
    json.dumps(document, allow_nan=False)


@pytest.mark.slow
def test_canary_game_coverage_over_many_small_audits() -> None:
    # As test_audit_coverage_over_many_small_audits, for the real-release machinery, with
    # two informative blocks so that the attack (joint, "a" or "b") is chosen on the
    # calibration trials too: each count is ≤ Bin(100, 0.05) for a correct mechanism;
    # P[> 12] ≈ 0.0015, so this fails falsely with probability < 0.3 %.
    game = dataclasses.replace(
        _gaussian_game(batch=250),
        components=(
            ReleaseComponent("a", 1.0, _SHIFT[:1]),
            ReleaseComponent("b", 1.0, _SHIFT[1:]),
        ),
    )
    mu_exceed = eps_exceed = 0
    chosen = set()
    for seed in range(100):
        trials = AuditTrials(num_trials=2000, num_calibration_trials=500, seed=seed)
        result = audit_canary_game(game, trials=trials)
        mu_exceed += result.mu_lower_bound > result.claimed_mu
        eps_exceed += result.epsilon_lower_bound > result.claimed_epsilon
        chosen |= {result.mu_attack, result.epsilon_attack}
    assert mu_exceed <= 12
    assert eps_exceed <= 12
    assert "joint" in chosen and chosen <= {"joint", "a", "b"}


def test_canary_game_seeds_every_release_or_leaves_it_to_the_csprng() -> None:
    seen: list[int | None] = []
    game = _gaussian_game(seen=seen, batch=100)
    trials = AuditTrials(num_trials=300, num_calibration_trials=200, seed=9)
    a = audit_canary_game(game, trials=trials)
    # 2·(300 + 200) trials at 100 per call, each call with its own seed.
    assert len(seen) == 10 and len(set(seen)) == 10 and None not in seen
    assert a == audit_canary_game(game, trials=trials)
    seen.clear()
    audit_canary_game(game, trials=AuditTrials(num_trials=100, num_calibration_trials=100))
    assert seen == [None] * 4


def test_canary_game_rejects_bad_releases_and_arguments() -> None:
    good = _gaussian_game()
    for output, message in ((np.zeros((4, 2)), "shape"), (np.full(3, np.nan), "non-finite")):

        def constant(with_canary: bool, seed: int | None, out: Any = output) -> Any:
            return out

        game = dataclasses.replace(good, release=constant)
        with pytest.raises(AuditError, match=message):
            audit_canary_game(
                game, trials=AuditTrials(num_trials=100, num_calibration_trials=100, seed=0)
            )
    with pytest.raises(ParameterError, match="baseline"):
        dataclasses.replace(good, baseline=np.zeros(2))
    with pytest.raises(ParameterError, match="mechanism"):
        dataclasses.replace(good, mechanism=" ")
    with pytest.raises(ParameterTypeError, match="release"):
        dataclasses.replace(good, release=None)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="game"):
        audit_canary_game("game")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="num_trials"):
        AuditTrials(num_trials=10)
    with pytest.raises(ParameterError, match="num_calibration_trials"):
        AuditTrials(num_calibration_trials=99)
    with pytest.raises(ParameterError, match="significance"):
        AuditTrials(significance=1.0)
    with pytest.raises(ParameterError, match="seed"):
        AuditTrials(seed=-1)
    with pytest.raises(ParameterTypeError, match="trials"):
        audit_canary_game(good, trials=(2000, 500))  # type: ignore[arg-type]
    assert AuditTrials(50_000, 12_500, 0.05, None) == RELEASE_CODE_TRIALS
    assert AuditTrials(200_000, 50_000, 0.05, None) == SIMULATION_TRIALS
    assert isinstance(good, CanaryGame)


def test_simulated_audits_say_they_are_simulated() -> None:
    assert (
        SIMULATED_LABEL == "simulated: checks the accounting arithmetic only, not the release code"
    )
    result = simulated_self_audit(
        4.0,
        1e-5,
        clip_norm=1.0,
        dim=4,
        trials=dataclasses.replace(SIMULATION_TRIALS, num_trials=1000, seed=0),
    )
    assert result.simulated and result.audited == SIMULATED_LABEL
    assert result.to_dict()["audited"] == SIMULATED_LABEL
    assert result.mechanism == "" and result.mu_attack == "joint"
    plan = plan_latent_release(2.0, 1e-5, clip_norm=1.0, dim=2, adjacency=Adjacency.REPLACE_ONE)
    trials = dataclasses.replace(SIMULATION_TRIALS, num_trials=200, seed=0)
    full = audit_latent_release(plan, mode=SimulationMode.FULL_RELEASE, trials=trials)
    assert full.simulated and "not the release code" in full.audited and "sampler" in full.audited
    # Release-code results must name what was run; simulations must not.
    with pytest.raises(ParameterError, match="mechanism"):
        dataclasses.replace(result, mode=SimulationMode.RELEASE_CODE)
    with pytest.raises(ParameterError, match="mechanism"):
        dataclasses.replace(result, mechanism="release_latent_statistics")
    with pytest.raises(ParameterError, match="mode"):
        audit_gaussian_release(
            [ReleaseComponent("q", 1.0, np.array([1.0]))],
            claimed_mu=1.0,
            delta=1e-5,
            mode=SimulationMode.RELEASE_CODE,
        )


@pytest.mark.parametrize("adjacency", [Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE])
def test_worst_case_records_give_the_worst_case_canary(adjacency: Adjacency) -> None:
    plan = plan_latent_release(3.0, 1e-5, clip_norm=2.0, dim=5, adjacency=adjacency)
    noise = LatentCanaryNoise(
        clip_norm=2.0,
        dim=5,
        noise_std_sum=plan.noise_std_sum,
        noise_std_second_moment=plan.noise_std_second_moment,
        adjacency=adjacency,
        noise_std_count=plan.noise_std_count,
    )
    z, z_prime = worst_case_latent_records(noise)
    assert np.linalg.norm(z) == pytest.approx(2.0)
    blocks = worst_case_latent_canary(noise)
    other = np.zeros(5) if z_prime is None else z_prime
    assert (z_prime is None) == (adjacency is Adjacency.ADD_REMOVE)
    np.testing.assert_allclose(blocks[0].canary_shift, z - other)
    np.testing.assert_allclose(
        blocks[1].canary_shift, (np.outer(z, z) - np.outer(other, other)).ravel()
    )
    if z_prime is not None:
        assert np.linalg.norm(z_prime) == pytest.approx(2.0)
