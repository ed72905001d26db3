"""Concurrent rounds of the in-process protocol from threads: exact sums, no shared state.

``benchmarks/secagg_load.py`` plays 50 at once and reports time and memory;
this plays 5 at once, twice, and checks every total (each round has its own
random inputs and one client dropping before masked input).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_five_concurrent_rounds_are_each_exact(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("secagg_load", ROOT / "benchmarks/secagg_load.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.load(threads=5, clients=5, length=200, waves=2)
    assert [row["exact"] for row in result["waves"]] == [5, 5]
    assert result["all_exact"]
    out = tmp_path / "load.json"
    assert bench.main(["--threads", "5", "--clients", "4", "--length", "50", "--waves", "1",
                       "--out", str(out)]) == 0  # fmt: skip
    assert out.exists()
