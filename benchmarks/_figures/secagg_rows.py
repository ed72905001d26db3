"""Rows of the secure-aggregation benchmarks."""

from __future__ import annotations

import re

from .formats import (
    count,
    fixed,
    join,
    micro,
    percent,
    power,
    seconds,
    sig,
    span,
    times,
)
from .results import Node, Results
from .table import Row, row


def _secagg_scenario(results: Results, name: str) -> Node:
    data = results.load("secagg.json", "python benchmarks/secagg.py")
    return data.find("results", scenario__name=name)


def _flower_version(results: Results) -> str:
    meta = results.load("secagg.json", "python benchmarks/secagg.py")["meta"]
    found = re.search(r"Flower (\d+(?:\.\d+)+)", meta.text("flower_reference"))
    if not found:
        raise meta["flower_reference"]._fail("expected 'Flower X.Y' in the text")
    return found.group(1)


@row
def secagg_complete(results: Results) -> Row:
    r = _secagg_scenario(results, "complete N=100")
    s = r["scenario"]
    clients, dropouts = s.integer("clients"), s.integer("dropouts")
    client_runs = [n.num() for n in r.items("client_over_floor_per_run")]
    server_runs = [n.num() for n in r.items("server_over_floor_per_run")]
    repeats = r.integer("repeats")
    flower = _flower_version(results)
    per_value = r.num("client_bytes_per_stage", "MASKED_INPUT") / s.num("length")
    what = (
        f"N = {clients}, {s.text('graph')} graph, t = {s.integer('threshold')}, "
        f"{count(s.num('length'))} values, {percent(dropouts / clients)} % dropping before "
        f"masked input; median of {repeats} rounds"
    )
    figure = (
        f"client {seconds(r.num('client_seconds_mean'))} "
        f"({r.num('flower_client_speedup'):.0f}× less than Flower {flower}'s "
        f"{seconds(r.num('flower_client_seconds_recorded'))}; "
        f"{times(r.num('client_over_floor'))} its mask-generation floor, "
        f"{span(min(client_runs), max(client_runs), sig)}× over the {repeats} rounds), "
        f"server {seconds(r.num('server_seconds'))} "
        f"({r.num('flower_server_speedup'):.0f}× less than Flower's "
        f"{seconds(r.num('flower_server_seconds_recorded'))}; "
        f"{times(r.num('server_over_floor'))} its floor, "
        f"{span(min(server_runs), max(server_runs), sig)}×), "
        f"{count(r.num('client_bytes_total'))} bytes sent per client ({sig(per_value)} bytes per "
        "value at masked input)"
    )
    return Row("secagg.py", what, figure)


@row
def secagg_plus(results: Results) -> Row:
    r = _secagg_scenario(results, "secagg+ N=1000")
    s = r["scenario"]
    clients, dropouts, degree = s.integer("clients"), s.integer("dropouts"), s.integer("degree")
    what = f"SecAgg+ N = {clients}, k = {degree}, t = {s.integer('threshold')}, {dropouts} dropouts"
    figure = (
        f"client {seconds(r.num('client_seconds_mean'))} "
        f"({times(r.num('client_over_floor'))} floor), "
        f"server {seconds(r.num('server_seconds'))} "
        f"({times(r.num('server_over_floor'))} floor: summing {count(clients - dropouts)} inputs "
        f"and routing {count(clients * degree)} ciphertexts are not in the floor) "
        f"(Flower: {seconds(r.num('flower_client_seconds_recorded'))} / "
        f"{seconds(r.num('flower_server_seconds_recorded'))})"
    )
    return Row("secagg.py", what, figure)


@row
def secagg_client(results: Results) -> Row:
    data = results.load("secagg_client.json", "python benchmarks/secagg_client.py")
    sc = data["meta"]["scenario"]
    summary = data["summary"]

    def clock(kind: str) -> str:
        c = summary[kind]
        return (
            f"client {fixed(c.num('client_seconds') * 1000, 1)} ms = "
            f"{times(c.num('client_over_expand_floor'))} the mask floor (`prg.expand`), "
            f"{times(c.num('client_over_ctr_mode_floor'))} plain AES-CTR mode's keystream; "
            f"the masks plus the client's X25519 agreements alone: "
            f"{times(c.num('lower_bound_over_expand_floor'))} the floor"
        )

    what = (
        f"one client of N = {sc.integer('clients')} ({sc.text('graph')} graph, t = "
        f"{sc.integer('threshold')}, {count(sc.num('length'))} values, "
        f"{sc.integer('dropouts')} dropping before masked input), every message serialized; "
        f"medians over clients and {len(data.items('rounds'))} rounds"
    )
    wall = summary["wall"]
    exact = "exact" if data.flag("exact_sum") else "NOT exact"
    figure = (
        f"CPU time: {clock('cpu')}; wall clock: {fixed(wall.num('client_seconds') * 1000, 1)} ms, "
        f"{times(wall.num('client_over_expand_floor'))} / "
        f"{times(wall.num('client_over_ctr_mode_floor'))} / "
        f"{times(wall.num('lower_bound_over_expand_floor'))}; sum {exact}"
    )
    return Row("secagg_client.py", what, figure)


@row
def secagg_scaling(results: Results) -> Row:
    data = results.load("secagg_scaling.json", "python benchmarks/secagg.py --suite scaling")
    fit = data["scaling"]
    rows = data.items("results")
    if not rows:
        raise data["results"]._fail("no rows")
    first = rows[0]["scenario"]
    degrees = {r.integer("scenario", "degree") for r in rows}
    thresholds = {r.integer("scenario", "threshold") for r in rows}
    if len(degrees) != 1 or len(thresholds) != 1:
        raise data["results"]._fail("expected one (k, t) for every N")
    ns = [n.integer() for n in fit.items("clients")]
    largest = max(rows, key=lambda r: r.integer("scenario", "clients"))
    stages = ", ".join(
        f"{stage} {power(value.num())}" for stage, value in fit.fields("server_stage_exponents")
    )
    what = (
        f"SecAgg+ server cost against N = {join([str(n) for n in ns], ' / ')} at k = "
        f"{first.integer('degree')}, t = {first.integer('threshold')}, "
        f"{percent(first.num('dropouts') / first.num('clients'))} % dropping before masked "
        "input; least-squares fit of log time on log N, median of "
        f"{data.integer('meta', 'repeats')}"
    )
    figure = (
        f"server ∝ {power(fit.num('server_exponent'))} (its mask floor "
        f"{power(fit.num('server_floor_exponent'))}, server/floor "
        f"{power(fit.num('server_over_floor_exponent'))}; by stage: {stages}); mean client "
        f"{power(fit.num('client_exponent'))}; at N = "
        f"{largest.integer('scenario', 'clients')}: server {seconds(largest.num('server_seconds'))}"
        f" = {times(largest.num('server_over_floor'))} its floor"
    )
    return Row("secagg.py --suite scaling", what, figure)


@row
def secagg_scale(results: Results) -> Row:
    data = results.load("secagg_scale.json", "python benchmarks/secagg_scale.py")
    rows = data.items("rows")
    if not rows:
        raise data["rows"]._fail("no rows")

    def commit(r: Node) -> str | None:
        return r.text("commit") if r.has("commit") and r["commit"].value is not None else None

    # Rows merged from a run on other code say which build they measured.
    commits = [c for c in map(commit, rows) if c is not None]
    usual = max(sorted(set(commits)), key=commits.count) if commits else None

    def one(r: Node) -> str:
        extra = "" if r.flag("exact_sum") else ", sum NOT exact"
        if commit(r) not in (None, usual):
            extra += f", measured on the earlier build {commit(r)}"
        if r.integer("length") != 83_850:
            extra += f", {count(r.num('length'))} values"
        client_more = server_more = held = ""
        if r.has("context"):
            c = r["context"]
            client_more = (
                f" ({times(c.num('client_over_floor_plus_signatures'))} with its Ed25519 work)"
            )
            server_more = (
                f" ({times(c.num('server_over_floor_plus_signatures_and_reconstruction'))} with "
                "its Ed25519 verifications and Shamir reconstruction)"
            )
        if r.has("server_alone") and r.has("context"):
            alone = r["server_alone"]
            ratio = r["context"].num("server_alone_over_floor_plus_signatures_and_reconstruction")
            server_more += (
                f", replayed alone in a fresh process {seconds(alone.num('server_seconds'))} "
                f"({times(ratio)} on the same terms)"
            )
        if r.has("server_held_bytes_max"):
            held = f", the server holding at most {sig(r.num('server_held_bytes_max') / 2**20)} MiB"
        if r.has("identity") and r["identity"].has("enrolment_file_bytes"):
            ids = r["identity"]
            held += (
                f"; a client pins its {count(round(ids.num('enrolment_file_bytes')))} B "
                f"enrolment, not the {count(round(ids.num('registry_file_bytes')))} B registry, "
                f"and its roster part carries "
                f"{count(round(ids.num('roster_identity_section_bytes')))} B of proven identity "
                "keys"
            )
        return (
            f"N = {count(r.num('clients'))} (k = {r.integer('degree')}, t = "
            f"{r.integer('threshold')}{extra}): "
            f"client {seconds(r.num('client_seconds'))} = "
            f"{times(r.num('client_over_floor'))} its floor{client_more}, "
            f"{count(round(r.num('client_bytes_up_total')))} B up / "
            f"{count(round(r.num('client_bytes_down_total')))} B down; server "
            f"{seconds(r.num('server_seconds'))} = {times(r.num('server_over_floor'))} its "
            f"floor{server_more}; peak RSS {count(round(r.num('peak_rss_mib')))} MiB{held}"
        )

    fit = data["exponents"]

    def grow(key: str) -> str:
        value = fit.opt_num(key) if fit.has(key) else None
        return "—" if value is None else power(value)

    fits = (
        f"fits over N = {join([str(n.integer()) for n in fit.items('clients')], ' / ')}: client "
        f"{grow('client_seconds')} (floor {grow('client_floor')}), bytes up "
        f"{grow('client_bytes_up')}, down {grow('client_bytes_down')}; server "
        f"{grow('server_seconds')} (floor {grow('server_floor')}"
        + (
            f", replayed alone {grow('server_alone_seconds')}"
            if fit.has("server_alone_seconds")
            else ""
        )
        + "); peak RSS "
        f"{grow('server_peak_rss_mib')}, held by the server {grow('server_held_bytes')}"
    )
    big = data["bytes_at_largest_n"]
    per = (
        f"at the largest N a client sends {times(big.num('up_over_vector'), 4)} the vector's "
        f"{count(big.num('vector_bytes'))} B and receives "
        f"{times(big.num('down_over_vector'), 2)} of it"
    )
    what = (
        "active SecAgg+, one round in process (one child process per N), finder's k, t for "
        "5 % corrupted / 5 % dropouts, 5 % dropping before masked input, 83,850 values; floors = "
        "the primitives the protocol must run (client: its masks, 2 X25519 per neighbour, share "
        "AEAD, Shamir sharing; server: mask regeneration, dropped-pair X25519, input sums), "
        "same run; the server is also timed replayed alone (server_replay.py: what it was given, "
        "in a fresh process, publishing the same bytes)"
    )
    figure = "; ".join([one(r) for r in rows] + [fits, per])
    return Row("secagg_scale.py", what, figure)


@row
def secagg_flower_scale(results: Results) -> Row:
    data = results.load(
        "secagg_flower_scale.json",
        "python benchmarks/secagg_flower_scale.py --clients 1000 --loopback",
    )
    inproc, flower, ratios = data["in_process"], data["flower"], data["ratios"]
    exact = inproc.flag("exact") and flower.flag("exact")
    what = (
        f"one active SecAgg+ round, N = {count(data.num('clients'))} (k = "
        f"{data.integer('degree')}, t = {data.integer('threshold')}, n_C = "
        f"{data.integer('corrupted')}), {count(data.num('vector_length'))} values, 5 % dropping "
        "before masked input: privfed's SecAgg app in Flower's simulation engine (2 Ray CPUs) "
        "against run_protocol and against privfed's Flower code without Ray (a Grid double "
        "in this process), all three in the same run"
    )
    ratio, goal = ratios.num("flower_over_in_process_wall"), ratios.num("goal_wall_ratio")
    figure = (
        f"Flower {seconds(flower.num('wall_s'))} vs in process {seconds(inproc.num('wall_s'))}: "
        f"{times(ratio)} (goal ≤ {times(goal)}, {'met' if ratio <= goal else 'not met'}; Flower "
        "runs two ClientApps at once on the 2 cores, the in-process round one client after "
        "another); server work "
        f"{times(ratios.num('flower_over_in_process_server_work'))}; bytes up "
        f"{times(ratios.num('flower_over_in_process_bytes_up'), 4)}; "
        f"{'exact sums' if exact else 'sum NOT exact'}; without Ray (privfed's Flower layer "
        f"alone) {times(ratios.num('loopback_over_in_process_wall'))}; Flower's engine over "
        f"that layer {times(ratios.num('flower_over_loopback_wall'))}; the config a node "
        f"downloads {count(flower.num('config_bytes'))} B"
    )
    return Row("secagg_flower_scale.py", what, figure)


@row
def secagg_grinding(results: Results) -> Row:
    data = results.load("secagg_grinding.json", "python benchmarks/secagg.py --suite grinding")
    g = data["grinding"]

    def rates(rows: Node) -> str:
        return " / ".join(f"{100 * rows[str(i)].num('success_rate'):.0f} %" for i in range(4))

    committee = g["committee"]
    settings = committee["settings"]
    parts = [
        f"roster-seeded graph (before): {rates(g['roster_selection'])} with 0 / 1 / 2 / 3 honest "
        f"advertisers left out ({g.integer('trials')} trials each)"
    ]
    for name in ("kappa={k},D=0", "kappa=3,D=0", "kappa={k},D=1"):
        key = name.format(k=committee.integer("default_committee_size"))
        setting = settings[key]
        parts.append(
            f"committee κ = {setting.integer('committee_size')}, D = "
            f"{setting.integer('committee_dropouts')}: {rates(setting['by_excluded'])}"
        )
    parts.append(f"a fixed random graph: {100 * committee.num('fixed_random_graph_success'):.1f} %")
    what = (
        f"graph grinding by a lying server, n = {g.integer('n')}, k = {g.integer('degree')}, "
        f"{g.integer('colluders')} colluders: how often some honest client ends up with only "
        "colluding neighbours; committee rows 100 trials (κ = the config's default; 3 and "
        "D = 1 show what sizes it)"
    )
    return Row("secagg.py --suite grinding", what, "; ".join(parts))


@row
def secagg_parameters(results: Results) -> Row:
    grid = results.load("secagg_parameters.json", "python benchmarks/secagg_parameters.py")
    table = results.load(
        "secagg_parameters_google_table.json",
        "python benchmarks/secagg_parameters.py --google-table",
    )
    matched, compared = (
        grid.integer("matches_google", "matched"),
        grid.integer("matches_google", "compared"),
    )
    if matched == compared:
        published = f"all {compared} published answers on the benchmark's grid reproduced"
    else:
        published = f"{matched} of {compared} published answers on the benchmark's grid reproduced"
    rows = table.items("rows")
    differ = [r for r in rows if not r.flag("matches")]
    deliberate = [r for r in differ if r.flag("deliberate_difference")]
    same = len(rows) - len(differ)
    google = f"{same} of {len(rows)} rows of Google's finder table"
    if not differ:
        google = f"all {len(rows)} rows of Google's finder table"
    elif len(deliberate) == len(differ):
        google += f" (the {len(differ)} differences are deliberate and documented)"
    else:
        google += (
            f" ({len(deliberate)} of the {len(differ)} differences are deliberate and documented;"
            f" {len(differ) - len(deliberate)} are not explained)"
        )
    return Row("secagg_parameters.py", "SecAgg+ (k, t) finder", f"{published}; {google}")


@row
def secagg_primitives(results: Results) -> Row:
    data = results.load("secagg_primitives.json", "python benchmarks/bench_secagg_primitives.py")

    def op(pattern: str) -> tuple[float, re.Match[str]]:
        item, found = data.match("results", "operation", pattern)
        return item.num("microseconds"), found

    aes, aes_m = op(r"^expand ([\d,]+) \(AES-256-CTR")
    chacha, _ = op(r"^expand [\d,]+ \(ChaCha20")
    mt, _ = op(r"^expand [\d,]+ \(MT19937")
    x25519, _ = op(r"^x25519 KeyPair\.agree \(key kept parsed\)$")
    split, split_m = op(r"^shamir split (\d+)-of-(\d+)$")
    combine, combine_m = op(r"^shamir combine (\d+) shares$")
    checked, checked_m = op(r"^shamir combine (\d+) shares \(checked\)$")
    extra = int(checked_m.group(1)) - int(combine_m.group(1))
    figure = (
        f"{aes_m.group(1)}-value AES-256-CTR mask {micro(aes)} "
        f"(ChaCha20 {micro(chacha)}, MT19937 {micro(mt)}); X25519 with a parsed key "
        f"{micro(x25519)}; Shamir split {split_m.group(1)}-of-{split_m.group(2)} {micro(split)}, "
        f"combine from {combine_m.group(1)} shares {sig(combine / 1000)} ms "
        f"({micro(checked)} when {extra} more are checked)"
    )
    return Row("bench_secagg_primitives.py", "primitive costs", figure)
