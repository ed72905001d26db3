"""The canary self-audit of the latent engine's REAL release code.

Every audit here runs ``release_latent_statistics`` (or a deliberately broken
variant of it) on real neighbouring ``LatentStatistics``.  Statistical tests use
fixed seeds; each states the probability that it would fail for a correct
implementation over the draw of the seed ("false-failure rate").
"""

from __future__ import annotations

import dataclasses
import inspect
import math

import numpy as np
import pytest

from privfed.audit import SimulationMode, audit_latent_release
from privfed.audit.canary import RELEASE_CODE_TRIALS, AuditTrials, audit_canary_game
from privfed.dp import Adjacency, PrivacyLedger
from privfed.engines.latent.release import (
    NoisePlacement,
    NoisyLatentStatistics,
    release_latent_statistics,
)
from privfed.engines.latent.self_audit import (
    PlannedRelease,
    audit_latent_release_code,
    latent_canary_game,
    neighbouring_statistics,
    self_audit_release,
)
from privfed.engines.latent.statistics import LatentStatistics
from privfed.engines.moments.planning import LatentReleasePlan, plan_latent_release
from privfed.errors import AuditError, ParameterError, ParameterTypeError

# 2·(10,000 + 2,500) published releases per audit: ~1–2 s at d = 6.
SMALL = AuditTrials(num_trials=10_000, num_calibration_trials=2_500, significance=0.01)
# Twice as many for the detection tests.
DETECT = AuditTrials(num_trials=20_000, num_calibration_trials=5_000, significance=0.01)
RELEASE = "release code: privfed.engines.latent.release.release_latent_statistics"


def _plan(epsilon: float, adjacency: Adjacency, *, dim: int = 6) -> LatentReleasePlan:
    return plan_latent_release(epsilon, 1e-5, clip_norm=3.0, dim=dim, adjacency=adjacency)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("adjacency", "placement"),
    [
        (Adjacency.REPLACE_ONE, NoisePlacement.GRID),
        (Adjacency.ADD_REMOVE, NoisePlacement.GRID),
        (Adjacency.REPLACE_ONE, NoisePlacement.CONTINUOUS),
        (Adjacency.ADD_REMOVE, NoisePlacement.CONTINUOUS),
    ],
)
def test_real_release_keeps_its_claim(adjacency: Adjacency, placement: NoisePlacement) -> None:
    # The release as the server runs it.  α = 0.01 per bound, so for a correct release
    # each case fails with probability ≤ 2 % over the seed (fixed here).  At 10,000
    # trials per hypothesis the held-out bound reaches 86–90 % of the claim at ε = 4
    # (sampling spread ≈ 4 %), so the check that it is not vacuous asks for 70 %.
    plan = _plan(4.0, adjacency)
    result = audit_latent_release_code(
        plan, placement=placement, trials=dataclasses.replace(SMALL, seed=101)
    )
    assert result.mode is SimulationMode.RELEASE_CODE
    assert not result.simulated
    assert result.audited.startswith(RELEASE)
    assert f"{placement.value} placement" in result.audited
    assert not result.violation_detected
    assert result.mu_lower_bound <= result.claimed_mu == plan.mu
    assert result.epsilon_lower_bound <= result.claimed_epsilon == plan.epsilon
    assert result.tightness > 0.7
    # The grid canary attains the plan's μ up to the grid (z' is truncated toward zero,
    # which only lowers it; R·2**f is an integer here, so z itself is exact).
    assert result.canary_mu == pytest.approx(plan.mu, rel=1e-4)
    assert result.canary_mu <= plan.mu
    assert result.to_dict()["audited"] == result.audited


@pytest.mark.slow
@pytest.mark.parametrize("adjacency", [Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE])
@pytest.mark.parametrize("epsilon", [1.0, 10.0])
def test_half_noise_release_is_caught(adjacency: Adjacency, epsilon: float) -> None:
    # The real release code run with half the planned noise, audited against the plan's
    # claim.  The true μ doubles.  Measured over 6 seeds at 20,000 trials (α = 0.01):
    # ε = 1 (μ = 0.268): μ_lb = 0.48 ± 0.014; ε = 10 (μ = 2.0): μ_lb ≈ 3.9.  Missing the
    # violation would take a > 14-sigma deviation, so this fails falsely with
    # probability far below 1e-9 for any seed.
    plan = _plan(epsilon, adjacency)
    broken = PlannedRelease(plan, noise_scale=0.5)
    assert broken.broken
    result = audit_latent_release_code(
        plan, release=broken, trials=dataclasses.replace(DETECT, seed=7)
    )
    assert result.violation_detected
    assert result.mu_lower_bound > result.claimed_mu
    assert result.canary_mu == pytest.approx(2 * plan.mu, rel=1e-4)
    assert result.noise_scale == 0.5
    assert "DELIBERATELY BROKEN" in result.audited


@pytest.mark.slow
def test_release_that_forgets_the_count_noise_is_caught_but_not_by_simulation() -> None:
    # A bug in the release code itself: under ADD_REMOVE the counts go out exactly.
    # The simulated audit, built from the claimed noise stds, cannot see it; the audit of
    # the code separates "in" from "out" perfectly on the count block (FPR = FNR = 0 at
    # 10,000 trials), far above the claim whatever the seed.
    plan = _plan(4.0, Adjacency.ADD_REMOVE)
    correct = PlannedRelease(plan)

    def exact_counts(stats: LatentStatistics, seed: int | None) -> NoisyLatentStatistics:
        noisy = correct(stats, seed)
        return dataclasses.replace(noisy, counts=stats.counts.astype(np.float64))

    real = audit_latent_release_code(
        plan, release=exact_counts, trials=dataclasses.replace(SMALL, seed=5)
    )
    assert real.violation_detected
    assert real.mu_attack == "count"
    assert real.mu_lower_bound > 3 * plan.mu
    assert "exact_counts" in real.audited
    simulated = audit_latent_release(plan, trials=dataclasses.replace(SMALL, seed=5))
    assert simulated.simulated and not simulated.violation_detected


@pytest.mark.parametrize("adjacency", [Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE])
def test_neighbouring_statistics_differ_by_the_canary_only(adjacency: Adjacency) -> None:
    plan = _plan(2.0, adjacency)
    with_canary, without = neighbouring_statistics(plan, num_classes=3)
    cfg = with_canary.config
    assert cfg == without.config and cfg.num_classes == 3
    scale = 2**cfg.bits
    # Every class holds the same records.
    for stats in (with_canary, without):
        assert (stats.sums == stats.sums[0]).all()
        assert (stats.second_moments == stats.second_moments[0]).all()
    diff_counts = with_canary.counts - without.counts
    diff_sums = (with_canary.sums - without.sums)[0]
    if adjacency is Adjacency.ADD_REMOVE:
        # Present vs absent: the difference is the canary R·e1 itself, on the grid.
        assert (diff_counts == 1).all()
        assert diff_sums[0] == round(3.0 * scale) and not diff_sums[1:].any()
    else:
        # Replace one: equal counts; z = R·e1 replaced by z' with ‖z'‖ = R (to the grid).
        assert not diff_counts.any()
        z = np.zeros(plan.dim)
        z[0] = round(3.0 * scale)
        z_prime = z - diff_sums
        assert diff_sums.any() and not diff_sums[2:].any()
        assert 3.0 * scale - 2 <= np.linalg.norm(z_prime) <= 3.0 * scale


def test_audit_calls_the_release_on_both_datasets_with_fresh_seeds() -> None:
    plan = _plan(2.0, Adjacency.REPLACE_ONE, dim=3)
    seen: list[tuple[int, int | None]] = []
    real = PlannedRelease(plan)

    def spy(stats: LatentStatistics, seed: int | None) -> NoisyLatentStatistics:
        seen.append((int(stats.sums[0, 1]), seed))
        return real(stats, seed)

    game = latent_canary_game(plan, release=spy, classes_per_release=50)
    trials = AuditTrials(num_trials=200, num_calibration_trials=100, seed=3)
    result = audit_canary_game(game, trials=trials)
    assert result.num_trials == 200
    # 2·(200 + 100) trials at 50 per call: 2·(4 + 2) calls.
    assert len(seen) == 12
    assert len({sums for sums, _ in seen}) == 2  # both neighbours were released
    seeds = [seed for _, seed in seen]
    assert all(isinstance(s, int) for s in seeds) and len(set(seeds)) == len(seeds)

    seen.clear()
    audit_canary_game(game, trials=AuditTrials(num_trials=100, num_calibration_trials=100))
    assert seen and all(seed is None for _, seed in seen)  # the release's own CSPRNG


def test_unseeded_releases_draw_fresh_noise() -> None:
    plan = _plan(2.0, Adjacency.ADD_REMOVE, dim=3)
    game = latent_canary_game(plan, classes_per_release=4)
    first, second = game.release(True, None), game.release(True, None)
    assert first.shape == second.shape == (4, game.size)
    assert not np.array_equal(first, second)


def test_seeded_audit_is_reproducible() -> None:
    plan = _plan(4.0, Adjacency.REPLACE_ONE, dim=3)
    trials = AuditTrials(num_trials=500, num_calibration_trials=200, seed=11)
    a = audit_latent_release_code(plan, classes_per_release=64, trials=trials)
    b = audit_latent_release_code(plan, classes_per_release=64, trials=trials)
    assert a == b


@pytest.mark.slow
def test_one_release_per_trial_gives_a_valid_audit() -> None:
    # classes_per_release=1 does not rely on the independence of the noise across
    # classes: one call per trial.  α = 0.01 per bound (fixed seed): false-failure rate
    # ≤ 2 %.  μ_lb is 0.56–0.83 over seeds 0–4 (claim 0.92), so it is never 0 by chance.
    plan = _plan(4.0, Adjacency.REPLACE_ONE, dim=2)
    result = audit_latent_release_code(
        plan,
        classes_per_release=1,
        trials=AuditTrials(num_trials=600, num_calibration_trials=300, significance=0.01, seed=2),
    )
    assert not result.violation_detected
    assert result.mu_lower_bound > 0.0


@pytest.mark.slow
def test_self_audit_release_plans_and_runs_the_real_release() -> None:
    # α = 0.01 per bound, fixed seed: false-failure rate ≤ 2 %.
    small = dataclasses.replace(SMALL, seed=0)
    result = self_audit_release(4.0, 1e-5, clip_norm=1.0, dim=4, trials=small)
    plan = plan_latent_release(4.0, 1e-5, clip_norm=1.0, dim=4, adjacency=Adjacency.REPLACE_ONE)
    assert result.claimed_mu == plan.mu
    assert result.audited.startswith(RELEASE)
    assert "replace-one" in result.audited
    assert not result.violation_detected
    broken = self_audit_release(4.0, 1e-5, clip_norm=1.0, dim=4, noise_scale=0.5, trials=small)
    assert broken.violation_detected
    default = inspect.signature(self_audit_release).parameters["trials"].default
    assert default is RELEASE_CODE_TRIALS
    assert (default.num_trials, default.num_calibration_trials) == (50_000, 12_500)


def test_broken_release_keeps_an_honest_plan_of_its_own() -> None:
    # The half-noise release runs the real code with a valid plan for its own noise
    # (so the release accepts it); only the audited claim is the original plan's.
    plan = _plan(4.0, Adjacency.ADD_REMOVE, dim=3)
    broken = PlannedRelease(plan, noise_scale=0.5)
    stats, _ = neighbouring_statistics(plan)
    noisy = broken(stats, 0)
    assert noisy.noise_std_sum == pytest.approx(0.5 * plan.noise_std_sum)
    assert noisy.noise_std_count == pytest.approx(0.5 * plan.noise_std_count)
    honest = release_latent_statistics(stats, plan, ledger=PrivacyLedger())
    assert honest.noise_std_sum == plan.noise_std_sum
    assert math.isclose(PlannedRelease(plan).noise_scale, 1.0)


def test_self_audit_rejects_bad_arguments() -> None:
    plan = _plan(2.0, Adjacency.REPLACE_ONE, dim=3)
    private = plan_latent_release(
        2.0, 1e-5, clip_norm=3.0, dim=3, adjacency=Adjacency.REPLACE_ONE, private_labels=True
    )
    with pytest.raises(ParameterError, match="plan"):
        latent_canary_game(private)
    with pytest.raises(ParameterTypeError, match="plan"):
        latent_canary_game("plan")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="noise_scale"):
        PlannedRelease(plan, noise_scale=0.0)
    with pytest.raises(ParameterTypeError, match="release"):
        latent_canary_game(plan, release=42)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="num_classes"):
        neighbouring_statistics(plan, num_classes=2**20)

    def not_a_release(stats: LatentStatistics, seed: int | None) -> object:
        return stats.sums

    game = latent_canary_game(plan, release=not_a_release, classes_per_release=2)  # type: ignore[arg-type]
    with pytest.raises(AuditError, match="NoisyLatentStatistics"):
        audit_canary_game(
            game, trials=AuditTrials(num_trials=100, num_calibration_trials=100, seed=0)
        )
