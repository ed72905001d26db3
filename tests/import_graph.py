"""The import-graph checker behind ``tests/test_architecture.py`` (which holds the contracts).

A **static import graph** built with :mod:`ast` from every ``.py`` file of a
package: every import wherever it occurs -- module level, inside functions, under
``if TYPE_CHECKING:``, as ``importlib.import_module("literal")`` and as entries of
a ``privfed._lazy.lazy_exports`` table -- with relative imports resolved and
``from a.b import c`` mapped to module ``a.b.c`` when that module exists, else to
``a.b``.  On it: import bans (:class:`ImportBan`), load bans following what runs on
import (:class:`LoadBan`), and import cycles (:func:`find_cycles`).  Import targets
and contract sources match by package prefix.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# == the contracts' vocabulary ========================================================


@dataclass(frozen=True)
class ImportBan:
    """No module under ``sources`` imports anything under ``forbidden``, anywhere.

    Counts every import in the file: module level, in functions, under
    ``TYPE_CHECKING``, literal ``importlib.import_module`` calls.

    Attributes:
        name: Contract id (shown in the test id).
        sources: Packages/modules governed, matched by prefix; each must exist.
        forbidden: Import targets, matched by prefix.
        why: One line saying why, shown on failure.
        exempt: Governed-by-prefix modules the rule does not apply to (prefix match).
        exempt_exact: Modules the rule does not apply to (exact name only).
    """

    name: str
    sources: tuple[str, ...]
    forbidden: tuple[str, ...]
    why: str
    exempt: tuple[str, ...] = ()
    exempt_exact: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadBan:
    """Importing any of ``modules`` never loads anything under ``forbidden``.

    Follows the transitive closure of the imports that execute on import (module
    level, outside ``TYPE_CHECKING``) through privfed modules, parent packages
    included (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``).

    Attributes:
        name: Contract id.
        modules: Exact module names; each must exist.
        forbidden: Names, matched by prefix, that must not be loaded.
        why: One line saying why, shown on failure.
    """

    name: str
    modules: tuple[str, ...]
    forbidden: tuple[str, ...]
    why: str


# == the import graph =================================================================


def within(name: str, prefix: str) -> bool:
    """Whether ``name`` is ``prefix`` or inside package ``prefix``."""
    return name == prefix or name.startswith(prefix + ".")


def within_any(name: str, prefixes: Iterable[str]) -> bool:
    return any(within(name, p) for p in prefixes)


@dataclass(frozen=True)
class Import:
    """One import statement (one alias of it), resolved.

    Attributes:
        importer: Module containing the statement.
        target: Resolved module name imported (external names kept as written).
        path: File of the importer.
        lineno: Line of the statement.
        statement: The import as written, for messages.
        deferred: Inside a function or lambda, or a lazy re-export table entry
            (runs late, if ever).
        type_checking: Inside an ``if TYPE_CHECKING:`` body (never runs).
    """

    importer: str
    target: str
    path: Path
    lineno: int
    statement: str
    deferred: bool
    type_checking: bool

    @property
    def runs_on_import(self) -> bool:
        return not (self.deferred or self.type_checking)

    def where(self) -> str:
        try:
            shown = self.path.relative_to(REPO)
        except ValueError:
            shown = self.path
        tags = [
            t
            for t, on in (
                ("deferred", self.deferred),
                ("under TYPE_CHECKING", self.type_checking),
            )
            if on
        ]
        tag = f" ({', '.join(tags)})" if tags else ""
        return f"{shown}:{self.lineno}: {self.statement}{tag} -> {self.target}"


@dataclass(frozen=True)
class ImportGraph:
    """Modules under one root package and every import they contain."""

    root: str
    modules: Mapping[str, Path]
    imports: tuple[Import, ...]

    def has(self, prefix: str) -> bool:
        """Whether ``prefix`` names a module or package that exists."""
        return any(within(m, prefix) for m in self.modules)

    def imports_of(self, module: str) -> Iterator[Import]:
        return (i for i in self.imports if i.importer == module)


def _module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_import_module_call(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module" and (
            isinstance(func.value, ast.Name) and func.value.id == "importlib"
        )
    return isinstance(func, ast.Name) and func.id in {"import_module", "__import__"}


def _is_lazy_exports_call(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "lazy_exports"


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, path: Path, known: set[str]) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.path = path
        self.known = known
        self.found: list[Import] = []
        self.deferred = False
        self.type_checking = False
        self.dict_literals: dict[str, ast.Dict] = {}

    def _add(self, target: str, node: ast.AST, statement: str) -> None:
        self.found.append(
            Import(
                self.module,
                target,
                self.path,
                getattr(node, "lineno", 0),
                statement,
                self.deferred,
                self.type_checking,
            )
        )

    def _relative_base(self, level: int, module: str | None, lineno: int) -> str:
        parts = self.package.split(".") if self.package else []
        if level - 1 >= len(parts):
            raise ValueError(f"{self.path}:{lineno}: relative import beyond the top package")
        base = parts[: len(parts) - (level - 1)]
        return ".".join([*base, module] if module else base)

    # -- scopes -----------------------------------------------------------------------
    def _deferred_scope(self, node: ast.AST) -> None:
        saved, self.deferred = self.deferred, True
        self.generic_visit(node)
        self.deferred = saved

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _deferred_scope  # noqa: N815

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.visit(node.test)
        saved, self.type_checking = self.type_checking, True
        for stmt in node.body:
            self.visit(stmt)
        self.type_checking = saved
        for stmt in node.orelse:
            self.visit(stmt)

    # -- imports ----------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = (
            self._relative_base(node.level, node.module, node.lineno)
            if node.level
            else node.module or ""
        )
        written = "." * node.level + (node.module or "")
        for alias in node.names:
            candidate = f"{base}.{alias.name}" if base else alias.name
            target = candidate if alias.name != "*" and candidate in self.known else base
            self._add(target, node, f"from {written} import {alias.name}")

    def visit_Call(self, node: ast.Call) -> None:
        if (
            _is_import_module_call(node)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            name = node.args[0].value
            statement = f"{ast.unparse(node.func)}({name!r})"
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                package = next(
                    (
                        a.value
                        for a in [
                            *node.args[1:2],
                            *(k.value for k in node.keywords if k.arg == "package"),
                        ]
                        if isinstance(a, ast.Constant) and isinstance(a.value, str)
                    ),
                    None,
                )
                if package is not None:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (level - 1)])
                    rest = name.lstrip(".")
                    name = f"{base}.{rest}" if rest else base
                else:
                    name = self._relative_base(level, name.lstrip(".") or None, node.lineno)
            self._add(name, node, statement)
        elif _is_lazy_exports_call(node):
            self._add_lazy_table(node)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.dict_literals[target.id] = node.value
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.value, ast.Dict) and isinstance(node.target, ast.Name):
            self.dict_literals[node.target.id] = node.value
        self.generic_visit(node)

    def _add_lazy_table(self, node: ast.Call) -> None:
        # privfed._lazy.lazy_exports(package, {name: module}): each module is imported
        # on first attribute access, i.e. a deferred import.
        table = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "table")]
        if not table:
            return
        literal = table[0]
        if isinstance(literal, ast.Name):
            literal = self.dict_literals.get(literal.id, literal)
        if not isinstance(literal, ast.Dict):
            return
        saved, self.deferred = self.deferred, True
        for key, value in zip(literal.keys, literal.values, strict=True):
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                shown = ast.unparse(key) if key is not None else "**"
                self._add(value.value, value, f"lazy_exports {shown}: {value.value!r}")
        self.deferred = saved


def build_import_graph(src: Path, root: str) -> ImportGraph:
    """Parse every ``.py`` file of package ``root`` under ``src`` and resolve its imports.

    Args:
        src: Directory containing the package directory (the ``src`` of a src layout).
        root: Top-level package name.

    Returns:
        The graph; raises ``SyntaxError`` naming the file if one does not parse.
    """
    files = sorted((src / root).rglob("*.py"))
    modules = {_module_name(src, p): p for p in files}
    known = set(modules)
    found: list[Import] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        collector = _Collector(module, path.name == "__init__.py", path, known)
        collector.visit(tree)
        found.extend(collector.found)
    return ImportGraph(root, modules, tuple(found))


# == the checks =======================================================================


def _missing(kind: str, name: str, contract: str) -> str:
    return (
        f"contract {contract!r} governs {kind} {name!r}, which does not exist under src/ "
        "(a rule about a missing package is a defect: move the code or edit the table)"
    )


def ban_violations(graph: ImportGraph, ban: ImportBan, source: str) -> list[str]:
    """Imports by modules under ``source`` that ``ban`` forbids, as ``file:line`` lines."""
    if not graph.has(source):
        return [_missing("package", source, ban.name)]
    return [
        imp.where()
        for imp in graph.imports
        if within(imp.importer, source)
        and not within_any(imp.importer, ban.exempt)
        and imp.importer not in ban.exempt_exact
        and within_any(imp.target, ban.forbidden)
    ]


def _executed(graph: ImportGraph, target: str) -> list[str]:
    """Modules of ``graph`` whose code runs when ``target`` is imported: parents first."""
    parts = target.split(".")
    chain = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return [name for name in chain if name in graph.modules]


def load_closure(graph: ImportGraph, module: str) -> dict[str, Import | None]:
    """Everything loaded by ``import module``, each with the import that first loaded it.

    Keys are modules of ``graph`` and external names as imported; the value is
    ``None`` for ``module`` itself and its parent packages.
    """
    loaded: dict[str, Import | None] = {}
    queue: deque[str] = deque()

    def visit(name: str, why: Import | None) -> None:
        if name not in loaded:
            loaded[name] = why
            if name in graph.modules:
                queue.append(name)

    for name in _executed(graph, module):
        visit(name, None)
    while queue:
        for imp in graph.imports_of(queue.popleft()):
            if imp.runs_on_import:
                for name in _executed(graph, imp.target):
                    visit(name, imp)
                visit(imp.target, imp)
    return loaded


def load_violations(graph: ImportGraph, ban: LoadBan, module: str) -> list[str]:
    """Forbidden names that ``import module`` loads, each with the chain that loads it."""
    if module not in graph.modules:
        return [_missing("module", module, ban.name)]
    loaded = load_closure(graph, module)
    problems = []
    for name, why in loaded.items():
        if not within_any(name, ban.forbidden) or why is None:
            continue
        chain: list[str] = []
        step: Import | None = why
        while step is not None:
            chain.append(step.where())
            step = loaded.get(step.importer)
        problems.append(f"{name} loaded via:\n    " + "\n    ".join(reversed(chain)))
    return sorted(set(problems))


def strongly_connected_components(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; each component sorted, components in finishing order."""
    successors = {node: sorted(set(nexts)) for node, nexts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def open_node(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for start in sorted(successors):
        if start in index:
            continue
        open_node(start)
        work = [(start, iter(successors.get(start, ())))]
        while work:
            node, nexts = work[-1]
            for nxt in nexts:
                if nxt not in index:
                    open_node(nxt)
                    work.append((nxt, iter(successors.get(nxt, ()))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def import_edges(graph: ImportGraph, *, runtime_only: bool) -> dict[str, dict[str, Import]]:
    """Import edges between modules of ``graph`` (one witness per edge).

    Only the named module is an edge target (its nearest existing ancestor if it
    is not a module): ``privfed.dp.ledger`` importing ``privfed.dp.calibration`` is
    an edge to ``calibration`` only, not to the package ``privfed.dp`` that Python
    initialises first -- while ``from privfed.dp import X`` inside
    ``privfed.dp.ledger`` is an edge to ``privfed.dp`` itself, and closes a cycle
    with the package's own ``import privfed.dp.ledger``.  Implicit parent-package
    initialisation is therefore never an edge: counted, it would make every
    package that re-exports its children a cycle with each of them.

    Args:
        graph: The import graph.
        runtime_only: Only imports that run on import (module level, outside
            ``TYPE_CHECKING``).  ``False`` counts every import -- function-level,
            ``TYPE_CHECKING``, literal ``importlib`` calls and lazy re-export table
            entries -- which is the design graph: a package's lazy table naming
            its children is an edge to each, so a child importing its own lazy
            facade is a cycle.
    """
    edges: dict[str, dict[str, Import]] = {m: {} for m in graph.modules}
    for imp in graph.imports:
        if runtime_only and not imp.runs_on_import:
            continue
        executed = _executed(graph, imp.target)
        if executed and within(imp.target, graph.root):
            edges[imp.importer].setdefault(executed[-1], imp)
    return edges


def find_cycles(graph: ImportGraph, *, runtime_only: bool = False) -> list[list[str]]:
    """Import cycles (components of two or more modules, or self-loops).

    By default among every import, wherever it stands (see :func:`import_edges`):
    a cycle closed through a function-level or ``TYPE_CHECKING`` import cannot
    fail at import time, but it is still two modules that each need the other.
    ``runtime_only`` finds the cycles that Python itself walks on import.
    """
    edges = import_edges(graph, runtime_only=runtime_only)
    return [c for c in strongly_connected_components(edges) if len(c) > 1 or c[0] in edges[c[0]]]


def describe_cycle(graph: ImportGraph, component: list[str], *, runtime_only: bool = False) -> str:
    edges = import_edges(graph, runtime_only=runtime_only)
    members = set(component)
    lines = [edges[a][b].where() for a in component for b in sorted(edges[a]) if b in members]
    return "cycle among " + ", ".join(component) + ":\n    " + "\n    ".join(lines)
