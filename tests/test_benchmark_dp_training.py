"""``benchmarks/dp_training.py``: its command line, a tiny run's JSON, and its direct ring sum.

The benchmark's full run takes minutes; these tests run its core at a tiny size
(N = 6 clients, 2 rounds, one ε) and check the structure and invariants of what
it writes, never its timings or accuracies.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "dp_training.py"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


bench = _load("_privfed_bench_dp_training", SCRIPT)


def test_arguments() -> None:
    args = bench.parse_args([])
    assert args.clients == [20, 100] and args.epsilons == [1.0, 3.0, 8.0]
    assert args.rounds == 10 and args.ring_bits == 16 and args.out == bench.DEFAULT_OUT
    quick = bench.parse_args(["--quick"])
    assert quick.clients == [6] and quick.rounds == 2 and quick.out == bench.QUICK_OUT
    for bad in (["--clients", "3"], ["--rounds", "0"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_threshold_keeps_the_layers_within_the_share_ciphertext() -> None:
    assert bench.threshold_for(20) == 11 and bench.threshold_for(100) == 76
    for n in (4, 20, 49, 100, 220):
        t = bench.threshold_for(n)
        assert 2 * t > n and n - t <= bench.MAX_LAYERS


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("dp_training") / "dp_training.json"
    bench.main(["--quick", "--out", str(out)])
    assert out.with_suffix(".png").stat().st_size > 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
def test_the_quick_run_writes_every_arm_with_its_invariants(quick: dict[str, Any]) -> None:
    bench.check_schema(quick)
    meta, runs = quick["meta"], quick["runs"]
    arms = {(r["arm"], r["bits_per_coordinate"]) for r in runs}
    assert arms == {("none", 32), ("central", 32), ("skellam", 16), ("discrete-gaussian", 16),
                    ("skellam", 32)}  # fmt: skip
    for run in runs:
        assert len(run["accuracy"]) == meta["rounds"] == run["rounds"]
        assert all(0.0 <= a <= 1.0 for a in run["accuracy"])
        assert run["final_accuracy"] == run["accuracy"][-1]
        if run["arm"] == "none":
            assert run["noise_over_central"] is None and run["ledger_epsilon"] is None
            continue
        n = run["clients"]
        # round 1 ran the protocol with ceil(10 %) dropouts, the others every client
        assert run["survivor_sets"] == sorted({n - int(np.ceil(meta["dropout"] * n)), n})
        assert run["bytes_per_client"] > 0 and run["client_secagg_s"] > 0
        assert run["ledger_epsilon"] <= run["epsilon"] * (1 + 1e-9)
        if run["arm"] == "central":
            assert run["noise_over_central"] == 1.0
        else:  # distributed noise is never below the central Gaussian's at the same budget
            assert run["noise_over_central"] >= 1.0
            assert run["noise_over_central"] == max(run["noise_over_central_per_survivor_set"])
            assert run["plan"]["log_wrap_probability_per_round"] < -20
            assert run["coordinates"] == run["plan"]["dimension"] >= meta["model"]["parameters"]


def test_the_quick_run_audits_and_states_its_goals(quick: dict[str, Any]) -> None:
    audit = {a["arm"]: a for a in quick["audit"]}
    assert set(audit) == {"skellam", "none"}
    for row in audit.values():
        assert row["slots"] == row["real_clients"] + row["canaries"]
        assert 0 <= row["num_correct"] <= row["num_guesses"] <= row["canaries"]
        assert row["epsilon_lower_bound"] >= 0.0
        estimate = row["canary_client_estimate"]  # Andrew et al. 2024, the same run
        assert np.isfinite(estimate["epsilon"]) and estimate["epsilon"] >= 0.0
        low, high = estimate["interval"]
        assert 0.0 <= low <= estimate["epsilon"] <= high < np.inf
        assert "not a bound" in estimate["statistical_model"]
    assert audit["skellam"]["claimed_epsilon"] <= audit["skellam"]["epsilon"] * (1 + 1e-9)
    assert audit["none"]["claimed_epsilon"] is None
    # the RDP accountant alone costs a continuous Gaussian a few percent over the analytic one
    assert 1.0 < quick["meta"]["rdp_gaussian_over_analytic"]["3"] < 1.2
    goals = quick["goals"]
    (versus,) = goals["skellam_within_1_point_and_1.1x_central"]
    within = versus["difference_points"] >= -1 and versus["noise_over_central"] <= 1.1
    assert versus["met"] == within
    (ring,) = goals["b16_within_half_point_of_b32"]
    assert ring["bits"] == 16 and ring["met"] == (ring["difference_points"] >= -0.5)
    assert set(goals["audit_below_claim_and_positive_without_dp"]) >= {"met", "none_lower_bound"}


def test_the_readme_row_renders_from_the_quick_run(
    quick: dict[str, Any], tmp_path: Path
) -> None:
    figures = _load("_privfed_bench_figures_for_dp_training", ROOT / "benchmarks" / "figures.py")
    (tmp_path / "dp_training.json").write_text(json.dumps(quick))
    section, _ = figures.render_section(tmp_path)
    (row,) = [line for line in section.splitlines() if line.startswith("| `dp_training.py")]
    assert "N ∈ {6}" in row and "one-run audit ε lower bound" in row and "mean of 1 seed" in row


def test_the_direct_sum_is_what_the_protocol_delivers() -> None:
    from privfed.dp.training import plan_training_noise
    from privfed.dp.training_codec import decode_noisy_sum, encode_update
    from privfed.secagg.runner import run_protocol

    n, size = 6, 40
    t = bench.threshold_for(n)
    plan = plan_training_noise(
        3.0, 1e-5, rounds=2, clip_norm=1.0, model_size=size, num_clients=n, threshold=t,
        ring_bits=16,
    )
    assert plan.layers == n - plan.threshold > 0
    rng = np.random.default_rng(5)
    seeds = [[os.urandom(32) for _ in range(plan.layers)] for _ in range(n)]
    round_seed = os.urandom(32)
    vectors = [
        encode_update(rng.normal(size=size), plan, round_seed=round_seed, layer_seeds=s).vector
        for s in seeds
    ]
    report = run_protocol(vectors, threshold=plan.threshold, ring_bits=16,
                          noise_layers=plan.layers, noise_seeds=seeds)  # fmt: skip
    total, survivors, revealed = bench.direct_sum(vectors, seeds, 16)
    assert np.array_equal(total, report.total) and survivors == report.survivors
    assert revealed == {k: dict(v) for k, v in report.revealed_noise_seeds.items()}
    a = decode_noisy_sum(total, plan, round_seed=round_seed, survivors=survivors, revealed=revealed)
    b = decode_noisy_sum(report.total, plan, round_seed=round_seed, survivors=report.survivors,
                         revealed=report.revealed_noise_seeds)  # fmt: skip
    assert np.array_equal(a.update, b.update)
