"""Per-block shares of the distributed Skellam block bound, against independent oracles.

The bound (``privfed.dp.distributed_blocks``, module notes) charges every block only
its own second-order term when the caller states per-block caps ``M_b``.  Oracles:
exact Rényi divergences of the shifted Skellam totals summed from scipy's pmf (the
neighbouring pair that attains every cap exactly, the adversarial case), and the
fractional knapsack solved by scipy's linear-programming solver instead of the greedy
fill.  No statistical tests here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from scipy.optimize import linprog
from scipy.special import logsumexp

from privfed.dp import PartitionKey, PrivacyLedger
from privfed.dp.distributed import RDP_ORDERS, rdp_epsilon
from privfed.dp.distributed_blocks import block_rdp, block_zcdp, calibrate_block_noise
from privfed.dp.releases.distributed_blocks import DistributedBlockRelease
from privfed.dp.sensitivity import Adjacency
from privfed.errors import ParameterError

ORDERS = [float(a) for a in range(2, 13)]


def _exact_shift(total_mean: float, shift: int, alpha: float) -> float:
    """D_α(Sk + shift || Sk) for Sk = Poisson(m) − Poisson(m), m = total_mean, by summation."""
    if shift == 0:
        return 0.0
    half = 60 + 12 * math.sqrt(2 * total_mean) + abs(shift)
    k = np.arange(-int(half), int(half) + 1)
    log_p = sps.skellam.logpmf(k - shift, total_mean, total_mean)
    log_q = sps.skellam.logpmf(k, total_mean, total_mean)
    ok = np.isfinite(log_p) & np.isfinite(log_q)
    return float(logsumexp(alpha * log_p[ok] + (1 - alpha) * log_q[ok]) / (alpha - 1))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 4),
    blocks=st.lists(
        st.tuples(
            st.floats(0.25, 40.0),  # per-client λ_b
            st.lists(st.integers(-3, 3), min_size=1, max_size=2),  # Δ_b (integers)
        ),
        min_size=1,
        max_size=3,
    ),
)
@pytest.mark.slow
def test_shares_bound_the_exact_divergence_of_the_tightest_pair(
    n: int, blocks: list[tuple[float, list[int]]]
) -> None:
    # The neighbouring pair attains every cap and the joint bound exactly: the worst
    # case the caps allow, for small variances (where the second-order term matters).
    lams = [lam for lam, _ in blocks]
    deltas = [d for _, d in blocks]
    caps = [sum(x * x for x in d) / (2 * lam) for lam, d in blocks]
    big_m = float(sum(caps))
    kwargs = {
        "num_clients": n,
        "noise": lams,
        "dimensions": [len(d) for d in deltas],
        "unit_mu_squared": big_m,
        "block_mu_squared": caps,
    }
    curve = block_rdp("skellam", ORDERS, **kwargs)
    rho, xi = block_zcdp("skellam", **kwargs)
    for alpha, bound in zip(ORDERS, curve, strict=True):
        exact = sum(
            _exact_shift(n * lam, x, alpha) for lam, d in blocks for x in d
        )  # independent blocks and coordinates: divergences add
        assert exact <= bound * (1 + 1e-9) + 1e-12, (alpha, exact, bound)
        assert bound <= (rho * alpha + xi) * (1 + 1e-9)


def _lp_bound(alpha: float, n: int, lams: list[float], caps: list[float], big_m: float) -> float:
    """αS/2 + max Σ_b W_b c_b(α) over Σ W <= S, 0 <= W_b <= M_b/n, by linear programming."""
    s = big_m / n
    c = [min((2 * alpha + 5) / (4 * 2 * n * lam), 1.5) for lam in lams]
    res = linprog(
        c=[-x for x in c],
        A_ub=[[1.0] * len(lams)],
        b_ub=[s],
        bounds=[(0.0, m / n) for m in caps],
        method="highs",
    )
    assert res.status == 0
    return alpha * s / 2 + float(-res.fun)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 50),
    lams=st.lists(st.floats(0.1, 1e5), min_size=1, max_size=5),
    weights=st.lists(st.floats(0.0, 3.0), min_size=5, max_size=5),
    big_m=st.floats(0.01, 50.0),
)
def test_greedy_fill_is_the_knapsack_maximum(
    n: int, lams: list[float], weights: list[float], big_m: float
) -> None:
    caps = [w * big_m for w in weights[: len(lams)]]
    kwargs = {
        "num_clients": n,
        "noise": lams,
        "dimensions": [1] * len(lams),
        "unit_mu_squared": big_m,
    }
    curve = block_rdp("skellam", ORDERS, block_mu_squared=caps, **kwargs)
    loose = block_rdp("skellam", ORDERS, **kwargs)
    for alpha, got, old in zip(ORDERS, curve, loose, strict=True):
        want = _lp_bound(alpha, n, lams, caps, big_m)
        # HiGHS meets the constraints to ~1e-7 (its feasibility tolerance): 1e-6 relative
        assert got >= want * (1 - 1e-6)
        assert got <= want * (1 + 1e-6) + 1e-15
        assert got <= old * (1 + 1e-12)  # caps never loosen the bound
    # Caps that bind nowhere (each >= M) give the bound without caps.
    free = block_rdp("skellam", ORDERS, block_mu_squared=[big_m] * len(lams), **kwargs)
    np.testing.assert_allclose(free, loose, rtol=1e-12)


def test_caps_are_checked() -> None:
    kwargs = {"num_clients": 3, "noise": [1.0, 2.0], "dimensions": [1, 1], "unit_mu_squared": 1.0}
    for bad in ([1.0], [1.0, -1.0], [1.0, math.inf]):
        with pytest.raises(ParameterError):
            block_rdp("skellam", ORDERS, block_mu_squared=bad, **kwargs)
        with pytest.raises(ParameterError):
            block_zcdp("skellam", block_mu_squared=bad, **kwargs)


def test_a_small_count_block_no_longer_taxes_the_large_blocks() -> None:
    # Shape of the latent job under add/remove: huge sums, a count of variance ~1.
    base = [3.0e4, 1.0e9, 5.0e8, 0.5]
    caps = [0.3, 0.3, 0.3, 0.1]
    common = {
        "num_contributors": 11,
        "base_variances": base,
        "dimensions": [8, 8, 28, 1],
        "base_mu_squared": 1.0,
    }
    loose = calibrate_block_noise("skellam", 10.0, 1e-5, **common)  # type: ignore[arg-type]
    tight = calibrate_block_noise(
        "skellam", 10.0, 1e-5, base_block_mu_squared=caps, **common  # type: ignore[arg-type]
    )
    assert tight.scale < loose.scale
    assert tight.block_mu_squared == pytest.approx([11 * c / tight.scale for c in caps])
    assert rdp_epsilon(tight.rdp(), 1e-5) <= 10.0


def test_release_with_caps_round_trips() -> None:
    common = {
        "name": "latent",
        "partition": PartitionKey("class", 0),
        "mechanism": "skellam",
        "num_contributors": 5,
        "noise": (100.0, 2.0),
        "dimensions": (4, 1),
        "unit_mu_squared": 0.5,
        "adjacency": Adjacency.ADD_REMOVE,
        "sampler": "chacha20-exact-skellam",
        "seeded": False,
    }
    with_caps = DistributedBlockRelease(**common, block_mu_squared=(0.4, 0.25))  # type: ignore[arg-type]
    without = DistributedBlockRelease(**common)  # type: ignore[arg-type]
    doc = with_caps.to_dict()
    assert doc["block_mu_squared"] == [0.4, 0.25]
    assert DistributedBlockRelease.from_dict(doc) == with_caps
    plain = without.to_dict()
    assert plain["block_mu_squared"] is None
    assert DistributedBlockRelease.from_dict(plain) == without
    assert np.all(with_caps.rdp(RDP_ORDERS) <= without.rdp(RDP_ORDERS) * (1 + 1e-12))
    ledger = PrivacyLedger(budget_epsilon=50.0, budget_delta=1e-5)
    ledger.record(with_caps)
    assert PrivacyLedger.from_json(ledger.to_json()).releases[0] == with_caps
    with pytest.raises(ParameterError):
        DistributedBlockRelease(**common, block_mu_squared=(0.4,))  # type: ignore[arg-type]


def test_wrap_bound_is_kept_as_a_logarithm_where_the_float_underflows() -> None:
    from privfed.dp.distributed import log_wrap_probability, wrap_probability
    from privfed.dp.distributed_blocks import RingBlocks, ring_log_wrap_bound, ring_wrap_bound

    args = {"ring_bits": 64, "mechanism": "skellam", "num_summands": 20, "dimension": 10}
    tiny = log_wrap_probability(noise=1e3, total_bound=10**6, **args)  # type: ignore[arg-type]
    assert math.isfinite(tiny) and tiny < -745.0  # exp underflows; the log does not
    assert wrap_probability(noise=1e3, total_bound=10**6, **args) == 0.0  # type: ignore[arg-type]
    # Where the float does not underflow, both agree; B >= 2**63 wraps surely (log 0).
    big = log_wrap_probability(noise=2.0**126 / 4000, total_bound=0, **args)  # type: ignore[arg-type]
    assert -745.0 < big < 0.0
    assert math.exp(big) == pytest.approx(
        wrap_probability(noise=2.0**126 / 4000, total_bound=0, **args)  # type: ignore[arg-type]
    )
    assert log_wrap_probability(noise=1.0, total_bound=2**63, **args) == 0.0  # type: ignore[arg-type]
    blocks = {
        "ring_bits": 64,
        "mechanism": "skellam",
        "num_summands": 20,
        "dimensions": [4, 4],
        "total_bounds": [10**6, 0],
    }
    mixed = RingBlocks(noise=[1e3, 2.0**126 / 4000], **blocks)  # type: ignore[arg-type]
    log_p = ring_log_wrap_bound(mixed)
    assert log_p == pytest.approx(math.log(math.exp(tiny) + math.exp(big) * 0.4), abs=1.0)
    assert ring_wrap_bound(mixed) == pytest.approx(math.exp(log_p))
    assert ring_log_wrap_bound(RingBlocks(noise=[1e3, 1e3], **blocks)) < -745.0  # type: ignore[arg-type]
