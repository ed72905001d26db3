"""Import cost of the pure cores and of the audit toolkit.

Two kinds of check, each in fresh interpreters (``sys.executable``) so nothing
the test session has already imported hides a cost:

* **Which modules load** (deterministic, cannot flake): after importing the
  cores (``privfed.secagg``, ``privfed.dp``, ``privfed.testing``) none of
  scipy.special, scipy.stats, scipy.optimize, dp_accounting, hypothesis or
  mpmath is in ``sys.modules``; after ``import privfed.audit`` none of
  scipy.special, scipy.stats, scipy.optimize, torch or matplotlib is.  Those
  are imported by the functions that use them.

* **How long it takes, relative to numpy** (a timed budget): one interpreter
  imports numpy (timed), then ``privfed.secagg`` and ``privfed.dp`` with numpy
  already loaded (timed), and the ratio of the two must stay at or below
  :data:`MAX_CORE_TO_NUMPY_RATIO`.  Measured on a 2-core machine with the cores as
  they are now (the active secure-aggregation mode, the client-state codec and the
  distributed-DP accounting made them larger): 1.9-2.2 when it was quiet and 3.4
  (median of three) inside a clean-clone CI run with two pytest workers; the same
  process also importing scipy.special, scipy.optimize, scipy.stats and
  dp_accounting -- what the cores imported before those moved into the functions
  that use them -- gave 9-16 when quiet.  The budget of 5.0 sits near the geometric
  mean of the worst light figure and the best heavy one, so a return of those
  imports fails it and the light cores pass with a margin of about 1.5x at worst.

False-failure reasoning for the timed check: both times come from the same
process a few milliseconds apart, so whatever slows the whole machine (CPU
contention from parallel tests, a slow disk, a slower CPU) stretches numerator
and denominator alike and largely cancels in the ratio (it moved from about 2 to
3.4 between a quiet machine and a full two-worker test run on 2 cores).
What does not cancel is a stall that hits only the second interval (the process
descheduled for a few hundred milliseconds, or bytecode being recompiled after
an edit): the uncounted warm-up run writes the bytecode caches and warms the
file cache, and the check takes the median of three runs, so a false failure
needs such a stall, pushing that run's privfed part up by half again (over the
worst loaded median seen, 3.4) in two runs out of three; we put the false-failure
rate below 1e-3.  A machine whose numpy imports much
faster relative to the rest of Python would shift the ratio; raise the budget
there rather than dropping the check.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from typing import Any

import pytest

#: Largest allowed (privfed.secagg + privfed.dp import time) / (numpy import time).
MAX_CORE_TO_NUMPY_RATIO = 5.0

CORES = ("privfed.secagg", "privfed.dp", "privfed.testing")
CORE_FORBIDDEN = (
    "scipy.special",
    "scipy.stats",
    "scipy.optimize",
    "dp_accounting",
    "hypothesis",
    "mpmath",
)
AUDIT_FORBIDDEN = ("scipy.special", "scipy.stats", "scipy.optimize", "torch", "matplotlib")

_LOADED = """
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
bad = sorted(
    f for f in {forbidden!r}
    if any(m == f or m.startswith(f + ".") for m in sys.modules)
)
print(json.dumps(bad))
"""

_TIMED = """
import json, time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
import privfed.secagg, privfed.dp
t2 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1]))
"""


def _run(code: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _loaded(modules: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    """The ``forbidden`` packages a fresh interpreter has loaded after importing ``modules``."""
    return [str(m) for m in _run(_LOADED.format(modules=modules, forbidden=forbidden))]


def _timed() -> tuple[float, float]:
    """(numpy import seconds, privfed.secagg + privfed.dp import seconds) in one fresh process."""
    numpy_s, cores_s = _run(_TIMED)
    return float(numpy_s), float(cores_s)


@pytest.mark.parametrize(
    ("modules", "forbidden"),
    [(CORES, CORE_FORBIDDEN), (("privfed.audit",), AUDIT_FORBIDDEN)],
    ids=["cores", "audit"],
)
def test_heavy_modules_are_not_imported(
    modules: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    loaded = _loaded(modules, forbidden)
    assert loaded == [], f"importing {', '.join(modules)} loaded {loaded}"


def test_forbidden_check_sees_a_heavy_import() -> None:
    # The check above can fail: a module that does import scipy.special is reported.
    assert "scipy.special" in _loaded(("scipy.special",), CORE_FORBIDDEN)


def test_core_import_time_is_within_budget_relative_to_numpy() -> None:
    _timed()  # warm-up, not counted: bytecode caches and the file cache
    runs = [_timed() for _ in range(3)]
    ratio = statistics.median(cores / numpy for numpy, cores in runs)
    detail = ", ".join(f"numpy {n * 1e3:.0f} ms, cores {c * 1e3:.0f} ms" for n, c in runs)
    assert ratio <= MAX_CORE_TO_NUMPY_RATIO, (
        f"import privfed.secagg, privfed.dp took {ratio:.2f}x the numpy import "
        f"(median of 3; budget {MAX_CORE_TO_NUMPY_RATIO}x): {detail}"
    )
