"""How the table writes numbers: significant figures, spans, powers, plurals."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sig(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` significant figures, never in exponent notation.

    Whole numbers of more digits than that keep all of them (204.3 -> "204").
    """
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    rounded = round(value, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(abs(value))):
        decimals = max(0, decimals - 1)  # 0.0996 -> 0.10, not 0.100
    return f"{value:.{decimals}f}"


def fixed(value: float, decimals: int) -> str:
    """``value`` with exactly ``decimals`` digits after the point."""
    return f"{value:.{decimals}f}"


def times(value: float, digits: int = 2) -> str:
    """A ratio: ``2.4×``."""
    return f"{sig(value, digits)}×"


def count(value: float) -> str:
    """A whole number with thousands separators: ``83,850``."""
    if value != int(value):
        raise ValueError(f"count() needs a whole number, got {value!r}")
    return f"{int(value):,}"


def span(low: float, high: float, fmt: Callable[[float], str]) -> str:
    """``low–high`` in ``fmt``, or one value when both print alike."""
    a, b = fmt(low), fmt(high)
    return a if a == b else f"{a}–{b}"


def points(delta: float) -> str:
    """An accuracy difference in percentage points, signed: ``−0.8``, ``+0.6``."""
    return f"{delta * 100:+.1f}".replace("-", "−")


def number(value: float) -> str:
    """A parameter as written in the source: ``0.5``, ``10``, ``1e-05`` -> ``10⁻⁵``."""
    if value > 0:
        exponent = math.log10(value)
        if exponent == round(exponent) and abs(exponent) >= 3:
            return "10" + str(round(exponent)).translate(_SUPERSCRIPT)
    return f"{value:g}"


def epsilon(value: float | None) -> str:
    """A privacy budget; ``None`` (no DP) is ∞."""
    return "∞" if value is None else number(value)


def join(parts: list[str], sep: str = " / ") -> str:
    return sep.join(parts)


def seconds(value: float) -> str:
    return f"{sig(value, 2)} s"


def micro(value_us: float) -> str:
    """A duration given in µs: µs below a millisecond, ms above."""
    if value_us >= 1000:
        return f"{sig(value_us / 1000, 2)} ms"
    return f"{value_us:.0f} µs" if value_us >= 10 else f"{sig(value_us, 2)} µs"


def wrap(text: str, width: int) -> str:
    """``text`` filled to ``width`` columns, never breaking inside a `code span`."""
    protected = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), text)
    filled = textwrap.fill(protected, width, break_on_hyphens=False, break_long_words=False)
    return filled.replace("\0", " ")


def percent(fraction: float) -> str:
    """A fraction as a percentage to three significant figures: 0.1 -> ``10``."""
    return f"{fraction * 100:.3g}"


def power(exponent: float) -> str:
    """``N^1.42``; a negative exponent with a minus sign."""
    return f"N^{exponent:.2f}".replace("-", "−")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
