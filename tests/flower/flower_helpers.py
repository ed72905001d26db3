"""Helpers shared by the Flower tests (not fixtures: plain functions)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np

from script_loader import load_script


def walk_arrays(value: object, seen: list[np.ndarray], depth: int = 0) -> None:
    """Append to ``seen`` every numpy array reachable from ``value`` (6 levels deep)."""
    if depth > 6:
        return
    if isinstance(value, np.ndarray):
        seen.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            walk_arrays(v, seen, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            walk_arrays(v, seen, depth + 1)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for v in vars(value).values():
            walk_arrays(v, seen, depth + 1)


def processes_of(home: Path) -> list[int]:
    """PIDs of live processes whose environment has ``FLWR_HOME=home`` (Linux /proc)."""
    marker = f"FLWR_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


@contextlib.contextmanager
def flower_home(tmp_path: Path) -> Iterator[Path]:
    """A fresh Flower home; on exit every process naming it is stopped (and checked gone)."""
    home = tmp_path / "flwr-home"
    home.mkdir()
    try:
        yield home
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in processes_of(home):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 10.0
            while processes_of(home) and time.monotonic() < deadline:
                time.sleep(0.2)
        assert processes_of(home) == []


def deploy_module() -> ModuleType:
    """``scripts/flower_deploy.py``, loaded as a fresh module (tests may patch it)."""
    return load_script("scripts/flower_deploy.py", "flower_deploy_script")


_DEPLOY = deploy_module()


def free_port() -> int:
    """A port on 127.0.0.1 free right now, below the ephemeral range (see the script)."""
    return int(_DEPLOY.free_port())


def flower_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``flwr run`` as a user runs it, isolated from any other run.

    The venv's ``bin`` on PATH (an activated venv), ``FLWR_HOME=home``, and free
    ports for the local SuperLink: with Flower's fixed defaults (39091/39093)
    a second test -- or a user's own SuperLink -- would share one SuperLink and
    stop it under the other run.
    """
    bin_dir = Path(sys.executable).parent
    return {
        **os.environ,
        "FLWR_HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        **extra,
    }


def tagged_processes(tag: str) -> list[tuple[int, str]]:
    """Live (not zombie) processes whose environment holds ``tag``: ``(pid, command)``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if tag.encode() not in (entry / "environ").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if state != "Z":
            found.append((int(entry.name), command[:120]))
    return found


def active_node_config(folder: Path, client_id: int, **policy: object) -> dict[str, object]:
    """An active node's policy keys: its key file ``node-<id>.key`` and ``registry.json`` in
    ``folder``, threshold at least 4, n_C = 1; ``policy`` adds or overrides keys by name."""
    return {
        "privfed-mode": "active",
        "privfed-min-threshold": 4,
        "privfed-corrupted": 1,
        "privfed-identity-key": str(folder / f"node-{client_id}.key"),
        "privfed-registry": str(folder / "registry.json"),
        **{f"privfed-{k.replace('_', '-')}": v for k, v in policy.items()},
    }
