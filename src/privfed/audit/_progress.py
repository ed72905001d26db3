"""Optional progress display for long audit runs (private)."""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__: list[str] = []


def progress_ticker(total: int, enabled: bool, label: str) -> Callable[[], None]:
    """Return a ``tick()`` that advances a progress display by one step.

    Uses tqdm when it is installed, else a counter on stderr; a no-op when
    ``enabled`` is False.
    """
    if not enabled:
        return lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is optional: fall back to a plain counter on stderr
        state = {"done": 0}

        def tick() -> None:
            state["done"] += 1
            print(f"\r{label} {state['done']}/{total}", end="", file=sys.stderr)
            if state["done"] == total:
                print(file=sys.stderr)

        return tick
    bar = tqdm(total=total, desc=label)

    def tick_bar() -> None:
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return tick_bar
