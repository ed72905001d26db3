"""Adaptive clipping (Andrew et al. 2021) in distributed-DP training: clip, count, ledger.

Statistical checks use fixed seeds; each states its false-failure rate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.dp import PrivacyLedger
from privfed.dp.adaptive_clipping import (
    AdaptiveClipping,
    next_clip_scale,
    update_noise_multiplier,
)
from privfed.dp.training import plan_training_noise, record_training_round
from privfed.dp.training_codec import decode_noisy_sum, encode_update
from privfed.errors import ParameterError

SEED = b"a" * 32


def _plan(**overrides: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "rounds": 3, "clip_norm": 1.0, "model_size": 64, "num_clients": 20, "threshold": 14,
        "ring_bits": 32, "count_noise_std": 2.0, "layers": False,
    }  # fmt: skip
    args.update(overrides)
    eps = float(args.pop("epsilon", 3.0))  # type: ignore[arg-type]
    return plan_training_noise(eps, 1e-5, **args)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_clip_converges_to_the_target_quantile() -> None:
    # Norms ~ lognormal(log 2, 0.5): the median (gamma = 0.5) is 2; the clip starts at 0.1.
    settings = AdaptiveClipping(target_quantile=0.5, learning_rate=0.5, count_noise_std=1.0)
    plan = _plan(rounds=60, epsilon=60.0, clip_norm=0.1, count_noise_std=1.0, model_size=16)
    rng = np.random.default_rng(7)
    scale, clips = 1.0, []
    for r in range(60):
        total = np.zeros(plan.vector_length, dtype=np.uint64)
        for i in range(plan.num_clients):
            direction = rng.normal(size=plan.model_size)
            update = direction / np.linalg.norm(direction) * rng.lognormal(math.log(2.0), 0.5)
            encoded = encode_update(
                update, plan, round_seed=SEED, noise_seed=1000 * r + i, rng=rng, clip_scale=scale
            )
            total += encoded.vector
        out = decode_noisy_sum(
            total, plan, round_seed=SEED, survivors=range(plan.num_clients), clip_scale=scale
        )
        assert out.under_clip_fraction is not None
        scale = next_clip_scale(scale, out.under_clip_fraction, settings)
        clips.append(plan.clip_norm * scale)
    # The count's noise has std 1/20 = 0.05 on the fraction; near the median one round moves
    # log C by 0.5·(b̄ − 0.5) with sd ~0.06, so the mean of the last 20 log-clips has sd ~0.03:
    # 0.15 is 5 sd (false failure < 1e-6; the seed is fixed anyway).
    assert clips[0] < 0.2
    assert abs(float(np.mean(np.log(clips[-20:]))) - math.log(2.0)) < 0.15


def test_the_ledger_charges_the_update_and_the_count_every_round() -> None:
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    from privfed.dp.distributed import skellam_rdp

    p = _plan()
    assert p.vector_length == p.dimension + 1 and p.accounted_epsilon <= 3.0
    ledger = PrivacyLedger(budget_epsilon=3.0, budget_delta=1e-5)
    orders = list(rdp_lib.DEFAULT_RDP_ORDERS)
    _, l1 = p.l2_bound, min(math.sqrt(p.dimension) * p.l2_bound, p.l2_bound**2)
    update = skellam_rdp(
        orders, num_clients=p.min_honest, poisson_mean=p.noise, l2_sensitivity=p.l2_bound,
        l1_sensitivity=l1, dimension=p.dimension,
    )  # fmt: skip
    count = skellam_rdp(
        orders, num_clients=p.min_honest, poisson_mean=p.count_noise, l2_sensitivity=1.0,
        l1_sensitivity=1.0, dimension=1,
    )  # fmt: skip
    for r in range(1, p.rounds + 1):
        record_training_round(ledger, p, r)
        assert [e.name for e in ledger.releases[-2:]] == [
            f"training-round-{r}", f"training-round-{r}-clip-count"
        ]
        direct = rdp_lib.compute_epsilon(orders, list(r * (update + count)), 1e-5)[0]
        assert math.isclose(ledger.epsilon(1e-5), direct, rel_tol=1e-9)
    assert len(ledger.releases) == 2 * p.rounds
    # The count's noise: std 2·σ_b on the ±1 sum of n_min honest clients.
    assert p.count_std() == pytest.approx(4.0, rel=1e-12)


def test_the_update_noise_follows_the_papers_split() -> None:
    plain = _plan(count_noise_std=None)
    adaptive = _plan(count_noise_std=20.0)
    z = math.sqrt(2 * plain.min_honest * plain.noise) / plain.l2_bound
    z_update = math.sqrt(2 * adaptive.min_honest * adaptive.noise) / adaptive.l2_bound
    # Exact RDP calibration of both releases against the Gaussian formula (1 %).
    assert z_update == pytest.approx(update_noise_multiplier(z, 20.0), rel=0.01)
    assert z < z_update


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"target_quantile": 0.0}, "target_quantile"),
        ({"target_quantile": 1.0}, "target_quantile"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": 11.0}, "learning_rate"),
        ({"count_noise_std": 0.0}, "count_noise_std"),
        ({"count_noise_std": float("nan")}, "count_noise_std"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        AdaptiveClipping(**kwargs)


def test_a_count_noise_that_spends_the_budget_is_refused_before_calibrating() -> None:
    with pytest.raises(ParameterError, match="count_noise_std"):
        _plan(count_noise_std=0.05)
    with pytest.raises(ParameterError, match="count_noise_std"):
        update_noise_multiplier(2.0, 0.9)
    with pytest.raises(ParameterError, match="count_noise_std"):
        _plan(count_noise_std=0.1, mechanism="discrete-gaussian")


def test_the_trust_statement_names_the_count() -> None:
    assert "noisy count" in _plan().trust()
    assert "noisy count" not in _plan(count_noise_std=None).trust()
