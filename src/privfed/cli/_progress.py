"""Progress of a ``privfed`` command on stderr (private).

Results go to stdout; progress goes to stderr, so ``privfed run ... >
results.txt`` keeps only the results.  :func:`reporter` turns the library's
:class:`~privfed.progress.ProgressEvent` stream into:

* one line when a stage starts and one when it ends (with its seconds);
* for a stage with counted steps (classifier epochs, factories, the clients of
  a secure-aggregation stage): a tqdm progress bar when stderr is a terminal,
  or, when it is not (a log file, a pipe), at most one line every
  :data:`LINE_INTERVAL` seconds per stage -- never one line per step;
* nothing at all with ``--quiet``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["LINE_INTERVAL", "reporter"]

#: Seconds between two lines of one counted stage when stderr is not a terminal.
LINE_INTERVAL = 10.0


def reporter(quiet: bool, stream: TextIO | None = None) -> Any:
    """A progress callback for a command (``None`` with ``quiet``).

    Args:
        quiet: ``--quiet``: report nothing.
        stream: Where progress goes (default ``sys.stderr``, looked up now).
    """
    if quiet:
        return None
    out = sys.stderr if stream is None else stream
    isatty = getattr(out, "isatty", None)
    return _Reporter(out, bars=bool(isatty and isatty()))


class _Reporter:
    """Stage lines, plus bars (a terminal) or rate-limited lines (anything else)."""

    def __init__(self, stream: TextIO, *, bars: bool) -> None:
        self.stream = stream
        self.bars = bars
        self.start = time.perf_counter()
        self.open: dict[str, Any] = {}  # stage -> its tqdm bar
        self.printed: dict[str, float] = {}  # stage -> when its last counted line was printed

    def line(self, text: str) -> None:
        stamped = f"[{time.perf_counter() - self.start:6.1f}s] {text}"
        if self.open:
            from tqdm import tqdm

            tqdm.write(stamped, file=self.stream)
        else:
            print(stamped, file=self.stream, flush=True)

    def __call__(self, event: Any) -> None:
        from privfed.progress import format_event

        if event.total == 1 or event.seconds is not None:
            self._close(event.stage)
            self.line(format_event(event))
            return
        if self.bars:
            self._bar(event)
            return
        now = time.perf_counter()
        if now - self.printed.get(event.stage, self.start) >= LINE_INTERVAL:
            self.printed[event.stage] = now
            self.line(format_event(event))

    def _bar(self, event: Any) -> None:
        from tqdm import tqdm

        bar = self.open.get(event.stage)
        if bar is not None and bar.total != event.total:
            self._close(event.stage)
            bar = None
        if bar is None:
            bar = tqdm(
                total=event.total, desc=event.stage, file=self.stream, leave=False, mininterval=0.5
            )
            self.open[event.stage] = bar
        if event.message:
            bar.set_postfix_str(event.message, refresh=False)
        if event.done >= bar.n:
            bar.update(event.done - bar.n)  # redraws at most every mininterval
        else:
            bar.n = event.done
            bar.refresh()
        if event.finished:
            self._close(event.stage)

    def _close(self, stage: str) -> None:
        bar = self.open.pop(stage, None)
        if bar is not None:
            bar.close()
