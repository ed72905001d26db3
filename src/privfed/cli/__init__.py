"""The ``privfed`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds an ``argparse`` sub-parser whose ``func``
default takes the parsed namespace and returns an exit code.  Modules import
their heavy dependencies (torch, matplotlib) inside ``func`` only, so
``privfed --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

# Subcommand modules, in the order ``--help`` lists them.
_COMMANDS: tuple[str, ...] = ("run", "calibrate", "audit", "secagg_demo")


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="privfed",
        description="Privacy-preserving one-shot federated learning with generative models.",
    )
    from privfed._version import __version__

    parser.add_argument("--version", action="version", version=f"privfed {__version__}")
    from privfed.cli._options import one_line_errors

    one_line_errors(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        qualified = f"privfed.cli.{name}"
        if importlib.util.find_spec(qualified) is None:
            continue
        importlib.import_module(qualified).register(subparsers)
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
