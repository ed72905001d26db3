"""DP-SGD: clipping, noise scale, Poisson sampling, ledger accounting."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

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


@pytest.mark.slow
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
def test_config_is_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        DPSGDConfig(**kwargs)


# -- the realised sampling rate in the record and the ledger -----------------------------


def test_record_and_ledger_carry_the_realised_sampling_rate() -> None:
    from privfed.engines.factory.dpsgd import realised_sampling_rate

    noise = GaussianNoiseSource(torch.Generator().manual_seed(0))
    # q = 1e-6 is not a multiple of 2^-64: the sampler realises q' = T / 2^64 > q.
    q = 1e-6
    q_real = realised_sampling_rate(q)
    assert q_real > q
    record = DPSGDConfig(noise_multiplier=1.0, sampling_rate=q).privacy_record(3, noise=noise)
    assert record.sampling_rate == q_real
    ledger = dp.PrivacyLedger()
    assert record_in_ledger(ledger, record, name="a", partition=None).sampling_rate == q_real
    # A record carrying the requested rate (e.g. from an older manifest) is accounted
    # at the realised one too.
    legacy = PrivacyRecord(
        mechanism="dp-sgd",
        noise_multiplier=1.0,
        clip_norm=1.0,
        sampling_rate=q,
        steps=3,
        seeded=True,
        sampler="torch-generator-gaussian",
    )
    assert record_in_ledger(ledger, legacy, name="b", partition=None).sampling_rate == q_real
    # Dyadic rates (every q >= 2^-12) are realised exactly.
    exact = DPSGDConfig(noise_multiplier=1.0, sampling_rate=0.1).privacy_record(1, noise=noise)
    assert exact.sampling_rate == 0.1


def test_ledger_refuses_add_remove_and_unrepresentable_rates() -> None:
    record = DPSGDConfig(noise_multiplier=1.0, sampling_rate=0.5).privacy_record(
        1, noise=GaussianNoiseSource(torch.Generator().manual_seed(0))
    )
    ledger = dp.PrivacyLedger()
    # The step divides by q'·n: it has no add/remove guarantee.
    with pytest.raises(ParameterError) as info:
        record_in_ledger(
            ledger, record, name="x", partition=None, adjacency=dp.Adjacency.ADD_REMOVE
        )
    assert info.value.parameter == "adjacency"
    with pytest.raises(ParameterTypeError):
        record_in_ledger(ledger, record, name="x", partition=None, adjacency="add-remove")
    tiny = PrivacyRecord(
        mechanism="dp-sgd",
        noise_multiplier=1.0,
        clip_norm=1.0,
        sampling_rate=1e-30,
        steps=1,
        seeded=True,
        sampler="torch-generator-gaussian",
    )
    with pytest.raises(ParameterError) as info:
        record_in_ledger(ledger, tiny, name="x", partition=None)
    assert info.value.parameter == "sampling_rate"
    assert ledger.releases == ()
    explicit = record_in_ledger(
        ledger, record, name="y", partition=None, adjacency=dp.Adjacency.REPLACE_ONE
    )
    assert explicit.adjacency is dp.Adjacency.REPLACE_ONE and len(ledger.releases) == 1


def test_step_refuses_empty_data_and_wrong_types() -> None:
    model = _Linear(2)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    cfg = DPSGDConfig(noise_multiplier=1.0, sampling_rate=0.5)
    kwargs: dict[str, Any] = {
        "batch_generator": torch.Generator().manual_seed(0),
        "noise": GaussianNoiseSource(torch.Generator().manual_seed(0)),
        "draw_aux": lambda n: torch.zeros(n, 1),
    }
    before = model.w.detach().clone()
    with pytest.raises(ParameterError):
        dp_sgd_step(model, _loss_factory(model), torch.zeros(0, 2), cfg, opt, **kwargs)
    with pytest.raises(ParameterTypeError):
        dp_sgd_step(
            model, _loss_factory(model), torch.zeros(3, 2), cfg, opt, **{**kwargs, "noise": None}
        )
    with pytest.raises(ParameterTypeError):
        dp_sgd_step(
            model,
            _loss_factory(model),
            torch.zeros(3, 2),
            cfg,
            opt,
            **{**kwargs, "batch_generator": 0},
        )
    assert torch.equal(model.w.detach(), before)


# -- clipping ------------------------------------------------------------------------------


def _exact_sq_norms(clipped: dict[str, torch.Tensor]) -> list[Fraction]:
    """Each example's squared L2 norm over all tensors, in exact rational arithmetic."""
    count = next(iter(clipped.values())).shape[0]
    out = [Fraction(0)] * count
    for g in clipped.values():
        assert g.dtype == torch.float64
        for j, row in enumerate(g.reshape(count, -1).tolist()):
            out[j] += sum((Fraction(v) ** 2 for v in row), Fraction(0))
    return out


def _split(rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Spread each example over two tensors of different shapes (joint clipping)."""
    count, d = rows.shape
    k = d // 2
    return {"a": rows[:, :k].clone(), "b": rows[:, k:].clone().reshape(count, 1, d - k)}


def _adversarial_rows(clip: float, d: int) -> torch.Tensor:
    c32 = float(torch.tensor(clip, dtype=torch.float32))
    gen = torch.Generator().manual_seed(int(clip * 1000) % 2**31)
    rows = []
    rows.append(torch.full((d,), 3e38))  # huge: squares overflow float32
    one_huge = torch.zeros(d)
    one_huge[0] = 3.4e38
    rows.append(one_huge)
    rows.append(torch.full((d,), 1e-45))  # subnormal float32
    mixed = torch.zeros(d)
    mixed[:4] = torch.tensor([1e30, 1e-30, -1e20, 1.0])
    rows.append(mixed)
    exactly_c = torch.zeros(d)
    exactly_c[1] = c32
    rows.append(exactly_c)
    just_over = torch.zeros(d)
    just_over[2] = torch.nextafter(torch.tensor(c32), torch.tensor(math.inf))
    rows.append(just_over)
    rows.append(torch.zeros(d))
    # Random directions whose float32 norm is C·(1 + k·2^-23), k in -4..4: the
    # float32 formula g·C/||g|| overshoots C on such rows.
    for k in range(-4, 5):
        g = torch.randn(d, generator=gen)
        g = g * (clip * (1 + k * 2.0**-23) / g.norm())
        rows.append(g.to(torch.float32))
    for scale in (1e-3, 0.5, 3.0, 1e6):
        g = torch.randn(d, generator=gen) * scale
        rows.append(g)
    return torch.stack(rows).to(torch.float32)


@pytest.mark.parametrize("clip", [1.0, 0.1, 3.7, 1e-3, 1e3])
@pytest.mark.parametrize("d", [4, 64, 1000])
def test_clipped_gradients_never_exceed_the_bound(clip: float, d: int) -> None:
    from privfed.engines.factory.dpsgd import clip_per_example_gradients

    rows = _adversarial_rows(clip, d)
    grads = _split(rows)
    clipped = clip_per_example_gradients(grads, clip)
    assert set(clipped) == {"a", "b"}
    assert clipped["b"].shape == grads["b"].shape
    bound = Fraction(clip) ** 2
    exact = _exact_sq_norms(clipped)
    flat = torch.cat([clipped["a"], clipped["b"].reshape(rows.shape[0], -1)], dim=1)
    for j, sq in enumerate(exact):
        assert sq <= bound, (j, float(sq) ** 0.5 / clip)
        # Measured in float64 too (correctly rounded sum of squares).
        assert math.sqrt(math.fsum(v * v for v in flat[j].tolist())) <= clip
    true_norms = rows.double().norm(dim=1)
    for j in range(rows.shape[0]):
        norm = float(true_norms[j])
        out_norm = float(flat[j].norm())
        if norm <= clip * (1 - 2.0**-19):
            # Under the bound: unchanged, exactly.
            assert torch.equal(flat[j], rows[j].double()), j
        else:
            # Over it: shrunk onto (just inside) the sphere, direction kept.
            assert clip * (1 - 2.0**-19) <= out_norm < clip, j
            cosine = float(flat[j] @ (rows[j].double() / norm)) / out_norm
            assert cosine == pytest.approx(1.0, abs=1e-9), j


def test_float32_clipping_would_overshoot_on_these_rows() -> None:
    # The teeth of the test above: the former float32 formula exceeds C on them.
    clip, d = 1.0, 1000
    rows = _adversarial_rows(clip, d)[-13:-4]  # the C·(1 + k·2^-23) rows
    norm = rows.pow(2).sum(dim=1).sqrt()
    naive = rows * (clip / torch.clamp(norm, min=clip)).unsqueeze(1)
    exact = _exact_sq_norms({"g": naive.double()})
    assert max(exact) > Fraction(clip) ** 2


def test_non_finite_gradients_contribute_zero_and_leave_others_alone() -> None:
    from privfed.engines.factory.dpsgd import clip_per_example_gradients

    rows = torch.tensor(
        [
            [float("inf"), 1.0, 0.0],
            [float("nan"), 0.0, 0.0],
            [0.3, 0.4, 0.0],
            [30.0, 40.0, 0.0],
            [-float("inf"), float("inf"), 1.0],
        ]
    )
    out = clip_per_example_gradients({"g": rows}, 1.0)["g"]
    assert bool(torch.isfinite(out).all())
    assert torch.equal(out[0], torch.zeros(3, dtype=torch.float64))
    assert torch.equal(out[1], torch.zeros(3, dtype=torch.float64))
    assert torch.equal(out[4], torch.zeros(3, dtype=torch.float64))
    assert torch.equal(out[2], rows[2].double())
    assert float(out[3].norm()) == pytest.approx(1.0, rel=1e-5) and float(out[3].norm()) < 1.0


def test_clipping_handles_float64_extremes_and_validates() -> None:
    from privfed.engines.factory.dpsgd import clip_per_example_gradients

    rows = torch.tensor(
        [[1e300, 1e300, -1e300], [1e-320, 0.0, 5e-324], [1e200, 1e-200, 0.0]],
        dtype=torch.float64,
    )
    out = clip_per_example_gradients({"g": rows}, 2.0)["g"]
    exact = _exact_sq_norms({"g": out})
    assert all(sq <= 4 for sq in exact)
    assert float(out[0].norm()) == pytest.approx(2.0, rel=1e-5)  # no overflow to zero
    assert torch.equal(out[1], rows[1])  # subnormal, under the bound: unchanged
    assert clip_per_example_gradients({}, 1.0) == {}
    with pytest.raises(ParameterError):
        clip_per_example_gradients({"g": rows}, 0.0)
    with pytest.raises(ParameterError):
        clip_per_example_gradients({"a": rows, "b": rows[:2]}, 1.0)
    with pytest.raises(ParameterTypeError):
        clip_per_example_gradients({"g": rows}, "1")  # type: ignore[arg-type]


def test_the_re_check_zeroes_any_example_it_cannot_confirm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With the re-check bound lowered to C/2, the clipped rows (norm ≈ C) fail it and
    # are zeroed, while rows well inside pass unchanged: the re-check is live code.
    from privfed.engines.factory import dpsgd

    monkeypatch.setattr(dpsgd, "_CHECK_BOUND", 0.5)
    rows = torch.tensor([[3.0, 4.0], [0.3, 0.0], [0.6, 0.0]])
    out = dpsgd.clip_per_example_gradients({"g": rows}, 1.0)["g"]
    assert torch.equal(out[0], torch.zeros(2, dtype=torch.float64))
    assert torch.equal(out[1], rows[1].double())
    assert torch.equal(out[2], torch.zeros(2, dtype=torch.float64))
