"""Size limits of the source tree: no module over 1,000 lines, no function over 100.

A module that grows past a thousand lines holds more than one idea, and a function
past a hundred lines hides stages that want names of their own (issue #22).  The
limits are measured on the parsed source (``ast`` line spans, decorators excluded),
so a comment or docstring counts as the lines it takes.  The self-tests below feed
the two checkers code that breaks each limit by one line, so neither can pass
vacuously.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "privfed"
MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 100


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of every function or method longer than ``limit``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                span = (child.end_lineno or child.lineno) - child.lineno + 1
                if span > limit:
                    found.append((name, span))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def line_count(source: str) -> int:
    """Physical lines of ``source`` (a final line without a newline counts)."""
    return len(source.splitlines())


def _modules() -> list[Path]:
    modules = sorted(SRC.rglob("*.py"))
    assert len(modules) > 100, f"expected the privfed package under {SRC}"
    return modules


def test_no_module_over_a_thousand_lines() -> None:
    over = {
        str(path.relative_to(SRC)): count
        for path in _modules()
        if (count := line_count(path.read_text(encoding="utf-8"))) > MAX_FILE_LINES
    }
    assert over == {}, f"modules over {MAX_FILE_LINES} lines: {over}"


@pytest.mark.slow
def test_no_function_over_a_hundred_lines() -> None:
    over = {
        f"{path.relative_to(SRC)}:{name}": span
        for path in _modules()
        for name, span in long_functions(path.read_text(encoding="utf-8"))
    }
    assert over == {}, f"functions over {MAX_FUNCTION_LINES} lines: {over}"


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}def {name}():\n{body}"


def test_the_function_checker_sees_one_line_over_at_any_depth() -> None:
    at_limit = _function("fits", MAX_FUNCTION_LINES - 1)
    assert long_functions(at_limit) == []
    over = _function("top", MAX_FUNCTION_LINES)
    assert long_functions(over) == [("top", MAX_FUNCTION_LINES + 1)]
    method = "class A:\n" + _function("method", MAX_FUNCTION_LINES, indent="    ")
    assert long_functions(method) == [("A.method", MAX_FUNCTION_LINES + 1)]
    nested = "def outer():\n" + _function("inner", MAX_FUNCTION_LINES, indent="    ")
    names = [name for name, _ in long_functions(nested)]
    assert names == ["outer", "outer.inner"]
    guarded = "if True:\n" + _function("guarded", MAX_FUNCTION_LINES, indent="    ")
    assert [name for name, _ in long_functions(guarded)] == ["guarded"]


def test_the_file_checker_counts_every_line() -> None:
    assert line_count("a\n" * MAX_FILE_LINES) == MAX_FILE_LINES
    assert line_count("a\n" * MAX_FILE_LINES + "b") == MAX_FILE_LINES + 1
