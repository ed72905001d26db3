"""Option checks shared by the ``privfed`` subcommands (private).

A mistyped option must end in one line on stderr, ``privfed COMMAND: error:
...`` naming the option, and exit status 2 -- never a traceback, and never a
value silently dropped or reinterpreted.  This module holds the pieces:

* :func:`one_line_errors` makes an ``argparse`` sub-parser report its own usage
  errors (bad type, missing required option, bad choice) as that one line;
* :class:`Interval` describes a numeric domain in words and always excludes
  NaN and infinity;
* :func:`parse_number` and :func:`parse_number_list` turn option text (or a
  value from a JSON config file) into checked numbers, refusing empty items of
  a comma list (``1,,4``);
* :func:`number_type` and :func:`int_type` wrap them as ``argparse`` types;
* :func:`option_message` rewrites a library error that names a parameter
  (``parameter 'clip_norm' ...``) to name the option instead.

Only the standard library is imported, so ``privfed --help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = [
    "Interval",
    "OptionError",
    "add_int",
    "add_number",
    "fail",
    "int_type",
    "number_type",
    "one_line_errors",
    "option_message",
    "options_of",
    "parse_int",
    "parse_number",
    "parse_number_list",
    "print_table",
]


class OptionError(Exception):
    """A command-line (or config-file) option has a bad value; the message names it."""


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` report usage errors as one line ``PROG: error: MESSAGE``.

    ``argparse`` normally prints the whole usage block first; this keeps only
    the line that says what is wrong (``--help`` still shows the usage).  The
    exit status stays 2 (``SystemExit(2)``).  Abbreviated options are refused
    (``allow_abbrev=False``), so what runs is what was typed.

    Returns:
        ``parser`` itself.
    """

    def error(message: str) -> NoReturn:
        parser.exit(2, f"{parser.prog}: error: {' '.join(message.split())}\n")

    parser.error = error  # type: ignore[method-assign]
    # No abbreviations: ``--eps 3`` is refused rather than read as ``--epsilon 3``.
    parser.allow_abbrev = False
    return parser


@dataclass(frozen=True)
class Interval:
    """A range of finite numbers; NaN and ±infinity are never inside.

    Args:
        low: Lower end (``-inf`` for none).
        high: Upper end (``inf`` for none).
        closed_low: Whether ``low`` itself belongs to the interval.
        closed_high: Whether ``high`` itself belongs to the interval.
    """

    low: float = -math.inf
    high: float = math.inf
    closed_low: bool = False
    closed_high: bool = False

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        if not math.isfinite(value):
            return False
        above = value >= self.low if self.closed_low else value > self.low
        below = value <= self.high if self.closed_high else value < self.high
        return above and below

    def describe(self, noun: str = "number") -> str:
        """The domain in words: ``"a finite number > 0"``, ``"a number in (0, 1)"``."""
        bounded_low, bounded_high = math.isfinite(self.low), math.isfinite(self.high)
        if bounded_low and bounded_high:
            left = "[" if self.closed_low else "("
            right = "]" if self.closed_high else ")"
            return f"a {noun} in {left}{self.low:g}, {self.high:g}{right}"
        if bounded_low:
            return f"a finite {noun} {'>=' if self.closed_low else '>'} {self.low:g}"
        if bounded_high:
            return f"a finite {noun} {'<=' if self.closed_high else '<'} {self.high:g}"
        return f"a finite {noun}"


#: Any finite number.
FINITE = Interval()
#: Finite and > 0.
POSITIVE = Interval(low=0.0)
#: In the open interval (0, 1): probabilities such as δ, α, an FPR.
OPEN_UNIT = Interval(low=0.0, high=1.0)


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def parse_number(value: object, option: str, domain: Interval = FINITE) -> float:
    """``value`` (option text or a JSON number) as a float inside ``domain``.

    Raises:
        OptionError: ``value`` is not a number, or is NaN, infinite or outside
            ``domain``; the message names ``option``.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise OptionError(f"{option} must be {domain.describe()}; got {_shown(value)}")
    try:
        number = float(value)
    except ValueError:
        raise OptionError(f"{option} must be {domain.describe()}; got {_shown(value)}") from None
    if number not in domain:
        raise OptionError(f"{option} must be {domain.describe()}; got {_shown(value)}")
    return number


def parse_int(
    value: object, option: str, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` (option text or a JSON integer) as an int in ``[minimum, maximum]``.

    Args:
        value: Option text or a JSON value.
        option: The option, for the message (``"--dim"``).
        minimum: Smallest value allowed (``None``: no bound).
        maximum: Largest value allowed (``None``: no bound).

    Raises:
        OptionError: ``value`` is not a whole number or lies outside the range;
            the message names ``option``.
    """
    if minimum is not None and maximum is not None:
        domain = f"an integer in [{minimum}, {maximum}]"
    elif minimum is not None:
        domain = f"an integer >= {minimum}"
    elif maximum is not None:
        domain = f"an integer <= {maximum}"
    else:
        domain = "an integer"
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if (
        number is None
        or (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
    ):
        raise OptionError(f"{option} must be {domain}; got {_shown(value)}")
    return number


def parse_number_list(value: object, option: str, domain: Interval = FINITE) -> tuple[float, ...]:
    """A comma list (``"1,4,10"``), a JSON list or a single number, each inside ``domain``.

    Empty items (``"1,,4"``, a trailing comma) and an empty list are refused
    rather than skipped, so what runs is exactly what was typed.

    Raises:
        OptionError: The list is empty, an item is empty, or an item is not a
            number inside ``domain``; the message names ``option``.
    """
    noun = f"a comma list of numbers, each {domain.describe()}"
    if isinstance(value, (list, tuple)):
        items: list[object] = list(value)
    elif isinstance(value, str):
        items = [item.strip() for item in value.split(",")]
        for position, item in enumerate(items, start=1):
            if not item:
                raise OptionError(f"{option} must be {noun}; item {position} of {value!r} is empty")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        items = [value]
    else:
        raise OptionError(f"{option} must be {noun}; got {_shown(value)}")
    if not items:
        raise OptionError(f"{option} must be {noun}; got an empty list")
    numbers = []
    for position, item in enumerate(items, start=1):
        try:
            numbers.append(parse_number(item, option, domain))
        except OptionError:
            raise OptionError(
                f"{option} must be {noun}; item {position} is {_shown(item)}"
            ) from None
    return tuple(numbers)


def _argparse_type(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except OptionError as exc:
            # argparse prefixes "argument --option: ", so drop our own option name.
            message = str(exc)
            raise argparse.ArgumentTypeError(message.split(" ", 1)[1]) from None

    convert.__name__ = name
    return convert


def number_type(option: str, domain: Interval = FINITE) -> Callable[[str], float]:
    """An ``argparse`` type for one number in ``domain`` (NaN and inf refused)."""
    return _argparse_type(lambda text: parse_number(text, option, domain), "number")


def int_type(
    option: str, minimum: int | None = None, maximum: int | None = None
) -> Callable[[str], int]:
    """An ``argparse`` type for an integer in ``[minimum, maximum]``."""
    return _argparse_type(lambda text: parse_int(text, option, minimum, maximum), "integer")


def option_message(exc: Exception, options: Mapping[str, str]) -> str:
    """``str(exc)``, naming the option where ``exc`` names a parameter in ``options``.

    Library errors (:class:`~privfed.errors.ParameterError`) carry the parameter
    name in ``exc.parameter`` and read ``parameter 'clip_norm' must be ...``;
    on the command line that becomes ``--clip-norm must be ...``.
    """
    import re

    text = str(exc)
    parameter = getattr(exc, "parameter", None)
    option = options.get(parameter) if isinstance(parameter, str) else None
    if option is not None:
        text = text.replace(f"parameter {parameter!r}", option, 1)
    # Keyword settings quoted in a message (``secagg_mode='active'``) become options.
    for name, flag in options.items():
        if flag.startswith("--") and " " not in flag:
            text = re.sub(rf"\b{name}=('([^']*)'|([\w.+-]+))", rf"{flag} \2\3", text)
    return " ".join(text.split())


def add_number(
    add: Callable[..., Any], flag: str, domain: Interval = FINITE, **kwargs: Any
) -> None:
    """Add option ``flag`` taking one number in ``domain`` (the flag is named once)."""
    add(flag, type=number_type(flag, domain), **kwargs)


def add_int(
    add: Callable[..., Any],
    flag: str,
    minimum: int | None = None,
    maximum: int | None = None,
    **kwargs: Any,
) -> None:
    """Add option ``flag`` taking one integer in ``[minimum, maximum]``."""
    add(flag, type=int_type(flag, minimum, maximum), **kwargs)


def options_of(*same: str, **renamed: str) -> dict[str, str]:
    """Library parameter -> the option that sets it, for :func:`option_message`.

    ``same`` names parameters whose option is their own name (``clip_norm`` ->
    ``--clip-norm``); ``renamed`` maps the others (``num_clients="--clients"``).
    """
    table = {name: f"--{name.replace('_', '-')}" for name in same}
    table.update(renamed)
    return table


def fail(prog: str, message: str) -> int:
    """Print ``PROG: error: MESSAGE`` as one line on stderr; return exit status 2."""
    import sys

    print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def print_table(rows: list[tuple[str, str]], indent: str = "") -> None:
    """Print ``(key, value)`` rows on stdout, the values aligned in one column."""
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{indent}{key:<{width}}  {value}")


def add_command(
    subparsers: Any, name: str, func: Callable[[argparse.Namespace], int], **kwargs: Any
) -> argparse.ArgumentParser:
    """Add subcommand ``name`` running ``func``, with one-line usage errors.

    ``kwargs`` go to ``add_parser`` (``help``, ``description``,
    ``formatter_class``).  Returns the sub-parser, for its options.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(name, **kwargs)
    one_line_errors(parser)
    parser.set_defaults(func=func)
    return parser
