"""``privfed secagg-demo``: one in-memory secure-aggregation round on random inputs.

Plays the whole protocol (every message serialized) for ``--clients`` clients
with a random fraction dropping out before sending their masked input, checks
the result against the plain sum, and prints timings and bytes on the wire.
Heavy imports happen inside the command, so ``privfed --help`` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {value}")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1); got {value}")
    return value


def register(subparsers: Any) -> None:
    """Add the ``secagg-demo`` subcommand to an ``argparse`` sub-parser set."""
    parser = subparsers.add_parser(
        "secagg-demo",
        help="run one in-memory secure-aggregation round and check the sum",
        description=(
            "Run one in-memory secure-aggregation round (Bonawitz double masking, "
            "optionally SecAgg+) on random 64-bit inputs, with a fraction of clients "
            "dropping out before the masked-input stage, and check the exact sum."
        ),
    )
    parser.add_argument("--clients", type=_positive_int, default=20, help="clients (default 20)")
    parser.add_argument(
        "--threshold",
        type=_positive_int,
        default=None,
        help="Shamir threshold t (default: a majority of a neighbourhood)",
    )
    parser.add_argument(
        "--length", type=_positive_int, default=1000, help="values per client (default 1000)"
    )
    parser.add_argument(
        "--dropout-rate",
        type=_rate,
        default=0.1,
        help="fraction of clients dropping before masked input (default 0.1)",
    )
    parser.add_argument("--graph", choices=("complete", "harary"), default="complete")
    parser.add_argument(
        "--degree", type=_positive_int, default=None, help="neighbours per client (harary only)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for inputs and dropouts")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute the demo; return 0 when the sum is exact, 1 on an abort or a mismatch."""
    import numpy as np

    from privfed.errors import ParameterError, ProtocolAbort
    from privfed.secagg import Stage, run_protocol

    n = args.clients
    degree = args.degree
    if args.graph == "harary" and degree is None:
        # About 2 log2(n) neighbours (even, so valid for any n), capped at n - 1.
        degree = max(1, min(n - 1, 2 * int(np.ceil(np.log2(max(n, 2))))))
    hood = n if args.graph == "complete" else (degree or 0) + 1
    threshold = args.threshold if args.threshold is not None else max(2, hood // 2 + 1)
    rng = np.random.default_rng(args.seed)
    inputs = [rng.integers(0, 2**64 - 1, size=args.length, dtype=np.uint64) for _ in range(n)]
    dropped = sorted(rng.choice(n, size=int(args.dropout_rate * n), replace=False).tolist())
    try:
        report = run_protocol(
            inputs,
            threshold=threshold,
            dropouts={Stage.MASKED_INPUT: dropped},
            graph=args.graph,
            degree=degree if args.graph == "harary" else None,
        )
    except (ParameterError, ProtocolAbort) as exc:
        print(f"secagg-demo: {exc}")
        return 1
    expected = np.zeros(args.length, dtype=np.uint64)
    for i, vector in enumerate(inputs):
        if i not in set(dropped):
            expected += vector
    exact = bool(np.array_equal(report.total, expected))
    full = [c for c in report.clients if len(c.seconds) == 4]
    mean_bytes = {
        stage: float(np.mean([c.bytes_sent.get(stage, 0) for c in full])) for stage in Stage
    }
    graph = args.graph if args.graph == "complete" else f"harary (degree {degree})"
    rows = [
        ("clients / threshold", f"{n} / {threshold}"),
        ("graph", graph),
        ("vector length", f"{args.length}"),
        ("dropped before masked input", f"{len(dropped)}"),
        ("sum exact", "yes" if exact else "NO"),
        ("mean client seconds", f"{report.mean_client_seconds:.4f}"),
        ("server seconds", f"{report.total_server_seconds:.4f}"),
    ]
    rows += [(f"client bytes sent: {s.name}", f"{mean_bytes[s]:,.0f}") for s in Stage]
    rows.append(("client bytes sent: total", f"{sum(mean_bytes.values()):,.0f}"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0 if exact else 1
