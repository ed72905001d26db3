"""``scripts/flower_deploy.py``: what it reports, where it keeps the logs, how it stops.

Most tests need no Flower job: the script is loaded as a module (as in
``test_deployment.py``) and its log reading, process stopping and ``main``
(with the deployment replaced by a stand-in) are called directly.  The slow
tests start the real script (a SuperLink and SuperNodes on 127.0.0.1, with TLS
and SuperNode authentication, the default), each bounded by timeouts: a failing
run must exit 1 with the ServerApp's error in one line, SIGINT (Ctrl-C) or
SIGTERM must stop every process, print no traceback and exit 128 + the signal,
and the SuperLink must refuse a SuperNode whose key is not registered and any
plaintext client.  The fast tests check the generated TLS material and keys.
Leftover processes are found by a marker in their environment, which every
process the script starts inherits.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
import re
import signal
import socket
import ssl
import stat
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from flower_helpers import deploy_module as _deploy_module
from flower_helpers import free_port
from flower_helpers import tagged_processes as _tagged

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "flower_deploy.py"
_ESC = "\x1b"

SUCCESS_LOG = f"""Using SuperLink: privfed-loopback (127.0.0.1:40891)
Successfully started run 9385724828210234830
{_ESC}[92mINFO {_ESC}[0m:      Starting logstream for run_id `9385724828210234830`
{_ESC}[92mINFO {_ESC}[0m:      Start `flwr-serverapp` process
privfed: job 'latent'
privfed: 3 of 3 nodes connected
privfed latent job over Flower: epsilon=10, accuracy on synthetic data 0.8123; artefacts in out
{_ESC}[92mINFO {_ESC}[0m:
"""

# Flower 1.42's log of a ServerApp that raised (a traceback) ...
TRACEBACK_LOG = f"""Using SuperLink: privfed-loopback (127.0.0.1:36533)
Successfully started run 12923094849849206855
{_ESC}[92mINFO {_ESC}[0m:      Start `flwr-serverapp` process
{_ESC}[91mERROR {_ESC}[0m:     ServerApp raised an exception
Traceback (most recent call last):
  File "/x/flwr/superlink/runtime/run_serverapp.py", line 221, in run_serverapp
    context = run_(
              ^^^^^
  File "/x/privfed/flower/apps.py", line 43, in _job
    raise ParameterError("job", f"one of {{JOBS}}", job)
privfed.errors.ParameterError: parameter 'job' must be one of ('latent', 'factory', 'sum'); \
got 'bogus'
{_ESC}[91mERROR {_ESC}[0m:     Exit Code: 201

An unhandled exception occurred in the ServerApp.

For more information, visit: <https://flower.ai/docs/framework/1.42/en/ref-exit-codes/201.html>
"""

# ... and of a privfed error, which privfed's ServerApp has Flower log as one line.
ONE_LINE_LOG = f"""Successfully started run 16399553764134754762
{_ESC}[91mERROR {_ESC}[0m:     ServerApp raised an exception: ProtocolAbort: 2 of 10 nodes \
connected; run with num-clients=2
{_ESC}[91mERROR {_ESC}[0m:     Exit Code: 201

An unhandled exception occurred in the ServerApp.
"""


@pytest.fixture
def deploy() -> ModuleType:
    """The script, loaded as a module."""
    return _deploy_module()


# --- the log of `flwr run --stream` ------------------------------------------------------


def test_result_lines_are_the_jobs_summary(deploy: ModuleType) -> None:
    outcome = deploy.read_outcome(SUCCESS_LOG)
    assert outcome.failure is None
    # The summary line, not the "privfed: ..." progress lines.
    assert outcome.results == [
        "privfed latent job over Flower: epsilon=10, accuracy on synthetic data 0.8123; "
        "artefacts in out"
    ]


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (
            TRACEBACK_LOG,
            "privfed.errors.ParameterError: parameter 'job' must be one of "
            "('latent', 'factory', 'sum'); got 'bogus' (Flower exit code 201)",
        ),
        (
            ONE_LINE_LOG,
            "ProtocolAbort: 2 of 10 nodes connected; run with num-clients=2 (Flower exit code 201)",
        ),
        (
            "Successfully started run 1\nERROR :     Exit Code: 203\n\nThe run was rejected.\n",
            "Exit Code: 203 The run was rejected.",
        ),
    ],
    ids=["traceback", "one-line", "exit-code-only"],
)
def test_failure_is_found_and_said_in_one_line(deploy: ModuleType, log: str, reason: str) -> None:
    outcome = deploy.read_outcome(log)
    assert outcome.results == []
    assert outcome.failure == reason


def test_a_long_traceback_is_cut_short(deploy: ModuleType) -> None:
    frames = '  File "/x/y.py", line 1, in f\n    f()\n' * 200
    log = (
        "ERROR :     ServerApp raised an exception\nTraceback (most recent call last):\n"
        f"{frames}RuntimeError: {'boom ' * 200}\nERROR :     Exit Code: 201\n"
    )
    failure = deploy.read_outcome(log).failure
    assert failure is not None and failure.startswith("RuntimeError: boom boom")
    assert len(failure) <= 500 and "\n" not in failure


# --- main(), with the deployment replaced by a stand-in -------------------------------


def _fake_deployment(
    deploy: ModuleType, monkeypatch: pytest.MonkeyPatch, log_text: str, status: int = 0
) -> list[dict[str, Any]]:
    """Replace the deployment; the keyword arguments of each call are recorded."""
    calls: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def deployment(nodes: int, **kwargs: Any) -> Iterator[tuple[str, dict[str, str], list[Any]]]:
        calls.append(kwargs)
        try:
            yield "fake", {}, []
        finally:
            kwargs["report"].stopped = 1 + nodes

    def run_app(app: Path, connection: str, env: Any, config: str, **kwargs: Any) -> int:
        kwargs["log"].write_text(log_text)
        return status

    monkeypatch.setattr(deploy, "deployment", deployment)
    monkeypatch.setattr(deploy, "run_app", run_app)
    monkeypatch.setattr(deploy, "run_status", lambda *args: None)
    monkeypatch.setattr(deploy, "_become_subreaper", lambda: None)
    return calls


def test_success_prints_the_result_and_keeps_the_logs(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    _fake_deployment(deploy, monkeypatch, SUCCESS_LOG)
    assert deploy.main(["--nodes", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    logs = sorted((tmp_path / "runs" / "flower-deploy-logs").iterdir())
    assert len(logs) == 1 and (logs[0] / "flwr-run.log").read_text() == SUCCESS_LOG
    assert f"logs in {logs[0]}" in lines[0]
    assert "[deploy] all processes stopped (4)" in lines
    assert deploy.read_outcome(SUCCESS_LOG).results[0] in lines
    assert lines[-1] == f"[deploy] run finished; logs in {logs[0]}"


def test_workdir_overrides_where_the_logs_go(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    _fake_deployment(deploy, monkeypatch, SUCCESS_LOG)
    assert deploy.main(["--nodes", "2", "--workdir", "mine"]) == 0
    assert (tmp_path / "mine" / "flwr-run.log").is_file()
    assert not (tmp_path / "runs").exists()
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"logs in {tmp_path / 'mine'}")


def test_a_failed_serverapp_fails_the_script_briefly(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    long_log = TRACEBACK_LOG.replace("Traceback", "INFO :  filler\n" * 500 + "Traceback")
    _fake_deployment(deploy, monkeypatch, long_log)  # flwr run exits 0 all the same
    assert deploy.main(["--nodes", "1", "--workdir", "w"]) == 1
    out = capsys.readouterr().out
    assert len(out) < 1500 and "filler" not in out and "Traceback" not in out
    lines = out.splitlines()
    assert lines[-2] == (
        "[deploy] the run failed: privfed.errors.ParameterError: parameter 'job' must be one "
        "of ('latent', 'factory', 'sum'); got 'bogus' (Flower exit code 201)"
    )
    assert str(tmp_path / "w" / "flwr-run.log") in lines[-1]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--run-config", "num-clients=10"], "sets num-clients=10 but --nodes is 2"),
        # Flower refuses a run config that sets a key twice.
        (["--run-dir", "a", "--run-config", 'output-dir="b"'], "--run-dir or output-dir"),
    ],
    ids=["num-clients", "output-dir-twice"],
)
def test_run_config_conflicts_are_refused(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    error: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        deploy.main(["--nodes", "2", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and error in err
    assert list(tmp_path.iterdir()) == []


# --- bad arguments: one line, exit 2, nothing started ----------------------------------


@pytest.mark.parametrize(
    "args",
    [["--nodes", "0"], ["--app", "no-such-app"], ["--run-dir", "a-file/out"], ["--nodes", "x"]],
    ids=["nodes-0", "missing-app", "unwritable-run-dir", "nodes-not-int"],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "a-file").write_text("")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # nothing was started
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


# --- TLS material and SuperNode keys ------------------------------------------------------


def _pump_handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, host: str) -> None:
    """A TLS handshake in memory between the two contexts; raises what the client raises."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=host)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        pending = False
        for side, out, peer in ((client, c_out, s_in), (server, s_out, c_in)):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pending = True
            peer.write(out.read())
        if not pending:
            return
    raise AssertionError("the handshake did not finish")


def _client_context(ca: Path) -> ssl.SSLContext:
    """What a TLS client that trusts ``ca`` does (strict X.509, as Python 3.13's default)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.verify_flags |= getattr(ssl, "VERIFY_X509_STRICT", 0)
    return ctx


def test_the_ca_signs_a_server_certificate_for_loopback_only(
    deploy: ModuleType, tmp_path: Path
) -> None:
    creds = deploy.generate_credentials(tmp_path / "credentials", 2)
    ca = x509.load_pem_x509_certificate(creds.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(creds.server_cert.read_bytes())
    server.verify_directly_issued_by(ca)  # raises unless the CA's key signed it
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    # The key file is the certificate's key.
    key = serialization.load_pem_private_key(creds.server_key.read_bytes(), None)
    assert key.public_key() == server.public_key()

    # A client that trusts the CA accepts the certificate for 127.0.0.1 and localhost ...
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(creds.server_cert, creds.server_key)
    for host in ("127.0.0.1", "localhost"):
        _pump_handshake(server_ctx, _client_context(creds.ca_cert), host)
    # ... for no other name, and a client that trusts another CA refuses it.
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _pump_handshake(server_ctx, _client_context(creds.ca_cert), "example.org")
    other = deploy.generate_credentials(tmp_path / "other", 0)
    with pytest.raises(ssl.SSLCertVerificationError):
        _pump_handshake(server_ctx, _client_context(other.ca_cert), "127.0.0.1")


def test_private_keys_are_owner_only_and_the_ca_key_is_never_written(
    deploy: ModuleType, tmp_path: Path
) -> None:
    folder = tmp_path / "credentials"
    folder.mkdir()
    (folder / "server.key").write_text("an earlier start's key")
    (folder / "server.key").chmod(0o644)
    old_umask = os.umask(0)  # the modes do not depend on the umask
    try:
        creds = deploy.generate_credentials(folder, 3)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    private = [creds.server_key, *(key.private for key in creds.nodes)]
    assert len(private) == 4
    for path in private:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert "earlier" not in creds.server_key.read_text()  # replaced, not kept
    # Only those files hold a private key: the CA's is gone once it has signed.
    holders = sorted(p for p in folder.iterdir() if b"PRIVATE KEY" in p.read_bytes())
    assert holders == sorted(private)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["ca.pem", "server.pem", "server.key"]
        + [f"node-{i}.{ext}" for i in range(3) for ext in ("key", "pub")]
    )


def test_node_keys_are_in_the_formats_flower_reads(deploy: ModuleType, tmp_path: Path) -> None:
    from flwr.cli.supernode.register import try_load_public_key
    from flwr.supercore.primitives.asymmetric import bytes_to_public_key, uses_nist_ec_curve

    creds = deploy.generate_credentials(tmp_path / "credentials", 2)
    seen = set()
    for key in creds.nodes:
        # What flower-supernode --auth-supernode-private-key reads ...
        private = serialization.load_ssh_private_key(key.private.read_bytes(), None)
        assert isinstance(private, ec.EllipticCurvePrivateKey)
        assert isinstance(private.curve, ec.SECP384R1)
        # ... and what flwr supernode register sends: the same key, on a NIST curve.
        registered = bytes_to_public_key(try_load_public_key(key.public))
        assert uses_nist_ec_curve(registered) and registered == private.public_key()
        seen.add(key.public.read_bytes())
    assert len(seen) == 2  # one key pair per node


def test_tls_and_node_auth_are_the_default_and_insecure_warns(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    calls = _fake_deployment(deploy, monkeypatch, SUCCESS_LOG)
    assert deploy.main(["--nodes", "2", "--workdir", "a"]) == 0
    default = capsys.readouterr()
    assert calls[-1]["insecure"] is False
    assert "(TLS, SuperNode authentication)" in default.out.splitlines()[0]
    assert "WARNING" not in default.out + default.err

    assert deploy.main(["--nodes", "2", "--workdir", "b", "--insecure"]) == 0
    opted_out = capsys.readouterr()
    assert calls[-1]["insecure"] is True
    assert "(insecure)" in opted_out.out.splitlines()[0]
    assert opted_out.err.splitlines() == [deploy.INSECURE_WARNING]
    assert "WARNING" not in opted_out.out


# --- stopping processes -----------------------------------------------------------------


needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")

# A process that starts a child in a session of its own (as a SuperLink starts its
# SuperExec), which starts a grandchild, and then waits.
_TREE = """
import subprocess, sys, time
if sys.argv[1:] == ["leaf"]:
    time.sleep(600)
elif sys.argv[1:] == ["middle"]:
    subprocess.Popen([sys.executable, __file__, "leaf"]); time.sleep(600)
else:
    subprocess.Popen([sys.executable, __file__, "middle"], start_new_session=True)
    time.sleep(600)
"""


@needs_proc
def test_stop_ends_detached_descendants_and_counts_them(deploy: ModuleType, tmp_path: Path) -> None:
    tag = f"PRIVFED_DEPLOY_TEST={uuid.uuid4().hex}"
    script = tmp_path / "tree.py"
    script.write_text(_TREE)
    env = {**os.environ, "PRIVFED_DEPLOY_TEST": tag.split("=")[1]}
    root = subprocess.Popen([sys.executable, str(script)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(_tagged(tag)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_tagged(tag)) == 3
        report = deploy._stop([root], grace=5.0)
        assert report.stopped == 3 and report.left == []
        assert _tagged(tag) == []
    finally:
        for pid, _ in _tagged(tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        root.kill()
        root.wait()


def _start_script(tmp_path: Path, tag: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "stdout.txt"
    env = {**os.environ, "PRIVFED_DEPLOY_TEST": tag.split("=")[1]}
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), *args],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    return proc, out


def _cleanup(proc: subprocess.Popen[bytes], tag: str) -> None:
    """Whatever the test's outcome: nothing it started keeps running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid, _ in _tagged(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_everything_without_a_traceback(tmp_path: Path, signum: int) -> None:
    tag = f"PRIVFED_DEPLOY_TEST={uuid.uuid4().hex}"
    # The latent job takes far longer than this test waits: it is interrupted mid-run.
    proc, out = _start_script(
        tmp_path, tag, "--nodes", "2", "--workdir", "logs", "--run-dir", "out", "--timeout", "120"
    )
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and proc.poll() is None:
            if any("flwr-serverapp" in command for _, command in _tagged(tag)):
                break
            time.sleep(0.2)
        running = [command for _, command in _tagged(tag)]
        assert proc.poll() is None, out.read_text()
        assert any("flower-supernode" in c for c in running), running
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == 128 + signum
        text = out.read_text()
        time.sleep(0.5)
        assert _tagged(tag) == []  # no SuperLink, SuperNode, SuperExec, ServerApp, ClientApp
    finally:
        _cleanup(proc, tag)
    assert "Traceback" not in text, text
    last = text.strip().splitlines()[-1]
    name = signal.Signals(signum).name
    assert re.fullmatch(
        rf"\[deploy\] interrupted by {name}; all processes stopped \((\d+)\); logs in .*", last
    ), text
    # At least the SuperLink, its SuperExec and the two SuperNodes.
    assert int(re.findall(r"\((\d+)\)", last)[0]) >= 4
    assert last.endswith(f"logs in {tmp_path / 'logs'}")
    assert (tmp_path / "logs" / "superlink.log").stat().st_size > 0


@pytest.mark.slow
@needs_proc
def test_a_failing_job_on_real_processes(tmp_path: Path) -> None:
    tag = f"PRIVFED_DEPLOY_TEST={uuid.uuid4().hex}"
    proc, out = _start_script(
        tmp_path, tag, "--nodes", "1", "--timeout", "60", "--run-config", 'job="no-such-job"'
    )
    try:
        assert proc.wait(timeout=120) == 1
        text = out.read_text()
        time.sleep(0.5)
        assert _tagged(tag) == []
    finally:
        _cleanup(proc, tag)
    lines = text.strip().splitlines()
    (logs,) = (tmp_path / "runs" / "flower-deploy-logs").iterdir()
    assert lines[0].endswith(f"logs in {logs}")
    assert re.fullmatch(r"\[deploy\] all processes stopped \(\d+\)", lines[-3]), text
    assert lines[-2].startswith("[deploy] the run failed: ") and "no-such-job" in lines[-2]
    assert lines[-1].startswith(f"[deploy] full log: {logs / 'flwr-run.log'}")
    assert "no-such-job" in (logs / "flwr-run.log").read_text()
    assert "Traceback" not in text


def _stranger(
    env: dict[str, str], workdir: Path, name: str, address: str, *flags: str
) -> subprocess.Popen[bytes]:
    """A SuperNode the deployment did not start (its log: ``workdir/<name>.log``)."""
    with (workdir / f"{name}.log").open("wb") as log:
        return subprocess.Popen(
            [
                str(Path(sys.executable).parent / "flower-supernode"),
                "--superlink",
                address,
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--max-retries",
                "2",
                "--max-wait-time",
                "20",
                *flags,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
            start_new_session=True,
        )


@pytest.mark.slow
@needs_proc
def test_strangers_and_plaintext_clients_are_refused(deploy: ModuleType, tmp_path: Path) -> None:
    """The SuperLink admits registered SuperNodes over TLS only.

    A SuperNode with a key pair that was never registered, one with no key and
    one speaking plaintext all exit without a node id, and the SuperLink still
    lists just the registered node; a plaintext HTTP request and an ``insecure``
    ``flwr`` connection get no answer; a client that trusts another CA refuses
    the SuperLink's certificate.
    """
    tag = f"PRIVFED_DEPLOY_TEST={uuid.uuid4().hex}"
    workdir = tmp_path / "deploy"
    info = deploy.DeploymentInfo()
    strangers: list[subprocess.Popen[bytes]] = []
    try:
        with deploy.deployment(
            1, workdir=workdir, env={"PRIVFED_DEPLOY_TEST": tag.split("=")[1]}, info=info
        ) as (connection, env, _):
            creds = info.credentials
            assert creds is not None and len(info.node_ids) == 1
            config = tomllib.loads((Path(env["FLWR_HOME"]) / "config.toml").read_text())
            channel = config["superlink"][connection]
            assert channel == {"address": info.address, "root-certificates": str(creds.ca_cert)}
            assert "Uvicorn running on https://" in (workdir / "superlink.log").read_text()
            host, port = info.address.split(":")

            rogue = deploy.node_key_pair(tmp_path / "rogue.key", tmp_path / "rogue.pub")
            tls = ("--root-certificates", str(creds.ca_cert))
            strangers += [
                _stranger(env, workdir, "unregistered", info.address, *tls,
                          "--auth-supernode-private-key", str(rogue.private)),
                _stranger(env, workdir, "no-key", info.address, *tls),
                _stranger(env, workdir, "plaintext", info.address, "--insecure"),
            ]  # fmt: skip

            # Plaintext HTTP: the TLS server closes the connection without an answer.
            plain = http.client.HTTPConnection(host, int(port), timeout=10)
            with pytest.raises((http.client.HTTPException, OSError)):
                plain.request("GET", "/")
                plain.getresponse()
            plain.close()
            # The flwr CLI through an insecure connection: no answer either ...
            home = tmp_path / "plain-home"
            home.mkdir()
            (home / "config.toml").write_text(
                f'[superlink]\ndefault = "plain"\n\n[superlink.plain]\n'
                f'address = "{info.address}"\ninsecure = true\n'
            )
            assert deploy.list_nodes("plain", {**env, "FLWR_HOME": str(home)}) is None
            # ... and a TLS client that trusts another CA refuses the certificate.
            other = deploy.generate_credentials(tmp_path / "other", 0)
            for ca, ok in ((creds.ca_cert, True), (other.ca_cert, False)):
                with socket.create_connection((host, int(port)), timeout=10) as sock:
                    context = _client_context(ca)
                    if ok:
                        with context.wrap_socket(sock, server_hostname=host) as tls_sock:
                            der = tls_sock.getpeercert(binary_form=True)
                        assert der == x509.load_pem_x509_certificate(
                            creds.server_cert.read_bytes()
                        ).public_bytes(serialization.Encoding.DER)
                    else:
                        with pytest.raises(ssl.SSLCertVerificationError):
                            context.wrap_socket(sock, server_hostname=host)

            codes = {}
            for proc, name in zip(strangers, ("unregistered", "no-key", "plaintext"), strict=True):
                codes[name] = proc.wait(timeout=120)
            logs = {name: (workdir / f"{name}.log").read_text() for name in codes}
            for name, code in codes.items():
                assert code != 0, (name, logs[name][-2000:])
                assert "SuperNode ID" not in logs[name], (name, logs[name][-2000:])
            # The SuperLink refused the unregistered key itself, and self-registration.
            spki = serialization.load_ssh_public_key(rogue.public.read_bytes()).public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            link_log = (workdir / "superlink.log").read_text()
            refusals = [
                line
                for line in link_log.splitlines()
                if "No SuperNode found with the given public key" in line
            ]
            assert any(spki.decode().splitlines()[1] in line for line in refusals), refusals
            assert "must be registered" in logs["no-key"], logs["no-key"][-2000:]
            nodes = deploy.list_nodes(connection, env)
            assert nodes is not None
            assert [int(str(n["node-id"])) for n in nodes] == info.node_ids
            assert [n["status"] for n in nodes] == ["online"]
    finally:
        for proc in strangers:
            deploy._stop([proc], grace=2.0)
        time.sleep(0.5)
        leaked = _tagged(tag)  # nothing the deployment or the strangers started
        for pid, _ in leaked:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert leaked == []


@pytest.mark.slow
@needs_proc
def test_free_ports_lie_below_the_ephemeral_range_and_are_free(
    deploy: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No outgoing connection's source port can take a port drawn below the ephemeral range."""
    low = deploy._ephemeral_low()
    ports = {deploy.free_port() for _ in range(20)}
    if low - deploy._PORT_FLOOR >= 1000:
        assert all(deploy._PORT_FLOOR <= p < low for p in ports), (low, ports)
        assert len(ports) > 1  # drawn at random: parallel jobs rarely draw the same one
    for port in ports:  # each one binds
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
    # A drawn port that a listener holds is passed over for the next draw.
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    draws = iter([taken, *sorted(ports)])

    class Draws:
        def randrange(self, start: int, stop: int) -> int:
            return next(draws)

    try:
        monkeypatch.setattr(deploy, "_ephemeral_low", lambda: 65536)
        monkeypatch.setattr(deploy.random, "SystemRandom", Draws)
        assert deploy.free_port() == min(ports)
        # A range too small to draw from falls back to a port the kernel hands out.
        monkeypatch.setattr(deploy, "_ephemeral_low", lambda: deploy._PORT_FLOOR + 10)
        fallback = deploy.free_port()
        assert fallback != taken and next(draws) == sorted(ports)[1]  # nothing was drawn
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", fallback))
    finally:
        held.close()


def test_a_supernode_whose_port_was_taken_starts_again_on_another(
    deploy: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A free port can be taken before the SuperNode binds it (parallel jobs on one host).

    The first port the node is given is held by a listening socket of this test: its
    Runtime API fails to start and it exits; the deployment starts it again on another
    port and comes up with every node online.  Without free ports left to try, the
    exit is reported as before.
    """
    tag = uuid.uuid4().hex
    workdir = tmp_path / "deploy"
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([deploy.free_port(), taken.getsockname()[1]])  # the SuperLink's, the node's
    real = deploy.free_port
    monkeypatch.setattr(deploy, "free_port", lambda: next(ports, None) or real())
    info = deploy.DeploymentInfo()
    try:
        env = {"PRIVFED_DEPLOY_TEST": tag}
        with deploy.deployment(1, workdir=workdir, env=env, info=info) as (_, _, procs):
            assert len(info.node_ids) == 1
            nodes = [p for p in procs if p.args[0].endswith("flower-supernode")]
            assert len(nodes) == 1 and nodes[0].poll() is None
            assert str(taken.getsockname()[1]) not in nodes[0].args
            log = (workdir / "supernode-0.log").read_text()
            assert "Runtime HTTP API failed to start" in log  # the first start, kept in the log
    finally:
        taken.close()
    assert not _tagged(f"PRIVFED_DEPLOY_TEST={tag}")
