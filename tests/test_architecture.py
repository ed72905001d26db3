"""Import contracts of privfed, enforced on the real import graph of ``src/privfed``.

Three layers of checks:

1. A **static import graph** built with :mod:`ast` from every ``.py`` file under
   ``src/privfed``.  It records every import wherever it occurs -- module level,
   inside functions, under ``if TYPE_CHECKING:`` and as
   ``importlib.import_module("literal")`` -- with relative imports resolved and
   ``from a.b import c`` mapped to module ``a.b.c`` when that module exists in
   ``src``, else to ``a.b``.  The contracts are data (:data:`IMPORT_BANS`,
   :data:`LOAD_BANS`, :data:`RUNTIME_CHECKS`): a layout change edits a table, not
   the checker.  A contract whose source package does not exist fails: a rule
   about a missing package is a defect in the table.
2. **Runtime checks** in a fresh interpreter, one parametrized helper, asserting
   which modules ``sys.modules`` holds after the imports (catches what static
   analysis cannot see, such as import-time calls into lazy code).
3. **Self-tests** on a synthetic package written to ``tmp_path``, proving that
   the checker detects each kind of violation (so none of the above can pass
   vacuously).

Import targets and contract sources match by package prefix: a rule about
``privfed.engines`` covers ``privfed.engines.latent.job`` too.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
ROOT = "privfed"

# == the contracts ====================================================================

#: The pure cores: numpy, scipy, cryptography, hypothesis (testing) at most.
CORES = (
    "privfed.secagg",
    "privfed.dp",
    "privfed.testing",
    "privfed.errors",
    "privfed._checks",
    "privfed._deps",
    "privfed._lazy",
    "privfed._version",
    "privfed.progress",
)
#: Third-party packages the cores must never touch (not even for a type hint).
HEAVY = ("torch", "torchvision", "diffusers", "sklearn", "matplotlib", "flwr")
#: Imports that load torch when executed.
TORCH_LOADERS = ("torch", "torchvision", "diffusers", "safetensors.torch")
#: The torch-built engines and their compatibility re-exports.
ENGINES = ("privfed.engines", "privfed.models", "privfed.pipeline")
#: Everything layered above the cores.
ABOVE_CORES = (*ENGINES, "privfed.data", "privfed.cli", "privfed.flower", "privfed.audit")
#: Forbidden privfed names that need not exist (banned pre-emptively); every other
#: forbidden ``privfed.*`` name must exist, so a typo cannot make a rule vacuous.
ABSENT_ON_PURPOSE: tuple[str, ...] = ()


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


IMPORT_BANS: tuple[ImportBan, ...] = (
    ImportBan(
        "cores-stay-pure",
        CORES,
        (*ABOVE_CORES, *HEAVY),
        "the cores never import torch, the engines or any layer above them",
    ),
    ImportBan(
        "secagg-without-dp", ("privfed.secagg",), ("privfed.dp",), "secagg and dp are independent"
    ),
    ImportBan(
        "dp-without-secagg", ("privfed.dp",), ("privfed.secagg",), "secagg and dp are independent"
    ),
    ImportBan("dp-without-audit", ("privfed.dp",), ("privfed.audit",), "audit builds on dp"),
    ImportBan(
        "audit-pure-layer",
        ("privfed.audit",),
        (*TORCH_LOADERS, *ENGINES),
        "privfed.audit documents its pure layer (everything but torch_scoring) as never torch",
        exempt=("privfed.audit.torch_scoring",),
    ),
    ImportBan(
        "libraries-below-cli",
        (*ENGINES, "privfed.data", "privfed.audit"),
        ("privfed.cli",),
        "the command line sits on top; libraries never import it",
    ),
    ImportBan(
        "cli-is-the-top",
        (ROOT,),
        ("privfed.cli",),
        "only the command line itself and python -m privfed import privfed.cli",
        exempt=("privfed.cli", "privfed.__main__"),
    ),
    ImportBan(
        "compat-shims-are-leaves",
        (ROOT,),
        ("privfed.models", "privfed.pipeline"),
        "privfed.models / privfed.pipeline only re-export privfed.engines for old callers",
        exempt=("privfed.models", "privfed.pipeline"),
        exempt_exact=(ROOT,),  # the root's lazy attribute table names them
    ),
    ImportBan(
        "flower-is-a-leaf",
        (ROOT,),
        ("privfed.flower",),
        "privfed.flower (the Flower apps) builds on the cores and engines; nothing imports it",
        exempt=("privfed.flower", "privfed.cli"),
    ),
)

LOAD_BANS: tuple[LoadBan, ...] = (
    LoadBan(
        "light-imports",
        (
            ROOT,
            "privfed.errors",
            "privfed._version",
            "privfed._checks",
            "privfed._deps",
            "privfed._lazy",
            "privfed.progress",
            "privfed.secagg",
            "privfed.secagg.primitives",
            "privfed.secagg.parameters",
            "privfed.dp",
            "privfed.testing",
        ),
        (*ABOVE_CORES, *HEAVY),
        "import privfed and the cores stay light: no engines, no torch",
    ),
    LoadBan(
        "dp-optional-deps-on-demand",
        ("privfed.dp",),
        ("dp_accounting", "hypothesis"),
        "dp-accounting and hypothesis load only when a function needs them",
    ),
    LoadBan(
        "audit-loads-pure-layer",
        ("privfed.audit",),
        (*TORCH_LOADERS, *ENGINES, "matplotlib"),
        "import privfed.audit loads torch_scoring and matplotlib only on first use",
    ),
    LoadBan(
        "torch-free-server-path",
        (
            "privfed.engines.latent.statistics",
            "privfed.engines.latent.release",
            "privfed.engines.latent.accounting",
            "privfed.engines.latent.gaussians",
            "privfed.engines.latent.self_audit",
            "privfed.engines.latent.audit",
            "privfed.engines.latent",
            "privfed.engines.moments",
            "privfed.engines.moments.planning",
            "privfed.engines.job",
            "privfed.engines.model_card",
            "privfed.data",
        ),
        TORCH_LOADERS,
        "the server side of the latent engine (statistics, release, accounting) runs without torch",
    ),
    LoadBan(
        "flower-apps-load-torch-on-use",
        (
            "privfed.flower",
            "privfed.flower.client",
            "privfed.flower.server",
            "privfed.flower.secagg_app",
            "privfed.flower.apps",
            "privfed.flower.node_app",
            "privfed.flower.latent_node",
            "privfed.flower.declaration",
            "privfed.flower.mod",
            "privfed.flower.training",
        ),
        TORCH_LOADERS,
        "a Flower node imports torch only when a job needs it (the secure sum never does)",
    ),
)


@dataclass(frozen=True)
class RuntimeCheck:
    """After running ``statements`` in a fresh interpreter, ``sys.modules`` holds
    nothing under ``absent`` and something under each of ``present``."""

    name: str
    statements: tuple[str, ...]
    absent: tuple[str, ...]
    present: tuple[str, ...] = ()


_NO_ENGINES = ("torch", *ENGINES)
RUNTIME_CHECKS: tuple[RuntimeCheck, ...] = (
    RuntimeCheck(
        "cores",
        (
            "import privfed",
            "import privfed.errors",
            "import privfed._version",
            "import privfed._checks",
            "import privfed._deps",
            "import privfed._lazy",
            "import privfed.progress",
            "import privfed.secagg",
            "import privfed.secagg.primitives",
            "import privfed.secagg.parameters",
        ),
        _NO_ENGINES,
    ),
    RuntimeCheck("dp", ("import privfed.dp",), (*_NO_ENGINES, "dp_accounting", "hypothesis")),
    # privfed.testing imports hypothesis when a strategy is first built, not on import.
    RuntimeCheck("testing", ("import privfed.testing",), (*_NO_ENGINES, "hypothesis")),
    RuntimeCheck(
        "testing-on-use",
        ("import privfed.testing", "privfed.testing.clipped_vectors(dim=2, clip_norm=1.0)"),
        _NO_ENGINES,
        present=("hypothesis",),
    ),
    RuntimeCheck("audit", ("import privfed.audit",), (*_NO_ENGINES, "matplotlib")),
    RuntimeCheck(
        "torch-free-server-path",
        (
            "import privfed.engines.latent.statistics",
            "import privfed.engines.latent.release",
            "import privfed.engines.latent.accounting",
            "import privfed.engines.latent.gaussians",
            "import privfed.engines.latent.self_audit",
            "import privfed.engines.latent.audit",
            "import privfed.engines.job",
            "import privfed.engines.model_card",
            "import privfed.data",
        ),
        ("torch",),
    ),
    RuntimeCheck(
        "cli-parser", ("from privfed.cli import build_parser", "build_parser()"), ("torch",)
    ),
)

#: Runtime checks that start a heavy interpreter (scipy): marked slow, as before.
_SLOW_RUNTIME = frozenset({"audit"})

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


@cache
def real_graph() -> ImportGraph:
    return build_import_graph(SRC, ROOT)


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


def runtime_edges(graph: ImportGraph) -> dict[str, dict[str, Import]]:
    """Module-level import edges between modules of ``graph`` (one witness per edge).

    Only the named module is an edge target (its nearest existing ancestor if it
    is not a module): ``privfed.dp.ledger`` importing ``privfed.dp.calibration`` is
    an edge to ``calibration`` only, not to the package ``privfed.dp`` that is
    already being initialised -- while ``from privfed.dp import X`` inside
    ``privfed.dp.ledger`` is an edge to ``privfed.dp`` itself, and closes a cycle
    with the package's own ``import privfed.dp.ledger``.
    """
    edges: dict[str, dict[str, Import]] = {m: {} for m in graph.modules}
    for imp in graph.imports:
        if not imp.runs_on_import:
            continue
        executed = _executed(graph, imp.target)
        if executed and within(imp.target, graph.root):
            edges[imp.importer].setdefault(executed[-1], imp)
    return edges


def find_cycles(graph: ImportGraph) -> list[list[str]]:
    """Import cycles among module-level imports: components of two or more, or self-loops."""
    edges = runtime_edges(graph)
    return [c for c in strongly_connected_components(edges) if len(c) > 1 or c[0] in edges[c[0]]]


def describe_cycle(graph: ImportGraph, component: list[str]) -> str:
    edges = runtime_edges(graph)
    members = set(component)
    lines = [edges[a][b].where() for a in component for b in sorted(edges[a]) if b in members]
    return "cycle among " + ", ".join(component) + ":\n    " + "\n    ".join(lines)


# == tests on the real package ========================================================


def test_graph_covers_the_package() -> None:
    graph = real_graph()
    files = sorted((SRC / ROOT).rglob("*.py"))
    assert len(graph.modules) == len(files) > 10
    assert ROOT in graph.modules
    assert any(i.target.startswith("privfed.") for i in graph.imports)


def test_forbidden_privfed_names_exist() -> None:
    # A typo in a forbidden name ("privfed.engins") would make its rule vacuous.
    graph = real_graph()
    names = {f for b in IMPORT_BANS for f in b.forbidden} | {
        f for b in LOAD_BANS for f in b.forbidden
    }
    missing = sorted(
        n for n in names if within(n, ROOT) and n not in ABSENT_ON_PURPOSE and not graph.has(n)
    )
    assert not missing, f"forbidden names that match no module: {missing}"


@pytest.mark.parametrize(
    ("ban", "source"),
    [pytest.param(b, s, id=f"{b.name}:{s}") for b in IMPORT_BANS for s in b.sources],
)
def test_import_ban(ban: ImportBan, source: str) -> None:
    problems = ban_violations(real_graph(), ban, source)
    if problems:
        pytest.fail(
            f"[{ban.name}] {source} must not import {', '.join(ban.forbidden)} ({ban.why}):\n  "
            + "\n  ".join(problems),
            pytrace=False,
        )


@pytest.mark.parametrize(
    ("ban", "module"),
    [pytest.param(b, m, id=f"{b.name}:{m}") for b in LOAD_BANS for m in b.modules],
)
def test_load_ban(ban: LoadBan, module: str) -> None:
    problems = load_violations(real_graph(), ban, module)
    if problems:
        pytest.fail(
            f"[{ban.name}] import {module} must not load {', '.join(ban.forbidden)} ({ban.why}):"
            "\n  " + "\n  ".join(problems),
            pytrace=False,
        )


def test_no_import_cycles() -> None:
    graph = real_graph()
    cycles = find_cycles(graph)
    if cycles:
        pytest.fail(
            "module-level import cycles:\n  "
            + "\n  ".join(describe_cycle(graph, c) for c in cycles),
            pytrace=False,
        )


# == runtime checks (fresh interpreter) ===============================================

_PROBE = textwrap.dedent(
    """
    import json, sys
    errors, namespace = {}, {}
    for statement in json.loads(sys.argv[1]):
        try:
            exec(statement, namespace)
        except Exception as exc:
            errors[statement] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"errors": errors, "modules": sorted(sys.modules)}))
    """
)


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.name in _SLOW_RUNTIME else [])
        for c in RUNTIME_CHECKS
    ],
)
def test_runtime_imports(check: RuntimeCheck) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(check.statements))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    modules: list[str] = result["modules"]
    problems = [f"{statement}: {error}" for statement, error in result["errors"].items()]
    loaded = sorted(m for m in modules if within_any(m, check.absent))
    if loaded:
        problems.append(f"loaded {', '.join(loaded)} (must not load {', '.join(check.absent)})")
    missing = [p for p in check.present if not any(within(m, p) for m in modules)]
    if missing:
        problems.append(f"did not load {', '.join(missing)}")
    if problems:
        pytest.fail(
            f"[{check.name}] in a fresh interpreter, {'; '.join(check.statements)}:\n  "
            + "\n  ".join(problems),
            pytrace=False,
        )


# == self-tests: the checker can fail =================================================

_SYNTHETIC = {
    "fake/__init__.py": "",
    # a relative import, and a relative import of a name defined in a submodule
    "fake/core/__init__.py": "from . import helper\nfrom .typed import Alias\n",
    # torch only inside a function
    "fake/core/helper.py": "def load():\n    import torch\n    return torch\n",
    # an engine import only for a type hint
    "fake/core/typed.py": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from fake.engines import Engine\n"
        "Alias = int\n"
    ),
    # a literal importlib call
    "fake/core/dyn.py": (
        "import importlib\n"
        "def engine():\n"
        "    return importlib.import_module('fake.engines.heavy')\n"
    ),
    # a lazy re-export table (privfed._lazy.lazy_exports)
    "fake/core/lazy.py": (
        "from fake._lazy import lazy_exports\n"
        "_EXPORTS: dict[str, str] = {\n"
        "    'Net': 'fake.engines.heavy',\n"
        "}\n"
        "__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)\n"
    ),
    "fake/engines/__init__.py": "class Engine: ...\n",
    "fake/engines/heavy.py": "import torch.nn\n",
    # torch through a privfed-internal import, and through a parent package
    "fake/light.py": "from fake.engines import heavy\n",
    "fake/pkgheavy/__init__.py": "import torch\n",
    "fake/pkgheavy/mod.py": "",
    "fake/viaparent.py": "import fake.pkgheavy.mod\n",
    # a two-module cycle, one side relative
    "fake/a.py": "import fake.b\n",
    "fake/b.py": "from . import a\n",
    # a submodule importing its own parent package: a cycle
    "fake/par/__init__.py": "from fake.par.child import X\n",
    "fake/par/child.py": "from fake.par import Y\nX = 1\n",
    # not cycles: sibling via absolute path, TYPE_CHECKING-only, function-level
    "fake/sub/__init__.py": "from fake.sub import leaf\n",
    "fake/sub/leaf.py": "import fake.sub.other\n",
    "fake/sub/other.py": "",
    "fake/t1.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fake.t2\n",
    "fake/t2.py": "import fake.t1\n",
    "fake/f1.py": "def g():\n    import fake.f2\n",
    "fake/f2.py": "import fake.f1\n",
}


@pytest.fixture
def synthetic(tmp_path: Path) -> ImportGraph:
    for rel, text in _SYNTHETIC.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return build_import_graph(tmp_path, "fake")


def _lines(problems: list[str]) -> set[tuple[str, str]]:
    # (file:line, target) of each violation line
    out = set()
    for p in problems:
        location = p.split(": ", 1)[0]
        out.add(
            (
                Path(location.rsplit(":", 1)[0]).name + ":" + location.rsplit(":", 1)[1],
                p.rsplit(" -> ", 1)[1],
            )
        )
    return out


def test_self_check_detects_hidden_imports(synthetic: ImportGraph) -> None:
    ban = ImportBan("core-pure", ("fake.core",), ("torch", "fake.engines"), "test")
    assert _lines(ban_violations(synthetic, ban, "fake.core")) == {
        ("helper.py:2", "torch"),  # function-level
        ("typed.py:3", "fake.engines"),  # TYPE_CHECKING; "Engine" is a class, so the package
        ("dyn.py:3", "fake.engines.heavy"),  # importlib literal, prefix match
        ("lazy.py:3", "fake.engines.heavy"),  # lazy re-export table entry
    }
    assert "(deferred)" in " ".join(ban_violations(synthetic, ban, "fake.core"))
    exempted = ImportBan("x", ("fake.core",), ("torch",), "test", exempt=("fake.core.helper",))
    assert ban_violations(synthetic, exempted, "fake.core") == []


def test_self_check_resolves_relative_imports(synthetic: ImportGraph) -> None:
    assert {i.target for i in synthetic.imports_of("fake.core")} == {
        "fake.core.helper",
        "fake.core.typed",
    }
    assert [i.target for i in synthetic.imports_of("fake.b")] == ["fake.a"]


def test_self_check_missing_source_fails(synthetic: ImportGraph) -> None:
    ban = ImportBan("ghost", ("fake.ghost",), ("torch",), "test")
    assert ban_violations(synthetic, ban, "fake.ghost") == [
        _missing("package", "fake.ghost", "ghost")
    ]
    load = LoadBan("ghost", ("fake.ghost",), ("torch",), "test")
    assert load_violations(synthetic, load, "fake.ghost")[0].startswith("contract 'ghost'")


def test_self_check_transitive_loads(synthetic: ImportGraph) -> None:
    ban = LoadBan("torch-free", ("fake.light", "fake.viaparent", "fake.core"), ("torch",), "test")
    light = load_violations(synthetic, ban, "fake.light")
    assert len(light) == 1 and "light.py:1" in light[0] and "heavy.py:1" in light[0]
    via_parent = load_violations(synthetic, ban, "fake.viaparent")
    assert len(via_parent) == 1 and "pkgheavy/__init__.py:1" in via_parent[0]
    # function-level and TYPE_CHECKING imports do not run on import
    assert load_violations(synthetic, ban, "fake.core") == []
    assert "fake.engines" not in load_closure(synthetic, "fake.core")


def test_self_check_detects_cycles(synthetic: ImportGraph) -> None:
    cycles = find_cycles(synthetic)
    assert sorted(cycles) == [["fake.a", "fake.b"], ["fake.par", "fake.par.child"]]
    text = describe_cycle(synthetic, ["fake.a", "fake.b"])
    assert "a.py:1: import fake.b" in text and "b.py:1: from . import a" in text


def test_tarjan_components() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e", "a"]}
    assert sorted(strongly_connected_components(graph)) == [["a", "b", "c"], ["d"], ["e"]]
    # deep chains do not hit the recursion limit
    chain = {str(i): [str(i + 1)] for i in range(5000)} | {"5000": ["0"]}
    assert [len(c) for c in strongly_connected_components(chain)] == [5001]


def test_self_check_rejects_relative_import_beyond_top(tmp_path: Path) -> None:
    (tmp_path / "solo").mkdir()
    (tmp_path / "solo" / "__init__.py").write_text("from .. import x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="beyond the top package"):
        build_import_graph(tmp_path, "solo")
