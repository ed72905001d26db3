"""Rows of the Flower benchmarks (one-shot app and training)."""

from __future__ import annotations

from .formats import (
    count,
    fixed,
    join,
    plural,
    points,
    seconds,
    sig,
    times,
)
from .results import Node, Results
from .table import Row, row


@row
def flower(results: Results) -> Row:
    data = results.load("flower.json", "python benchmarks/flower.py")
    ratios = data["ratios"]
    what = (
        f"N = {data.integer('clients')}, complete graph, t = {data.integer('threshold')}, "
        f"{count(data.num('vector_length'))} values, {data.integer('dropped_before_masked_input')} "
        "nodes failing before masked input, Flower simulation engine"
    )
    figure = (
        f"privfed's Flower apps {fixed(data.num('privfed_flower', 'wall_s'), 1)} s end to end vs "
        f"Flower's own SecAgg+ {fixed(data.num('flower_secaggplus', 'wall_s'), 0)} s "
        f"({fixed(ratios.num('flower_over_privfed_wall'), 1)}×); privfed in process "
        f"{fixed(data.num('privfed_in_process', 'wall_s'), 1)} s (Flower transport "
        f"{fixed(ratios.num('transport_overhead_wall'), 1)}× over it)"
    )
    return Row("flower.py", what, figure)


def _training_runs(data: Node, nodes: int, engine: str = "flower-simulation") -> dict[str, Node]:
    """``arm/graph[/mode]`` -> run, at ``nodes`` in ``engine``."""
    found: dict[str, Node] = {}
    for run in data.items("runs"):
        if run.integer("nodes") != nodes or run.text("engine") != engine:
            continue
        mode = run["mode"].value
        key = "/".join([run.text("arm"), run.text("graph")] + ([str(mode)] if mode else []))
        found[key] = run
    return found


def _rounds_note(run: Node, rounds: int, budget: float) -> str:
    """Why an arm has fewer rounds than asked (empty when it ran them all)."""
    done = sum(1 for r in run.items("rounds") if r.text("status") == "ok")
    if done == rounds:
        return ""
    if done == 0:
        return f" (no round finished within {budget:.0f} s)"
    return f" ({done} of {rounds} rounds within the arm budget)"


def _goal(data: Node, name: str, nodes: int, graph: str) -> Node | None:
    for entry in data.items("goals", name):
        if entry.integer("nodes") == nodes and entry.text("graph") == graph:
            return entry
    return None


@row
def flower_training_cost(results: Results) -> Row:
    data = results.load("flower_training.json", "python benchmarks/flower_training.py")
    meta = data["meta"]
    n = max(int(v.num()) for v in meta.items("nodes"))
    rounds, budget = (
        meta.integer("rounds"),
        meta.num("arm_timeout_s") if meta.has("arm_timeout_s") else 0.0,
    )
    runs = _training_runs(data, n)
    parts: list[str] = []
    for graph, label in (("complete", "complete graph"), ("secaggplus", "SecAgg+ graph")):
        goal = _goal(data, "secagg_time_10x_less_than_flower", n, graph)
        pf = runs.get(f"privfed/{graph}")
        if goal is None or pf is None or goal["privfed_s"].value is None:
            continue
        shape = f"num_shares = {pf.integer('num_shares')}, t = {pf.integer('threshold')}"
        text = f"{label} ({shape}): privfed {seconds(goal.num('privfed_s'))}"
        active = runs.get(f"privfed/{graph}/active")
        plain = runs.get("none/none")
        if active is not None and plain is not None:
            walls = {
                r.integer("round"): r.num("wall_s")
                for r in plain.items("rounds")
                if r.text("status") == "ok"
            }
            diffs = sorted(
                r.num("wall_s") - walls[r.integer("round")]
                for r in active.items("rounds")
                if r.text("status") == "ok" and r.integer("round") in walls
            )
            if diffs:
                text += f" (active mode {seconds(diffs[len(diffs) // 2])})"
        fl = runs.get(f"flower-secaggplus/{graph}")
        if fl is not None:
            note = _rounds_note(fl, rounds, budget)
            if goal["flower_s"].value is None:
                text += f" vs Flower's SecAgg+{note}"
            else:
                ratio = goal.num("ratio")
                relation = f"{times(ratio)} less" if ratio >= 1 else f"{times(1 / ratio)} more"
                text += f" vs Flower's SecAgg+ {seconds(goal.num('flower_s'))}{note}: {relation}"
        parts.append(text)
    plain = runs.get("none/none")
    tail = ""
    if plain is not None and plain["median_round_wall_s"].value is not None:
        tail = f"; a plain round {seconds(plain.num('median_round_wall_s'))}"
    pf, fl = runs.get("privfed/complete"), runs.get("flower-secaggplus/complete")
    if pf is not None and fl is not None:
        up = [r.num("bytes_up_per_node") for r in pf.items("rounds") if r.text("status") == "ok"]
        fup = [r.num("bytes_up_per_node") for r in fl.items("rounds") if r.text("status") == "ok"]
        if up and fup:
            tail += (
                f"; upload per node and round (complete graph) {count(round(max(up)))} B "
                f"vs Flower's {count(round(max(fup)))} B"
            )
        cpu = sorted(r.num("server_cpu_s") for r in pf.items("rounds") if r.text("status") == "ok")
        fcpu = sorted(r.num("server_cpu_s") for r in fl.items("rounds") if r.text("status") == "ok")
        if cpu and fcpu:
            tail += (
                f", ServerApp CPU per round {seconds(cpu[len(cpu) // 2])} vs "
                f"{seconds(fcpu[len(fcpu) // 2])}"
            )
    what = (
        f"FedAvg training in Flower's simulation engine, N = {n}, an MLP of "
        f"{count(meta.num('model', 'parameters'))} parameters, {plural(rounds, 'round')} per arm: "
        "secure-aggregation seconds per round (the round minus the plain round, median)"
    )
    return Row("flower_training.py", what, join(parts, "; ") + tail)


@row
def flower_training_quality(results: Results) -> Row:
    data = results.load("flower_training.json", "python benchmarks/flower_training.py")
    meta = data["meta"]
    all_nodes = sorted(int(v.num()) for v in meta.items("nodes"))
    n = all_nodes[-1]
    acc = _goal(data, "accuracy_within_half_point", n, "complete")
    parts: list[str] = []
    if acc is not None and acc["privfed"].value is not None and acc["none"].value is not None:
        flower = acc["flower_secaggplus"].value
        parts.append(
            f"final test accuracy at N = {n}: plain {fixed(acc.num('none'), 3)}, privfed "
            f"{fixed(acc.num('privfed'), 3)} ({points(acc.num('privfed') - acc.num('none'))} "
            "points)"
            + (f", Flower's SecAgg+ {fixed(float(flower), 3)}" if flower is not None else "")
        )
    steps = [
        e.num("max_error_steps")
        for e in data.items("goals", "aggregate_within_step")
        if e["max_error_steps"].value is not None
    ]
    fsteps = [
        e.num("flower_max_error_steps")
        for e in data.items("goals", "aggregate_within_step")
        if e["flower_max_error_steps"].value is not None
    ]
    if steps:
        text = f"privfed's model within {sig(max(steps))} grid steps of FedAvg's every round"
        if fsteps:
            text += f" (Flower's SecAgg+: {sig(max(fsteps))})"
        parts.append(text)
    ratios: list[str] = []
    for nodes in all_nodes:
        entry = _goal(data, "transport_overhead", nodes, "complete")
        if entry is not None and entry["over_loopback"].value is not None:
            ratios.append(times(entry.num("over_loopback")))
        else:
            ratios.append("–")
    if ratios:
        text = (
            f"privfed's aggregation over Flower / in process (N = "
            f"{' / '.join(str(v) for v in all_nodes)}, complete graph): {' / '.join(ratios)}"
        )
        entry = _goal(data, "transport_overhead", n, "complete")
        if entry is not None and entry["run_protocol_s"].value is not None:
            alone = seconds(entry.num("run_protocol_s"))
            text += f" (privfed's in-process runner alone at N = {n}: {alone})"
        parts.append(text)
    what = (
        "the same run: accuracy, privfed's aggregate against FedAvg of the same updates, and "
        "privfed's secure-aggregation seconds over Flower against the same workflow and "
        "ClientApp over an in-process grid"
    )
    return Row("flower_training.py", what, join(parts, "; "))
