"""``privfed run``: the main job (latent-statistic engine) end to end.

Module import is light (argparse only); torch and the engines load inside
:func:`_run`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["register"]


def _partition_spec(text: str) -> tuple[str, float | int | None]:
    """Parse ``iid``, ``dirichlet[:ALPHA]``, ``pathological[:K]`` or ``single-class``."""
    name, _, arg = text.partition(":")
    if name == "dirichlet":
        return name, float(arg) if arg else 0.1
    if name == "pathological":
        return name, int(arg) if arg else 2
    if name in ("iid", "single-class") and not arg:
        return name, None
    raise argparse.ArgumentTypeError(
        "expected iid, dirichlet[:ALPHA], pathological[:K] or single-class"
    )


def register(subparsers: Any) -> None:
    """Add the ``run`` subcommand to an argparse sub-parser collection."""
    parser = subparsers.add_parser(
        "run",
        help="run the one-shot DP federated job end to end (default: digits, 20 clients)",
        description=(
            "Public split fits the codec; private split spread over clients; exact "
            "fixed-point statistics summed by real secure aggregation with dropouts; "
            "DP release; per-class Gaussians; synthetic data; classifier on real test data."
        ),
    )
    parser.add_argument("--engine", choices=("latent",), default="latent")
    parser.add_argument(
        "--dataset", default="digits", help="'digits', an .npz file or an image folder"
    )
    parser.add_argument(
        "--partition",
        type=_partition_spec,
        default=("dirichlet", 0.1),
        help="iid | dirichlet[:ALPHA] (default dirichlet:0.1) | pathological[:K] | single-class",
    )
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument(
        "--codec", default="pca", help="pca | conv-ae | diffusers model dir or hub id"
    )
    parser.add_argument("--latent-dim", type=int, default=8)
    parser.add_argument("--clip-norm", type=float, default=None, help="default: the codec's")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--adjacency", choices=("replace-one", "add-remove"), default="replace-one")
    parser.add_argument("--dropout-rate", type=float, default=0.1)
    parser.add_argument("--samples-per-class", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=20, help="classifier epochs")
    parser.add_argument("--no-baselines", action="store_true", help="skip the reference runs")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    parser.add_argument("--seed", type=int, default=0, help="experimental-design seed")
    parser.add_argument(
        "--noise-seed",
        type=int,
        default=None,
        help="seed the DP noise (reproducible experiments only; default: OS CSPRNG)",
    )
    parser.add_argument("--output-dir", default="privfed-run")
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from privfed.dp import Adjacency
    from privfed.errors import PrivfedError
    from privfed.pipeline import PipelineConfig, run_pipeline

    scheme, option = args.partition
    start = time.perf_counter()

    def progress(stage: str, message: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - start:6.1f}s] {stage:<9} {message}", flush=True)

    try:
        config = PipelineConfig(
            dataset=args.dataset,
            partition=scheme,
            alpha=option if scheme == "dirichlet" else None,
            classes_per_client=option if scheme == "pathological" else None,
            num_clients=args.clients,
            codec=args.codec,
            latent_dim=args.latent_dim,
            clip_norm=args.clip_norm,
            epsilon=args.epsilon,
            delta=args.delta,
            adjacency=Adjacency(args.adjacency),
            dropout_rate=args.dropout_rate,
            samples_per_class=args.samples_per_class,
            classifier_epochs=args.epochs,
            baselines=not args.no_baselines,
            device=args.device,
            num_threads=args.threads,
            seed=args.seed,
            noise_seed=args.noise_seed,
            engine=args.engine,
        )
        result = run_pipeline(config, progress=progress)
    except PrivfedError as exc:
        print(f"privfed run: error: {exc}", file=sys.stderr)
        return 2
    paths = result.write(args.output_dir)
    r = result.report
    rows = [
        ("accuracy, synthetic (DP)", f"{r.accuracy_synthetic:.4f}"),
        (
            "accuracy, real private data",
            "-" if r.accuracy_real is None else f"{r.accuracy_real:.4f}",
        ),
        (
            "accuracy, synthetic (no DP)",
            "-" if r.accuracy_nondp_synthetic is None else f"{r.accuracy_nondp_synthetic:.4f}",
        ),
        ("epsilon / delta", f"{r.epsilon:g} / {r.delta:.3g} ({config.adjacency.value})"),
        ("mu (GDP)", f"{r.mu:.4f}"),
        (
            "noise std: sum / second / count",
            f"{r.noise_std_sum:.4g} / {r.noise_std_second_moment:.4g} / {r.noise_std_count:.4g}",
        ),
        (
            "latent dim / clip norm / frac. bits",
            f"{r.latent_dim} / {r.clip_norm:.4g} / {r.fractional_bits}",
        ),
        (
            "payload per client",
            f"{r.payload_values_per_client} values, {r.payload_bytes_per_client} B",
        ),
        ("secagg bytes sent per client", f"{r.secagg_bytes_per_client:.0f} B"),
        ("clients (empty) / dropped", f"{r.num_clients} ({r.empty_clients}) / {r.dropped_clients}"),
        ("records aggregated", f"{r.records_aggregated} of {r.records_private} private"),
        ("total seconds", f"{sum(r.seconds.values()):.2f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    print(f"\nwrote {', '.join(str(p) for p in paths.values())}")
    return 0
