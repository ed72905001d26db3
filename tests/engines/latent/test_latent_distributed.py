"""Distributed DP in the latent engine: clients noise before masking, the server decodes.

Every round here is a real in-process secure-aggregation round over serialized
messages.  Statistical tests use fixed seeds and state their false-failure
rate (the probability that a correct implementation fails over the draw of
the seed).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

import privfed.secagg.runner as runner_module
from privfed.audit.canary import AuditTrials
from privfed.dp import Adjacency, PrivacyLedger
from privfed.engines.latent import self_audit
from privfed.engines.latent.distributed import (
    DistributedNoisePlan,
    NoiseModel,
    exact_ring_vector,
    layers_supported,
    plan_distributed_noise,
    record_distributed_release,
)
from privfed.engines.latent.distributed_round import aggregate_distributed
from privfed.engines.latent.statistics import LatentStatistics, LatentStatisticsConfig
from privfed.errors import ParameterError, ParameterTypeError, RingOverflowError
from privfed.secagg import SecAggServer, Stage

needs_layers = pytest.mark.skipif(
    not layers_supported(), reason="secure aggregation without noise layers (interface I3)"
)


def _plan(
    model: str, *, layers: bool = False, n: int = 6, t: int = 4, dim: int = 24, k: int = 4
) -> DistributedNoisePlan:
    return plan_distributed_noise(
        model,
        3.0,
        1e-5,
        clip_norm=2.0,
        dim=dim,
        num_classes=k,
        adjacency=Adjacency.REPLACE_ONE,
        num_clients=n,
        threshold=t,
        layers=layers,
    )


def _client_stats(spec: LatentStatisticsConfig, n: int, seed: int) -> list[LatentStatistics]:
    """Random exact client statistics: a few quantized records per class per client."""
    rng = np.random.default_rng(seed)
    rows, cols = np.triu_indices(spec.dim)
    out = []
    for _ in range(n):
        sums, packed, counts = [], [], []
        for _ in range(spec.num_classes):
            m = int(rng.integers(0, 5))
            z = rng.standard_normal((m, spec.dim))
            z *= (0.9 * spec.clip_norm / np.maximum(np.linalg.norm(z, axis=1), 1e-9))[:, None]
            q = np.trunc(np.ldexp(z, spec.bits)).astype(np.int64)
            sums.append(q.sum(axis=0, dtype=np.int64))
            packed.append((q.T @ q)[rows, cols].astype(np.int64))
            counts.append(m)
        out.append(
            LatentStatistics(
                config=spec,
                sums=np.array(sums, dtype=np.int64),
                second_moments=np.array(packed, dtype=np.int64),
                counts=np.array(counts, dtype=np.int64),
            )
        )
    return out


def _residual(plan: DistributedNoisePlan, noisy: Any, exact: LatentStatistics) -> np.ndarray:
    """Delivered noise standardized by the claimed honest std of its block (latent units)."""
    s, m, _ = plan.claimed_stds()
    d = plan.spec.dim
    rows, cols = np.triu_indices(d)
    sums = (noisy.sums - exact.sums_float()) / s
    second = (noisy.second_moments - exact.second_moment_matrices())[:, rows, cols]
    scale = np.where(rows == cols, m, m / math.sqrt(2.0))
    return np.concatenate([sums.ravel(), (second / scale[None, :]).ravel()])


# -- planning ------------------------------------------------------------------------------


def test_plan_refuses_configurations_that_cannot_hold() -> None:
    with pytest.raises(ParameterError, match="corrupted"):
        plan_distributed_noise(
            "distributed-skellam",
            1.0,
            1e-5,
            clip_norm=2.0,
            dim=4,
            num_classes=2,
            adjacency=Adjacency.REPLACE_ONE,
            num_clients=6,
            threshold=4,
            corrupted=4,
        )
    with pytest.raises(ParameterError, match="skellam"):
        _plan("distributed-gaussian", layers=True)
    with pytest.raises(ParameterError, match="model"):
        _plan("central")
    # So much noise that no grid keeps it within the exact samplers' domain.
    with pytest.raises(RingOverflowError):
        plan_distributed_noise(
            "distributed-gaussian",
            1e-4,
            1e-5,
            clip_norm=2.0,
            dim=4,
            num_classes=2,
            adjacency=Adjacency.REPLACE_ONE,
            num_clients=3,
            threshold=2,
        )


@pytest.mark.parametrize("model", ["distributed-gaussian", "distributed-skellam"])
def test_plan_states_its_wrap_bound_and_trust(model: str) -> None:
    plan = _plan(model)
    assert plan.wrap_probability <= 2.0**-40
    assert plan.min_honest == 4
    facts = plan.describe()
    # The bound is stated as its logarithm, never as an underflowed 0.0.
    assert math.isfinite(plan.log_wrap_probability)
    assert plan.log_wrap_probability <= math.log(2.0**-40)
    assert facts["log_wrap_probability_bound"] == plan.log_wrap_probability
    text = str(facts["wrap_probability_bound"])
    assert text.startswith("wrap probability <= exp(-") and float(text[25:-1]) >= (
        plan.log_wrap_probability
    )
    assert facts["min_honest_contributors"] == 4
    # The trust text must not overstate: semi-honest secure aggregation trusts the server's
    # conduct (one view per round) even though it no longer trusts it with the data.
    trust = str(facts["trust"])
    assert "server not trusted with the data" in trust and "semi-honest" in trust
    assert "untrusted server" not in trust
    # The ledger: one RDP event per class, within the budget; JSON round trip.
    ledger = PrivacyLedger(budget_epsilon=3.0, budget_delta=1e-5)
    events = record_distributed_release(ledger, plan, seeded=False)
    assert len(events) == plan.spec.num_classes
    assert {e.num_contributors for e in events} == {4}
    assert ledger.epsilon(1e-5) <= 3.0
    assert PrivacyLedger.from_json(ledger.to_json()).epsilon(1e-5) == ledger.epsilon(1e-5)
    # The distributed noise is close to the central noise at the same (ε, δ).
    assert 1.0 <= math.sqrt(plan.noise.scale) <= 1.15


# -- end to end ---------------------------------------------------------------------------


def test_server_never_holds_the_noiseless_total(monkeypatch: pytest.MonkeyPatch) -> None:
    servers: list[SecAggServer] = []

    class Recording(SecAggServer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            servers.append(self)

    monkeypatch.setattr(runner_module, "SecAggServer", Recording)
    plan = _plan("distributed-gaussian", dim=6, k=3)
    clients = _client_stats(plan.spec, plan.num_clients, seed=1)
    dist = aggregate_distributed(clients, plan, dropouts={}, noise_seed=9)
    exact = sum(clients[1:], clients[0])
    exact_ring = exact_ring_vector(exact)
    (server,) = servers

    seen: list[np.ndarray] = []

    def walk(value: object, depth: int = 0) -> None:
        if depth > 6:
            return
        if isinstance(value, np.ndarray):
            seen.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v, depth + 1)
        elif isinstance(value, list | tuple | set | frozenset):
            for v in value:
                walk(v, depth + 1)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            for v in vars(value).values():
                walk(v, depth + 1)

    walk(vars(server))
    assert any(a.shape == exact_ring.shape for a in seen)  # the walk reaches the total
    for array in seen:
        if array.shape == exact_ring.shape:
            assert not np.array_equal(array.astype(np.uint64), exact_ring)
    # What it unmasked differs from the exact total in every noised coordinate (but the
    # exact counts, public under replace-one), and decodes to the noisy release.
    noised = np.concatenate(plan.positions)
    assert np.count_nonzero(dist.server_total[noised] != exact_ring[noised]) >= 0.99 * noised.size
    counts_at = np.arange(plan.spec.num_classes) * plan.spec.values_per_class + (
        plan.spec.values_per_class - 1
    )
    assert np.array_equal(dist.server_total[counts_at], exact_ring[counts_at])


@pytest.mark.parametrize("model", ["distributed-gaussian", "distributed-skellam"])
def test_unmasked_total_minus_plaintext_sum_has_the_claimed_distribution(model: str) -> None:
    # No dropouts: n = 6 clients each add noise calibrated for n_min = t = 4, so the
    # standardized residual (noise / claimed honest std) has variance 6/4 = 1.5.  2,400
    # coordinates: the sample variance's relative sd is √(2/2400) ≈ 2.9 %; a 5-sigma band
    # (±15 %) and a Kolmogorov–Smirnov test against N(0, 1.5) at p > 1e-4 fail falsely
    # with probability < 2e-4 together (both laws are within 1e-6 of Gaussian in
    # Kolmogorov distance at these noise scales).
    plan = _plan(model)
    clients = _client_stats(plan.spec, plan.num_clients, seed=2)
    dist = aggregate_distributed(clients, plan, dropouts={}, noise_seed=11)
    exact = sum(clients[1:], clients[0])
    z = _residual(plan, dist.noisy, exact)
    assert abs(z.var() / 1.5 - 1) < 0.15
    assert abs(z.mean()) < 5 * math.sqrt(1.5 / z.size)
    assert sps.kstest(z / math.sqrt(1.5), "norm").pvalue > 1e-4
    # The decoded release states the delivered noise, not the claim.
    s, _, _ = plan.claimed_stds()
    # (up to the 17-bit upward rounding of the per-client noise parameters)
    assert dist.noisy.noise_std_sum == pytest.approx(s * math.sqrt(1.5), rel=1e-4)
    assert np.array_equal(dist.noisy.counts, exact.counts.astype(np.float64))


def test_dropouts_down_to_the_threshold_keep_the_claim_with_independent_noise() -> None:
    # u = t = 4 survivors of 6: the total holds exactly the calibrated honest noise
    # (standardized variance 1).  Same statistics as above: false-failure rate < 1e-6.
    plan = _plan("distributed-gaussian")
    clients = _client_stats(plan.spec, plan.num_clients, seed=3)
    dropouts = {Stage.MASKED_INPUT: [1, 4]}
    dist = aggregate_distributed(clients, plan, dropouts=dropouts, noise_seed=12)
    assert dist.survivors == (0, 2, 3, 5)
    exact = clients[0] + clients[2] + clients[3] + clients[5]
    z = _residual(plan, dist.noisy, exact)
    assert abs(z.var() - 1) < 0.15


@needs_layers
@pytest.mark.parametrize("dropped", [[], [2], [1, 4]])
def test_layers_remove_the_excess_for_every_accepted_survivor_set(dropped: list[int]) -> None:
    # With secret-shared layers the server removes the excess, so for u = 6, 5, 4
    # survivors the delivered noise is the calibrated one (variance 1 after
    # standardization) -- independent noise would give u/4 = 1.5, 1.25, 1.  The same
    # 5-sigma band as above (false-failure rate < 1e-6 per case).
    plan = _plan("distributed-skellam", layers=True)
    assert plan.layers == 2
    clients = _client_stats(plan.spec, plan.num_clients, seed=4)
    dropouts = {Stage.MASKED_INPUT: dropped} if dropped else {}
    dist = aggregate_distributed(clients, plan, dropouts=dropouts, noise_seed=13)
    kept = [i for i in range(plan.num_clients) if i not in dropped]
    assert list(dist.survivors) == kept
    exact = sum((clients[i] for i in kept[1:]), clients[kept[0]])
    z = _residual(plan, dist.noisy, exact)
    assert abs(z.var() - 1) < 0.15
    assert dist.noisy.noise_std_sum == pytest.approx(plan.claimed_stds()[0], rel=1e-4)


# -- the canary self-audit of the real distributed round ----------------------------------

# 2·(10,000 + 2,500) releases per audit, one round per hypothesis and phase.
SMALL = AuditTrials(num_trials=10_000, num_calibration_trials=2_500, significance=0.01)


def _audit_plan(model: str, *, layers: bool = False) -> DistributedNoisePlan:
    """The self-audit's small round: 3 clients, t = 2, d = 6, ε = 4 at δ = 1e-5, 2048 classes."""
    return plan_distributed_noise(
        model,
        4.0,
        1e-5,
        clip_norm=3.0,
        dim=6,
        num_classes=2048,  # the trials per call the self-audit used by default at d = 6
        adjacency=Adjacency.REPLACE_ONE,
        num_clients=3,
        threshold=2,
        layers=layers,
    )


def test_distributed_self_audit_takes_a_plan() -> None:
    assert self_audit._default_classes(6) == 2048
    with pytest.raises(ParameterTypeError, match="plan"):
        self_audit.self_audit_distributed_release("distributed-gaussian")  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "layers"),
    [
        ("distributed-gaussian", False),
        pytest.param("distributed-skellam", True, marks=needs_layers),
    ],
)
def test_real_distributed_release_keeps_its_claim(model: str, layers: bool) -> None:
    # α = 0.01 per bound: a correct release is flagged with probability ≤ 2 % over the
    # (fixed) seed.  Measured: μ_lb ≈ 0.78 against the claimed 0.86 at ε = 4.
    result = self_audit.self_audit_distributed_release(
        _audit_plan(model, layers=layers), trials=dataclasses.replace(SMALL, seed=3)
    )
    assert not result.simulated
    assert "aggregate_distributed" in result.audited and "real secure aggregation" in result.audited
    assert not result.violation_detected
    assert result.mu_lower_bound <= result.claimed_mu
    assert result.epsilon_lower_bound <= result.claimed_epsilon == 4.0
    assert result.tightness > 0.6


@pytest.mark.slow
def test_half_noise_distributed_release_is_caught() -> None:
    # Half the noise doubles the true μ (0.86 -> 1.73); measured μ_lb ≈ 1.63, more than
    # 10 standard errors above the claim, so a miss has probability far below 1e-9.
    result = self_audit.self_audit_distributed_release(
        _audit_plan("distributed-gaussian"),
        noise_scale=0.5,
        trials=dataclasses.replace(SMALL, seed=7),
    )
    assert result.violation_detected
    assert result.mu_lower_bound > result.claimed_mu
    assert "DELIBERATELY BROKEN" in result.audited


def test_noise_model_names() -> None:
    assert NoiseModel("distributed-skellam").mechanism == "skellam"
    assert NoiseModel.CENTRAL.mechanism is None


# -- the pipeline and its configuration ---------------------------------------------------


def _numbers(data: Any) -> list[float]:
    if isinstance(data, dict):
        return [x for v in data.values() for x in _numbers(v)]
    if isinstance(data, list):
        return [x for v in data for x in _numbers(v)]
    if isinstance(data, int | float) and not isinstance(data, bool):
        return [float(data)]
    return []


TINY: dict[str, Any] = {
    "num_clients": 6,
    "samples_per_class": 40,
    "classifier_epochs": 2,
    "latent_dim": 6,
    "dropout_rate": 0.34,
    "audit": False,
    "baselines": False,
    "noise_seed": 4,
}


def test_pipeline_config_refuses_what_cannot_hold() -> None:
    from privfed.engines.latent.config import PipelineConfig

    assert PipelineConfig().noise is NoiseModel.CENTRAL
    with pytest.raises(ParameterError, match="noise"):
        PipelineConfig(noise="local")
    with pytest.raises(ParameterError, match="corrupted"):
        PipelineConfig(noise="distributed-gaussian", num_clients=20, assumed_corrupted=11)
    with pytest.raises(ParameterError, match="noise_layers"):
        PipelineConfig(noise="distributed-gaussian", noise_layers=True)
    assert not PipelineConfig(noise="distributed-gaussian").uses_noise_layers
    assert PipelineConfig(noise="distributed-skellam").uses_noise_layers == layers_supported()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["distributed-gaussian", "distributed-skellam"])
def test_pipeline_runs_the_distributed_release_and_says_so(model: str) -> None:
    from privfed.engines.latent.config import PipelineConfig
    from privfed.engines.latent.job import run_pipeline

    config = PipelineConfig(noise=model, **TINY)
    result = run_pipeline(config)
    r = result.report
    assert r.distributed is not None and r.distributed["noise_model"] == model
    assert 0.0 <= r.accuracy_synthetic <= 1.0
    ledger = result.ledger
    assert {e.type_tag for e in ledger.releases} == {"distributed-blocks"}
    assert ledger.epsilon(1e-5) <= r.epsilon
    dp = r.release_dict()["dp"]
    assert dp["noise_model"] == model and "semi-honest" in dp["trust"]
    assert dp["mu"] is None and dp["accountant"].startswith("Renyi DP")
    # One client dropped before its masked input: 5 of 6 survive, t = 4.
    inflation = r.distributed["independent_noise_inflation"]
    assert inflation == pytest.approx(math.sqrt(5 / 4))
    expected = 1.0 if config.uses_noise_layers else inflation
    assert r.distributed["delivered_vs_claimed_std"] == pytest.approx(expected, rel=1e-4)
    assert "client_noise_mean" in r.seconds
    # The distributed facts in release.json are functions of the public configuration
    # and the DP outputs: none of the run's private numbers appears among them (the
    # integer facts -- threshold, n_C, n_min, layers, grid bits -- are declared config).
    public_ints = {"threshold", "assumed_corrupted", "min_honest_contributors"}
    public_ints |= {"noise_layers", "fractional_bits"}
    facts = {k: v for k, v in dp["distributed"].items() if k not in public_ints}
    released = {float(v) for v in _numbers(facts)}
    labels = np.asarray(result.split.private.labels)
    private = {
        "totals": [r.records_private, r.records_aggregated, r.records_test, r.records_public],
        "client sizes": [int(c.size) for c in result.client_indices if c.size > 1],
        "class counts": [int(c) for c in np.bincount(labels) if c > 1],
    }
    leaks = {name: [v for v in vals if float(v) in released] for name, vals in private.items()}
    assert not any(leaks.values()), leaks


# -- regressions from the privacy review -------------------------------------------------


@needs_layers
@pytest.mark.parametrize(("n", "t", "c", "eps"), [(20, 11, 3, 3.0), (7, 4, 1, 1.0)])
def test_layered_plan_keeps_the_accounted_noise_for_every_survivor_count(
    n: int, t: int, c: int, eps: float
) -> None:
    # The ledger accounts n_min = t − n_C contributors of the (rounded-up) λ_b; the layers
    # used to be derived from the UN-rounded V_b, so the honest kept Poisson mean could be
    # below n_min·λ_b (by 6.5e-6 relative at n=20, t=11, n_C=3, u=18).  Exact check.
    from fractions import Fraction

    plan = plan_distributed_noise(
        "distributed-skellam",
        eps,
        1e-5,
        clip_norm=1.0,
        dim=4,
        num_classes=3,
        adjacency=Adjacency.REPLACE_ONE,
        num_clients=n,
        threshold=t,
        corrupted=c,
        layers=True,
    )
    assert plan.min_honest == t - c and plan.layers == n - t
    for b in range(len(plan.block_names)):
        claimed = plan.min_honest * Fraction(plan.noise.noise[b])
        for u in range(t, n + 1):
            kept = (u - c) * sum(Fraction(x) for x in plan.layer_means[b][: n - u + 1])
            assert kept >= claimed, (plan.block_names[b], u)


def test_client_noise_scale_must_be_positive() -> None:
    plan = _plan("distributed-skellam")
    vector = np.zeros(plan.spec.num_values, dtype=np.uint64)
    from privfed.engines.latent.distributed import add_client_noise

    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ParameterError, match="noise_scale"):
            add_client_noise(vector, plan, seed=1, noise_scale=bad)
