"""Issue 25's transport figure: ONE active SecAgg+ round at N clients, over Flower and in process.

The same round two ways, in one run:

1. ``flower``: privfed's Flower apps in Flower's simulation engine (Ray):
   :class:`privfed.flower.SecAggRound` (``graph="harary"``, ``mode="active"``,
   the server's copy of the identity registry, ``corrupted = n_C``) as the
   ServerApp, :func:`privfed.flower.secagg_app.sum_client_app` on the virtual
   nodes, each node's policy in code (:class:`privfed.flower.PolicyFiles`:
   its own Ed25519 key file by partition id, the registry, ``n_C``); the
   dropouts are nodes whose ClientApp raises at MASKED_INPUT;
2. ``in_process``: :func:`privfed.secagg.run_protocol` (clients one after
   another in this process, every message serialized) with the same N, k, t,
   n_C, ``graph="harary"``, ``mode="active"``, vector length and dropouts.

Parameters as ``benchmarks/secagg_scale.py`` picks them (``parameters(n)``:
the finder for 5 % corrupted, 5 % dropouts, semi-malicious server; ``n_C``
the most ``2t > k + 1 + n_C`` allows); 5 % of the clients (the same ones both
ways, ``secagg_scale``'s draw) drop before MASKED_INPUT.  Node inputs are
:func:`privfed.flower.secagg_app.demo_values` (partition ``p`` is client
``p + 1``) both ways, so both sums are checked against the same exact sum.

Per way: wall seconds of the round (Flower: from the round's first protocol
message -- after Ray's start and a hello round that starts every worker,
both printed separately -- to the sum), server seconds (the server's own
work: :attr:`SecAggRoundResult.server_seconds` summed, and the ServerApp
thread's CPU time; in process: the runner's server time), bytes up / down
per surviving client, and the exact-sum check.  The ratio Flower / in process
is the transport's overhead (the issue's goal: at most 2x).

``--loopback`` adds a diagnostic third way: the same Flower code (SecAggRound,
the ClientApp, the policies, ``Context.state`` between messages) on a Grid
double that calls the ClientApp in this process, without Ray -- it splits the
overhead into privfed's Flower layer and Flower's engine.

Ray runs with ``--cpus`` CPUs (default 2) and one CPU per ClientApp.  Writes
``benchmarks/results/secagg_flower_scale.json`` (``--output``) and prints a
summary.  On a shared machine the timings are provisional; the ratio,
measured in the same run, is the figure.

Usage::

    python benchmarks/secagg_flower_scale.py                          # N=1000, 83,850 values
    python benchmarks/secagg_flower_scale.py --clients 50 --length 1000 --output /tmp/x.json
    python benchmarks/secagg_flower_scale.py --loopback --skip-flower --output /tmp/lb.json
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from secagg_scale import PAYLOAD, _bytes_down, parameters

RESULTS = Path(__file__).resolve().parent / "results"
OUTPUT = RESULTS / "secagg_flower_scale.json"


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def dropped_partitions(n: int, seed: int = 0) -> list[int]:
    """``secagg_scale``'s draw: ``n // 20`` partitions (0-based) dropping before MASKED_INPUT."""
    rng = np.random.default_rng(seed)
    return sorted(int(i) for i in rng.choice(n, size=n // 20, replace=False))


class DemoInputs(Sequence[np.ndarray]):
    """The nodes' demo inputs (partition ``i``, round 0), regenerated on demand."""

    def __init__(self, n: int, length: int) -> None:
        self._n, self._length = n, length

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        from privfed.flower.secagg_app import demo_values

        if not 0 <= index < self._n:
            raise IndexError(index)
        return demo_values(index, 0, self._length)


def run_in_process(
    n: int, k: int, t: int, nc: int, length: int, dropped: list[int]
) -> dict[str, Any]:
    from privfed.flower.secagg_app import expected_sum
    from privfed.secagg import Stage, run_protocol

    last = [0.0]

    def progress(event: Any) -> None:
        now = time.perf_counter()
        if event.finished or now - last[0] > 15:
            last[0] = now
            _log(f"  in process +{now - start:6.1f}s {event.stage} {event.done}/{event.total}")

    start = time.perf_counter()
    report = run_protocol(
        DemoInputs(n, length),
        threshold=t,
        dropouts={Stage.MASKED_INPUT: dropped},
        graph="harary",
        degree=k,
        mode="active",
        corrupted=nc,
        progress=progress,
    )
    wall = time.perf_counter() - start
    gone = set(dropped)
    expected = expected_sum([p for p in range(n) if p not in gone], 0, length)
    exact = bool(np.array_equal(report.total, expected))
    full = [c for c in report.clients if len(c.seconds) == len(report.stages)]
    down = _bytes_down(report)
    return {
        "wall_s": wall,
        "server_work_s": float(report.total_server_seconds),
        "server_seconds_per_stage": {s.name: v for s, v in report.server_seconds.items()},
        "mean_client_s": float(report.mean_client_seconds),
        "bytes_up_per_client": float(np.mean([c.total_bytes for c in full])),
        "bytes_down_per_client": float(sum(down.values())),
        "survivors": len(report.survivors),
        "committee_members": len(report.committee),
        "exact": exact,
    }


def _identities(n: int, nc: int) -> tuple[Path, Any]:
    """A throw-away folder with one Ed25519 key file per partition and the registry."""
    from privfed.flower.policy import write_identity_key
    from privfed.secagg import IdentityKey, IdentityRegistry

    folder = Path(tempfile.mkdtemp(prefix="privfed_flower_scale_"))
    keys = {p + 1: IdentityKey.generate() for p in range(n)}  # partition p enrolled as id p + 1
    registry = IdentityRegistry.of(keys, assumed_corrupted=nc)
    registry.save(folder / "registry.json")
    for cid, key in keys.items():
        write_identity_key(folder / f"node-{cid - 1}.key", key)
    return folder, registry


def _record(
    out: dict[str, Any],
    result: Any,
    mapping: Mapping[int, int],
    partitions: Mapping[int, int],
    length: int,
) -> None:
    """A SecAggRoundResult's figures into ``out`` (sum checked against the demo inputs)."""
    from privfed.flower.secagg_app import expected_sum
    from privfed.secagg.protocol.state import encode_config

    out["server_work_s"] = float(sum(result.server_seconds.values()))
    out["server_seconds_per_stage"] = {s.name: v for s, v in result.server_seconds.items()}
    out["stage_seconds"] = {s.name: v for s, v in result.seconds.items()}
    by_client = {cid: partitions[node] for node, cid in mapping.items()}
    survivors = [by_client[c] for c in result.survivors]
    out["exact"] = bool(np.array_equal(result.total, expected_sum(survivors, 0, length)))
    out["survivors"] = len(survivors)
    out["dropped_per_stage"] = {s.name: len(v) for s, v in result.dropped.items() if v}
    out["committee_size"] = result.config.committee_size
    out["bytes_up_per_client"] = float(
        np.mean([result.bytes_received[c] for c in result.survivors])
    )
    out["bytes_down_per_client"] = float(np.mean([result.bytes_sent[c] for c in result.survivors]))
    # Flower's down figure counts the round's config sent with ADVERTISE_KEYS (its ids;
    # the registry by its digest, as the server sends it); the in-process runner's counts
    # protocol messages only.
    out["config_bytes"] = len(encode_config(result.config, registry_by_digest=True))
    out["bytes_down_per_client_without_config"] = out["bytes_down_per_client"] - out["config_bytes"]


def run_flower(
    n: int, k: int, t: int, nc: int, length: int, dropped: list[int], cpus: int, timeout: float
) -> dict[str, Any]:
    from flwr.serverapp import ServerApp

    from privfed.flower import PolicyFiles, SecAggRound, hello, run_simulation, wait_for_nodes
    from privfed.flower.client import JournalIn
    from privfed.flower.secagg_app import sum_client_app
    from privfed.secagg import ClientIds, Stage

    folder, registry = _identities(n, nc)
    faults = {(0, p): (Stage.MASKED_INPUT, "raise") for p in dropped}
    out: dict[str, Any] = {}
    server = ServerApp()

    @server.main()
    def main(grid: Any, context: Any) -> None:
        nodes = wait_for_nodes(grid, n, timeout=timeout)
        out["ray_ready_s"] = time.perf_counter() - t0
        _log(f"  Ray ready after {out['ray_ready_s']:.1f} s; hello (starts every worker) ...")
        h0 = time.perf_counter()
        partitions = hello(grid, nodes, timeout=timeout, registry=registry)
        out["hello_s"] = time.perf_counter() - h0
        _log(f"  hello: {len(partitions)} nodes in {out['hello_s']:.1f} s; the round ...")
        mapping = ClientIds.from_partitions(partitions.values()).of_nodes(partitions)
        r0 = time.perf_counter()

        def progress(event: Any) -> None:
            seconds = time.perf_counter() - r0
            _log(f"  flower +{seconds:6.1f}s {event.stage} {event.done}/{event.total}")

        flow = SecAggRound(
            threshold=t,
            vector_length=length,
            graph="harary",
            degree=k,
            timeout=timeout,
            config_fields={"mode": "active", "identities": registry, "corrupted": nc},
            progress=progress,
        )
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        result = flow.run(grid, mapping)
        out["wall_s"] = time.perf_counter() - wall0
        out["server_cpu_s"] = time.thread_time() - cpu0
        _record(out, result, mapping, partitions, length)

    client = sum_client_app(
        faults=faults,
        journal=JournalIn(folder / "journals"),
        policy=PolicyFiles(folder, corrupted=nc),
    )
    t0 = time.perf_counter()
    try:
        run_simulation(server, client, num_supernodes=n, num_cpus=cpus, client_cpus=1.0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the benchmark's throw-away identity keys
    out["total_s"] = time.perf_counter() - t0
    return out


class _Loopback:
    """A Grid double: each message delivered to the ClientApp in this process (no Ray).

    One Context per node (``Context.state`` persists, as on a SuperNode); a
    raising ClientApp becomes an error reply, as in Flower.  Used by
    ``--loopback``: privfed's Flower app layer without Flower's engine.
    """

    def __init__(self, app: Any, n: int, first_node_id: int = 1001) -> None:
        from flwr.app import Context, RecordDict
        from flwr.supercore.task_identity import TaskIdentity

        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
        self.app = app
        self.contexts = {
            first_node_id + i: Context(
                run_id=1,
                node_id=first_node_id + i,
                node_config={"partition-id": i, "num-partitions": n},
                state=RecordDict(),
                run_config={},
            )
            for i in range(n)
        }

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> list[Any]:
        from flwr.app import Error, Message

        replies = []
        for message in messages:
            node = message.metadata.dst_node_id
            try:
                reply = self.app(message, self.contexts[node])
            except Exception as exc:
                reply = Message(
                    Error(code=1, reason=f"{type(exc).__name__}: {exc}"), reply_to=message
                )
            reply.metadata.__dict__["_src_node_id"] = node
            replies.append(reply)
        return replies


def run_loopback(
    n: int, k: int, t: int, nc: int, length: int, dropped: list[int]
) -> dict[str, Any]:
    """The Flower round's code (SecAggRound, the ClientApp, policies) without Ray."""
    from privfed.flower import PolicyFiles, SecAggRound, hello
    from privfed.flower.client import JournalIn
    from privfed.flower.secagg_app import sum_client_app
    from privfed.secagg import ClientIds, Stage

    folder, registry = _identities(n, nc)
    faults = {(0, p): (Stage.MASKED_INPUT, "raise") for p in dropped}
    out: dict[str, Any] = {}
    try:
        client = sum_client_app(
            faults=faults,
            journal=JournalIn(folder / "journals"),
            policy=PolicyFiles(folder, corrupted=nc),
        )
        grid: Any = _Loopback(client, n)
        h0 = time.perf_counter()
        partitions = hello(grid, grid.get_node_ids(), registry=registry)
        out["hello_s"] = time.perf_counter() - h0
        mapping = ClientIds.from_partitions(partitions.values()).of_nodes(partitions)
        r0 = time.perf_counter()

        def progress(event: Any) -> None:
            seconds = time.perf_counter() - r0
            _log(f"  loopback +{seconds:6.1f}s {event.stage} {event.done}/{event.total}")

        flow = SecAggRound(
            threshold=t,
            vector_length=length,
            graph="harary",
            degree=k,
            timeout=3600.0,
            config_fields={"mode": "active", "identities": registry, "corrupted": nc},
            progress=progress,
        )
        wall0 = time.perf_counter()
        result = flow.run(grid, mapping)
        out["wall_s"] = time.perf_counter() - wall0
        _record(out, result, mapping, partitions, length)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--length", type=int, default=PAYLOAD, help="values per vector")
    parser.add_argument("--cpus", type=int, default=2, help="Ray CPUs")
    parser.add_argument("--timeout", type=float, default=1800.0, help="stage timeout, s")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--skip-in-process", action="store_true")
    parser.add_argument("--skip-flower", action="store_true")
    parser.add_argument(
        "--loopback",
        action="store_true",
        help="also the Flower round's code in this process without Ray (a diagnostic)",
    )
    args = parser.parse_args(argv)
    n, length = args.clients, args.length
    k, t, nc = parameters(n)
    dropped = dropped_partitions(n)
    logging.getLogger("flwr").setLevel(logging.ERROR)
    _log(
        f"N={n}, harary k={k}, t={t}, n_C={nc}, active, {length:,} values, "
        f"{len(dropped)} dropping before MASKED_INPUT, Ray CPUs {args.cpus}"
    )
    results: dict[str, Any] = {
        "meta": {
            "command": "python benchmarks/secagg_flower_scale.py " + " ".join(argv or sys.argv[1:]),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": f"{platform.machine()} {platform.node()}",
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "ray_cpus": args.cpus,
            "note": (
                "shared 2-core machine (other jobs running; load averages below): timings "
                "provisional, the ratio (same run) is the figure"
            ),
        },
        "clients": n,
        "degree": k,
        "threshold": t,
        "corrupted": nc,
        "vector_length": length,
        "full_vector_length": PAYLOAD,
        "dropped_before_masked_input": len(dropped),
        "load_average": {"start": list(os.getloadavg())},
    }
    if not args.skip_in_process:
        _log("in process (run_protocol) ...")
        results["in_process"] = run_in_process(n, k, t, nc, length, dropped)
        _log(f"  {results['in_process']}")
        results["load_average"]["after_in_process"] = list(os.getloadavg())
        gc.collect()
    if args.loopback:
        _log("the Flower round's code without Ray (loopback grid) ...")
        results["loopback"] = run_loopback(n, k, t, nc, length, dropped)
        _log(f"  {results['loopback']}")
        results["load_average"]["after_loopback"] = list(os.getloadavg())
        gc.collect()
    if not args.skip_flower:
        _log("over Flower's simulation engine ...")
        results["flower"] = run_flower(n, k, t, nc, length, dropped, args.cpus, args.timeout)
        _log(f"  {results['flower']}")
        results["load_average"]["after_flower"] = list(os.getloadavg())

    fl, ip, lb = results.get("flower"), results.get("in_process"), results.get("loopback")
    print()
    print(f"N={n}, k={k}, t={t}, n_C={nc}, {length:,} values, {len(dropped)} dropouts")
    print(f"{'':14}{'wall s':>10}{'server s':>10}{'up B/client':>14}{'down B/client':>15}  exact")
    ways = (("in process", ip), ("loopback", lb), ("Flower", fl))
    rows = [(name, r) for name, r in ways if r is not None]
    for name, r in rows:
        print(
            f"{name:14}{r['wall_s']:10.2f}{r['server_work_s']:10.2f}"
            f"{r['bytes_up_per_client']:14,.0f}{r['bytes_down_per_client']:15,.0f}  {r['exact']}"
        )
    ratios: dict[str, float] = {}
    if fl is not None:
        ray, hi = fl["ray_ready_s"], fl["hello_s"]
        print(f"Flower: Ray start {ray:.1f} s, hello {hi:.1f} s (not in the round's wall)")
    if fl is not None and ip is not None:
        ratios["flower_over_in_process_wall"] = fl["wall_s"] / ip["wall_s"]
        ratios["flower_over_in_process_server_work"] = fl["server_work_s"] / ip["server_work_s"]
        ratios["flower_over_in_process_bytes_up"] = (
            fl["bytes_up_per_client"] / ip["bytes_up_per_client"]
        )
        ratios["goal_wall_ratio"] = 2.0
    if lb is not None and ip is not None:
        ratios["loopback_over_in_process_wall"] = lb["wall_s"] / ip["wall_s"]
    if lb is not None and fl is not None:
        ratios["flower_over_loopback_wall"] = fl["wall_s"] / lb["wall_s"]
    if ratios:
        results["ratios"] = ratios
    for key, value in ratios.items():
        print(f"  {key}: {value:.2f}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    _log(f"wrote {args.output}")
    return 0 if all(r["exact"] for _, r in rows) else 1


if __name__ == "__main__":
    threading.current_thread().name = "benchmark"
    sys.exit(main())
