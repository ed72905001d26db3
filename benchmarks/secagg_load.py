"""Load: many secure-aggregation rounds at once, from threads, in one process.

``--threads`` rounds of :func:`privfed.secagg.run_in_memory` (every message
serialized, the in-process server and clients) run concurrently, each on its
own random inputs with one client dropping before masked input; every total
is compared with the plain sum of the survivors' inputs.  The batch is played
``--waves`` times and the process's RSS is read after each wave: bounded
memory means it levels off (the JSON has the slope over the second half of
the waves).  Prints one line per wave and writes ``benchmarks/results/secagg_load.json``.

Example::

    python benchmarks/secagg_load.py --threads 50 --clients 8 --length 2000 --waves 3
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from privfed._atomic import atomic_write_text
from privfed.secagg import Stage, majority_threshold, run_in_memory

OUT = Path(__file__).resolve().parent / "results" / "secagg_load.json"


def rss_kib() -> int:
    """This process's resident set (KiB), from ``/proc/self/status``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1  # pragma: no cover -- no /proc


def one_round(clients: int, length: int) -> bool:
    """One round with client 0 dropping before masked input; whether its total is exact."""
    rng = np.random.default_rng(secrets.randbits(128))
    inputs = [rng.integers(0, 2**64, size=length, dtype=np.uint64) for _ in range(clients)]
    total = run_in_memory(
        inputs, threshold=majority_threshold(clients), dropouts={Stage.MASKED_INPUT: [0]}
    )
    expected = np.sum(inputs[1:], axis=0, dtype=np.uint64)
    return bool(np.array_equal(total, expected))


def load(threads: int, clients: int, length: int, waves: int) -> dict[str, Any]:
    """Play ``waves`` batches of ``threads`` concurrent rounds; figures per wave."""
    rows: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for wave in range(waves):
            start = time.perf_counter()
            exact = list(pool.map(lambda _: one_round(clients, length), range(threads)))
            rows.append(
                {
                    "wave": wave,
                    "rounds": threads,
                    "exact": sum(exact),
                    "seconds": round(time.perf_counter() - start, 3),
                    "rss_kib": rss_kib(),
                }
            )
    return {
        "threads": threads,
        "clients": clients,
        "vector_length": length,
        "waves": rows,
        "all_exact": all(row["exact"] == threads for row in rows),
        "rss_growth_kib_after_first_wave": rows[-1]["rss_kib"] - rows[0]["rss_kib"],
        "rss_slope_kib_per_wave_second_half": _slope(rows[len(rows) // 2 :]),
    }


def _slope(rows: list[dict[str, Any]]) -> float | None:
    """Least-squares slope of RSS (KiB) over the waves of ``rows`` (``None``: under 3)."""
    if len(rows) < 3:
        return None
    waves = [float(row["wave"]) for row in rows]
    return round(float(np.polyfit(waves, [row["rss_kib"] for row in rows], 1)[0]), 1)


def main(argv: list[str] | None = None) -> int:
    """Run the load benchmark; 0 when every total was exact."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--length", type=int, default=2000)
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    result = load(args.threads, args.clients, args.length, args.waves)
    result["rss_kib_at_end"] = rss_kib()
    for row in result["waves"]:
        print(
            f"wave {row['wave']}: {row['exact']}/{row['rounds']} exact in {row['seconds']:.1f} s, "
            f"RSS {row['rss_kib'] / 1024:.0f} MiB"
        )
    print(
        f"RSS growth after the first wave: {result['rss_growth_kib_after_first_wave']} KiB; "
        f"slope over the second half {result['rss_slope_kib_per_wave_second_half']} KiB/wave"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    return 0 if result["all_exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
