"""``benchmarks/flower_training.py``: its command line, goals and JSON writer (no simulation).

The benchmark itself runs Flower's simulation engine for minutes; these tests
only check what it parses and what it writes, on a small synthetic result.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "flower_training.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_privfed_bench_flower_training", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_help_names_the_flags() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in ("--nodes", "--rounds", "--quick", "--out", "--arm-timeout", "--npz"):
        assert flag in out


def test_arguments() -> None:
    args = bench.parse_args([])
    assert args.nodes == [10, 50, 100] and args.rounds == 3
    assert args.out == bench.DEFAULT_OUT and args.arms == list(bench.ARMS)
    quick = bench.parse_args(["--quick"])
    assert quick.nodes == [10] and quick.rounds == 1 and quick.out == bench.QUICK_OUT
    custom = bench.parse_args(
        ["--nodes", "20,40", "--rounds", "2", "--arms", "none,privfed", "--out", "x.json"]
    )
    assert custom.nodes == [20, 40] and custom.rounds == 2 and custom.out == Path("x.json")
    assert custom.arms == ["none", "privfed"]
    for bad in (["--nodes", "3"], ["--arms", "secagg"], ["--rounds", "0"], ["--graphs", "ring"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_graph_parameters() -> None:
    assert bench.graph_parameters(100, "complete") == (100, 51)
    assert bench.graph_parameters(100, "secaggplus") == (15, 8)
    assert bench.graph_parameters(10, "secaggplus") == (9, 5)
    for n in (10, 50, 100, 1000):
        k, t = bench.graph_parameters(n, "secaggplus")
        assert 3 <= k < n and 2 <= t < k


def _round(r: int, wall: float, accuracy: float, steps: float) -> dict[str, Any]:
    return {
        "round": r,
        "status": "ok",
        "wall_s": wall,
        "server_cpu_s": wall / 10,
        "bytes_up_per_node": 1000.0,
        "bytes_down_per_node": 900.0,
        "accuracy": accuracy,
        "aggregate_error_steps": steps,
    }


def _run(
    arm: str,
    graph: str,
    engine: str,
    walls: list[float],
    accuracy: float,
    steps: float = 0.5,
    status: str = "ok",
) -> dict[str, Any]:
    k, t = (100, 51) if graph == "complete" else (None, None)
    rounds = [_round(i + 1, w, accuracy, steps) for i, w in enumerate(walls)]
    if status == "budget":
        rounds.append({"round": len(walls) + 1, "status": "not run (arm budget)"})
    return {
        "arm": arm,
        "graph": graph,
        "engine": engine,
        "nodes": 100,
        "mode": None,
        "num_shares": k,
        "threshold": t,
        "status": status,
        "note": None,
        "rounds": rounds,
        "final_accuracy": accuracy,
        "median_round_wall_s": sorted(walls)[len(walls) // 2],
    }


def synthetic() -> dict[str, Any]:
    sim, loop = "flower-simulation", "in-process-loopback"
    runs = [
        _run("none", "none", sim, [1.0, 1.0, 1.0], 0.900, steps=0.01),
        _run("privfed", "complete", sim, [4.0, 3.0, 3.0], 0.901),
        _run("flower-secaggplus", "complete", sim, [201.0], 0.899, steps=12.0, status="budget"),
        _run("none", "none", loop, [0.5, 0.5, 0.5], 0.900),
        _run("privfed", "complete", loop, [2.0, 2.0, 2.0], 0.901),
    ]
    results: dict[str, Any] = {
        "schema": bench.SCHEMA,
        "meta": {
            "nodes": [100],
            "rounds": 3,
            "model": {"parameters": 2410},
            "machine": {"cpus": 2},
            "load_average": [],
            "command": "python benchmarks/flower_training.py",
            "active_mode": {"run": False, "note": "skipped"},
            "arm_timeout_s": 450.0,
        },
        "runs": runs,
        "in_process_protocol": [
            {"nodes": 100, "graph": "complete", "wall_s": 0.5, "vector_length": 2419}
        ],
        "profile": None,
    }
    results["goals"] = bench.goals(results)
    return results


def test_goals_from_a_synthetic_result() -> None:
    goals = synthetic()["goals"]
    (secagg,) = goals["secagg_time_10x_less_than_flower"]
    assert secagg["privfed_s"] == 2.0 and secagg["flower_s"] == 200.0
    assert secagg["ratio"] == 100.0 and secagg["met"] is True
    (accuracy,) = [g for g in goals["accuracy_within_half_point"] if g["graph"] == "complete"]
    assert accuracy["difference_points"] == pytest.approx(0.1) and accuracy["met"] is True
    (aggregate,) = [g for g in goals["aggregate_within_step"] if g["graph"] == "complete"]
    assert aggregate["max_error_steps"] == 0.5 and aggregate["met"] is True
    assert aggregate["flower_max_error_steps"] == 12.0
    (transport,) = [g for g in goals["transport_overhead"] if g["graph"] == "complete"]
    assert transport["over_loopback"] == pytest.approx(2.0 / 1.5) and transport["met"] is True
    assert transport["over_run_protocol"] == pytest.approx(4.0)


def test_the_breakdown_splits_a_round_into_clients_server_and_engine() -> None:
    run = _run("privfed", "complete", "flower-simulation", [6.0], 0.9)
    stage = {"wall_s": 1.0, "clients_s_sum": 2.0, "clients_cpu_s_sum": 1.0, "fit_s_sum": 0.2}
    run["rounds"][0].update(stages=[stage] * 4, server_process_cpu_s=1.4)
    parts = bench.breakdown(run, cpus=2)
    assert parts is not None and parts["stages"] == 4 and parts["stage_wall_s"] == [1.0] * 4
    assert parts["clients_parallel_s"] == 4.0 and parts["clients_cpu_parallel_s"] == 2.0
    assert parts["server_thread_s"] == pytest.approx(0.6)
    assert parts["engine_s"] == pytest.approx(6.0 - 4.0 - 0.6)
    assert parts["engine_cpu_s"] == pytest.approx(0.8)
    assert bench.breakdown(_run("none", "none", "flower-simulation", [1.0], 0.9), cpus=2) is None


def test_write_results_checks_the_schema(tmp_path: Path) -> None:
    results = synthetic()
    path = tmp_path / "out" / "flower_training.json"
    bench.write_results(results, path)
    assert json.loads(path.read_text()) == results
    broken = synthetic()
    del broken["runs"][1]["rounds"][0]["wall_s"]
    with pytest.raises(ValueError, match=r"runs\[1\]\.rounds\[0\]: no field 'wall_s'"):
        bench.write_results(broken, tmp_path / "broken.json")
    assert not (tmp_path / "broken.json").exists()
    broken = synthetic()
    broken["schema"] = "other"
    with pytest.raises(ValueError, match="schema"):
        bench.check_schema(broken)


def test_the_readme_rows_render_from_a_synthetic_result(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "_privfed_bench_figures_for_training", ROOT / "benchmarks" / "figures.py"
    )
    assert spec is not None and spec.loader is not None
    figures = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = figures
    spec.loader.exec_module(figures)
    (tmp_path / "flower_training.json").write_text(json.dumps(synthetic()))
    section, _ = figures.render_section(tmp_path)
    rows = [line for line in section.splitlines() if line.startswith("| `flower_training.py")]
    assert len(rows) == 2
    assert "Flower's SecAgg+ 200 s (1 of 3 rounds within the arm budget)" in rows[0]
    assert "100×" in rows[0]
