"""privfed.dp stays pure and light: dp-accounting and hypothesis load only on demand."""

from __future__ import annotations

import ast
import subprocess
import sys


def _loaded_after(statement: str, prefixes: tuple[str, ...]) -> list[str]:
    code = (
        "import sys\n"
        f"{statement}\n"
        f"prefixes = {prefixes!r}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in prefixes}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    return list(ast.literal_eval(out))


def test_dp_import_does_not_load_optional_or_heavy_modules() -> None:
    assert _loaded_after("import privfed.dp", ("torch", "dp_accounting", "hypothesis")) == []


def test_testing_package_loads_hypothesis_but_not_torch() -> None:
    assert _loaded_after("import privfed.testing", ("torch", "hypothesis")) == ["hypothesis"]
