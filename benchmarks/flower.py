"""privfed's secure aggregation over Flower, side by side with Flower's own SecAgg+.

In ONE run, the same job -- N clients, complete graph, threshold t, a vector of
``--length`` values per client, 10 % of the clients dropping before their
masked input -- three ways:

1. ``privfed-flower``: privfed's Flower apps (:class:`privfed.flower.SecAggRound`
   + :func:`privfed.flower.add_secagg_handlers`) in Flower's simulation engine;
   dropouts are nodes whose ClientApp raises at MASKED_INPUT;
2. ``flower-secaggplus``: Flower 1.42's own ``SecAggPlusWorkflow``
   (``num_shares = N``, ``reconstruction_threshold = t``) inside
   ``DefaultWorkflow`` with a FedAvg strategy and ``secaggplus_mod`` on a
   NumPyClient ClientApp, in the same simulation engine; dropouts are nodes whose
   ClientApp raises at ``collect_masked_vectors``;
3. ``privfed-in-process``: :func:`privfed.secagg.run_protocol` for the same job
   (clients one after another in this process): the baseline of the
   transport's overhead.

Per way: end-to-end wall seconds of the aggregation (the ServerApp from its
first protocol message to the sum, Ray's start excluded), server seconds (CPU
time of the thread running the ServerApp, i.e. the server's own work; for the
in-process runner the runner's server time), and bytes each client uploads
(payload bytes; Flower's figure counts its masked vector, int64, and its
ConfigRecord payloads).  Ratios: Flower's SecAgg+ over privfed-on-Flower (end
to end and server), privfed-on-Flower over in-process (transport overhead).

Flower runs with ``--cpus`` Ray CPUs and one CPU per ClientApp; Ray's start
(10-20 s) is printed separately.  Writes ``benchmarks/results/flower.json``
and ``flower.png``.  ``--quick`` runs N=20 with 8,385 values in about a
minute.  N=1000 (SecAgg+ graphs) is not run by this script: Flower's SecAgg+
at N=1000 needs far more than the time budget of one run on two cores.

Usage::

    python benchmarks/flower.py            # N=100, t=51, 83,850 values
    python benchmarks/flower.py --quick
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _dropped(n: int, fraction: float) -> list[int]:
    rng = np.random.default_rng(20251)
    return sorted(int(i) for i in rng.choice(n, size=round(fraction * n), replace=False))


def run_privfed_flower(
    n: int, t: int, length: int, dropped: list[int], cpus: int
) -> dict[str, Any]:
    from privfed.flower import SecAggRound, run_simulation, wait_for_nodes
    from privfed.flower.secagg_app import expected_sum, sum_client_app
    from privfed.secagg import Stage

    faults = {(0, p): (Stage.MASKED_INPUT, "raise") for p in dropped}
    out: dict[str, Any] = {}
    from flwr.serverapp import ServerApp

    server = ServerApp()

    @server.main()
    def main(grid: Any, context: Any) -> None:
        nodes = wait_for_nodes(grid, n, timeout=600)
        out["ray_ready_s"] = time.perf_counter() - t0
        # Warm every worker (imports) outside the timed region, as Flower's run below gets too.
        from privfed.flower import hello

        partitions = hello(grid, nodes, timeout=600)
        flow = SecAggRound(threshold=t, vector_length=length, timeout=600)
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        result = flow.run(grid, {node: pid + 1 for node, pid in partitions.items()})
        out["wall_s"] = time.perf_counter() - wall0
        out["server_cpu_s"] = time.thread_time() - cpu0
        out["server_work_s"] = float(sum(result.server_seconds.values()))
        out["stage_seconds"] = {s.name: v for s, v in result.seconds.items()}
        survivors = [c - 1 for c in result.survivors]
        out["exact"] = bool(np.array_equal(result.total, expected_sum(survivors, 0, length)))
        out["survivors"] = len(survivors)
        up = [result.bytes_received[c] for c in result.survivors]
        out["bytes_up_per_client"] = float(np.mean(up))
        out["bytes_down_per_client"] = float(
            np.mean([result.bytes_sent[c] for c in result.survivors])
        )

    t0 = time.perf_counter()
    run_simulation(server, sum_client_app(faults=faults), num_supernodes=n, num_cpus=cpus)
    out["total_s"] = time.perf_counter() - t0
    return out


class _CountingGrid:
    """Delegates to a Grid, counting each node's reply payload bytes."""

    def __init__(self, grid: Any) -> None:
        self._grid = grid
        self.bytes_up: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> Any:
        from privfed.flower._wire import content_bytes

        replies = list(self._grid.send_and_receive(messages, timeout=timeout))
        for reply in replies:
            if not reply.has_error():
                node = int(reply.metadata.src_node_id)
                self.bytes_up[node] = self.bytes_up.get(node, 0) + content_bytes(reply.content)
        return replies


def run_flower_secaggplus(
    n: int, t: int, length: int, dropped: list[int], cpus: int
) -> dict[str, Any]:
    from flwr.app import Context, Message
    from flwr.client import NumPyClient
    from flwr.client.mod import secaggplus_mod
    from flwr.clientapp import ClientApp
    from flwr.common.secure_aggregation.secaggplus_constants import (
        RECORD_KEY_CONFIGS,
        Key,
        Stage,
    )
    from flwr.server import ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
    from flwr.serverapp import ServerApp

    from privfed.flower import run_simulation, wait_for_nodes

    drop = frozenset(dropped)

    class Client(NumPyClient):  # type: ignore[misc]
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def fit(self, parameters: Any, config: Any) -> Any:
            rng = np.random.default_rng([0x5EC, self.pid])
            return [rng.uniform(-1, 1, size=length).astype(np.float32)], 1, {}

    def client_fn(context: Context) -> Any:
        return Client(int(context.node_config["partition-id"])).to_client()

    def drop_mod(msg: Message, ctx: Context, call_next: Any) -> Message:
        configs = msg.content.config_records.get(RECORD_KEY_CONFIGS)
        stage = None if configs is None else configs.get(Key.STAGE)
        if stage == Stage.COLLECT_MASKED_VECTORS and int(ctx.node_config["partition-id"]) in drop:
            raise RuntimeError("dropout before the masked input")
        return call_next(msg, ctx)

    out: dict[str, Any] = {}
    server = ServerApp()

    @server.main()
    def main(grid: Any, context: Context) -> None:
        from flwr.common import ndarrays_to_parameters
        from flwr.server import LegacyContext

        wait_for_nodes(grid, n, timeout=600)
        out["ray_ready_s"] = time.perf_counter() - t0
        strategy = FedAvg(
            fraction_fit=1.0,
            fraction_evaluate=0.0,
            min_fit_clients=n - len(drop),
            min_available_clients=n,
            initial_parameters=ndarrays_to_parameters([np.zeros(length, np.float32)]),
        )
        legacy = LegacyContext(
            context=context, config=ServerConfig(num_rounds=1), strategy=strategy
        )
        workflow = DefaultWorkflow(
            fit_workflow=SecAggPlusWorkflow(num_shares=n, reconstruction_threshold=t, timeout=3600)
        )
        counting = _CountingGrid(grid)
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        workflow(counting, legacy)  # type: ignore[arg-type]
        out["wall_s"] = time.perf_counter() - wall0
        out["server_cpu_s"] = time.thread_time() - cpu0
        # Clients that finished the round (the dropped ones sent less).
        full = sorted(counting.bytes_up.values())[len(drop) :]
        out["bytes_up_per_client"] = float(np.mean(full)) if full else 0.0

    app = ClientApp(client_fn=client_fn, mods=[drop_mod, secaggplus_mod])
    t0 = time.perf_counter()
    run_simulation(server, app, num_supernodes=n, num_cpus=cpus)
    out["total_s"] = time.perf_counter() - t0
    return out


def run_in_process(n: int, t: int, length: int, dropped: list[int]) -> dict[str, Any]:
    from privfed.flower.secagg_app import demo_values
    from privfed.secagg import Stage, run_protocol

    inputs = [demo_values(p, 0, length) for p in range(n)]
    start = time.perf_counter()
    report = run_protocol(inputs, threshold=t, dropouts={Stage.MASKED_INPUT: dropped})
    wall = time.perf_counter() - start
    full = [c for c in report.clients if Stage.UNMASKING in c.bytes_sent]
    return {
        "wall_s": wall,
        "server_work_s": report.total_server_seconds,
        "mean_client_s": report.mean_client_seconds,
        "bytes_up_per_client": float(np.mean([c.total_bytes for c in full])),
        "survivors": len(report.survivors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=20, 8,385 values")
    parser.add_argument("--clients", type=int, default=None)
    parser.add_argument("--length", type=int, default=None)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--skip-flower-secaggplus", action="store_true")
    args = parser.parse_args()
    n = args.clients or (20 if args.quick else 100)
    length = args.length or (8_385 if args.quick else 83_850)
    t = n // 2 + 1
    dropped = _dropped(n, 0.10)
    logging.getLogger("flwr").setLevel(logging.ERROR)
    _log(f"N={n}, complete graph, t={t}, {length} values, {len(dropped)} dropping before input")

    results: dict[str, Any] = {
        "clients": n,
        "threshold": t,
        "vector_length": length,
        "dropped_before_masked_input": len(dropped),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "ray_cpus": args.cpus,
    }
    # Other processes on the machine slow every way down (Flower's most, it runs longest).
    load: dict[str, list[float]] = {"start": list(os.getloadavg())}
    results["load_average"] = load
    _log("privfed, in process (run_protocol) ...")
    results["privfed_in_process"] = run_in_process(n, t, length, dropped)
    _log(f"  {results['privfed_in_process']}")
    _log("privfed over Flower's simulation engine ...")
    results["privfed_flower"] = run_privfed_flower(n, t, length, dropped, args.cpus)
    _log(f"  {results['privfed_flower']}")
    load["after_privfed_flower"] = list(os.getloadavg())
    if not args.skip_flower_secaggplus:
        _log("Flower's own SecAgg+ (num_shares=N) in the same engine (minutes) ...")
        results["flower_secaggplus"] = run_flower_secaggplus(n, t, length, dropped, args.cpus)
        _log(f"  {results['flower_secaggplus']}")
        load["after_flower_secaggplus"] = list(os.getloadavg())

    pf, ip = results["privfed_flower"], results["privfed_in_process"]
    ratios: dict[str, float] = {
        "transport_overhead_wall": pf["wall_s"] / ip["wall_s"],
    }
    fl = results.get("flower_secaggplus")
    if fl is not None:
        ratios["flower_over_privfed_wall"] = fl["wall_s"] / pf["wall_s"]
        ratios["flower_over_privfed_server_cpu"] = fl["server_cpu_s"] / pf["server_cpu_s"]
        ratios["flower_over_privfed_upload"] = fl["bytes_up_per_client"] / pf["bytes_up_per_client"]
    results["ratios"] = ratios

    print()
    print(f"{'':24}{'wall s':>10}{'server s':>10}{'upload B/client':>18}")
    print(f"{'privfed in process':24}{ip['wall_s']:10.2f}{ip['server_work_s']:10.2f}"
          f"{ip['bytes_up_per_client']:18,.0f}")  # fmt: skip
    print(f"{'privfed on Flower':24}{pf['wall_s']:10.2f}{pf['server_cpu_s']:10.2f}"
          f"{pf['bytes_up_per_client']:18,.0f}")  # fmt: skip
    if fl is not None:
        print(f"{'Flower SecAgg+':24}{fl['wall_s']:10.2f}{fl['server_cpu_s']:10.2f}"
              f"{fl['bytes_up_per_client']:18,.0f}")  # fmt: skip
    for key, value in ratios.items():
        print(f"  {key}: {value:.2f}x")

    RESULTS.mkdir(exist_ok=True)
    name = "flower_quick" if args.quick else "flower"
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        labels = ["privfed\nin process", "privfed\non Flower"]
        walls = [ip["wall_s"], pf["wall_s"]]
        servers = [ip["server_work_s"], pf["server_cpu_s"]]
        if fl is not None:
            labels.append("Flower\nSecAgg+")
            walls.append(fl["wall_s"])
            servers.append(fl["server_cpu_s"])
        x = np.arange(len(labels))
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(x - 0.2, walls, 0.4, label="end to end (s)")
        ax.bar(x + 0.2, servers, 0.4, label="server (s)")
        ax.set_xticks(x, labels)
        ax.set_yscale("log")
        ax.set_title(f"Secure aggregation, N={n}, t={t}, {length:,} values, 10% dropouts")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / f"{name}.png", dpi=120)
    except ImportError:  # pragma: no cover -- plots are optional
        pass
    _log(f"wrote {RESULTS / (name + '.json')}")


if __name__ == "__main__":
    threading.current_thread().name = "benchmark"
    main()
