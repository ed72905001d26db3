#!/usr/bin/env python3
"""Run a privfed Flower app on Flower's deployment engine, all on this machine.

Starts one SuperLink and N SuperNodes as separate processes on 127.0.0.1
(free ports, ``--insecure``), submits the app with ``flwr run``, waits for the
run to finish and stops every process it started (process groups, SIGTERM
then SIGKILL), also on error or Ctrl-C.  Each SuperNode gets
``--node-config 'partition-id=i num-partitions=N privfed-journal=...'``.

Loopback only: a real deployment runs the same commands on different
machines with TLS (``--ssl-certfile/--ssl-keyfile/--ssl-ca-certfile`` on the
SuperLink, ``--root-certificates`` on the SuperNodes and in the ``flwr``
connection) and node authentication (``--enable-supernode-auth`` on the
SuperLink, ``--auth-supernode-private-key/--auth-supernode-public-key`` on
each SuperNode); see SECURITY.md.

Example::

    python scripts/flower_deploy.py --nodes 3 --run-dir runs/flower-deploy \\
        --run-config 'job="latent" num-clients=3 noise-seed=7 classifier-epochs=2'
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_APP = ROOT / "examples" / "flower_app"
_FAILURE_MARK = "ServerApp raised an exception"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args!r} exited with {proc.returncode}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def _descendants(roots: Sequence[int]) -> list[int]:
    """PIDs of every live descendant of ``roots`` (``ps``; some Flower children detach)."""
    try:
        table = subprocess.run(
            ["ps", "-eo", "pid=,ppid="],  # noqa: S607 -- ps from PATH, fixed argv
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    children: dict[int, list[int]] = {}
    for line in table.splitlines():
        parts = line.split()
        if len(parts) == 2:
            children.setdefault(int(parts[1]), []).append(int(parts[0]))
    found: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover -- not ours
        return False
    return True


def _stop(procs: Sequence[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    """Stop ``procs``, their process groups and every descendant: SIGTERM, then SIGKILL.

    Only processes this script started (and their children) are signalled.
    """
    extra = _descendants([p.pid for p in procs])
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    for pid in extra:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    while time.monotonic() < deadline and any(_alive(pid) for pid in extra):
        time.sleep(0.1)
    for proc in procs:
        # Children (a ServerApp or ClientApp subprocess) share the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    for pid in extra:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def deployment(
    nodes: int,
    *,
    workdir: Path,
    env: dict[str, str] | None = None,
    startup_timeout: float = 60.0,
) -> Iterator[tuple[str, dict[str, str], list[subprocess.Popen[bytes]]]]:
    """Start a SuperLink and ``nodes`` SuperNodes.

    Yields ``(connection name, env for flwr, the processes)``; everything
    started (and every descendant) is stopped on exit.  Logs go to
    ``workdir/*.log``.
    """
    bin_dir = Path(sys.executable).parent
    base_env = {**os.environ, **(env or {})}
    flwr_home = workdir / "flwr-home"
    flwr_home.mkdir(parents=True, exist_ok=True)
    link_port = free_port()
    (flwr_home / "config.toml").write_text(
        "[superlink]\n"
        'default = "privfed-loopback"\n\n'
        "[superlink.privfed-loopback]\n"
        f'address = "127.0.0.1:{link_port}"\n'
        "insecure = true\n"
    )
    # Flower's tools start each other by name (flower-superexec, flwr-serverapp ...).
    path = f"{bin_dir}{os.pathsep}{base_env.get('PATH', '')}"
    cli_env = {**base_env, "FLWR_HOME": str(flwr_home), "PATH": path}
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen(  # noqa: S603 -- fixed argv of installed Flower tools
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=cli_env,
            cwd=workdir,
            start_new_session=True,  # own process group: stopped as one
        )
        procs.append(proc)
        return proc

    try:
        link = start(
            "superlink",
            [
                str(bin_dir / "flower-superlink"),
                "--insecure",
                "--host",
                "127.0.0.1",
                "--port",
                str(link_port),
                "--database",
                str(workdir / "superlink.db"),
                # Use this environment's privfed; never install packages at run time.
                "--disable-runtime-dependency-installation",
            ],
        )
        _wait_port(link_port, startup_timeout, link)
        for i in range(nodes):
            port = free_port()
            journal = workdir / "journals" / f"node-{i}.jsonl"
            node_config = f'partition-id={i} num-partitions={nodes} privfed-journal="{journal}"'
            start(
                f"supernode-{i}",
                [
                    str(bin_dir / "flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{link_port}",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--node-config",
                    node_config,
                ],
            )
        time.sleep(1.0)
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"processes exited at start (see {workdir}/*.log): {dead}")
        yield "privfed-loopback", cli_env, procs
    finally:
        _stop(list(reversed(procs)))


def run_app(
    app: Path,
    connection: str,
    env: dict[str, str],
    run_config: str,
    *,
    timeout: float,
    log: Path,
) -> int:
    """``flwr run APP CONNECTION --run-config ... --stream``; its exit status."""
    bin_dir = Path(sys.executable).parent
    argv = [str(bin_dir / "flwr"), "run", str(app), connection, "--stream"]
    if run_config:
        argv += ["--run-config", run_config]
    with log.open("wb") as out:
        proc = subprocess.Popen(  # noqa: S603
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop([proc], grace=2.0)
            raise
        finally:
            if proc.poll() is None:
                _stop([proc], grace=2.0)


def _terminate_on_sigterm() -> None:
    """Turn SIGTERM (e.g. from ``timeout``) into SystemExit so that cleanup runs."""

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3, help="SuperNodes to start (default 3)")
    parser.add_argument("--app", type=Path, default=DEFAULT_APP, help="Flower app folder")
    parser.add_argument(
        "--run-config", default="", help="flwr run --run-config overrides ('k=v k2=\"s\"')"
    )
    parser.add_argument("--run-dir", type=Path, default=None, help="Output folder of the job")
    parser.add_argument("--timeout", type=float, default=600.0, help="Run timeout (s)")
    parser.add_argument("--workdir", type=Path, default=None, help="Logs and state (temp dir)")
    args = parser.parse_args(argv)
    _terminate_on_sigterm()
    if args.nodes < 1:
        parser.error("--nodes must be >= 1")
    overrides = args.run_config
    if args.run_dir is not None:
        overrides = f'{overrides} output-dir="{args.run_dir.resolve()}"'.strip()
    if f"num-clients={args.nodes}" not in overrides.replace(" ", ""):
        overrides = f"{overrides} num-clients={args.nodes}".strip()
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        print(f"[deploy] starting 1 SuperLink + {args.nodes} SuperNodes (logs in {workdir})")
        with deployment(args.nodes, workdir=workdir) as (connection, env, _):
            print(f"[deploy] up after {time.perf_counter() - start:.1f} s; flwr run {args.app}")
            print(f"[deploy] run config: {shlex.quote(overrides)}")
            status = run_app(
                args.app,
                connection,
                env,
                overrides,
                timeout=args.timeout,
                log=workdir / "flwr-run.log",
            )
            log = (workdir / "flwr-run.log").read_text(errors="replace")
            # `flwr run --stream` exits 0 even when the ServerApp failed: read its log.
            if status == 0 and _FAILURE_MARK in log:
                status = 1
            elapsed = time.perf_counter() - start
            print(f"[deploy] flwr run finished with status {status} after {elapsed:.1f} s")
            if status != 0:
                print(log[-4000:])
        print("[deploy] all processes stopped")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
