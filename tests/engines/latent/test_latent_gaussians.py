"""Server side: DP release with the ledger, Gaussian fitting, PSD projection, sampling."""

from __future__ import annotations

import numpy as np
import pytest

from privfed.dp import Adjacency, PrivacyLedger
from privfed.engines.latent.client import compute_latent_statistics
from privfed.engines.latent.gaussians import fit_class_gaussians, project_psd
from privfed.engines.latent.release import (
    nonprivate_release,
    release_latent_statistics,
    release_with_noise_stds,
)
from privfed.engines.moments.planning import paper_baseline_noise_stds, plan_latent_release
from privfed.errors import BudgetExceededError, ParameterError


def _gaussian_data(seed: int = 0, n: int = 4000, d: int = 4):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(3, d)) * 0.5
    mix = rng.normal(size=(3, d, d)) * 0.2
    z = np.concatenate([means[c] + rng.normal(size=(n, d)) @ mix[c].T for c in range(3)])
    y = np.repeat(np.arange(3), n)
    return z, y, means, mix @ mix.transpose(0, 2, 1)


def test_noiseless_fit_recovers_mean_and_covariance() -> None:
    z, y, _, _ = _gaussian_data()
    stats = compute_latent_statistics(z, y, num_classes=3, clip_norm=100.0)  # nothing clipped
    g = fit_class_gaussians(nonprivate_release(stats), eigenvalue_floor=0.0)
    for c in range(3):
        rows = z[y == c]
        np.testing.assert_allclose(g.means[c], rows.mean(0), atol=2.0**-stats.config.bits)
        np.testing.assert_allclose(
            g.covariances[c], np.cov(rows.T, bias=True), atol=200 * 2.0**-stats.config.bits
        )


def test_release_records_in_ledger_and_seed_reproduces() -> None:
    z, y, _, _ = _gaussian_data(n=500)
    stats = compute_latent_statistics(z, y, num_classes=3, clip_norm=2.0)
    plan = plan_latent_release(10.0, 1e-5, clip_norm=2.0, dim=4, adjacency=Adjacency.REPLACE_ONE)
    ledger = PrivacyLedger()
    a = release_latent_statistics(stats, plan, ledger=ledger, seed=7)
    b = release_latent_statistics(stats, plan, ledger=PrivacyLedger(), seed=7)
    c = release_latent_statistics(stats, plan, ledger=PrivacyLedger(), seed=8)
    assert np.array_equal(a.sums, b.sums) and np.array_equal(a.second_moments, b.second_moments)
    assert not np.array_equal(a.sums, c.sums)
    assert len(ledger.releases) == 3 and all(r.seeded for r in ledger.releases)
    assert ledger.guarantee(1e-5).epsilon == pytest.approx(10.0, rel=1e-6)
    assert np.array_equal(a.counts, stats.counts)  # public counts under REPLACE_ONE
    np.testing.assert_allclose(a.second_moments, np.swapaxes(a.second_moments, 1, 2))


def test_release_noise_has_planned_std() -> None:
    # α ≈ 1e-6 per bound: the sample std of 9000 Gaussian draws is within 5 %.
    z, y, _, _ = _gaussian_data(n=10)
    stats = compute_latent_statistics(z, y, num_classes=3, clip_norm=1.0)
    plan = plan_latent_release(1.0, 1e-5, clip_norm=1.0, dim=4, adjacency=Adjacency.REPLACE_ONE)
    diffs_sum, diffs_diag, diffs_off = [], [], []
    for seed in range(250):
        r = release_latent_statistics(stats, plan, ledger=PrivacyLedger(), seed=seed)
        diffs_sum.append(r.sums - stats.sums_float())
        delta = r.second_moments - stats.second_moment_matrices()
        diffs_diag.append(np.diagonal(delta, axis1=1, axis2=2))
        diffs_off.append(delta[:, 0, 1:])
    assert np.std(diffs_sum) == pytest.approx(plan.noise_std_sum, rel=0.05)
    assert np.std(diffs_diag) == pytest.approx(plan.noise_std_second_moment, rel=0.05)
    assert np.std(diffs_off) == pytest.approx(plan.noise_std_second_moment / 2**0.5, rel=0.05)


def test_budget_overflow_releases_nothing() -> None:
    z, y, _, _ = _gaussian_data(n=50)
    stats = compute_latent_statistics(z, y, num_classes=3, clip_norm=2.0)
    plan = plan_latent_release(10.0, 1e-5, clip_norm=2.0, dim=4, adjacency=Adjacency.REPLACE_ONE)
    ledger = PrivacyLedger(budget_epsilon=1.0, budget_delta=1e-5)
    with pytest.raises(BudgetExceededError):
        release_latent_statistics(stats, plan, ledger=ledger)
    assert ledger.releases == ()
    wrong = plan_latent_release(10.0, 1e-5, clip_norm=3.0, dim=4, adjacency=Adjacency.REPLACE_ONE)
    with pytest.raises(ParameterError, match="plan"):
        release_latent_statistics(stats, wrong, ledger=ledger)


def test_bias_correction_removes_mean_noise_inflation() -> None:
    # Averaged over 200 releases and all 12 diagonal entries, the corrected estimate
    # is unbiased and the uncorrected one low by gap = σ²/n² = 0.25.  The std of that
    # average is about 0.013, so both bounds sit > 7 std away: α < 1e-10.
    z, y, _, _ = _gaussian_data(n=60)
    stats = compute_latent_statistics(z, y, num_classes=3, clip_norm=3.0)
    truth = fit_class_gaussians(nonprivate_release(stats), eigenvalue_floor=0.0).covariances
    est_on, est_off = [], []
    for seed in range(200):
        r = release_with_noise_stds(
            stats,
            noise_std_sum=30.0,
            noise_std_second_moment=1e-3,
            ledger=PrivacyLedger(),
            seed=seed,
        )
        n = r.counts[:, None, None]
        mean = r.sums / n[:, :, 0]
        raw = r.second_moments / n - mean[:, :, None] * mean[:, None, :]
        est_off.append(np.diagonal(raw, axis1=1, axis2=2))
        est_on.append(np.diagonal(raw, axis1=1, axis2=2) + 900.0 / n[:, :, 0] ** 2)
    target = np.diagonal(truth, axis1=1, axis2=2)
    gap = 900.0 / 60**2
    assert abs(np.mean(np.mean(est_on, axis=0) - target)) < 0.4 * gap
    assert np.mean(np.mean(est_off, axis=0) - target) < -0.6 * gap


def test_paper_baseline_release_is_recorded_separately() -> None:
    z, y, _, _ = _gaussian_data(n=50)
    stats = compute_latent_statistics(z, y, num_classes=3, clip_norm=2.0)
    std_sum, std_second = paper_baseline_noise_stds(10.0, 1e-5, clip_norm=2.0)
    ledger = PrivacyLedger()
    release_with_noise_stds(
        stats, noise_std_sum=std_sum, noise_std_second_moment=std_second, ledger=ledger
    )
    assert len(ledger.releases) == 6 and not any(r.seeded for r in ledger.releases)
    assert ledger.guarantee(1e-5).epsilon <= 10.0


def test_project_psd_floor_and_factor() -> None:
    a = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    projected, factor = project_psd(a, 0.1)
    values = np.linalg.eigvalsh(projected)
    np.testing.assert_allclose(values, [0.1, 3.0], atol=1e-12)
    np.testing.assert_allclose(factor @ factor.T, projected, atol=1e-12)


def test_sampling_is_seeded_and_matches_moments() -> None:
    z, y, _, _ = _gaussian_data()
    stats = compute_latent_statistics(z, y, num_classes=3, clip_norm=100.0)
    g = fit_class_gaussians(nonprivate_release(stats), eigenvalue_floor=0.0)
    a, la = g.sample(20000, seed=1)
    b, lb = g.sample(20000, seed=1)
    assert np.array_equal(a, b) and np.array_equal(la, lb) and a.dtype == np.float32
    # α < 1e-6: 20000 samples put the empirical mean within 0.03 of the fitted one.
    for c in range(3):
        np.testing.assert_allclose(a[la == c].mean(0), g.means[c], atol=0.03)
    with pytest.raises(ParameterError):
        g.sample(np.array([1, -1, 0]))
