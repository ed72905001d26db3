"""DP-SGD: clipping, noise scale, Poisson sampling, ledger accounting."""

from __future__ import annotations

import math

import dp_accounting
import pytest
import torch

from privfed import dp
from privfed.engines.factory import (
    DPSGDConfig,
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    GaussianNoiseSource,
    PrivacyRecord,
    UNetConfig,
    record_in_ledger,
)
from privfed.engines.factory.dpsgd import dp_sgd_step
from privfed.errors import BudgetExceededError, ParameterError, ParameterTypeError


class _Linear(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim))


def _loss_factory(model: _Linear):  # type: ignore[no-untyped-def]
    def loss(params: dict[str, torch.Tensor], x: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        # Gradient w.r.t. w is exactly -x: each record's raw gradient norm is ||x||.
        return -(params["w"] @ x) + 0 * aux.sum()

    return loss


def _step(data: torch.Tensor, config: DPSGDConfig, noise_seed: int) -> tuple[torch.Tensor, int]:
    model = _Linear(data.shape[1])
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    count = dp_sgd_step(
        model,
        _loss_factory(model),
        data,
        config,
        opt,
        batch_generator=torch.Generator().manual_seed(0),
        noise=GaussianNoiseSource(torch.Generator().manual_seed(noise_seed)),
        draw_aux=lambda n: torch.zeros(n, 1),
    )
    return model.w.detach().clone(), count


def test_step_clips_each_record_and_scales_by_expected_batch() -> None:
    # Records of norm 10 (clipped to 1) and 0.5 (kept); q = 1 includes all.
    data = torch.tensor([[10.0, 0.0], [0.0, 0.5], [0.0, -0.5], [6.0, 8.0]])
    cfg = DPSGDConfig(noise_multiplier=1e-9, clip_norm=1.0, sampling_rate=1.0)
    w, count = _step(data, cfg, noise_seed=0)
    assert count == 4
    # SGD with lr 1: w = -grad = (Σ clipped x)/(q n) since d loss/dw = -x.
    clipped = torch.tensor([[1.0, 0.0], [0.0, 0.5], [0.0, -0.5], [0.6, 0.8]])
    assert torch.allclose(w, clipped.sum(0) / 4, atol=1e-6)


def test_noise_has_the_declared_standard_deviation() -> None:
    # One record per coordinate set to 0: the update is pure noise / (q n).
    # With 20,000 coordinates the sample std has relative standard error
    # 1/sqrt(2·20000) = 0.5 %; the 3 % band gives α < 1e-9 (fixed seed anyway).
    data = torch.zeros(4, 20_000)
    cfg = DPSGDConfig(noise_multiplier=2.0, clip_norm=0.5, sampling_rate=0.5)
    w, _ = _step(data, cfg, noise_seed=1)
    expected = 2.0 * 0.5 / (0.5 * 4)
    assert w.std().item() == pytest.approx(expected, rel=0.03)
    assert w.mean().item() == pytest.approx(0.0, abs=6 * expected / math.sqrt(20_000))


def test_poisson_batch_sizes_follow_the_sampling_rate() -> None:
    # Bin(1000, 0.1): mean 100, std 9.5; |count - 100| < 50 has α < 1e-7.
    data = torch.zeros(1000, 1)
    cfg = DPSGDConfig(noise_multiplier=1.0, sampling_rate=0.1)
    _, count = _step(data, cfg, noise_seed=0)
    assert abs(count - 100) < 50


def test_unseeded_noise_comes_from_the_csprng() -> None:
    src = GaussianNoiseSource()
    assert not src.seeded and src.sampler == dp.GAUSSIAN_SAMPLER
    a = src.standard_normal((1000,), torch.device("cpu"))
    b = src.standard_normal((1000,), torch.device("cpu"))
    assert not torch.equal(a, b)
    assert a.dtype == torch.float32
    assert "seed" not in repr(GaussianNoiseSource(torch.Generator().manual_seed(3))).replace(
        "seeded", ""
    )
    with pytest.raises(ParameterTypeError):
        GaussianNoiseSource(7)  # type: ignore[arg-type]


@pytest.mark.slow
def test_dp_sgd_factory_records_match_an_independent_accountant() -> None:
    images = torch.rand((16, 1, 8, 8), generator=torch.Generator().manual_seed(0))
    dp_cfg = DPSGDConfig(noise_multiplier=1.1, clip_norm=1.0, sampling_rate=0.25)
    factory = EDMDiffusionFactory(
        unet=UNetConfig(block_out_channels=(8, 16), norm_num_groups=4),
        edm=EDMConfig(sampling_steps=2),
        training=EDMTrainingConfig(steps=4, seed=0, dp=dp_cfg),
    ).fit(images)
    record = factory.privacy
    assert record == PrivacyRecord(
        mechanism="dp-sgd",
        noise_multiplier=1.1,
        clip_norm=1.0,
        sampling_rate=0.25,
        steps=4,
        seeded=True,
        sampler="torch-generator-gaussian",
    )
    assert factory.manifest().privacy == record
    ledger = dp.PrivacyLedger()
    release = record_in_ledger(ledger, record, name="factory c=0 k=0", partition="0/0")
    assert release.adjacency is dp.Adjacency.REPLACE_ONE
    # Independent computation with dp-accounting's PLD accountant (replace-one).
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.25, dp_accounting.GaussianDpEvent(1.1)), 4
    )
    acc = dp_accounting.pld.PLDAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE,
        value_discretization_interval=1e-4,
    )
    acc.compose(event)
    assert ledger.epsilon(1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=1e-2)


def test_ledger_budget_is_enforced_atomically() -> None:
    # One full-batch step at σ/C = 2 costs ε ≈ 2.9 at δ = 1e-5 (replace-one), over 1.0.
    record = DPSGDConfig(noise_multiplier=2.0, sampling_rate=1.0).privacy_record(
        1, noise=GaussianNoiseSource(torch.Generator().manual_seed(0))
    )
    ledger = dp.PrivacyLedger(budget_epsilon=1.0, budget_delta=1e-5)
    with pytest.raises(BudgetExceededError):
        record_in_ledger(ledger, record, name="too much", partition=None)
    assert ledger.releases == ()
    with pytest.raises(ParameterError):
        record_in_ledger(ledger, PrivacyRecord(), name="x", partition=None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"noise_multiplier": 0.0},
        {"noise_multiplier": float("inf")},
        {"noise_multiplier": 1.0, "clip_norm": -1.0},
        {"noise_multiplier": 1.0, "sampling_rate": 1.5},
        {"noise_multiplier": 1.0, "max_physical_batch": 0},
    ],
)
def test_config_is_validated(kwargs: dict) -> None:
    with pytest.raises(ParameterError):
        DPSGDConfig(**kwargs)
