"""The parts of ``benchmarks/figures.py``: result files, number formats, the rows by area.

:data:`ROWS` is every registered row builder in table order: the areas in the
order of :data:`AREAS`, each area's rows in the order its module defines them.
"""

from __future__ import annotations

from types import ModuleType

from . import dp_rows, engine_rows, flower_rows, privacy_rows, runtime_rows, secagg_rows, table

__all__ = ["AREAS", "ROWS"]

#: The row modules in the order of the README's table.
AREAS: tuple[ModuleType, ...] = (
    secagg_rows,
    dp_rows,
    engine_rows,
    flower_rows,
    privacy_rows,
    runtime_rows,
)

_ORDER = {area.__name__: i for i, area in enumerate(AREAS)}
#: Every row builder in table order (a stable sort keeps each area's own order).
ROWS = sorted(table.ROWS, key=lambda builder: _ORDER[builder.__module__])
