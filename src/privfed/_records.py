"""Plain-dictionary views of dataclass instances, for ``to_dict`` methods.

A ``to_dict`` that lists every field by hand drifts when a field is added;
:func:`field_dict` reads the fields from the class instead.  Values are taken
as they are (no copy, no conversion), so a caller replaces the entries that
need a JSON form (``{**field_dict(self), "tpr": self.tpr.to_dict()}``: an
entry replaced this way keeps its position).  :func:`set_fields` is the other
direction: a frozen dataclass stores the values its ``__post_init__`` checked.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["field_dict", "set_fields"]


def field_dict(record: Any, *names: str) -> dict[str, Any]:
    """``{name: value}`` of a dataclass instance's fields, shallow.

    Args:
        record: A dataclass instance.
        names: The fields to take, in this order; every field in declaration
            order when none is named.

    Returns:
        A new dictionary; the values are the attributes themselves.
    """
    if not names:
        names = tuple(f.name for f in dataclasses.fields(record))
    return {name: getattr(record, name) for name in names}


def set_fields(record: Any, **values: Any) -> None:
    """Store ``values`` (checked in ``__post_init__``) on a frozen dataclass instance."""
    for name, value in values.items():
        object.__setattr__(record, name, value)
