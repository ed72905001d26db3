"""Crash-consistent file writes: after a kill -9 at any instant, the old file or the new one.

Every file privfed writes goes through here.  A write goes to a temporary file
in the destination's directory (same file system, so the rename is atomic),
is flushed and ``fsync``-ed, renamed over the destination with
:func:`os.replace`, and the directory is ``fsync``-ed so the rename itself is
durable.  A reader therefore never sees a torn file: either nothing changed, or
the whole new file is there.  A failed write removes its temporary file.

Standard library only (the cores may use it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "fsync_dir",
    "fsync_file",
    "temporary_sibling",
    "unwritable_reason",
]


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush ``path``'s data to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make renames and creations in directory ``path`` durable (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover -- platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover -- some file systems refuse fsync on a directory
        pass
    finally:
        os.close(fd)


def temporary_sibling(path: str | os.PathLike[str]) -> Path:
    """A fresh hidden name beside ``path`` (same directory, same suffix)."""
    final = Path(path)
    return final.with_name(f".{final.name}.{secrets.token_hex(4)}.tmp{final.suffix}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` durably.

    For writers that take a path (``np.savez``, a PNG encoder): whatever they
    write to the yielded path becomes ``path`` only once complete and synced.
    On an exception the temporary file is removed and ``path`` is unchanged.
    """
    final = Path(path)
    tmp = temporary_sibling(final)
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)


def _write_with(path: str | os.PathLike[str], mode: str, write: Callable[[IO[Any]], Any]) -> None:
    with atomic_path(path) as tmp, open(tmp, mode) as handle:
        write(handle)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` crash-consistently."""
    _write_with(path, "wb", lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` crash-consistently."""
    atomic_write_bytes(path, text.encode(encoding))


def unwritable_reason(path: str | os.PathLike[str]) -> str | None:
    """Why a directory cannot be made or written at ``path``; ``None`` when it can.

    Tried, not guessed from permission bits: a probe directory is made and
    removed at once in ``path`` (when it is a directory) or its nearest existing
    parent, so a read-only or pseudo file system (``/proc``) is caught before
    any work.  Nothing else is created or changed.
    """
    import tempfile

    target = Path(path)
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        where = "it is" if existing == target else f"{str(existing)!r} is"
        return f"{where} a file"
    try:
        probe = tempfile.mkdtemp(prefix=".privfed-probe-", dir=existing)
    except OSError as exc:
        return f"{existing} cannot hold a new directory: {exc.strerror or 'refused'}"
    os.rmdir(probe)
    return None
