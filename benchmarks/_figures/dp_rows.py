"""Rows of the DP noise and audit benchmarks."""

from __future__ import annotations

from .formats import (
    count,
    epsilon,
    fixed,
    join,
    number,
    seconds,
    span,
)
from .results import Node, Results
from .table import Row, row


@row
def dp_noise(results: Results) -> Row:
    data = results.load("dp_noise.json", "python benchmarks/dp_noise.py")
    rows = sorted(data.items("noise"), key=lambda r: r.num("epsilon"))
    if not rows:
        raise data["noise"]._fail("no rows")

    def ratio(r: Node) -> str:
        return f"{r.num('balanced_sum') / r.num('baseline_sum'):.3f}×"

    at10 = data.find("noise", epsilon=10.0)
    timings = data["timings"]
    draws = timings["discrete_gaussian (ChaCha20, CKS rejection)"].num("median_s")
    numpy = timings["numpy default_rng().normal (baseline, not a CSPRNG)"].num("median_s")
    what = f"noise std vs the reference paper's Prop. 4.1 at δ = {number(data.num('delta'))}"
    figure = (
        f'`split="balanced"`: {ratio(rows[0])} (ε = {epsilon(rows[0].num("epsilon"))}) to '
        f"{ratio(rows[-1])} (ε = {epsilon(rows[-1].num('epsilon'))}), {ratio(at10)} at "
        f"ε = {epsilon(at10.num('epsilon'))}; "
        f"{count(data.num('num_values'))} discrete-Gaussian draws from the CSPRNG in "
        f"{seconds(draws)} (numpy's non-cryptographic normal: {seconds(numpy)})"
    )
    return Row("dp_noise.py", what, figure)


@row
def self_audit(results: Results) -> Row:
    data = results.load("self_audit.json", "python benchmarks/self_audit.py")
    settings = data["settings"]
    epsilons = [n.num() for n in settings.items("epsilons")]

    def case(name: str) -> list[Node]:
        return [data.find("rows", epsilon=eps, case=name) for eps in epsilons]

    real, half, simulated = case("privfed"), case("half-noise"), case("simulated")
    tight = [r.num("tightness") for r in half]
    flagged = [epsilon(r.num("epsilon")) for r in half if r.flag("violation_detected")]
    wrongly = [epsilon(r.num("epsilon")) for r in real if r.flag("violation_detected")]
    if len(flagged) == len(half):
        half_text = "flagged at every ε"
    else:
        half_text = f"flagged at ε = {join(flagged) or 'none'} only"
    sim_trials = {r.integer("trials") for r in simulated}
    if len(sim_trials) != 1:
        raise data["rows"]._fail("simulated rows differ in their number of trials")
    what = (
        f"canary audit of the latent release code (d = {settings.integer('dim')}, "
        f"{count(settings.num('real_trials'))} real releases per hypothesis)"
    )
    figure = (
        f"μ_lb/μ = {join([fixed(r.num('tightness'), 2) for r in real])} at "
        f"ε = {join([epsilon(e) for e in epsilons])}"
        + (f" (violation flagged at ε = {join(wrongly)})" if wrongly else "")
        + f"; the half-noise release {half_text} (μ_lb/μ = "
        f"{span(min(tight), max(tight), lambda v: fixed(v, 2))}); simulated audit (accounting "
        f"only, {count(sim_trials.pop())} trials): "
        f"{join([fixed(r.num('tightness'), 2) for r in simulated])}"
    )
    return Row("self_audit.py", what, figure)


@row
def audit_dpsgd(results: Results) -> Row:
    data = results.load("audit_dpsgd.json", "python benchmarks/audit_dpsgd.py")
    settings = data["settings"]
    rows = data.items("rows")
    private = [r for r in rows if r.opt_num("claimed_epsilon") is not None]
    no_dp = [r for r in rows if r.opt_num("claimed_epsilon") is None]

    def ratios(key: str) -> str:
        return join([fixed(r.num("ratios", key), 2) for r in private])

    def tight(s: Node) -> float:
        return s.num("mean_epsilon_lower_bound") / s.num("claimed_epsilon")

    def white(r: Node) -> float:
        return r.num("epsilon_lower_bounds", "white_box_one_run")

    sims = data.items("simulation")
    exceed = sum(s.integer("exceedances") for s in sims)
    reps = sum(s.integer("reps") for s in sims)
    what = (
        f"privfed's DP-SGD on a digits MLP (full batch, {settings.integer('steps')} steps, "
        f"δ = {settings.num('delta'):g}), one run per ε: ε_lb / claimed ε"
    )
    figure = (
        f"at ε = {join([epsilon(r.num('claimed_epsilon')) for r in private])}: white-box "
        f"one-run ({count(settings.num('white_box_canaries'))} Dirac gradient canaries) "
        f"{ratios('white_box_one_run')}; input-space one-run "
        f"({count(settings.num('input_space_canaries'))} canaries) "
        f"{ratios('input_space_one_run')}; black-box held-out (one model, heuristic) "
        f"{ratios('black_box_held_out')}"
        + "".join(f"; no DP: white-box ε_lb = {fixed(white(r), 2)}" for r in no_dp)
        + "; the estimator on exact Gaussian canary scores: mean ε_lb / ε = "
        f"{join([fixed(tight(s), 2) for s in sims])}"
        f", {exceed} of {reps} above the true ε"
    )
    return Row("audit_dpsgd.py", what, figure)
