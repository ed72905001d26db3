"""``privfed secagg-demo``: one in-memory secure-aggregation round on random inputs.

Plays the whole protocol (every message serialized) for ``--clients`` clients
with a random fraction dropping out before sending their masked input, checks
the result against the plain sum, and prints timings and bytes on the wire.
Heavy imports happen inside the command, so ``privfed --help`` stays fast.
"""

from __future__ import annotations

import argparse

from privfed.cli._options import (
    Interval,
    add_int,
    add_number,
    fail,
    option_message,
    options_of,
    print_table,
)
from privfed.cli._progress import reporter

__all__ = ["DESCRIPTION", "add_options", "run"]

_PROG = "privfed secagg-demo"
#: Largest ``--length``: vector lengths travel as 32-bit integers.
_MAX_LENGTH = 2**31 - 1
#: Library parameters -> the option that sets them (error messages name options).
_OPTION_OF = options_of(
    "threshold",
    "graph",
    "degree",
    inputs="--clients",
    client_ids="--clients",
    vector_length="--length",
    dropouts="--dropout-rate",
)


#: What ``privfed secagg-demo --help`` says first.
DESCRIPTION = (
    "Run one in-memory secure-aggregation round (Bonawitz double masking, "
    "optionally SecAgg+) on random 64-bit inputs, with a fraction of clients "
    "dropping out before the masked-input stage, and check the exact sum."
)


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the ``secagg-demo`` options to its sub-parser."""
    add = parser.add_argument
    add_int(
        add,
        "--clients",
        2,
        default=20,
        help="clients, >= 2 (default %(default)s)",
    )
    add_int(
        add,
        "--threshold",
        2,
        help="Shamir threshold t in [2, neighbourhood size] (default: a majority of a "
        "neighbourhood)",
    )
    add_int(
        add,
        "--length",
        1,
        _MAX_LENGTH,
        default=1000,
        help="values per client (default %(default)s)",
    )
    add_number(
        add,
        "--dropout-rate",
        Interval(0.0, 1.0, closed_low=True),
        default=0.1,
        help="fraction of clients dropping before masked input, in [0, 1) (default %(default)s)",
    )
    add(
        "--graph",
        choices=("complete", "harary"),
        default="complete",
        help="who shares masks with whom (default %(default)s)",
    )
    add_int(
        add,
        "--degree",
        2,
        help="neighbours per client, --graph harary only: in [2, clients - 1], even when "
        "clients is odd (default about 2 log2(clients))",
    )
    add_int(add, "--seed", 0, help="seed for inputs and dropouts")
    add(
        "--quiet",
        action="store_true",
        help="no progress bar on stderr (results go to stdout)",
    )


class _UsageError(Exception):
    """Options that are fine one by one but not together."""


def _plan(args: argparse.Namespace) -> tuple[int | None, int]:
    """The Harary degree (``None`` for the complete graph) and the threshold, checked."""
    import math

    n = args.clients
    if args.graph == "complete":
        if args.degree is not None:
            raise _UsageError("--degree applies only to --graph harary, not to the complete graph")
        degree, hood = None, n
    else:
        if n < 3:
            raise _UsageError(f"--graph harary needs --clients >= 3; got {n}")
        degree = args.degree
        if degree is None:
            # About 2 log2(n) neighbours (even, so valid for any n), capped at n - 1.
            degree = max(2, min(n - 1, 2 * math.ceil(math.log2(n))))
        elif degree > n - 1:
            raise _UsageError(f"--degree must be at most --clients - 1 = {n - 1}; got {degree}")
        elif degree % 2 == 1 and n % 2 == 1:
            raise _UsageError(f"--degree must be even when --clients is odd ({n}); got {degree}")
        hood = degree + 1
    from privfed.secagg.threshold import ThresholdPolicy

    # A demo of the protocol: any t in [2, s] runs; the default is the policy's majority.
    threshold = args.threshold if args.threshold is not None else ThresholdPolicy().default(hood)
    if threshold > hood:
        size = "--clients" if degree is None else "--degree + 1"
        raise _UsageError(
            f"--threshold must be at most the neighbourhood size ({size} = {hood}); got {threshold}"
        )
    return degree, threshold


def run(args: argparse.Namespace) -> int:
    """Execute the demo; return 0 when the sum is exact, 1 on an abort or a mismatch.

    Options that do not fit together (``--degree`` with the complete graph, a
    threshold above the neighbourhood size) print one line on stderr and
    return 2, before any input is drawn.
    """
    try:
        degree, threshold = _plan(args)
    except _UsageError as exc:
        return fail(_PROG, str(exc))

    import numpy as np

    from privfed.errors import ParameterError, ProtocolAbort
    from privfed.secagg import Stage, run_protocol

    n = args.clients
    try:
        rng = np.random.default_rng(args.seed)
        inputs = [rng.integers(0, 2**64 - 1, size=args.length, dtype=np.uint64) for _ in range(n)]
        dropped = sorted(rng.choice(n, size=int(args.dropout_rate * n), replace=False).tolist())
        report = run_protocol(
            inputs,
            threshold=threshold,
            dropouts={Stage.MASKED_INPUT: dropped},
            graph=args.graph,
            degree=degree,
            progress=reporter(args.quiet),
        )
    except ProtocolAbort as exc:
        # The demo's outcome, not a usage error: too many clients dropped out.
        print(f"secagg-demo: {exc}")
        return 1
    except ParameterError as exc:
        return fail(_PROG, option_message(exc, _OPTION_OF))
    except MemoryError:
        return fail(_PROG, f"not enough memory for --clients {n} x --length {args.length}")
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
    print_table(rows)
    return 0 if exact else 1
