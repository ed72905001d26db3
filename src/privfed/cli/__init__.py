"""The ``privfed`` command line.

Each subcommand lives in its own module of this package (``-`` spelled ``_``)
and exposes ``DESCRIPTION`` (what its ``--help`` says first), ``add_options(parser)``
(its options, on the sub-parser :func:`build_parser` made for it from
``_COMMANDS``), ``run(args)`` (takes the parsed namespace, returns an exit
code) and optionally ``HELP_FORMATTER``.  Modules import
their heavy dependencies (torch, matplotlib) inside ``run`` only, so
``privfed --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

#: Subcommand -> its one-line help, in the order ``--help`` lists them.
_COMMANDS: dict[str, str] = {
    "run": "run one engine's job end to end (default: latent engine, digits, 20 clients)",
    "calibrate": "noise stds for a DP latent-statistic release, vs the paper's calibration",
    "audit": "membership-inference audit: metrics, ε lower bounds, canary self-audit",
    "secagg-demo": "run one in-memory secure-aggregation round and check the sum",
}


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="privfed",
        description="Privacy-preserving one-shot federated learning with generative models.",
    )
    from privfed._version import __version__

    parser.add_argument("--version", action="version", version=f"privfed {__version__}")
    from privfed.cli._options import add_command, one_line_errors

    one_line_errors(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in _COMMANDS.items():
        qualified = f"privfed.cli.{name.replace('-', '_')}"
        if importlib.util.find_spec(qualified) is None:
            continue
        command = importlib.import_module(qualified)
        parser_of = add_command(
            subparsers,
            name,
            command.run,
            help=help_text,
            description=command.DESCRIPTION,
            formatter_class=getattr(command, "HELP_FORMATTER", argparse.HelpFormatter),
        )
        command.add_options(parser_of)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``privfed`` script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the provenance's command
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        # Artefacts are written atomically at the end, so nothing half-written remains.
        print(f"privfed {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
