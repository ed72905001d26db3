"""``benchmarks/factory_device_timing.py`` (the GPU path of issue 28) and its hook in
``scripts/device_check.sh``: the command line, and a tiny CPU run's JSON.

The real run needs a GPU; these tests run it on the CPU at a tiny size and check
what it writes (structure, the DP run's spent ε, the budget), never its timings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "factory_device_timing.py"

pytest.importorskip("diffusers")


bench = load_script("benchmarks/factory_device_timing.py", "_privfed_bench_factory_timing")


def test_arguments() -> None:
    args = bench._parse_args([])
    assert args.device == "cuda" and args.steps == 1000 and args.epsilon_list == [math.inf, 10.0]
    assert args.channel_list == (64, 128, 128) and args.budget_s == 120.0
    unet = bench._unet(args)
    assert unet.block_out_channels == (64, 128, 128) and unet.attention
    assert all(c % unet.norm_num_groups == 0 for c in unet.block_out_channels)
    for bad in (
        ["--steps", "0"],
        ["--epsilons", "0"],
        ["--epsilons", "ten"],
        ["--channels", "8,x"],
        ["--budget-s", "0"],
        ["--baseline-steps", "-1"],
    ):
        with pytest.raises(SystemExit):
            bench._parse_args(bad)


def test_seconds_per_step_is_positive_even_when_timing_noise_inverts_the_fits() -> None:
    # The difference of the two fits, when it is positive.
    assert bench._per_step(1.0, 3.0, 2) == pytest.approx(1.0)
    # A 2-step fit timed faster than the 1-step one (seen on CI: -0.107 s a step):
    # the whole fit per step, an upper bound, never a negative time.
    assert bench._per_step(1.06, 0.95, 1) == pytest.approx(0.475)
    assert bench._per_step(1.0, 1.0, 4) == pytest.approx(0.2)


@pytest.mark.slow
def test_tiny_cpu_run_writes_its_json_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "timing.json"
    argv = ["--device", "cpu", "--tiny", "--steps", "2", "--baseline-steps", "1"]
    argv += ["--sampling-steps", "2", "--synthetic-per-class", "10", "--classifier-epochs", "1"]
    argv += ["--epsilons", "inf,10", "--output", str(out)]
    result = bench.main(argv)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert out.with_suffix(".png").stat().st_size > 0
    assert result["device_name"] == "cpu" and result["setting"]["tiny"]
    assert result["baseline"]["cpu_seconds_per_step"] > 0
    assert result["baseline"]["speedup"] > 0
    free, private = result["runs"]
    assert free["epsilon"] == "inf" and free["dp_epsilon_spent"] is None
    # The DP run spends at most its target, and not much less (calibrated, not guessed).
    assert private["epsilon"] == 10.0 and 9.0 < private["dp_epsilon_spent"] <= 10.0
    for run in (free, private):
        assert run["factories"] == 10 and 0.0 <= run["factory_accuracy"] <= 1.0
        assert 0 < run["factory_seconds_mean"] <= run["factory_seconds_max"]
    assert result["skipped_over_budget"] == []


def test_the_device_check_runs_the_timing_and_keeps_the_tests_status() -> None:
    script = (ROOT / "scripts" / "device_check.sh").read_text()
    assert "benchmarks/factory_device_timing.py" in script
    assert '"factory_timing"' in script and "PRIVFED_FACTORY_TIMING" in script
    # The exit status is the tests' (RC), never the timing's.
    assert script.rstrip().endswith('exit "$RC"')
