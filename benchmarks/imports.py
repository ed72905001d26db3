"""Benchmark how long privfed's packages take to import, next to their baselines.

Usage::

    python benchmarks/imports.py               # 5 fresh interpreters per row
    python benchmarks/imports.py --repeats 9

Prints one table and writes ``benchmarks/results/imports.json``.

Every number is the median over ``--repeats`` fresh interpreters
(``sys.executable``), after one uncounted warm-up run per row.  privfed's
sources are byte-compiled first (``compileall``, as ``make setup`` does; the
environment may set ``PYTHONDONTWRITEBYTECODE``, and an import that compiles
its sources measures the compiler).  Each interpreter first imports the row's
baseline (timed), then runs the row's target with the baseline already loaded
(timed), so the two times come from the same process and the ratio target /
baseline is not distorted by how busy the machine is:

* bare python -- ``python -c pass``, wall time of the whole process;
* numpy -- ``import numpy`` (no baseline);
* torch -- ``import torch`` after numpy (when torch is installed);
* privfed.secagg + privfed.dp -- the bare import after numpy.  The packages are
  lazy (PEP 562), so this runs only their ``__init__`` files; and the same
  import alone (no baseline: its wall time is a fresh interpreter's);
* first use, ... -- after numpy, the import plus the first call of a main entry
  point (a ``SecAggConfig``, a 4-client ``run_in_memory`` round, an analytic
  Gaussian calibration, a ledger's epsilon) or resolving every name both
  packages export: where the cost the bare import no longer pays is paid
  (including the call's own work, milliseconds here);
* privfed.testing, privfed.audit -- after numpy;
* privfed.engines.latent and privfed.engines -- after torch (when they import),
  and privfed.engines.latent with every name in its ``__all__`` loaded (the
  wing's modules themselves).

Columns: the baseline's import time, the target's time once the baseline is
loaded, their sum (what a script running only the target pays), the ratio
target / baseline, the process's wall time, and which heavy optional modules
(scipy.special/stats/optimize, dp_accounting, hypothesis, torch, flwr, sklearn,
matplotlib) are in ``sys.modules`` afterwards.  No assertions: the budgets the
cores must meet are checked by ``tests/test_import_time.py``.  Times are in
milliseconds; treat them as provisional on a shared machine.
"""

from __future__ import annotations

import argparse
import compileall
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
    "flwr",
    "sklearn",
    "matplotlib",
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


#: Import plus the first call of the cores' main entry points: where the cost the
#: lazy package ``__init__`` files no longer pay on import is paid.
_FIRST_USE = {
    "secagg: SecAggConfig(...)": (
        "from privfed.secagg import SecAggConfig\n"
        "SecAggConfig(client_ids=(1, 2, 3, 4), threshold=3, vector_length=5)"
    ),
    "secagg: run_in_memory, 4 clients": (
        "import numpy as np\n"
        "from privfed.secagg import run_in_memory\n"
        "run_in_memory([np.arange(5, dtype=np.uint64) * i for i in range(1, 5)], threshold=3)"
    ),
    "dp: calibrate_analytic_gaussian": (
        "from privfed.dp import calibrate_analytic_gaussian\n"
        "calibrate_analytic_gaussian(1.0, 1e-5, l2_sensitivity=1.0)"
    ),
    "dp: ledger, one release, epsilon": (
        "from privfed.dp import GAUSSIAN_SAMPLER, Adjacency, GaussianRelease, PrivacyLedger\n"
        "ledger = PrivacyLedger()\n"
        "ledger.record(GaussianRelease(name='q', partition=None, l2_sensitivity=1.0,\n"
        "    noise_std=2.0, adjacency=Adjacency.REPLACE_ONE, sampler=GAUSSIAN_SAMPLER,\n"
        "    seeded=False))\n"
        "ledger.epsilon(1e-5)"
    ),
    "secagg + dp, every export": (
        "import privfed.secagg, privfed.dp\n"
        "for _m in (privfed.secagg, privfed.dp):\n"
        "    for _n in _m.__all__:\n"
        "        getattr(_m, _n)"
    ),
}


def _first_use_rows() -> list[tuple[str, str, str]]:
    return [(f"first use, {name}", "import numpy", code) for name, code in _FIRST_USE.items()]


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
        # The same without numpy first: the wall column is a fresh interpreter's.
        ("privfed.secagg + privfed.dp, alone", "", "import privfed.secagg, privfed.dp"),
        *_first_use_rows(),
        ("privfed.testing", "import numpy", "import privfed.testing"),
        ("privfed.audit", "import numpy", "import privfed.audit"),
    ]
    heavy_baseline = "import torch" if have_torch else "import numpy"
    for name in ("privfed.engines.latent", "privfed.engines"):
        rows.append((name, heavy_baseline, f"import {name}"))
    # The latent wing loads its names on first use; this row loads every one of them.
    every_export = (
        "import privfed.engines.latent as _m\nfor _n in _m.__all__:\n    getattr(_m, _n)"
    )
    rows.append(("privfed.engines.latent, every export", heavy_baseline, every_export))
    return rows


def _compile_privfed() -> None:
    """Byte-compile privfed's sources so that no measured import compiles them."""
    spec = importlib.util.find_spec("privfed")
    if spec is None or not spec.submodule_search_locations:
        return
    for location in spec.submodule_search_locations:
        compileall.compile_dir(location, quiet=1)
    print(f"byte-compiled {', '.join(spec.submodule_search_locations)}", flush=True)


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
        f"{'row':<44}{'baseline':>10}{'base ms':>9}{'target ms':>11}{'total ms':>10}"
        f"{'ratio':>7}{'wall ms':>9}  heavy modules loaded"
    )
    lines = [head, "-" * len(head)]
    for row in table:
        if "error" in row:
            lines.append(f"{row['name']:<44}  does not import: {row['error']}")
            continue
        lines.append(
            f"{row['name']:<44}{row['baseline'] or '-':>10}"
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
    _compile_privfed()
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
