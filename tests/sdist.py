"""Build the project's sdist for a test, one build at a time on this checkout.

setuptools builds an sdist in the source tree: it rewrites
``src/privfed.egg-info`` and fills, then deletes, a release folder
(``privfed-<version>/``) beside ``pyproject.toml``.  Two builds at once (two
pytest workers) delete each other's folder mid-copy, so every test that
builds one goes through :func:`sdist_members`, which holds an exclusive lock
for the checkout while it builds.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LOCK = Path(tempfile.gettempdir()) / (
    "privfed-sdist-" + hashlib.sha256(str(ROOT).encode()).hexdigest()[:16] + ".lock"
)


def sdist_members(out: Path) -> set[str]:
    """Build the sdist into ``out``; the paths it holds, relative to its top folder."""
    code = f"import setuptools.build_meta as b\nprint(b.build_sdist({str(out)!r}))\n"
    with _LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name = proc.stdout.strip().splitlines()[-1]
    with tarfile.open(out / name) as archive:
        return {m.split("/", 1)[1] for m in archive.getnames() if "/" in m}
