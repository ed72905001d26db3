"""Benchmark how long privfed's packages take to import, next to their baselines.

Usage::

    python benchmarks/imports.py               # 5 fresh interpreters per row
    python benchmarks/imports.py --repeats 9

Prints one table and writes ``benchmarks/results/imports.json``.

Every number is the median over ``--repeats`` fresh interpreters
(``sys.executable``), after one uncounted warm-up run per row that writes the
bytecode caches.  Each interpreter first imports the row's baseline (timed),
then the row's target with the baseline already loaded (timed), so the two
times come from the same process and the ratio target / baseline is not
distorted by how busy the machine is:

* bare python -- ``python -c pass``, wall time of the whole process;
* numpy -- ``import numpy`` (no baseline);
* torch -- ``import torch`` after numpy (when torch is installed);
* privfed.secagg + privfed.dp, privfed.testing, privfed.audit -- after numpy;
* privfed.models and privfed.engines -- after torch (when they import), and
  privfed.models with every name in its ``__all__`` loaded (the engines'
  modules themselves).

Columns: the baseline's import time, the target's import time once the
baseline is loaded, their sum (what a script importing only the target pays),
the ratio target / baseline, the process's wall time, and which heavy optional
modules (scipy.special/stats/optimize, dp_accounting, hypothesis, torch) are in
``sys.modules`` afterwards.  No assertions: the budget the cores must meet is
checked by ``tests/test_import_time.py``.  Times are in milliseconds; treat
them as provisional on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

HEAVY = (
    "scipy.special",
    "scipy.stats",
    "scipy.optimize",
    "dp_accounting",
    "hypothesis",
    "torch",
)

_PROBE = """
import json, sys, time
t0 = time.perf_counter()
{baseline}
t1 = time.perf_counter()
{target}
t2 = time.perf_counter()
heavy = sorted(
    h for h in {heavy!r}
    if any(m == h or m.startswith(h + ".") for m in sys.modules)
)
print(json.dumps({{"baseline_s": t1 - t0, "target_s": t2 - t1, "heavy": heavy}}))
"""


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _rows() -> list[tuple[str, str, str]]:
    """(row name, baseline statement, target statement)."""
    rows = [
        ("bare python", "", "pass"),
        ("numpy", "", "import numpy"),
    ]
    have_torch = _available("torch")
    if have_torch:
        rows.append(("torch", "import numpy", "import torch"))
    rows += [
        ("privfed.secagg + privfed.dp", "import numpy", "import privfed.secagg, privfed.dp"),
        ("privfed.testing", "import numpy", "import privfed.testing"),
        ("privfed.audit", "import numpy", "import privfed.audit"),
    ]
    heavy_baseline = "import torch" if have_torch else "import numpy"
    for name in ("privfed.models", "privfed.engines"):
        rows.append((name, heavy_baseline, f"import {name}"))
    # privfed.models loads its names on first use; this row loads every one of them.
    every_export = "import privfed.models as _m\nfor _n in _m.__all__:\n    getattr(_m, _n)"
    rows.append(("privfed.models, every export", heavy_baseline, every_export))
    return rows


def _one(baseline: str, target: str) -> dict[str, Any]:
    code = _PROBE.format(baseline=baseline or "pass", target=target, heavy=HEAVY)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit status {out.returncode}"}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def measure(repeats: int) -> list[dict[str, Any]]:
    table = []
    for name, baseline, target in _rows():
        first = _one(baseline, target)  # warm-up: bytecode caches, file cache
        row: dict[str, Any] = {
            "name": name,
            "baseline": baseline.removeprefix("import ") or None,
            "target": target,
        }
        if "error" in first:
            row["error"] = first["error"]
            table.append(row)
            print(f"  {name}: does not import ({first['error']})", flush=True)
            continue
        runs = [_one(baseline, target) for _ in range(repeats)]
        errors = [r["error"] for r in runs if "error" in r]
        if errors:
            row["error"] = errors[0]
            table.append(row)
            continue
        baseline_ms = statistics.median(1e3 * r["baseline_s"] for r in runs)
        target_ms = statistics.median(1e3 * r["target_s"] for r in runs)
        row.update(
            baseline_ms=baseline_ms if baseline else None,
            target_ms=target_ms,
            total_ms=statistics.median(1e3 * (r["baseline_s"] + r["target_s"]) for r in runs),
            ratio=(
                statistics.median(r["target_s"] / r["baseline_s"] for r in runs)
                if baseline
                else None
            ),
            wall_ms=statistics.median(1e3 * r["wall_s"] for r in runs),
            heavy_loaded=runs[-1]["heavy"],
            repeats=repeats,
        )
        table.append(row)
        print(f"  measured {name}", flush=True)
    return table


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(table: list[dict[str, Any]]) -> str:
    head = (
        f"{'row':<30}{'baseline':>10}{'base ms':>9}{'target ms':>11}{'total ms':>10}"
        f"{'ratio':>7}{'wall ms':>9}  heavy modules loaded"
    )
    lines = [head, "-" * len(head)]
    for row in table:
        if "error" in row:
            lines.append(f"{row['name']:<30}  does not import: {row['error']}")
            continue
        lines.append(
            f"{row['name']:<30}{row['baseline'] or '-':>10}"
            f"{_fmt(row['baseline_ms'], '.0f'):>9}{row['target_ms']:>11.0f}"
            f"{row['total_ms']:>10.0f}{_fmt(row['ratio'], '.2f'):>7}{row['wall_ms']:>9.0f}  "
            f"{', '.join(row['heavy_loaded']) or '-'}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh interpreters per row")
    parser.add_argument("--output", type=Path, default=RESULTS / "imports.json")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    table = measure(args.repeats)
    print(render(table))
    payload = {
        "benchmark": "imports",
        "unit": "ms (medians over fresh interpreters)",
        "rows": table,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor(),
            "executable": sys.executable,
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
