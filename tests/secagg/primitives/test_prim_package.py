"""The primitives package: public names, hazmat note (purity: tests/test_architecture.py)."""

from __future__ import annotations

import privfed.secagg.primitives as prim


def test_all_names_exist_and_are_documented() -> None:
    assert len(set(prim.__all__)) == len(prim.__all__)
    for name in prim.__all__:
        obj = getattr(prim, name)
        if callable(obj):
            assert obj.__doc__, name


def test_package_is_documented_as_hazmat() -> None:
    assert prim.__doc__ is not None
    assert "hazardous" in prim.__doc__.lower()
