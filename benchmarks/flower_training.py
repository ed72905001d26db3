"""Federated training on Flower: no secure aggregation, Flower's SecAgg+, privfed -- one run.

The same Flower training app (a ``NumPyClient`` training a small NumPy MLP on
the bundled scikit-learn digits, or on ``--npz PATH``; legacy ``FedAvg``
inside ``DefaultWorkflow``), the same seeds and the same starting model, in
Flower's simulation engine (Ray), three ways per node count N:

1. ``none``: no secure aggregation (Flower's default fit workflow);
2. ``privfed``: ``privfed.flower.secagg_mod`` on the ClientApp and
   ``DefaultWorkflow(fit_workflow=privfed.flower.SecAggWorkflow(...))``
   (semi-honest; the active mode runs only if ``SecAggWorkflow`` takes a
   ``mode`` argument, otherwise a note says it was skipped);
3. ``flower-secaggplus``: Flower's ``secaggplus_mod`` and
   ``DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(...))``,

each secure way on the complete graph (``num_shares = N``) and on a SecAgg+
graph (``num_shares = k < N``), with ``reconstruction_threshold`` a majority of
the neighbourhood and Flower's default clipping/quantization/max-weight for
both.  Every arm runs ``--rounds`` rounds from the same initial model.  One
ClientApp serves all arms: ``mods=[secagg_mod, <secaggplus_mod for messages
carrying Flower's SecAgg+ record>]`` (each mod leaves the other's messages
alone), so one Ray start per N serves every arm.

Per round: wall seconds of the fit round (the ``fit_workflow`` call, from the
first message to the new global model; evaluation excluded), CPU seconds of
the ServerApp thread (``server_cpu_s``) and of the whole server process
(``server_process_cpu_s``: the simulation engine's threads and Ray's driver
too), bytes up/down per node (protobuf size of each message's RecordDict, what
a deployment sends; the counting's own time is subtracted), the centralized
test accuracy after the round, and how far the new global model is from plain
FedAvg of the same clients' updates (``aggregate_error``, max abs difference,
and in grid steps ``2 * clipping_range / quantization_range``).  Per stage
(each ``send_and_receive``): wall seconds, and the ClientApps' own seconds
(measured inside the Ray actor by an outer mod) so the engine's share is
visible.

In the same run, the aggregation in process: the same ClientApp and workflows
driven over an in-process grid (``LoopbackGrid``, as in
``tests/flower/conftest.py``: no Ray, nodes one after another) and
``privfed.secagg.run_protocol`` for the same vector length, N and graph.

Each N runs in a child process (one Ray start) with a hard wall limit; an arm
stops starting rounds once its budget (``--arm-timeout``) would be exceeded,
and a round or arm that did not finish is recorded as such, never estimated.

``--profile`` adds one extra privfed round (complete graph, largest N) under
cProfile in the ServerApp thread, kept out of the figures.  The whole server
process (the simulation engine's threads, Ray's driver) is profiled with
py-spy on a child run, and the summary merged into the JSON::

    py-spy record --subprocesses -r 40 -f raw -o privfed100.txt -- \
        python benchmarks/flower_training.py --child --nodes 100 --arms none,privfed \
        --graphs complete --rounds 2 --skip-in-process --no-active
    # (py-spy may wait for Ray processes that outlive the child: Ctrl-C it once the
    # child has printed its "simulation" line; it writes the file then)
    python benchmarks/flower_training.py --merge-pyspy privfed100.txt --pyspy-note "..."

Usage::

    python benchmarks/flower_training.py --profile            # N = 10, 50, 100, 3 rounds
    python benchmarks/flower_training.py --quick              # N = 10, 1 round (smoke check)
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import inspect
import io
import json
import logging
import math
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_OUT = RESULTS / "flower_training.json"
QUICK_OUT = RESULTS / "flower_training_quick.json"
SCHEMA = "privfed-benchmark-flower-training/1"

ARMS = ("none", "privfed", "flower-secaggplus")
GRAPHS = ("complete", "secaggplus")
#: Flower's SecAggPlusWorkflow defaults, given to both secure arms.
CLIPPING_RANGE = 8.0
QUANTIZATION_RANGE = 2**22
MAX_WEIGHT = 1000.0
STEP = 2 * CLIPPING_RANGE / QUANTIZATION_RANGE
#: Where the outer timing mod puts the ClientApp's own seconds (removed before counting).
CLOCK_RECORD = "bench-clock"

Params = list[npt.NDArray[np.float32]]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- graphs


def secaggplus_shares(n: int) -> int:
    """``num_shares`` of the SecAgg+ graph at N nodes: ``2 ceil(log2 N) + 1``, below N."""
    return min(2 * math.ceil(math.log2(n)) + 1, n - 1)


def graph_parameters(n: int, graph: str) -> tuple[int, int]:
    """(num_shares, reconstruction_threshold) of ``graph`` at N nodes (a majority)."""
    k = n if graph == "complete" else secaggplus_shares(n)
    return k, k // 2 + 1


# --------------------------------------------------------------------------- the task


@dataclass(frozen=True)
class Task:
    """Data, model and local training: what every arm shares (small: shipped per message)."""

    nodes: int
    hidden: int = 32
    epochs: int = 20
    batch: int = 8
    lr: float = 0.3
    seed: int = 2026
    npz: str | None = None

    def data(self) -> tuple[npt.NDArray[np.float64], ...]:
        """(x_train, y_train, x_test, y_test), cached per process."""
        cache = _process_cache()
        key = ("data", self.npz, self.seed)
        if key not in cache:
            cache[key] = _load_data(self.npz, self.seed)
        return cache[key]  # type: ignore[no-any-return]

    @property
    def features(self) -> int:
        return int(self.data()[0].shape[1])

    @property
    def classes(self) -> int:
        return int(max(self.data()[1].max(), self.data()[3].max()) + 1)

    def partition(self, pid: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        x, y = self.data()[:2]
        order = np.random.default_rng([self.seed, 1]).permutation(len(y))[pid :: self.nodes]
        return x[order], y[order].astype(np.int64)

    def examples(self, pid: int) -> int:
        return len(range(pid, len(self.data()[1]), self.nodes))

    def initial(self) -> Params:
        rng = np.random.default_rng([self.seed, 2])
        d, h, c = self.features, self.hidden, self.classes
        return [
            (rng.normal(size=(d, h)) / np.sqrt(d)).astype(np.float32),
            np.zeros(h, np.float32),
            (rng.normal(size=(h, c)) / np.sqrt(h)).astype(np.float32),
            np.zeros(c, np.float32),
        ]

    def length(self) -> int:
        return sum(int(p.size) for p in self.initial())

    def fit(self, pid: int, server_round: int, params: Sequence[np.ndarray]) -> Params:
        """Local SGD, deterministic in (seed, pid, round, params)."""
        x, y = self.partition(pid)
        w1, b1, w2, b2 = (np.asarray(p, np.float64) for p in params)
        rng = np.random.default_rng([self.seed, 3, pid, server_round])
        onehot = np.eye(self.classes)[y]
        for _ in range(self.epochs):
            order = rng.permutation(len(y))
            for start in range(0, len(y), self.batch):
                idx = order[start : start + self.batch]
                xb, tb = x[idx], onehot[idx]
                hid = np.maximum(xb @ w1 + b1, 0.0)
                logits = hid @ w2 + b2
                prob = np.exp(logits - logits.max(axis=1, keepdims=True))
                prob /= prob.sum(axis=1, keepdims=True)
                g_logits = (prob - tb) / len(idx)
                g_w2, g_b2 = hid.T @ g_logits, g_logits.sum(axis=0)
                g_hid = (g_logits @ w2.T) * (hid > 0)
                g_w1, g_b1 = xb.T @ g_hid, g_hid.sum(axis=0)
                w1, b1 = w1 - self.lr * g_w1, b1 - self.lr * g_b1
                w2, b2 = w2 - self.lr * g_w2, b2 - self.lr * g_b2
        return [p.astype(np.float32) for p in (w1, b1, w2, b2)]

    def accuracy(self, params: Sequence[np.ndarray]) -> float:
        x, y = self.data()[2:]
        w1, b1, w2, b2 = (np.asarray(p, np.float64) for p in params)
        logits = np.maximum(x @ w1 + b1, 0.0) @ w2 + b2
        return float(np.mean(logits.argmax(axis=1) == y))

    def fedavg(self, server_round: int, params: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Plain FedAvg (float64) of every node's update from ``params``: the reference."""
        total = [np.zeros(p.shape, np.float64) for p in params]
        weight = 0.0
        for pid in range(self.nodes):
            w = float(min(self.examples(pid), MAX_WEIGHT))
            for acc, update in zip(total, self.fit(pid, server_round, params), strict=True):
                acc += w * update.astype(np.float64)
            weight += w
        return [t / weight for t in total]


def _process_cache() -> dict[Any, Any]:
    """A dict that lives as long as the process (this module is shipped to Ray by value)."""
    module = sys.modules.get("_privfed_bench_flower_training_cache")
    if module is None:
        import types

        module = types.ModuleType("_privfed_bench_flower_training_cache")
        module.cache = {}  # type: ignore[attr-defined]
        sys.modules[module.__name__] = module
    return module.cache  # type: ignore[no-any-return]


def _load_data(npz: str | None, seed: int) -> tuple[npt.NDArray[np.float64], ...]:
    if npz is None:
        from sklearn.datasets import load_digits

        digits = load_digits()
        x, y = digits.data / 16.0, digits.target.astype(np.int64)
    else:
        with np.load(npz) as f:
            if "x_train" in f:
                xs = [f["x_train"], f["x_test"]]
                ys = [f["y_train"], f["y_test"]]
                x = np.concatenate([a.reshape(len(a), -1) for a in xs]).astype(np.float64)
                y = np.concatenate(ys).astype(np.int64)
            else:
                x = f["x"].reshape(len(f["x"]), -1).astype(np.float64)
                y = f["y"].astype(np.int64)
        if x.max() > 1.0:
            x = x / x.max()
    order = np.random.default_rng([seed, 0]).permutation(len(y))
    cut = int(0.8 * len(y))
    train, test = order[:cut], order[cut:]
    return x[train], y[train], x[test], y[test]


# --------------------------------------------------------------------------- the ClientApp


#: Seconds of the train handler in the current ClientApp call (one Ray actor runs one at a time).
_FIT_SECONDS = [0.0]


class MLPClient:
    """The NumPyClient of every arm (``fit`` only; evaluation is centralized)."""

    def __init__(self, task: Task, pid: int) -> None:
        self.task = task
        self.pid = pid

    def fit(self, parameters: Any, config: Any) -> Any:
        start = time.perf_counter()
        updated = self.task.fit(self.pid, int(config["server-round"]), parameters)
        _FIT_SECONDS[0] += time.perf_counter() - start
        return updated, self.task.examples(self.pid), {}


def client_fn(task: Task, context: Any) -> Any:
    from flwr.client import NumPyClient

    client = type("MLPNumPyClient", (MLPClient, NumPyClient), {})(
        task, int(context.node_config["partition-id"])
    )
    return client.to_client()


def flower_secaggplus(msg: Any, ctxt: Any, call_next: Any) -> Any:
    """Flower's ``secaggplus_mod`` for the messages of its workflow (it fails on others)."""
    from flwr.client.mod import secaggplus_mod
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS

    if msg.has_content() and RECORD_KEY_CONFIGS in msg.content.config_records:
        return secaggplus_mod(msg, ctxt, call_next)
    return call_next(msg, ctxt)


def clock(msg: Any, ctxt: Any, call_next: Any) -> Any:
    """The ClientApp's own seconds, in a record the server removes before counting."""
    from flwr.app import ConfigRecord

    _FIT_SECONDS[0] = 0.0
    start, cpu = time.perf_counter(), time.process_time()
    reply = call_next(msg, ctxt)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if reply.has_content():
        reply.content.config_records[CLOCK_RECORD] = ConfigRecord(
            {"client_s": wall, "client_cpu_s": cpu, "fit_s": _FIT_SECONDS[0]}
        )
    return reply


class FilePolicy:
    """A node's policy from files in ``folder``: its identity key (by partition) and the registry.

    The benchmark's nodes all run one ClientApp, so the policy is the weakest
    mode they take part in (semi-honest, with an identity for active rounds);
    each node's key and the registry are read once per process and node.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, context: Any) -> Any:
        from privfed.flower.policy import NodePolicy, load_identity_key, load_registry

        pid = int(context.node_config["partition-id"])
        cache = _process_cache()
        key = ("policy", self.folder, pid)
        if key not in cache:
            folder = Path(self.folder)
            cache[key] = NodePolicy(
                identity=load_identity_key(folder / f"node-{pid + 1}.key"),
                registry=load_registry(folder / "registry.json"),
            )
        return cache[key]


def write_identities(folder: Path, n: int) -> Any:
    """Ed25519 identity keys of N nodes (registry ids 1..N, by partition) and their registry."""
    from privfed.flower.policy import write_identity_key
    from privfed.secagg import IdentityKey, IdentityRegistry

    folder.mkdir(parents=True, exist_ok=True)
    keys = {cid: IdentityKey.generate() for cid in range(1, n + 1)}
    registry = IdentityRegistry.of(keys, assumed_corrupted=0)
    registry.save(folder / "registry.json")
    for cid, key in keys.items():
        write_identity_key(folder / f"node-{cid}.key", key)
    return registry


def client_app(task: Task, journals: str, identities: str | None = None) -> Any:
    """One ClientApp for every arm: timing mod, privfed's mod, Flower's mod (its messages only).

    Built from module-level functions: when this module is importable on the
    Ray workers (the child process puts it on ``PYTHONPATH``), Ray ships the
    app by reference, as ``flwr run`` loads an app, not a pickled script.
    """
    import functools

    from flwr.clientapp import ClientApp

    from privfed.flower import SecAggMod
    from privfed.flower.client import JournalIn

    options: dict[str, Any] = {} if identities is None else {"policy": FilePolicy(identities)}
    if "allow_plain_train" in inspect.signature(SecAggMod.__init__).parameters:
        options["allow_plain_train"] = True  # the plain arm and Flower's arms use this app too
    privfed_mod = SecAggMod(journal=JournalIn(journals), **options)
    return ClientApp(
        client_fn=functools.partial(client_fn, task), mods=[clock, privfed_mod, flower_secaggplus]
    )


# --------------------------------------------------------------------------- measuring


def wire_bytes(content: Any) -> int:
    """Bytes of ``content`` (a RecordDict) as Flower serializes it for the network."""
    from flwr.common.serde import recorddict_to_proto

    return int(recorddict_to_proto(content).ByteSize())


class CountingGrid:
    """Delegates to a Grid; counts bytes per node and times each stage (its own time kept apart)."""

    def __init__(self, grid: Any) -> None:
        self._grid = grid
        self.up: dict[int, int] = {}
        self.down: dict[int, int] = {}
        self.stages: list[dict[str, Any]] = []
        self.overhead_wall = 0.0
        self.overhead_cpu = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)

    def send_and_receive(self, messages: Iterable[Any], *, timeout: float | None = None) -> Any:
        batch = list(messages)
        w0, c0 = time.perf_counter(), time.thread_time()
        for m in batch:
            node = int(m.metadata.dst_node_id)
            self.down[node] = self.down.get(node, 0) + wire_bytes(m.content)
        w1, c1 = time.perf_counter(), time.thread_time()
        replies = list(self._grid.send_and_receive(batch, timeout=timeout))
        w2, c2 = time.perf_counter(), time.thread_time()
        clocks: list[Mapping[str, Any]] = []
        errors = 0
        for reply in replies:
            if reply.has_error():
                errors += 1
                continue
            clock = reply.content.config_records.pop(CLOCK_RECORD, None)
            if clock is not None:
                clocks.append(dict(clock))
            node = int(reply.metadata.src_node_id)
            self.up[node] = self.up.get(node, 0) + wire_bytes(reply.content)
        w3, c3 = time.perf_counter(), time.thread_time()
        self.overhead_wall += (w1 - w0) + (w3 - w2)
        self.overhead_cpu += (c1 - c0) + (c3 - c2)
        self.stages.append(
            {
                "messages": len(batch),
                "replies": len(replies),
                "errors": errors,
                "wall_s": w2 - w1,
                "clients_s_sum": float(sum(c["client_s"] for c in clocks)),
                "clients_cpu_s_sum": float(sum(c["client_cpu_s"] for c in clocks)),
                "clients_s_max": float(max((c["client_s"] for c in clocks), default=0.0)),
                "fit_s_sum": float(sum(c["fit_s"] for c in clocks)),
            }
        )
        return replies


@dataclass
class ArmSpec:
    arm: str
    graph: str
    engine: str  # "flower-simulation" or "in-process-loopback"
    nodes: int
    num_shares: int | None = None
    threshold: int | None = None
    mode: str | None = None

    @property
    def label(self) -> str:
        parts = [self.arm] + ([self.graph] if self.graph != "none" else [])
        parts += [self.mode] if self.mode else []
        return "/".join(parts) + ("" if self.engine == "flower-simulation" else " (in process)")


@dataclass
class ArmRecord:
    spec: ArmSpec
    rounds: list[dict[str, Any]] = field(default_factory=list)
    status: str = "running"
    note: str | None = None
    started: float = field(default_factory=time.perf_counter)

    def to_json(self) -> dict[str, Any]:
        done = [r for r in self.rounds if r.get("status") == "ok"]
        walls = sorted(r["wall_s"] for r in done)
        return {
            **asdict(self.spec),
            "status": self.status,
            "note": self.note,
            "rounds": self.rounds,
            "rounds_completed": len(done),
            "median_round_wall_s": walls[len(walls) // 2] if walls else None,
            "final_accuracy": done[-1]["accuracy"] if done else None,
        }


#: Arms started in this process (their protocol rounds are offset by 1000 each).
_ARM_COUNTER = [0]


class TimedFit:
    """A ``fit_workflow`` wrapper: times the inner workflow, counts bytes, keeps the budget."""

    def __init__(
        self,
        inner: Callable[[Any, Any], None],
        record: ArmRecord,
        *,
        budget_s: float,
        on_round: Callable[[ArmRecord, dict[str, Any]], None],
        profile_round: int | None = None,
    ) -> None:
        self.inner = inner
        self.record = record
        self.budget_s = budget_s
        self.on_round = on_round
        self.profile_round = profile_round
        self.profile: str | None = None
        self.pending: dict[str, Any] | None = None
        _ARM_COUNTER[0] += 1
        #: Added to the round the protocol sees (see :meth:`__call__`).
        self.offset = 1000 * _ARM_COUNTER[0]

    def __call__(self, grid: Any, context: Any) -> None:
        from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD
        from flwr.server.workflow.constant import Key as WorkflowKey

        cfg = context.state.config_records[MAIN_CONFIGS_RECORD]
        server_round = int(cfg[WorkflowKey.CURRENT_ROUND])
        elapsed = time.perf_counter() - self.record.started
        done = [r for r in self.record.rounds if r.get("status") == "ok"]
        expected = done[-1]["wall_s"] if done else 0.0
        if self.record.status != "running" or elapsed + expected > self.budget_s:
            if self.record.status == "running":
                self.record.status = "budget"
                self.record.note = (
                    f"stopped before round {server_round}: {elapsed:.0f} s spent, the last "
                    f"round took {expected:.0f} s, budget {self.budget_s:.0f} s"
                )
            entry = {"round": server_round, "status": "not run (arm budget)"}
            self.record.rounds.append(entry)
            self.on_round(self.record, entry)
            return
        counting = CountingGrid(grid)
        profiler = cProfile.Profile() if server_round == self.profile_round else None
        w0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        if profiler is not None:
            profiler.enable()
        # The protocol sees rounds offset per arm: a node contributes once per round of a
        # run, in increasing rounds (every arm shares one run); training seeds use `round`.
        cfg[WorkflowKey.CURRENT_ROUND] = self.offset + server_round
        try:
            self.inner(counting, context)
        finally:
            cfg[WorkflowKey.CURRENT_ROUND] = server_round
            if profiler is not None:
                profiler.disable()
        wall = time.perf_counter() - w0 - counting.overhead_wall
        cpu = time.thread_time() - c0 - counting.overhead_cpu
        pcpu = time.process_time() - p0 - counting.overhead_cpu
        if profiler is not None:
            self.profile = _profile_text(profiler)
        n = self.record.spec.nodes
        self.pending = {
            "round": server_round,
            "status": "ok",
            "wall_s": wall,
            "server_cpu_s": cpu,
            "server_process_cpu_s": pcpu,
            "bytes_up_per_node": sum(counting.up.values()) / n,
            "bytes_down_per_node": sum(counting.down.values()) / n,
            "nodes_replied": len(counting.up),
            "stages": counting.stages,
        }
        reports = getattr(self.inner, "reports", None)  # privfed's SecAggWorkflow
        if reports:
            last = reports[-1]
            self.pending["survivors"] = len(last.survivors)
            self.pending["skipped"] = last.skipped
            self.pending["privfed_stage_seconds"] = dict(last.seconds)


def _profile_text(profiler: cProfile.Profile) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(20)
    stats.sort_stats("cumulative").print_stats(30)
    return out.getvalue()


def profile_top(text: str, count: int = 12) -> list[dict[str, Any]]:
    """The first ``count`` rows of the tottime table of :func:`_profile_text`."""
    rows: list[dict[str, Any]] = []
    lines = iter(text.splitlines())
    for line in lines:
        if line.strip().startswith("ncalls"):
            break
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[1].replace(".", "", 1).isdigit():
            break
        rows.append(
            {
                "ncalls": parts[0],
                "tottime_s": float(parts[1]),
                "cumtime_s": float(parts[3]),
                "function": parts[5],
            }
        )
        if len(rows) == count:
            break
    return rows


def summarize_pyspy(path: Path, top: int = 15) -> dict[str, Any]:
    """Top items of a ``py-spy record --subprocesses -f raw`` profile of a child run.

    Samples are grouped by process (the server process running the
    simulation, Ray workers, Ray's own processes) and, in the server process,
    by thread (its outermost benchmark/Flower function) and by function
    (inclusive and self); imports are counted apart.
    """
    import collections
    import re

    by_process: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    per_thread: dict[str, collections.Counter[str]] = {}
    roots = (
        "add_messages_to_queue",
        "put_message_into_state",
        "worker (flwr",
        "server_th_with_start_checks",
        "_update_client_manager",
        "print_logs",
        "listen_error_messages",
        "<module> (flower_training",
    )
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        at = max(i for i, f in enumerate(frames) if f.startswith("process "))
        command, calls = frames[at], [re.sub(r":\d+\)$", ")", f) for f in frames[at + 1 :]]
        if "flower_training.py" in command:
            kind = "server process"
        elif "default_worker" in command or "ClientAppActor" in command:
            kind = "Ray workers"
        else:
            kind = "Ray's own processes"
        if any("_find_and_load" in f for f in calls):
            by_process[kind + " (imports)"] += count
            continue
        by_process[kind] += count
        if kind != "server process" or not calls:
            continue
        root = next((f for f in calls for r in roots if f.startswith(r) or r in f), calls[0])
        by_thread[root] += count
        own[calls[-1]] += count
        for f in set(calls):
            inclusive[f] += count
            per_thread.setdefault(root, collections.Counter())[f] += count
    return {
        "file": path.name,
        "samples_by_process": dict(by_process.most_common()),
        "server_process_by_thread": dict(by_thread.most_common(top)),
        "server_process_inclusive": dict(inclusive.most_common(top * 3)),
        "server_process_self": dict(own.most_common(top)),
        "server_process_threads_inclusive": {
            root: dict(counter.most_common(top)) for root, counter in per_thread.items()
        },
    }


# --------------------------------------------------------------------------- one arm


def run_arm(
    grid: Any,
    base: Any,
    spec: ArmSpec,
    task: Task,
    *,
    rounds: int,
    budget_s: float,
    on_round: Callable[[ArmRecord, dict[str, Any]], None],
    profile_round: int | None = None,
    registry: Any = None,
) -> tuple[ArmRecord, str | None]:
    """``rounds`` rounds of FedAvg under ``spec``'s secure aggregation, from the task's start."""
    from flwr.app import Context, RecordDict
    from flwr.common import ndarrays_to_parameters
    from flwr.server import ServerConfig
    from flwr.server.compat.legacy_context import LegacyContext
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
    from flwr.server.workflow.default_workflows import default_fit_workflow

    from privfed.flower import SecAggWorkflow

    record = ArmRecord(spec)
    state: dict[str, Any] = {"previous": None}

    def evaluate(server_round: int, params: list[np.ndarray], config: Any) -> Any:
        accuracy = task.accuracy(params)
        previous, state["previous"] = state["previous"], [np.array(p) for p in params]
        entry = timed.pending
        timed.pending = None
        if server_round == 0 or entry is None:
            return 0.0, {"accuracy": accuracy}
        entry["accuracy"] = accuracy
        reference = task.fedavg(server_round, previous)
        error = max(
            float(np.max(np.abs(np.asarray(p, np.float64) - r)))
            for p, r in zip(params, reference, strict=True)
        )
        entry["aggregate_error"] = error
        entry["aggregate_error_steps"] = error / STEP
        record.rounds.append(entry)
        on_round(record, entry)
        return 0.0, {"accuracy": accuracy}

    n = spec.nodes
    timeout = budget_s
    inner: Callable[[Any, Any], None]
    if spec.arm == "none":
        inner = default_fit_workflow
    elif spec.arm == "privfed":
        kwargs: dict[str, Any] = {}
        if spec.mode is not None:
            kwargs = {"mode": spec.mode, "identities": registry, "corrupted": 0}
        inner = SecAggWorkflow(
            num_shares=spec.num_shares,
            reconstruction_threshold=spec.threshold,
            max_weight=MAX_WEIGHT,
            clipping_range=CLIPPING_RANGE,
            quantization_range=QUANTIZATION_RANGE,
            timeout=timeout,
            **kwargs,
        )
    else:
        inner = SecAggPlusWorkflow(
            num_shares=spec.num_shares,
            reconstruction_threshold=spec.threshold,
            max_weight=MAX_WEIGHT,
            clipping_range=CLIPPING_RANGE,
            quantization_range=QUANTIZATION_RANGE,
            timeout=timeout,
        )
    timed = TimedFit(
        inner, record, budget_s=budget_s, on_round=on_round, profile_round=profile_round
    )
    strategy = FedAvg(
        fraction_fit=1.0,
        fraction_evaluate=0.0,
        min_fit_clients=n,
        min_available_clients=n,
        initial_parameters=ndarrays_to_parameters(task.initial()),
        evaluate_fn=evaluate,
        on_fit_config_fn=lambda r: {"server-round": r - timed.offset},
    )
    context = Context(
        run_id=base.run_id,
        node_id=base.node_id,
        node_config=base.node_config,
        state=RecordDict(),
        run_config=base.run_config,
    )
    legacy = LegacyContext(
        context=context, config=ServerConfig(num_rounds=rounds), strategy=strategy
    )
    try:
        DefaultWorkflow(fit_workflow=timed)(grid, legacy)
        if record.status == "running":
            record.status = "ok"
    except Exception as exc:  # recorded, never replaced by a number
        record.status = "error"
        record.note = f"{type(exc).__name__}: {exc}"
        _log(f"  {spec.label} N={n}: {record.note}")
    return record, timed.profile


# --------------------------------------------------------------------------- in process


class LoopbackGrid:
    """A Grid double delivering each message to the ClientApp in this process (no Ray).

    As ``tests/flower/conftest.py``'s ``LoopbackGrid``: one Context per node,
    a raising ClientApp becomes an error reply; nodes run one after another.
    """

    def __init__(self, app: Any, num_nodes: int, first_node_id: int = 1001) -> None:
        from flwr.app import Context, RecordDict
        from flwr.supercore.task_identity import TaskIdentity

        TaskIdentity.run_id = 1
        TaskIdentity.node_id = 0
        TaskIdentity.task_id = 1
        self.app = app
        self.contexts = {
            first_node_id + i: Context(
                run_id=1,
                node_id=first_node_id + i,
                node_config={"partition-id": i, "num-partitions": num_nodes},
                state=RecordDict(),
                run_config={},
            )
            for i in range(num_nodes)
        }

    class _Run:
        run_id = 1

    @property
    def run(self) -> Any:
        return self._Run()

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def send_and_receive(self, messages: Iterable[Any], *, timeout: float | None = None) -> Any:
        from flwr.app import Error, Message

        replies = []
        for message in messages:
            node = int(message.metadata.dst_node_id)
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
    specs: list[ArmSpec],
    task: Task,
    rounds: int,
    budget_s: float,
    journals: str,
    on_round: Callable[[ArmRecord, dict[str, Any]], None],
    identities: str | None = None,
    registry: Any = None,
) -> list[ArmRecord]:
    from flwr.app import Context, RecordDict

    grid = LoopbackGrid(client_app(task, journals, identities), specs[0].nodes)
    base = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})
    # Warm-up (untimed): one plain and one privfed round load every module and the task.
    for warm in (
        ArmSpec("none", "none", "in-process-loopback", specs[0].nodes),
        ArmSpec(
            "privfed",
            "complete",
            "in-process-loopback",
            specs[0].nodes,
            specs[0].nodes,
            specs[0].nodes // 2 + 1,
        ),
    ):
        run_arm(grid, base, warm, task, rounds=1, budget_s=budget_s, on_round=lambda r, e: None)
    return [
        run_arm(
            grid,
            base,
            spec,
            task,
            rounds=rounds,
            budget_s=budget_s,
            on_round=on_round,
            registry=registry,
        )[0]
        for spec in specs
    ]


def run_protocol_figure(n: int, graph: str, length: int) -> dict[str, Any]:
    """privfed's in-process runner on a vector of the training round's length."""
    from privfed.secagg import GraphMode, run_protocol

    k, t = graph_parameters(n, graph)
    rng = np.random.default_rng(7)
    inputs = [rng.integers(0, 2**63, size=length, dtype=np.uint64) for _ in range(n)]
    kwargs: dict[str, Any] = {}
    if graph != "complete":
        degree = k - 1 + (1 if (k - 1) % 2 and n % 2 else 0)
        kwargs = {"graph": GraphMode.HARARY, "degree": degree}
    start = time.perf_counter()
    report = run_protocol(inputs, threshold=t, **kwargs)
    wall = time.perf_counter() - start
    return {
        "nodes": n,
        "graph": graph,
        "num_shares": k,
        "threshold": t,
        "vector_length": length,
        "wall_s": wall,
        "server_s": report.total_server_seconds,
        "mean_client_s": report.mean_client_seconds,
    }


# --------------------------------------------------------------------------- one N (child)


def active_mode_support() -> tuple[bool, str]:
    """Whether ``SecAggWorkflow`` takes a ``mode`` argument (the active mode over Flower)."""
    from privfed.flower import SecAggMod, SecAggWorkflow

    if (
        "mode" in inspect.signature(SecAggWorkflow.__init__).parameters
        and "policy" in inspect.signature(SecAggMod.__init__).parameters
    ):
        return True, (
            "run: SecAggWorkflow(mode='active', identities=registry, corrupted=0); each node's "
            "policy (SecAggMod(policy=...)) holds its Ed25519 identity key and the registry; "
            "the nodes' policy mode is semi-honest (the weakest they accept: one ClientApp "
            "serves every arm), so an active round is the server's choice here"
        )
    return False, (
        "skipped: privfed.flower.SecAggWorkflow has no mode option in this tree "
        "(only the semi-honest mode runs over Flower)"
    )


def plan(n: int, arms: Sequence[str], graphs: Sequence[str], active: bool) -> list[ArmSpec]:
    """The arms of one N, cheapest first (Flower's complete graph last)."""
    specs: list[ArmSpec] = []
    if "none" in arms:
        specs.append(ArmSpec("none", "none", "flower-simulation", n))
    for arm in ("privfed", "flower-secaggplus"):
        if arm not in arms:
            continue
        for graph in sorted(graphs, key=lambda g: g != "secaggplus"):
            k, t = graph_parameters(n, graph)
            specs.append(ArmSpec(arm, graph, "flower-simulation", n, k, t))
            if arm == "privfed" and active:
                specs.append(ArmSpec(arm, graph, "flower-simulation", n, k, t, mode="active"))
    return specs


def child(args: argparse.Namespace) -> None:
    """One N: in-process figures, then every arm in one Flower simulation; JSON lines to stdout."""
    from flwr.serverapp import ServerApp

    from privfed.flower import run_simulation, wait_for_nodes

    logging.getLogger("flwr").setLevel(logging.ERROR)
    logging.getLogger("privfed").setLevel(logging.ERROR)
    n = args.nodes[0]
    # The ClientApp is shipped to Ray by reference: its module must import on the workers.
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    if here not in sys.path:
        sys.path.insert(0, here)
    import flower_training as bench

    task = bench.Task(nodes=n, hidden=args.hidden, npz=args.npz, seed=args.seed)
    emit_lock = threading.Lock()

    def emit(kind: str, payload: dict[str, Any]) -> None:
        with emit_lock:
            print("@@" + json.dumps({"kind": kind, **payload}), flush=True)

    def on_round(record: ArmRecord, entry: dict[str, Any]) -> None:
        summary = {k: v for k, v in entry.items() if k != "stages"}
        emit("round", {"label": record.spec.label, "nodes": n, **summary})

    active = active_mode_support()[0] and not args.no_active
    specs = plan(n, args.arms, args.graphs, active)
    emit("load", {"nodes": n, "where": "start", "load": list(os.getloadavg())})
    with tempfile.TemporaryDirectory(prefix="privfed-bench-") as tmp:
        identities = str(Path(tmp) / "identities") if active else None
        registry = write_identities(Path(identities), n) if identities else None
        # 1. In process: the same app over a loopback grid, and privfed's runner.
        loop_specs = [
            ArmSpec(s.arm, s.graph, "in-process-loopback", n, s.num_shares, s.threshold, s.mode)
            for s in specs
            if s.arm in ("none", "privfed")
        ]
        if loop_specs and not args.skip_in_process:
            for record in run_loopback(
                loop_specs,
                task,
                args.rounds,
                args.arm_timeout,
                str(Path(tmp) / "loop-journals"),
                on_round,
                identities,
                registry,
            ):
                emit("arm", record.to_json())
            from privfed.flower import SecAggWorkflow

            length = (
                SecAggWorkflow(num_shares=n, reconstruction_threshold=2)
                .encoding(_layout(task))
                .vector_length
            )
            for graph in args.graphs:
                figure = run_protocol_figure(n, graph, length)
                emit("protocol", figure)
        # 2. Flower's simulation engine, every arm in one run.
        server = ServerApp()

        @server.main()
        def main(grid: Any, context: Any) -> None:
            wait_for_nodes(grid, n, timeout=600)
            # Warm-up (untimed): one plain round loads the task on every Ray actor.
            warm = ArmSpec("none", "none", "flower-simulation", n)
            run_arm(
                grid,
                context,
                warm,
                task,
                rounds=1,
                budget_s=args.arm_timeout,
                on_round=lambda r, e: None,
            )
            emit("load", {"nodes": n, "where": "after warm-up", "load": list(os.getloadavg())})
            profiled = not args.profile
            for spec in specs:
                if not profiled and spec.arm == "flower-secaggplus":
                    profile_privfed_round(grid, context, task, n, args, registry, emit)
                    profiled = True
                _log(f"N={n} {spec.label}: {args.rounds} rounds (budget {args.arm_timeout:.0f} s)")
                record, _ = run_arm(
                    grid,
                    context,
                    spec,
                    task,
                    rounds=args.rounds,
                    budget_s=args.arm_timeout,
                    on_round=on_round,
                    registry=registry,
                )
                emit("arm", record.to_json())
                emit(
                    "load",
                    {"nodes": n, "where": f"after {spec.label}", "load": list(os.getloadavg())},
                )
            if not profiled:
                profile_privfed_round(grid, context, task, n, args, registry, emit)

        logging.getLogger("flwr").setLevel(logging.ERROR)
        logging.getLogger("privfed").setLevel(logging.ERROR)
        start = time.perf_counter()
        run_simulation(
            server,
            bench.client_app(task, str(Path(tmp) / "journals"), identities),
            num_supernodes=n,
            num_cpus=args.cpus,
            client_cpus=1.0,
        )
        emit("simulation", {"nodes": n, "total_s": time.perf_counter() - start})


def profile_privfed_round(
    grid: Any,
    context: Any,
    task: Task,
    n: int,
    args: argparse.Namespace,
    registry: Any,
    emit: Callable[[str, dict[str, Any]], None],
) -> None:
    """One extra privfed round (complete graph) under cProfile in the ServerApp thread.

    Its own arm, so the profiler's overhead stays out of the reported rounds.
    """
    k, t = graph_parameters(n, "complete")
    spec = ArmSpec("privfed", "complete", "flower-simulation", n, k, t)
    _log(f"N={n} {spec.label}: one more round under cProfile (not in the figures)")
    record, profile = run_arm(
        grid,
        context,
        spec,
        task,
        rounds=1,
        budget_s=args.arm_timeout,
        on_round=lambda r, e: None,
        profile_round=1,
        registry=registry,
    )
    if profile is None:
        return
    done = [r for r in record.rounds if r.get("status") == "ok"]
    emit(
        "profile",
        {
            "nodes": n,
            "label": spec.label,
            "what": "cProfile of the ServerApp thread during one fit round (an extra round)",
            "round_wall_s": done[0]["wall_s"] if done else None,
            "stages": done[0]["stages"] if done else None,
            "top": profile_top(profile),
            "text": profile,
        },
    )


def _layout(task: Task) -> Any:
    """privfed's array layout of the task's model (for the vector length)."""
    from flwr.common import ndarrays_to_parameters
    from flwr.common.typing import FitIns
    from flwr.compat.common.recorddict_compat import fitins_to_recorddict

    from privfed.flower._training_wire import array_layout

    content = fitins_to_recorddict(FitIns(ndarrays_to_parameters(task.initial()), {}), True)
    return array_layout(content)


# --------------------------------------------------------------------------- parent


def run_child(args: argparse.Namespace, n: int, limit_s: float) -> tuple[list[dict[str, Any]], str]:
    """Run one N in a child process; its JSON events, and how it ended."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--nodes",
        str(n),
        "--rounds",
        str(args.rounds),
        "--arms",
        ",".join(args.arms),
        "--graphs",
        ",".join(args.graphs),
        "--hidden",
        str(args.hidden),
        "--seed",
        str(args.seed),
        "--cpus",
        str(args.cpus),
        "--arm-timeout",
        str(args.arm_timeout),
    ]
    command += ["--npz", args.npz] if args.npz else []
    command += ["--profile"] if args.profile and n == max(args.nodes) else []
    command += ["--skip-in-process"] if args.skip_in_process else []
    command += ["--no-active"] if args.no_active else []
    events: list[dict[str, Any]] = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killer = threading.Timer(limit_s, proc.kill)
    killer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("@@"):
                event = json.loads(line[2:])
                events.append(event)
                _print_event(event)
            elif line.strip() and _interesting(line):
                print("    | " + line.rstrip()[:300], flush=True)
        rc = proc.wait()
    finally:
        killer.cancel()
    if rc == 0:
        return events, "ok"
    if rc in (-9, 137):
        return events, f"killed at the hard limit of {limit_s:.0f} s"
    return events, f"exit status {rc}"


def _interesting(line: str) -> bool:
    quiet = ("DeprecationWarning", "warnings.warn", "FutureWarning", "INFO", "ray", "Ray", "\x1b")
    return line.startswith("[") or not any(q in line for q in quiet)


def _print_event(event: Mapping[str, Any]) -> None:
    kind = event["kind"]
    if kind == "round":
        if event.get("status") != "ok":
            _log(f"  N={event['nodes']} {event['label']} round {event['round']}: {event['status']}")
            return
        _log(
            f"  N={event['nodes']} {event['label']} round {event['round']}: "
            f"{event['wall_s']:.2f} s wall, server {event['server_cpu_s']:.2f} s CPU, "
            f"up {event['bytes_up_per_node']:,.0f} B / down {event['bytes_down_per_node']:,.0f} B "
            f"per node, accuracy {event['accuracy']:.4f}, "
            f"|agg - FedAvg| {event['aggregate_error_steps']:.2f} steps"
        )
    elif kind == "protocol":
        _log(
            f"  N={event['nodes']} run_protocol {event['graph']}: {event['wall_s']:.2f} s "
            f"({event['vector_length']} values)"
        )
    elif kind == "arm" and event["status"] != "ok":
        _log(
            f"  N={event['nodes']} {event['arm']}/{event['graph']}: {event['status']} "
            f"({event['note']})"
        )


def _git(*args: str) -> str:
    import shutil

    git = shutil.which("git")
    if git is None:
        return ""
    try:
        out = subprocess.run(
            [git, *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def secagg_seconds(arm: Mapping[str, Any], plain: Mapping[str, Any]) -> float | None:
    """Median over rounds of (this arm's round wall - the no-secagg arm's same round)."""
    base = {r["round"]: r["wall_s"] for r in plain["rounds"] if r.get("status") == "ok"}
    diffs = [
        r["wall_s"] - base[r["round"]]
        for r in arm["rounds"]
        if r.get("status") == "ok" and r["round"] in base
    ]
    return _median(diffs)


def _find(runs: Sequence[Mapping[str, Any]], **match: Any) -> Mapping[str, Any] | None:
    hits = [r for r in runs if all(r.get(k) == v for k, v in match.items())]
    return hits[0] if hits else None


def goals(results: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's goals, from the runs (``met`` is ``None`` where a figure is missing)."""
    runs = results["runs"]
    out: dict[str, Any] = {
        "aggregate_within_step": [],
        "accuracy_within_half_point": [],
        "secagg_time_10x_less_than_flower": [],
        "transport_overhead": [],
    }
    nodes = sorted({r["nodes"] for r in runs})
    cpus = int(results.get("meta", {}).get("ray_cpus", 2))
    out["where_the_time_goes"] = [
        {
            "nodes": r["nodes"],
            "arm": r["arm"],
            "graph": r["graph"],
            "mode": r["mode"],
            **parts,
        }
        for r in runs
        if r["engine"] == "flower-simulation" and (parts := breakdown(r, cpus)) is not None
    ]
    for n in nodes:
        plain = _find(runs, arm="none", nodes=n, engine="flower-simulation")
        plain_loop = _find(runs, arm="none", nodes=n, engine="in-process-loopback")
        for graph in GRAPHS:
            pf = _find(
                runs, arm="privfed", graph=graph, nodes=n, engine="flower-simulation", mode=None
            )
            fl = _find(runs, arm="flower-secaggplus", graph=graph, nodes=n)
            loop = _find(
                runs, arm="privfed", graph=graph, nodes=n, engine="in-process-loopback", mode=None
            )
            proto = next(
                (
                    p
                    for p in results.get("in_process_protocol", [])
                    if p["nodes"] == n and p["graph"] == graph
                ),
                None,
            )
            if pf is not None:
                steps = [
                    r["aggregate_error_steps"] for r in pf["rounds"] if r.get("status") == "ok"
                ]
                out["aggregate_within_step"].append(
                    {
                        "nodes": n,
                        "graph": graph,
                        "max_error_steps": max(steps) if steps else None,
                        "flower_max_error_steps": max(
                            (
                                r["aggregate_error_steps"]
                                for r in fl["rounds"]
                                if r.get("status") == "ok"
                            ),
                            default=None,
                        )
                        if fl
                        else None,
                        "met": (max(steps) <= 1.0) if steps else None,
                    }
                )
                if plain is not None:
                    a, b = pf["final_accuracy"], plain["final_accuracy"]
                    out["accuracy_within_half_point"].append(
                        {
                            "nodes": n,
                            "graph": graph,
                            "privfed": a,
                            "none": b,
                            "flower_secaggplus": fl["final_accuracy"] if fl else None,
                            "difference_points": None if a is None or b is None else (a - b) * 100,
                            "met": None if a is None or b is None else abs(a - b) <= 0.005,
                        }
                    )
            if pf is not None and plain is not None:
                p_s = secagg_seconds(pf, plain)
                f_s = secagg_seconds(fl, plain) if fl is not None else None
                entry: dict[str, Any] = {
                    "nodes": n,
                    "graph": graph,
                    "privfed_s": p_s,
                    "flower_s": f_s,
                }
                entry["flower_status"] = None if fl is None else fl["status"]
                entry["flower_rounds"] = (
                    None if fl is None else sum(r.get("status") == "ok" for r in fl["rounds"])
                )
                act = _find(
                    runs,
                    arm="privfed",
                    graph=graph,
                    nodes=n,
                    engine="flower-simulation",
                    mode="active",
                )
                entry["privfed_active_s"] = secagg_seconds(act, plain) if act else None
                entry["ratio"] = f_s / p_s if p_s and f_s is not None and p_s > 0 else None
                entry["ratio_active"] = (
                    f_s / entry["privfed_active_s"]
                    if f_s is not None
                    and entry["privfed_active_s"]
                    and entry["privfed_active_s"] > 0
                    else None
                )
                entry["met"] = None if entry["ratio"] is None else entry["ratio"] >= 10.0
                out["secagg_time_10x_less_than_flower"].append(entry)
                l_s = secagg_seconds(loop, plain_loop) if loop and plain_loop else None
                t_entry: dict[str, Any] = {
                    "nodes": n,
                    "graph": graph,
                    "over_flower_s": p_s,
                    "loopback_s": l_s,
                    "run_protocol_s": proto["wall_s"] if proto else None,
                }
                # A loopback difference at or below 0 (noise at small N) gives no ratio.
                t_entry["over_loopback"] = (
                    p_s / l_s if p_s is not None and l_s is not None and l_s > 0 else None
                )
                t_entry["over_run_protocol"] = (
                    p_s / proto["wall_s"] if p_s is not None and proto else None
                )
                ratio = t_entry["over_loopback"]
                t_entry["met"] = None if ratio is None else ratio <= 1.5
                out["transport_overhead"].append(t_entry)
    return out


def breakdown(run: Mapping[str, Any], cpus: int) -> dict[str, Any] | None:
    """Where one arm's round goes (medians over its rounds), from the per-stage records.

    ``clients_parallel_s``: the ClientApps' own wall seconds (inside the Ray
    actors) divided by the ``cpus`` actors running at once; ``server_thread_s``:
    the ServerApp thread's CPU (the workflow's own work); ``engine_s``: the rest
    of the round -- Flower's simulation engine and Ray moving messages and
    Contexts (the polling of the link state, the actor calls, serialization).
    ``engine_cpu_s``: CPU of the server process outside the ServerApp thread.
    """
    rows = [r for r in run["rounds"] if r.get("status") == "ok" and r.get("stages")]
    if not rows:
        return None

    def med(values: list[float]) -> float:
        return float(_median(values) or 0.0)

    walls = [r["wall_s"] for r in rows]
    clients = [sum(s["clients_s_sum"] for s in r["stages"]) / cpus for r in rows]
    threads = [r["server_cpu_s"] for r in rows]
    return {
        "stages": len(rows[0]["stages"]),
        "round_s": med(walls),
        "clients_parallel_s": med(clients),
        "clients_cpu_parallel_s": med(
            [sum(s["clients_cpu_s_sum"] for s in r["stages"]) / cpus for r in rows]
        ),
        "fit_parallel_s": med([sum(s["fit_s_sum"] for s in r["stages"]) / cpus for r in rows]),
        "server_thread_s": med(threads),
        "engine_s": med([w - c - t for w, c, t in zip(walls, clients, threads, strict=True)]),
        "engine_cpu_s": med([r["server_process_cpu_s"] - r["server_cpu_s"] for r in rows]),
        "stage_wall_s": [
            med([r["stages"][i]["wall_s"] for r in rows if len(r["stages"]) > i])
            for i in range(len(rows[0]["stages"]))
        ],
    }


def check_schema(results: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` if ``results`` lacks a field the README row and the plot read."""

    def need(obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, Mapping) or key not in obj:
            raise ValueError(f"{where}: no field {key!r}")
        return obj[key]

    if need(results, "schema", "top level") != SCHEMA:
        raise ValueError(f"schema is not {SCHEMA!r}")
    meta = need(results, "meta", "top level")
    for key in ("nodes", "rounds", "model", "machine", "load_average", "command", "active_mode"):
        need(meta, key, "meta")
    need(meta["model"], "parameters", "meta.model")
    for i, run in enumerate(need(results, "runs", "top level")):
        for key in ("arm", "graph", "engine", "nodes", "status", "rounds", "final_accuracy"):
            need(run, key, f"runs[{i}]")
        for j, r in enumerate(run["rounds"]):
            need(r, "round", f"runs[{i}].rounds[{j}]")
            if need(r, "status", f"runs[{i}].rounds[{j}]") == "ok":
                for key in (
                    "wall_s",
                    "server_cpu_s",
                    "bytes_up_per_node",
                    "bytes_down_per_node",
                    "accuracy",
                    "aggregate_error_steps",
                ):
                    value = need(r, key, f"runs[{i}].rounds[{j}]")
                    if not isinstance(value, int | float) or isinstance(value, bool):
                        raise ValueError(f"runs[{i}].rounds[{j}].{key}: not a number")
    need(results, "in_process_protocol", "top level")
    g = need(results, "goals", "top level")
    for key in (
        "aggregate_within_step",
        "accuracy_within_half_point",
        "secagg_time_10x_less_than_flower",
        "transport_overhead",
    ):
        need(g, key, "goals")


def write_results(results: dict[str, Any], path: Path) -> None:
    """Check the schema and write ``results`` as indented JSON."""
    check_schema(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def plot(results: Mapping[str, Any], path: Path) -> None:
    """Median round seconds and secure-aggregation seconds against N, per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results["runs"] if r["engine"] == "flower-simulation"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = {"none": "k", "privfed": "tab:blue", "flower-secaggplus": "tab:red"}
    markers = {"none": "o", "complete": "s", "secaggplus": "^"}

    def style(arm: str, graph: str, mode: str | None) -> dict[str, Any]:
        line = ":" if mode else ("--" if graph == "secaggplus" else "-")
        return {
            "color": colors.get(arm, "tab:green"),
            "marker": markers.get(graph, "D"),
            "linestyle": line,
        }

    for arm, graph, mode in sorted(
        {(r["arm"], r["graph"], r["mode"]) for r in runs}, key=lambda x: (x[0], x[1], x[2] or "")
    ):
        line = sorted(
            (r for r in runs if (r["arm"], r["graph"], r["mode"]) == (arm, graph, mode)),
            key=lambda r: r["nodes"],
        )
        pts = [(r["nodes"], r["median_round_wall_s"], r) for r in line if r["median_round_wall_s"]]
        label = arm if graph == "none" else f"{arm} ({graph}{', ' + mode if mode else ''})"
        axes[0].plot(
            [p[0] for p in pts], [p[1] for p in pts], label=label, **style(arm, graph, mode)
        )
        for x, y, r in pts:
            done = sum(1 for q in r["rounds"] if q.get("status") == "ok")
            if done < results["meta"]["rounds"]:
                axes[0].annotate(
                    f"{done} of {results['meta']['rounds']} rounds",
                    (x, y),
                    fontsize=7,
                    color=colors.get(arm),
                    xytext=(4, -10),
                    textcoords="offset points",
                )
    axes[0].set_title("fit round, Flower simulation engine (median of rounds)")
    axes[0].set_ylabel("seconds")
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for e in results["goals"]["secagg_time_10x_less_than_flower"]:
        for arm, key in (("privfed", "privfed_s"), ("flower-secaggplus", "flower_s")):
            if e[key] is not None and e[key] > 0:
                series.setdefault((arm, e["graph"]), []).append((e["nodes"], e[key]))
    for t in results["goals"]["transport_overhead"]:
        if t["loopback_s"] is not None and t["loopback_s"] > 0:
            series.setdefault(("privfed in process", t["graph"]), []).append(
                (t["nodes"], t["loopback_s"])
            )
    for (arm, graph), pts in sorted(series.items()):
        pts.sort()
        axes[1].plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            label=f"{arm} ({graph})",
            **style(arm, graph, None),
        )
    axes[1].set_title("secure aggregation per round (round - plain round)")
    axes[1].set_ylabel("seconds")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes N")
        ax.set_xticks(results["meta"]["nodes"], [str(n) for n in results["meta"]["nodes"]])
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    model = results["meta"]["model"]
    fig.suptitle(
        f"FedAvg, MLP of {model['parameters']:,} parameters, {results['meta']['rounds']} rounds "
        "per arm, same seeds"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parent(args: argparse.Namespace) -> None:
    active, active_note = active_mode_support()
    if active and args.no_active:
        active, active_note = False, "skipped: --no-active"
    task = Task(nodes=max(args.nodes), hidden=args.hidden, npz=args.npz, seed=args.seed)
    import flwr

    results: dict[str, Any] = {
        "schema": SCHEMA,
        "meta": {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": "python benchmarks/flower_training.py " + " ".join(sys.argv[1:]),
            "git_commit": _git("rev-parse", "--short", "HEAD"),
            "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "nodes": args.nodes,
            "rounds": args.rounds,
            "arms": args.arms,
            "graphs": {
                str(n): {
                    g: dict(zip(("num_shares", "threshold"), graph_parameters(n, g), strict=True))
                    for g in args.graphs
                }
                for n in args.nodes
            },
            "secure_aggregation": {
                "clipping_range": CLIPPING_RANGE,
                "quantization_range": QUANTIZATION_RANGE,
                "max_weight": MAX_WEIGHT,
                "step": STEP,
                "rounding": "stochastic (both)",
            },
            "model": {
                "kind": f"MLP {task.features}-{args.hidden}-{task.classes} (ReLU), NumPy",
                "parameters": task.length(),
                "local_training": f"{task.epochs} epochs SGD, batch {task.batch}, lr {task.lr}",
                "seed": args.seed,
            },
            "data": {
                "source": args.npz or "sklearn digits (bundled)",
                "train": len(task.data()[1]),
                "test": len(task.data()[3]),
            },
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "flwr": flwr.__version__,
                "numpy": np.__version__,
            },
            "ray_cpus": args.cpus,
            "client_cpus": 1.0,
            "arm_timeout_s": args.arm_timeout,
            "active_mode": {"run": active, "note": active_note},
            "load_average": [{"where": "start", "load": list(os.getloadavg())}],
            "children": [],
        },
        "runs": [],
        "in_process_protocol": [],
        "profile": None,
    }
    if not active:
        _log(f"active mode: {active_note}")
    _log(
        f"model: {results['meta']['model']['kind']}, {task.length():,} parameters; "
        f"N = {args.nodes}, {args.rounds} rounds; load {os.getloadavg()[0]:.2f}"
    )
    per_n_arms = len(plan(1000, args.arms, args.graphs, active))
    for n in args.nodes:
        limit = per_n_arms * args.arm_timeout * 1.3 + 300
        _log(f"N={n}: child process (hard limit {limit:.0f} s) ...")
        start = time.perf_counter()
        events, how = run_child(args, n, limit)
        seen: set[str] = set()
        for event in events:
            kind = event.pop("kind")
            if kind == "arm":
                results["runs"].append(event)
                seen.add(
                    ArmSpec(
                        event["arm"], event["graph"], event["engine"], n, mode=event["mode"]
                    ).label
                )
            elif kind == "protocol":
                results["in_process_protocol"].append(event)
            elif kind == "load":
                results["meta"]["load_average"].append(
                    {"where": f"N={n} {event['where']}", "load": event["load"]}
                )
            elif kind == "profile":
                results["profile"] = event
        # Arms whose child died: recorded from their finished rounds, marked as such.
        partial: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            if event.get("label") and event.get("round") is not None and event["label"] not in seen:
                partial.setdefault(event["label"], []).append(event)
        specs = plan(n, args.arms, args.graphs, active)
        all_specs = specs + [
            ArmSpec(s.arm, s.graph, "in-process-loopback", n, s.num_shares, s.threshold, s.mode)
            for s in specs
            if s.arm != "flower-secaggplus"
        ]
        for spec in all_specs:
            if spec.label in seen:
                continue
            record = ArmRecord(spec, status="killed", note=f"child process: {how}")
            record.rounds = [
                {k: v for k, v in e.items() if k not in ("label", "nodes")}
                for e in partial.get(spec.label, [])
            ]
            results["runs"].append(record.to_json())
        results["meta"]["children"].append(
            {"nodes": n, "how": how, "wall_s": time.perf_counter() - start}
        )
        results["goals"] = goals(results)
        write_results(results, args.out)  # after every N: a partial file survives
    results["meta"]["load_average"].append({"where": "end", "load": list(os.getloadavg())})
    results["goals"] = goals(results)
    write_results(results, args.out)
    with contextlib.suppress(ImportError):  # plots are optional
        plot(results, args.out.with_suffix(".png"))
    _summary(results)
    _log(f"wrote {args.out} and {args.out.with_suffix('.png').name}")


def _summary(results: Mapping[str, Any]) -> None:
    print()
    print(
        f"{'arm':34}{'N':>5}{'round s':>10}{'server CPU':>11}{'up B':>11}{'down B':>11}{'acc':>8}"
    )
    for run in results["runs"]:
        done = [r for r in run["rounds"] if r.get("status") == "ok"]
        label = ArmSpec(
            run["arm"], run["graph"], run["engine"], run["nodes"], mode=run["mode"]
        ).label
        if not done:
            print(f"{label:34}{run['nodes']:>5}  {run['status']}: {run['note']}")
            continue

        def med(key: str, done: list[dict[str, Any]] = done) -> float:
            return float(_median([r[key] for r in done]) or 0.0)

        print(
            f"{label:34}{run['nodes']:>5}{med('wall_s'):10.2f}{med('server_cpu_s'):11.2f}"
            f"{med('bytes_up_per_node'):11,.0f}{med('bytes_down_per_node'):11,.0f}"
            f"{run['final_accuracy']:8.4f}{'' if run['status'] == 'ok' else '  ' + run['status']}"
        )
    for name, entries in results["goals"].items():
        for e in entries:
            print(f"  {name}: {e}")


# --------------------------------------------------------------------------- CLI


def _csv_ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 4 for v in values):
        raise argparse.ArgumentTypeError("a comma-separated list of node counts >= 4")
    return values


def _csv_choice(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in values if v not in choices]
        if not values or bad:
            raise argparse.ArgumentTypeError(f"comma-separated, from {', '.join(choices)}")
        return values

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flower_training.py", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--nodes", type=_csv_ints, default=[10, 50, 100], help="node counts N (default 10,50,100)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="FedAvg rounds per arm (default 3)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke check: N=10, 1 round, written to flower_training_quick.json",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"result JSON (default {DEFAULT_OUT.relative_to(RESULTS.parents[1])}; "
        "the plot goes next to it as .png)",
    )
    parser.add_argument(
        "--arms",
        type=_csv_choice(ARMS),
        default=list(ARMS),
        help="arms to run (default all: none,privfed,flower-secaggplus)",
    )
    parser.add_argument(
        "--graphs",
        type=_csv_choice(GRAPHS),
        default=list(GRAPHS),
        help="graphs of the secure arms (default complete,secaggplus)",
    )
    parser.add_argument(
        "--arm-timeout",
        type=float,
        default=700.0,
        help="seconds per arm and N: no round starts past it (default 700)",
    )
    parser.add_argument("--hidden", type=int, default=32, help="MLP hidden units (default 32)")
    parser.add_argument(
        "--npz",
        default=None,
        help="an MNIST-like .npz (x_train/y_train/x_test/y_test or x/y) "
        "instead of the bundled digits",
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="Ray CPUs")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the ServerApp thread in round 2 of privfed (complete) at the largest N",
    )
    parser.add_argument(
        "--no-active",
        action="store_true",
        help="skip privfed's active mode even where SecAggWorkflow supports it",
    )
    parser.add_argument(
        "--skip-in-process",
        action="store_true",
        help="skip the in-process figures (loopback grid, run_protocol)",
    )
    parser.add_argument(
        "--merge-pyspy",
        type=Path,
        default=None,
        metavar="RAW",
        help="summarize a py-spy raw profile (py-spy record --subprocesses -f raw "
        "-- python benchmarks/flower_training.py --child ...) into --out, "
        "running nothing else",
    )
    parser.add_argument("--pyspy-note", default="", help="how the --merge-pyspy profile was taken")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.rounds = [10], 1
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.arm_timeout <= 0:
        parser.error("--arm-timeout must be > 0")
    if args.out is None:
        args.out = QUICK_OUT if args.quick else DEFAULT_OUT
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        child(args)
    elif args.merge_pyspy is not None:
        results = json.loads(args.out.read_text(encoding="utf-8"))
        results["pyspy"] = {**summarize_pyspy(args.merge_pyspy), "note": args.pyspy_note}
        write_results(results, args.out)
        _log(f"merged {args.merge_pyspy.name} into {args.out}")
    else:
        parent(args)


if __name__ == "__main__":
    main()
