"""Dependency rules: the pure cores never import torch or the engines."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE_MODULES = ["privfed", "privfed.errors", "privfed.secagg", "privfed.dp", "privfed.testing"]


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_does_not_import_torch(module: str) -> None:
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module!r})\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')"
        " or m.startswith('privfed.models'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"{module} pulled in {out}"


def test_cli_help_is_light() -> None:
    code = (
        "import sys\n"
        "from privfed.cli import build_parser\n"
        "build_parser()\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
