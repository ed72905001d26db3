"""One progress protocol for every long-running part of privfed.

Secure-aggregation runs, both engines' jobs and the Flower apps report progress
the same way: a callable that receives :class:`ProgressEvent` values.

* A stage that has countable steps (clients of a secure-aggregation stage,
  factories to train, classifier epochs) reports ``done`` out of ``total``.
* A stage without steps reports ``done=0, total=1`` when it starts and
  ``done=1, total=1`` when it finishes; the finishing event carries the
  stage's wall-clock ``seconds``.

Events are plain frozen values: a callback may print them, forward them to a
logger or a progress bar, or collect them in a list.  Nothing secret is ever put
in an event (messages describe sizes, parameters and outcomes, never data).

This module is pure Python and sits below every other privfed module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ProgressEvent", "ProgressFn", "format_event", "silent"]


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report.

    Attributes:
        stage: Short name of the stage (``"clients"``, ``"secagg"``,
            ``"share_keys"``, ``"factories"``, ...); non-empty.
        done: Steps finished, ``0 <= done <= total``.
        total: Steps in the stage, ``>= 1``.
        message: Human-readable detail (may be empty).
        seconds: Wall-clock seconds the stage took; set only on the event that
            finishes a stage (``done == total``) when the reporter timed it.
    """

    stage: str
    done: int
    total: int
    message: str = ""
    seconds: float | None = None

    def __post_init__(self) -> None:
        # Validation errors are plain ValueError/TypeError: this module sits
        # below privfed.errors' users and must not depend on anything.
        if not isinstance(self.stage, str) or not self.stage:
            raise ValueError(f"stage must be a non-empty str, got {self.stage!r}")
        for name in ("done", "total"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if self.total < 1 or not 0 <= self.done <= self.total:
            raise ValueError(
                f"need 0 <= done <= total and total >= 1, got {self.done}/{self.total}"
            )
        if not isinstance(self.message, str):
            raise TypeError(f"message must be a str, got {type(self.message).__name__}")
        if self.seconds is not None and (
            isinstance(self.seconds, bool)
            or not isinstance(self.seconds, int | float)
            or not math.isfinite(self.seconds)
            or self.seconds < 0
        ):
            raise ValueError(f"seconds must be a finite float >= 0 or None, got {self.seconds!r}")

    @property
    def finished(self) -> bool:
        """Whether this event ends its stage (``done == total``)."""
        return self.done == self.total


#: A progress callback: receives every :class:`ProgressEvent`.
ProgressFn = Callable[[ProgressEvent], None]


def silent(event: ProgressEvent) -> None:
    """A progress callback that ignores every event."""


def format_event(event: ProgressEvent) -> str:
    """One line for a terminal: ``stage  done/total  message  (seconds)``."""
    parts = [f"{event.stage:<11}"]
    if event.total > 1:
        parts.append(f"{event.done}/{event.total}")
    if event.message:
        parts.append(event.message)
    if event.seconds is not None:
        parts.append(f"({event.seconds:.2f} s)")
    return " ".join(parts)
