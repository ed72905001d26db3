"""A row of the figures table, and the registry of row builders (in table order)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .results import FigureError, Results


@dataclass(frozen=True)
class Row:
    benchmark: str
    what: str
    figure: str

    def render(self) -> str:
        cells = (f"`{self.benchmark}`", self.what, self.figure)
        for cell in cells:
            if "|" in cell or "\n" in cell:
                raise FigureError(f"row {self.benchmark}: a cell contains '|' or a newline")
        return "| " + " | ".join(cells) + " |"


RowBuilder = Callable[[Results], Row]
ROWS: list[RowBuilder] = []


def row(builder: RowBuilder) -> RowBuilder:
    ROWS.append(builder)
    return builder
