"""Distributed DP for training: rotation, conditional rounding, the plan, its ledger, the codec.

Statistical checks use fixed seeds; each states its false-failure rate.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from privfed.dp import PrivacyLedger
from privfed.dp.distributed import RDP_ORDERS, ddg_rdp, skellam_zcdp
from privfed.dp.rotation import hadamard_dimension, random_signs, rotate, unrotate, walsh_hadamard
from privfed.dp.rounding import conditional_round, rounded_norm_bound
from privfed.dp.training import (
    TrainingNoisePlan,
    central_noise_std,
    plan_training_noise,
    record_training_round,
)
from privfed.dp.training_codec import decode_noisy_sum, encode_update, noise_ratio
from privfed.errors import BudgetExceededError, CalibrationError, ParameterError, RingOverflowError
from privfed.secagg import Stage, run_protocol

SEED = b"r" * 32


def test_hadamard_is_orthogonal_and_rotation_inverts() -> None:
    d = 16
    h = np.stack([walsh_hadamard(np.eye(d)[i]) for i in range(d)])
    assert np.array_equal(h @ h, d * np.eye(d))
    assert hadamard_dimension(1) == 1 and hadamard_dimension(17) == 32
    x = np.random.default_rng(0).normal(size=1000)
    y = rotate(x, SEED)
    assert y.size == 1024
    assert math.isclose(np.linalg.norm(y), np.linalg.norm(x), rel_tol=1e-12)
    assert np.allclose(unrotate(y, SEED, 1000), x, atol=1e-12)
    assert not np.allclose(unrotate(y, b"s" * 32, 1000), x)
    signs = random_signs(SEED, 1024)
    assert set(np.unique(signs)) == {-1.0, 1.0}
    assert np.array_equal(signs, random_signs(SEED, 1024))


def test_rotation_spreads_a_spike() -> None:
    # One coordinate of norm 1 becomes d coordinates of magnitude 1/sqrt(d) exactly.
    x = np.zeros(4096)
    x[7] = 1.0
    assert np.allclose(np.abs(rotate(x, SEED)), 1 / 64)


def test_conditional_rounding_keeps_the_bound_and_is_unbiased() -> None:
    rng = np.random.default_rng(1)
    z = rng.normal(size=256)
    z *= 20.0 / np.linalg.norm(z)
    bound = rounded_norm_bound(20.0, 256)
    assert 20.0 < bound < 20.0 + 16.0
    draws = np.stack([conditional_round(z, bound, rng)[0] for _ in range(4000)])
    assert (np.sqrt((draws.astype(float) ** 2).sum(axis=1)) <= bound).all()
    # Mean error per coordinate: sd <= 0.5/sqrt(4000) ~ 0.008; the conditioning adds a
    # small bias; 0.05 is > 6 sd (false failure < 1e-8 per coordinate).
    assert np.abs(draws.mean(axis=0) - z).max() < 0.05
    with pytest.raises(ParameterError, match="values"):
        conditional_round(z * 10, bound, rng)
    # The fallback (max_tries exhausted with an impossible draw budget) rounds toward zero.
    tight = math.sqrt(float(np.dot(np.trunc(z), np.trunc(z))))
    rounded, tries = conditional_round(z, max(tight, float(np.linalg.norm(z))), rng, max_tries=1)
    assert np.dot(rounded, rounded) <= max(tight, float(np.linalg.norm(z))) ** 2
    assert tries in (1, 2)


def plan(**overrides: object) -> TrainingNoisePlan:
    args: dict[str, object] = {
        "rounds": 3, "clip_norm": 1.0, "model_size": 1000, "num_clients": 6, "threshold": 4,
        "ring_bits": 32,
    }  # fmt: skip
    args.update(overrides)
    return plan_training_noise(3.0, 1e-5, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("mechanism", ["skellam", "discrete-gaussian"])
def test_plan_meets_the_budget_and_states_its_wrap_bound(mechanism: str) -> None:
    p = plan(mechanism=mechanism)
    assert p.accounted_epsilon <= 3.0
    assert p.log_wrap_probability <= math.log(2.0**-40)
    assert p.layers == (2 if mechanism == "skellam" else 0)
    described = p.describe()
    assert described["log_wrap_probability_per_round"] < -27 and "n_min" in described["trust"]
    assert 1.0 <= noise_ratio(p, p.threshold) < 1.3
    assert TrainingNoisePlan.from_dict(p.to_dict()) == p
    # Fewer bits: the finest grid is coarser, the ratio to central grows.
    coarse = plan(mechanism=mechanism, ring_bits=16)
    assert coarse.granularity > p.granularity


def test_every_round_in_the_ledger_equals_dp_accounting_directly() -> None:
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    for mechanism in ("skellam", "discrete-gaussian"):
        p = plan(mechanism=mechanism)
        ledger = PrivacyLedger(budget_epsilon=3.0, budget_delta=1e-5)
        d, l2 = p.dimension, p.l2_bound
        l1 = min(math.sqrt(d) * l2, l2 * l2)
        for r in range(1, p.rounds + 1):
            record_training_round(ledger, p, r)
            if mechanism == "skellam":
                # Independently: ZCDpEvent of the Skellam line, composed r times by dp-accounting.
                rho, xi = skellam_zcdp(
                    num_clients=p.min_honest, poisson_mean=p.noise, l2_sensitivity=l2,
                    l1_sensitivity=l1, dimension=d,
                )  # fmt: skip
                acc = rdp_lib.RdpAccountant()
                acc.compose(dp_accounting.ZCDpEvent(rho=rho, xi=xi), r)
                direct = acc.get_epsilon(1e-5)
            else:
                orders = rdp_lib.DEFAULT_RDP_ORDERS
                curve = ddg_rdp(
                    orders, num_clients=p.min_honest, noise_std=p.noise, l2_sensitivity=l2,
                    l1_sensitivity=l1, dimension=d,
                )  # fmt: skip
                direct = rdp_lib.compute_epsilon(orders, list(r * curve), 1e-5)[0]
            assert math.isclose(ledger.epsilon(1e-5), direct, rel_tol=1e-9)
        assert ledger.epsilon(1e-5) <= 3.0
        with pytest.raises(BudgetExceededError):
            record_training_round(ledger, p, p.rounds + 1)


def test_calibration_against_a_ledger_that_already_spent_some() -> None:
    first = plan()
    ledger = PrivacyLedger(budget_epsilon=3.0, budget_delta=1e-5)
    record_training_round(ledger, first, 1)
    rest = plan(rounds=2, ledger=ledger)
    # One third of the budget spent: the two other rounds need the first one's noise.
    assert rest.noise / rest.l2_bound**2 == pytest.approx(first.noise / first.l2_bound**2, 1e-3)
    for r in (2, 3):
        record_training_round(ledger, rest, r)
    assert ledger.epsilon(1e-5) <= 3.0
    # A first round with less noise spent more: the rest needs more noise (per Δ₂²).
    greedy = PrivacyLedger(budget_epsilon=3.0, budget_delta=1e-5)
    greedy.record(dataclasses.replace(first, noise=first.noise / 1.5).release(1))
    tighter = plan(rounds=2, ledger=greedy)
    assert tighter.noise / tighter.l2_bound**2 > 1.2 * first.noise / first.l2_bound**2


@pytest.mark.parametrize(
    ("overrides", "error", "name"),
    [
        ({"clip_norm": 0.0}, ParameterError, "clip_norm"),
        ({"clip_norm": -1.0}, ParameterError, "clip_norm"),
        ({"threshold": 4, "corrupted": 4}, ParameterError, "corrupted"),
        ({"threshold": 7}, ParameterError, "threshold"),  # more than the 6 clients
        ({"ring_bits": 8, "num_clients": 100, "threshold": 51, "model_size": 10**5},
         RingOverflowError, "ring_bits"),
        ({"mechanism": "discrete-gaussian", "layers": True}, ParameterError, "layers"),
        ({"mechanism": "laplace"}, ParameterError, "mechanism"),
        ({"rounds": 0}, ParameterError, "rounds"),
    ],
)
def test_bad_configurations_are_one_typed_error(
    overrides: dict[str, object], error: type[Exception], name: str
) -> None:
    with pytest.raises(error, match=name):
        plan(**overrides)


def test_epsilon_beyond_reach_is_refused() -> None:
    ledger = PrivacyLedger(budget_epsilon=3.0, budget_delta=1e-5)
    p = plan(rounds=1)
    ledger.record(p.release(1))  # all but 1e-5 of the budget
    with pytest.raises(CalibrationError, match="beyond reach"):
        plan(ledger=ledger)
    with pytest.raises((CalibrationError, RingOverflowError), match="epsilon"):
        plan_training_noise(0.01, 1e-5, rounds=100, clip_norm=1.0, model_size=1000,
                            num_clients=6, threshold=4, ring_bits=16)


@pytest.mark.parametrize("mechanism", ["skellam", "discrete-gaussian"])
def test_in_process_round_with_dropouts_delivers_the_noisy_mean(mechanism: str) -> None:
    p = plan(mechanism=mechanism, clip_norm=1.0)
    rng = np.random.default_rng(5)
    updates = [rng.normal(scale=0.02, size=p.model_size) for _ in range(p.num_clients)]
    layer_seeds = [[bytes([i, j]) * 16 for j in range(p.layers)] for i in range(p.num_clients)]
    vectors = [
        encode_update(u, p, round_seed=SEED, layer_seeds=s, rng=rng).vector
        for u, s in zip(updates, layer_seeds, strict=True)
    ]
    report = run_protocol(
        vectors, threshold=p.threshold, ring_bits=p.ring_bits,
        dropouts={Stage.MASKED_INPUT: [5]}, noise_layers=p.layers,
        noise_seeds=layer_seeds if p.layers else None,
    )  # fmt: skip
    survivors = report.survivors
    assert len(survivors) == 5
    out = decode_noisy_sum(
        report.total, p, round_seed=SEED, survivors=survivors,
        revealed=report.revealed_noise_seeds if p.layers else None,
    )  # fmt: skip
    exact = np.mean([updates[i - 1] for i in survivors], axis=0)
    error = out.update - exact
    # The error is the noise (plus < 1 grid step of rounding per client): its std must be
    # the plan's delivered std within 5 % (1000 coordinates: sd of the estimate ~2.2 %,
    # false failure ~ 2e-2 ... at 5 % it is 2.3 sd; widened to 8 %: < 3e-4).
    assert abs(error.std() / out.noise_std - 1.0) < 0.08
    assert out.noise_std == pytest.approx(p.delivered_std(5) / 5)
    if p.layers:  # the excess was removed: five survivors carry the n_min target
        assert p.delivered_std(5) ** 2 == pytest.approx(
            p.granularity**2 * 2 * p.min_honest * p.noise, rel=1e-3
        )


def test_central_noise_std_is_the_analytic_gaussian_over_rounds() -> None:
    p = plan()
    assert central_noise_std(p) > central_noise_std(dataclasses.replace(p, rounds=1))
    assert RDP_ORDERS  # the ledger's orders are the calibration's
