"""Canary clients (Andrew et al. 2024): the ε estimate on simulated federated runs.

Every run is seeded, so each test is deterministic; the false-failure rates
stated are those of a fresh seed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from privfed.audit import (
    CANARY_CLIENT_MODEL,
    CanaryClients,
    CanaryEstimateSpec,
    audit_training_run,
    canary_client_epsilon,
)
from privfed.dp import gdp_epsilon
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

D, K, ROUNDS, Z, CLIP, DELTA = 10_000, 400, 4, 2.0, 1.0, 1e-5


def _run(canaries: CanaryClients, *, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A FedAvg-like sum: canary updates + a real client's fixed drift + N(0, noise²) noise."""
    rng = np.random.default_rng([seed, 99])
    initial = rng.normal(size=D)
    drift = rng.normal(size=D)
    drift *= 3.0 / np.linalg.norm(drift)
    final = initial.copy()
    for r in range(ROUNDS):
        final += canaries.updates(r).sum(axis=0) + drift + rng.normal(0.0, noise, size=D)
    return initial, final


def test_a_gaussian_mechanism_run_is_estimated_close_to_its_true_epsilon() -> None:
    # Every canary in every round: sensitivity C per round, T rounds of N(0, (zC)²)
    # => μ = √T / z = 1 exactly, ε(δ = 1e-5) = 4.38.  With k = k' = 400 in d = 10⁴
    # the fitted μ has sd ≈ 0.08 (ε's ≈ 0.4, 9 %) and is biased by the canaries'
    # cross terms by 1/√(1 + k/d) ≈ 0.98: the 30 % tolerance is ≈ 3.3 sd (fresh seed:
    # fails with probability ≈ 0.1 %); the 99 % interval misses ≈ 1 % of fresh seeds.
    canaries = CanaryClients(K, D, CLIP, seed=0)
    initial, final = _run(canaries, noise=Z * CLIP, seed=0)
    estimate = canaries.estimate(initial, final, spec=CanaryEstimateSpec(DELTA, confidence=0.99))
    truth = gdp_epsilon(math.sqrt(ROUNDS) / Z, DELTA)
    assert abs(estimate.epsilon - truth) <= 0.3 * truth
    assert estimate.interval.lower <= truth <= estimate.interval.upper
    assert estimate.interval.confidence == 0.99 and estimate.participation == 1.0
    assert estimate.cosines.shape == (K,) and estimate.null_cosines.shape == (K,)
    # the common-spread approximation's premise: the two spreads agree (within 15 %)
    assert abs(estimate.canary_std / estimate.null_std - 1.0) < 0.15
    assert "not a bound" in estimate.statistical_model == CANARY_CLIENT_MODEL
    row = estimate.to_dict()
    json.dumps(row)
    assert row["epsilon"] == estimate.epsilon and row["num_canaries"] == K


def test_without_noise_the_estimate_is_large() -> None:
    # μ ≈ 5 here (the null's spread is only the canaries' cross terms and the drift);
    # with noise it is 4.4: deterministic in effect (μ > 4 for any seed at these sizes).
    canaries = CanaryClients(K, D, CLIP, seed=1)
    initial, final = _run(canaries, noise=0.0, seed=1)
    estimate = canaries.estimate(initial, final, spec=CanaryEstimateSpec(DELTA))
    assert estimate.epsilon > 20.0 and estimate.mu > 4.0


def test_participation_is_a_seeded_function_of_the_round() -> None:
    canaries = CanaryClients(50, 64, 2.0, seed=3, participation=0.3, num_null=7)
    first = canaries.participants(4)
    assert np.array_equal(first, canaries.participants(4))
    assert 0 < first.size < 50
    updates = canaries.updates(4)
    assert updates.shape == (first.size, 64)
    assert np.allclose(np.linalg.norm(updates, axis=1), 2.0)
    assert canaries.null_directions().shape == (7, 64)
    assert np.array_equal(CanaryClients(5, 8, 1.0, seed=0).participants(9), np.arange(5))


def test_the_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(5)
    canary, null = rng.normal(0.8, 1.0, size=100), rng.normal(0.0, 1.0, size=100)
    a = canary_client_epsilon(canary, null, spec=CanaryEstimateSpec(DELTA), seed=1)
    b = canary_client_epsilon(canary, null, spec=CanaryEstimateSpec(DELTA), seed=1)
    assert a.interval == b.interval
    assert a.interval.lower <= a.epsilon <= a.interval.upper and a.participation is None
    # the estimate is exactly μ-GDP's ε at the fitted μ
    assert a.epsilon == gdp_epsilon((canary.mean() - null.mean()) / null.std(ddof=1), DELTA)


def test_audit_training_run_records_beside_dp_training_json(tmp_path: Path) -> None:
    canaries = CanaryClients(20, 200, CLIP, seed=2)
    initial, final = np.zeros(200), canaries.updates(0).sum(axis=0) + 0.5
    (tmp_path / "dp_training.json").write_text(json.dumps({"epsilon_spent": 3.0}))
    result = audit_training_run(
        canaries, initial, final, spec=CanaryEstimateSpec(DELTA), output_dir=tmp_path
    )
    document = json.loads((tmp_path / "dp_training.json").read_text())
    assert document["epsilon_spent"] == 3.0
    assert document["canary_client_estimate"]["epsilon"] == result.epsilon
    alone = tmp_path / "alone"
    audit_training_run(canaries, initial, final, spec=CanaryEstimateSpec(DELTA), output_dir=alone)
    assert json.loads((alone / "canary_client_estimate.json").read_text())["mu"] == result.mu


def test_bad_input_gets_typed_errors() -> None:
    with pytest.raises(ParameterError, match="num_canaries"):
        CanaryClients(1, 10, 1.0, seed=0)
    with pytest.raises(ParameterTypeError, match="dimension"):
        CanaryClients(3, 10.5, 1.0, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="clip_norm"):
        CanaryClients(3, 10, 0.0, seed=0)
    with pytest.raises(ParameterError, match="seed"):
        CanaryClients(3, 10, 1.0, seed=None)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="participation"):
        CanaryClients(3, 10, 1.0, seed=0, participation=0.0)
    canaries = CanaryClients(3, 10, 1.0, seed=0)
    with pytest.raises(ParameterError, match="round_index"):
        canaries.updates(-1)
    with pytest.raises(ParameterError, match="initial"):
        canaries.estimate(np.zeros(9), np.ones(9), spec=CanaryEstimateSpec(DELTA))
    with pytest.raises(ParameterError, match="final"):
        canaries.estimate(np.zeros(10), np.zeros(10), spec=CanaryEstimateSpec(DELTA))
    with pytest.raises(NonFiniteInputError):
        canaries.estimate(np.zeros(10), np.full(10, np.nan), spec=CanaryEstimateSpec(DELTA))
    with pytest.raises(ParameterError, match="delta"):
        canaries.estimate(np.zeros(10), np.ones(10), spec=CanaryEstimateSpec(1.0))
    with pytest.raises(ParameterError, match="confidence"):
        canary_client_epsilon(
            [0.1, 0.2], [0.0, 0.1], spec=CanaryEstimateSpec(DELTA, confidence=1.0)
        )
    with pytest.raises(ParameterError, match="cosines"):
        canary_client_epsilon([0.1], [0.0, 0.1], spec=CanaryEstimateSpec(DELTA))
    with pytest.raises(ParameterError, match="num_bootstrap"):
        canary_client_epsilon(
            [0.1, 0.2], [0.0, 0.1], spec=CanaryEstimateSpec(DELTA, num_bootstrap=10)
        )
    with pytest.raises(ParameterError, match="null_cosines"):
        canary_client_epsilon([0.1, 0.2], [0.5, 0.5], spec=CanaryEstimateSpec(DELTA))
    with pytest.raises(ParameterTypeError, match="spec"):
        canary_client_epsilon([0.1, 0.2], [0.0, 0.1], spec=DELTA)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="spec"):
        canaries.estimate(np.zeros(10), np.ones(10), spec=(DELTA, 0.95))  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="num_bootstrap"):
        CanaryEstimateSpec(DELTA, num_bootstrap=1000.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="delta"):
        CanaryEstimateSpec(0.0)
    spec = CanaryEstimateSpec(np.float64(DELTA))
    assert (spec.delta, spec.confidence, spec.num_bootstrap) == (DELTA, 0.95, 1000)
