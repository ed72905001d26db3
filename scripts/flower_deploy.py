#!/usr/bin/env python3
"""Run a privfed Flower app on Flower's deployment engine, all on this machine.

Starts one SuperLink and N SuperNodes as separate processes on 127.0.0.1
(free ports), submits the app with ``flwr run --stream``, waits for the run
to finish and stops every process it started, also on an error, Ctrl-C or
SIGTERM.  Each SuperNode gets ``--node-config 'partition-id=i
num-partitions=N privfed-journal=...'``.

Every channel is TLS and only registered SuperNodes can join.  At start the
script writes to ``<workdir>/credentials`` (mode 0700; private keys 0600) a
throwaway CA (its private key is never written), a server certificate for
127.0.0.1 and localhost signed by it, and one EC P-384 key pair per SuperNode
(OpenSSH format), all with the ``cryptography`` package.  The SuperLink runs
with ``--ssl-ca-certfile/--ssl-certfile/--ssl-keyfile`` and
``--enable-supernode-auth``; each node's public key is registered with
``flwr supernode register`` before the node starts with
``--root-certificates`` and ``--auth-supernode-private-key`` (and TLS on its
own Runtime API); the ``flwr`` connection has ``root-certificates`` instead
of ``insecure = true``.  A SuperNode whose key is not registered is refused,
and so is a plaintext client.  ``--insecure`` turns both off, for debugging
only, with a warning.

The logs (``superlink.log``, ``supernode-<i>.log``, ``flwr-run.log``), the
credentials and the SuperLink's state are kept in ``--workdir`` (default: a
fresh ``runs/flower-deploy-logs/<UTC timestamp>`` under the current folder).
The Flower processes run in the current folder, so a relative ``output-dir``
in ``--run-config`` (and the app's default) is relative to it.

``flwr run --stream`` exits 0 even when the ServerApp failed, so the script
reads the streamed log (and asks the SuperLink for the run's status): it
prints the job's own summary lines (``privfed ...``) and exits 0 on success;
on failure it prints the ServerApp's error in one line and the log's path and
exits 1.  Bad arguments: one line, exit 2, nothing started.  Interrupted
(Ctrl-C, SIGTERM, SIGHUP): every process is stopped and it exits 128 + the
signal number (130 for Ctrl-C).

Loopback only: a real deployment runs the same commands on different
machines, with a certificate from a CA the nodes trust for the SuperLink's
address and each node's key pair generated on that node, its public key
registered by the SuperLink's operator; see SECURITY.md.

Example::

    python scripts/flower_deploy.py --nodes 3 --run-dir runs/flower-deploy \\
        --run-config 'job="latent" noise-seed=7 classifier-epochs=2'
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import ipaddress
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import NamedTuple, NoReturn

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_APP = ROOT / "examples" / "flower_app"
DEFAULT_LOG_ROOT = Path("runs") / "flower-deploy-logs"
RESULT_PREFIX = "privfed "
# Flower logs this when the ServerApp (or the simulation that runs it) raised.
_FAILURE_MARK = re.compile(r"\b(?:ServerApp|Simulation) raised an exception")
_EXIT_CODE = re.compile(r"Exit Code: (\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LOG_LEVEL = re.compile(r"(ERROR|WARNING|INFO|DEBUG)\s*:\s*")
_RUN_ID = re.compile(r"Successfully started run (\d+)")
_REASON_CHARS = 500
CONNECTION = "privfed-loopback"
# The names the SuperLink's certificate is valid for: the loopback deployment's only host.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
# Flower's SuperNode keys must be on a NIST curve (flwr/supercore/primitives/asymmetric.py);
# Flower's documentation uses P-384.
_CURVE = ec.SECP384R1
_CERT_DAYS = 7
INSECURE_WARNING = (
    "[deploy] WARNING: --insecure: no TLS and no SuperNode authentication; any process "
    "on this machine can join as a node or read the traffic (debugging only)"
)
_HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# When set (by main), orphaned descendants are re-parented to this process, so
# every process the script's children started can still be found and stopped.
_subreaper = False


class Interrupted(Exception):  # noqa: N818 -- a signal, not an error
    """A SIGINT, SIGTERM or SIGHUP arrived; the processes are being stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopReport:
    """What :func:`deployment` stopped: processes ended and any it could not end.

    (No dataclass: the tests load this script without registering it as a module.)
    """

    def __init__(self, stopped: int = 0, left: list[int] | None = None) -> None:
        self.stopped = stopped
        self.left: list[int] = left or []


class RunOutcome(NamedTuple):
    """What a ``flwr run`` log says about the run."""

    results: list[str]
    """The job's own summary lines (they start with ``privfed ``)."""
    failure: str | None
    """The ServerApp's failure in one short line; ``None`` when it did not fail."""


_PORT_FLOOR = 20000
"""The lowest port :func:`free_port` draws (below it lie many well-known services)."""


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux default 32768)."""
    try:
        low = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]
        return int(low)
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now.

    Drawn at random below the kernel's ephemeral range when it can be: a port
    the kernel hands out (``bind(0)``) lies in that range, where the source
    port of any outgoing connection on the host (gRPC, the ``flwr`` CLI, a
    parallel job) can take it between this check and the process that binds
    it.  The deployment still starts a node again if its port was taken.
    """
    low = _ephemeral_low()
    draw = random.SystemRandom()
    for _ in range(50 if low - _PORT_FLOOR >= 1000 else 0):
        port = draw.randrange(_PORT_FLOOR, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NodeKey(NamedTuple):
    """One SuperNode's authentication key pair (OpenSSH files, EC P-384)."""

    private: Path
    """``--auth-supernode-private-key`` (OpenSSH private key, mode 0600)."""
    public: Path
    """What ``flwr supernode register`` registers (OpenSSH public key)."""


class Credentials(NamedTuple):
    """The TLS material and SuperNode keys of one loopback deployment."""

    ca_cert: Path
    """The throwaway CA's certificate: ``--ssl-ca-certfile``, ``--root-certificates``."""
    server_cert: Path
    """The servers' certificate (signed by the CA; SAN 127.0.0.1 and localhost):
    the SuperLink's and each SuperNode's Runtime API's."""
    server_key: Path
    """Its private key (PEM, PKCS #8, mode 0600)."""
    nodes: list[NodeKey]
    """One authentication key pair per SuperNode."""


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file that only its owner can read or write (mode 0600)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o600)  # whatever the umask
        out.write(data)


def _write_public(path: Path, data: bytes) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    path.write_bytes(data)
    path.chmod(0o644)


def node_key_pair(private: Path, public: Path) -> NodeKey:
    """A fresh SuperNode key pair in Flower's formats, written to ``private`` and ``public``.

    Flower's SuperNode reads an OpenSSH EC private key (``load_ssh_private_key``),
    ``flwr supernode register`` an OpenSSH public key on a NIST curve
    (``load_ssh_public_key``).
    """
    key = ec.generate_private_key(_CURVE())
    _write_private(
        private,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ),
    )
    _write_public(
        public,
        key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        + b"\n",
    )
    return NodeKey(private, public)


def _name_of(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "privfed loopback deployment"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def generate_credentials(folder: Path, nodes: int) -> Credentials:
    """A throwaway CA, a server certificate and ``nodes`` SuperNode key pairs.

    Written to ``folder`` (created with mode 0700; existing files of an earlier
    start are replaced): ``ca.pem``, ``server.pem``, ``server.key``, and
    ``node-<i>.key`` / ``node-<i>.pub``.  Private keys are mode 0600.  The CA's
    private key is never written: once the server certificate is signed,
    nobody can issue another certificate this CA vouches for.  The certificates
    are valid for a week; the servers' one for 127.0.0.1 and localhost only.
    """
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    now = dt.datetime.now(dt.UTC)
    not_before, not_after = now - dt.timedelta(minutes=5), now + dt.timedelta(days=_CERT_DAYS)

    ca_key = ec.generate_private_key(_CURVE())
    ca_name = _name_of("privfed loopback CA")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA384())
    )

    server_key = ec.generate_private_key(_CURVE())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name_of("privfed loopback server"))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(LOOPBACK_HOSTS[0]))]
                + [x509.DNSName(name) for name in LOOPBACK_HOSTS[1:]]
            ),
            critical=False,
        )
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA384())
    )

    pem = serialization.Encoding.PEM
    _write_public(folder / "ca.pem", ca_cert.public_bytes(pem))
    _write_public(folder / "server.pem", server_cert.public_bytes(pem))
    _write_private(
        folder / "server.key",
        server_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
    keys = [node_key_pair(folder / f"node-{i}.key", folder / f"node-{i}.pub") for i in range(nodes)]
    return Credentials(folder / "ca.pem", folder / "server.pem", folder / "server.key", keys)


def _name(proc: subprocess.Popen[bytes]) -> str:
    """The program ``proc`` runs (``flower-superlink`` ...)."""
    args = proc.args
    first = args[0] if isinstance(args, list | tuple) and args else args
    return Path(str(first)).name


#: How often a SuperNode is started before its exit at start is final.
_NODE_START_TRIES = 3


def _wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{_name(proc)} exited with {proc.returncode}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def _process_table() -> dict[int, tuple[int, str]]:
    """``pid -> (ppid, state)`` of every process (``ps``), without ``ps`` itself."""
    try:
        ps = subprocess.Popen(
            ["ps", "-eo", "pid=,ppid=,stat="],  # noqa: S607 -- ps from PATH, fixed argv
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        out, _ = ps.communicate(timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    table: dict[int, tuple[int, str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and int(parts[0]) != ps.pid:
            table[int(parts[0])] = (int(parts[1]), parts[2])
    return table


def _descendants(roots: Sequence[int]) -> list[int]:
    """PIDs of every live (not zombie) descendant of ``roots`` (``ps``)."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return [pid for pid in found if not table[pid][1].startswith("Z")]


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover -- no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _signal(pid: int, signum: int, *, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)


def _reap(exclude: set[int]) -> None:
    """Reap exited orphans re-parented to this process (a subreaper), not ``exclude``."""
    for pid, (ppid, state) in _process_table().items():
        if ppid == os.getpid() and state.startswith("Z") and pid not in exclude:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def _stop(
    procs: Sequence[subprocess.Popen[bytes]],
    grace: float = 10.0,
    *,
    orphans: bool = False,
    report: StopReport | None = None,
) -> StopReport:
    """Stop ``procs``, their process groups and every descendant: SIGTERM, then SIGKILL.

    Only processes this script started and their descendants are signalled;
    with ``orphans`` (this process is a subreaper, see :func:`main`) also
    every other descendant of this process: orphans re-parented to it.
    SIGINT, SIGTERM and SIGHUP are held back meanwhile, so a second Ctrl-C
    cannot cut the clean-up short; they are delivered when it is done.
    Fills and returns ``report``.
    """
    result = report if report is not None else StopReport()
    own = {p.pid for p in procs}
    roots = sorted(own) + ([os.getpid()] if orphans else [])
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED_SIGNALS)
    try:
        seen = {p.pid for p in procs if p.poll() is None}
        for _ in range(3):  # processes may still start children while they are stopped
            live = [p for p in procs if p.poll() is None]
            extra = [pid for pid in _descendants(roots) if pid not in own]
            if not live and not extra:
                break
            seen.update(extra)
            for proc in live:
                _signal(proc.pid, signal.SIGTERM, group=True)
            for pid in extra:
                _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            for proc in live:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            while time.monotonic() < deadline and any(_alive(pid) for pid in extra):
                if orphans:
                    _reap(own)
                time.sleep(0.1)
            for proc in procs:
                # Children (a ClientApp process) share the group.
                _signal(proc.pid, signal.SIGKILL, group=True)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
            for pid in extra:
                if _alive(pid):
                    _signal(pid, signal.SIGKILL)
            if orphans:
                time.sleep(0.1)
                _reap(own)
        left = [p.pid for p in procs if p.poll() is None]
        left += [pid for pid in _descendants(roots) if pid not in own]
        result.stopped, result.left = len(seen - set(left)), left
        return result
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


class DeploymentInfo:
    """What :func:`deployment` started: the SuperLink's address, the credentials, node ids.

    (No dataclass: the tests load this script without registering it as a module.)
    """

    def __init__(self) -> None:
        self.address = ""
        """``127.0.0.1:<port>`` of the SuperLink (Fleet, Control and Runtime APIs)."""
        self.credentials: Credentials | None = None
        """The TLS material and node keys; ``None`` with ``insecure``."""
        self.node_ids: list[int] = []
        """The SuperLink's node ids of the SuperNodes: in start order (registered keys),
        sorted with ``insecure``."""


def _flwr(env: dict[str, str], *args: str, timeout: float = 60.0) -> dict[str, object]:
    """``flwr ARGS --format json``: its JSON answer (``{"success": false, ...}`` on failure)."""
    argv = [str(Path(sys.executable).parent / "flwr"), *args, "--format", "json"]
    try:
        done = subprocess.run(  # noqa: S603 -- fixed argv of the installed flwr
            argv, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
        answer = json.loads(done.stdout[done.stdout.find("{") :])
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"success": False, "error-message": f"{type(exc).__name__}: {exc}"}
    return answer if isinstance(answer, dict) else {"success": False, "error-message": "?"}


def _one_line(answer: dict[str, object]) -> str:
    message = str(answer.get("error-message", "no answer"))
    return " ".join(line.strip() for line in message.splitlines() if line.strip())[:300]


def list_nodes(connection: str, env: dict[str, str]) -> list[dict[str, object]] | None:
    """The SuperLink's SuperNodes (``flwr supernode ls``); ``None`` when it does not answer."""
    answer = _flwr(env, "supernode", "ls", connection)
    nodes = answer.get("nodes")
    if answer.get("success") is not True or not isinstance(nodes, list):
        return None
    return [node for node in nodes if isinstance(node, dict) and "node-id" in node]


def register_node(connection: str, env: dict[str, str], public_key: Path) -> int:
    """``flwr supernode register``: authorize ``public_key`` on the SuperLink; its node id."""
    answer = _flwr(env, "supernode", "register", str(public_key), connection)
    node_id = answer.get("node-id")
    if answer.get("success") is not True or not isinstance(node_id, int):
        raise RuntimeError(f"flwr supernode register {public_key.name}: {_one_line(answer)}")
    return node_id


def _wait_online(
    connection: str,
    env: dict[str, str],
    *,
    expected: int,
    node_ids: Sequence[int],
    timeout: float,
    procs: Sequence[subprocess.Popen[bytes]],
    restart: Callable[[subprocess.Popen[bytes]], bool] = lambda proc: False,
) -> list[int]:
    """Wait until the SuperLink lists ``expected`` SuperNodes online (``node_ids`` if known).

    A process that exits meanwhile is passed to ``restart``; unless that starts it
    again (True), the wait fails naming it.
    """
    deadline = time.monotonic() + timeout
    online: list[int] = []
    while True:
        dead = [_name(p) for p in list(procs) if p.poll() is not None and not restart(p)]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited at start")
        listed = list_nodes(connection, env) or []
        online = [
            int(str(node["node-id"]))
            for node in listed
            if node.get("status") == "online" and str(node["node-id"]).isdigit()
        ]
        if (node_ids and set(node_ids) <= set(online)) or (
            not node_ids and len(online) >= expected
        ):
            return list(node_ids) or sorted(online)
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(online)} of {expected} SuperNodes online after {timeout:.0f} s"
            )
        time.sleep(1.0)


def cli_environment(
    workdir: Path, address: str, credentials: Credentials | None, env: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment for ``flwr`` and Flower's processes, its connection written.

    ``workdir/flwr-home/config.toml`` names the SuperLink at ``address`` as
    :data:`CONNECTION` (trusting ``credentials``' CA; ``None``: plaintext).
    """
    bin_dir = Path(sys.executable).parent
    base_env = {**os.environ, **(env or {})}
    flwr_home = workdir / "flwr-home"
    flwr_home.mkdir(parents=True, exist_ok=True)
    channel = (
        "insecure = true\n"
        if credentials is None
        else f"root-certificates = {json.dumps(str(credentials.ca_cert))}\n"
    )
    (flwr_home / "config.toml").write_text(
        "[superlink]\n"
        f'default = "{CONNECTION}"\n\n'
        f"[superlink.{CONNECTION}]\n"
        f'address = "{address}"\n' + channel
    )
    # Flower's tools start each other by name (flower-superexec, flwr-serverapp ...).
    path = f"{bin_dir}{os.pathsep}{base_env.get('PATH', '')}"
    return {**base_env, "FLWR_HOME": str(flwr_home), "PATH": path}


def superlink_argv(port: int, database: Path, credentials: Credentials | None) -> list[str]:
    """``flower-superlink`` on 127.0.0.1:``port`` with its state in ``database``.

    TLS and ``--enable-supernode-auth`` with ``credentials``; ``None``: ``--insecure``.
    """
    if credentials is None:
        security = ["--insecure"]
    else:
        security = [
            "--ssl-ca-certfile", str(credentials.ca_cert),
            "--ssl-certfile", str(credentials.server_cert),
            "--ssl-keyfile", str(credentials.server_key),
            "--enable-supernode-auth",
        ]  # fmt: skip
    return [
        str(Path(sys.executable).parent / "flower-superlink"), *security,
        "--host", "127.0.0.1", "--port", str(port), "--database", str(database),
        # Use this environment's privfed; never install packages at run time.
        "--disable-runtime-dependency-installation",
    ]  # fmt: skip


def supernode_argv(
    index: int, address: str, node_config: str, credentials: Credentials | None
) -> list[str]:
    """``flower-supernode`` number ``index`` for the SuperLink at ``address``.

    With ``credentials``: it trusts their CA, authenticates with node key
    ``index`` and serves its own Runtime API over TLS; ``None``: ``--insecure``.
    """
    if credentials is None:
        security = ["--insecure"]
    else:
        security = [
            "--root-certificates", str(credentials.ca_cert),
            "--auth-supernode-private-key", str(credentials.nodes[index].private),
            # The node's own Runtime API (its SuperExec and ClientApps) too.
            "--ssl-certfile", str(credentials.server_cert),
            "--ssl-keyfile", str(credentials.server_key),
            "--ssl-ca-certfile", str(credentials.ca_cert),
        ]  # fmt: skip
    return [
        str(Path(sys.executable).parent / "flower-supernode"), *security,
        "--superlink", address, "--host", "127.0.0.1", "--port", str(free_port()),
        "--node-config", node_config,
    ]  # fmt: skip


def spawn(
    argv: list[str], log: Path, env: dict[str, str], cwd: Path, *, append: bool = False
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group (stopped as one), output to ``log``."""
    with log.open("ab" if append else "wb") as out:
        return subprocess.Popen(  # noqa: S603 -- fixed argv of installed Flower tools
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )


@contextlib.contextmanager
def deployment(
    nodes: int,
    *,
    workdir: Path,
    env: dict[str, str] | None = None,
    startup_timeout: float = 60.0,
    cwd: Path | None = None,
    report: StopReport | None = None,
    insecure: bool = False,
    info: DeploymentInfo | None = None,
) -> Iterator[tuple[str, dict[str, str], list[subprocess.Popen[bytes]]]]:
    """Start a SuperLink and ``nodes`` SuperNodes, with TLS and SuperNode authentication.

    At start, :func:`generate_credentials` writes a throwaway CA, a
    certificate for 127.0.0.1 and one key pair per SuperNode to
    ``workdir/credentials``.  The SuperLink serves its Fleet, Control and
    Runtime APIs over TLS with ``--enable-supernode-auth``; each node's
    public key is registered with ``flwr supernode register`` before the
    node starts with ``--root-certificates`` and its
    ``--auth-supernode-private-key``; the ``flwr`` connection trusts the CA
    (``root-certificates``).  ``insecure``: plaintext and no node
    authentication (debugging only).

    Yields ``(connection name, env for flwr, the processes)`` once the
    SuperLink lists every SuperNode online; everything started (and every
    descendant) is stopped on exit, and ``report`` (if given) says how many
    processes that was; ``info`` (if given) is filled with the address, the
    credentials and the node ids.  Logs go to ``workdir/*.log``; the
    processes run in ``cwd`` (default: ``workdir``).
    """
    link_port = free_port()
    address = f"127.0.0.1:{link_port}"
    credentials = None if insecure else generate_credentials(workdir / "credentials", nodes)
    cli_env = cli_environment(workdir, address, credentials, env)
    if info is not None:
        info.address, info.credentials, info.node_ids = address, credentials, []
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, argv: list[str], *, append: bool = False) -> subprocess.Popen[bytes]:
        procs.append(spawn(argv, workdir / f"{name}.log", cli_env, cwd or workdir, append=append))
        return procs[-1]

    nodes_started: dict[int, tuple[int, int]] = {}  # pid -> (node index, starts so far)

    def start_node(i: int, tries: int = 0) -> None:
        journal = workdir / "journals" / f"node-{i}.jsonl"
        node_config = f'partition-id={i} num-partitions={nodes} privfed-journal="{journal}"'
        argv = supernode_argv(i, address, node_config, credentials)
        proc = start(f"supernode-{i}", argv, append=tries > 0)
        nodes_started[proc.pid] = (i, tries + 1)

    def restart(dead: subprocess.Popen[bytes]) -> bool:
        """A SuperNode that exited at start is started again on another port, a few times:
        the free port it was given can be taken by another process before it binds it."""
        i, tries = nodes_started.get(dead.pid, (-1, _NODE_START_TRIES))
        if tries >= _NODE_START_TRIES:
            return False
        # Its group goes with it: _stop only stops what is still in procs.
        _signal(dead.pid, signal.SIGKILL, group=True)
        procs.remove(dead)
        start_node(i, tries)
        return True

    try:
        link = start("superlink", superlink_argv(link_port, workdir / "superlink.db", credentials))
        _wait_port(link_port, startup_timeout, link)
        node_ids: list[int] = []
        if credentials is not None:
            node_ids = [register_node(CONNECTION, cli_env, key.public) for key in credentials.nodes]
        for i in range(nodes):
            start_node(i)
        try:
            node_ids = _wait_online(
                CONNECTION,
                cli_env,
                expected=nodes,
                node_ids=node_ids,
                timeout=startup_timeout,
                procs=procs,
                restart=restart,
            )
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc} (see {workdir}/*.log)") from None
        if info is not None:
            info.node_ids = node_ids
        yield CONNECTION, cli_env, procs
    finally:
        _stop(list(reversed(procs)), orphans=_subreaper, report=report)


def run_app(
    app: Path,
    connection: str,
    env: dict[str, str],
    run_config: str,
    *,
    timeout: float,
    log: Path,
) -> int:
    """``flwr run APP CONNECTION --run-config ... --stream``; its exit status.

    That is Flower's: 0 even when the ServerApp failed (see :func:`read_outcome`).
    """
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
    finally:
        if proc.poll() is None:
            _stop([proc], grace=2.0)


def run_status(log_text: str, connection: str, env: dict[str, str]) -> str | None:
    """The SuperLink's status of the run ``log_text`` started (``finished:failed`` ...).

    ``None`` when the log names no run or ``flwr ls`` does not answer.
    """
    match = _RUN_ID.search(_ANSI.sub("", log_text))
    if match is None:
        return None
    runs = _flwr(env, "ls", connection, "--run-id", match.group(1)).get("runs")
    try:
        return str(runs[0]["status"])  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return None


def _continued(first: str, rest: list[str]) -> str:
    """``first`` and the lines of the same message after it (up to a blank or a log line)."""
    message = [first.strip()]
    for line in rest:
        if not line.strip() or _LOG_LEVEL.match(line):
            break
        message.append(line.strip())
    return " ".join(part for part in message if part)


def _exception_line(lines: list[str]) -> str | None:
    """The exception (``Type: message``) that ends the last traceback in ``lines``."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if not starts:
        return None
    after = lines[starts[-1] + 1 :]
    for i, line in enumerate(after):
        if line.strip() and not line[0].isspace():  # the first line that is not a frame
            return _continued(line, after[i + 1 :])
    return None


def read_outcome(log_text: str) -> RunOutcome:
    """The job's summary lines and, if the ServerApp failed, why (in short).

    ``flwr run --stream`` exits 0 even when the ServerApp failed, so this is
    read from its log: Flower logs ``ServerApp raised an exception`` (then a
    traceback, or for a privfed error ``: Type: message`` on the same line),
    then ``Exit Code: <code>`` (100 and up are errors).  The summary lines are
    those starting with ``privfed `` (not the ``privfed: ...`` progress lines).
    """
    lines = _ANSI.sub("", log_text).splitlines()
    results = [line.strip() for line in lines if line.startswith(RESULT_PREFIX)]
    codes = [int(m.group(1)) for line in lines if (m := _EXIT_CODE.search(line))]
    marks = [i for i, line in enumerate(lines) if _FAILURE_MARK.search(line)]
    if not marks and not any(c >= 100 for c in codes):
        return RunOutcome(results, None)
    reason = _exception_line(lines[marks[-1] :] if marks else lines)
    if reason is None and marks:
        tail = _FAILURE_MARK.split(lines[marks[-1]], 1)[-1].lstrip(" :.")
        reason = _continued(tail, lines[marks[-1] + 1 :]) or None
    if reason is None:
        at = next((i for i, line in enumerate(lines) if _EXIT_CODE.search(line)), 0)
        after = [_LOG_LEVEL.sub("", line).strip() for line in lines[at:]]
        reason = " ".join([line for line in after if line][:2]) or "the ServerApp failed"
    code = next((c for c in codes if c >= 100), None)
    if code is not None and f"Exit Code: {code}" not in reason:
        reason = f"{reason} (Flower exit code {code})"
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 3] + "..."
    return RunOutcome(results, reason)


def _on_signal(signum: int, frame: FrameType | None) -> NoReturn:
    """First signal: raise :class:`Interrupted`; later ones are ignored (we are stopping)."""
    for sig in _HANDLED_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` and exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def _writable(path: Path) -> str | None:
    """Why ``path`` cannot be a folder this script writes to; ``None`` if it can."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None


def _fresh_log_dir(root: Path) -> Path:
    """``root/<UTC timestamp>`` that does not exist yet."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, n = root / stamp, 1
    while candidate.exists():
        n += 1
        candidate = root / f"{stamp}-{n}"
    return candidate


def _parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, str]:
    """The arguments and the run config to submit; bad input exits 2 with one line."""
    parser = _Parser(
        prog="flower_deploy.py",
        description=(__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument("--nodes", type=int, default=3, help="SuperNodes to start (default 3)")
    parser.add_argument("--app", type=Path, default=DEFAULT_APP, help="Flower app folder")
    parser.add_argument(
        "--run-config",
        default="",
        help="flwr run --run-config overrides ('k=v k2=\"s\"'); num-clients is set to --nodes",
    )
    parser.add_argument(
        "--run-dir", type=Path, default=None, help="Output folder of the job (its output-dir)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="Run timeout (s)")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="Debugging only: no TLS and no SuperNode authentication (default: both on)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help=f"Logs, credentials, SuperLink state (default: {DEFAULT_LOG_ROOT}/<UTC timestamp>)",
    )
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error(f"--nodes must be at least 1, got {args.nodes}")
    if not args.timeout > 0:
        parser.error(f"--timeout must be positive, got {args.timeout}")
    if not (args.app / "pyproject.toml").is_file():
        parser.error(f"--app {args.app}: no Flower app there (no pyproject.toml)")
    for flag, folder in (("--run-dir", args.run_dir), ("--workdir", args.workdir)):
        if folder is not None and (why := _writable(folder.resolve())) is not None:
            parser.error(f"{flag} {folder}: {why}")
    if args.workdir is None and (why := _writable(DEFAULT_LOG_ROOT.resolve())) is not None:
        parser.error(f"cannot keep the logs in {DEFAULT_LOG_ROOT}: {why}; pass --workdir")
    overrides = args.run_config.strip()
    clients = re.findall(r"(?:^|\s)num-clients\s*=\s*(\S+)", overrides)
    if any(value != str(args.nodes) for value in clients):
        parser.error(f"--run-config sets num-clients={clients[-1]} but --nodes is {args.nodes}")
    if args.run_dir is not None:
        if re.search(r"(?:^|\s)output-dir\s*=", overrides):
            parser.error("give the output folder once: --run-dir or output-dir in --run-config")
        overrides = f'{overrides} output-dir="{args.run_dir.resolve()}"'.strip()
    if not clients:
        overrides = f"{overrides} num-clients={args.nodes}".strip()
    return args, overrides


def _say(line: str) -> None:
    print(line, flush=True)


def _become_subreaper() -> None:
    """Linux: orphans of our descendants are re-parented here, so none escapes the stop."""
    global _subreaper
    if not sys.platform.startswith("linux"):  # pragma: no cover
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_child_subreaper = 36
        _subreaper = libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run the app on a loopback deployment; the exit status."""
    args, overrides = _parse(argv)
    previous = {sig: signal.signal(sig, _on_signal) for sig in _HANDLED_SIGNALS}
    report = StopReport()
    workdir: Path | None = None
    try:
        workdir = (args.workdir or _fresh_log_dir(DEFAULT_LOG_ROOT)).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        _become_subreaper()
        log_path = workdir / "flwr-run.log"
        start = time.perf_counter()
        security = "insecure" if args.insecure else "TLS, SuperNode authentication"
        _say(
            f"[deploy] starting 1 SuperLink + {args.nodes} SuperNodes ({security}); "
            f"logs in {workdir}"
        )
        if args.insecure:
            print(INSECURE_WARNING, file=sys.stderr, flush=True)
        with deployment(
            args.nodes,
            workdir=workdir,
            cwd=Path.cwd(),
            report=report,
            insecure=args.insecure,
        ) as (connection, env, _):
            _say(f"[deploy] up after {time.perf_counter() - start:.1f} s; flwr run {args.app}")
            _say(f"[deploy] run config: {shlex.quote(overrides)}")
            flwr_status = run_app(
                args.app.resolve(),
                connection,
                env,
                overrides,
                timeout=args.timeout,
                log=log_path,
            )
            log_text = log_path.read_text(errors="replace")
            status = run_status(log_text, connection, env)
            elapsed = time.perf_counter() - start
            _say(f"[deploy] flwr run exited {flwr_status} after {elapsed:.1f} s")
    except Interrupted as exc:
        where = f"; logs in {workdir}" if workdir is not None else ""
        _say(
            f"[deploy] interrupted by {exc}; all processes stopped ({report.stopped})"
            + (f", {len(report.left)} left: {report.left}" if report.left else "")
            + where
        )
        return 128 + exc.signum
    except subprocess.TimeoutExpired:
        _say(
            f"[deploy] flwr run timed out after {args.timeout:g} s; all processes stopped "
            f"({report.stopped}); full log: {log_path}"
        )
        return 1
    except (RuntimeError, TimeoutError, OSError) as exc:
        _say(f"[deploy] could not start the deployment: {exc}; logs in {workdir}")
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _say(
        f"[deploy] all processes stopped ({report.stopped})"
        + (f"; could not stop {report.left}" if report.left else "")
    )
    outcome = read_outcome(log_text)
    failure = outcome.failure
    if failure is None and flwr_status != 0:
        last = [line.strip() for line in _ANSI.sub("", log_text).splitlines() if line.strip()]
        failure = f"flwr run exited with status {flwr_status}" + (
            f": {last[-1][:_REASON_CHARS]}" if last else ""
        )
    if failure is None and status is not None and status.endswith((":failed", ":stopped")):
        failure = f"the SuperLink reports the run as {status}"
    for line in outcome.results:
        _say(line)
    if failure is not None:
        _say(f"[deploy] the run failed: {failure}")
        _say(f"[deploy] full log: {log_path}; all logs in {workdir}")
        return 1
    if not outcome.results:
        _say("[deploy] the ServerApp printed no privfed result line")
    _say(f"[deploy] run finished; logs in {workdir}")
    return 0 if not report.left else 1


if __name__ == "__main__":
    raise SystemExit(main())
