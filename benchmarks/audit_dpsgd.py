"""How tightly privfed's audits bound DP-SGD: black-box, input-space and white-box, one run each.

One small MLP (64 → 512 → 10, 38,410 parameters) is trained with privfed's own DP-SGD step
(:func:`privfed.engines.factory.dpsgd.dp_sgd_step`, full batch q = 1, replace-one
adjacency, clip C = 1) on sklearn's bundled digits (8×8, 1,797 images), at
ε = 1, 4, 8 (δ = 1e-5, the noise calibrated by
:func:`privfed.dp.calibrate_noise_multiplier`) and without DP (σ = 1e-6, clipping
kept).  Each training run carries, at once:

* ``black-box held-out``: the loss attack (the target's logit-scaled confidence)
  on its 600 training records against 597 held-out ones; ε_lb by a seeded
  held-out split (and the median and spread over 5 splits).  These records share
  one model: NOT independent trials, so this bound is a heuristic (printed with
  its caveat).
* ``input-space one-run``: 600 canary images, each present with one of two wrong
  labels (a_j if its bit is 1, b_j otherwise: a replace-one pair, so the number
  of records is fixed); score log p(a_j|x_j) − log p(b_j|x_j) on the final model
  (a black-box, last-iterate view).
* ``white-box one-run``: 32,000 Dirac gradient canaries
  (:class:`privfed.audit.DiracGradientCanaries`, ±C on distinct coordinates);
  score the sum over iterates of the noisy gradient minus the rest of the
  batch's known clipped sum (the all-iterates threat model; full batch, so that
  sum is a public function of the iterate and the data).  Also the last-iterate
  score −(θ_T − θ_0).

Both one-run bounds choose the guess rule on a held-out quarter of the canaries
from the grid declared below (:func:`privfed.audit.one_run_audit_selected`).
The grid, the canary count and the model size were chosen by simulating the
estimator on exact Gaussian canary scores (more canaries raise its ceiling: at
ε = 8 its mean ε_lb is about 3.4 with 8,000 canaries and 4.0 with 32,000), never
from an audited run's scores.  The canaries' μ depends on ε only (σ grows like
√T), so a few full-batch steps keep the run short without changing their test.

A known-truth simulation, with the canaries' exact score law (each white-box
canary is a Gaussian test with μ = 2√T/σ), measures the estimator's
false-exceedance rate (how often ε_lb exceeds the true ε of that Gaussian
test) and its expected value: the ceiling this estimator reaches on this
mechanism with this many canaries.

Run:  python benchmarks/audit_dpsgd.py [--steps T] [--reps R] [--quick]
Writes benchmarks/results/audit_dpsgd.json and audit_dpsgd.png.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from privfed import audit, dp

RESULTS = Path(__file__).resolve().parent / "results"
DELTA = 1e-5
ALPHA = 0.05
#: The declared grid of guess rules (chosen from simulations, before any audited run).
GUESS_FRACTIONS = (0.002, 0.005, 0.01, 0.02, 0.05)
IN_FRACTIONS = (0.5, 1.0)
CALIBRATION_FRACTION = 0.25
HIDDEN = 512
WHITE_BOX_CANARIES = 32_000


def _one_run(scores: np.ndarray, included: np.ndarray, seed: int) -> audit.OneRunAudit:
    return audit.one_run_audit_selected(
        scores,
        included,
        spec=audit.BoundSpec(DELTA, ALPHA),
        selection="held-out",
        guess_fractions=GUESS_FRACTIONS,
        in_fractions=IN_FRACTIONS,
        split=audit.HeldOutSplit(CALIBRATION_FRACTION, seed),
    )


def _data(seed: int) -> dict[str, Any]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(y.size)
    members, nonmembers, canaries = order[:600], order[600:1197], order[1197:]
    # Two distinct wrong labels per canary image: a (bit 1) and b (bit 0).
    shift = rng.integers(1, 10, size=(canaries.size, 2))
    shift[:, 1] = np.where(shift[:, 1] == shift[:, 0], shift[:, 1] % 9 + 1, shift[:, 1])
    labels = (y[canaries][:, None] + shift) % 10
    return {
        "x": x / 16.0,
        "y": y,
        "members": members,
        "nonmembers": nonmembers,
        "canaries": canaries,
        "labels": labels,
        "bits": rng.random(canaries.size) < 0.5,
    }


def _train(sigma: float, steps: int, data: dict[str, Any], seed: int) -> dict[str, Any]:
    import torch

    from privfed.engines.factory.dpsgd import DPSGDConfig, GaussianNoiseSource, dp_sgd_step

    torch.manual_seed(seed)
    x = torch.tensor(data["x"], dtype=torch.float32)
    canary_labels = np.where(data["bits"], data["labels"][:, 0], data["labels"][:, 1])
    rows = np.concatenate([data["members"], data["canaries"]])
    targets = np.concatenate([data["y"][data["members"]], canary_labels])
    train = torch.cat([x[rows], torch.tensor(targets, dtype=torch.float32)[:, None]], 1)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10)
    )

    def loss(params: dict[str, Any], row: Any, aux: Any) -> Any:
        out = torch.func.functional_call(model, params, (row[:64].unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, row[64].long().unsqueeze(0))

    config = DPSGDConfig(
        noise_multiplier=sigma, clip_norm=1.0, sampling_rate=1.0, max_physical_batch=1200
    )
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    canaries = audit.DiracGradientCanaries(shapes, WHITE_BOX_CANARIES, clip_norm=1.0, seed=seed + 1)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
    batches = torch.Generator().manual_seed(seed + 2)
    noise = GaussianNoiseSource(torch.Generator().manual_seed(seed + 3))
    start = time.perf_counter()
    for _ in range(steps):
        dp_sgd_step(
            model,
            loss,
            train,
            config,
            optimizer,
            batch_generator=batches,
            noise=noise,
            draw_aux=lambda count: torch.zeros(count, 1),
            canaries=canaries,
        )
    seconds = time.perf_counter() - start
    with torch.no_grad():
        logp = torch.log_softmax(model(x), dim=1).numpy().astype(np.float64)
    final = dict(model.named_parameters())
    return {
        "logp": logp,
        "canaries": canaries,
        "last_iterate": canaries.last_iterate_scores(initial, final),
        "seconds": seconds,
        "accuracy": float(
            (logp[data["nonmembers"]].argmax(1) == data["y"][data["nonmembers"]]).mean()
        ),
    }


def _audit_run(claim: float | None, sigma: float, steps: int, seed: int) -> dict[str, Any]:
    data = _data(seed)
    run = _train(sigma, steps, data, seed)
    logp, y = run["logp"], data["y"]
    true_p = np.exp(logp[np.arange(y.size), y])
    phi = audit.logit_scaled_confidence(true_p)
    members, nonmembers = phi[data["members"]], phi[data["nonmembers"]]
    spec, split = audit.BoundSpec(DELTA, ALPHA), audit.HeldOutSplit(seed=seed)
    held_out = audit.lower_bound_random_split(
        members, nonmembers, spec=spec, split=split, trials=audit.TrialModel.ONE_MODEL
    )
    splits = audit.repeated_split_bounds(
        members, nonmembers, num_splits=5, spec=spec, split=split,
        trials=audit.TrialModel.ONE_MODEL,
    )  # fmt: skip
    rows = data["canaries"]
    input_scores = logp[rows, data["labels"][:, 0]] - logp[rows, data["labels"][:, 1]]
    input_space = _one_run(input_scores, data["bits"], seed)
    canaries = run["canaries"]
    white = _one_run(canaries.scores, canaries.included, seed)
    last = _one_run(run["last_iterate"], canaries.included, seed)

    def ratio(value: float) -> float | None:
        return None if claim is None else value / claim

    bounds = {
        "black_box_held_out": held_out.epsilon_lower_bound,
        "input_space_one_run": input_space.epsilon_lower_bound,
        "white_box_one_run": white.epsilon_lower_bound,
        "white_box_last_iterate": last.epsilon_lower_bound,
    }
    return {
        "claimed_epsilon": claim,
        "noise_multiplier": sigma,
        "canary_mu": 2.0 * np.sqrt(steps) / sigma,
        "accuracy": run["accuracy"],
        "train_seconds": run["seconds"],
        "epsilon_lower_bounds": bounds,
        "ratios": {k: ratio(v) for k, v in bounds.items()},
        "black_box_splits": splits.to_dict(),
        "black_box_auc": audit.auc_score(members, nonmembers),
        "white_box": white.to_dict(),
        "input_space": input_space.to_dict(),
        "statistical_models": {
            "black_box_held_out": held_out.statistical_model,
            "one_run": white.statistical_model,
        },
    }


def _simulate(mu: float, claim: float, m: int, reps: int) -> dict[str, Any]:
    """ε_lb of the white-box estimator on exact Gaussian canary scores (known truth)."""
    truth = dp.gdp_epsilon(mu, DELTA)
    values = []
    for rep in range(reps):
        rng = np.random.default_rng(10_000 + rep)
        bits = rng.random(m) < 0.5
        scores = rng.normal(mu * bits, 1.0)
        values.append(_one_run(scores, bits, rep).epsilon_lower_bound)
    exceed = int(sum(v > truth for v in values))
    return {
        "mu": mu,
        "true_epsilon": truth,
        "claimed_epsilon": claim,
        "canaries": m,
        "reps": reps,
        "mean_epsilon_lower_bound": float(np.mean(values)),
        "max_epsilon_lower_bound": float(np.max(values)),
        "exceedances": exceed,
        "exceedance_rate": exceed / reps,
    }


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dp_rows = [r for r in rows if r["claimed_epsilon"] is not None]
    names = ["black_box_held_out", "input_space_one_run", "white_box_one_run"]
    labels = ["black-box held-out (one model)", "input-space one-run", "white-box one-run"]
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    width = 0.25
    xs = np.arange(len(dp_rows))
    for i, (name, label) in enumerate(zip(names, labels, strict=True)):
        ax.bar(xs + (i - 1) * width, [r["ratios"][name] for r in dp_rows], width, label=label)
    ax.axhline(0.5, color="k", linestyle="--", linewidth=0.8, label="goal 0.5")
    ax.set_xticks(xs, [f"ε = {r['claimed_epsilon']:g}" for r in dp_rows])
    ax.set_ylabel("ε_lb / claimed ε")
    ax.set_title("Auditing privfed's DP-SGD (digits MLP, one run each)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--reps", type=int, default=50, help="simulation repetitions per ε")
    parser.add_argument("--quick", action="store_true", help="ε = 8 only, 3 steps, 10 reps")
    args = parser.parse_args()
    steps, reps = (3, 10) if args.quick else (args.steps, args.reps)
    claims: list[float | None] = [8.0] if args.quick else [1.0, 4.0, 8.0, None]
    rows, simulations = [], []
    for claim in claims:
        sigma = (
            1e-6
            if claim is None
            else dp.calibrate_noise_multiplier(claim, DELTA, sampling_rate=1.0, steps=steps)
        )
        row = _audit_run(claim, sigma, steps, seed=0)
        rows.append(row)
        print(
            json.dumps({k: row[k] for k in ("claimed_epsilon", "epsilon_lower_bounds", "accuracy")})
        )
        if claim is not None:
            simulations.append(_simulate(row["canary_mu"], claim, WHITE_BOX_CANARIES, reps))
            print(json.dumps(simulations[-1]))
    document = {
        "benchmark": "audit_dpsgd",
        "settings": {
            "steps": steps,
            "delta": DELTA,
            "significance": ALPHA,
            "hidden": HIDDEN,
            "white_box_canaries": WHITE_BOX_CANARIES,
            "input_space_canaries": 600,
            "guess_fractions": list(GUESS_FRACTIONS),
            "in_fractions": list(IN_FRACTIONS),
            "calibration_fraction": CALIBRATION_FRACTION,
            "quick": bool(args.quick),
            "cpus": os.cpu_count(),
        },
        "rows": rows,
        "simulation": simulations,
    }
    RESULTS.mkdir(exist_ok=True)
    name = "audit_dpsgd_quick" if args.quick else "audit_dpsgd"
    (RESULTS / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
    _plot(rows, RESULTS / f"{name}.png")
    print(f"wrote {RESULTS / name}.json and .png")


if __name__ == "__main__":
    main()
