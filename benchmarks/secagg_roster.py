"""SecAgg+ roster by commitment: what one client downloads and checks at N = 1,000 to 10,000.

Issue 25, step 1: the server commits to the roster with a Merkle root and
sends each client its neighbourhood's entries plus one multiproof, instead of
the whole member list.  For each N (k, t from the parameter finder at 5 %
corrupted / 5 % dropouts, semi-malicious server) this script runs the
ADVERTISE_KEYS stage for N in-process clients and measures:

* the bytes of a client's roster part (mean and max over all N parts), split
  into entries and proof, beside the member list the previous format sent
  (``4 + 36 N`` bytes on top of the entries);
* client seconds to check a part (rebuild the root, derive its own
  neighbourhood with ``O(k)`` Feistel-permutation evaluations, check
  coverage) and to run the whole SHARE_KEYS stage (with the Shamir sharing
  and share encryption) for a sample of clients;
* server seconds to build the tree, the whole graph (once per round) and
  every part, and the process's peak RSS.

Growth exponents are least-squares slopes of log(value) on log(N).

Usage::

    python benchmarks/secagg_roster.py            # N = 1,000, 3,000, 10,000 (a minute or two)
    python benchmarks/secagg_roster.py --ns 1000  # one N

Writes ``benchmarks/results/secagg_roster.json``.  Timings on a shared
machine are provisional.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from privfed.secagg import SecAggClient, SecAggConfig, SecAggServer
from privfed.secagg.parameters import find_secagg_plus_parameters
from privfed.secagg.protocol._roster_check import roster_graph
from privfed.secagg.protocol.graph import harary_neighbourhoods

RESULTS = Path(__file__).resolve().parent / "results"


def _part_sizes(part: Any) -> tuple[int, int]:
    """(bytes of the part, bytes of its proof section)."""
    proof = part.proof
    proof_bytes = 0 if proof is None else len(proof._wire())
    return len(part.to_bytes()), proof_bytes


def measure(n: int, *, sample: int, seed: int) -> dict[str, Any]:
    params = find_secagg_plus_parameters(
        n, corrupted_fraction=0.05, dropout_fraction=0.05, threat_model="semi-malicious"
    )
    k, t = params.degree, params.threshold
    cfg = SecAggConfig(
        client_ids=tuple(range(1, n + 1)), threshold=t, vector_length=1, graph="harary", degree=k
    )
    clients = {c: SecAggClient(cfg, c, np.zeros(1, np.uint64)) for c in cfg.client_ids}
    server = SecAggServer(cfg)
    rng = np.random.default_rng(seed)
    absent = set(rng.choice(n, size=n // 20, replace=False) + 1)  # 5 % never advertise
    for cid, c in clients.items():
        if cid not in absent:
            message = c.advertise_keys()
            server.receive(message, sender=cid)
    start = time.perf_counter()
    server.roster()
    tree_seconds = time.perf_counter() - start
    present = sorted(set(clients) - absent)
    start = time.perf_counter()
    parts = {cid: server.roster(cid) for cid in present}
    parts_seconds = time.perf_counter() - start
    sizes = [_part_sizes(p) for p in parts.values()]
    entries_only = [len(p.entries) for p in parts.values()]
    # Client side: proof checks and SHARE_KEYS on a sample (the graph cache of
    # the shared config is cleared first, so each client pays for its graph).
    chosen = [present[int(i)] for i in rng.choice(len(present), size=sample, replace=False)]
    check, stage, graph = [], [], []
    for cid in chosen:
        part = parts[cid]
        entries = {e.client_id: (e.encryption_public_key, e.mask_public_key) for e in part.entries}
        cfg._graph_cache.clear()
        start = time.perf_counter()
        harary_neighbourhoods(cfg.client_ids, degree=k, session_id=bytes(32), round_index=0)
        graph.append(time.perf_counter() - start)
        cfg._graph_cache.clear()
        start = time.perf_counter()
        roster_graph(cfg, cid, part, entries)
        check.append(time.perf_counter() - start)
        cfg._graph_cache.clear()
        start = time.perf_counter()
        clients[cid].share_keys(part)
        stage.append(time.perf_counter() - start)
    mean_bytes = statistics.fmean(s for s, _ in sizes)
    return {
        "clients": n,
        "advertised": len(present),
        "degree": k,
        "threshold": t,
        "part_bytes_mean": mean_bytes,
        "part_bytes_max": max(s for s, _ in sizes),
        "proof_bytes_mean": statistics.fmean(p for _, p in sizes),
        "entries_per_part_mean": statistics.fmean(entries_only),
        "previous_format_bytes_mean": mean_bytes
        - statistics.fmean(p for _, p in sizes)
        + 4
        + 36 * len(present),
        "client_check_seconds_median": statistics.median(check),
        "server_graph_seconds_median": statistics.median(graph),
        "client_share_keys_seconds_median": statistics.median(stage),
        "server_tree_seconds": tree_seconds,
        "server_parts_seconds": parts_seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "sample": sample,
    }


def _exponent(ns: list[int], values: list[float]) -> float:
    slope, _ = np.polyfit(np.log(ns), np.log(values), 1)
    return float(slope)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument("--sample", type=int, default=20, help="clients timed per N")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "secagg_roster.json")
    args = parser.parse_args(argv)
    rows = []
    for n in args.ns:
        print(f"N={n} ...", file=sys.stderr)
        rows.append(measure(n, sample=args.sample, seed=args.seed))
        r = rows[-1]
        print(
            f"N={n:>6} k={r['degree']} t={r['threshold']}: part {r['part_bytes_mean']:,.0f} B "
            f"(proof {r['proof_bytes_mean']:,.0f} B; previous format "
            f"{r['previous_format_bytes_mean']:,.0f} B); client check "
            f"{r['client_check_seconds_median'] * 1e3:.1f} ms, SHARE_KEYS "
            f"{r['client_share_keys_seconds_median'] * 1e3:.1f} ms; server whole graph "
            f"{r['server_graph_seconds_median'] * 1e3:.0f} ms, tree "
            f"{r['server_tree_seconds']:.2f} s, all parts {r['server_parts_seconds']:.2f} s; "
            f"peak RSS {r['peak_rss_mib']:.0f} MiB"
        )
    document: dict[str, Any] = {
        "meta": {
            "command": "python benchmarks/secagg_roster.py"
            + ("" if args.ns == [1000, 3000, 10000] else " --ns " + " ".join(map(str, args.ns))),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "note": "ADVERTISE_KEYS and SHARE_KEYS only (1-value vectors); 5 % of clients never "
            "advertise; shared machine, provisional; peak RSS is the whole process's (all N "
            "clients live in it)",
        },
        "results": rows,
    }
    if len(rows) > 1:
        ns = [r["clients"] for r in rows]
        document["exponents"] = {
            key: _exponent(ns, [r[key] for r in rows])
            for key in (
                "part_bytes_mean",
                "proof_bytes_mean",
                "previous_format_bytes_mean",
                "client_check_seconds_median",
                "server_graph_seconds_median",
                "client_share_keys_seconds_median",
                "server_parts_seconds",
            )
        }
        print("growth exponents:", json.dumps(document["exponents"], indent=1))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
