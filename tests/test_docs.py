"""Every code block of the documentation runs, and so does every example.

The runner extracts the Python blocks of ``docs/**/*.rst`` and ``README.md`` --
``.. code-block:: python`` (or ``.. code:: python``) and doctest paragraphs
(``>>>``) in reStructuredText, fenced ```` ```python ```` blocks in Markdown --
and executes each page's blocks in order, in one namespace, in a fresh
temporary directory.  Doctest blocks are checked against their printed output.

A block that cannot run here (it needs Flower processes or a long run) is
skipped only by an explicit, visible directive on the line just before it::

    .. docs-snippet: skip -- needs a running SuperLink
    <!-- docs-snippet: skip -- needs a running SuperLink -->

Each skipped block is its own test that pytest reports as skipped, with the
reason, so a skip is counted and printed, never silent.  README.md's blocks and
every ``examples/*.py`` run twice in a row in the same directory, so a snippet
that only works once (an output directory it refuses to overwrite) fails (an
example that left its directory empty is not run again: see
:func:`test_example_runs_twice`).
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
EXAMPLES = ROOT / "examples"

SKIP_MARK = re.compile(
    r"^\s*(?:\.\.|<!--)\s*docs-snippet:\s*skip\s*--\s*(?P<reason>.*?)\s*(?:-->)?\s*$"
)
RST_BLOCK = re.compile(r"^(?P<indent>\s*)\.\. (?:code-block|code|sourcecode):: python3?\s*$")
MD_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")

#: Pages whose blocks take more than about 3 s on two cores (imports of torch or
#: Flower, a whole job); measured with ``pytest tests/test_docs.py --durations=0``.
SLOW_PAGES = frozenset(
    {"docs/getting-started.rst", "docs/engines.rst", "docs/dp.rst"}
)
#: The one example that runs twice in under about 3 s; every other is marked slow.
FAST_EXAMPLES = frozenset({"secagg_messages.py"})


#: Blocks that may carry a ``docs-snippet: skip`` line (each needs Flower processes or a long run).
MAX_SKIPPED_BLOCKS = 3


@dataclass(frozen=True)
class Block:
    """One Python block of a page."""

    page: str
    line: int  # 1-based line of the block's first code line
    source: str
    doctest: bool = False
    skip_reason: str | None = None


def _skip_reason(lines: list[str], index: int) -> str | None:
    """The skip directive on the last non-blank line before ``lines[index]``, if any."""
    j = index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j < 0:
        return None
    match = SKIP_MARK.match(lines[j])
    if match is None:
        return None
    reason = match.group("reason")
    if not reason:
        raise AssertionError(f"line {j + 1}: a docs-snippet skip needs a reason")
    return reason


def _indented_body(lines: list[str], start: int, indent: int) -> tuple[int, int, str]:
    """The body of an rST directive opened at ``start - 1``: (first line, end, text)."""
    i = start
    while i < len(lines) and (lines[i].strip() == "" or lines[i].lstrip().startswith(":")):
        if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= indent:
            break
        i += 1
    first = i
    body: list[str] = []
    while i < len(lines):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
        i += 1
    return first + 1, i, textwrap.dedent("\n".join(body)).strip("\n") + "\n"


def rst_blocks(page: str, text: str) -> list[Block]:
    """The Python and doctest blocks of a reStructuredText page, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = RST_BLOCK.match(lines[i])
        if match:
            first, end, body = _indented_body(lines, i + 1, len(match.group("indent")))
            blocks.append(Block(page, first, body, skip_reason=_skip_reason(lines, i)))
            i = end
            continue
        if lines[i].lstrip().startswith(">>> ") and (i == 0 or not lines[i - 1].strip()):
            start = i
            while i < len(lines) and lines[i].strip():
                i += 1
            body = textwrap.dedent("\n".join(lines[start:i])) + "\n"
            reason = _skip_reason(lines, start)
            blocks.append(Block(page, start + 1, body, doctest=True, skip_reason=reason))
            continue
        i += 1
    return blocks


def markdown_blocks(page: str, text: str) -> list[Block]:
    """The fenced ```` ```python ```` blocks of a Markdown page, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = MD_FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not MD_FENCE.match(lines[end]):
            end += 1
        if match.group("lang") in ("python", "py", "python3", "pycon"):
            body = textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n"
            is_doctest = body.lstrip().startswith(">>> ")
            blocks.append(
                Block(page, i + 2, body, doctest=is_doctest, skip_reason=_skip_reason(lines, i))
            )
        i = end + 1
    return blocks


def page_blocks(path: Path) -> list[Block]:
    page = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    return markdown_blocks(page, text) if path.suffix == ".md" else rst_blocks(page, text)


def pages() -> list[Path]:
    found = sorted(
        p for p in DOCS.rglob("*") if p.suffix in (".rst", ".md") and "_build" not in p.parts
    )
    return [*found, README]


def _run_block(block: Block, namespace: dict[str, object]) -> None:
    where = f"{block.page}:{block.line}"
    if block.doctest:
        parser = doctest.DocTestParser()
        test = parser.get_doctest(block.source, namespace, where, where, block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test, clear_globs=False)
        assert runner.failures == 0, f"doctest block at {where} failed (see the output above)"
        return
    code = compile(block.source, where, "exec")
    exec(code, namespace)  # noqa: S102 -- the documentation's own code, by design


def _run_page(blocks: list[Block]) -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in blocks:
        if block.skip_reason is None:
            _run_block(block, namespace)


def _page_params() -> list[object]:
    params: list[object] = []
    for path in pages():
        blocks = page_blocks(path)
        page = path.relative_to(ROOT).as_posix()
        if not any(b.skip_reason is None for b in blocks):
            continue
        marks = [pytest.mark.slow] if page in SLOW_PAGES else []
        params.append(pytest.param(path, id=page, marks=marks))
    return params


def _skipped_blocks() -> list[Block]:
    return [
        block for path in pages() for block in page_blocks(path) if block.skip_reason is not None
    ]


@pytest.mark.parametrize("path", _page_params())
def test_page_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's Python blocks run in order in one namespace (README.md's: twice in a row)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = page_blocks(path)
    _run_page(blocks)
    if path == README:
        _run_page(blocks)


def test_skipped_blocks_are_few_and_say_why() -> None:
    """A block marked ``docs-snippet: skip`` names its reason; each one is reported as a warning.

    No skip is counted as a pass: a skipped block is listed in the warnings summary
    with its page, line and reason, and at most :data:`MAX_SKIPPED_BLOCKS` exist.
    """
    skipped = _skipped_blocks()
    for block in skipped:
        assert block.skip_reason and block.skip_reason.strip(), f"{block.page}:{block.line}"
        warnings.warn(
            f"docs-snippet skip at {block.page}:{block.line}: {block.skip_reason}", stacklevel=1
        )
    assert len(skipped) <= MAX_SKIPPED_BLOCKS, [f"{b.page}:{b.line}" for b in skipped]


def _example_params() -> list[object]:
    return [
        pytest.param(
            path, id=path.name, marks=[] if path.name in FAST_EXAMPLES else [pytest.mark.slow]
        )
        for path in sorted(EXAMPLES.glob("*.py"))
    ]


@pytest.mark.parametrize("path", _example_params())
def test_example_runs_twice(path: Path, tmp_path: Path) -> None:
    """``python examples/X.py`` exits 0 twice in a row from the same directory.

    The second run is what catches an example that only works once (it left an
    output in its directory that it then refuses to overwrite).  An example whose
    first run left its directory empty starts the second run from exactly the
    state the first one had (the examples write nowhere else but to fresh
    ``tempfile`` folders), so that second run would only repeat the first one --
    for ``audit_lira.py`` minutes of CNN training -- and is not made.
    """
    path_entries = [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path_entries), "MPLBACKEND": "Agg"}
    for attempt in (1, 2):
        if attempt == 2 and not any(tmp_path.iterdir()):
            break  # the directory is as the first run found it: the same run again
        proc = subprocess.run(
            [sys.executable, str(path)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert proc.returncode == 0, (
            f"{path.name}, run {attempt}: exit {proc.returncode}\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )


# -- the runner itself ---------------------------------------------------------------


def test_every_docs_page_with_code_is_collected() -> None:
    """The extractor finds the blocks: each page naming python code yields at least one."""
    for path in pages():
        text = path.read_text(encoding="utf-8")
        mentions = len(re.findall(r"code-block:: python|```python|^\s*>>> ", text, re.M))
        assert len(page_blocks(path)) >= min(mentions, 1), path


def test_extractor_reads_rst_markdown_doctest_and_skips() -> None:
    rst = textwrap.dedent(
        """\
        Title
        =====

        .. code-block:: python
           :caption: one

           x = 1
           y = x + 1

        Text.

        .. docs-snippet: skip -- needs a SuperLink

        .. code-block:: python

           start_superlink()

        >>> x + y
        3
        """
    )
    blocks = rst_blocks("page.rst", rst)
    sources = ["x = 1\ny = x + 1\n", "start_superlink()\n", ">>> x + y\n3\n"]
    assert [b.source for b in blocks] == sources
    assert [b.skip_reason for b in blocks] == [None, "needs a SuperLink", None]
    assert [b.doctest for b in blocks] == [False, False, True]
    assert blocks[0].line == 7
    md = (
        "intro\n\n<!-- docs-snippet: skip -- long run -->\n```python\nrun()\n```\n\n"
        "```bash\nls\n```\n```python\nz = 2\n```\n"
    )
    blocks = markdown_blocks("README.md", md)
    found = [(b.source, b.skip_reason) for b in blocks]
    assert found == [("run()\n", "long run"), ("z = 2\n", None)]
    namespace: dict[str, object] = {}
    _run_page(rst_blocks("page.rst", rst.replace("start_superlink()", "raise SystemExit")))
    _run_block(Block("p", 1, "a = 40 + 2\n"), namespace)
    _run_block(Block("p", 2, ">>> a\n42\n", doctest=True), namespace)
    with pytest.raises(AssertionError, match="doctest block at p:3"):
        _run_block(Block("p", 3, ">>> a\n41\n", doctest=True), namespace)


def test_skip_directive_needs_a_reason() -> None:
    with pytest.raises(AssertionError, match="needs a reason"):
        rst_blocks("p.rst", ".. docs-snippet: skip --\n\n.. code-block:: python\n\n   x = 1\n")
