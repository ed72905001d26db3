"""The primitives package: public names, hazmat note, purity."""

from __future__ import annotations

import subprocess
import sys

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


def test_primitives_do_not_import_torch() -> None:
    code = (
        "import sys, privfed.secagg.primitives\n"
        "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
