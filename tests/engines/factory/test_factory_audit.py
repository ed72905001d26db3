"""Membership-inference audit of factories: hooks, attacks, bounds, multiple testing."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from privfed.engines.codecs import PCACodec
from privfed.engines.factory import (
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    FactoryAuditConfig,
    LatentGaussianFactory,
    UNetConfig,
    attacks_for,
    audit_factories,
    audit_factory,
    factory_attack_scores,
    numpy_denoiser,
)
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

TINY_UNET = UNetConfig(block_out_channels=(8, 16), norm_num_groups=4)


def _images(n: int, seed: int) -> torch.Tensor:
    return torch.rand((n, 1, 8, 8), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def edm() -> EDMDiffusionFactory:
    return EDMDiffusionFactory(
        unet=TINY_UNET,
        edm=EDMConfig(sampling_steps=2),
        training=EDMTrainingConfig(steps=3, batch_size=8, seed=0),
        class_id=1,
        client_id=2,
    ).fit(_images(16, 0))


# -- the EDM denoiser hook ------------------------------------------------------------


def test_denoise_is_the_preconditioned_denoiser_in_image_units(edm: EDMDiffusionFactory) -> None:
    x = _images(5, 1)
    noisy = x + 0.1 * torch.randn(x.shape, generator=torch.Generator().manual_seed(2))
    out = edm.denoise(noisy, 0.1)
    assert out.shape == x.shape and out.dtype == torch.float32
    # Same computation through the private D(y; σ) in [−1, 1] units at σ = 2·0.1.
    with torch.no_grad():
        y_hat = edm._denoise(edm._model, noisy * 2 - 1, torch.full((5,), 0.2))
    assert torch.allclose(out, (y_hat + 1) / 2, atol=1e-6)
    # As σ → 0, c_skip → 1 and c_out → 0 (Karras et al. Table 1): D(x; σ) → x.
    assert torch.allclose(edm.denoise(x, 1e-5), x, atol=1e-3)
    assert edm.denoise(x[:0], 0.1).shape == (0, 1, 8, 8)


def test_denoise_validates(edm: EDMDiffusionFactory) -> None:
    x = _images(2, 0)
    with pytest.raises(ParameterError):
        edm.denoise(x, 0.0)
    with pytest.raises(ParameterError):
        edm.denoise(torch.rand(2, 1, 4, 4), 0.1)
    with pytest.raises(ParameterTypeError):
        edm.denoise(x.numpy(), 0.1)  # type: ignore[arg-type]
    with pytest.raises(NonFiniteInputError):
        edm.denoise(torch.full((1, 1, 8, 8), float("nan")), 0.1)
    with pytest.raises(ParameterError):
        EDMDiffusionFactory().denoise(x, 0.1)
    den = numpy_denoiser(edm)
    arr = den(x.double().numpy(), 0.1)
    assert arr.dtype == np.float64 and arr.shape == (2, 1, 8, 8)


def test_denoising_scores_are_deterministic_and_paired(edm: EDMDiffusionFactory) -> None:
    cfg = FactoryAuditConfig(noise_stds=(0.1, 0.3), seed=4)
    x = _images(6, 3)
    a = factory_attack_scores(edm, x, "denoising-loss", config=cfg)
    b = factory_attack_scores(edm, x, "denoising-loss", config=cfg)
    assert a.shape == (6,) and np.array_equal(a, b)
    # The noise draws come from the seed: another seed gives other scores.
    other = factory_attack_scores(edm, x, "denoising-loss", config=replace(cfg, seed=5))
    assert not np.array_equal(a, other)
    with pytest.raises(ParameterError):
        factory_attack_scores(edm, x, "log-likelihood")


def test_edm_audit_reports_every_field(edm: EDMDiffusionFactory) -> None:
    cfg = FactoryAuditConfig(noise_stds=(0.1, 0.3), fprs=(0.1, 0.01))
    audit = audit_factory(edm, _images(16, 0), _images(20, 9), config=cfg)
    assert (audit.class_id, audit.client_id, audit.basis) == (1, 2, None)
    (attack,) = audit.attacks
    assert attack.attack == "denoising-loss"
    assert attack.auc_per_noise_std is not None and len(attack.auc_per_noise_std) == 2
    # 20 non-members resolve FPR 0.1 only with >= 30 of them: both flagged unsupported.
    assert [t.supported for t in attack.metrics.tpr_at_fpr] == [False, False]
    # The bound is evaluated on the half not used to pick the threshold.
    assert attack.bound.num_members == 8 and attack.bound.num_nonmembers == 10
    assert attack.bound.significance == pytest.approx(0.05)
    json.dumps(audit.to_dict())


# -- attacks on Gaussian factories ------------------------------------------------------


def test_attacks_per_factory_kind(edm: EDMDiffusionFactory) -> None:
    codec = PCACodec.fit(_images(30, 50), latent_dim=4)
    assert attacks_for(edm) == ("denoising-loss",)
    assert attacks_for(LatentGaussianFactory()) == ("log-likelihood", "reconstruction")
    assert attacks_for(LatentGaussianFactory(codec=codec)) == ("log-likelihood",)
    with pytest.raises(ParameterTypeError):
        attacks_for(object())


def test_memorising_factory_is_caught_with_a_positive_bound() -> None:
    # 40 members, 39 private principal directions: the basis spans every member,
    # so members reconstruct exactly and non-members do not (AUC = 1).  With 20
    # evaluation members and 30 evaluation non-members (almost) all classified
    # right, the Clopper–Pearson bounds at α/2 = 0.025/2 give ε_lb ≈ 1.7; the
    # largest possible with these counts is ln((1−FNR_ub)/FPR_ub) ≈ 1.9.
    members, nonmembers = _images(40, 10), _images(60, 11)
    factory = LatentGaussianFactory(latent_dim=39).fit(members)
    audit = audit_factory(factory, members, nonmembers)
    by_name = {a.attack: a for a in audit.attacks}
    assert set(by_name) == {"log-likelihood", "reconstruction"}
    rec = by_name["reconstruction"]
    assert rec.metrics.auc.estimate == 1.0
    assert rec.bound.significance == pytest.approx(0.025)  # α split over 2 attacks
    assert rec.bound.epsilon_lower_bound > 1.0
    assert rec.bound.mu_lower_bound > 1.0
    assert by_name["log-likelihood"].metrics.auc.estimate > 0.9


def test_no_membership_gives_no_bound() -> None:
    # The "members" were never trained on: both sets are fresh draws of the same
    # distribution.  The AUC interval (95 %) covers 0.5 and ε_lb > 0 happens with
    # probability <= α = 0.05 per attack by the bound's guarantee (fixed seeds,
    # so this either always passes or always fails; α is the chance a seed fails).
    factory = LatentGaussianFactory(latent_dim=8).fit(_images(50, 20))
    audit = audit_factory(factory, _images(100, 21), _images(100, 22))
    for attack in audit.attacks:
        auc = attack.metrics.auc
        assert auc.lower <= 0.5 <= auc.upper
        assert attack.bound.epsilon_lower_bound == 0.0


def test_public_codec_factory_leaks_less_than_private_pca() -> None:
    # Same members and non-members; the private basis memorises, the public one cannot.
    members, nonmembers = _images(30, 30), _images(60, 31)
    codec = PCACodec.fit(_images(200, 32), latent_dim=8)
    private = LatentGaussianFactory(latent_dim=29).fit(members)
    public = LatentGaussianFactory(codec=codec).fit(members)
    auc_private = audit_factory(private, members, nonmembers).attacks[1].metrics.auc.estimate
    auc_public = audit_factory(public, members, nonmembers).attacks[0].metrics.auc.estimate
    assert auc_private == 1.0
    assert auc_public < 0.9


# -- many factories ---------------------------------------------------------------------


def test_audit_factories_splits_significance_and_skips() -> None:
    a = LatentGaussianFactory(latent_dim=3, class_id=0, client_id=0).fit(_images(10, 40))
    b = LatentGaussianFactory(latent_dim=3, class_id=1, client_id=1).fit(_images(3, 41))
    c = LatentGaussianFactory(latent_dim=3, class_id=2, client_id=2).fit(_images(10, 42))
    d = LatentGaussianFactory(latent_dim=3, class_id=3, client_id=3).fit(_images(10, 43))
    calls: list[tuple[int, int]] = []
    report = audit_factories(
        [
            (0, 0, a, _images(10, 40), _images(12, 50)),
            (1, 1, b, _images(3, 41), _images(12, 51)),  # too few members
            (2, 2, c, _images(10, 42), _images(12, 52)),
            (3, 3, d, _images(10, 43), _images(12, 53)),  # beyond max_factories
        ],
        config=FactoryAuditConfig(max_factories=2, significance=0.1),
        progress=lambda done, total: calls.append((done, total)),
    )
    assert [(f.class_id, f.client_id) for f in report.factories] == [(0, 0), (2, 2)]
    assert [cell for cell, _ in report.skipped] == ["class=1/client=1", "class=3/client=3"]
    # 2 factories x 2 attacks: each bound at 0.1 / 4.
    assert report.per_test_significance == pytest.approx(0.025)
    assert all(
        at.bound.significance == pytest.approx(0.025) for f in report.factories for at in f.attacks
    )
    assert calls == [(1, 2), (2, 2)]
    d_out = report.to_dict()
    json.dumps(d_out)
    summary = d_out["summary"]
    assert set(summary) == {"log-likelihood", "reconstruction"}
    aucs = [f.attacks[0].metrics.auc.estimate for f in report.factories]
    assert summary["log-likelihood"]["max_auc"] == max(aucs)
    assert summary["log-likelihood"]["factories"] == 2
    with pytest.raises(ParameterError):
        audit_factories([(1, 1, b, _images(3, 41), _images(12, 51))])
    with pytest.raises(ParameterTypeError):
        audit_factories([(0, 0, "factory", _images(5, 0), _images(5, 1))])


def test_audit_inputs_are_validated() -> None:
    f = LatentGaussianFactory(latent_dim=2).fit(_images(6, 0))
    with pytest.raises(ParameterError):
        audit_factory(f, _images(3, 0), _images(10, 1))  # < 4 members
    with pytest.raises(ParameterError):
        audit_factory(f, _images(6, 0), torch.rand(6, 1, 4, 4))
    with pytest.raises(ParameterError):
        audit_factory(LatentGaussianFactory(), _images(6, 0), _images(6, 1))  # unfitted
    with pytest.raises(ParameterError):
        audit_factory(f, _images(6, 0), _images(6, 1), significance=1.5)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_factories": 0}, ParameterError),
        ({"max_records": 3}, ParameterError),
        ({"noise_stds": ()}, ParameterTypeError),
        ({"noise_stds": (0.1, -0.2)}, ParameterError),
        ({"noise_stds": (float("nan"),)}, ParameterError),
        ({"num_noise_draws": 0}, ParameterError),
        ({"fprs": (0.1, 1.0)}, ParameterError),
        ({"significance": 0.0}, ParameterError),
        ({"delta": 1.0}, ParameterError),
        ({"objective": "auc"}, ParameterError),
        ({"calibration_fraction": 1.0}, ParameterError),
        ({"seed": -1}, ParameterError),
        ({"max_records": 4.0}, ParameterTypeError),
    ],
)
def test_audit_config_is_validated(kwargs: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        FactoryAuditConfig(**kwargs)  # type: ignore[arg-type]


def test_record_caps_subsample_deterministically() -> None:
    f = LatentGaussianFactory(latent_dim=3).fit(_images(30, 0))
    cfg = FactoryAuditConfig(max_records=8)
    one = audit_factory(f, _images(30, 0), _images(50, 1), config=cfg)
    two = audit_factory(f, _images(30, 0), _images(50, 1), config=cfg)
    assert (one.num_members, one.num_nonmembers) == (8, 8)
    assert one.attacks[0].metrics.auc == two.attacks[0].metrics.auc
