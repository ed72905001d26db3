"""Secure-aggregation benchmark: privfed's protocol against its own mask floor and Flower.

Plays whole rounds with :func:`privfed.secagg.run_protocol` (clients one after
another in one process, every message serialized) and reports:

* mean client seconds over all four stages (clients that ran every stage);
* server seconds over all stages;
* bytes each client sends, per stage and in total;
* each scenario is played ``--repeats`` times (default 5) and every timing is
  the median over the repeats;
* the *floor* measured in the same run: the time to just expand the same
  number of masks with ``prg.expand`` -- per client its pairwise masks plus its
  self mask, for the server the self masks of the survivors and the pairwise
  masks between dropped clients and their surviving neighbours;
* Flower 1.42's figures for the same jobs on this machine class, as RECORDED
  CONSTANTS (measured once, outside this script, on a 2-core machine with an
  83,850-value payload and clients played one after another in one process;
  this script does not run Flower).  The table heads them "Flower*" and the JSON
  stores them under ``flower_*_seconds_recorded``.

Scenarios (full run): N=100 complete graph (t=51), N=100 SecAgg+ (k=12, t=6)
and N=1000 SecAgg+ (k=30, t=17, Google's parameter-finder choice for 5 %
adversaries / 5 % dropouts), each with 10 % (resp. 50) clients dropping before
masked input.  ``--quick`` runs small versions in seconds.

Usage::

    python benchmarks/secagg.py            # full run, a few minutes
    python benchmarks/secagg.py --quick    # seconds
    python benchmarks/secagg.py --skip-large

Writes ``benchmarks/results/secagg.json`` (and ``secagg.png`` when matplotlib
is installed).  Timings on a shared machine are provisional.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privfed.progress import ProgressEvent
from privfed.secagg import RunReport, SecAggConfig, Stage, run_protocol
from privfed.secagg.primitives import prg

RESULTS = Path(__file__).resolve().parent / "results"
PAYLOAD = 10 * (128 + 128 * 129 // 2 + 1)  # 83,850 values: 10 classes at d = 128


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    clients: int
    threshold: int
    length: int
    dropouts: int
    graph: str = "complete"
    degree: int | None = None
    flower_client_s: float | None = None
    flower_server_s: float | None = None


FULL = [
    Scenario("complete N=100", 100, 51, PAYLOAD, 10, flower_client_s=1.3, flower_server_s=88.0),
    Scenario(
        "secagg+ N=100",
        100,
        6,
        PAYLOAD,
        10,
        "harary",
        12,
        flower_client_s=0.04,
        flower_server_s=2.5,
    ),
    Scenario(
        "secagg+ N=1000",
        1000,
        17,
        PAYLOAD,
        50,
        "harary",
        30,
        flower_client_s=0.14,
        flower_server_s=99.0,
    ),
]
QUICK = [
    Scenario("complete N=20 (quick)", 20, 11, PAYLOAD // 10, 2),
    Scenario("secagg+ N=60 (quick)", 60, 6, PAYLOAD // 10, 3, "harary", 12),
]


class LazyInputs(Sequence[np.ndarray]):
    """Client vectors regenerated on demand, so 1000 x 670 KB never sit in memory."""

    def __init__(self, n: int, length: int, seed: int) -> None:
        self._n, self._length, self._seed = n, length, seed

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        if not 0 <= index < self._n:
            raise IndexError(index)
        rng = np.random.default_rng([self._seed, index])
        return rng.integers(0, 2**64 - 1, size=self._length, dtype=np.uint64, endpoint=True)


class Progress:
    """One status line on stderr per stage, updated in place."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = 0.0

    def __call__(self, event: ProgressEvent) -> None:
        now = time.monotonic()
        if event.finished or now - self.last > 0.5:
            self.last = now
            end = "\n" if event.finished else ""
            line = f"  {self.label}: {event.stage:<15} {event.done}/{event.total}"
            print(f"\r{line}", end=end, file=sys.stderr, flush=True)


def time_expansions(count: int, length: int, ring_bits: int = 64) -> float:
    """Seconds to expand ``count`` masks of ``length`` values from fresh seeds."""
    seeds = [secrets.token_bytes(32) for _ in range(count)]
    start = time.perf_counter()
    for seed in seeds:
        prg.expand(seed, length, modulus_bits=ring_bits)
    return time.perf_counter() - start


def mask_counts(config: SecAggConfig, report: RunReport) -> tuple[dict[int, int], int]:
    """Masks each surviving client expanded, and masks the server regenerated."""
    shared = set(report.shared)
    survivors = set(report.survivors)
    # A survivor expands its self mask plus one pairwise mask per neighbour in U2.
    per_client = {u: len(config.neighbours(u) & shared) + 1 for u in survivors}
    # The server expands every survivor's self mask, plus one pairwise mask per
    # (dropped client, surviving neighbour) pair.
    dropped = shared - survivors
    server = len(survivors) + sum(len(config.neighbours(v) & survivors) for v in dropped)
    return per_client, server


def run_once(s: Scenario, *, seed: int, floor_sample: int) -> dict[str, Any]:
    """One round of ``s`` and, right after it, its mask floor."""
    inputs = LazyInputs(s.clients, s.length, seed)
    rng = np.random.default_rng(seed)
    dropped = sorted(rng.choice(s.clients, size=s.dropouts, replace=False).tolist())
    start = time.perf_counter()
    report = run_protocol(
        inputs,
        threshold=s.threshold,
        dropouts={Stage.MASKED_INPUT: dropped},
        graph=s.graph,
        degree=s.degree,
        progress=Progress(s.name),
    )
    wall = time.perf_counter() - start

    expected = np.zeros(s.length, dtype=np.uint64)
    gone = set(dropped)
    for i in range(s.clients):
        if i not in gone:
            expected += inputs[i]
    exact = bool(np.array_equal(report.total, expected))

    per_client_masks, server_masks = mask_counts(report.config, report)
    sample = sorted(per_client_masks)[:: max(1, len(per_client_masks) // floor_sample)]
    client_floor = float(np.mean([time_expansions(per_client_masks[u], s.length) for u in sample]))
    server_floor = time_expansions(server_masks, s.length)

    full = [c for c in report.clients if len(c.seconds) == 4]
    return {
        "exact_sum": exact,
        "wall_seconds": wall,
        "client_seconds_mean": report.mean_client_seconds,
        "client_seconds_per_stage": {
            stage.name: float(np.mean([c.seconds[stage] for c in full])) for stage in Stage
        },
        "server_seconds": report.total_server_seconds,
        "server_seconds_per_stage": {k.name: v for k, v in report.server_seconds.items()},
        "client_bytes_per_stage": {
            stage.name: float(np.mean([c.bytes_sent[stage] for c in full])) for stage in Stage
        },
        "masks_per_client_mean": float(np.mean(list(per_client_masks.values()))),
        "server_masks": server_masks,
        "client_floor_seconds": client_floor,
        "server_floor_seconds": server_floor,
    }


def run_scenario(s: Scenario, *, seed: int, floor_sample: int, repeats: int) -> dict[str, Any]:
    """``repeats`` rounds of ``s``; every timing reported is the median over them.

    The round and its floor are timed back to back in each repeat, so a slow
    moment of a shared machine affects both; medians keep one such moment from
    deciding the figures.  Every repeat is also kept in ``runs``.
    """
    runs = [run_once(s, seed=seed, floor_sample=floor_sample) for _ in range(repeats)]

    def median(key: str) -> float:
        return float(np.median([r[key] for r in runs]))

    def median_per_stage(key: str) -> dict[str, float]:
        return {stage: float(np.median([r[key][stage] for r in runs])) for stage in runs[0][key]}

    client_s, server_s = median("client_seconds_mean"), median("server_seconds")
    client_floor, server_floor = median("client_floor_seconds"), median("server_floor_seconds")
    bytes_per_stage = runs[0]["client_bytes_per_stage"]
    return {
        "scenario": dataclasses.asdict(s),
        "repeats": repeats,
        "exact_sum": all(r["exact_sum"] for r in runs),
        "wall_seconds": median("wall_seconds"),
        "client_seconds_mean": client_s,
        "client_seconds_per_stage": median_per_stage("client_seconds_per_stage"),
        "server_seconds": server_s,
        "server_seconds_per_stage": median_per_stage("server_seconds_per_stage"),
        "client_bytes_per_stage": bytes_per_stage,
        "client_bytes_total": float(sum(bytes_per_stage.values())),
        "masks_per_client_mean": runs[0]["masks_per_client_mean"],
        "server_masks": runs[0]["server_masks"],
        "client_floor_seconds": client_floor,
        "server_floor_seconds": server_floor,
        "client_over_floor": client_s / client_floor,
        "server_over_floor": server_s / server_floor,
        "client_over_floor_per_run": [
            r["client_seconds_mean"] / r["client_floor_seconds"] for r in runs
        ],
        "server_over_floor_per_run": [
            r["server_seconds"] / r["server_floor_seconds"] for r in runs
        ],
        "flower_client_seconds_recorded": s.flower_client_s,
        "flower_server_seconds_recorded": s.flower_server_s,
        "flower_client_speedup": (s.flower_client_s / client_s) if s.flower_client_s else None,
        "flower_server_speedup": (s.flower_server_s / server_s) if s.flower_server_s else None,
        "runs": [
            {
                k: r[k]
                for k in (
                    "wall_seconds",
                    "client_seconds_mean",
                    "server_seconds",
                    "client_floor_seconds",
                    "server_floor_seconds",
                    "exact_sum",
                )
            }
            for r in runs
        ],
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'scenario':<22} {'exact':>5} {'client s':>9} {'floor':>7} {'x':>5} "
        f"{'Flower*':>7} {'speedup':>8} | {'server s':>9} {'floor':>7} {'x':>5} "
        f"{'Flower*':>7} {'speedup':>8} | {'client bytes':>12}"
    )
    print(head)
    print("-" * len(head))

    def opt(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    for r in rows:
        print(
            f"{r['scenario']['name']:<22} {'yes' if r['exact_sum'] else 'NO':>5} "
            f"{r['client_seconds_mean']:>9.4f} {r['client_floor_seconds']:>7.4f} "
            f"{r['client_over_floor']:>5.2f} "
            f"{opt(r['flower_client_seconds_recorded'], '.2f'):>7} "
            f"{opt(r['flower_client_speedup'], '.1f'):>8} | "
            f"{r['server_seconds']:>9.3f} {r['server_floor_seconds']:>7.3f} "
            f"{r['server_over_floor']:>5.2f} "
            f"{opt(r['flower_server_seconds_recorded'], '.1f'):>7} "
            f"{opt(r['flower_server_speedup'], '.1f'):>8} | {r['client_bytes_total']:>12,.0f}"
        )
    print("* Flower 1.42: recorded constants (measured once outside this script; not run here)")
    print()
    print("client bytes sent per stage (mean over clients that ran every stage):")
    for r in rows:
        parts = ", ".join(f"{k} {v:,.0f}" for k, v in r["client_bytes_per_stage"].items())
        print(f"  {r['scenario']['name']:<22} {parts}")
    print("client / server over floor, each repeat:")
    for r in rows:
        client = ", ".join(f"{x:.2f}" for x in r["client_over_floor_per_run"])
        server = ", ".join(f"{x:.2f}" for x in r["server_over_floor_per_run"])
        print(f"  {r['scenario']['name']:<22} client {client} | server {server}")
    print("client seconds per stage:")
    for r in rows:
        parts = ", ".join(f"{k} {v:.4f}" for k, v in r["client_seconds_per_stage"].items())
        print(f"  {r['scenario']['name']:<22} {parts}")


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    names = [r["scenario"]["name"] for r in rows]
    x = np.arange(len(rows))
    for ax, who in zip(axes, ("client", "server"), strict=True):
        key = "client_seconds_mean" if who == "client" else "server_seconds"
        ours = [r[key] for r in rows]
        floor = [r[f"{who}_floor_seconds"] for r in rows]
        flower = [r[f"flower_{who}_seconds_recorded"] or np.nan for r in rows]
        ax.bar(x - 0.27, ours, 0.27, label="privfed")
        ax.bar(x, floor, 0.27, label="mask floor (prg.expand only)")
        ax.bar(x + 0.27, flower, 0.27, label="Flower 1.42 (recorded constant, not run here)")
        ax.set_xticks(x, names, rotation=15)
        ax.set_yscale("log")
        ax.set_ylabel("seconds" + (" per client" if who == "client" else ""))
        ax.set_title(f"{who} cost")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small scenarios (seconds)")
    parser.add_argument("--skip-large", action="store_true", help="skip the N=1000 scenario")
    parser.add_argument("--seed", type=int, default=0, help="seed of inputs and dropouts")
    parser.add_argument("--floor-sample", type=int, default=10, help="clients timed for the floor")
    parser.add_argument(
        "--repeats", type=int, default=None, help="rounds per scenario (default 5, quick 1)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="JSON path (default results/secagg.json, or results/secagg_quick.json with --quick)",
    )
    args = parser.parse_args(argv)

    scenarios = QUICK if args.quick else FULL
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.skip_large:
        scenarios = [s for s in scenarios if s.clients < 1000]
    rows = []
    for s in scenarios:
        print(f"running {s.name} ...", file=sys.stderr)
        rows.append(
            run_scenario(s, seed=args.seed, floor_sample=args.floor_sample, repeats=repeats)
        )
    print_table(rows)

    if args.output is None:
        # A quick run never overwrites the committed full results.
        args.output = RESULTS / ("secagg_quick.json" if args.quick else "secagg.json")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": "python benchmarks/secagg.py" + (" --quick" if args.quick else ""),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "note": (
            "clients played one after another in one process; each timing is the median "
            "over the repeats; shared machine, provisional"
        ),
        "repeats": repeats,
        "flower_reference": "Flower 1.42 SecAgg+ functions, same payload, 2-core machine",
        "flower_figures": (
            "recorded constants (measured once outside benchmarks/secagg.py; not run by it)"
        ),
    }
    args.output.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    png = args.output.with_suffix(".png")
    if plot(rows, png):
        print(f"wrote {png}")
    return 0 if all(r["exact_sum"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
