"""Rows of the engine benchmarks: heterogeneity, ε sweep, statistics, factories, accuracy."""

from __future__ import annotations

import re

from .formats import (
    count,
    epsilon,
    fixed,
    join,
    number,
    plural,
    seconds,
    span,
    times,
)
from .results import Node, Results
from .table import Row, row


def _scheme_names(schemes: list[str]) -> str:
    """``iid, dirichlet-0.01, dirichlet-0.1, ...`` -> ``IID, Dirichlet 0.01 / 0.1, ...``."""
    parts: list[str] = []
    dirichlet: list[str] = []
    for scheme in schemes:
        if scheme.startswith("dirichlet-"):
            if not dirichlet:
                parts.append("")  # placeholder, filled below
            dirichlet.append(scheme.removeprefix("dirichlet-"))
        elif scheme == "iid":
            parts.append("IID")
        elif scheme.startswith("pathological-"):
            k = scheme.removeprefix("pathological-")
            parts.append(f"pathological ({k} classes per client)")
        elif scheme == "single-class":
            parts.append("single-class silos")
        else:
            parts.append(scheme)
    return ", ".join(p or f"Dirichlet {join(dirichlet)}" for p in parts)


@row
def heterogeneity(results: Results) -> Row:
    data = results.load("heterogeneity.json", "python benchmarks/heterogeneity.py")
    rows = data.items("rows")
    if not rows:
        raise data["rows"]._fail("no rows")
    schemes = list(dict.fromkeys(r.text("scheme") for r in rows))
    clients = [r.integer("clients") for r in rows]
    aggregate = sum(r.flag("bit_identical") for r in rows)
    synthetic = sum(r.flag("synthetic_identical") for r in rows)
    what = f"{_scheme_names(schemes)}; {min(clients)} to {max(clients)} clients"
    if aggregate == synthetic == len(rows):
        figure = (
            "the aggregate of the same records (no dropouts) and, with a fixed noise seed, the "
            f"synthetic dataset are bit-identical in all {len(rows)} settings"
        )
    else:
        figure = (
            f"the aggregate of the same records (no dropouts) is bit-identical in {aggregate} of "
            f"{len(rows)} settings, the synthetic dataset (fixed noise seed) in {synthetic}"
        )
    return Row("heterogeneity.py", what, figure)


@row
def epsilon_sweep(results: Results) -> Row:
    data = results.load("epsilon_sweep.json", "python benchmarks/epsilon_sweep.py")

    def at(eps: float) -> Node:
        return data.find("rows", epsilon=eps)

    r10, r1, r05 = at(10), at(1), at(0.5)
    what = (
        "synthetic-trained accuracy on digits vs ε (real-data ceiling "
        f"{fixed(data.num('real_accuracy'), 3)}), no repeats over seeds (differences of a "
        "point or two are within the seed spread of `accuracy_seeds.py`)"
    )

    def pair(r: Node) -> tuple[str, str]:
        return fixed(r.num("accuracy_ours"), 3), fixed(r.num("accuracy_paper"), 3)

    (o10, p10), (o1, p1), (o05, p05) = pair(r10), pair(r1), pair(r05)
    figure = (
        f"ε = {epsilon(r10.num('epsilon'))}: {o10} (ours) vs {p10} (paper calibration); "
        f"ε = {epsilon(r1.num('epsilon'))}: {o1} vs {p1}; "
        f"ε = {epsilon(r05.num('epsilon'))}: {o05} vs {p05}"
    )
    return Row("epsilon_sweep.py", what, figure)


@row
def stats_throughput(results: Results) -> Row:
    data = results.load("stats_throughput.json", "python benchmarks/stats_throughput.py")
    parts = []
    for entry in data.items("by_threads"):
        threads = entry.integer("threads")
        # Newer runs also compare CPU seconds (robust to a loaded machine's waits).
        cpu = (
            f", CPU time {fixed(entry.num('ratio_cpu_seconds_median'), 2)}×"
            if entry.has("ratio_cpu_seconds_median")
            else ""
        )
        parts.append(
            f"{fixed(entry.num('ratio_best'), 2)}× (best) / {fixed(entry.num('ratio_median'), 2)}× "
            f"(median){cpu} at {plural(threads, 'thread')} (load average "
            f"{fixed(entry.num('load_average_1min'), 1)})"
        )
    if not parts:
        raise data["by_threads"]._fail("no thread counts")
    what = (
        f"exact client statistics at d = {data.integer('dim')}, "
        f"{count(data.num('records'))} records vs a bare float64 product of the same shapes, "
        "same run"
    )
    identical = ""
    if data.has("statistics_identical_across_threads"):
        same = data.flag("statistics_identical_across_threads")
        identical = (
            "; identical statistics at every thread count"
            if same
            else ("; statistics DIFFER between thread counts")
        )
    figure = (
        f"{join(parts, '; ')}; goal ≥ {number(data.num('target'))}×{identical}; its tests prove "
        "it bit-identical to the reference"
    )
    return Row("stats_throughput.py", what, figure)


@row
def factory(results: Results) -> Row:
    data = results.load("factory.json", "python benchmarks/factory.py")
    public = data.find("single_class", gaussian_basis="public-pca")
    private = data.find("single_class", gaussian_basis="private-pca")
    seeds = {public.integer("config", "seed"), private.integer("config", "seed")}
    unlearning = data["unlearning"]
    identical = unlearning.flag("buffers_bit_identical")
    what = f"single-class silos on digits, seed {join([str(s) for s in sorted(seeds)], ', ')}"
    figure = (
        f"Gaussian factories {fixed(public.num('factory_accuracy'), 3)} (public PCA) / "
        f"{fixed(private.num('factory_accuracy'), 3)} (private PCA) vs FedAvg "
        f"{fixed(data.num('fedavg_accuracy'), 3)} vs centralized "
        f"{fixed(data.num('centralized_accuracy'), 3)} (see `accuracy_seeds.py` for the spread "
        "over seeds); unlearning a client gives a buffer "
        + ("bit-identical to" if identical else "that DIFFERS from")
        + f" retraining without it ({seconds(unlearning.num('unlearning_seconds'))} vs "
        f"{seconds(unlearning.num('retrain_from_scratch_seconds'))} to retrain)"
    )
    return Row("factory.py", what, figure)


def _median_range(node: Node) -> str:
    return (
        f"{fixed(node.num('median'), 3)} [{fixed(node.num('min'), 3)}, {fixed(node.num('max'), 3)}]"
    )


@row
def accuracy_seeds(results: Results) -> Row:
    data = results.load("accuracy_seeds.json", "python benchmarks/accuracy_seeds.py")
    seeds = [n.integer() for n in data.items("meta", "seeds")]
    if not seeds:
        raise data["meta"]["seeds"]._fail("no seeds")
    latent, fac = data["latent"], data["factory"]
    what = (
        f"both default jobs, {len(seeds)} seeds (design and noise seed "
        f"{span(min(seeds), max(seeds), str)}), audit off"
    )
    figure = (
        f"latent: synthetic (DP) median {_median_range(latent['synthetic_dp'])} vs real private "
        f"data {fixed(latent.num('real', 'median'), 3)} vs noiseless synthetic "
        f"{fixed(latent.num('synthetic_nondp', 'median'), 3)}; factory: factories "
        f"{_median_range(fac['factories'])} vs FedAvg {_median_range(fac['fedavg'])} vs "
        f"centralized {_median_range(fac['centralized'])}"
    )
    return Row("accuracy_seeds.py", what, figure)


@row
def classifier_speed(results: Results) -> Row:
    data = results.load("classifier_speed.json", "python benchmarks/classifier_speed.py")
    meta = data["meta"]
    before = meta["before"]
    digits, mnist = data["datasets"]["digits"], data["datasets"]["mnist-like"]
    found = re.search(r"([\d,]+) (\d+)x(\d+) images", mnist.text("note"))
    if not found:
        raise mnist["note"]._fail("expected 'N HxW images' in the note")

    def acc(ds: Node, when: str) -> str:
        return fixed(ds.num("accuracy", when, "accuracy", "median"), 3)

    def wall(ds: Node, when: str) -> float:
        return ds.num("wall_seconds", when, "median")

    before_text = (
        f"{before.text('classifier').upper()}, {before.integer('classifier_epochs')} epochs, "
        f"{plural(before.integer('num_threads'), 'thread')}"
        + (", baselines" if before.flag("baselines") else ", no baselines")
    )
    what = (
        f"the latent job before ({before_text}) and after (today's defaults: MLP, early "
        f"stopping, baselines off), same run, {len(meta.items('seeds'))} seeds"
    )
    d_before, d_after = wall(digits, "before"), wall(digits, "after")
    m_before, m_after = wall(mnist, "before"), wall(mnist, "after")
    figure = (
        f"digits: synthetic {acc(digits, 'before')} → {acc(digits, 'after')} (median), whole job "
        f"{fixed(d_before, 1)} s → {fixed(d_after, 1)} s ({times(d_after / d_before)}, load "
        f"average {fixed(meta.num('load_average_1min'), 1)}); {found.group(1)}-image "
        f"{found.group(2)}×{found.group(3)} `.npz` made from the digits: {acc(mnist, 'before')} "
        f"→ {acc(mnist, 'after')}, {fixed(m_before, 1)} s → {fixed(m_after, 1)} s "
        f"({times(m_after / m_before)}; `privfed run` on it: "
        f"{fixed(wall(mnist, 'cli_after'), 1)} s wall)"
    )
    return Row("classifier_speed.py", what, figure)
