"""Every file privfed writes survives a kill -9 at any instant: old or new, never torn.

Each test forks a child that rewrites one file in a loop (alternating two versions),
SIGKILLs it after a random short delay (fixed seed), and reloads the file with
privfed's own reader: it must be exactly one of the two versions.  A last test
checks that no writer in ``src/privfed`` writes a file without going through
:mod:`privfed._atomic` (or the run directory's staged, synced renames).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privfed._atomic import atomic_write_bytes, atomic_write_text
from privfed.engines._png import write_sample_grid
from privfed.engines.artifacts import AuditInputs, RunArtifacts
from privfed.engines.job import write_artifacts
from privfed.secagg import IdentityKey, IdentityRegistry
from privfed.secagg.protocol.state import FileRevealJournal, JournalEntry

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork + SIGKILL")

TRIALS = 40
SRC = Path(__file__).resolve().parents[1] / "src" / "privfed"


def _kill_mid_write(loop: Callable[[], None], rng: random.Random, max_delay: float) -> None:
    """Fork a child running ``loop`` forever; SIGKILL it after a random delay."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            loop()
        finally:
            os._exit(0)
    time.sleep(rng.uniform(0.0, max_delay))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _torture(
    write: Callable[[int], None],
    read: Callable[[], Any],
    versions: tuple[Any, Any],
    *,
    seed: int,
    max_delay: float = 0.02,
) -> None:
    """Write version 0, then kill a child alternating 1/0 writes; reload each time."""
    rng = random.Random(seed)
    write(0)

    def loop() -> None:
        i = 1
        while True:
            write(i % 2)
            i += 1

    seen: set[int] = set()
    for _ in range(TRIALS):
        _kill_mid_write(loop, rng, max_delay)
        got = read()
        matches = [k for k, v in enumerate(versions) if _equal(got, v)]
        assert matches, "a torn file: neither the old version nor the new one"
        seen.update(matches)
    assert seen, "no trial reloaded anything"


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)


@pytest.mark.slow
def test_bytes_and_text(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    versions = (os.urandom(1 << 18), os.urandom(1 << 18))
    _torture(lambda i: atomic_write_bytes(path, versions[i]), path.read_bytes, versions, seed=1)
    text = tmp_path / "doc.json"
    docs = ({"v": list(range(20000))}, {"v": list(range(1, 20001))})
    _torture(
        lambda i: atomic_write_text(text, json.dumps(docs[i])),
        lambda: json.loads(text.read_text()),
        docs,
        seed=2,
    )


@pytest.mark.slow
def test_audit_inputs_npz(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    inputs = [
        AuditInputs(
            member_latents=rng.normal(size=(3000, 8)),
            nonmember_latents=rng.normal(size=(3000, 8)),
            synthetic_latents=rng.normal(size=(3000, 8)),
        )
        for _ in range(2)
    ]
    path = tmp_path / "audit_inputs.npz"
    versions = tuple(i.arrays() for i in inputs)
    _torture(
        lambda i: inputs[i].save(path),
        lambda: AuditInputs.load(path).arrays(),
        (versions[0], versions[1]),
        seed=4,
    )


@pytest.mark.slow
def test_sample_grid_png(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    images = [rng.uniform(size=(80, 1, 28, 28)) for _ in range(2)]
    labels = np.repeat(np.arange(10), 8)
    refs = []
    for k in range(2):
        ref = tmp_path / f"ref{k}.png"
        write_sample_grid(images[k], labels, ref)
        refs.append(ref.read_bytes())
    path = tmp_path / "samples.png"
    _torture(
        lambda i: write_sample_grid(images[i], labels, path),
        path.read_bytes,
        (refs[0], refs[1]),
        seed=6,
    )


@pytest.mark.slow
def test_identity_registry(tmp_path: Path) -> None:
    registries = [
        IdentityRegistry({c: IdentityKey.generate().public_key for c in range(1, 60)}, 1)
        for _ in range(2)
    ]
    path = tmp_path / "registry.json"
    _torture(
        lambda i: registries[i].save(path),
        lambda: IdentityRegistry.load(path).digest,
        (registries[0].digest, registries[1].digest),
        seed=7,
    )


@pytest.mark.slow
def test_identity_key_file_is_complete_or_absent(tmp_path: Path) -> None:
    """A key is never overwritten: after a kill, no file or the whole key."""
    from privfed.flower.policy import load_identity_key, write_identity_key

    rng = random.Random(8)
    for trial in range(TRIALS):
        path = tmp_path / f"node-{trial}.key"
        key = IdentityKey.generate()
        _kill_mid_write(lambda p=path, k=key: write_identity_key(p, k), rng, 0.005)
        if path.exists():
            assert load_identity_key(path).public_key == key.public_key
    done = tmp_path / "done.key"
    write_identity_key(done, IdentityKey.generate())
    with pytest.raises(FileExistsError):
        write_identity_key(done, IdentityKey.generate())


@pytest.mark.slow
def test_the_reveal_journal_keeps_every_complete_record(tmp_path: Path) -> None:
    """Appends killed mid-way: the journal reloads, holds a prefix, and takes new records."""
    rng = random.Random(9)
    path = tmp_path / "node.jsonl"
    session = bytes(range(32))
    # A record padded to many pages makes a kill inside one append likely.
    reveals = {p: next(iter(_kinds())) for p in range(2000)}

    def loop() -> None:
        journal = FileRevealJournal(path)
        step = (journal.latest_step(session, 0, 0) or 0) + 1
        while True:
            journal.record(JournalEntry(session, 0, 0, step, reveals))
            step += 1

    last = 0
    for _ in range(TRIALS):
        _kill_mid_write(loop, rng, 0.05)
        reopened = FileRevealJournal(path)  # never a MessageFormatError
        latest = reopened.latest_step(session, 0, 0) or 0
        assert latest >= last  # nothing complete is lost
        last = latest
    # A torn tail (what a crash inside one append can leave: a record without its
    # newline) is ignored by readers and removed by the next writer.
    with open(path, "ab") as handle:  # the crash itself, simulated
        handle.write(JournalEntry(session, 0, 0, last + 7, reveals).to_json()[:100].encode())
    assert FileRevealJournal(path).latest_step(session, 0, 0) == last
    after = FileRevealJournal(path)
    after.record(JournalEntry(session, 0, 0, last + 1, reveals))
    assert FileRevealJournal(path).latest_step(session, 0, 0) == last + 1
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends on a complete record
    for line in lines[:-1]:
        JournalEntry.from_json(line.decode())  # every line parses


def _kinds() -> Any:
    from privfed.secagg.protocol.state import RevealKind

    return iter(RevealKind)


@pytest.fixture(scope="module")
def run_versions() -> tuple[RunArtifacts, RunArtifacts]:
    """Two runs' artefacts (a tiny latent job, then its release with other declarations)."""
    from privfed.engines.latent.job import PipelineConfig, run_pipeline
    from privfed.engines.model_card import ModelCardDeclarations

    result = run_pipeline(
        PipelineConfig(
            num_clients=4, samples_per_class=20, classifier_epochs=1, latent_dim=5,
            baselines=False, audit=False, noise_seed=3, seed=4,
        )
    )  # fmt: skip
    old = result.artifacts()
    new = dataclasses.replace(old, declarations=ModelCardDeclarations(model_name="the new run"))
    return old, new


@pytest.mark.slow
def test_the_run_directory(tmp_path: Path, run_versions: tuple[RunArtifacts, RunArtifacts]) -> None:
    """Each file of a run directory is one run's or the other's, whole, after any kill."""
    refs = []
    for k, artifacts in enumerate(run_versions):
        ref = tmp_path / f"ref{k}"
        write_artifacts(ref, artifacts)
        refs.append({p.name: p.read_bytes() for p in ref.iterdir()})
    out = tmp_path / "run"

    def files() -> dict[str, bytes]:
        # Hidden temporaries a killed writer left are never read (nor shipped).
        return {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")}

    rng = random.Random(10)
    write_artifacts(out, run_versions[0])

    def loop() -> None:
        i = 1
        while True:
            write_artifacts(out, run_versions[i % 2], overwrite=True)
            i += 1

    for _ in range(TRIALS):
        _kill_mid_write(loop, rng, 0.2)
        got = files()
        assert set(got) == set(refs[0]), "a run directory missing a file"
        for name, data in got.items():
            assert data in (refs[0][name], refs[1][name]), f"torn {name}"


# -- every writer goes through the atomic helpers --------------------------------------

_RAW_WRITE = re.compile(
    r"\.write_text\(|\.write_bytes\(|open\([^)]*[\"'][wa]b?[\"']|np\.savez\(|json\.dump\(|"
    r"savefig\(|save_file\(|os\.write\("
)
#: Raw writes that are crash-consistent by construction (file, a piece of the line), with why.
_ALLOWED = {
    # The run directory's writers write staged temporaries, fsync-ed and renamed.
    ("engines/job.py", "lambda path: Path(path).write_text(text"),
    ("engines/job.py", 'with open(path, "wb") as handle:'),
    ("engines/job.py", "np.savez(handle, allow_pickle=False, **arrays)"),
    # Inside atomic_path / a fresh temporary: the temporary file.
    ("engines/artifacts.py", 'atomic_path(final) as tmp, open(tmp, "wb")'),
    ("engines/artifacts.py", "np.savez(handle, allow_pickle=False, **payload)"),
    ("engines/factory/base.py", "save_file(cpu, str(tmp))"),
    ("audit/report.py", "fig.savefig(tmp, dpi=120)"),
    ("flower/policy.py", 'with os.fdopen(fd, "wb") as out:'),
    # Received factories unpacked into a TemporaryDirectory to be loaded: no output.
    ("flower/factory_app.py", "(folder / _MANIFEST).write_bytes("),
    ("flower/factory_app.py", "(folder / _WEIGHTS).write_bytes("),
    # The journal's append: torn tails are ignored and truncated (tested above).
    ("secagg/protocol/state.py", "os.write(fd, line)"),
}


def test_no_writer_bypasses_the_atomic_helpers() -> None:
    raw, used = [], set()
    for file in sorted(SRC.rglob("*.py")):
        rel = file.relative_to(SRC).as_posix()
        if rel == "_atomic.py":
            continue
        for line in file.read_text(encoding="utf-8").splitlines():
            if not _RAW_WRITE.search(line) or line.lstrip().startswith("#"):
                continue
            allowed = {(f, piece) for f, piece in _ALLOWED if f == rel and piece in line}
            used |= allowed
            if not allowed:
                raw.append((rel, line.strip()))
    assert raw == [], "raw writes outside privfed._atomic"
    assert _ALLOWED - used == set(), "stale allowance: update the list"
