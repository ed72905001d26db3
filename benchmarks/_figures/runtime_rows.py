"""Rows of the run-time benchmarks: imports and end-to-end wall time."""

from __future__ import annotations

from .formats import (
    fixed,
    join,
    times,
)
from .results import Node, Results
from .table import Row, row


@row
def imports(results: Results) -> Row:
    data = results.load("imports.json", "python benchmarks/imports.py")

    def entry(name: str) -> Node:
        return data.find("rows", name=name)

    cores = entry("privfed.secagg + privfed.dp")
    torch = entry("torch")
    # The latent wing's rows; results from before the compatibility package
    # privfed.models was removed measured it in their place (and name it so).
    names = {r.text("name") for r in data.items("rows")}
    wing_name = "privfed.engines.latent" if "privfed.engines.latent" in names else "privfed.models"
    wing = entry(wing_name)
    engines = entry("privfed.engines")
    every = entry(f"{wing_name}, every export")
    testing, audit = entry("privfed.testing"), entry("privfed.audit")
    repeats = {r.integer("repeats") for r in data.items("rows")}

    def ms(value: float) -> str:
        return f"{value:.0f} ms"

    def ratio(r: Node) -> str:
        return f"{ms(r.num('target_ms'))} ({times(r.num('ratio'))})"

    def on_top(r: Node) -> str:
        return f"{ms(r.num('target_ms'))} after {r.text('baseline')}'s {ms(r.num('baseline_ms'))}"

    def loads(r: Node) -> str:
        heavy = [n.text() for n in r.items("heavy_loaded")]
        return f", loads {', '.join(heavy)}" if heavy else ""

    heavy = [n.text() for n in cores.items("heavy_loaded")]
    others = [f"`{r.text('name')}` {ratio(r)}" for r in (testing, audit)]
    # Rows "first use, <what>" (newer runs): the import plus a first call, after numpy.
    first_use = [
        f'"{r.text("name").removeprefix("first use, ")}" {ms(r.num("target_ms"))} '
        f"({times(r.num('ratio'))}{loads(r)})"
        for r in data.items("rows")
        if r.text("name").startswith("first use, ")
    ]
    first = (
        f"; first use (import and first call, after numpy): {', '.join(first_use)}"
        if (first_use)
        else ""
    )
    what = (
        "fresh interpreters, median of "
        f"{join([str(r) for r in sorted(repeats)], ', ')}; each import timed after its baseline "
        "(numpy, or torch for the engines) in the same process"
    )
    figure = (
        f"`import privfed.secagg, privfed.dp` {ms(cores.num('target_ms'))} = "
        f"{times(cores.num('ratio'))} {cores.text('baseline')}'s {ms(cores.num('baseline_ms'))} "
        f"(heavy modules loaded: {', '.join(heavy) or 'none'}){first}; {', '.join(others)}; "
        f"`{wing_name}` {on_top(wing)}, `privfed.engines` {on_top(engines)}, every export "
        f"of `{wing_name}` {on_top(every)}; `import torch` itself "
        f"{ms(torch.num('target_ms'))} ({times(torch.num('ratio'))} {torch.text('baseline')})"
    )
    return Row("imports.py", what, figure)


def _run_wall_row(data: Node, *, runs_what: str, label: str) -> Row:
    meta = data["meta"]
    today, base = data["today"], data["baseline"]

    def accuracy(side: Node) -> list[float]:
        return [
            r.num("accuracy_synthetic")
            for r in side.items("runs")
            if r.value.get("accuracy_synthetic") is not None
        ]

    def med(values: list[float]) -> float:
        ordered = sorted(values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    acc_today, acc_base = accuracy(today), accuracy(base)
    acc = (
        f"; synthetic accuracy {fixed(med(acc_today), 3)} vs {fixed(med(acc_base), 3)}"
        if acc_today and acc_base
        else ""
    )
    ref = meta.text("baseline_ref")
    what = (
        f"`privfed run` {runs_what}, whole process (interpreter, imports, stages), today "
        f"vs commit {ref}, alternating fresh processes, median of {meta.integer('repeats')}"
    )
    figure = (
        f"{fixed(today.num('wall_seconds', 'median'), 1)} s wall "
        f"({fixed(today.num('stages_total_seconds', 'median'), 1)} s in stages) vs "
        f"{fixed(base.num('wall_seconds', 'median'), 1)} s "
        f"({fixed(base.num('stages_total_seconds', 'median'), 1)} s) at {ref}: "
        f"{fixed(data.num('today_over_baseline'), 2)}×{acc}; a fresh `python -c 'import torch'` "
        f"alone takes {fixed(data.num('python_import_torch_seconds', 'median'), 1)} s"
    )
    return Row(label, what, figure)


@row
def run_wall(results: Results) -> Row:
    data = results.load("run_wall.json", "python benchmarks/run_wall.py")
    return _run_wall_row(data, runs_what="with its defaults", label="run_wall.py")


@row
def run_wall_mnist(results: Results) -> Row:
    data = results.load("run_wall_mnist.json", "python benchmarks/run_wall.py --mnist-like")
    return _run_wall_row(
        data,
        runs_what="on a 10,000-image 28×28 `.npz` made from the digits (`--latent-dim 16`)",
        label="run_wall.py --mnist-like",
    )
