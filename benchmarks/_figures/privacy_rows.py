"""Rows of the distributed-DP and factory-privacy benchmarks."""

from __future__ import annotations

import math
import re

from .formats import (
    count,
    epsilon,
    fixed,
    join,
    percent,
    plural,
    points,
    sig,
    span,
)
from .results import Node, Results
from .table import Row, row


@row
def distributed_dp(results: Results) -> Row:
    data = results.load("distributed_dp.json", "python benchmarks/distributed_dp.py")
    noise = data.items("noise")
    epsilons = sorted({r.num("epsilon") for r in noise})
    clients = sorted({r.integer("clients") for r in noise})
    summary = data["summary"]
    gaps: dict[tuple[int, float, str], float] = {}
    gap_key = next(
        (k for k, _ in summary.fields() if k.startswith("accuracy_minus_central_at_eps")), None
    )
    if gap_key is None:
        raise summary._fail("no field 'accuracy_minus_central_at_eps...'")
    gap_eps = gap_key.removeprefix("accuracy_minus_central_at_eps")
    for key, value in summary.fields(gap_key):
        found = re.fullmatch(r"n=(\d+),dropout=([\d.]+),(.+)", key)
        if not found:
            raise value._fail(f"unexpected key {key!r}")
        gaps[(int(found.group(1)), float(found.group(2)), found.group(3))] = value.num()
    n_acc = sorted({k[0] for k in gaps})
    if len(n_acc) != 1:
        raise summary[gap_key]._fail("expected accuracy gaps for one client count")
    n = n_acc[0]
    dropout = max(k[1] for k in gaps)

    def gap(rate: float, model: str) -> str:
        if (n, rate, model) not in gaps:
            raise summary[gap_key]._fail(f"no gap for n={n}, dropout={rate:g}, {model}")
        return points(gaps[(n, rate, model)])

    shares = [r.num("noise_share_of_client_seconds") for r in data.items("cost")]
    what = (
        f"distributed vs central noise, {data.text('settings', 'dataset')}, ε ∈ "
        f"{{{', '.join(epsilon(e) for e in epsilons)}}}, "
        f"{' and '.join(str(c) for c in clients)} clients"
    )
    figure = (
        f"Skellam with noise layers: delivered std at most "
        f"{fixed(summary.num('max_ratio_with_excess_removal'), 2)}× central over every accepted "
        f"survivor set; accuracy at ε = {gap_eps} (n = {n}) vs central "
        f"{gap(0.0, 'distributed-skellam')} points ({gap(dropout, 'distributed-skellam')} with "
        f"{percent(dropout)} % dropouts); discrete Gaussian (no layers) "
        f"{gap(0.0, 'distributed-gaussian')} points; noise sampling "
        f"{span(min(shares) * 100, max(shares) * 100, lambda v: f'{v:.0f}')} % of client time"
    )
    return Row("distributed_dp.py", what, figure)


@row
def dp_training(results: Results) -> Row:
    data = results.load("dp_training.json", "python benchmarks/dp_training.py")
    meta, goals = data["meta"], data["goals"]
    versus = goals.items("skellam_within_1_point_and_1.1x_central")
    what = (
        f"DP FedAvg, {meta.text('dataset')}, "
        f"{count(meta.num('model', 'parameters'))}-parameter MLP, "
        f"N ∈ {{{', '.join(str(n.integer()) for n in meta.items('clients'))}}}, "
        f"{meta.integer('rounds')} rounds, ε ∈ "
        f"{{{', '.join(epsilon(e.num()) for e in meta.items('epsilons'))}}}: Flower's central "
        "recipe vs privfed distributed Skellam / DG"
    )
    gaps = [g.num("difference_points") / 100 for g in versus]
    ratios = [g.num("noise_over_central") for g in versus]
    gap_rdp = [v.num() for _, v in meta.fields("rdp_gaussian_over_analytic")]
    top = max(n.integer() for n in meta.items("clients"))
    cost = {
        arm: data.find("runs", arm=arm, clients=top, epsilon=meta.num("bits_epsilon"),
                       bits_per_coordinate=bits).num("bytes_per_client")
        for arm, bits in (("skellam", meta.integer("ring_bits")),
                          ("discrete-gaussian", meta.integer("ring_bits")), ("central", 32))
    }  # fmt: skip
    ring = goals.items("b16_within_half_point_of_b32")
    audit = goals["audit_below_claim_and_positive_without_dp"]
    parts = [
        f"Skellam ({meta.integer('ring_bits')} bits) vs central accuracy "
        f"{span(min(gaps), max(gaps), points)} points, noise "
        f"{span(min(ratios), max(ratios), lambda v: fixed(v, 2))}× central "
        f"(goal ≤ 1.1×: {sum(g.flag('met') for g in versus)} of {len(versus)} settings met; "
        f"the RDP accountant alone {span(min(gap_rdp), max(gap_rdp), lambda v: fixed(v, 2))}×)",
        "b = 16 vs 32: "
        + join([points(g.num("difference_points") / 100) for g in ring])
        + " points",
        "bytes per client at N = "
        + str(top)
        + ": "
        + join(
            [
                f"{arm} {sig(cost[arm] / 1000, 2)} kB"
                for arm in ("skellam", "discrete-gaussian", "central")
            ]
        ),
        f"one-run audit ε lower bound {fixed(audit.num('skellam_lower_bound'), 2)} with Skellam "
        f"(claim {fixed(audit.num('skellam_claim'), 1)}), "
        f"{fixed(audit.num('none_lower_bound'), 2)} without DP; mean of "
        f"{plural(len(meta.items('seeds')), 'seed')}",
    ]
    return Row("dp_training.py", what, join(parts, "; "))


@row
def factory_privacy(results: Results) -> Row:
    command = (
        "python benchmarks/factory_privacy.py --make-npz --kinds gaussian,mixture "
        "--epsilons 1,3,10,inf --seeds 0,1,2 --partitions single-class,dirichlet:0.1 "
        "--latent-dim 48 --mixture-components 3 --classifier mlp --fedavg-rounds 3 "
        "--synthetic-per-class 2600 --unlearning-epsilons inf,1"
    )
    data = results.load("factory_privacy.json", command)
    setting = data["setting"]
    summary = data["summary"]
    epsilons = [n.opt_num() for n in setting.items("epsilons")]
    classifier = setting["classifier"]
    rows = data.items("rows")

    def cell(key: str) -> str:
        node = summary[key]
        return f"{fixed(node.num('mean'), 3)} ± {fixed(node.num('spread') / 2, 3)}"

    def eps_key(e: float | None) -> str:
        return "inf" if e is None else f"{e:g}"

    def cost(part: str, kind: str) -> str:
        mine = [r for r in rows if r.text("partition") == part and r.text("factory") == kind]
        kb = sum(r.num("bytes_per_client") for r in mine) / len(mine) / 1000
        cpu = sum(r.num("client_cpu_seconds") for r in mine) / len(mine)
        return f"{kind} {sig(kb, 2)} kB, {sig(cpu, 2)} s"

    def equal_steps(part: str) -> str:
        key = f"{part} centralized_equal_steps"
        if not summary.has(key) or not summary[key].integer("n"):
            return ""
        return f" (at the synthetic side's optimizer steps: {cell(key)})"

    parts = []
    for part in (n.text() for n in setting.items("partitions")):
        n_seeds = summary[f"{part} mixture eps=inf"].integer("n")
        kinds = [
            f"{kind} " + join([cell(f"{part} {kind} eps={eps_key(e)}") for e in epsilons])
            for kind in ("mixture", "gaussian")
        ]
        parts.append(
            f"{part} ({plural(n_seeds, 'seed')}): "
            + "; ".join(kinds)
            + f"; centralized {cell(f'{part} centralized')}"
            + equal_steps(part)
            + ", "
            f"FedAvg {cell(f'{part} fedavg')} ({setting.integer('fedavg', 'rounds')} rounds); "
            "bytes and client CPU seconds per client (all factories, mean over runs): "
            + ", ".join(cost(part, kind) for kind in ("mixture", "gaussian"))
        )
    checks = data.items("unlearning_check")
    if checks:
        verdicts = [
            f"{c.text('factory')} ε = {epsilon(c.opt_num('target_epsilon'))}: AUC "
            f"{fixed(c.num('auc_original', 'estimate'), 3)} → "
            f"{fixed(c.num('auc_unlearned', 'estimate'), 3)} (retrained "
            f"{fixed(c.num('auc_retrained', 'estimate'), 3)}), "
            + ("accepted" if c.flag("accepted") else "REJECTED")
            + (
                ", the attacker sees the client in the original"
                if c.flag("detects_original")
                else ", the attacker does not see the client (no power)"
            )
            for c in checks
        ]
        parts.append(
            f"MIA unlearning check (client 0, {checks[0].text('partition')}, seed 0): "
            + "; ".join(verdicts)
        )
    what = (
        f"factory-synthetic accuracy (mean ± half spread over seeds) vs "
        f"ε ∈ {{{', '.join(epsilon(e) for e in epsilons)}}} on a 10,000-image 28×28 MNIST-like "
        f"`.npz`: public PCA-{setting.integer('latent_dim')}, mixtures of ≤ "
        f"{setting.integer('mixture_components')} components, "
        f"{classifier.text('architecture').upper()} trained {classifier.integer('epochs')} "
        f"epochs on {count(classifier.integer('synthetic_per_class'))} synthetic images per "
        "class (centralized: the same classifier and epochs on the ~650 pooled private "
        "images per class)"
    )
    return Row("factory_privacy.py", what, " — ".join(parts))


@row
def factory_run_time(results: Results) -> Row:
    data = results.load("factory_run_time.json", "python benchmarks/factory_run_time.py")
    stages = data["stage_seconds"]
    load = data.items("load_average_before_after")
    what = (
        "wall time of one whole `privfed run --engine factory` (mixture, PCA-48, ε = 3, MLP on "
        "2,600 synthetic images per class, audit on) on the 10,000-image 28×28 MNIST-like "
        "`.npz`, single-class silos, baselines off"
    )
    figure = (
        f"{fixed(data.num('wall_seconds'), 1)} s (goal ≤ {fixed(data.num('goal_seconds'), 0)} s "
        f"on two cores; shared machine, load average {fixed(load[0].num(), 1)} → "
        f"{fixed(load[1].num(), 1)}): classifier {fixed(stages.num('classifier'), 1)} s, "
        f"factories {fixed(stages.num('factories'), 1)} s, synthesis "
        f"{fixed(stages.num('synthesis'), 1)} s, audit {fixed(stages.num('audit'), 1)} s; "
        f"accuracy {fixed(data.num('factory_accuracy'), 3)}"
    )
    return Row("factory_run_time.py", what, figure)


@row
def factory_privacy_digits(results: Results) -> Row:
    data = results.load("factory_privacy_digits.json", "python benchmarks/factory_privacy.py")
    setting = data["setting"]
    seeds = [n.integer() for n in setting.items("seeds")]
    size = re.search(r"(\d+)x(\d+)", setting.text("npz"))
    if not size:
        raise setting["npz"]._fail("expected an 'HxW' size in the description")
    rows = data.items("rows")

    def by_eps(dataset: str, fac: str) -> list[Node]:
        picked = [r for r in rows if r.text("dataset") == dataset and r.text("factory") == fac]
        if not picked:
            raise data["rows"]._fail(f"no rows for dataset {dataset!r}, factory {fac!r}")
        return sorted(
            picked,
            key=lambda r: (
                math.inf if r.value["target_epsilon"] is None else r.num("target_epsilon")
            ),
        )

    gaussian, edm = by_eps("digits", "gaussian"), by_eps("digits", "edm")
    eps = [epsilon(r.opt_num("target_epsilon")) for r in gaussian]
    edm_dp = [fixed(r.num("accuracy"), 2) for r in edm if r.opt_num("target_epsilon") is not None]
    edm_off = [fixed(r.num("accuracy"), 2) for r in edm if r.opt_num("target_epsilon") is None]
    base = data["baselines"]["digits"]
    what = (
        f"factory-synthetic accuracy vs ε ∈ {{{', '.join(eps)}}}, digits and a "
        f"{size.group(1)}×{size.group(2)} `.npz`, "
        f"seed{'s' if len(seeds) != 1 else ''} {', '.join(str(s) for s in seeds)}"
    )
    figure = (
        f"Gaussian factories {join([fixed(r.num('accuracy'), 2) for r in gaussian])} (digits), "
        f"FedAvg {fixed(base.num('fedavg'), 2)}, centralized {fixed(base.num('centralized'), 2)}; "
        f"EDM at a CPU-sized configuration stays near chance under DP ({join(edm_dp)}"
        + (f"; {join(edm_off)} without DP)" if edm_off else ")")
    )
    return Row("factory_privacy.py (digits)", what, figure)
