"""Factory-matrix engine: accuracy of factory-synthetic training vs the privacy target ε.

Usage:
    python benchmarks/factory_privacy.py          # digits/EDM run (measured 17 min, see below)
    python benchmarks/factory_privacy.py --quick  # 2 ε values, 3 EDM steps (smoke test)
    python benchmarks/factory_privacy.py --make-npz --kinds gaussian,mixture \
        --epsilons 1,3,10,inf --seeds 0,1,2 --partitions single-class,dirichlet:0.1 \
        --latent-dim 48 --mixture-components 3 --classifier mlp --fedavg-rounds 3 \
        --synthetic-per-class 2600 --unlearning-epsilons inf,1
        # the committed factory_privacy.json/.png: the 10,000-image 28x28
        # MNIST-like file of classifier_speed.make_mnist_like (--npz PATH for
        # another), partitions x kinds x eps x seeds, JSON + PNG named by --tag

The ``--make-npz`` run: 10 clients, single-class silos and Dirichlet α = 0.1;
public PCA-48 codec (the 5 % public split), Gaussian and mixture (at most 3
public-anchor components) factories; the downstream classifier is the MLP,
trained 10 epochs on 2,600 synthetic images per class (four times the pooled
private count of about 650: synthetic images cost the clients nothing, and
short one-seed measurements on single-class silos gave 0.933 / 0.948 / 0.953
without DP at 650 / 1,300 / 2,600 per class for seed 1); the centralized
baseline trains the same MLP with the same epochs on the pooled private data;
FedAvg (the CNN) runs 3 rounds, once per (partition, seed).  DP noise is
seeded by the seed.  The latent dimension 48 and 3 components were chosen by
one-seed measurements (seed 0, 650 per class, no DP / ε = 3: PCA-32 0.953 /
0.913, PCA-48 0.958 / 0.906, PCA-64 0.953 / 0.907, PCA-96 0.956 / 0.888; 5
components at PCA-64: 0.952 / 0.881).  The MIA unlearning check
(:func:`~privfed.engines.factory.remove_client_verified`, the class-conditional
distance-to-closest-synthetic-record attacker) runs on each kind at each
``--unlearning-epsilons`` value: client 0 of the last partition, seed 0, its
factories refitted as the pipeline fits them and a matrix retrained from
scratch without it as the reference.  FedAvg runs 3 rounds instead of the
issue's 10 to fit the shared 2-core machine.  The JSON is rewritten after every
run (seeds outermost, ``complete`` false until the end); ``--seeds-last-partition``
runs fewer seeds on the last partition when a budget demands it.

The default (no ``--npz``) run below writes ``factory_privacy_digits.json``/``.png``:

Setting: single-class silos (10 clients, client k holds digit k: the FederatedFactory
setting), one factory per (class, client) cell, δ = 1e-5, replace-one adjacency, every
cell calibrated to the target on its own and accounted in parallel (a record lives in
one cell), so the run's ε is the target.  ε ∈ {1, 3, 10, ∞} (∞: no DP), one seed
(seed 0; the DP noise itself comes from the OS CSPRNG for the Gaussian factories and
from the seed for EDM, so a rerun moves the Gaussian rows by a point or two).

Datasets:

* ``digits``: scikit-learn's bundled 8×8 digits (1,797 images).
* ``npz``: an MNIST-like ``.npz`` written by this script -- the same digits
  bilinearly upsampled to 16×16 (not real MNIST, which is not bundled; 16×16
  rather than 28×28 keeps the EDM rows within the CPU budget) -- loaded
  through the ``.npz`` path of :func:`privfed.data.load_dataset`.

Factories:

* Gaussian: a latent Gaussian per cell in a public-PCA basis (16 dimensions,
  fitted on the 5 % public split); at finite ε fitted from one Gaussian release
  of the clipped latent sum and second moment
  (``privfed.engines.moments.planning.plan_latent_release``).
* EDM: a diffusion factory at the configuration that fits the CPU budget --
  UNet channels (8, 16) (40k parameters), 4 Heun sampling steps, 10 optimizer
  steps (Adam, lr 3e-3); at finite ε DP-SGD with clip 1, Poisson rate 0.25 in
  every cell (a fixed rate, so one noise calibration per ε serves all cells;
  expected batch ≈ 30), noise multiplier from
  ``privfed.dp.calibrate_noise_multiplier``; without DP, batches of 32.  Ten
  steps do not train a diffusion model: these rows show what the CPU budget
  buys (about half the digits right without DP, chance level under DP-SGD,
  whose ten noisy steps of ~30 records carry almost no signal), not what EDM
  factories can do; ``--edm-steps`` raises it, at about 0.2 s per DP-SGD step
  per cell on this machine (a diffusion factory needs thousands: a GPU job).

Cost: the committed run took 1,043 s on the shared 2-core machine while other
jobs ran (the DP-SGD EDM rows on the 16×16 ``.npz`` took 150-240 s each and
dominate; the Gaussian rows take 6-40 s); ``--quick`` takes about 3 minutes.

Baselines on the same split (not private): FedAvg with the downstream classifier's
architecture (10 rounds × 1 local epoch) and a centralized classifier on the pooled
private data.  The downstream classifier trains 10 epochs on 200 synthetic images per
class and is evaluated on the real held-out 30 %.

Output: a table on stdout, ``benchmarks/results/factory_privacy.json`` and
``factory_privacy.png``.  Torch runs on one intra-op thread.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privfed.engines.factory import EDMConfig, EDMTrainingConfig, UNetConfig
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import run_factory_pipeline
from privfed.progress import ProgressEvent

RESULTS = Path(__file__).resolve().parent / "results"
EPSILONS: tuple[float, ...] = (1.0, 3.0, 10.0, math.inf)
DELTA = 1e-5
EDM_RATE = 0.25


def _progress(prefix: str):  # type: ignore[no-untyped-def]
    last = {"stage": ""}

    def callback(event: ProgressEvent) -> None:
        if event.stage != last["stage"] or event.done == event.total:
            print(f"  [{prefix}] {event.stage}: {event.done}/{event.total}", file=sys.stderr)
            last["stage"] = event.stage

    return callback


def _mnist_like(path: Path) -> Path:
    """Digits upsampled to 16×16 (bilinear), saved as an ``.npz`` with uint8 pixels."""
    from privfed.data import load_digits

    digits = load_digits()
    images = torch.tensor(np.asarray(digits.images), dtype=torch.float32)
    big = torch.nn.functional.interpolate(images, size=(16, 16), mode="bilinear")
    pixels = (big.clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    np.savez(path, images=pixels, labels=np.asarray(digits.labels))
    return path


def _config(
    dataset: str,
    factory: str,
    epsilon: float,
    edm_steps: int,
    baselines: bool,
    latent_dim: int = 16,
    seed: int = 0,
) -> FactoryPipelineConfig:
    base = FactoryPipelineConfig(
        latent_dim=latent_dim,
        noise_seed=None if math.isinf(epsilon) or factory == "edm" else seed,
        dataset=dataset,
        factory=factory,  # type: ignore[arg-type]
        epsilon=None if math.isinf(epsilon) else epsilon,
        delta=DELTA,
        synthetic_per_class=200,
        classifier_epochs=10,
        fedavg_rounds=10 if baselines else 1,
        centralized=baselines,
        audit=False,
        seed=seed,
    )
    if factory != "edm":
        return base
    return replace(
        base,
        unet=UNetConfig(block_out_channels=(8, 16), norm_num_groups=4),
        edm=EDMConfig(sampling_steps=4),
        edm_training=EDMTrainingConfig(steps=edm_steps, batch_size=32, learning_rate=3e-3),
        dp_sampling_rate=None if math.isinf(epsilon) else EDM_RATE,
    )


def _row(dataset: str, factory: str, epsilon: float, report: Any, seconds: float) -> dict[str, Any]:
    ledger = report.ledger
    multipliers = (
        sorted({float(r.noise_multiplier) for r in ledger.releases})
        if ledger is not None and factory == "edm"
        else None
    )
    return {
        "dataset": dataset,
        "factory": factory,
        "target_epsilon": None if math.isinf(epsilon) else epsilon,
        "ledger_epsilon": report.dp_epsilon,
        "accuracy": report.factory_accuracy,
        "factories": report.num_factories,
        "bytes_per_client": report.factory_bytes_per_client,
        "client_cpu_seconds": round(float(sum(report.factory_seconds)), 3),
        "dp_sgd_noise_multipliers": multipliers,
        "seconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edm-steps", type=int, default=10, help="EDM optimizer steps")
    parser.add_argument("--quick", action="store_true", help="ε ∈ {3, ∞}, 3 EDM steps")
    parser.add_argument("--npz", type=Path, default=None, help="one .npz run (see Usage)")
    parser.add_argument("--kinds", default="gaussian,mixture")
    parser.add_argument("--latent-dim", type=int, default=32)
    parser.add_argument("--epsilons", default="3,10,inf")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--tag", default="factory_privacy")
    parser.add_argument("--partitions", default="single-class,dirichlet:0.1")
    parser.add_argument("--classifier", choices=("cnn", "mlp"), default="mlp")
    parser.add_argument("--mixture-components", type=int, default=3)
    parser.add_argument("--fedavg-rounds", type=int, default=10)
    parser.add_argument(
        "--synthetic-per-class",
        type=int,
        default=None,
        help="default: the pooled private records per class (the centralized data size)",
    )
    parser.add_argument("--make-npz", action="store_true", help="--npz from the bundled digits")
    parser.add_argument(
        "--unlearning-epsilons",
        default="inf",
        help="ε of the MIA unlearning check, run once per kind on the last partition, seed 0 "
        "('' skips it)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        help="an earlier --npz run's JSON at the same setting: its cells stand (marked "
        "'resumed') and only the missing ones run",
    )
    parser.add_argument(
        "--seeds-last-partition",
        default=None,
        help="seeds of the last partition only (default: --seeds); cuts a run to fit a budget",
    )
    args = parser.parse_args()
    if args.npz is not None or args.make_npz:
        _kinds_run(args)
        return
    torch.set_num_threads(1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    epsilons = (3.0, math.inf) if args.quick else EPSILONS
    edm_steps = 3 if args.quick else args.edm_steps

    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    baselines: dict[str, dict[str, float | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        datasets = {"digits": "digits", "npz": str(_mnist_like(Path(tmp) / "digits16.npz"))}
        for name, source in datasets.items():
            for factory in ("gaussian", "edm"):
                for eps in epsilons:
                    with_baselines = factory == "gaussian" and math.isinf(eps)
                    label = f"{name} {factory} eps={eps:g}"
                    print(label, file=sys.stderr, flush=True)
                    cfg = _config(source, factory, eps, edm_steps, with_baselines)
                    start = time.perf_counter()
                    report = run_factory_pipeline(cfg, progress=_progress(label))
                    rows.append(_row(name, factory, eps, report, time.perf_counter() - start))
                    if with_baselines:
                        baselines[name] = {
                            "fedavg": report.fedavg_accuracy,
                            "centralized": report.centralized_accuracy,
                        }
    total = time.perf_counter() - started

    print()
    print(f"{'dataset':<8}{'factory':<10}{'target ε':>9}{'ledger ε':>10}{'accuracy':>10}{'s':>8}")
    print("-" * 55)
    for r in rows:
        target = "inf" if r["target_epsilon"] is None else f"{r['target_epsilon']:g}"
        ledger = "-" if r["ledger_epsilon"] is None else f"{r['ledger_epsilon']:.4g}"
        print(
            f"{r['dataset']:<8}{r['factory']:<10}{target:>9}{ledger:>10}"
            f"{r['accuracy']:>10.4f}{r['seconds']:>8.1f}"
        )
    for name, b in baselines.items():
        central = b["centralized"]
        print(
            f"{name:<8}baselines (not private): FedAvg {b['fedavg']:.4f}, "
            f"centralized {central if central is None else f'{central:.4f}'}"
        )
    print(f"total {total:.0f} s (one seed)")

    out = {
        "setting": {
            "scenario": "single-class",
            "clients": 10,
            "delta": DELTA,
            "adjacency": "replace-one",
            "seeds": [0],
            "edm": {
                "unet_channels": [8, 16],
                "sampling_steps": 4,
                "steps": edm_steps,
                "dp_sampling_rate": EDM_RATE,
                "non_dp_batch": 32,
            },
            "gaussian": {"basis": "public-pca", "latent_dim": 16},
            "npz": "bundled digits bilinearly upsampled to 16x16 (MNIST-like, not MNIST)",
            "classifier": {"epochs": 10, "synthetic_per_class": 200},
            "fedavg_rounds": 10,
        },
        "rows": rows,
        "baselines": baselines,
        "seconds_total": round(total, 1),
        "machine": {"platform": platform.platform(), "torch_threads": 1},
    }
    (RESULTS / "factory_privacy_digits.json").write_text(json.dumps(out, indent=2))
    _plot(rows, baselines, epsilons, name="factory_privacy_digits")
    print(f"wrote {RESULTS / 'factory_privacy_digits.json'} and factory_privacy_digits.png")


def _kinds_run(args: argparse.Namespace) -> None:
    """``--npz``: every partition × kind × ε × seed on one file, baselines once per seed."""
    from classifier_speed import make_mnist_like

    torch.set_num_threads(1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    epsilons = tuple(float(e) for e in args.epsilons.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    kinds = args.kinds.split(",")
    partitions = [_partition(p) for p in args.partitions.split(",")]
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    baselines: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        source = str(args.npz or make_mnist_like(Path(tmp) / "mnist_like.npz"))
        per_class = args.synthetic_per_class or _pooled_per_class(source)
        previous = _Resumed.load(args, per_class)
        equal_steps: dict[int, dict[str, Any]] = {}
        last_seeds = (
            [int(x) for x in args.seeds_last_partition.split(",")]
            if args.seeds_last_partition
            else seeds
        )
        for seed, (name, scenario, alpha), kind, eps in itertools.product(
            seeds, partitions, kinds, epsilons
        ):
            if name == partitions[-1][0] and seed not in last_seeds:
                continue
            first = kind == kinds[0] and math.isinf(eps)
            label = f"{name} {kind} eps={eps:g} seed={seed}"
            print(label, file=sys.stderr, flush=True)
            cfg = replace(
                _config(source, kind, eps, 10, first, args.latent_dim, seed),
                scenario=scenario,  # type: ignore[arg-type]
                dirichlet_alpha=alpha,
                classifier=args.classifier,
                mixture_components=args.mixture_components,
                synthetic_per_class=per_class,
                fedavg_rounds=args.fedavg_rounds if first else 0,
            )
            earlier = previous.rows.get((name, kind, eps, seed))
            if earlier is not None and (not first or (name, seed) in previous.baselines):
                rows.append({**earlier, "resumed": True})
                if first:  # the equal-steps bound with the very configuration of this run
                    base = previous.baselines[(name, seed)]
                    if "centralized_equal_steps" not in base:
                        base = {**base, **_equal_steps(cfg, per_class, equal_steps)}
                    baselines.append({**base, "resumed": True})
                print(f"  accuracy {earlier['accuracy']:.4f} (resumed)", file=sys.stderr)
                continue
            start = time.perf_counter()
            report = run_factory_pipeline(cfg)
            row = _row("npz", kind, eps, report, time.perf_counter() - start)
            rows.append({**row, "partition": name, "seed": seed})
            print(f"  accuracy {report.factory_accuracy:.4f}", file=sys.stderr, flush=True)
            if first:
                baselines.append(
                    {
                        "partition": name,
                        "seed": seed,
                        "fedavg": report.fedavg_accuracy,
                        "centralized": report.centralized_accuracy,
                        "fedavg_bytes_per_client": report.fedavg_bytes_per_client,
                        **_equal_steps(cfg, per_class, equal_steps),
                    }
                )
            # Written after every run (seeds outermost), so a stopped run keeps whole seeds.
            _write_kinds(args, rows, baselines, partitions, per_class, started, complete=False)
        checks: list[dict[str, Any]] = []
        unlearning_eps = [float(e) for e in args.unlearning_epsilons.split(",") if e]
        _, scenario, alpha = partitions[-1]
        for kind, eps in itertools.product(kinds, unlearning_eps):
            print(f"unlearning check {kind} eps={eps:g}", file=sys.stderr, flush=True)
            cfg = replace(
                _config(source, kind, eps, 10, False, args.latent_dim, 0),
                scenario=scenario,  # type: ignore[arg-type]
                dirichlet_alpha=alpha,
                mixture_components=args.mixture_components,
                synthetic_per_class=per_class,
            )
            check = _unlearning_check(cfg)
            checks.append({"partition": partitions[-1][0], "factory": kind, **check})
            print(
                f"  AUC original {check['auc_original']['estimate']:.3f}, unlearned "
                f"{check['auc_unlearned']['estimate']:.3f}, retrained "
                f"{check['auc_retrained']['estimate']:.3f}, accepted {check['accepted']}",
                file=sys.stderr,
                flush=True,
            )
            _write_kinds(
                args,
                rows,
                baselines,
                partitions,
                per_class,
                started,
                complete=False,
                unlearning=checks,
            )
    summary = _write_kinds(
        args, rows, baselines, partitions, per_class, started, complete=True, unlearning=checks
    )
    for key, v in summary.items():
        print(f"{key:<40}{v['mean']:.4f} ± {v['spread'] / 2:.4f} (n={v['n']})")
    _plot_kinds(summary, partitions, kinds, epsilons, args.tag)
    print(f"wrote {RESULTS / (args.tag + '.json')} and {args.tag}.png")


def _write_kinds(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    baselines: list[dict[str, Any]],
    partitions: list[tuple[str, str, float]],
    per_class: int,
    started: float,
    *,
    complete: bool,
    unlearning: list[dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """The ``--npz`` run's JSON (``complete`` false while it runs); returns the summary."""
    epsilons = tuple(float(e) for e in args.epsilons.split(","))
    kinds = args.kinds.split(",")
    done = sorted({r["seed"] for r in rows})
    summary = _summary(rows, baselines, partitions, kinds, epsilons)
    out = {
        "setting": {
            "partitions": [p[0] for p in partitions],
            **_fixed_setting(args),
            "classifier": {
                "architecture": args.classifier,
                "epochs": 10,
                "synthetic_per_class": per_class,
                "centralized trains the same architecture and epochs": True,
                "centralized_per_class": "the pooled private records per class (about 650)",
            },
            "fedavg": {"rounds": args.fedavg_rounds, "architecture": "cnn"},
            "noise": "seeded per seed (noise_seed = seed), so the run is reproducible",
            "audit": "the per-factory membership audit stage is not run (audit=False); the MIA "
            "unlearning check is (unlearning_check: client 0 of the last partition, seed 0)",
            "epsilons": [None if math.isinf(e) else e for e in epsilons],
            "seeds": done,
            "seeds_requested": [int(s) for s in args.seeds.split(",")],
            "resumed_from": None if args.resume is None else str(args.resume),
            "centralized_equal_steps": "the same classifier trained for the synthetic side's "
            "optimizer steps (epochs x synthetic per class x classes / private records)",
            "seeds_last_partition": [int(s) for s in args.seeds_last_partition.split(",")]
            if args.seeds_last_partition
            else None,
        },
        "complete": complete,
        "rows": rows,
        "summary": summary,
        "baselines": baselines,
        "unlearning_check": unlearning or [],
        "seconds_total": round(time.perf_counter() - started, 1),
        "machine": {"platform": platform.platform(), "torch_threads": 1},
    }
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(out, indent=2))
    return summary


def _unlearning_check(cfg: FactoryPipelineConfig) -> dict[str, Any]:
    """The MIA unlearning check of client 0 for one factory kind (seconds, not a full run).

    Every cell's factory is fitted as the pipeline fits it (same codec, seeds
    and noise seeds), the matrix synthesizes the run's quota, client 0 is
    removed (:func:`remove_client_verified`), and a matrix retrained from
    scratch without client 0 gives the reference output.  Members: client 0's
    records; non-members: the test split's records of the same classes.
    """
    from privfed.engines.factory import FactoryMatrix, MembershipProbe, remove_client_verified
    from privfed.engines.factory.job import load_partitions, make_factory, public_codec

    start = time.perf_counter()
    _, split, parts = load_partitions(cfg)
    images = torch.from_numpy(np.array(split.private.images))
    labels = torch.from_numpy(np.array(split.private.labels))
    codec = public_codec(cfg)

    def build(clients: range) -> FactoryMatrix:
        matrix = FactoryMatrix()
        for client in clients:
            idx_t = torch.from_numpy(parts[client])
            for c in sorted({int(v) for v in labels[idx_t].tolist()}):
                idx = idx_t[labels[idx_t] == c]
                if idx.numel() < cfg.min_records_per_factory:
                    continue
                n = int(idx.numel())
                factory = make_factory(cfg, c, client, codec=codec, sample_count=n)
                matrix.register(c, client, factory.fit(images[idx]), n)
        return matrix

    matrix = build(range(len(parts)))
    matrix.synthesize(cfg.synthetic_per_class, seed=cfg.seed)
    members = torch.from_numpy(parts[0])
    member_labels = labels[members]
    test_x = torch.from_numpy(np.array(split.test.images))
    test_y = torch.from_numpy(np.array(split.test.labels))
    keep = torch.isin(test_y, torch.unique(member_labels))
    certificate, check = remove_client_verified(
        matrix,
        0,
        retrain=lambda: build(range(1, len(parts))),
        probe=MembershipProbe(images[members], member_labels, test_x[keep], test_y[keep]),
    )
    return {
        "target_epsilon": cfg.epsilon,
        "removed_client": 0,
        "removed_factories": len(certificate.removed_cells),
        "certificate_verifies": bool(matrix.verify(certificate)),
        **check.to_dict(),
        "seconds": round(time.perf_counter() - start, 2),
    }


def _equal_steps(
    cfg: FactoryPipelineConfig, per_class: int, cache: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """The centralized classifier trained for the synthetic side's optimizer steps.

    The synthetic side trains ``classifier_epochs`` epochs on ``per_class`` images
    per class, the centralized baseline the same epochs on the pooled private
    records (about 650 per class): the epochs that match the step count are
    ``epochs × per_class × classes / private records`` rounded up.  The pooled
    private data depends on the seed only (not the partition), so it is cached.
    """
    if cfg.seed in cache:
        return cache[cfg.seed]
    from privfed.engines.classifier import evaluate_classifier
    from privfed.engines.factory.job import load_partitions, train_downstream

    classes, split, _ = load_partitions(cfg)
    images = torch.from_numpy(np.array(split.private.images))
    labels = torch.from_numpy(np.array(split.private.labels))
    epochs = math.ceil(cfg.classifier_epochs * per_class * classes / len(labels))
    start = time.perf_counter()
    model = train_downstream(replace(cfg, classifier_epochs=epochs), images, labels, classes)
    test_x = torch.from_numpy(np.array(split.test.images))
    test_y = torch.from_numpy(np.array(split.test.labels))
    accuracy = evaluate_classifier(model, test_x, test_y)
    print(f"  centralized at equal steps ({epochs} epochs): {accuracy:.4f}", file=sys.stderr)
    cache[cfg.seed] = {
        "centralized_equal_steps": accuracy,
        "centralized_equal_steps_epochs": epochs,
        "centralized_equal_steps_seconds": round(time.perf_counter() - start, 1),
    }
    return cache[cfg.seed]


class _Resumed:
    """Cells of an earlier ``--npz`` run (``--resume PATH``) at the very same setting."""

    def __init__(
        self,
        rows: dict[tuple[str, str, float, int], dict[str, Any]],
        baselines: dict[tuple[str, int], dict[str, Any]],
    ) -> None:
        self.rows, self.baselines = rows, baselines

    @classmethod
    def load(cls, args: argparse.Namespace, per_class: int) -> _Resumed:
        if args.resume is None:
            return cls({}, {})
        try:
            earlier = json.loads(Path(args.resume).read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"--resume: cannot read {args.resume}: {exc}") from None
        setting = earlier.get("setting", {})
        classifier = setting.get("classifier", {})
        mine = _fixed_setting(args)
        differ = [k for k in mine if setting.get(k) != mine[k]]
        if classifier.get("architecture") != args.classifier:
            differ.append("classifier")
        if setting.get("fedavg", {}).get("rounds") != args.fedavg_rounds:
            differ.append("fedavg rounds")
        if classifier.get("synthetic_per_class") != per_class:
            differ.append("synthetic per class")
        if differ:
            raise SystemExit(f"--resume: {args.resume} has another setting ({', '.join(differ)})")
        rows = {
            (r["partition"], r["factory"], _eps(r), int(r["seed"])): {
                k: v for k, v in r.items() if k != "resumed"
            }
            for r in earlier.get("rows", [])
        }
        baselines = {
            (b["partition"], int(b["seed"])): {k: v for k, v in b.items() if k != "resumed"}
            for b in earlier.get("baselines", [])
        }
        print(f"--resume: {len(rows)} cells of {args.resume} stand", file=sys.stderr)
        return cls(rows, baselines)


def _fixed_setting(args: argparse.Namespace) -> dict[str, Any]:
    """The setting's scalar keys (an earlier run's cells stand only where all agree)."""
    return {
        "clients": 10,
        "delta": DELTA,
        "adjacency": "replace-one",
        "npz": _npz_label(args),
        "latent_dim": args.latent_dim,
        "basis": "public-pca",
        "mixture_components": args.mixture_components,
    }


def _npz_label(args: argparse.Namespace) -> str:
    return (
        str(args.npz)
        if args.npz
        else "classifier_speed.make_mnist_like: 10,000 28x28 images made from the bundled "
        "8x8 digits (MNIST-like, not MNIST)"
    )


def _partition(text: str) -> tuple[str, str, float]:
    """``single-class`` or ``dirichlet:ALPHA`` -> (name, scenario, alpha)."""
    scenario, _, alpha = text.partition(":")
    if scenario not in ("single-class", "dirichlet"):
        raise SystemExit(f"--partitions: expected single-class or dirichlet:ALPHA, got {text!r}")
    return text, scenario, float(alpha) if alpha else 0.5


def _pooled_per_class(source: str) -> int:
    """Private records per class of the run's split: the centralized classifier's data size."""
    from privfed.engines.factory.job import load_partitions

    classes, split, _ = load_partitions(FactoryPipelineConfig(dataset=source))
    return max(1, round(len(split.private.labels) / classes))


def _summary(
    rows: list[dict[str, Any]],
    baselines: list[dict[str, Any]],
    partitions: list[tuple[str, str, float]],
    kinds: list[str],
    epsilons: tuple[float, ...],
) -> dict[str, dict[str, Any]]:
    """Mean, spread (max - min) and n of every (partition, kind, ε) and of the baselines."""

    def stats(measured: list[float | None]) -> dict[str, Any]:
        values = [v for v in measured if v is not None]  # None: a baseline not run
        if not values:
            return {"mean": None, "spread": None, "n": 0}
        return {
            "mean": float(np.mean(values)),
            "spread": float(np.max(values) - np.min(values)),
            "n": len(values),
        }

    summary: dict[str, dict[str, Any]] = {}
    for name, _, _ in partitions:
        for kind in kinds:
            for eps in epsilons:
                accs = [
                    r["accuracy"]
                    for r in rows
                    if r["partition"] == name and r["factory"] == kind and _eps(r) == eps
                ]
                summary[f"{name} {kind} eps={eps:g}"] = stats(accs)
        for base in ("centralized", "centralized_equal_steps", "fedavg"):
            values = [b[base] for b in baselines if b["partition"] == name and base in b]
            summary[f"{name} {base}"] = stats(values)
    return summary


def _plot_kinds(
    summary: dict[str, dict[str, Any]],
    partitions: list[tuple[str, str, float]],
    kinds: list[str],
    epsilons: tuple[float, ...],
    name: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(partitions), figsize=(5.5 * len(partitions), 4), squeeze=False)
    xs = list(range(len(epsilons)))
    for ax, (part, _, _) in zip(axes[0], partitions, strict=True):
        for kind, marker in zip(kinds, "os^", strict=False):
            cells = [summary[f"{part} {kind} eps={e:g}"] for e in epsilons]
            ax.errorbar(
                xs,
                [c["mean"] for c in cells],
                yerr=[c["spread"] / 2 for c in cells],
                marker=marker,
                capsize=3,
                label=f"{kind} factories",
            )
        central, fedavg = summary[f"{part} centralized"], summary[f"{part} fedavg"]
        ax.axhline(central["mean"], color="k", ls="--", label="centralized (same classifier)")
        steps = summary[f"{part} centralized_equal_steps"]
        if steps["n"]:
            ax.axhline(steps["mean"], color="0.4", ls="-.", label="centralized, equal steps")
        ax.axhline(fedavg["mean"], color="r", ls=":", label="FedAvg (CNN)")
        ax.set_xticks(xs)
        ax.set_xticklabels(["∞" if math.isinf(e) else f"{e:g}" for e in epsilons])
        ax.set_xlabel("target ε per factory (δ = 1e-5)")
        ax.set_ylabel("test accuracy (mean, bar: half spread)")
        ax.set_ylim(0, 1)
        ax.set_title(f"{part}, 10 clients")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=120)


def _eps(row: dict[str, Any]) -> float:
    return math.inf if row["target_epsilon"] is None else float(row["target_epsilon"])


def _plot(
    rows: list[dict[str, Any]],
    baselines: dict[str, dict[str, float | None]],
    epsilons: tuple[float, ...],
    *,
    kinds: list[str] | None = None,
    name: str = "factory_privacy",
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    positions = {eps: i for i, eps in enumerate(epsilons)}
    names = list(baselines) or sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
    for ax, title in zip(axes[0], names, strict=True):
        for factory, marker in zip(kinds or ["gaussian", "edm"], "os^", strict=False):
            pts = [r for r in rows if r["dataset"] == title and r["factory"] == factory]
            xs = [
                positions[math.inf if r["target_epsilon"] is None else r["target_epsilon"]]
                for r in pts
            ]
            ax.plot(xs, [r["accuracy"] for r in pts], marker=marker, label=f"{factory} factories")
        b = baselines.get(title, {})
        if b.get("centralized") is not None:
            ax.axhline(b["centralized"], color="k", ls="--", label="centralized (not private)")
        if b.get("fedavg") is not None:
            ax.axhline(b["fedavg"], color="r", ls=":", label="FedAvg (not private)")
        ax.set_xticks(range(len(epsilons)))
        ax.set_xticklabels(["∞" if math.isinf(e) else f"{e:g}" for e in epsilons])
        ax.set_xlabel("target ε per factory (δ = 1e-5)")
        ax.set_ylabel("test accuracy")
        ax.set_ylim(0, 1)
        ax.set_title(f"{title}: single-class silos, 10 clients")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=120)


if __name__ == "__main__":
    main()
