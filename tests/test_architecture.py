"""Import contracts of privfed, enforced on the real import graph of ``src/privfed``.

Three layers of checks (the checker itself is ``tests/import_graph.py``; this file
holds the contracts and the tests):

1. A **static import graph** built with :mod:`ast` from every ``.py`` file under
   ``src/privfed``.  It records every import wherever it occurs -- module level,
   inside functions, under ``if TYPE_CHECKING:`` and as
   ``importlib.import_module("literal")`` -- with relative imports resolved and
   ``from a.b import c`` mapped to module ``a.b.c`` when that module exists in
   ``src``, else to ``a.b``.  The contracts are data (:data:`IMPORT_BANS`,
   :data:`LOAD_BANS`, :data:`RUNTIME_CHECKS`): a layout change edits a table, not
   the checker.  A contract whose source package does not exist fails: a rule
   about a missing package is a defect in the table.  On the same graph: **no
   import cycles** among privfed modules, counting every import (a cycle closed
   through a function-level or ``TYPE_CHECKING`` import never fails at import
   time, but it is still two modules that need each other: a design circle), and
   the engines' wings never import each other.  A package's lazy re-export table
   is an edge to each module it names, so a child that imports its own lazy facade
   closes a cycle; the implicit initialisation of parent packages is not an edge
   (see :func:`import_edges`).
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

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from import_graph import (
    ImportBan,
    ImportGraph,
    LoadBan,
    _missing,
    ban_violations,
    build_import_graph,
    describe_cycle,
    find_cycles,
    load_closure,
    load_violations,
    strongly_connected_components,
    within,
    within_any,
)

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
    "privfed._atomic",
    "privfed.progress",
)
#: Third-party packages the cores must never touch (not even for a type hint).
HEAVY = ("torch", "torchvision", "diffusers", "sklearn", "matplotlib", "flwr")
#: Imports that load torch when executed.
TORCH_LOADERS = ("torch", "torchvision", "diffusers", "safetensors.torch")
#: The torch-built engines.
ENGINES = "privfed.engines"
#: The engines' wings: one per one-shot method, each building on the cores and the
#: shared engine modules (job contract, artefacts, codecs, classifier), never on
#: another wing.
WINGS = ("privfed.engines.latent", "privfed.engines.factory")
#: Everything layered above the cores.
ABOVE_CORES = (ENGINES, "privfed.data", "privfed.cli", "privfed.flower", "privfed.audit")
#: Forbidden privfed names that need not exist (banned pre-emptively); every other
#: forbidden ``privfed.*`` name must exist, so a typo cannot make a rule vacuous.
ABSENT_ON_PURPOSE: tuple[str, ...] = ()


def wing_bans(wings: tuple[str, ...]) -> tuple[ImportBan, ...]:
    """One ban per wing: it imports none of the other wings (anywhere in a file)."""
    return tuple(
        ImportBan(
            f"wings-apart:{wing.rpartition('.')[2]}",
            (wing,),
            tuple(w for w in wings if w != wing),
            "a wing builds on the cores and the shared engine modules, never on another wing "
            "(what both need lives in privfed.engines.job / .artifacts or a core)",
        )
        for wing in wings
    )


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
        (*TORCH_LOADERS, ENGINES),
        "privfed.audit documents its pure layer (everything but torch_scoring) as never torch",
        exempt=("privfed.audit.torch_scoring",),
    ),
    ImportBan(
        "libraries-below-cli",
        (ENGINES, "privfed.data", "privfed.audit"),
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
        "flower-is-a-leaf",
        (ROOT,),
        ("privfed.flower",),
        "privfed.flower (the Flower apps) builds on the cores and engines; nothing imports it",
        exempt=("privfed.flower", "privfed.cli"),
    ),
    *wing_bans(WINGS),
)

#: Import cycles that other work owns, each with the issue that removes it.  Every
#: entry must still be a cycle (test_known_cycles_still_exist), and any other cycle
#: fails test_no_import_cycles.
KNOWN_CYCLES: frozenset[tuple[str, ...]] = frozenset(
    # Empty: every cycle the graph had is gone.  An entry here is a known circle
    # that a named issue is removing; test_known_cycles_still_exist flags it stale
    # once it is gone.
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
        (*TORCH_LOADERS, ENGINES, "matplotlib"),
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
            "privfed.engines.artifacts",
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


_NO_ENGINES = ("torch", ENGINES)
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
            "import privfed.engines.artifacts",
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

# == the real package's graph ===================================================


@cache
def real_graph() -> ImportGraph:
    return build_import_graph(SRC, ROOT)


# == tests on the real package ========================================================


@pytest.mark.slow
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


@pytest.mark.slow
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
    cycles = [c for c in find_cycles(graph) if tuple(c) not in KNOWN_CYCLES]
    if cycles:
        pytest.fail(
            "import cycles (every import counts, function-level and TYPE_CHECKING too):\n  "
            + "\n  ".join(describe_cycle(graph, c) for c in cycles),
            pytrace=False,
        )


def test_known_cycles_still_exist() -> None:
    # An allow-list entry that no longer matches a cycle is stale: remove it.
    stale = set(KNOWN_CYCLES) - {tuple(c) for c in find_cycles(real_graph())}
    assert not stale, f"KNOWN_CYCLES entries that are no longer cycles: {sorted(stale)}"


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
    # a child importing its own lazy facade: a design cycle through the lazy table
    "fake/lz/__init__.py": (
        "from fake._lazy import lazy_exports\n"
        "__getattr__, __dir__ = lazy_exports(__name__, {'Impl': 'fake.lz.impl'})\n"
    ),
    "fake/lz/impl.py": "from fake.lz import Other\nImpl = 1\n",
    # two wings: wa imports wb inside a function; both may import the shared module
    "fake/wings/__init__.py": "",
    "fake/wings/shared.py": "X = 1\n",
    "fake/wings/wa/__init__.py": "",
    "fake/wings/wa/job.py": (
        "from fake.wings.shared import X\n"
        "def f():\n"
        "    from fake.wings.wb.audit import Y\n"
        "    return X, Y\n"
    ),
    "fake/wings/wb/__init__.py": "",
    "fake/wings/wb/audit.py": "from fake.wings.shared import X\nY = X\n",
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
    # What Python walks on import: module-level imports only.
    cycles = find_cycles(synthetic, runtime_only=True)
    assert sorted(cycles) == [["fake.a", "fake.b"], ["fake.par", "fake.par.child"]]
    text = describe_cycle(synthetic, ["fake.a", "fake.b"], runtime_only=True)
    assert "a.py:1: import fake.b" in text and "b.py:1: from . import a" in text
    # The design graph (the contract): function-level, TYPE_CHECKING and lazy-table
    # imports close cycles too; a package initialising its children does not
    # (fake.sub and its leaves are no cycle).
    assert sorted(find_cycles(synthetic)) == [
        ["fake.a", "fake.b"],
        ["fake.f1", "fake.f2"],
        ["fake.lz", "fake.lz.impl"],
        ["fake.par", "fake.par.child"],
        ["fake.t1", "fake.t2"],
    ]
    text = describe_cycle(synthetic, ["fake.lz", "fake.lz.impl"])
    assert "lazy_exports 'Impl': 'fake.lz.impl' (deferred)" in text
    assert "impl.py:1: from fake.lz import Other -> fake.lz" in text
    assert "(under TYPE_CHECKING)" in describe_cycle(synthetic, ["fake.t1", "fake.t2"])
    assert "(deferred)" in describe_cycle(synthetic, ["fake.f1", "fake.f2"])


def test_self_check_detects_wing_to_wing_imports(synthetic: ImportGraph) -> None:
    wa, wb = wing_bans(("fake.wings.wa", "fake.wings.wb"))
    assert wa.forbidden == ("fake.wings.wb",) and wb.forbidden == ("fake.wings.wa",)
    # a function-level import of the other wing is caught; the shared module is not
    assert _lines(ban_violations(synthetic, wa, "fake.wings.wa")) == {
        ("job.py:3", "fake.wings.wb.audit")
    }
    assert ban_violations(synthetic, wb, "fake.wings.wb") == []


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
